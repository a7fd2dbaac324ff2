package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexLookupResumedAtItsKeysClear: the publication that must come
// between a key getting its merged entry in a new segment and its input
// entry being cleared in the old one (the package documentation, 5). A
// lookup loads the segment list while the index has one segment, reads
// the key's first bucket there (the key's input entry is in its second),
// and waits; the Replace grows the index, gives the key its merged entry
// in the new segment, and clears the old entry, and the lookup resumes at
// that very clear: it reads the second bucket empty and has never seen the
// new segment. Only a codebook published before the clear makes it read
// again. Moving that publication after the clears fails this test.
func TestIndexLookupResumedAtItsKeysClear(t *testing.T) {
	exercised := 0
	for seed := uint32(1); seed <= 40 && exercised < 5; seed++ {
		if resumedAtClear(t, seed) {
			exercised++
		}
	}
	t.Logf("exercised by %d seeds", exercised)
	if exercised == 0 {
		t.Fatal("no seed gave the interleaving: not exercised")
	}
}

func resumedAtClear(t *testing.T, seed uint32) bool {
	x := newIndexSeeded(200, 10, seed)
	keysA := hashesOf(testkeys.Random(150, 16, uint64(seed)))
	fresh := hashesOf(testkeys.Random(150, 16, uint64(seed)+1000))
	if err := x.AddTable(1, keysA); err != nil {
		t.Fatal(err)
	}
	s0 := (*x.segs.Load())[0]
	ti := x.book.Load().tables[x.byID[1]]
	// A key whose input entry sits in its second bucket only.
	k, kv := uint64(0), uint32(0)
	var kp probe
	for _, h := range keysA {
		p := x.probeOf(h)
		v := x.slotValue(p, ti.code, uint(ti.length))
		i1 := s0.primary(p.hi)
		i2 := x.alt(s0, i1, p.tag)
		if i2 != i1 && !x.bucketHas(s0, i1, v) && x.bucketHas(s0, i2, v) {
			k, kv, kp = h, v, p
			break
		}
	}
	if k == 0 {
		return false
	}
	kGone := func() bool {
		i1 := s0.primary(kp.hi)
		return !x.bucketHas(s0, i1, kv) && !x.bucketHas(s0, x.alt(s0, i1, kp.tag), kv)
	}
	hashes := append(append([]uint64(nil), fresh...), keysA...)

	startLookup := make(chan struct{})
	paused := make(chan struct{})
	resume := make(chan struct{})
	lookupDone := make(chan struct{})
	recoded, oneSegment, inOld, resumed := 0, false, false, false
	idxTestHookRecoded = func() {
		if recoded++; recoded == 1 {
			oneSegment = len(*x.segs.Load()) == 1
			close(startLookup)
			<-paused
		}
	}
	idxTestHookAfterFirstRead = func(s *idxSegment) {
		if s == s0 && !inOld {
			inOld = true
			close(paused)
			<-resume
		}
	}
	idxTestHookEntryCleared = func(s *idxSegment) {
		if s == s0 && inOld && !resumed && kGone() {
			resumed = true
			close(resume)
			<-lookupDone
		}
	}
	defer func() {
		idxTestHookRecoded, idxTestHookAfterFirstRead, idxTestHookEntryCleared = nil, nil, nil
	}()
	errc := make(chan error, 1)
	go func() { errc <- x.Replace([]uint64{1}, 2, hashes, nil) }()
	<-startLookup
	got := x.LookupHash(k, nil)
	close(lookupDone)
	if !resumed {
		close(resume) // the key's entry was never cleared in s0: not exercised
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !oneSegment || !resumed || len(*x.segs.Load()) < 2 {
		return false
	}
	if !holds(got, 1) && !holds(got, 2) {
		t.Fatalf("seed %d: a lookup resumed at its key's clear named %v: neither the input nor the merge", seed, got)
	}
	if !holds(x.LookupHash(k, nil), 2) {
		t.Fatalf("seed %d: after the Replace the key does not name the merge", seed)
	}
	return true
}
