package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// versionedStore writes n keys three times over, each round its own write
// batch: the first two rounds into one memtable, so its table holds two
// versions of each key, and the third after a reopen, so each key is in two
// tables.
func versionedStore(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	opt := badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(8 << 20).
		WithValueThreshold(1 << 10).WithSyncWrites(false)
	for _, rounds := range [][]int{{0, 1}, {2}} {
		db, err := badger.Open(opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, round := range rounds {
			wb := db.NewWriteBatch()
			for i := 0; i < n; i++ {
				if err := wb.Set([]byte(fmt.Sprintf("key%06d", i*7919%n)), []byte{byte(round)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := wb.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Every user key of the store is handed out, without Badger's version
// suffix and at most once per table, and the tables' key counts add up to
// what was handed out.
func TestSampleKeys(t *testing.T) {
	const n = 8000
	dir := versionedStore(t, n)
	seen := map[string]int{}
	s, err := SampleKeys(dir, func(k []byte) { seen[string(k)]++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d distinct keys, want %d", len(seen), n)
	}
	handed, tables := 0, 0
	for k, c := range seen {
		var i int
		if _, err := fmt.Sscanf(k, "key%06d", &i); err != nil || len(k) != 9 {
			t.Fatalf("key %q is not a user key", k)
		}
		if c != 2 {
			t.Fatalf("key %q handed %d times, want once from each of its 2 tables", k, c)
		}
		handed += c
	}
	sum := 0
	for l := range s.TableKeys {
		for _, c := range s.TableKeys[l] {
			sum += c
			tables++
		}
	}
	if sum != handed || tables != 2 || s.Comparer != "badger" {
		t.Fatalf("%d tables count %d keys, %d handed out; comparer %q", tables, sum, handed, s.Comparer)
	}
	// The tables hold more entries than user keys: versions of a key in
	// one table were handed out once.
	snap, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries := uint64(0)
	for l := range snap.Levels {
		for _, tb := range snap.Levels[l] {
			entries += tb.NumEntries
		}
	}
	if entries <= uint64(handed) {
		t.Fatalf("%d entries in the tables, %d keys handed out: no table holds two versions of a key", entries, handed)
	}
}

// A table gone when read is ErrVanished, for the caller to start again; a
// damaged table is an error naming it, never a panic.
func TestSampleKeysVanishedAndDamaged(t *testing.T) {
	dir := versionedStore(t, 4000)
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) < 2 {
		t.Fatalf("%d tables; the test wants several", len(ssts))
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = SampleKeys(dir, func([]byte) {})
	if err == nil || errors.Is(err, pebblestore.ErrVanished) || !strings.Contains(err.Error(), filepath.Base(ssts[0])) {
		t.Fatalf("damaged table: %v", err)
	}
	t.Logf("damaged table: %v", err)
	if err := os.Remove(ssts[0]); err != nil {
		t.Fatal(err)
	}
	if _, err = SampleKeys(dir, func([]byte) {}); !errors.Is(err, pebblestore.ErrVanished) {
		t.Fatalf("removed table: %v", err)
	}
}
