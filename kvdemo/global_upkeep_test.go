package kvdemo

import (
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// TestGlobalChangeTimesOnlyItsOwnWork: the upkeep figure (ns per indexed
// key) adds up the time each index change reports. A flush whose AddTable
// waits for another writer's change (a compaction's Replace holding the
// lock) must report its own work, not the wait: the wait is the other
// change's, which reports it too, and counting it twice inflates the
// figure by however long compactions take.
func TestGlobalChangeTimesOnlyItsOwnWork(t *testing.T) {
	g := &globalFilter{bitsPerKey: 10}
	hashes := make([]uint64, 1000)
	for i := range hashes {
		hashes[i] = dynamic.KeyHash([]byte{byte(i), byte(i >> 8), 'k'})
	}
	const wait = 300 * time.Millisecond
	g.swapMu.Lock() // another writer's change, under way
	type result struct {
		spent, own time.Duration
		err        error
	}
	done := make(chan result)
	go func() {
		var own time.Duration
		spent, err := g.change(len(hashes), indexChange{add: 1, hashes: hashes}, func(idx *dynamic.Index) error {
			start := time.Now()
			defer func() { own = time.Since(start) }()
			return idx.AddTable(1, hashes)
		})
		done <- result{spent, own, err}
	}()
	time.Sleep(wait)
	g.swapMu.Unlock()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.spent < r.own || r.spent >= wait {
		t.Fatalf("the change reported %v: its own work took %v, the wait for the lock %v", r.spent, r.own, wait)
	}
	for _, h := range hashes {
		if c := g.idx.Load().LookupHash(h, nil); len(c) != 1 || c[0] != 1 {
			t.Fatalf("a key of the table is named as %v", c)
		}
	}
}
