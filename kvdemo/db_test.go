package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

func quiet() *log.Logger { return log.New(io.Discard, "", 0) }

// logBuffer collects a store's warnings for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func open(t testing.TB, dir string, o Options) *DB {
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

// mustHaveKV fails t unless db serves kv(i) for every i < n; what says
// when, for the message.
func mustHaveKV(t testing.TB, db *DB, n int, what string) {
	t.Helper()
	for i := 0; i < n; i++ {
		k, v := kv(i)
		if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: key %d (%s): %q, %v", what, i, k, got, err)
		}
	}
}

func mustPut(t testing.TB, db *DB, k, v []byte) {
	t.Helper()
	if err := db.Put(k, v); err != nil {
		t.Fatalf("Put(%s): %v", k, err)
	}
}

// model is what a store should hold.
type model map[string]string

func (m model) check(t testing.TB, db *DB, when string, keys [][]byte) {
	t.Helper()
	for _, k := range keys {
		got, err := db.Get(k)
		w, live := m[string(k)]
		switch {
		case live && (err != nil || string(got) != w):
			t.Fatalf("%s: Get(%s) = %q, %v; want %q", when, k, got, err, w)
		case !live && !errors.Is(err, ErrNotFound):
			t.Fatalf("%s: Get(%s) of a deleted or absent key = %q, %v", when, k, got, err)
		}
	}
}

func countFiles(t testing.TB, dir, ext string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*."+ext))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

func TestPutGetDeleteOverwrite(t *testing.T) {
	db := open(t, t.TempDir(), Options{})
	defer db.Close()
	k, v := kv(1)
	if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an absent key: %v", err)
	}
	mustPut(t, db, k, v)
	if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	mustPut(t, db, k, []byte("new"))
	if got, _ := db.Get(k); string(got) != "new" {
		t.Fatalf("overwrite: %q", got)
	}
	// Values returned are the caller's: changing one must not change the
	// store.
	got, _ := db.Get(k)
	got[0] = 'X'
	if again, _ := db.Get(k); string(again) != "new" {
		t.Fatalf("Get returned memory the store still uses: %q", again)
	}
	if err := db.Delete(k); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := db.Delete([]byte("never-written")); err != nil {
		t.Fatalf("Delete of an absent key: %v", err)
	}
	mustPut(t, db, []byte("empty-value"), nil)
	if got, err := db.Get([]byte("empty-value")); err != nil || len(got) != 0 {
		t.Fatalf("empty value: %q, %v", got, err)
	}
	st := db.Stats()
	if st.Puts != 3 || st.Deletes != 2 || st.Gets != 7 {
		t.Errorf("counters: puts %d deletes %d gets %d; want 3, 2, 7", st.Puts, st.Deletes, st.Gets)
	}
}

