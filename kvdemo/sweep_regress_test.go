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
