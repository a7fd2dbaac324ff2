package kvdemo

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// readOnlyFS is a read-only mount: everything that would change a file or
// a directory fails with EROFS.
type readOnlyFS struct{ vfs.FS }

func erofs(op, name string) error { return &os.PathError{Op: op, Path: name, Err: syscall.EROFS} }

func (readOnlyFS) Create(name string) (vfs.File, error)     { return nil, erofs("open", name) }
func (readOnlyFS) OpenAppend(name string) (vfs.File, error) { return nil, erofs("open", name) }
func (readOnlyFS) Remove(name string) error                 { return erofs("unlinkat", name) }
func (readOnlyFS) Rename(o, n string) error                 { return erofs("rename", o) }
func (readOnlyFS) SyncDir(dir string) error                 { return erofs("fsync", dir) }
func (f readOnlyFS) RemoveAll(name string) error {
	if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return erofs("unlinkat", name)
}
func (f readOnlyFS) MkdirAll(dir string, perm os.FileMode) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	return erofs("mkdir", dir)
}
func (f readOnlyFS) Lock(name string) (io.Closer, error) {
	if _, err := os.Stat(name); err != nil {
		return nil, erofs("open", name)
	}
	return f.FS.Lock(name)
}

// dirDigest is every file's name and content under dir, hashed.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", p, d.IsDir())
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// readOnlyStore writes a store with keys in tables and in its log (more
// than a memtable's worth, as after a crash during a flush), a torn log
// tail and one table's filter file missing, and returns its directory.
func readOnlyStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 8 << 10, MaxTables: -1})
	for i := 0; i < 300; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// More records in the log than one memtable holds.
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	f, err := os.OpenFile(logs[len(logs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq := db.acked.Load()
	for i := 300; i < 600; i++ {
		k, v := kv(i)
		seq++
		f.Write(encodeRecords(walRecord{seq: seq, kind: kindPut, key: k, value: v}))
	}
	f.Write([]byte("torn"))
	f.Close()
	cfs, _ := filepath.Glob(filepath.Join(dir, "*.cf"))
	if err := os.Remove(cfs[0]); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReadOnlyDirectoryServesReads: a store whose directory cannot be
// written (the vfs seam's read-only mount) opens read-only on its own:
// every key is served, from tables and from the logs, a missing filter
// is rebuilt in memory, writes fail saying why and what to do, and no
// file changes. Check works on it too.
func TestReadOnlyDirectoryServesReads(t *testing.T) {
	dir := readOnlyStore(t)
	before := dirDigest(t, dir)
	var logs bytes.Buffer
	o := Options{FS: readOnlyFS{vfs.Default}, MemtableBytes: 8 << 10, Logger: quietTo(&logs)}
	db, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("Open of a read-only store: %v", err)
	}
	mustHaveKV(t, db, 600, "read-only store")
	err = db.Put([]byte("new"), []byte("v"))
	if !errors.Is(err, ErrReadOnly) || !errors.Is(err, ErrNotStored) || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "make the directory") {
		t.Fatalf("Put: %v; want not stored, read-only, saying why and what to do", err)
	}
	if err := db.Delete([]byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete: %v", err)
	}
	if err := db.Flush(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Flush: %v", err)
	}
	if err := db.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().UnfilteredTables != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the missing filter was not rebuilt in memory")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if after := dirDigest(t, dir); after != before {
		t.Fatal("a read-only Open changed the store's files")
	}
	if !strings.Contains(logs.String(), "opened read-only") {
		t.Errorf("the log does not say the store was opened read-only:\n%s", logs.String())
	}
	var out strings.Builder
	if _, err := Check(dir, &out, &Options{FS: readOnlyFS{vfs.Default}}); err != nil {
		t.Fatalf("Check of a read-only store: %v\n%s", err, out.String())
	}
	// A directory with no store cannot become one.
	if _, err := Open(t.TempDir(), &Options{FS: readOnlyFS{vfs.Default}, Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "holds no store") {
		t.Fatalf("Open of an empty read-only directory: %v", err)
	}
}

// TestReadOnlyOption: Options.ReadOnly on a writable store changes
// nothing either (no tmp/ cleanup, no torn tail cut) and refuses writes.
func TestReadOnlyOption(t *testing.T) {
	dir := readOnlyStore(t)
	if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	before := dirDigest(t, dir)
	db := open(t, dir, Options{ReadOnly: true, MemtableBytes: 8 << 10})
	mustHaveKV(t, db, 600, "Options.ReadOnly")
	if err := db.Put([]byte("k"), []byte("v")); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "Options.ReadOnly") {
		t.Fatalf("Put: %v", err)
	}
	db.Close()
	if dirDigest(t, dir) != before {
		t.Fatal("Options.ReadOnly changed the store's files")
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := Open(missing, &Options{ReadOnly: true, Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "holds no store") {
		t.Fatalf("Options.ReadOnly on a missing directory: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Options.ReadOnly created the directory: %v", err)
	}
	db = open(t, dir, Options{MemtableBytes: 8 << 10})
	defer db.Close()
	mustHaveKV(t, db, 600, "reopened writable")
	mustPut(t, db, []byte("k"), []byte("v"))
}

func quietTo(w io.Writer) *log.Logger { return log.New(w, "", 0) }

// TestReadOnlyMountRealProcess: the kvdemo binary on a read-only bind
// mount (a private mount namespace): get and check work, put fails
// saying the store is read-only.
func TestReadOnlyMountRealProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kvdemo binary")
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("no private mount namespace here (unshare -m: %v %s); TestReadOnlyDirectoryServesReads covers this through the vfs seam", err, out)
	}
	bin := buildKvdemo(t)
	dir := t.TempDir()
	db := open(t, dir, Options{})
	mustPut(t, db, []byte("k1"), []byte("v1"))
	db.Close()
	script := `mount --bind -o ro "$1" "$1" || exit 99
"$2" get -dir "$1" k1 || exit 1
"$2" check "$1" || exit 2
"$2" put -dir "$1" k2 v2 && exit 3
exit 0`
	out, err := exec.Command("unshare", "-m", "sh", "-c", script, "sh", dir, bin).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 99 {
		t.Skipf("cannot bind-mount read-only here: %s", out)
	}
	if err != nil || !strings.Contains(string(out), "v1") || !strings.Contains(string(out), "0 problems") || !strings.Contains(string(out), "read-only") {
		t.Fatalf("kvdemo on a read-only mount: %v\n%s", err, out)
	}
}

