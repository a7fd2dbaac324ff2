package kvdemo

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestRestoredTableServedAgain: a table damaged at rest is kept and
// reported; restored from a backup, it is served again. The MANIFEST
// rewritten meanwhile (a flush while the table was damaged) must not
// record the damaged bytes' identity as the table's, nor an identity it
// never had: the store here predates table_files, so there is no recorded
// identity to keep, and none may be made up.
func TestRestoredTableServedAgain(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	for i := 0; i < 50; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	man := forgetTableFiles(t, dir)
	path := fileName(dir, man.Tables[0], extTable)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/3] ^= 1
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, Options{})
	if n := db.Stats().DamagedTables; n != 1 {
		t.Fatalf("test setup: %d damaged tables, want 1", n)
	}
	mustPut(t, db, []byte("later"), []byte("v"))
	if err := db.Flush(); err != nil { // a new MANIFEST while the table is damaged
		t.Fatal(err)
	}
	db.Close()
	if err := os.WriteFile(path, good, 0o644); err != nil { // restored from a backup
		t.Fatal(err)
	}
	db = open(t, dir, Options{})
	defer db.Close()
	mustHaveKV(t, db, 50, "from the restored table")
}

// TestRefusedOpenOverMissingLogChangesNothing: a log the MANIFEST names
// as holding records not yet in a table is missing. Open refuses, and
// (like every refusal) before it changes anything: a file no manifest
// names stays where it is, not moved to lost/ by an Open that then fails.
func TestRefusedOpenOverMissingLogChangesNothing(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	for i := 0; i < 20; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
		if i == 9 {
			if err := db.Flush(); err != nil { // the MANIFEST now names the log after it
				t.Fatal(err)
			}
		}
	}
	db.Close()
	forgetCleanClose(t, dir) // as after a crash: no mark to find the loss by
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.Log == 0 {
		t.Fatal("test setup: the MANIFEST names no log")
	}
	if err := os.Remove(fileName(dir, man.Log, extLog)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fileName(dir, 0, extTable), []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	_, err = Open(dir, &Options{Logger: quiet()})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Open with the log the MANIFEST needs missing: %v", err)
	}
	after := snapshotDir(t, dir)
	if !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatalf("a refused Open changed the store: files before %v, after %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// TestLossOfOneWriteAcceptedOnce: a store closed cleanly whose log lost
// its last record at rest (cut at a record boundary) is refused by
// default; opened under point-in-time recovery, the loss is accepted and
// the clean-close mark dropped, durably, so that a crash afterwards does
// not make the next Open refuse over the same, accepted loss. One record
// is the smallest loss the mark must catch.
func TestLossOfOneWriteAcceptedOnce(t *testing.T) {
	dir, path, ends := storeWithLog(t, 20)
	if err := os.Truncate(path, ends[18]); err != nil { // write 20 lost at rest
		t.Fatal(err)
	}
	if _, err := Open(dir, &Options{Logger: quiet()}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("default Open over a log missing the last write of a clean Close: %v", err)
	}
	openAndCrash(t, dir, Options{WALRecovery: PointInTimeRecovery}, nil)
	db, err := faultOpen(t, dir, vfs.Default, Options{})
	if err != nil {
		t.Fatalf("Open after the loss was accepted and a crash: %v", err)
	}
	defer db.Close()
	mustHaveKV(t, db, 19, "acknowledged write")
}

// TestUnexplainedFileBelowNextFileKept: a table file no MANIFEST names,
// numbered below next_file (so not an unfinished flush's output), is not
// the store's to judge: Open moves it to lost/, whole, and never deletes
// it. Number 0 sits just below the next_file (1) of a store that has not
// flushed yet.
func TestUnexplainedFileBelowNextFileKept(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	k, v := kv(1)
	mustPut(t, db, k, v)
	db.Close()
	if man, err := readManifestFS(vfs.Default, dir); err != nil || man.NextFile != 1 {
		t.Fatalf("test setup: next_file %d, %v; want 1", man.NextFile, err)
	}
	foreign := []byte("a table put here by hand")
	if err := os.WriteFile(fileName(dir, 0, extTable), foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, Options{})
	defer db.Close()
	if got, err := os.ReadFile(fileName(dir, 0, extTable)); err == nil {
		t.Fatalf("the unexplained file is still in place (%q): Open should have moved it to lost/", got)
	}
	if got, err := os.ReadFile(filepath.Join(dir, lostDir, "000000."+extTable)); err != nil || !bytes.Equal(got, foreign) {
		t.Fatalf("the unexplained file in lost/: %q, %v; want it whole", got, err)
	}
}

// TestManifestNamingTableAtNextFileRefused: a MANIFEST (intact checksum,
// edited by hand) that lists a table at or above its own next_file
// contradicts itself: the store could take that number for a new file.
// Open refuses, naming the MANIFEST, and changes nothing.
func TestManifestNamingTableAtNextFileRefused(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	k, v := kv(1)
	mustPut(t, db, k, v)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	man.NextFile = man.Tables[0]
	if err := (&DB{dir: dir, fs: vfs.Default, opts: Options{Logger: quiet()}}).writeManifest(man); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	_, err = Open(dir, &Options{Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "MANIFEST") || !strings.Contains(err.Error(), "next_file") {
		t.Fatalf("Open over a MANIFEST listing a table at its next_file: %v", err)
	}
	if after := snapshotDir(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatal("a refused Open changed the store")
	}
}

// forgetTableFiles rewrites the MANIFEST of the closed store in dir as
// stores wrote it before table_files: no table's size and hash recorded.
// It returns the manifest as written.
func forgetTableFiles(t testing.TB, dir string) manifest {
	t.Helper()
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	man.TableFiles = nil
	if err := (&DB{dir: dir, fs: vfs.Default, opts: Options{Logger: quiet()}}).writeManifest(man); err != nil {
		t.Fatal(err)
	}
	return man
}

// TestNewStoreDirectorySurvivesCrash: Open creates a new store's
// directory, and its missing parents, and must make each new directory's
// entry durable in its parent before it acknowledges a write: a crash
// could otherwise take the whole directory away, acknowledged writes and
// all.
func TestNewStoreDirectorySurvivesCrash(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "stores", "new")
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, []byte("k"), []byte("v"))
	if err := efs.Crash(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	if got, err := db.Get([]byte("k")); err != nil || string(got) != "v" {
		t.Fatalf("acknowledged write after a crash of a new store: %q, %v", got, err)
	}
}
