package kvdemo

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// tableBytes builds a Badger table holding keys, each with its own value
// prefixed by tag, with the store's table options.
func tableBytes(t *testing.T, db *DB, tag string, keys []string) []byte {
	t.Helper()
	b := table.NewTableBuilder(db.tOpt)
	defer b.Close()
	for _, k := range keys {
		b.Add(y.KeyWithTs([]byte(k), 1), y.ValueStruct{Value: []byte(tag + k)}, 0)
	}
	return b.Finish()
}

// TestBlockCacheNeverServesAnotherTable opens two different tables under
// one file number, one after the other, in a store with the block cache
// on: the second must answer from its own blocks, never from blocks the
// first left in the cache (a file number comes back when a table is
// discarded, after a failed flush say).
func TestBlockCacheNeverServesAnotherTable(t *testing.T) {
	db, err := Open(t.TempDir(), &Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.blockCache == nil {
		t.Fatal("the default store has no block cache")
	}
	var a, b []string
	for i := range 5000 {
		a = append(a, fmt.Sprintf("key%06d", 2*i))
		b = append(b, fmt.Sprintf("key%06d", 2*i+1))
	}
	const id = 77
	read := func(st *sstable, key, want string) {
		t.Helper()
		vs, ok, err := st.get(y.KeyWithTs([]byte(key), math.MaxUint64), []byte(key))
		switch {
		case err != nil:
			t.Fatalf("%s: %v", key, err)
		case want == "" && ok:
			t.Fatalf("%s: found %q in a table that does not hold it", key, vs.Value)
		case want != "" && (!ok || string(vs.Value) != want):
			t.Fatalf("%s: got %q (found %v), want %q", key, vs.Value, ok, want)
		}
	}
	first, err := db.openTable(id, tableBytes(t, db, "A", a))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range a {
		read(first, k, "A"+k) // every block decoded, and offered to the cache
	}
	first.close()
	second, err := db.openTable(id, tableBytes(t, db, "B", b))
	if err != nil {
		t.Fatal(err)
	}
	defer second.close()
	for i := range a {
		read(second, b[i], "B"+b[i])
		read(second, a[i], "")
	}
}

// TestBlockCacheOff checks which stores get a cache (a negative size and
// a store without compression get none), that each answers, and that
// Stats reports the cache's bound.
func TestBlockCacheOff(t *testing.T) {
	race.SkipLong(t)
	for _, c := range []struct {
		size int64
		comp Compression
		want int64
	}{{-1, CompressionZSTD, 0}, {0, CompressionZSTD, 64 << 20}, {1 << 20, CompressionSnappy, 1 << 20}, {1 << 20, CompressionNone, 0}} {
		size := c.size
		db, err := Open(t.TempDir(), &Options{BlockCacheBytes: size, Compression: c.comp, MemtableBytes: 64 << 10, Logger: log.New(io.Discard, "", 0)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3000 {
			if err := db.Put(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "v%05d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := range 3000 {
			v, err := db.Get(fmt.Appendf(nil, "k%05d", i))
			if err != nil || string(v) != fmt.Sprintf("v%05d", i) {
				t.Fatalf("size %d: key %d: %q, %v", size, i, v, err)
			}
		}
		st := db.Stats()
		if st.BlockCacheBytes != c.want || (db.blockCache == nil) != (c.want == 0) {
			t.Errorf("size %d, %s: Stats.BlockCacheBytes %d, want %d", size, c.comp, st.BlockCacheBytes, c.want)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBlockCacheKeepsCheckedCopy: with the block cache on, a block that
// reads back different after it was decoded (a flipped bit in the table's
// bytes, as in TestFaultTableReadAfterOpen) is answered from the copy the
// cache checked, or reported as ErrCorrupt naming the table when the
// cache no longer holds it: never a wrong value or a false "not found".
// A store without compression has no cache (TestBlockCacheOff).
func TestBlockCacheKeepsCheckedCopy(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{Compression: CompressionZSTD, MemtableBytes: 1 << 20, MaxTables: -1})
	defer db.Close()
	const per = 300
	flushTables(t, db, 3, per)
	v, _ := db.acquire()
	defer v.release()
	mid := v.tables[1]
	for i := 0; i < per; i++ { // decode every block once, with the bytes intact
		if _, err := db.Get(fmt.Appendf(nil, "t1-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	db.blockCache.Wait()   // the cache's sets are applied in the background
	mid.t.Data[40] ^= 0x04 // inside the first data block
	served := 0
	for i := 0; i < per; i++ {
		k := fmt.Sprintf("t1-%04d", i)
		got, err := db.Get([]byte(k))
		switch {
		case err == nil && string(got) != k:
			t.Fatalf("%s = %q: a wrong value", k, got)
		case err == nil:
			served++
		case !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%06d", mid.id)):
			t.Fatalf("%s: %v (want the value or ErrCorrupt naming table %06d)", k, err, mid.id)
		}
	}
	if served == 0 {
		t.Fatal("no key was served from the cached copy of the damaged block's table")
	}
	t.Logf("%d of %d keys served", served, per)
}

// TestCloseWhileGetsRead: Close returns while Gets still hold views and
// read tables through the block cache; the cache is closed only when the
// last of them lets go (closing it under a read panicked inside
// ristretto), and every Get ends with its value or ErrClosed.
func TestCloseWhileGetsRead(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 1 << 20, MaxTables: -1, BlockCacheBytes: 256 << 10, Logger: log.New(io.Discard, "", 0)}
	db := open(t, dir, o)
	const n = 20_000
	for i := 0; i < n; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	for r := 0; r < rounds; r++ {
		db := open(t, dir, o)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := g; ; i = (i + 7919) % n {
					k, v := kv(i)
					got, err := db.Get(k)
					switch {
					case errors.Is(err, ErrClosed):
						return
					case err != nil:
						errs <- fmt.Errorf("%s: %v", k, err)
						return
					case string(got) != string(v):
						errs <- fmt.Errorf("%s = %q, want %q", k, got, v)
						return
					}
				}
			}(g)
		}
		time.Sleep(2 * time.Millisecond)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}
