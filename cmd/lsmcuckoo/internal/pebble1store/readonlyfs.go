package pebble1store

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// readOnlyFS is Pebble v1's vfs.FS over the real file system that refuses
// every call that could create, change or remove a file, and whose Lock
// takes no lock, as package pebblestore's is for Pebble v2: Pebble v1's
// Open locks the directory even with Options.ReadOnly.
//
// Pebble v1's Open also refuses a store whose manifest names a table that
// is missing or of another size than recorded, where Pebble v2 reports it
// only when the table is read. So that inspect still lists the rest,
// stand lists such tables as present, at the recorded size; nothing reads
// them through this file system, and the table reader reports them.
type readOnlyFS struct {
	vfs.FS
	stand map[string]int64 // table path → size the manifest records
}

func newReadOnlyFS() *readOnlyFS { return &readOnlyFS{FS: vfs.Default, stand: map[string]int64{}} }

func (*readOnlyFS) Create(name string) (vfs.File, error) {
	return nil, fmt.Errorf("create %s: %w", name, pebblestore.ErrWrite)
}

func (*readOnlyFS) Link(oldname, newname string) error {
	return fmt.Errorf("link %s: %w", newname, pebblestore.ErrWrite)
}

func (*readOnlyFS) OpenReadWrite(name string, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, fmt.Errorf("open %s for writing: %w", name, pebblestore.ErrWrite)
}

func (*readOnlyFS) Remove(name string) error {
	return fmt.Errorf("remove %s: %w", name, pebblestore.ErrWrite)
}

func (*readOnlyFS) RemoveAll(name string) error {
	return fmt.Errorf("remove %s: %w", name, pebblestore.ErrWrite)
}

func (*readOnlyFS) Rename(oldname, newname string) error {
	return fmt.Errorf("rename %s: %w", oldname, pebblestore.ErrWrite)
}

func (*readOnlyFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	return nil, fmt.Errorf("reuse %s: %w", oldname, pebblestore.ErrWrite)
}

// List leaves out the logs and OPTIONS files (pebblestore.KeepVisible) and
// adds the stand-in tables.
func (fsys *readOnlyFS) List(dir string) ([]string, error) {
	names, err := fsys.FS.List(dir)
	if err != nil {
		return nil, err
	}
	names = pebblestore.KeepVisible(names)
	for path := range fsys.stand {
		if fsys.PathDir(path) != fsys.PathDir(fsys.PathJoin(dir, "x")) {
			continue
		}
		if _, err := fsys.FS.Stat(path); err != nil {
			names = append(names, fsys.PathBase(path))
		}
	}
	return names, nil
}

// Stat gives a stand-in table its recorded size.
func (fsys *readOnlyFS) Stat(name string) (os.FileInfo, error) {
	if size, ok := fsys.stand[name]; ok {
		return standInfo{name: fsys.PathBase(name), size: size}, nil
	}
	return fsys.FS.Stat(name)
}

// MkdirAll succeeds only for a directory that exists already.
func (fsys *readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	st, err := fsys.FS.Stat(dir)
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, pebblestore.ErrWrite)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// Lock takes no lock and creates no file.
func (*readOnlyFS) Lock(string) (io.Closer, error) { return noopCloser{}, nil }

type noopCloser struct{}

func (noopCloser) Close() error { return nil }

// standInfo is the file information of a stand-in table.
type standInfo struct {
	name string
	size int64
}

func (i standInfo) Name() string       { return i.name }
func (i standInfo) Size() int64        { return i.size }
func (i standInfo) Mode() fs.FileMode  { return 0o444 }
func (i standInfo) ModTime() time.Time { return time.Time{} }
func (i standInfo) IsDir() bool        { return false }
func (i standInfo) Sys() any           { return nil }
