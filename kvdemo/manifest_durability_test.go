package kvdemo

import (
	"bytes"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// TestOverwriteAfterCompactionAndReopen: the MANIFEST's seq (the highest
// sequence number in a table) must never go back, whatever the last edit
// was. A compaction's edit carries no new sequence numbers; if it lowered
// seq, a store reopened with nothing left in its logs would hand out
// sequence numbers below the versions its tables hold, and a later merge
// would keep the older value of a key over the newer one. The store is
// stopped by Close, and by a crash (no clean-close mark to check against).
func TestOverwriteAfterCompactionAndReopen(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "close"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{MaxTables: 1}
			key := []byte("key")
			write := func(db *DB, v string) {
				t.Helper()
				mustPut(t, db, key, []byte(v))
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			compacted := func(db *DB) func() bool {
				return func() bool { s := db.Stats(); return s.Compactions >= 1 && s.Tables == 1 }
			}
			efs := errorfs.New(vfs.Default)
			db, err := faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			write(db, "v1")
			write(db, "v2")
			waitFor(t, "the two tables to merge", compacted(db))
			// The last edit was the compaction; the logs hold nothing.
			if crash {
				if err := efs.Crash(); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			db = open(t, dir, o)
			write(db, "v3")
			waitFor(t, "the new table to merge with the old", compacted(db))
			if got, err := db.Get(key); err != nil || !bytes.Equal(got, []byte("v3")) {
				t.Fatalf("after an overwrite, a reopen and a merge: %q, %v; want v3", got, err)
			}
			db.Close()
			db = open(t, dir, o)
			defer db.Close()
			if got, err := db.Get(key); err != nil || !bytes.Equal(got, []byte("v3")) {
				t.Fatalf("reopened: %q, %v; want v3", got, err)
			}
		})
	}
}
