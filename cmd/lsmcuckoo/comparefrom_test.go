package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// userKey is the n user keys the Badger and kvdemo stores below hold.
func userKey(i int) []byte { return []byte(fmt.Sprintf("acct/%06d", i)) }

// A Badger directory whose tables hold several versions of each key: two
// rounds of writes in one memtable, a third after a reopen, in another.
func versionedBadger(t *testing.T, n int) string {
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
				if err := wb.Set(userKey(i*7919%n), []byte{byte(round)}); err != nil {
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

// A kvdemo store of several tables, each key written twice.
func versionedKvdemo(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	db, err := kvdemo.Open(dir, &kvdemo.Options{MemtableBytes: 128 << 10, NoSyncEachWrite: true, MaxTables: -1})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < n; i++ {
			if err := db.Put(userKey(i*7919%n), []byte{byte(round)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// compare -from reads a Badger v4 directory's and a kvdemo store's tables
// without writing into them: the store's reader hands out every user key,
// without Badger's version suffix; the sample holds each once; the table
// sizes come from the tables.
func TestCompareFromBadgerTables(t *testing.T) {
	const n = 5000
	for _, c := range []struct {
		name, format string
		dir          string
	}{
		{"badger", "Badger v4", versionedBadger(t, n)},
		{"kvdemo", "kvdemo", versionedKvdemo(t, n)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := hashDir(t, c.dir)
			format, sampleKeys, err := storeSampler(c.dir)
			if err != nil || format != c.format {
				t.Fatalf("format %q, %v", format, err)
			}
			seen := map[string]bool{}
			smp, err := sampleKeys(c.dir, func(k []byte) { seen[string(k)] = true })
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if !seen[string(userKey(i))] {
					t.Fatalf("key %q not handed out", userKey(i))
				}
			}
			if len(seen) != n {
				t.Fatalf("%d distinct keys handed out, want %d (a version suffix left on?)", len(seen), n)
			}
			tables := 0
			for l := range smp.TableKeys {
				tables += len(smp.TableKeys[l])
			}
			if tables < 2 {
				t.Fatalf("%d tables; the test wants several", tables)
			}
			r, stdout, _ := compareJSON(t, "-from", c.dir, "-bits", "10")
			if after := hashDir(t, c.dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatal("compare -from changed the store's files")
			}
			if r.Keys.Sampled != n || r.Keys.Read != n || r.Keys.Encoding != "store" || r.Keys.Format != c.format || r.Keys.Prefixes {
				t.Fatalf("keys %+v, want %d sampled of %d read", r.Keys, n, n)
			}
			if len(r.TableKeys) == 0 || r.TableKeys[len(r.TableKeys)-1] > n {
				t.Fatalf("table sizes %v", r.TableKeys)
			}
			if !strings.Contains(stdout, "pebble-bloom/10") || !strings.Contains(stdout, "the "+c.format+" store") {
				t.Fatalf("output:\n%s", stdout)
			}
			checkRows(t, r)
		})
	}
}
