package kvdemo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// lockName is the lock file every kvdemo process takes.
const lockName = "LOCK"

// lockCheckInterval: how often a write re-checks the lock file while the
// directory lock is held (with no directory lock, every write does).
const lockCheckInterval = time.Second

// storeLock keeps a second process from opening a store for writing
// while one has it open. Two processes appending to the same log each
// write at their own offset, over each other's acknowledged records.
//
// The lock that counts is on the store's directory: a lock file can be
// removed while the store is open ("cleaning up a stale lock"), and the
// next process then creates a new one and locks that, but the directory
// cannot be swapped for another while its files are in use: a second
// process opening the store opens the same directory, and its flock
// conflicts.
//
// The lock file is locked too, for kvdemo releases that lock only it. It
// is checked (its identity, dev and inode) before every new log, and on
// writes at least once a second (on every write where the filesystem
// cannot lock directories): if it was removed or replaced, the store
// takes a new one, provided no other process holds it and none wrote to
// the store meanwhile (the log's length is what this process wrote, and
// no file is numbered beyond those it allocated). Otherwise the store
// stops writing (ErrReadOnly) with an error that says why: it cannot
// vouch that its log is its own.
type storeLock struct {
	fs       vfs.FS
	dir      string
	dirLock  io.Closer // nil: the filesystem cannot lock a directory (dirErr says why)
	dirErr   error
	file     io.Closer   // LOCK; nil if it could not be opened (fileErr)
	fileErr  error       // why LOCK is not held (a read-only store)
	held     os.FileInfo // LOCK's identity when locked; nil if the FS cannot tell
	checked  atomic.Int64
	replaced atomic.Int64 // times a removed or replaced LOCK was taken again
}

// isLocked: err says another holder has the lock.
func isLocked(err error) bool { return errors.Is(err, vfs.ErrLocked) || errors.Is(err, ErrLocked) }

// lockStore takes the store's locks. It fails if another process holds
// either, or if it could take neither. A lock file that cannot be opened
// (a read-only store, fileErr) is not an error when the directory is
// locked. readOnly: a missing lock file is not created (no process that
// locks only it can hold it).
func lockStore(fsys vfs.FS, dir string, readOnly bool) (*storeLock, error) {
	l := &storeLock{fs: fsys, dir: dir}
	l.dirLock, l.dirErr = fsys.Lock(dir)
	if isLocked(l.dirErr) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
	}
	if _, err := fsys.Stat(l.path()); readOnly && err != nil {
		l.fileErr = err
	} else {
		l.file, l.fileErr = fsys.Lock(l.path())
	}
	switch {
	case isLocked(l.fileErr):
		l.Close()
		return nil, fmt.Errorf("%w: %s (%s is locked)", ErrLocked, dir, l.path())
	case l.file == nil && l.dirLock == nil:
		return nil, fmt.Errorf("kvdemo: locking %s: %w (and its directory: %v)", dir, l.fileErr, l.dirErr)
	case l.file != nil:
		l.held = identity(l.file)
	}
	l.checked.Store(time.Now().UnixNano())
	return l, nil
}

func (l *storeLock) path() string { return filepath.Join(l.dir, lockName) }

// identity is the file a lock holds, if its FS can say.
func identity(c io.Closer) os.FileInfo {
	if s, ok := c.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := s.Stat(); err == nil {
			return fi
		}
	}
	return nil
}

// intact: LOCK is still the file this process locked (or cannot be
// compared: no identity, or a Stat that failed for another reason than
// the file's absence).
func (l *storeLock) intact() bool {
	if l.file == nil || l.held == nil {
		return true
	}
	cur, err := l.fs.Stat(l.path())
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	return os.SameFile(cur, l.held)
}

// Close releases both locks.
func (l *storeLock) Close() error {
	var err error
	if l.file != nil {
		err = l.file.Close()
	}
	if l.dirLock != nil {
		if e := l.dirLock.Close(); err == nil {
			err = e
		}
	}
	return err
}

// lockIntactLocked returns nil if the store is still this process's to
// write, checking the lock file when due (always with force: before a
// new log). If it was removed or replaced, it is taken again (relock);
// when that fails, the store turns read-only. Called under wmu.
func (db *DB) lockIntactLocked(force bool) error {
	l := db.lock
	if l == nil || l.file == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if !force && l.dirLock != nil && now-l.checked.Load() < int64(lockCheckInterval) {
		return nil
	}
	l.checked.Store(now)
	if l.intact() {
		return nil
	}
	if err := db.relockLocked(); err != nil {
		db.setReadOnly(err)
		return db.readOnlyErr()
	}
	return nil
}

// relockLocked takes a new lock file in the place of one that was removed
// or replaced, once it is sure no other process wrote to the store
// meanwhile.
func (db *DB) relockLocked() error {
	l := db.lock
	lost := fmt.Sprintf("%s was removed or replaced while this process had the store open", l.path())
	f, err := l.fs.Lock(l.path())
	if err != nil {
		if isLocked(err) {
			return fmt.Errorf("%s, and another process holds the new one: it may be writing to the store too. This process stops writing; stop the other process, then reopen the store. Only one process may open a store at a time", lost)
		}
		return fmt.Errorf("%s, and it could not be taken again: %w; this process stops writing, reopen the store", lost, err)
	}
	if err := db.foreignWrites(); err != nil {
		f.Close()
		return fmt.Errorf("%s, and %w. This process stops writing: reopen the store, then run kvdemo check on it", lost, err)
	}
	old := l.file
	l.file, l.held = f, identity(f)
	old.Close()
	l.replaced.Add(1)
	db.opts.Logger.Printf("%s; a new one is locked (no other process wrote to the store meanwhile)", lost)
	return nil
}

// foreignWrites finds what another process writing to the store would
// have left: a log longer than this process wrote it, or a file numbered
// beyond every number this process allocated.
func (db *DB) foreignWrites() error {
	entries, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return fmt.Errorf("the store's directory could not be listed to make sure no other process wrote to it: %w", err)
	}
	next := db.nextFile.Load() // after the listing: a number this process allocates later is above it
	for _, e := range entries {
		if id, _, ok := parseFileName(e.Name()); ok && id >= next {
			return fmt.Errorf("%s appeared, numbered beyond every file this process made: another process wrote to the store", e.Name())
		}
	}
	if w := db.mem.wal(); w != nil {
		w.ioMu.Lock() // no write of this process in flight
		fi, err := w.f.Stat()
		written := w.written.Load()
		w.ioMu.Unlock()
		if err != nil {
			return fmt.Errorf("log %06d could not be checked: %w", w.id, err)
		}
		if fi.Size() != written {
			return fmt.Errorf("log %06d holds %d bytes, this process wrote %d: another process wrote to it", w.id, fi.Size(), written)
		}
	}
	return nil
}
