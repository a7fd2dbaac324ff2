package kvdemo

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// TestGlobalDroppedKeyLookupDuringReplace: keys written in one table and
// deleted in a newer one, both merged at the oldest end, so the merge
// drops them (tombstones and values). Replace clears the inputs' entries
// of such a key one at a time, so a lookup meanwhile can name the older
// input (the value) without the newer one (the tombstone). A Get on the
// table list from before the compaction, which still lists both, must
// then read the tombstone, never the deleted value. Lookups are made
// while Replace runs and the tables asked afterwards (a Get descheduled
// between the two), each round until one named the older input alone.
func TestGlobalDroppedKeyLookupDuringReplace(t *testing.T) {
	const deleted, kept = 2000, 200
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	seen := 0 // lookups that named the older input alone
	for round := 0; round < rounds && seen == 0; round++ {
		var armed atomic.Bool
		pause := func(at pausePoint) {
			if at == pauseReplacing {
				armed.Store(true)
			}
		}
		db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true, pause: pause})
		key := func(i int) []byte { return fmt.Appendf(nil, "d%05d", i) }
		for i := 0; i < deleted; i++ {
			mustPut(t, db, key(i), []byte("deleted value"))
		}
		for i := 0; i < kept; i++ {
			mustPut(t, db, fmt.Appendf(nil, "k%05d", i), []byte("kept"))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < deleted; i++ {
			if err := db.Delete(key(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		old, err := db.acquire()
		if err != nil {
			t.Fatal(err)
		}
		if len(old.tables) != 2 {
			t.Fatalf("%d tables, want 2", len(old.tables))
		}
		tomb, value := old.tables[0].id, old.tables[1].id
		g := db.filter.(*globalFilter)
		type lookup struct {
			i int
			q filterQuery
		}
		var alone []lookup
		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !armed.Load() && !done.Load() {
			}
			for i := 0; !done.Load(); i = (i + 1) % deleted {
				k := key(i)
				q := g.prepare(k, dynamic.KeyHash(k))
				c := q.cands[:q.ncands]
				if !q.many && slices.Contains(c, value) && !slices.Contains(c, tomb) && len(alone) < 1000 {
					alone = append(alone, lookup{i, q})
				}
			}
		}()
		err = db.compactRun(old, 0, 2)
		done.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		seen += len(alone)
		for _, l := range alone {
			got, err := getWithQuery(t, db, old, key(l.i), l.q)
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("round %d: deleted %s, looked up while Replace cleared it (index named %v): %q, %v; want not found",
					round, key(l.i), l.q.cands[:l.q.ncands], got, err)
				break
			}
		}
		old.release()
		db.Close()
		if t.Failed() {
			return
		}
	}
	t.Logf("%d lookups named the deleted value's table alone", seen)
}
