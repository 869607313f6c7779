//go:build !wasip1

package main

func wildLog()            { panic("testplugin: only in wasm") }
func wildRequestField()   { panic("testplugin: only in wasm") }
func messagesCode() int32 { panic("testplugin: only in wasm") }
