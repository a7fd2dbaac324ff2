package pebblestore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// unflushedStore opens a real Pebble v2 store in dir, runs steps against
// it, and closes it without a flush: whatever the last flush left in the
// log stays there for the next open to replay.
func unflushedStore(t *testing.T, dir string, steps func(db *pebble.DB, write func(from, to int))) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(from, to int) {
		t.Helper()
		b := db.NewBatch()
		for i := from; i < to; i++ {
			if err := b.Set([]byte(fmt.Sprintf("key%08d", i)), []byte("a value"), nil); err != nil {
				t.Fatal(err)
			}
			if i%100 == 99 {
				if err := b.Commit(pebble.Sync); err != nil {
					t.Fatal(err)
				}
				b = db.NewBatch()
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	steps(db, write)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadUnflushedCountsTheLiveLog(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) {
		write(0, 3000)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		write(3000, 5000) // 20 batches of 100
	})
	u, err := ReadUnflushed(dir)
	if err != nil || u == nil {
		t.Fatalf("ReadUnflushed: %+v, %v", u, err)
	}
	if u.Writes != 2000 || u.Batches != 20 || len(u.Logs) != 1 || u.Bytes < 2000*15 {
		t.Errorf("unflushed %+v, want 2000 writes in 20 batches in one log", u)
	}
}

// A flushed store's logs hold only flushed writes (obsolete logs kept to
// recycle) or nothing: none is counted.
func TestReadUnflushedNothingAfterAFlush(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) {
		for r := range 4 {
			write(r*1000, (r+1)*1000)
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	})
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if u, err := ReadUnflushed(dir); err != nil || u != nil {
		t.Errorf("flushed store (logs %q): unflushed %+v, %v", logs, u, err)
	}
}

// Pebble reuses an obsolete log's file for a new log: the live log then
// holds its own writes followed by the older log's records. Only its own
// count.
func TestReadUnflushedStopsAtARecycledTail(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) {
		// The first flush leaves this log to recycle; the second flush's
		// new log reuses its file.
		write(0, 3000)
		for range 2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			write(5000, 5010)
		}
	})
	u, err := ReadUnflushed(dir)
	if err != nil || u == nil {
		t.Fatalf("ReadUnflushed: %+v, %v", u, err)
	}
	if u.Writes != 10 || u.Batches != 1 || len(u.Logs) != 1 {
		t.Errorf("unflushed %+v, want the last 10 writes in one batch", u)
	}
	// The live log is a recycled file (it holds more than its own batch),
	// or this test proved nothing.
	info, err := os.Stat(filepath.Join(dir, u.Logs[0]))
	if err != nil || info.Size() < 3000*10 {
		t.Errorf("live log %s: %v bytes, %v: not a recycled file", u.Logs[0], info.Size(), err)
	}
}

// A log whose last batch the owner was writing when it was read (or a
// crash cut) is counted up to that batch, without error.
func TestReadUnflushedTornTail(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) { write(0, 2000) })
	u, err := ReadUnflushed(dir)
	if err != nil || u == nil || u.Writes != 2000 {
		t.Fatalf("before the cut: %+v, %v", u, err)
	}
	path := filepath.Join(dir, u.Logs[0])
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The log ends in the writer's end-of-log mark after its batches, so a
	// cut of its last byte may leave every batch whole; a cut halfway
	// cannot.
	for _, cut := range []int64{info.Size() - 1, info.Size() / 2, 7, 0} {
		if err := os.Truncate(path, cut); err != nil {
			t.Fatal(err)
		}
		v, err := ReadUnflushed(dir)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if v != nil && (v.Writes > u.Writes || v.Writes%100 != 0 || cut == info.Size()/2 && v.Writes == u.Writes) {
			t.Errorf("cut at %d of %d bytes: %+v, want whole batches, fewer than %d writes", cut, info.Size(), v, u.Writes)
		}
		if cut <= 7 && v != nil {
			t.Errorf("cut at %d: %+v, want nothing", cut, v)
		}
	}
}
