package kvdemo

import (
	"fmt"
	"testing"
)

// TestGlobalRebuildWhileMergeListed: a background rebuild runs whole
// (tracking on, view taken, new index built and swapped in) after a
// compaction's output M took its inputs' place in the table list and
// before merged moves the inputs' entries to M. The rebuild's view lists
// M, not yet indexed, and not the inputs, so the new index holds neither.
// A Get still holding the table list from before the compaction reads
// the inputs: it must find every key they hold, on the new index, before
// merged runs and after.
func TestGlobalRebuildWhileMergeListed(t *testing.T) {
	var db *DB
	var old *view // the table list before the compaction
	want := map[string]string{}
	var failures []string
	check := func(when string) {
		missed := 0
		for k, w := range want {
			got, err := db.getIn(old, []byte(k))
			if err != nil || string(got) != w {
				if missed == 0 {
					failures = append(failures, fmt.Sprintf("%s: Get(%s) on the list before the compaction: %q, %v; want %q", when, k, got, err, w))
				}
				missed++
			}
		}
		if missed > 0 {
			failures = append(failures, fmt.Sprintf("%s: %d of %d keys missed", when, missed, len(want)))
		}
	}
	rebuilt := false
	pause := func(at pausePoint) {
		if at != pauseMergeListed || rebuilt {
			return
		}
		rebuilt = true
		// What maybeRebuild and its goroutine do, here synchronously.
		g := db.filter.(*globalFilter)
		g.swapMu.Lock()
		g.tracking, g.changes = true, nil
		g.swapMu.Unlock()
		v, err := db.acquire()
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		defer v.release()
		g.rebuildIndex(v)
		check("rebuilt before merged")
	}
	db = open(t, t.TempDir(), Options{Filter: FilterGlobal, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true, pause: pause})
	defer db.Close()
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
	var err error
	if old, err = db.acquire(); err != nil {
		t.Fatal(err)
	}
	defer old.release()
	if err := db.compactRun(old, 1, 4); err != nil { // the four oldest
		t.Fatal(err)
	}
	if !rebuilt {
		t.Fatal("the pause after the compaction's edit was not reached")
	}
	check("after merged")
	for _, f := range failures {
		t.Error(f)
	}
	cur, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.release()
	for k, w := range want {
		if got, err := db.getIn(cur, []byte(k)); err != nil || string(got) != w {
			t.Fatalf("Get(%s) on the current list: %q, %v; want %q", k, got, err, w)
		}
	}
}
