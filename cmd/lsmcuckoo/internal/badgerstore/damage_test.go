package badgerstore

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// A table file whose tail is not a Badger index is reported as damaged,
// without a panic and without allocating what its length fields claim: a
// zeroed tail (a file extended with a hole) passes the empty index's
// checksum, and a garbage length can claim gigabytes of a sparse file.
func TestReadTableDamagedTail(t *testing.T) {
	for _, c := range []struct {
		name string
		tail []byte
	}{
		{"zeroed", nil},
		{"huge checksum length", binary.BigEndian.AppendUint32(nil, 0xfffffff0)},
		{"huge index length", append(binary.BigEndian.AppendUint32(nil, 0xfffffff0), 0, 0, 0, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "000001.sst")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			const size = 10 << 30 // sparse: no disk blocks behind the hole
			if err := f.Truncate(size); err != nil {
				t.Skipf("no sparse file here: %v", err)
			}
			if _, err := f.WriteAt(c.tail, size-int64(len(c.tail))); err != nil {
				t.Fatal(err)
			}
			f.Close()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			var tb pebblestore.Table
			err = ReadTable(path, 0, &tb)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatalf("a damaged tail read as a table: %+v", tb)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("reading a damaged tail allocated %d bytes", grew)
			}
		})
	}
}

// A MANIFEST grown into a 10 GiB sparse file is refused by its size, not read.
func TestReplayManifestHuge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "MANIFEST")
	head := append(append([]byte{}, magic...), 0, 0, 0, badgerManifestVersion)
	if err := os.WriteFile(path, head, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 10<<30); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := replayManifest(path)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 10 GiB MANIFEST was read")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("allocated %d bytes", grew)
	}
}

// A table the owner compacts away between the MANIFEST read and the table's
// open is not reported missing: the snapshot is taken again.
func TestOpenWhileOwnerCompacts(t *testing.T) {
	dir := t.TempDir()
	opt := badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(1 << 20).WithValueThreshold(1 << 10)
	db, err := badger.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	for i := 0; i < 20000; i++ {
		if err := wb.Set([]byte(fmt.Sprintf("key%09d", i)), make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	vanished := false
	defer func(open func(string) (*os.File, error)) { openTable = open }(openTable)
	openTable = func(path string) (*os.File, error) {
		if !vanished {
			vanished = true
			return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
		}
		return os.Open(path)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l := range s.Levels {
		for _, tb := range s.Levels[l] {
			n++
			if tb.Damaged != "" {
				t.Errorf("table %d: %s", tb.FileNum, tb.Damaged)
			}
		}
	}
	if !vanished || n == 0 || s.Retries != 1 {
		t.Fatalf("vanished %v, %d tables, %d retries", vanished, n, s.Retries)
	}
}

// Badger truncates a table before removing it: a table read at that moment
// looks damaged, and the snapshot is taken again.
func TestOpenWhileOwnerRemovesTable(t *testing.T) {
	dir := t.TempDir()
	opt := badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(1 << 20).WithValueThreshold(1 << 10)
	db, err := badger.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	for i := 0; i < 20000; i++ {
		if err := wb.Set([]byte(fmt.Sprintf("key%09d", i)), make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "truncated.sst")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	truncated := false
	defer func(open func(string) (*os.File, error)) { openTable = open }(openTable)
	openTable = func(path string) (*os.File, error) {
		if !truncated {
			truncated = true
			return os.Open(empty)
		}
		return os.Open(path)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for l := range s.Levels {
		for _, tb := range s.Levels[l] {
			if tb.Damaged != "" {
				t.Errorf("table %d: %s", tb.FileNum, tb.Damaged)
			}
		}
	}
	if !truncated || s.Retries != 1 {
		t.Fatalf("truncated %v, %d retries", truncated, s.Retries)
	}
}
