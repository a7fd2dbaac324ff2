package kvdemo

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4/y"
	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// getWithQuery is getIn's table loop with the index lookup q made
// beforehand: a Get whose prepare ran at one moment and whose tables are
// asked at a later one (the goroutine descheduled in between).
func getWithQuery(t *testing.T, db *DB, v *view, key []byte, q filterQuery) ([]byte, error) {
	t.Helper()
	for _, st := range v.tables {
		if db.filter.mayContain(st, q) == filterAbsent {
			continue
		}
		vs, ok, err := st.get(y.KeyWithTs(key, math.MaxUint64), key)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if vs.Meta&metaDelete != 0 {
			return nil, ErrNotFound
		}
		return vs.Value, nil
	}
	return nil, ErrNotFound
}

// TestGlobalGetLookupBeforeReplace: a Get takes the table list that
// already holds a compaction's output M (the list switches before merged
// runs Replace), makes its one index lookup before Replace starts (the
// index names only the inputs then), and asks the tables after merged
// returned (M indexed, its inputs no longer in the Get's list). M holds
// every key; the Get must still read it.
func TestGlobalGetLookupBeforeReplace(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true})
	defer db.Close()
	want := map[string]string{}
	for tb := 0; tb < 4; tb++ {
		for i := 0; i < 300; i++ {
			k := fmt.Sprintf("k%05d", tb*200+i) // overlaps: versions in two tables
			v := fmt.Sprintf("t%d-%d", tb, i)
			mustPut(t, db, []byte(k), []byte(v))
			want[k] = v
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	g := db.filter.(*globalFilter)
	// Between the list switch and Replace the index is as it is now:
	// compactRun's build does not touch it.
	qs := map[string]filterQuery{}
	for k := range want {
		qs[k] = g.prepare([]byte(k), dynamic.KeyHash([]byte(k)))
	}
	v, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.compactRun(v, 0, 4); err != nil {
		t.Fatal(err)
	}
	v.release()
	cur, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.release()
	if len(cur.tables) != 1 {
		t.Fatalf("%d tables after the merge, want 1", len(cur.tables))
	}
	missed := 0
	for k, w := range want {
		got, err := getWithQuery(t, db, cur, []byte(k), qs[k])
		if err != nil || string(got) != w {
			if missed == 0 {
				t.Errorf("Get(%s) looked up before Replace, tables asked after: %q, %v; want %q", k, got, err, w)
			}
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d keys missed", missed, len(want))
	}
}

// TestGlobalRebuildBetweenReplaceAndIndexed: a background rebuild starts
// (tracking on, view taken) just after a compaction's Replace returned,
// before merged marks the output M indexed. The Replace was not recorded
// (tracking was off), so the new index holds M only if the rebuild reads
// M as indexed; once swapped in, every Get must still find M's keys.
func TestGlobalRebuildBetweenReplaceAndIndexed(t *testing.T) {
	// Rebuilds run by hand here: none may start on its own.
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true})
	defer db.Close()
	want := map[string]string{}
	for tb := 0; tb < 5; tb++ {
		for i := 0; i < 300; i++ {
			k := fmt.Sprintf("k%05d", tb*200+i)
			v := fmt.Sprintf("t%d-%d", tb, i)
			mustPut(t, db, []byte(k), []byte(v))
			want[k] = v
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	g := db.filter.(*globalFilter)
	rebuilt := false
	globalTestHookReplaced = func() {
		// What maybeRebuild and its goroutine do, here synchronously.
		g.swapMu.Lock()
		g.tracking, g.changes = true, nil
		g.swapMu.Unlock()
		v, err := db.acquire()
		if err != nil {
			t.Error(err)
			return
		}
		defer v.release()
		g.rebuildIndex(v)
		rebuilt = true
	}
	defer func() { globalTestHookReplaced = nil }()
	v, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	err = db.compactRun(v, 1, 4) // the four oldest; the newest stays apart
	v.release()
	globalTestHookReplaced = nil
	if err != nil {
		t.Fatal(err)
	}
	if !rebuilt || g.rebuilds.Load() != 1 {
		t.Fatalf("rebuilt %v, %d rebuilds: not exercised", rebuilt, g.rebuilds.Load())
	}
	missed := 0
	for k, w := range want {
		got, err := db.Get([]byte(k))
		if err != nil || string(got) != w {
			if missed == 0 {
				t.Errorf("Get(%s) after a rebuild between Replace and merged's end: %q, %v; want %q", k, got, err, w)
			}
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d keys missed", missed, len(want))
	}
	if ix := db.Stats().Index; ix.Tables != 2 {
		t.Errorf("index names %d tables, store has 2", ix.Tables)
	}
}

// TestGlobalStressGetsAcrossMerges: more readers than cores Get keys that
// never change (they sit in tables being merged over and over) while a
// writer overwrites and deletes other keys, so flushes, compactions and
// index rebuilds keep running. Readers are descheduled at every point of
// a Get, including between its index lookup and its table reads; no Get
// may miss. Run with -race.
func TestGlobalStressGetsAcrossMerges(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MemtableBytes: 8 << 10, MaxTables: 3, NoSyncEachWrite: true})
	defer db.Close()
	const stable = 2000
	for i := 0; i < stable; i++ {
		k := fmt.Appendf(nil, "s%06d", i)
		mustPut(t, db, k, k)
	}
	readers := startStableReaders(t, db, 6, stable)
	churn := 6000
	if testing.Short() {
		churn = 2000
	}
	for i := 0; i < churn; i++ {
		k := fmt.Appendf(nil, "c%06d", i%900)
		if i%3 == 2 {
			if err := db.Delete(k); err != nil {
				t.Fatal(err)
			}
		} else {
			mustPut(t, db, k, fmt.Appendf(nil, "v%d", i))
		}
	}
	reads, misses := readers.stop()
	st := db.Stats()
	t.Logf("%d reads, %d misses, %d flushes, %d compactions, %d rebuilds", reads, misses, st.Flushes, st.Compactions, db.filter.(*globalFilter).rebuilds.Load())
	if misses > 0 {
		t.Fatalf("%d of %d Gets missed a key", misses, reads)
	}
	if st.Compactions < 3 || reads == 0 {
		t.Fatalf("%d compactions, %d reads: not exercised", st.Compactions, reads)
	}
}

// TestGlobalOldViewAcrossRebuildsAndMerges: Gets hold a view, and index
// lookups made on one index, across a rebuild and swap, a merge of the
// view's oldest tables, a second rebuild and a merge of the first merge's
// output with newer tables. Keys have versions in several tables and
// deletes. Every Get, whichever view and whichever lookup it made, must
// see each key as its view holds it.
func TestGlobalOldViewAcrossRebuildsAndMerges(t *testing.T) {
	// Rebuilds run by hand here: none may start on its own.
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true})
	defer db.Close()
	const keys = 2000
	want := map[string]string{}
	for tb := 0; tb < 8; tb++ {
		for i := 0; i < 400; i++ {
			k := fmt.Sprintf("k%05d", (tb*300+i)%keys)
			v := fmt.Sprintf("t%d-%d", tb, i)
			mustPut(t, db, []byte(k), []byte(v))
			want[k] = v
		}
		for i := 0; i < 20; i++ {
			k := fmt.Sprintf("k%05d", (tb*97+i*13)%keys)
			if err := db.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	g := db.filter.(*globalFilter)
	rebuild := func() {
		g.swapMu.Lock()
		g.tracking, g.changes = true, nil
		g.swapMu.Unlock()
		v, err := db.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer v.release()
		g.rebuildIndex(v)
	}
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
	prepared := func() map[string]filterQuery {
		qs := map[string]filterQuery{}
		for i := 0; i < keys; i++ {
			k := fmt.Sprintf("k%05d", i)
			qs[k] = g.prepare([]byte(k), dynamic.KeyHash([]byte(k)))
		}
		return qs
	}
	check := func(v *view, qs map[string]filterQuery, when string) {
		t.Helper()
		for i := 0; i < keys; i++ {
			k := fmt.Sprintf("k%05d", i)
			var got []byte
			var err error
			if qs != nil {
				got, err = getWithQuery(t, db, v, []byte(k), qs[k])
			} else {
				got, err = db.getIn(v, []byte(k))
			}
			w, ok := want[k]
			switch {
			case !ok && !errors.Is(err, ErrNotFound):
				t.Fatalf("%s: deleted %s: %q, %v", when, k, got, err)
			case ok && (err != nil || string(got) != w):
				t.Fatalf("%s: %s = %q, %v; want %q", when, k, got, err, w)
			}
		}
	}
	old, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer old.release()
	q0 := prepared() // on the index built table by table
	rebuild()
	check(old, nil, "old view after a rebuild")
	check(old, q0, "old view, lookups on the replaced index")
	q1 := prepared()
	merge(4, 4)
	mid, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer mid.release()
	check(old, nil, "old view after a merge")
	check(old, q1, "old view, lookups before the merge")
	check(mid, q1, "new view, lookups before the merge")
	rebuild()
	q2 := prepared()
	merge(1, 4)
	cur, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.release()
	for _, c := range []struct {
		v    *view
		qs   map[string]filterQuery
		when string
	}{
		{old, nil, "old view after two merges"},
		{old, q0, "old view, lookups from before everything"},
		{old, q2, "old view, lookups before the second merge"},
		{mid, nil, "middle view after the second merge"},
		{mid, q1, "middle view, lookups before the first merge"},
		{mid, q2, "middle view, lookups before the second merge"},
		{cur, nil, "current view"},
		{cur, q1, "current view, lookups before the first merge"},
		{cur, q2, "current view, lookups before the second merge"},
	} {
		check(c.v, c.qs, c.when)
	}
	if g.rebuilds.Load() != 2 || len(cur.tables) != 2 || db.Stats().Index.Tables != 2 {
		t.Fatalf("%d rebuilds, %d tables, index names %d; want 2, 2, 2", g.rebuilds.Load(), len(cur.tables), db.Stats().Index.Tables)
	}
}

// TestGlobalTombstoneLookupBeforeReplace: keys written in the oldest
// table, then overwritten or deleted in newer tables that a compaction
// merges (tombstones kept: an older table exists). A Get that looked the
// key up before the merge's Replace and asks the tables after it must
// see the overwrite or the delete, never the old value in the oldest
// table.
func TestGlobalTombstoneLookupBeforeReplace(t *testing.T) {
	db := open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true})
	defer db.Close()
	const keys = 600
	want := map[string]string{}
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("k%05d", i)
		mustPut(t, db, []byte(k), []byte("old"))
		want[k] = "old"
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for tb := 0; tb < 3; tb++ {
		for i := tb; i < keys; i += 3 {
			k := fmt.Sprintf("k%05d", i)
			if i%2 == 0 {
				if err := db.Delete([]byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(want, k)
			} else {
				v := fmt.Sprintf("new%d", tb)
				mustPut(t, db, []byte(k), []byte(v))
				want[k] = v
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	g := db.filter.(*globalFilter)
	qs := map[string]filterQuery{}
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("k%05d", i)
		qs[k] = g.prepare([]byte(k), dynamic.KeyHash([]byte(k)))
	}
	v, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	err = db.compactRun(v, 0, 3) // the three newest; the oldest stays below
	v.release()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.release()
	if len(cur.tables) != 2 {
		t.Fatalf("%d tables, want 2", len(cur.tables))
	}
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("k%05d", i)
		got, err := getWithQuery(t, db, cur, []byte(k), qs[k])
		w, ok := want[k]
		switch {
		case !ok && !errors.Is(err, ErrNotFound):
			t.Fatalf("deleted %s, looked up before Replace: %q, %v", k, got, err)
		case ok && (err != nil || string(got) != w):
			t.Fatalf("%s, looked up before Replace: %q, %v; want %q", k, got, err, w)
		}
	}
}

// TestGlobalRebuildRecordsWhatHappensAroundItsView: the real maybeRebuild
// and rebuildIndex, with compactions and a flush made at the moments they
// are most exposed: after the rebuild starts recording index changes and
// before it takes its view (a compaction's Replace then must be recorded:
// a view taken before it lists the inputs, which Replace leaves unindexed,
// and not the output), and after the new index is built and before the
// recorded changes are replayed on it (a flush, and a merge of a table the
// new index holds with one it does not). Every key must be found after the
// new index is swapped in.
func TestGlobalRebuildRecordsWhatHappensAroundItsView(t *testing.T) {
	var db *DB
	var armed atomic.Bool
	want := map[string]string{}
	put := func(k, v string) error {
		want[k] = v
		return db.Put([]byte(k), []byte(v))
	}
	var hookErr error
	compact := func(start, width int) {
		v, err := db.acquire()
		if err == nil {
			err = db.compactRun(v, start, width)
			v.release()
		}
		if err != nil && hookErr == nil {
			hookErr = err
		}
	}
	pause := func(at pausePoint) {
		if !armed.Load() {
			return
		}
		switch at {
		case pauseRebuildTracking:
			compact(1, 4) // the four oldest tables
		case pauseRebuildBuilt:
			armed.Store(false)
			for i := 0; i < 300; i++ {
				if err := put(fmt.Sprintf("k%05d", 2000+i), "late"); err != nil && hookErr == nil {
					hookErr = err
				}
			}
			if err := db.Flush(); err != nil && hookErr == nil {
				hookErr = err
			}
			compact(0, 2) // the flushed table and the newest before it
		}
	}
	// Compactions and rebuilds run only when the test says.
	db = open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true, pause: pause})
	defer db.Close()
	for tb := 0; tb < 5; tb++ {
		for i := 0; i < 300; i++ {
			if err := put(fmt.Sprintf("k%05d", tb*200+i), fmt.Sprintf("t%d-%d", tb, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	g := db.filter.(*globalFilter)
	// The first index was sized for a few tables like the first: five
	// grew it by a segment, which an idle store (Settle) rebuilds.
	if st := db.Stats().Index; st.Segments < 2 || g.rebuilds.Load() != 0 {
		t.Fatalf("index %+v after %d rebuilds: not the state this test needs", st, g.rebuilds.Load())
	}
	armed.Store(true)
	if err := db.Settle(); err != nil {
		t.Fatal(err)
	}
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if armed.Load() || g.rebuilds.Load() != 1 || db.Stats().Compactions != 2 {
		t.Fatalf("armed %v, %d rebuilds, %d compactions: not exercised", armed.Load(), g.rebuilds.Load(), db.Stats().Compactions)
	}
	missed := 0
	for k, w := range want {
		got, err := db.Get([]byte(k))
		if err != nil || string(got) != w {
			if missed == 0 {
				t.Errorf("Get(%s) after the rebuild: %q, %v; want %q", k, got, err, w)
			}
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d keys missed", missed, len(want))
	}
	if st := db.Stats(); st.Index.Tables != st.Tables {
		t.Errorf("index names %d tables, store has %d", st.Index.Tables, st.Tables)
	}
}

// TestGlobalInputsReadWhileReplaceRuns: from the moment a compaction's
// Replace may start rewriting its inputs' entries to name the merge M, a
// lookup can name M for a key an input holds, and a Get on an older table
// list (the inputs, not M) must read that input; and a Get on the new list
// whose lookup came before Replace named only the inputs, so it must read
// M, before Replace returns and after. Checked at that moment (the pause
// point just before Replace) with the lookups such Gets can make.
func TestGlobalInputsReadWhileReplaceRuns(t *testing.T) {
	var db *DB
	var old *view // the table list before the compaction
	var armed atomic.Bool
	var failures []string
	var before []filterQuery // lookups made before Replace, by Gets on the new list
	var merge *sstable
	pause := func(at pausePoint) {
		if at != pauseReplacing || !armed.Swap(false) {
			return
		}
		g := db.filter.(*globalFilter)
		cur, err := db.acquire()
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		defer cur.release()
		merge = cur.tables[1]
		inputs := old.tables[1:5]
		for _, in := range inputs {
			// What a lookup mid-Replace may say: the merge holds the key.
			q := filterQuery{key: []byte("k"), cands: [4]uint64{merge.id}, ncands: 1, epoch: g.epoch.Load()}
			if db.filter.mayContain(in, q) == filterAbsent {
				failures = append(failures, fmt.Sprintf("input %06d ruled out by a lookup naming its merge %06d", in.id, merge.id))
			}
			// What a lookup before Replace says: the input holds it.
			q = filterQuery{key: []byte("k"), cands: [4]uint64{in.id}, ncands: 1, epoch: g.epoch.Load()}
			if db.filter.mayContain(merge, q) == filterAbsent {
				failures = append(failures, fmt.Sprintf("merge %06d ruled out, before Replace, by a lookup naming its input %06d", merge.id, in.id))
			}
			before = append(before, q)
		}
	}
	db = open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true, pause: pause})
	defer db.Close()
	for tb := 0; tb < 5; tb++ {
		for i := 0; i < 100; i++ {
			mustPut(t, db, fmt.Appendf(nil, "k%05d", tb*100+i), []byte("v"))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	old = v
	armed.Store(true)
	err = db.compactRun(v, 1, 4) // the four oldest
	v.release()
	if err != nil {
		t.Fatal(err)
	}
	if merge == nil {
		t.Fatal("the pause before Replace was not reached")
	}
	for _, q := range before {
		if db.filter.mayContain(merge, q) == filterAbsent {
			failures = append(failures, fmt.Sprintf("merge %06d ruled out, after Replace, by a lookup made before it naming an input", merge.id))
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
}

// TestGlobalScreenWhileOutputIsIndexed: a Get whose index lookup named
// only a merge's input (the Replace had not run) screens the merge's
// output on a view that lists it, while merged marks the output indexed.
// Whatever it reads of that marking, it must search the output. Screening
// once read indexedAt before indexed, and then could see indexedAt from
// before the marking and indexed from after: "absent" for every key the
// output holds. The window is two loads wide; a writer marking fresh
// outputs in a loop meets it within a few thousand screens.
func TestGlobalScreenWhileOutputIsIndexed(t *testing.T) {
	g := &globalFilter{}
	const input, output = 1, 2
	// Looked up before the Replace (epoch 0): the index named the input.
	q := filterQuery{cands: [4]uint64{input}, ncands: 1, epoch: 0}
	var cur atomic.Pointer[sstable]
	cur.Store(&sstable{id: output})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			st := &sstable{id: output}
			cur.Store(st)
			st.indexedInEpoch(1) // as merged does, under the first epoch
		}
	}()
	screens := 500_000
	if testing.Short() {
		screens = 100_000
	}
	absent := 0
	for range screens {
		if g.screen(cur.Load(), &q) == filterAbsent {
			absent++
		}
	}
	stop.Store(true)
	wg.Wait()
	if absent > 0 {
		t.Fatalf("%d of %d screens of the output answered absent for a key the lookup named under its input", absent, screens)
	}
}
