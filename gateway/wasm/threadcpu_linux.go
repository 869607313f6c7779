package wasm

import (
	"syscall"
	"unsafe"
)

func gettid() int { return syscall.Gettid() }

// threadCPU returns the CPU time in nanoseconds that thread tid of this
// process has used (clock_gettime on the thread's CPU clock, as
// pthread_getcpuclockid builds it).
func threadCPU(tid int32) (int64, bool) {
	if tid == 0 {
		return 0, false
	}
	clock := int32(^tid)<<3 | 6 // CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
