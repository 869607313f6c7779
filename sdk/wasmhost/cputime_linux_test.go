package wasmhost

import (
	"syscall"
	"time"
)

// threadCPUTime is the calling thread's CPU time (user and system), for
// benchmarks on a machine other processes load: unlike wall time, it does
// not count the time the thread waited for a CPU.
func threadCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