func TestLimits(t *testing.T) {
	db := open(t, t.TempDir(), Options{MaxKeySize: 8, MaxValueSize: 16})
	if err := db.Put(nil, []byte("v")); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := db.Delete([]byte{}); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("Delete of empty key: %v", err)
	}
	if err := db.Put([]byte("123456789"), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long key: %v", err)
	}
	if err := db.Put([]byte("k"), make([]byte, 17)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "max 16") {
		t.Errorf("long value: %v", err)
	}
	if err := db.Put([]byte("12345678"), make([]byte, 16)); err != nil {
		t.Errorf("key and value at their caps: %v", err)
	}
	if _, err := db.Get(nil); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("Get empty key: %v", err)
	}
	if _, err := db.Get([]byte("123456789")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Get long key: %v", err)
	}
	if st := db.Stats(); st.Puts != 1 {
		t.Errorf("refused writes were counted: %d puts", st.Puts)
	}
	db.Close()
	for name, err := range map[string]error{
		"Put":    db.Put([]byte("k"), nil),
		"Delete": db.Delete([]byte("k")),
		"Flush":  db.Flush(),
		"Sync":   db.Sync(),
		"Close":  db.Close(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	db.Stats() // must not panic after Close

	for _, o := range []Options{
		{Filter: "cockoo"},
		{Compression: "lz4"},
		{MaxKeySize: maxKeyCap + 1},
		{MaxValueSize: maxValueCap + 1},
		{MemtableBytes: 100},
		{BitsPerKey: 2},
	} {
		if _, err := Open(t.TempDir(), &o); err == nil {
			t.Errorf("Open accepted %+v", o)
		}
	}
}

// TestEveryFilterFindsEveryKey is the zero-false-negative test: for each
// filter kind, many tables (no compaction, and again with compaction),
// overwrites and deletes spread across tables; every live key must be
// found with its newest value and every deleted or absent key reported
// absent, live and after reopening.
func TestEveryFilterFindsEveryKey(t *testing.T) {
	race.SkipLong(t)
	n := 4_000
	if testing.Short() {
		n = 2_000
	}
	for _, f := range []FilterKind{FilterCuckoo, FilterGlobal, FilterBloom, FilterNone} {
		for _, maxTables := range []int{-1, 4} {
			t.Run(fmt.Sprintf("%s/maxTables=%d", f, maxTables), func(t *testing.T) {
				dir := t.TempDir()
				o := Options{Filter: f, MemtableBytes: 8 << 10, NoSyncEachWrite: true, MaxTables: maxTables, Compression: CompressionSnappy}
				db := open(t, dir, o)
				want := model{}
				var keys [][]byte
				for i := 0; i < n; i++ {
					k, v := kv(i)
					keys = append(keys, k)
					mustPut(t, db, k, v)
					want[string(k)] = string(v)
					if i%7 == 0 { // overwrite an older key, usually in an older table
						k, _ := kv(i / 2)
						mustPut(t, db, k, []byte("over"))
						want[string(k)] = "over"
					}
					if i%11 == 0 {
						k, _ := kv(i / 3)
						db.Delete(k)
						delete(want, string(k))
					}
				}
				for i := n; i < n+n/4; i++ { // absent keys, inside and past the key range
					k, _ := kv(i)
					keys = append(keys, k)
					keys = append(keys, fmt.Appendf(nil, "key%08d-", i/2))
				}
				want.check(t, db, "live", keys)
				st := db.Stats()
				if maxTables < 0 && st.Tables < 10 {
					t.Fatalf("only %d tables: flushes not exercised", st.Tables)
				}
				if maxTables > 0 && st.Compactions == 0 {
					t.Fatalf("no compaction ran over %d flushes", st.Flushes)
				}
				if f != FilterNone && st.TableFilterNegatives == 0 {
					t.Errorf("no table was ever skipped by its filter")
				}
				if f == FilterNone && (st.TableFilterNegatives != 0 || st.FilterFalsePositives != 0) {
					t.Errorf("none: %d filter negatives, %d false positives", st.TableFilterNegatives, st.FilterFalsePositives)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = open(t, dir, Options{MaxTables: maxTables})
				defer db.Close()
				if db.Stats().Filter != f {
					t.Fatalf("reopened with filter %s", db.Stats().Filter)
				}
				want.check(t, db, "reopened", keys)
			})
		}
	}
}

// TestFilterCounters checks the counters' arithmetic on a store whose
// shape is known: for an absent key every table is either skipped by its
// filter or probed in vain.
func TestFilterCounters(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterGlobal, FilterBloom, FilterNone} {
		db := open(t, t.TempDir(), Options{Filter: f, MemtableBytes: 16 << 10, NoSyncEachWrite: true, MaxTables: -1})
		if err := loadEven(db, 3000, 16); err != nil {
			t.Fatal(err)
		}
		before := db.Stats()
		tables := int64(before.Tables)
		const absent = 500
		for i := 0; i < absent; i++ {
			db.Get(evenKey(2*i + 1))
		}
		st := db.Stats()
		neg := st.TableFilterNegatives - before.TableFilterNegatives
		probed := st.TablesProbed - before.TablesProbed
		fp := st.FilterFalsePositives - before.FilterFalsePositives
		if neg+probed != absent*tables {
			t.Errorf("%s: %d skipped + %d probed != %d absent Gets x %d tables", f, neg, probed, absent, tables)
		}
		switch f {
		case FilterNone:
			if fp != 0 || neg != 0 || st.TableFilterBytes != 0 {
				t.Errorf("none: %d false positives, %d negatives, %d table filter bytes", fp, neg, st.TableFilterBytes)
			}
		default:
			if fp != probed || probed > absent*tables/10 || st.TableFilterBytes == 0 {
				t.Errorf("%s: %d probed, %d false positives of %d, %d table filter bytes", f, probed, fp, absent*tables, st.TableFilterBytes)
			}
		}
		// A present key lives in exactly one table: at least that one is
		// probed and it is found.
		if _, err := db.Get(evenKey(2 * 77)); err != nil {
			t.Fatal(err)
		}
		if got := db.Stats().TablesProbed - st.TablesProbed; got < 1 {
			t.Errorf("%s: present key found with %d tables probed", f, got)
		}
		if st.Gets != before.Gets+absent || st.MemFilterBytes == 0 || st.FilterBytes != st.TableFilterBytes+st.MemFilterBytes {
			t.Errorf("%s: gets %d, memtable filter bytes %d, filter bytes %d", f, st.Gets-before.Gets, st.MemFilterBytes, st.FilterBytes)
		}
		db.Close()
	}
}

func TestMemtableFilterAndSkiplist(t *testing.T) {
	db := open(t, t.TempDir(), Options{})
	defer db.Close()
	for i := 0; i < 1000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	mustHaveKV(t, db, 1000, "memtable Get")
	for i := 1000; i < 3000; i++ {
		k, _ := kv(i)
		db.Get(k)
	}
	st := db.Stats()
	if st.Tables != 0 || st.MemFilterNegatives < 1900 {
		t.Errorf("%d tables, %d memtable filter negatives for 2000 absent keys", st.Tables, st.MemFilterNegatives)
	}
}

func TestWALReplayAndTornTail(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	for i := 0; i < 100; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Close()
	forgetCleanClose(t, dir) // a torn tail is what a crash leaves
	// Tear the last record: chop bytes off the log's end and append junk.
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) != 1 {
		t.Fatalf("logs: %v", logs)
	}
	b, _ := os.ReadFile(logs[0])
	os.WriteFile(logs[0], append(b[:len(b)-5], 0xde, 0xad), 0o644)
	var warnings logBuffer
	db = open(t, dir, Options{Logger: log.New(&warnings, "", 0)})
	mustHaveKV(t, db, 99, "after replay")
	if k, _ := kv(99); true {
		if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the torn record was replayed: %v", err)
		}
	}
	if !strings.Contains(warnings.String(), "torn") || db.Stats().TornWALTails != 1 {
		t.Errorf("no warning about the torn tail: %q", warnings.String())
	}
	// Writing after the truncation must produce a log that replays fully.
	k, v := kv(500)
	mustPut(t, db, k, v)
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("write after a truncated tail: %q, %v", got, err)
	}
	if db.Stats().TornWALTails != 0 {
		t.Errorf("the repaired log was torn again")
	}
}

func onlyLog(t *testing.T, dir string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) != 1 {
		t.Fatalf("logs: %v", logs)
	}
	return logs[0]
}

