//go:build !linux

package wasmhost

import "time"

func threadCPUTime() (time.Duration, bool) { return 0, false }
