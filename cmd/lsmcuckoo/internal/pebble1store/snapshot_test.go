package pebble1store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// recordingFile records the byte ranges read from a table.
type recordingFile struct {
	vfs.File
	reads *[][2]int64
	mu    *sync.Mutex
}

func (f recordingFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	*f.reads = append(*f.reads, [2]int64{off, off + int64(len(p))})
	f.mu.Unlock()
	return f.File.ReadAt(p, off)
}

// Taking a snapshot of a Pebble v1 store, at the oldest format (RocksDB's
// table format) and the newest, reads no byte of any data block, and every
// table's filter block is found and checked.
func TestSnapshotReadsNoDataBlock(t *testing.T) {
	for _, fmv := range []pebble.FormatMajorVersion{pebble.FormatMostCompatible, pebble.FormatNewest} {
		dir := t.TempDir()
		o := &pebble.Options{MemTableSize: 256 << 10, FormatMajorVersion: fmv}
		// Small tables on every level: however far compactions get before
		// Close, the store keeps several tables.
		o.Levels = make([]pebble.LevelOptions, 7)
		for l := range o.Levels {
			o.Levels[l] = pebble.LevelOptions{FilterPolicy: bloom.FilterPolicy(10), TargetFileSize: 64 << 10}
		}
		o.Levels[0].FilterPolicy = pebblev1.NewPolicy(10)
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40000; i++ {
			_ = db.Set([]byte(fmt.Sprintf("k%08d", i*7919%40000)), make([]byte, 64), pebble.NoSync)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		reads := map[string]*[][2]int64{}
		var mu sync.Mutex
		openTable = func(path string) (vfs.File, error) {
			f, err := vfs.Default.Open(path)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			if reads[path] == nil {
				reads[path] = new([][2]int64)
			}
			return recordingFile{File: f, reads: reads[path], mu: &mu}, nil
		}
		s, err := Open(dir)
		openTable = func(path string) (vfs.File, error) { return vfs.Default.Open(path) }
		if err != nil {
			t.Fatal(err)
		}
		tables := 0
		for l := range s.Levels {
			for _, tb := range s.Levels[l] {
				tables++
				if tb.Damaged != "" || len(tb.Filter) == 0 {
					t.Fatalf("format %d L%d %06d: %q, filter %d bytes", fmv, l, tb.FileNum, tb.Damaged, len(tb.Filter))
				}
				checkNoDataRead(t, fmt.Sprintf("%s/%06d.sst", dir, tb.FileNum), reads)
			}
		}
		if tables < 2 {
			t.Fatalf("format %d: %d tables", fmv, tables)
		}
	}
}

// checkNoDataRead checks that no recorded read of the table at path
// overlaps one of its data blocks.
func checkNoDataRead(t *testing.T, path string, reads map[string]*[][2]int64) {
	t.Helper()
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.NewReader(readable, sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	layout, err := r.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if len(layout.Data) < 2 || reads[path] == nil {
		t.Fatalf("%s: %d data blocks, reads %v; the test wants several blocks, read", path, len(layout.Data), reads[path])
	}
	for _, rd := range *reads[path] {
		for _, d := range layout.Data {
			lo, hi := int64(d.Offset), int64(d.Offset+d.Length)
			if rd[0] < hi && rd[1] > lo {
				t.Errorf("%s: read [%d,%d) overlaps data block [%d,%d)", path, rd[0], rd[1], lo, hi)
			}
		}
	}
}