// TestReplayLargerThanMemtable: more unflushed log than one memtable holds
// (a crash during a flush leaves two memtables' worth; here, a store
// reopened with a smaller memtable) is flushed during replay, and a second
// reopen skips what those flushes wrote (the manifest's Seq) instead of
// duplicating it.
func TestReplayLargerThanMemtable(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 20, NoSyncEachWrite: true})
	want := model{}
	var keys [][]byte
	for i := 0; i < 3000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
		want[string(k)] = string(v)
		keys = append(keys, k)
	}
	db.Close()
	if countFiles(t, dir, extTable) != 0 {
		t.Fatal("flushed before the test meant to")
	}
	small := Options{MemtableBytes: 16 << 10, MaxTables: -1}
	db = open(t, dir, small)
	st := db.Stats()
	if st.Tables < 3 || st.Flushes != int64(st.Tables) {
		t.Fatalf("replay into small memtables: %d tables, %d flushes", st.Tables, st.Flushes)
	}
	want.check(t, db, "after replay with flushes", keys)
	k, v := kv(5000)
	mustPut(t, db, k, v)
	want[string(k)] = string(v)
	keys = append(keys, k)
	db.Close()

	db = open(t, dir, small)
	defer db.Close()
	st2 := db.Stats()
	if st2.Tables != st.Tables || st2.Flushes != 0 {
		t.Errorf("second reopen: %d tables (was %d), %d flushes: replay wrote flushed records again", st2.Tables, st.Tables, st2.Flushes)
	}
	if st2.TableKeys+int64(st2.MemtableEntries) != 3001 {
		t.Errorf("%d table entries + %d memtable entries, want 3001", st2.TableKeys, st2.MemtableEntries)
	}
	want.check(t, db, "second reopen", keys)
}

func TestMissingOrCorruptFilterIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 32 << 10, MaxTables: -1}
	db := open(t, dir, o)
	for i := 0; i < 3000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Flush()
	db.Close()
	filters, _ := filepath.Glob(filepath.Join(dir, "*.cf"))
	if len(filters) < 3 {
		t.Fatalf("filters: %v", filters)
	}
	os.Remove(filters[0])
	b, _ := os.ReadFile(filters[1])
	b[len(b)/2] ^= 0xff // a flipped byte in the buckets: only the CRC sees it
	os.WriteFile(filters[1], b, 0o644)
	os.WriteFile(filters[2], b[:len(b)/3], 0o644) // truncated
	var warnings logBuffer
	o.Logger = log.New(&warnings, "", 0)
	db = open(t, dir, o)
	checkAll := func(when string) {
		mustHaveKV(t, db, 3000, when)
	}
	checkAll("while filters are rebuilt")
	waitFor(t, "filters rebuilt", func() bool { return db.Stats().RebuiltFilters == 3 })
	if st := db.Stats(); st.UnfilteredTables != 0 {
		t.Errorf("%d tables still unfiltered after the rebuild", st.UnfilteredTables)
	}
	if strings.Count(warnings.String(), "filter unusable") != 3 {
		t.Errorf("warnings: %q", warnings.String())
	}
	checkAll("after the rebuild")
	// The damaged and truncated filters are evidence: kept whole in lost/
	// and reported, not written over by their rebuilds.
	if st := db.Stats(); st.MovedAside != 2 {
		t.Errorf("MovedAside = %d, want the 2 damaged filters", st.MovedAside)
	}
	for i, want := range [][]byte{b, b[:len(b)/3]} {
		name := filepath.Base(filters[i+1])
		if got, err := os.ReadFile(filepath.Join(dir, lostDir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s not kept whole in lost/: %v", name, err)
		}
		if !strings.Contains(warnings.String(), name+": damaged") {
			t.Errorf("moving %s to lost/ not reported: %q", name, warnings.String())
		}
	}
	db.Close()
	if _, err := os.Stat(filters[0]); err != nil {
		t.Fatalf("missing filter not rewritten: %v", err)
	}
	// The rewritten filters are good: the next open rebuilds nothing.
	db = open(t, dir, o)
	defer db.Close()
	if st := db.Stats(); st.RebuiltFilters != 0 || st.UnfilteredTables != 0 {
		t.Errorf("second open: %d rebuilt, %d unfiltered", st.RebuiltFilters, st.UnfilteredTables)
	}
}

// TestUnfilteredTableIsProbed: a cuckoo store's table without a usable
// filter (as between Open and its rebuild) is searched on every Get, and
// those searches are not counted as false positives of a filter that was
// not there.
func TestUnfilteredTableIsProbed(t *testing.T) {
	db := open(t, t.TempDir(), Options{MemtableBytes: 32 << 10, MaxTables: -1})
	defer db.Close()
	for i := 0; i < 2000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Flush()
	v, _ := db.acquire()
	for _, st := range v.tables {
		st.cf.Store(nil)
	}
	n := len(v.tables)
	v.release()
	before := db.Stats()
	if before.UnfilteredTables != n {
		t.Fatalf("%d unfiltered of %d", before.UnfilteredTables, n)
	}
	for i := 0; i < 2000; i++ {
		k, val := kv(i)
		if got, err := db.Get(k); err != nil || !bytes.Equal(got, val) {
			t.Fatalf("key %d: %q, %v", i, got, err)
		}
	}
	k, _ := kv(99999)
	if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	st := db.Stats()
	if got := st.TablesProbed - before.TablesProbed; got < int64(2000+n) {
		t.Errorf("%d tables probed", got)
	}
	if st.FilterFalsePositives != before.FilterFalsePositives || st.TableFilterNegatives != before.TableFilterNegatives {
		t.Errorf("filter counters moved without filters: %+v", st)
	}
}

// TestCompaction: with few tables allowed, merges run in the background;
// the newest version wins, tombstones vanish once the merge reaches the
// oldest table, and replaced files are removed.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 8 << 10, MaxTables: 3, NoSyncEachWrite: true}
	db := open(t, dir, o)
	want := model{}
	var keys [][]byte
	const n = 1500
	for round := 0; round < 3; round++ {
		for i := 0; i < n; i++ {
			k := fmt.Appendf(nil, "key%05d", i)
			if round == 0 {
				keys = append(keys, k)
			}
			switch {
			case round == 2 && i%3 == 0:
				db.Delete(k)
				delete(want, string(k))
			default:
				v := fmt.Appendf(nil, "r%d-%d", round, i)
				mustPut(t, db, k, v)
				want[string(k)] = string(v)
			}
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "compaction to settle", func() bool { return db.Stats().Tables <= o.MaxTables })
	st := db.Stats()
	if st.Compactions == 0 {
		t.Fatal("no compactions")
	}
	want.check(t, db, "compacted", keys)
	waitFor(t, "replaced tables to be removed", func() bool { return countFiles(t, dir, extTable) == db.Stats().Tables })
	if got := countFiles(t, dir, extFilter); got != st.Tables {
		t.Errorf("%d filter files for %d tables", got, st.Tables)
	}
	db.Close()
	db = open(t, dir, o)
	defer db.Close()
	want.check(t, db, "reopened", keys)
	// Merge everything: MaxTables 1 forces merges down to one table,
	// which includes the oldest, so no tombstone survives.
	db.Close()
	o.MaxTables = 1
	db = open(t, dir, o)
	waitFor(t, "full compaction", func() bool { return db.Stats().Tables == 1 })
	if got := db.Stats().TableKeys; got != int64(len(want)) {
		t.Errorf("one table with %d entries, want %d live keys (tombstones dropped)", got, len(want))
	}
	want.check(t, db, "fully compacted", keys)
}

