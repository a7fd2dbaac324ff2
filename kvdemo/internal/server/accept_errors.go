package server

import (
	"errors"
	"syscall"
)

// outOfResources reports whether accept failed for want of file
// descriptors (the process's, EMFILE, or the whole system's, ENFILE) or of
// kernel memory (ENOBUFS, ENOMEM). These pass as connections close, and a
// flood of connections can cause any of them: the server waits instead of
// exiting.
func outOfResources(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
