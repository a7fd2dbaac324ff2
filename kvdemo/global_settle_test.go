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

// TestGlobalSettleUnderLoad: Settle called over and over while a writer
// fills memtables (flushes, each adding a table to the index) and
// compactions merge tables (Replace), with the store's own idle rebuild
// on, while readers Get stable keys: no Get may miss, and every Settle
// succeeds. Then Close races a loop of Settles: each returns nil or
// ErrClosed, none hangs. Run with -race.
func TestGlobalSettleUnderLoad(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MemtableBytes: 16 << 10, MaxTables: 4, NoSyncEachWrite: true})
	const stable = 3000
	for i := 0; i < stable; i++ {
		k := fmt.Appendf(nil, "s%06d", i)
		if err := db.Put(k, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	sr := startStableReaders(t, db, 3, stable)
	dur := 1500 * time.Millisecond
	if testing.Short() {
		dur = 500 * time.Millisecond
	}
	stop := make(chan struct{})
	settles := make(chan int, 1)
	go func() {
		n := 0
		defer func() { settles <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Settle(); err != nil {
				t.Errorf("Settle under load: %v", err)
				return
			}
			n++
		}
	}()
	written := 0
	for deadline := time.Now().Add(dur); time.Now().Before(deadline); written++ {
		k := fmt.Appendf(nil, "r%07d", written)
		if err := db.Put(k, k); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	nSettles := <-settles
	reads, misses := sr.stop()
	g := db.filter.(*globalFilter)
	st := db.Stats()
	t.Logf("%d writes, %d Settles, %d reads, %d rebuilds, %d flushes, %d compactions, %+v", written, nSettles, reads, g.rebuilds.Load(), st.Flushes, st.Compactions, st.Index)
	if misses != 0 {
		t.Fatalf("%d of %d Gets missed a stable key", misses, reads)
	}
	if st.Compactions == 0 || nSettles == 0 {
		t.Fatalf("%d compactions, %d Settles: not exercised", st.Compactions, nSettles)
	}
	if err := db.Settle(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < written; i++ {
		k := fmt.Appendf(nil, "r%07d", i)
		if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
			t.Fatalf("after the load: Get(%s) = %q, %v", k, got, err)
		}
	}
	// Close racing Settles.
	racing := make(chan error, 1)
	go func() {
		for {
			if err := db.Settle(); err != nil {
				racing <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-racing:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Settle racing Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Settle racing Close did not return")
	}
}
