package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
)

// TestGlobalSettleWhileFlushFails: a flush that keeps failing (no table
// can be created: a full disk, say) is retried in the background. Settle
// must not wait for the disk: it returns the flush's error at once, does
// no rebuild meanwhile (the failed flush's memtable is still waiting for
// its table), and every acknowledged key stays readable. Once tables can
// be written again, the flush completes and Settle rebuilds as usual.
func TestGlobalSettleWhileFlushFails(t *testing.T) {
	_, efs, db, _ := faultStore(t, Options{Filter: FilterGlobal, MemtableBytes: 32 << 10, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true}, 0)
	defer db.Close()
	n := 0
	put := func(keys int) {
		t.Helper()
		for i := 0; i < keys; i++ {
			k := fmt.Appendf(nil, "c%07d", n)
			if err := db.Put(k, k); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	put(4000)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	efs.Add(&errorfs.Rule{Op: errorfs.OpCreate, Match: isExt(extTable), Err: errorfs.ENOSPC})
	put(200) // within one memtable: Flush is the only switch
	if err := db.Flush(); err == nil {
		t.Fatal("a flush that cannot create its table succeeded")
	}
	settled := make(chan error, 1)
	go func() { settled <- db.Settle() }()
	select {
	case err := <-settled:
		if err == nil {
			t.Fatal("Settle while every flush fails returned no error")
		}
		t.Logf("Settle while the flush fails: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Settle waits for a flush that keeps failing")
	}
	check := func(when string) {
		t.Helper()
		for i := 0; i < n; i++ {
			k := fmt.Appendf(nil, "c%07d", i)
			if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
				t.Fatalf("%s: Get(%s) = %q, %v", when, k, got, err)
			}
		}
	}
	check("while the flush fails")
	efs.Clear()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := db.Flush()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flush after tables can be written again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := db.Settle(); err != nil {
		t.Fatalf("Settle once the flush succeeded: %v", err)
	}
	check("after the flush succeeded")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Settle(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Settle on a closed store: %v", err)
	}
}