// TestCompactionOfOnlyTombstones: a merge whose output would be empty
// writes no table at all.
func TestCompactionOfOnlyTombstones(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: -1})
	for i := 0; i < 200; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Flush()
	for i := 0; i < 200; i++ {
		k, _ := kv(i)
		db.Delete(k)
	}
	db.Flush()
	db.Close()
	db = open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: 1})
	defer db.Close()
	waitFor(t, "compaction", func() bool { return db.Stats().Tables == 0 })
	for i := 0; i < 200; i++ {
		k, _ := kv(i)
		if _, err := db.Get(k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted key %s: %v", k, err)
		}
	}
	if countFiles(t, dir, extTable)+countFiles(t, dir, extFilter) != 0 {
		waitFor(t, "files removed", func() bool { return countFiles(t, dir, extTable)+countFiles(t, dir, extFilter) == 0 })
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReadersDuringFlushesAndCompactions: readers must always find keys
// whose Put returned, across memtable switches, flushes and merges that
// retire the tables they are reading. Run with -race.
func TestReadersDuringFlushesAndCompactions(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) { readersDuringFlushesAndCompactions(t, f) })
	}
}

func readersDuringFlushesAndCompactions(t *testing.T, f FilterKind) {
	db := open(t, t.TempDir(), Options{Filter: f, MemtableBytes: 8 << 10, MaxTables: 2, NoSyncEachWrite: true})
	defer db.Close()
	const writers = 2
	perWriter := 2000
	if testing.Short() {
		perWriter = 800
	}
	var done [writers]atomic.Int64
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
				done[w].Store(int64(i + 1))
			}
		}(w)
	}
	var rwg sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 2; r++ {
		rwg.Add(1)
		go func(r int) {
			defer rwg.Done()
			for n := r; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				w := n % writers
				hi := done[w].Load()
				if hi == 0 {
					continue
				}
				i := (int64(n) * 7919) % hi
				k := fmt.Appendf(nil, "w%d-%06d", w, i)
				if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
					t.Errorf("reader: Get(%s) = %q, %v", k, got, err)
					return
				}
				reads.Add(1)
			}
		}(r)
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	st := db.Stats()
	if st.Flushes < 5 || st.Compactions < 2 {
		t.Errorf("%d flushes, %d compactions: not exercised", st.Flushes, st.Compactions)
	}
	t.Logf("%d reads during %d flushes and %d compactions", reads.Load(), st.Flushes, st.Compactions)
}

// TestGroupCommit: concurrent durable writers share fsyncs, and every
// acknowledged write is in the log (replayed after reopen).
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				k := fmt.Appendf(nil, "g%d-%d", w, i)
				if err := db.Put(k, k); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	st := db.Stats()
	if st.WALSyncs == 0 || st.WALSyncs >= st.Puts {
		t.Errorf("%d fsyncs for %d concurrent durable puts: no sharing", st.WALSyncs, st.Puts)
	}
	t.Logf("%d puts, %d fsyncs", st.Puts, st.WALSyncs)
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	for w := 0; w < writers; w++ {
		for i := 0; i < each; i++ {
			k := fmt.Appendf(nil, "g%d-%d", w, i)
			if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
				t.Fatalf("Get(%s) after reopen = %q, %v", k, got, err)
			}
		}
	}
}

func TestBatchedSync(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{NoSyncEachWrite: true, SyncInterval: 5 * time.Millisecond})
	for i := 0; i < 100; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	waitFor(t, "a background sync", func() bool { return db.Stats().WALSyncs > 0 })
	if st := db.Stats(); st.WALSyncs >= 100 {
		t.Errorf("batched mode fsynced %d times for 100 writes", st.WALSyncs)
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	mustHaveKV(t, db, 100, "after Sync and reopen")
}

// TestLargeValues: values far larger than the memtable go through the
// arena, the log and the tables intact.
func TestLargeValues(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 16 << 10, MaxValueSize: 1 << 20}
	db := open(t, dir, o)
	big := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 1<<20) }
	for i := 0; i < 6; i++ {
		k, _ := kv(i)
		mustPut(t, db, k, big(i))
		small, v := kv(100 + i)
		mustPut(t, db, small, v)
	}
	check := func(when string) {
		for i := 0; i < 6; i++ {
			k, _ := kv(i)
			if got, err := db.Get(k); err != nil || !bytes.Equal(got, big(i)) {
				t.Fatalf("%s: 1 MiB value %d: %d bytes, %v", when, i, len(got), err)
			}
		}
	}
	check("live")
	if db.Stats().Tables < 3 {
		t.Errorf("%d tables: each big value should have filled a memtable", db.Stats().Tables)
	}
	db.Close()
	db = open(t, dir, o)
	defer func() { db.Close() }()
	check("reopened")
	db.Close()
	// Reopened with a smaller cap while the log still holds big values:
	// refused with a clear error, not a panic or a silent drop.
	db = open(t, dir, o)
	mustPut(t, db, []byte("tail"), big(7)) // in the log, not yet flushed
	db.Close()
	o.MaxValueSize = 1 << 10
	if _, err := Open(dir, &o); err == nil || !strings.Contains(err.Error(), "MaxValueSize") {
		t.Errorf("reopen with a smaller value cap: %v", err)
	}
	o.MaxValueSize = 1 << 20
	db = open(t, dir, o)
	if got, err := db.Get([]byte("tail")); err != nil || !bytes.Equal(got, big(7)) {
		t.Errorf("after reopening with the right cap: %d bytes, %v", len(got), err)
	}
}

