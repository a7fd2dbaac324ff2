package dynamic

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveTables is what the concurrent index tests share. One writer
// registers each table before its AddTable or Replace and publishes the
// live tables (newest first) once the call has returned; readers look up
// random keys of live tables and check that the lookup named some table
// holding the key. Every table ever registered stays known: a lookup may
// name a table that a merge has just replaced, and that table still holds
// the key.
type liveTables struct {
	all    sync.Map // id -> *liveTable
	live   atomic.Pointer[[]*liveTable]
	nextID uint64 // the writer's

	stop             atomic.Bool
	failures, checks atomic.Int64
	readers          sync.WaitGroup
	giveUp           time.Time // when the writer stops waiting for readers (fewChecks)
}

// minConcurrentChecks is how many lookups the readers must have made
// before a writer loop may stop: on a loaded machine (CI runs packages side
// by side on two cores) the readers may not be scheduled at all within a
// test's nominal duration, and a history no lookup ran beside checks
// nothing.
const minConcurrentChecks = 100

// fewChecks reports, for a writer loop's condition, that the readers have
// made fewer than minConcurrentChecks lookups and there is still time to
// wait for them: the writer goes on writing, so the lookups it waits for
// run beside its writes.
func (lt *liveTables) fewChecks() bool {
	return lt.checks.Load() < minConcurrentChecks && time.Now().Before(lt.giveUp)
}

type liveTable struct {
	id   uint64
	keys []uint64
	set  map[uint64]bool
}

func newLiveTables() *liveTables {
	lt := &liveTables{}
	lt.live.Store(&[]*liveTable{})
	return lt
}

// register gives the table of keys the next ID (writer only).
func (lt *liveTables) register(keys []uint64) *liveTable {
	lt.nextID++
	tb := &liveTable{id: lt.nextID, keys: keys, set: make(map[uint64]bool, len(keys))}
	for _, h := range keys {
		tb.set[h] = true
	}
	lt.all.Store(tb.id, tb)
	return tb
}

// tables returns the live tables, newest first.
func (lt *liveTables) tables() []*liveTable { return *lt.live.Load() }

// publish makes ts the live tables.
func (lt *liveTables) publish(ts []*liveTable) { lt.live.Store(&ts) }

// flushed publishes tb as the newest live table.
func (lt *liveTables) flushed(tb *liveTable) {
	lt.publish(append([]*liveTable{tb}, lt.tables()...))
}

// merged publishes m in the place of the k live tables from at.
func (lt *liveTables) merged(at, k int, m *liveTable) {
	cur := lt.tables()
	lt.publish(append(append(append([]*liveTable(nil), cur[:at]...), m), cur[at+k:]...))
}

// read starts n readers on x, reader r drawing from rand.NewPCG(r, seed).
// They skip the keys skip reports (nil: none), such as keys a merge may
// drop, which are gone once its Replace returns.
func (lt *liveTables) read(t *testing.T, x *Index, n int, seed uint64, skip func(h uint64) bool) {
	lt.giveUp = time.Now().Add(time.Minute)
	for r := 0; r < n; r++ {
		lt.readers.Add(1)
		go func(r int) {
			defer lt.readers.Done()
			rng := rand.New(rand.NewPCG(uint64(r), seed))
			var buf []uint64
			for !lt.stop.Load() {
				ts := lt.tables()
				if len(ts) == 0 {
					runtime.Gosched()
					continue
				}
				tb := ts[rng.IntN(len(ts))]
				if len(tb.keys) == 0 {
					continue
				}
				h := tb.keys[rng.IntN(len(tb.keys))]
				if skip != nil && skip(h) {
					continue
				}
				buf = x.LookupHash(h, buf[:0])
				if !lt.named(h, buf) && lt.failures.Add(1) == 1 {
					t.Errorf("key %#x of table %d: lookup named %v", h, tb.id, buf)
				}
				lt.checks.Add(1)
			}
		}(r)
	}
}

// named reports whether one of ids is a table holding h.
func (lt *liveTables) named(h uint64, ids []uint64) bool {
	for _, id := range ids {
		if v, ok := lt.all.Load(id); ok && v.(*liveTable).set[h] {
			return true
		}
	}
	return false
}

// finish stops the readers, fails t if any lookup named no table holding
// its key, and returns how many lookups were checked.
func (lt *liveTables) finish(t *testing.T) int64 {
	lt.stop.Store(true)
	lt.readers.Wait()
	if f := lt.failures.Load(); f != 0 {
		t.Fatalf("%d of %d lookups named no table holding the key", f, lt.checks.Load())
	}
	return lt.checks.Load()
}

// mergeOf returns what a merge of run passes Replace: the tables' IDs, and
// their distinct keys in order, each key drop reports going to dropped
// instead (drop nil: none).
func mergeOf(run []*liveTable, drop func(h uint64) bool) (ids, keys, dropped []uint64) {
	seen := map[uint64]bool{}
	for _, tb := range run {
		ids = append(ids, tb.id)
		for _, h := range tb.keys {
			if seen[h] {
				continue
			}
			seen[h] = true
			if drop != nil && drop(h) {
				dropped = append(dropped, h)
			} else {
				keys = append(keys, h)
			}
		}
	}
	return ids, keys, dropped
}

// checkAllNamed fails t if a key of a live table is not named by a lookup
// that names that table (the writer quiet).
func (lt *liveTables) checkAllNamed(t *testing.T, x *Index) {
	for _, tb := range lt.tables() {
		for _, h := range tb.keys {
			if !holds(x.LookupHash(h, nil), tb.id) {
				t.Fatalf("key %#x of table %d not named after the run", h, tb.id)
			}
		}
	}
}
