package kvdemostore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// Real kvdemo stores of each per-table kind: the tables, keys and bytes read
// here match the store's own Stats, and the filters' measured rates are
// those of their kind.
func TestSnapshotMatchesKvdemo(t *testing.T) {
	for _, kind := range []kvdemo.FilterKind{kvdemo.FilterCuckoo, kvdemo.FilterBloom, kvdemo.FilterNone} {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			db, err := kvdemo.Open(dir, &kvdemo.Options{Filter: kind, MemtableBytes: 512 << 10, NoSyncEachWrite: true, MaxTables: -1})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 40000; i++ {
				if err := db.Put([]byte(fmt.Sprintf("key%09d", i*7919%40000)), make([]byte, 32)); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.Settle(); err != nil {
				t.Fatal(err)
			}
			st := db.Stats()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if !IsStore(dir) {
				t.Fatal("IsStore: false on a kvdemo store")
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			var keys, size, filter uint64
			rng := rand.New(rand.NewPCG(3, 4))
			for _, tb := range s.Levels[0] {
				if tb.Damaged != "" {
					t.Fatalf("table %d: %s", tb.FileNum, tb.Damaged)
				}
				keys += tb.NumEntries
				size += tb.Size
				filter += uint64(len(tb.Filter))
				fp, ok := tb.Probe(20000, rng)
				switch kind {
				case kvdemo.FilterCuckoo:
					f, err := codec.Decode(tb.Filter)
					if err != nil || !ok {
						t.Fatalf("table %d: %v, probed %v", tb.FileNum, err, ok)
					}
					if want := f.Info().ExpectedFPR * 20000; float64(fp) > 3*want+20 || float64(fp) < want/3-20 {
						t.Errorf("table %d: %d false positives in 20000, expected about %.0f", tb.FileNum, fp, want)
					}
				case kvdemo.FilterBloom:
					if !ok || fp == 0 || fp > 2000 {
						t.Errorf("table %d: bloom %d false positives in 20000 (probed %v)", tb.FileNum, fp, ok)
					}
				case kvdemo.FilterNone:
					if ok || tb.Filter != nil {
						t.Errorf("table %d of a store without filters has one", tb.FileNum)
					}
				}
			}
			if len(s.Levels[0]) != st.Tables || len(s.Levels[0]) < 2 || int64(keys) != st.TableKeys || int64(size) != st.TableBytes {
				t.Fatalf("read %d tables, %d keys, %d bytes; Stats %d, %d, %d", len(s.Levels[0]), keys, size, st.Tables, st.TableKeys, st.TableBytes)
			}
			if kind == kvdemo.FilterCuckoo && int64(filter) != st.TableFilterBytes {
				t.Errorf("filter bytes %d, Stats %d", filter, st.TableFilterBytes)
			}
		})
	}
}

// A .cf filter file grown into a 10 GiB sparse file marks its table damaged
// without being read; the other tables are still reported.
func TestHugeFilterFile(t *testing.T) {
	dir := t.TempDir()
	db, err := kvdemo.Open(dir, &kvdemo.Options{Filter: kvdemo.FilterCuckoo, MemtableBytes: 256 << 10, NoSyncEachWrite: true, MaxTables: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("key%09d", i)), make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cfs, _ := filepath.Glob(filepath.Join(dir, "*.cf"))
	if len(cfs) < 2 {
		t.Fatalf("%d filter files; the test wants two", len(cfs))
	}
	if err := os.Truncate(cfs[0], 10<<30); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := Open(dir)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("allocated %d bytes", grew)
	}
	damaged, fine := 0, 0
	for _, tb := range s.Levels[0] {
		if tb.Damaged != "" {
			damaged++
		} else if tb.Filter != nil {
			fine++
		}
	}
	if damaged != 1 || fine == 0 {
		t.Fatalf("%d damaged, %d with a filter; want 1 and the rest", damaged, fine)
	}
}