func TestManifestRecordsFilterAndCompression(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{Filter: FilterBloom, Compression: CompressionNone})
	k, v := kv(1)
	mustPut(t, db, k, v)
	db.Flush()
	db.Close()
	db = open(t, dir, Options{})
	if st := db.Stats(); st.Filter != FilterBloom || st.Compression != CompressionNone {
		t.Errorf("reopened as %s/%s", st.Filter, st.Compression)
	}
	if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
		t.Errorf("Get: %q, %v", got, err)
	}
	db.Close()
	if _, err := Open(dir, &Options{Filter: FilterCuckoo, Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "bloom") {
		t.Errorf("opening a bloom store as cuckoo: %v", err)
	}
	if _, err := Open(dir, &Options{Compression: CompressionZSTD, Logger: quiet()}); err == nil {
		t.Errorf("opening an uncompressed store as zstd succeeded")
	}
}

func TestLockAndOrphans(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 10})
	if _, err := Open(dir, &Options{Logger: quiet()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of a store in use: %v", err)
	}
	for i := 0; i < 300; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Close()
	// Leftovers of a crash: a table and filter written but never named,
	// a log older than the manifest's, a half-written temporary file.
	for _, name := range []string{"999990.sst", "999990.cf", "000000.log"} {
		os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, tmpDir, "000123.sst"), []byte("junk"), 0o644)
	db = open(t, dir, Options{MemtableBytes: 4 << 10})
	for _, name := range []string{"999990.sst", "999990.cf", "000000.log", filepath.Join(tmpDir, "000123.sst")} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan %s not removed: %v", name, err)
		}
	}
	// New files are numbered past anything seen, not reusing 999990.
	k, v := kv(1000)
	mustPut(t, db, k, v)
	db.Flush()
	db.Close()
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if last := man.Tables[len(man.Tables)-1]; last <= 999990 {
		t.Errorf("new table numbered %d, at or below an orphan's 999990", last)
	}
	// A table the manifest names must exist: its loss is not papered over.
	os.Remove(fileName(dir, man.Tables[0], extTable))
	if _, err := Open(dir, &Options{Logger: quiet()}); err == nil {
		t.Error("Open succeeded with a table missing")
	}
	// Logs but no manifest: refuse rather than start an empty store.
	os.Remove(filepath.Join(dir, "MANIFEST"))
	if _, err := Open(dir, &Options{Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "MANIFEST") {
		t.Errorf("Open without MANIFEST: %v", err)
	}
}

func TestCorruptManifestAndTable(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 10})
	for i := 0; i < 300; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Flush()
	db.Close()
	man, _ := readManifestFS(vfs.Default, dir)
	tbl := fileName(dir, man.Tables[0], extTable)
	b, _ := os.ReadFile(tbl)
	damaged := slicesClone(b)
	damaged[len(damaged)/3] ^= 0xff
	os.WriteFile(tbl, damaged, 0o644)
	// A damaged or truncated table is contained (see faults_test.go): the
	// store opens, and a Get that needs the table reports it.
	for _, bad := range [][]byte{damaged, b[:len(b)/2]} {
		os.WriteFile(tbl, bad, 0o644)
		db, err := Open(dir, &Options{Logger: quiet()})
		if err != nil {
			t.Fatalf("Open with a damaged table: %v", err)
		}
		k, _ := kv(0)
		if _, err := db.Get(k); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(tbl)[:6]) {
			t.Errorf("Get through a damaged table: %v", err)
		}
		if st := db.Stats(); st.DamagedTables != 1 {
			t.Errorf("DamagedTables = %d", st.DamagedTables)
		}
		db.Close()
	}
	os.WriteFile(tbl, b, 0o644)
	os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("{not json"), 0o644)
	if _, err := Open(dir, &Options{Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "MANIFEST") {
		t.Errorf("corrupt MANIFEST: %v", err)
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// TestFlushFailureIsReportedAndRetried: when tables cannot be written, the
// memtable's records stay in its log, writers that need the flush get an
// error instead of hanging, and once writing works again the flush
// completes and nothing is lost.
func TestFlushFailureIsReportedAndRetried(t *testing.T) {
	dir := t.TempDir()
	var warnings logBuffer
	db := open(t, dir, Options{MemtableBytes: 4 << 10, Logger: log.New(&warnings, "", 0)})
	defer db.Close()
	// Tables are written under tmp/; without it every flush fails.
	os.RemoveAll(filepath.Join(dir, tmpDir))
	want := model{}
	var keys [][]byte
	var failed error
	for i := 0; i < 2000 && failed == nil; i++ {
		k, v := kv(i)
		if err := db.Put(k, v); err != nil {
			failed = err
			break
		}
		want[string(k)] = string(v)
		keys = append(keys, k)
	}
	if failed == nil || !strings.Contains(failed.Error(), "cannot be flushed") {
		t.Fatalf("writes past a failing flush: %v", failed)
	}
	if !strings.Contains(warnings.String(), "flush failed") {
		t.Errorf("no warning: %q", warnings.String())
	}
	want.check(t, db, "while flushing fails", keys) // reads still work
	os.Mkdir(filepath.Join(dir, tmpDir), 0o755)
	waitFor(t, "the retried flush", func() bool { return db.Stats().Flushes > 0 })
	k, v := kv(9999)
	mustPut(t, db, k, v)
	want[string(k)] = string(v)
	keys = append(keys, k)
	want.check(t, db, "after recovery", keys)
}

// TestCloseRacesOperations: Close while Gets and Puts run; each either
// succeeds or reports ErrClosed, nothing panics or races.
func TestCloseRacesOperations(t *testing.T) {
	for round := 0; round < 3; round++ {
		dir := t.TempDir()
		db := open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: 2, NoSyncEachWrite: true})
		for i := 0; i < 500; i++ {
			k, v := kv(i)
			mustPut(t, db, k, v)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					k, v := kv(i % 1000)
					var err error
					if g%2 == 0 {
						err = db.Put(k, v)
					} else {
						_, err = db.Get(k)
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("during Close: %v", err)
						return
					}
				}
			}(g)
		}
		time.Sleep(20 * time.Millisecond)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		db = open(t, dir, Options{})
		mustHaveKV(t, db, 500, "after Close race")
		db.Close()
	}
}

