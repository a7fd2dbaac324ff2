package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func quiet() *log.Logger { return log.New(io.Discard, "", 0) }

func open(t *testing.T, dir string, o Options) *DB {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet()
	}
	db, err := Open(dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func kv(i int) ([]byte, []byte) {
	return fmt.Appendf(nil, "key%08d", i), fmt.Appendf(nil, "value-%d", i)
}

func TestPutGetDeleteOverwrite(t *testing.T) {
	db := open(t, t.TempDir(), Options{})
	defer db.Close()
	k, v := kv(1)
	if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an absent key: %v", err)
	}
	if err := db.Put(k, v); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := db.Put(k, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Get(k); string(got) != "new" {
		t.Fatalf("overwrite: %q", got)
	}
	if err := db.Delete(k); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
}

func TestLimits(t *testing.T) {
	db := open(t, t.TempDir(), Options{MaxKeySize: 8, MaxValueSize: 16})
	if err := db.Put(nil, []byte("v")); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := db.Put([]byte("123456789"), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long key: %v", err)
	}
	if err := db.Put([]byte("k"), make([]byte, 17)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long value: %v", err)
	}
	if _, err := db.Get(nil); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("Get empty key: %v", err)
	}
	db.Close()
	if err := db.Put([]byte("k"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := Open(t.TempDir(), &Options{Filter: "cockoo"}); err == nil {
		t.Error("unknown filter accepted")
	}
}

// TestEveryFilterFindsEveryKey writes enough to flush many tables, with
// overwrites and deletes spread across them, for each filter kind; every
// live key must be found with its newest value, before and after reopening.
func TestEveryFilterFindsEveryKey(t *testing.T) {
	n := 8_000
	if testing.Short() {
		n = 3_000
	}
	for _, f := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone} {
		dir := t.TempDir()
		o := Options{Filter: f, MemtableBytes: 32 << 10, NoSyncEachWrite: true}
		db := open(t, dir, o)
		want := map[string]string{}
		for i := 0; i < n; i++ {
			k, v := kv(i)
			db.Put(k, v)
			want[string(k)] = string(v)
			if i%7 == 0 { // overwrite an older key, usually in an older table
				k, _ := kv(i / 2)
				db.Put(k, []byte("over"))
				want[string(k)] = "over"
			}
			if i%11 == 0 {
				k, _ := kv(i / 3)
				db.Delete(k)
				delete(want, string(k))
			}
		}
		check := func(db *DB, when string) {
			for i := 0; i < n; i++ {
				k, _ := kv(i)
				got, err := db.Get(k)
				w, live := want[string(k)]
				switch {
				case live && (err != nil || string(got) != w):
					t.Fatalf("%s %s: Get(%s) = %q, %v; want %q", f, when, k, got, err, w)
				case !live && !errors.Is(err, ErrNotFound):
					t.Fatalf("%s %s: deleted key %s: %q, %v", f, when, k, got, err)
				}
			}
		}
		check(db, "live")
		st := db.Stats()
		if st.Tables < 5 {
			t.Fatalf("%s: only %d tables: flushes not exercised", f, st.Tables)
		}
		for i := n; i < n+2000; i++ { // absent keys
			k, _ := kv(i)
			if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: absent key: %v", f, err)
			}
		}
		st = db.Stats()
		if f != FilterNone && st.TableFilterNegatives == 0 {
			t.Errorf("%s: no table was ever skipped by its filter", f)
		}
		if f == FilterNone && st.TableFilterNegatives != 0 {
			t.Errorf("none: %d filter negatives", st.TableFilterNegatives)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = open(t, dir, o)
		check(db, "reopened")
		db.Close()
	}
}

func TestWALReplayAndTornTail(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	for i := 0; i < 100; i++ {
		k, v := kv(i)
		db.Put(k, v)
	}
	db.Close()
	// Tear the last record: chop bytes off the log's end and append junk.
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) != 1 {
		t.Fatalf("logs: %v", logs)
	}
	b, _ := os.ReadFile(logs[0])
	os.WriteFile(logs[0], append(b[:len(b)-5], 0xde, 0xad), 0o644)
	var warnings bytes.Buffer
	db = open(t, dir, Options{Logger: log.New(&warnings, "", 0)})
	defer db.Close()
	for i := 0; i < 99; i++ {
		k, v := kv(i)
		if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("key %d after replay: %q, %v", i, got, err)
		}
	}
	if k, _ := kv(99); true {
		if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the torn record was replayed: %v", err)
		}
	}
	if !bytes.Contains(warnings.Bytes(), []byte("torn")) {
		t.Errorf("no warning about the torn tail: %q", warnings.String())
	}
	// Writing after the truncation must produce a log that replays fully.
	k, v := kv(500)
	db.Put(k, v)
	db.Close()
	db = open(t, dir, Options{})
	if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("write after a truncated tail: %q, %v", got, err)
	}
	db.Close()
}

func TestMissingOrCorruptFilterIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 32 << 10}
	db := open(t, dir, o)
	for i := 0; i < 3000; i++ {
		k, v := kv(i)
		db.Put(k, v)
	}
	db.Flush()
	db.Close()
	filters, _ := filepath.Glob(filepath.Join(dir, "*.cf"))
	if len(filters) < 2 {
		t.Fatalf("filters: %v", filters)
	}
	os.Remove(filters[0])
	b, _ := os.ReadFile(filters[1])
	b[len(b)/2] ^= 0xff // a flipped byte in the buckets: only the CRC sees it
	os.WriteFile(filters[1], b, 0o644)
	db = open(t, dir, o)
	defer db.Close()
	if st := db.Stats(); st.RebuiltFilters != 2 {
		t.Fatalf("rebuilt %d filters, want 2", st.RebuiltFilters)
	}
	for i := 0; i < 3000; i++ {
		k, v := kv(i)
		if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("key %d with a damaged filter: %q, %v", i, got, err)
		}
	}
	if _, err := os.Stat(filters[0]); err != nil {
		t.Fatalf("missing filter not rewritten: %v", err)
	}
}

// TestConcurrentReadersAndWriters: readers must always find keys whose Put
// returned, across memtable switches and flushes. Run with -race.
func TestConcurrentReadersAndWriters(t *testing.T) {
	db := open(t, t.TempDir(), Options{MemtableBytes: 16 << 10, NoSyncEachWrite: true})
	defer db.Close()
	const writers, perWriter = 2, 1500
	var done [writers]int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				k := fmt.Appendf(nil, "w%d-%06d", w, i)
				if err := db.Put(k, k); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done[w] = int64(i + 1)
				mu.Unlock()
			}
		}(w)
	}
	var rwg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rwg.Add(1)
		go func(r int) {
			defer rwg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				w := n % writers
				mu.Lock()
				hi := done[w]
				mu.Unlock()
				if hi == 0 {
					continue
				}
				i := (int64(n) * 7919) % hi
				k := fmt.Appendf(nil, "w%d-%06d", w, i)
				if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
					t.Errorf("reader: Get(%s) = %q, %v", k, got, err)
					return
				}
			}
		}(r)
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	if db.Stats().Tables < 3 {
		t.Errorf("only %d tables: flushes during reads not exercised", db.Stats().Tables)
	}
}
