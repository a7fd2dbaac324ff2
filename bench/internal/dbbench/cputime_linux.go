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

// processTime is the CPU time, user and system, of every thread of the
// process: building a tree spends it in Pebble's background flushes and
// compactions as much as in the writing goroutine.
func processTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
