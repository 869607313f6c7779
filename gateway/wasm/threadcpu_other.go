//go:build !linux

package wasm

func gettid() int { return 0 }

// threadCPU is unavailable: the watchdog falls back to wall-clock deadlines.
func threadCPU(int32) (int64, bool) { return 0, false }
