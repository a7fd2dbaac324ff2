package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexLookupAcrossGrowthDuringReplace: a Replace whose merged table
// holds keys new to the index (an input that was never indexed) grows the
// index by a segment; the keys of an indexed input, whose entries all sit
// in the older segment, then get their entries in the new one, and their
// input entries are cleared once every key has its own. A lookup that
// loaded the segment list before the growth and reads the older segment
// after those clears must not miss the key: it sees neither the input's
// entry nor the new segment.
func TestIndexLookupAcrossGrowthDuringReplace(t *testing.T) {
	const seed = 7
	x := newIndexSeeded(200, 10, seed)
	keysA := hashesOf(testkeys.Random(150, 16, 1))
	fresh := hashesOf(testkeys.Random(150, 16, 2))
	if err := x.AddTable(1, keysA); err != nil {
		t.Fatal(err)
	}
	if n := len(*x.segs.Load()); n != 1 {
		t.Fatalf("%d segments before the Replace, want 1", n)
	}
	s0 := (*x.segs.Load())[0]
	k := keysA[0]
	hashes := append(append([]uint64(nil), fresh...), keysA...)

	startLookup := make(chan struct{})
	lookupInOld := make(chan struct{})
	cleared := make(chan struct{})
	lookupDone := make(chan struct{})
	recoded, inOld := 0, false
	idxTestHookRecoded = func() {
		if recoded++; recoded == 1 {
			close(startLookup)
			<-lookupInOld
		}
	}
	idxTestHookCleared = func() {
		close(cleared)
		<-lookupDone
	}
	idxTestHookAfterFirstRead = func(s *idxSegment) {
		if s == s0 && !inOld {
			inOld = true
			close(lookupInOld)
			<-cleared
		}
	}
	defer func() {
		idxTestHookRecoded, idxTestHookCleared, idxTestHookAfterFirstRead = nil, nil, nil
	}()
	errc := make(chan error, 1)
	go func() { errc <- x.Replace([]uint64{1}, 2, hashes, nil) }()
	<-startLookup
	got := x.LookupHash(k, nil)
	close(lookupDone)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	segs := *x.segs.Load()
	if len(segs) != 2 || !inOld {
		t.Fatalf("%d segments, lookup paused in the old one: %v: not exercised", len(segs), inOld)
	}
	// The scenario: k's entry for the merge is in the new segment.
	p := x.probeOf(k)
	ti := x.book.Load().tables[x.byID[2]]
	v := x.slotValue(p, ti.code, uint(ti.length))
	s1 := segs[1]
	i1 := s1.primary(p.hi)
	if !x.bucketHas(s1, i1, v) && !x.bucketHas(s1, x.alt(s1, i1, p.tag), v) {
		t.Fatal("the key's merged entry is not in the new segment: not exercised")
	}
	if !holds(got, 1) && !holds(got, 2) {
		t.Fatalf("lookup across the Replace named %v: neither the input nor the merge", got)
	}
	if !holds(x.LookupHash(k, nil), 2) {
		t.Fatal("after the Replace the key does not name the merge")
	}
}