// evenKey and loadEven: n keys at even i loaded in a random order, so
// that odd i are absent keys inside every table's key range (the
// workload package's data set, which this package cannot import).
func evenKey(i int) []byte { return fmt.Appendf(nil, "user%012d", i) }

func loadEven(db *DB, n, valueSize int) error {
	r := mathrand.New(mathrand.NewPCG(uint64(n), 3))
	value := make([]byte, valueSize)
	for _, i := range r.Perm(n) {
		k := evenKey(2 * i)
		copy(value, k)
		if err := db.Put(k, value); err != nil {
			return err
		}
	}
	if err := db.Flush(); err != nil {
		return err
	}
	return db.Sync()
}

// TestTablesReadNotMapped: on the operating system's filesystem, tables
// are read with read(2), not memory-mapped (an EIO on a mapped page would
// be a SIGBUS; see "Tables in memory" in kvdemo/README.md).
func TestTablesReadNotMapped(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: -1})
	for i := 0; i < 300; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Flush()
	db.Close()
	db = open(t, dir, Options{MaxTables: -1})
	defer db.Close()
	v, _ := db.acquire()
	defer v.release()
	if len(v.tables) < 2 {
		t.Fatalf("%d tables", len(v.tables))
	}
	for _, st := range v.tables {
		if st.t.MmapFile.Fd != nil || !st.t.IsInmemory {
			t.Errorf("table %06d is memory-mapped", st.id)
		}
	}
}

// TestGlobalHotKeysInEveryTable: the same keys rewritten before every
// flush, so each has a version in every table: more entries for one key
// than its bucket pair has slots (eight), across 30 tables, plus keys
// that live in one table only. Every Get must return the newest value,
// live and after reopening (where the index is rebuilt from the tables).
func TestGlobalHotKeysInEveryTable(t *testing.T) {
	dir := t.TempDir()
	o := Options{Filter: FilterGlobal, MemtableBytes: 1 << 20, MaxTables: -1, NoSyncEachWrite: true}
	db := open(t, dir, o)
	const hot, tables = 60, 30
	want := map[string]string{}
	for tb := 0; tb < tables; tb++ {
		for h := 0; h < hot; h++ {
			k := fmt.Sprintf("hot-%03d", h)
			v := fmt.Sprintf("v%d-%d", tb, h)
			mustPut(t, db, []byte(k), []byte(v))
			want[k] = v
		}
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("cold-%02d-%03d", tb, i)
			mustPut(t, db, []byte(k), []byte(k))
			want[k] = k
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		for k, v := range want {
			got, err := db.Get([]byte(k))
			if err != nil || string(got) != v {
				t.Fatalf("%s: Get(%s) = %q, %v; want %q", when, k, got, err, v)
			}
		}
		st := db.Stats()
		if st.Tables != tables {
			t.Fatalf("%s: %d tables", when, st.Tables)
		}
		t.Logf("%s: %+v", when, st.Index)
		if st.Index.Stashed == 0 && st.Index.Always == 0 {
			t.Errorf("%s: no bucket pair overflowed: the test exercises nothing", when)
		}
	}
	check("live")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, Options{MaxTables: -1})
	defer db.Close()
	check("reopened")
}

// TestGlobalFreshStoreIndexSize: a store created empty sizes its index
// from its first table and grows it by doubling, so ten equal tables fit
// in a few segments (it once started from 1024 entries and grew to eight).
func TestGlobalFreshStoreIndexSize(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MemtableBytes: 256 << 10, MaxTables: -1, NoSyncEachWrite: true})
	defer db.Close()
	for i := 0; i < 30_000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	t.Logf("%d tables: %+v", st.Tables, st.Index)
	if st.Tables < 5 || st.Index.Segments > 3 || st.Index.BitsPerKey > 30 {
		t.Errorf("%d tables: index %+v", st.Tables, st.Index)
	}
}

// TestGlobalIndexMergesInPlace: with the global index, compactions move
// their inputs' entries to the merged table in place (dynamic.Index's
// Replace) while readers Get keys that are never deleted, and writers
// overwrite some keys and delete others, so that merges at the oldest end
// drop tombstones (keys the index must forget). No Get may miss; at the
// end the index names exactly the live tables, none unfiltered, deleted
// keys stay deleted, and its entries are no more than one per key and
// table.
func TestGlobalIndexMergesInPlace(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{Filter: FilterGlobal, MemtableBytes: 8 << 10, MaxTables: 3, NoSyncEachWrite: true})
	// Closed before the directory is removed: its background merges
	// would otherwise still be writing there.
	defer db.Close()
	const stable = 1500
	for i := 0; i < stable; i++ {
		k := fmt.Appendf(nil, "s%06d", i)
		if err := db.Put(k, k); err != nil {
			t.Fatal(err)
		}
	}
	readers := startStableReaders(t, db, 2, stable)
	churn := 3000
	if testing.Short() {
		churn = 1200
	}
	for i := 0; i < churn; i++ {
		k := fmt.Appendf(nil, "c%06d", i%700)
		var err error
		if i%3 == 2 {
			err = db.Delete(k)
		} else {
			err = db.Put(k, fmt.Appendf(nil, "v%d", i))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reads, _ := readers.stop()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every churned key ends as its last write left it.
	last := map[int]int{}
	for i := 0; i < churn; i++ {
		last[i%700] = i
	}
	for k, i := range last {
		got, err := db.Get(fmt.Appendf(nil, "c%06d", k))
		if i%3 == 2 {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted c%06d: %q, %v", k, got, err)
			}
		} else if err != nil || string(got) != fmt.Sprintf("v%d", i) {
			t.Fatalf("c%06d: %q, %v; want v%d", k, got, err, i)
		}
	}
	// A compaction may still be between its table-list edit and its
	// Replace (its output unfiltered until then): wait for the store to
	// settle into an index that names every table.
	var st Stats
	var ix dynamic.IndexStats
	settled := func() bool {
		st = db.Stats()
		ix = st.Index
		return st.UnfilteredTables == 0 && ix.Tables == st.Tables
	}
	deadline := time.Now().Add(20 * time.Second)
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st.Compactions < 3 || reads == 0 {
		t.Fatalf("%d compactions, %d reads: not exercised", st.Compactions, reads)
	}
	if st.UnfilteredTables != 0 || ix.Tables != st.Tables {
		t.Fatalf("after 20 s, index names %d tables, store has %d (%d unfiltered)", ix.Tables, st.Tables, st.UnfilteredTables)
	}
	if ix.Entries > st.TableKeys {
		t.Fatalf("index holds %d entries for %d table entries: entries of merged-away tables left behind (%+v)", ix.Entries, st.TableKeys, ix)
	}
	t.Logf("%d reads during %d flushes and %d compactions; %+v", reads, st.Flushes, st.Compactions, ix)
}

