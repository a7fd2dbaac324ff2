//go:build !linux

package dbbench

import "time"

var epoch = time.Now()

// threadTime falls back to wall-clock time where the thread's CPU clock is
// not at hand.
func threadTime() time.Duration { return time.Since(epoch) }

const threadClockIsCPU = false

// processTime falls back to wall-clock time where the process's CPU time
// is not at hand.
func processTime() time.Duration { return time.Since(epoch) }
