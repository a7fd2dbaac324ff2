package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/v2"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// TestInspectReportsUnflushedWrites: keys written after the last flush
// are in the write-ahead log only, in no table. inspect counts the tables
// and says how many writes the live log holds, in a note and in -json's
// "unflushed". A real Pebble v2 and v1 store each: 3,000 keys flushed
// into a table, then 2,000 more left in the log by a close without a
// flush (written without syncs: Close writes the log out).
func TestInspectReportsUnflushedWrites(t *testing.T) {
	// Each opens a store in dir and returns its Set (without sync: Close
	// writes the log out), Flush and Close.
	type store struct {
		set          func(k, v []byte) error
		flush, close func() error
	}
	stores := map[string]func(dir string) store{
		"pebble2": func(dir string) store {
			o := &pebble.Options{}
			o.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
			db, err := pebble.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			return store{func(k, v []byte) error { return db.Set(k, v, pebble.NoSync) }, db.Flush, db.Close}
		},
		"pebble1": func(dir string) store {
			o := &pebble1.Options{}
			o.Levels = make([]pebble1.LevelOptions, 1)
			o.Levels[0].FilterPolicy = pebblev1.NewPolicy(10)
			db, err := pebble1.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			return store{func(k, v []byte) error { return db.Set(k, v, pebble1.NoSync) }, db.Flush, db.Close}
		},
	}
	build := func(t *testing.T, dir string, open func(string) store) {
		s := open(dir)
		write := func(from, to int) {
			for i := from; i < to; i++ {
				if err := s.set([]byte(fmt.Sprintf("key%08d", i)), []byte("a value")); err != nil {
					t.Fatal(err)
				}
			}
		}
		write(0, 3000)
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		write(3000, 5000)
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			build(t, dir, open)
			r := inspectJSON(t, dir)
			if r.Keys != 3000 {
				t.Errorf("%d keys in tables, want the 3000 flushed", r.Keys)
			}
			if u := r.Unflushed; u == nil || u.Writes != 2000 || u.Batches != 2000 || len(u.Logs) != 1 {
				t.Fatalf("unflushed %+v, want 2000 writes, one a batch, in one log", u)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"inspect", "-probes", "1000", dir}, &out, &errb); code != 0 {
				t.Fatalf("inspect exit %d: %s", code, errb.String())
			}
			if want := "2000 writes in 2000 batches"; !strings.Contains(out.String(), "note: write-ahead log (") || !strings.Contains(out.String(), want) {
				t.Errorf("the report misses %q:\n%s", want, out.String())
			}
		})
	}
}

// TestInspectNoUnflushedNoteWhenFlushed: a store whose writes are all in
// tables gets no note of its logs, though obsolete logs Pebble keeps to
// recycle still lie in the directory.
func TestInspectNoUnflushedNoteWhenFlushed(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 20000, policy: uniformPolicy(10)})
	r := inspectJSON(t, dir)
	if r.Unflushed != nil {
		t.Errorf("flushed store: unflushed %+v", r.Unflushed)
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "write-ahead") {
			t.Errorf("flushed store noted: %q", n)
		}
	}
}
