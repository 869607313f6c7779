//go:build !wasip1

package main

func wildLog()          { panic("faultplugin: only in wasm") }
func wildRequestField() { panic("faultplugin: only in wasm") }
