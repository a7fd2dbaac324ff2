package badgerstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// A real Badger directory: the tables, levels, key counts and bloom filter
// sizes read here match Badger's own DB.Tables, and the filters' measured
// rate is that of Badger's default, BloomFalsePositive 0.01, which sizes a
// filter at about 7 bits per key and lets through a few percent (the
// README's Badger table has the figures).
func TestSnapshotMatchesBadger(t *testing.T) {
	dir := t.TempDir()
	opt := badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(1 << 20).
		WithBaseTableSize(256 << 10).WithBaseLevelSize(1 << 20).WithNumLevelZeroTables(2).
		WithValueThreshold(1 << 10).WithSyncWrites(false)
	db, err := badger.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	for i := 0; i < 200000; i++ {
		if err := wb.Set([]byte(fmt.Sprintf("key%09d", i*7919%200000)), make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Badger's own view, from a store that no longer compacts.
	if db, err = badger.Open(opt.WithNumCompactors(0)); err != nil {
		t.Fatal(err)
	}
	want := db.Tables()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !IsStore(dir) {
		t.Fatal("IsStore: false on a Badger directory")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	for l := range s.Levels {
		for _, tb := range s.Levels[l] {
			if tb.Damaged != "" {
				t.Fatalf("table %d: %s", tb.FileNum, tb.Damaged)
			}
			got[tb.FileNum] = fmt.Sprintf("L%d keys %d bloom %d", l, tb.NumEntries, len(tb.Filter))
		}
	}
	if len(want) < 2 {
		t.Fatalf("Badger lists %d tables; the test wants several", len(want))
	}
	if len(got) != len(want) {
		t.Errorf("read %d tables, Badger lists %d", len(got), len(want))
	}
	for _, ti := range want {
		w := fmt.Sprintf("L%d keys %d bloom %d", ti.Level, ti.KeyCount, ti.BloomFilterSize)
		if got[ti.ID] != w {
			t.Errorf("table %d: read %q, Badger says %q", ti.ID, got[ti.ID], w)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for l := range s.Levels {
		for _, tb := range s.Levels[l] {
			fp, ok := tb.Probe(20000, rng)
			bits := float64(len(tb.Filter)) * 8 / float64(tb.NumEntries)
			if !ok || fp < 200 || fp > 1600 || bits < 6 || bits > 8 {
				t.Errorf("table %d: %d false positives in 20000 (ok %v) at %.2f bits per key", tb.FileNum, fp, ok, bits)
			}
		}
	}
}
