package dbbench

import (
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTime is CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// threadTime is the calling thread's CPU time. The benchmark's cores are
// shared with other jobs; the time a thread was actually running is what
// its own work took, and wall-clock time would also measure the others.
// The measured goroutine is locked to its thread, so the thread's clock is
// the goroutine's.
func threadTime() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}

// threadClockIsCPU says whether threadTime measures CPU time.
const threadClockIsCPU = true
