package pebblestore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// recordingFile records the byte ranges read from a table.
type recordingFile struct {
	vfs.File
	path  string
	reads *[]span
	mu    *sync.Mutex
}

type span struct {
	path     string
	off, len int64
}

func (f recordingFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	*f.reads = append(*f.reads, span{f.path, off, int64(len(p))})
	f.mu.Unlock()
	return f.File.ReadAt(p, off)
}

// Taking a snapshot reads no byte of any data block: only the footer,
// metaindex, properties, index and filter blocks.
func TestSnapshotReadsNoDataBlock(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{MemTableSize: 256 << 10}
	o.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
	o.Levels[1].FilterPolicy = bloom.FilterPolicy(10)
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

	var reads []span
	var mu sync.Mutex
	defer func(open func(string) (vfs.File, error)) { openTable = open }(openTable)
	openTable = func(path string) (vfs.File, error) {
		f, err := vfs.Default.Open(path)
		if err != nil {
			return nil, err
		}
		return recordingFile{File: f, path: path, reads: &reads, mu: &mu}, nil
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	openTable = func(path string) (vfs.File, error) { return vfs.Default.Open(path) }

	tables := 0
	for l := range s.Levels {
		for _, tb := range s.Levels[l] {
			tables++
			if tb.Damaged != "" || tb.Filter == nil {
				t.Fatalf("L%d %06d: %q, filter %d bytes", l, tb.FileNum, tb.Damaged, len(tb.Filter))
			}
			path := fmt.Sprintf("%s/%06d.sst", dir, tb.FileNum)
			f, err := vfs.Default.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			readable, err := sstable.NewSimpleReadable(f)
			if err != nil {
				t.Fatal(err)
			}
			r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			layout, err := r.Layout()
			if err != nil {
				t.Fatal(err)
			}
			if len(layout.Data) < 2 {
				t.Fatalf("%s: %d data blocks; the test wants several", path, len(layout.Data))
			}
			for _, rd := range reads {
				if rd.path != path {
					continue
				}
				for _, d := range layout.Data {
					lo, hi := int64(d.Offset), int64(d.Offset+d.Length)
					if rd.off < hi && rd.off+rd.len > lo {
						t.Errorf("%s: read [%d,%d) overlaps data block [%d,%d)", path, rd.off, rd.off+rd.len, lo, hi)
					}
				}
			}
			_ = r.Close()
		}
	}
	if tables < 2 || len(reads) == 0 {
		t.Fatalf("%d tables, %d reads", tables, len(reads))
	}
}
