package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// errWrite is what every mutating call of readOnlyFS returns: the store
// belongs to another process, or to nobody, and inspecting it must leave every
// byte of its directory as it was.
var errWrite = errors.New("lsmcuckoo: refused a write into the store (inspect is read-only)")

// readOnlyFS is a vfs.FS over the real file system that refuses every call
// that could create, change or remove a file, and whose Lock takes no lock:
// pebble.Open locks the directory even with Options.ReadOnly, which would
// create LOCK in a store that lacks one and fail on a store its owner holds.
// Files are opened for reading only, so a write through one fails at the
// operating system as well.
type readOnlyFS struct {
	vfs.FS
}

// newReadOnlyFS is a variable for the tests to put a failing file system
// beneath the read-only one.
var newReadOnlyFS = func() vfs.FS { return readOnlyFS{FS: vfs.Default} }

func (readOnlyFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("create %s: %w", name, errWrite)
}

func (readOnlyFS) Link(oldname, newname string) error {
	return fmt.Errorf("link %s: %w", newname, errWrite)
}

func (readOnlyFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, fmt.Errorf("open %s for writing: %w", name, errWrite)
}

func (readOnlyFS) Remove(name string) error {
	return fmt.Errorf("remove %s: %w", name, errWrite)
}

func (readOnlyFS) RemoveAll(name string) error {
	return fmt.Errorf("remove %s: %w", name, errWrite)
}

func (readOnlyFS) Rename(oldname, newname string) error {
	return fmt.Errorf("rename %s: %w", oldname, errWrite)
}

func (readOnlyFS) ReuseForWrite(oldname, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("reuse %s: %w", oldname, errWrite)
}

// List leaves out what HiddenFromOpen names.
func (fs readOnlyFS) List(dir string) ([]string, error) {
	names, err := fs.FS.List(dir)
	if err != nil {
		return nil, err
	}
	return KeepVisible(names), nil
}

// KeepVisible drops from a store's file names those a read-only open must
// not see, in place.
//
// The write-ahead logs (NNNNNN.log) are left out, so that the read-only
// open replays none. Their keys are in no table and have no filter, so the
// report needs nothing from them; and while the owner rotates its log, the
// older log's last write may not be on disk yet beside the new one, which
// Pebble takes for corruption and refuses to open.
//
// The OPTIONS files are left out too: Pebble reads the newest one whole
// into memory to check it, and a damaged one can be any size. The comparer
// and merger names are taken from it by Names, a line at a time, and the
// manifest's comparer name prevails.
func KeepVisible(names []string) []string {
	kept := names[:0]
	for _, n := range names {
		if !strings.HasSuffix(n, ".log") && !strings.HasPrefix(n, "OPTIONS-") {
			kept = append(kept, n)
		}
	}
	return kept
}

// ErrWrite is what every mutating call of a read-only file system returns.
var ErrWrite = errWrite

// MkdirAll succeeds only for a directory that exists already: Pebble calls
// it for the store's directory, and creating one is a write.
func (fs readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	st, err := fs.FS.Stat(dir)
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, errWrite)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// Lock takes no lock and creates no file: the owner, if any, keeps its lock,
// and nothing this process does needs one.
func (readOnlyFS) Lock(string) (io.Closer, error) { return noopCloser{}, nil }

func (readOnlyFS) Unwrap() vfs.FS { return nil }

type noopCloser struct{}

func (noopCloser) Close() error { return nil }