// TestCheckUnreadableFilterAgreesWithOpen: a filter file that cannot be
// read (mode 000 for a user other than root; here EACCES through the vfs
// seam) is rebuilt in its place by Open, and Check says so; a filter
// whose bytes were read and are damaged goes to lost/, as Check says.
func TestCheckUnreadableFilterAgreesWithOpen(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 8 << 10, MaxTables: -1})
	for i := 0; i < 200; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Flush()
	db.Close()
	cfs, _ := filepath.Glob(filepath.Join(dir, "*.cf"))
	unreadable := cfs[0]
	efs := errorfs.New(vfs.Default)
	efs.Add(&errorfs.Rule{Op: errorfs.OpOpen, Match: func(p string) bool { return p == unreadable }, Err: syscall.EACCES})
	var out strings.Builder
	res, err := Check(dir, &out, &Options{FS: efs})
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, filepath.Base(unreadable)) {
			line = l
		}
	}
	if err != nil || res.Problems != 1 || !strings.Contains(line, "rebuilds it in its place") || strings.Contains(line, "lost/") {
		t.Fatalf("check of an unreadable filter: %+v, %v\n%s", res, err, out.String())
	}
	db = open(t, dir, Options{FS: efs})
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().RebuiltFilters != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the unreadable filter was not rebuilt")
		}
		time.Sleep(5 * time.Millisecond)
	}
	db.Close()
	if lost, _ := os.ReadDir(filepath.Join(dir, lostDir)); len(lost) != 0 {
		t.Fatalf("lost/ holds %d files; Check said the filter is rebuilt in place", len(lost))
	}
	efs.Clear()
	out.Reset()
	if res, err := Check(dir, &out, nil); err != nil || res.Problems != 0 {
		t.Fatalf("check after Open rebuilt the filter: %+v, %v\n%s", res, err, out.String())
	}
}

// TestMaxKeySizeKeptByTheStore: keys and values written under larger
// caps are replayed, read and deleted after a reopen with the defaults;
// Puts keep the caps they are given.
func TestMaxKeySizeKeptByTheStore(t *testing.T) {
	dir := t.TempDir()
	big := Options{MaxKeySize: 60000, MaxValueSize: 4 << 20}
	db := open(t, dir, big)
	inTable := bytes.Repeat([]byte("t"), 50000)
	inLog := bytes.Repeat([]byte("l"), 59000)
	bigValue := bytes.Repeat([]byte("v"), 3<<20)
	mustPut(t, db, inTable, []byte("table"))
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, inLog, bigValue)
	db.Close()

	db = open(t, dir, Options{})
	if got, err := db.Get(inTable); err != nil || string(got) != "table" {
		t.Fatalf("key from a table: %q, %v", got, err)
	}
	if got, err := db.Get(inLog); err != nil || !bytes.Equal(got, bigValue) {
		t.Fatalf("key from the log: %d bytes, %v", len(got), err)
	}
	if err := db.Delete(inTable); err != nil {
		t.Fatalf("Delete of a key longer than the default cap: %v", err)
	}
	if err := db.Put(bytes.Repeat([]byte("p"), 2000), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put over this Open's MaxKeySize: %v, want ErrTooLarge", err)
	}
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	if _, err := db.Get(inTable); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted long key: %v", err)
	}
	if got, err := db.Get(inLog); err != nil || !bytes.Equal(got, bigValue) {
		t.Fatalf("key from the log, reopened twice: %d bytes, %v", len(got), err)
	}
}