// TestGlobalOldViewAcrossMerges: a Get on a view opened before two
// compactions (its tables merged into M1, then M1 merged into M2, both
// Replaced in the index in place) must still find every key in the
// tables that view lists: the index names only M2 by then, and the old
// view's tables are read through what they were merged into.
func TestGlobalOldViewAcrossMerges(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true})
	defer db.Close()
	want := map[string]string{}
	for tb := 0; tb < 8; tb++ {
		for i := 0; i < 400; i++ {
			k := fmt.Sprintf("k%05d", (tb*300+i)%2000) // overlaps: versions in several tables
			v := fmt.Sprintf("t%d-%d", tb, i)
			if err := db.Put([]byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		for i := 0; i < 20; i++ {
			k := fmt.Sprintf("k%05d", (tb*97+i*13)%2000)
			if err := db.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	old, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer old.release()
	if len(old.tables) != 8 {
		t.Fatalf("%d tables, want 8", len(old.tables))
	}
	check := func(v *view, when string) {
		for i := 0; i < 2000; i++ {
			k := fmt.Sprintf("k%05d", i)
			got, err := db.getIn(v, []byte(k))
			w, ok := want[k]
			switch {
			case !ok && !errors.Is(err, ErrNotFound):
				t.Fatalf("%s: deleted %s: %q, %v", when, k, got, err)
			case ok && (err != nil || string(got) != w):
				t.Fatalf("%s: %s = %q, %v; want %q", when, k, got, err, w)
			}
		}
	}
	// Merge the four oldest (tombstones dropped), then the result with
	// the three tables above it.
	merge := func(start, width int) {
		v, err := db.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer v.release()
		if err := db.compactRun(v, start, width); err != nil {
			t.Fatal(err)
		}
	}
	merge(4, 4)
	check(old, "old view after one merge")
	merge(1, 4)
	check(old, "old view after two merges")
	cur, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.release()
	check(cur, "current view")
	if len(cur.tables) != 2 || db.Stats().Index.Tables != 2 {
		t.Fatalf("%d tables, index names %d; want 2", len(cur.tables), db.Stats().Index.Tables)
	}
	m2 := cur.tables[1]
	for _, st := range old.tables[1:] {
		into := st.mergedInto.Load()
		for into != nil && into != m2 {
			into = into.mergedInto.Load()
		}
		if into != m2 {
			t.Fatalf("table %06d of the old view does not lead to the second merge", st.id)
		}
	}
}

// TestGlobalIndexRebuildsWhileServing: a store that grows from nothing
// grows its index by segments; the index is rebuilt in one segment in the
// background (flushes and compactions going on, their changes replayed on
// the new index) and swapped in, while readers Get every key written so
// far. No Get may miss, and the rebuilds must have happened.
func TestGlobalIndexRebuildsWhileServing(t *testing.T) {
	for _, maxTables := range []int{-1, 4} {
		db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MemtableBytes: 16 << 10, MaxTables: maxTables, NoSyncEachWrite: true})
		var written atomic.Int64
		stop := make(chan struct{})
		var rwg sync.WaitGroup
		for r := 0; r < 2; r++ {
			rwg.Add(1)
			go func(r int) {
				defer rwg.Done()
				for n := r; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					hi := written.Load()
					if hi == 0 {
						continue
					}
					k := fmt.Appendf(nil, "r%07d", (int64(n)*7919)%hi)
					if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
						t.Errorf("reader: Get(%s) = %q, %v", k, got, err)
						return
					}
				}
			}(r)
		}
		n := 30_000
		if testing.Short() {
			n = 12_000
		}
		for i := 0; i < n; i++ {
			k := fmt.Appendf(nil, "r%07d", i)
			if err := db.Put(k, k); err != nil {
				t.Fatal(err)
			}
			written.Store(int64(i + 1))
		}
		close(stop)
		rwg.Wait()
		g := db.filter.(*globalFilter)
		st := db.Stats()
		t.Logf("max tables %d: %d rebuilds, %d flushes, %d compactions, %+v", maxTables, g.rebuilds.Load(), st.Flushes, st.Compactions, st.Index)
		if g.rebuilds.Load() == 0 {
			t.Errorf("max tables %d: the index was never rebuilt", maxTables)
		}
		for i := 0; i < n; i++ {
			k := fmt.Appendf(nil, "r%07d", i)
			if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
				t.Fatalf("max tables %d: Get(%s) = %q, %v", maxTables, k, got, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// stableReaders are goroutines that Get the keys s000000..s(stable-1),
// each its own value, round and round until stopped; the first Get that
// misses or returns another value fails the test.
type stableReaders struct {
	done          chan struct{}
	wg            sync.WaitGroup
	reads, misses atomic.Int64
}

func startStableReaders(t *testing.T, db *DB, readers, stable int) *stableReaders {
	sr := &stableReaders{done: make(chan struct{})}
	for r := 0; r < readers; r++ {
		sr.wg.Add(1)
		go func(r int) {
			defer sr.wg.Done()
			for n := r; ; n += readers {
				select {
				case <-sr.done:
					return
				default:
				}
				k := fmt.Appendf(nil, "s%06d", (n*7919)%stable)
				if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
					if sr.misses.Add(1) == 1 {
						t.Errorf("reader: Get(%s) = %q, %v", k, got, err)
					}
				}
				sr.reads.Add(1)
			}
		}(r)
	}
	return sr
}

// stop ends the readers and returns how many Gets they made and missed.
func (sr *stableReaders) stop() (reads, misses int64) {
	close(sr.done)
	sr.wg.Wait()
	return sr.reads.Load(), sr.misses.Load()
}

// TestGlobalIndexConsolidatesWhenIdle: a bulk load leaves the index grown
// by segments; once no flush has come for a while, it is rebuilt in one
// segment in the background, with fewer bytes per entry, while readers
// Get every key; after it, every key is still found.
func TestGlobalIndexConsolidatesWhenIdle(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MemtableBytes: 32 << 10, MaxTables: -1, NoSyncEachWrite: true})
	defer db.Close()
	n, before, rebuilds := loadUntilSegments(t, db)
	g := db.filter.(*globalFilter)
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for m := 0; ; m++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Appendf(nil, "c%07d", (m*7919)%n)
			if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
				t.Errorf("Get(%s) = %q, %v", k, got, err)
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for (g.rebuilds.Load() == rebuilds || db.Stats().IndexRebuilding) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	rwg.Wait()
	checkConsolidated(t, db, n, before)
}

