//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
)

// heldByOther reports whether another process holds Pebble's lock on dir,
// asking the kernel (fcntl F_GETLK, the lock Pebble takes) through a
// read-only descriptor: unlike pebble.LockDirectory, it neither creates nor
// truncates LOCK, so a refusal leaves the store's files exactly as they were.
func heldByOther(dir string) (bool, error) {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != syscall.F_UNLCK, nil
}
