package kvdemo

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// TestFaultReopenAfterUnsyncedManifest, found by the fault sweep (cuckoo,
// error #43 of kind syncdir): a flush renames its MANIFEST into place but
// the directory fsync fails, so the store turns read-only. The user
// reopens it, as ErrReadOnly says to. Open read the new MANIFEST and
// removed the flushed log below it, though nothing had made that MANIFEST
// durable: a power loss then brought the old MANIFEST back, which names
// the removed log (Open refused: "log ... is missing") and treats the
// flushed table as an unfinished output. Every acknowledged write since
// the previous flush hung on a file that was gone.
func TestFaultReopenAfterUnsyncedManifest(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			efs := errorfs.New(vfs.Default)
			o := Options{Filter: f, MaxTables: -1}
			db, err := faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			l := newLedger()
			for i := 0; i < 50; i++ {
				l.put(t, db, fmt.Sprintf("k%03d", i), "v")
			}
			// A flush fsyncs the directory for its new log, for its
			// table, then for the MANIFEST it renamed into place: fail
			// the third.
			efs.Add(&errorfs.Rule{Op: errorfs.OpSyncDir, Skip: 2, Times: 1})
			if err := db.Flush(); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("Flush with the MANIFEST's directory fsync failing: %v", err)
			}
			db.Close()
			db, err = faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatalf("reopen after the failed fsync: %v", err)
			}
			db.Close()
			efs.Crash()
			db, err = faultOpen(t, dir, vfs.Default, o)
			if err != nil {
				t.Fatalf("open after a power loss: %v", err)
			}
			defer db.Close()
			l.verify(t, db, "after a power loss")
		})
	}
}

// TestFaultReplayedLogMadeDurable, found by the fault sweep (batched
// cuckoo, error #115 of kind fsync; then every kind, error at the last
// fsync): an fsync of the log fails, so the store turns read-only and is
// reopened. Open replayed the log from what the OS held, served those
// writes, and reopened the log counting every byte in it as already
// durable: the next Sync and Close returned nil without an fsync, and a
// power loss then took back values Gets had returned. With
// NoSyncEachWrite the writes were acknowledged, unsynced; by default the
// one whose fsync failed was reported ErrOutcomeUnknown, and the reopened
// store answered that question (it served the write) before a power loss
// answered it the other way. A store must not serve, and vouch for at
// Sync or Close, what it has not made durable.
func TestFaultReplayedLogMadeDurable(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("NoSyncEachWrite=%v", batched), func(t *testing.T) {
			dir := t.TempDir()
			efs := errorfs.New(vfs.Default)
			o := Options{NoSyncEachWrite: batched, MaxTables: -1}
			db, err := faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				if i == 19 && !batched {
					efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Times: 1})
				}
				err := db.Put([]byte(fmt.Sprintf("k%02d", i)), []byte("v"))
				if i == 19 && !batched {
					if !errors.Is(err, ErrOutcomeUnknown) {
						t.Fatalf("a write whose fsync fails: %v", err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if batched {
				efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Times: 1})
				if err := db.Sync(); !errors.Is(err, ErrOutcomeUnknown) {
					t.Fatalf("Sync with its fsync failing: %v", err)
				}
			}
			db.Close()
			db, err = faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			l := newLedger()
			for i := 0; i < 20; i++ {
				k := fmt.Sprintf("k%02d", i)
				if v, err := db.Get([]byte(k)); err == nil {
					l.acked[k] = string(v) // served after the reopen
				}
			}
			if _, ok := l.acked["k19"]; !ok {
				t.Fatal("the reopened store does not serve the write in doubt: the test exercises nothing")
			}
			if err := db.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			efs.Crash()
			db, err = faultOpen(t, dir, vfs.Default, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			l.verify(t, db, "after a Sync, a Close and a power loss")
		})
	}
}