// TestGlobalSettle: Settle rebuilds a grown index in one segment at once,
// in a store whose own idle rebuild is off, and returns when it is done.
func TestGlobalSettle(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MemtableBytes: 32 << 10, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true})
	defer db.Close()
	n, before, rebuilds := loadUntilSegments(t, db)
	if err := db.Settle(); err != nil {
		t.Fatal(err)
	}
	if got := db.filter.(*globalFilter).rebuilds.Load(); got != rebuilds+1 || db.Stats().IndexRebuilding {
		t.Fatalf("Settle returned after %d rebuilds (had %d), rebuilding %v", got, rebuilds, db.Stats().IndexRebuilding)
	}
	checkConsolidated(t, db, n, before)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Settle(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Settle on a closed store: %v", err)
	}
}

// loadUntilSegments loads batches of keys c0000000.. until, with no rebuild
// running, the index has grown past one segment and by the share an idle
// rebuild waits for (a rebuild after a flush may consolidate it first). It
// returns the keys written, the index's stats and the rebuilds so far.
func loadUntilSegments(t *testing.T, db *DB) (int, dynamic.IndexStats, int64) {
	t.Helper()
	g := db.filter.(*globalFilter)
	n := 0
	for batch := 0; batch < 100; batch++ {
		for i := 0; i < 2000; i++ {
			k := fmt.Appendf(nil, "c%07d", n)
			if err := db.Put(k, k); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for db.Stats().IndexRebuilding {
			time.Sleep(time.Millisecond)
		}
		st, rebuilds := db.Stats().Index, g.rebuilds.Load()
		if built := g.builtWith.Load(); st.Segments >= 2 && st.Entries >= built+built/8 {
			return n, st, rebuilds
		}
	}
	t.Fatalf("after %d keys the index is still in one segment: %+v", n, db.Stats().Index)
	return 0, dynamic.IndexStats{}, 0
}

// checkConsolidated: the index is in one segment, denser than before, and
// every key 0..n-1 is found.
func checkConsolidated(t *testing.T, db *DB, n int, before dynamic.IndexStats) {
	t.Helper()
	after := db.Stats().Index
	t.Logf("before %+v\nafter %+v", before, after)
	if after.Segments != 1 || after.BitsPerKey >= before.BitsPerKey {
		t.Fatalf("%d segment(s) at %.1f bits/entry, from %d at %.1f", after.Segments, after.BitsPerKey, before.Segments, before.BitsPerKey)
	}
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "c%07d", i)
		if got, err := db.Get(k); err != nil || !bytes.Equal(got, k) {
			t.Fatalf("after the rebuild: Get(%s) = %q, %v", k, got, err)
		}
	}
}

// TestBadFilterKeptWhenTableRetired: a filter file Open could not use
// whose table leaves the store before the rebuild reached it (a
// compaction retired it) is moved to lost/ by the table's removal, not
// removed with the table.
func TestBadFilterKeptWhenTableRetired(t *testing.T) {
	dir := t.TempDir()
	var warnings logBuffer
	db := open(t, dir, Options{MemtableBytes: 32 << 10, MaxTables: -1, Logger: log.New(&warnings, "", 0)})
	defer db.Close()
	for i := 0; i < 1000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	v, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	st := v.tables[0]
	v.release()
	// As attach leaves a table whose filter file it read and rejected.
	path := fileName(dir, st.id, extFilter)
	if err := os.WriteFile(path, []byte("a damaged filter"), 0o644); err != nil {
		t.Fatal(err)
	}
	st.badFilter.Store(true)
	db.filter.drop(st)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the filter file is still in place: %v", err)
	}
	name := filepath.Base(path)
	if got, err := os.ReadFile(filepath.Join(dir, lostDir, name)); err != nil || string(got) != "a damaged filter" {
		t.Errorf("the unusable filter was not kept in lost/: %q, %v", got, err)
	}
	if !strings.Contains(warnings.String(), name+": damaged") {
		t.Errorf("not reported: %q", warnings.String())
	}
	// Once: a second removal has nothing to keep.
	db.filter.drop(st)
	if n := db.Stats().MovedAside; n != 1 {
		t.Errorf("MovedAside = %d, want 1", n)
	}
}
