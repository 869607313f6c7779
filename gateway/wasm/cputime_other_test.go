//go:build !linux

package wasm

import "time"

func threadCPUTime() (time.Duration, bool) { return 0, false }
