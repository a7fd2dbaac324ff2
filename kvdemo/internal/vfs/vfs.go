// Package vfs is the filesystem seam of kvdemo: every file the store
// writes or reads (logs, tables, filters, the manifest) goes through an FS,
// so that tests can put a fault-injecting one (kvdemo/internal/errorfs) in
// its place. It is modelled on Pebble's vfs package, cut down to the calls
// a store of whole-file writes and append-only logs makes.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	Sync() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

// FS is a filesystem.
type FS interface {
	// Create makes a new empty file for writing; it fails if name exists.
	Create(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenAppend opens an existing file for appending.
	OpenAppend(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	// Rename replaces newname with oldname atomically.
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	ReadDir(dir string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive lock on name, a directory or a file
	// (created if missing), held until the Closer is closed or the
	// process ends. Another holder's lock is ErrLocked.
	Lock(name string) (io.Closer, error)
}

// ErrLocked: Lock found the file locked by another holder.
var ErrLocked = errors.New("vfs: file is locked")

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
}
func (osFS) Open(name string) (File, error) { return os.Open(name) }
func (osFS) OpenAppend(name string) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
}
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Lock uses flock(2): the kernel drops it when the process dies, so a
// crash never leaves a store locked. flock needs only a descriptor, so a
// directory, or a file that cannot be opened for writing (on a read-only
// filesystem), is opened for reading.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		ro, rerr := os.Open(name)
		if rerr != nil {
			return nil, err
		}
		f = ro
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, fmt.Errorf("locking %s: %w", name, err)
	}
	return f, nil
}

// ReadFile reads a whole file through fs.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, st.Size())
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// WriteFile creates name (which must not exist), writes data with
// write(2) and fsyncs it. On any failure it removes what it created, so a
// full disk is not left fuller by a partial file.
func WriteFile(fs FS, name string, data []byte) (err error) {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fs.Remove(name)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
