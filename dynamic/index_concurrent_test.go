package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexConcurrentEveryWidth: at every budget from 8 to 17 bits,
// readers look up, all the while, keys of tables whose AddTable or Replace
// had returned, while the writer adds tables made partly of crowds (keys
// sharing buckets, nibbles and all but the low fingerprint bits), keeps up
// to 40 tables live so that codes are lengthened, merges runs of them
// (dropping only mortal keys, adding keys the index never held, so that
// segments are added during Replaces) and removes tables of mortal keys
// only. Every lookup must name a table that holds its key. Run with -race.
func TestIndexConcurrentEveryWidth(t *testing.T) {
	dur := 300 * time.Millisecond
	if testing.Short() {
		dur = 100 * time.Millisecond
	}
	for bits := 8; bits <= 17; bits++ {
		t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
			testConcurrent(t, float64(bits), uint32(bits)*31, dur)
		})
	}
}

func testConcurrent(t *testing.T, bits float64, seed uint32, dur time.Duration) {
	x := newIndexSeeded(400, bits, seed)
	mortal := func(h uint64) bool { return h%5 == 0 }
	lt := newLiveTables()
	lt.read(t, x, 2, uint64(seed), mortal)
	rng := rand.New(rand.NewPCG(uint64(seed), 5))
	var crowds [][]uint64
	for range 6 {
		crowds = append(crowds, crowd(x, rng, 24))
	}
	deadline := time.Now().Add(dur)
	adds, merges, removals, lengthened := 0, 0, 0, 0
	codeLen := map[uint64]uint8{}
	for time.Now().Before(deadline) || merges < 10 || lt.fewChecks() {
		cur := lt.tables()
		switch r := rng.IntN(10); {
		case len(cur) >= 40 || len(cur) >= 4 && r < 4:
			k := min(len(cur), 2+rng.IntN(4))
			at := rng.IntN(len(cur) - k + 1)
			inputs, hs, dropped := mergeOf(cur[at:at+k], func(h uint64) bool { return mortal(h) && rng.IntN(2) == 0 })
			if rng.IntN(2) == 0 {
				hs = append(hashesOf(testkeys.Random(50+rng.IntN(200), 16, rng.Uint64())), hs...)
			}
			m := lt.register(hs)
			if err := x.Replace(inputs, m.id, hs, dropped); err != nil {
				t.Fatal(err)
			}
			lt.merged(at, k, m)
			merges++
		case len(cur) >= 4 && r < 5:
			// A table of mortal keys only: no reader asks for them.
			var hs []uint64
			for _, h := range hashesOf(testkeys.Random(100, 16, rng.Uint64())) {
				if mortal(h) {
					hs = append(hs, h)
				}
			}
			tb := lt.register(hs)
			if err := x.AddTable(tb.id, hs); err != nil {
				t.Fatal(err)
			}
			if err := x.RemoveTables(tb.id); err != nil {
				t.Fatal(err)
			}
			removals++
		default:
			hs := hashesOf(testkeys.Random(rng.IntN(120), 16, rng.Uint64()))
			for _, c := range crowds {
				at := rng.IntN(len(c) - 4)
				hs = append(hs, c[at:at+4]...)
			}
			for _, tb := range cur {
				if len(tb.keys) > 0 && rng.IntN(3) == 0 {
					hs = append(hs, tb.keys[rng.IntN(len(tb.keys))]) // overwrites
				}
			}
			tb := lt.register(hs)
			if err := x.AddTable(tb.id, hs); err != nil {
				t.Fatal(err)
			}
			lt.flushed(tb)
			adds++
		}
		for _, ti := range x.book.Load().tables {
			if ti.live && codeLen[ti.id] != 0 && ti.length > codeLen[ti.id] {
				lengthened++
			}
			if ti.live {
				codeLen[ti.id] = ti.length
			}
		}
	}
	checks := lt.finish(t)
	st := x.Stats()
	t.Logf("w=%d m=%d: %d adds, %d merges, %d removals, %d codes lengthened, %d checks: %+v", x.w, x.m, adds, merges, removals, lengthened, checks, st)
	if checks == 0 {
		t.Fatal("no lookup: not exercised")
	}
	lt.checkAllNamed(t, x)
	if st.Tables != len(lt.tables()) {
		t.Errorf("index has %d tables, store %d", st.Tables, len(lt.tables()))
	}
	checkCanonical(t, x)
}

// TestIndexConcurrentOverwritesEveryWidth: readers look up, all the while,
// keys of tables whose AddTable or Replace had returned, while the writer
// flushes tables of fresh keys, overwrites of keys of every live table
// (versions in every segment), counters overwritten in every flush (their
// versions crowd their buckets and go to the stash) and crowds, into a
// tiny index at every budget from 8 to 17 bits, and merges runs of them
// that take keys the index never held first (so that segments are added
// during the Replace, after which a key's versions are behind the newest)
// and drop mortal keys. A lookup must name a table that holds its key.
// Run with -race.
func TestIndexConcurrentOverwritesEveryWidth(t *testing.T) {
	dur := 150 * time.Millisecond
	if testing.Short() {
		dur = 50 * time.Millisecond
	}
	for bits := 8; bits <= 17; bits++ {
		t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
			testConcurrentOverwrites(t, float64(bits), uint32(bits)*977, dur)
		})
	}
}

func testConcurrentOverwrites(t *testing.T, bits float64, seed uint32, dur time.Duration) {
	x := newIndexSeeded(20, bits, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	mortal := func(h uint64) bool { return h%7 == 0 }
	hot := []uint64{rng.Uint64(), rng.Uint64(), rng.Uint64()}
	for i := range hot { // counters are never deleted
		for mortal(hot[i]) {
			hot[i]++
		}
	}
	crowds := [][]uint64{crowd(x, rng, 12), crowd(x, rng, 12)}
	lt := newLiveTables()
	lt.read(t, x, 2, uint64(seed), mortal)
	fresh := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = rng.Uint64()
		}
		return out
	}
	deadline := time.Now().Add(dur)
	merges, grew := 0, 0
	for time.Now().Before(deadline) || merges < 8 || grew == 0 && merges < 400 || lt.fewChecks() {
		cur := lt.tables()
		if len(cur) >= 6 && rng.IntN(2) == 0 {
			k := min(len(cur), 2+rng.IntN(3))
			at := rng.IntN(len(cur) - k + 1)
			ids, hs, dropped := mergeOf(cur[at:at+k], func(h uint64) bool { return mortal(h) && rng.IntN(2) == 0 })
			hs = append(fresh(20+rng.IntN(100)), hs...)
			m := lt.register(hs)
			before := len(*x.segs.Load())
			if err := x.Replace(ids, m.id, hs, dropped); err != nil {
				t.Fatal(err)
			}
			if len(*x.segs.Load()) > before {
				grew++
			}
			lt.merged(at, k, m)
			merges++
			continue
		}
		hs := append(fresh(5+rng.IntN(40)), hot...)
		for _, tb := range cur {
			hs = append(hs, tb.keys[rng.IntN(len(tb.keys))])
		}
		c := crowds[rng.IntN(len(crowds))]
		at := rng.IntN(len(c) - 4)
		hs = append(hs, c[at:at+4]...)
		slices.Sort(hs)
		hs = slices.Compact(hs)
		tb := lt.register(hs)
		if err := x.AddTable(tb.id, hs); err != nil {
			t.Fatal(err)
		}
		lt.flushed(tb)
	}
	checks := lt.finish(t)
	st := x.Stats()
	if grew == 0 || checks == 0 || st.Stashed == 0 && merges == 0 {
		t.Fatalf("%d merges (%d grew the index), %d lookups, %+v: not exercised", merges, grew, checks, st)
	}
	lt.checkAllNamed(t, x)
	checkCanonical(t, x)
	t.Logf("w=%d: %d merges (%d grew the index), %d lookups; %+v", x.w, merges, grew, checks, st)
}

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
	x.hooks.recoded = func() {
		if recoded++; recoded == 1 {
			close(startLookup)
			<-lookupInOld
		}
	}
	x.hooks.cleared = func() {
		close(cleared)
		<-lookupDone
	}
	x.hooks.afterFirstRead = func(s *idxSegment) {
		if s == s0 && !inOld {
			inOld = true
			close(lookupInOld)
			<-cleared
		}
	}
	defer func() {
		x.hooks.recoded, x.hooks.cleared, x.hooks.afterFirstRead = nil, nil, nil
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

// TestIndexStressReplaceGrowsShared: a tiny index, so that segments are
// added during Replaces (each merge also takes keys the index never held,
// as from an input that was never indexed), with keys crafted to share
// bucket and fingerprint within and across tables, merges that drop keys,
// and readers looking up, all the while, keys of tables whose AddTable or
// Replace had returned. A key a merge keeps must be named by a table that
// holds it at every instant. Run with -race.
func TestIndexStressReplaceGrowsShared(t *testing.T) {
	dur := 1500 * time.Millisecond
	if testing.Short() {
		dur = 400 * time.Millisecond
	}
	const seed = 0x5eed
	x := newIndexSeeded(300, 10, seed)
	n0 := (*x.segs.Load())[0].n
	// mortal keys may be dropped by a merge; readers look up only the
	// others (a dropped key is gone once its Replace returns).
	mortal := func(h uint64) bool { return h%5 == 0 }
	lt := newLiveTables()
	lt.read(t, x, 2, 77, mortal)
	rng := rand.New(rand.NewPCG(seed, 3))
	// cell returns keys sharing primary bucket (of the first segment),
	// tag and the top fingerprint bits: they share entries in every table
	// whose code leaves fewer bits than they agree on.
	cell := func(k int) []uint64 {
		b := uint32(rng.Uint64N(uint64(n0)))
		top := rng.Uint32() & 0xffff_0000
		var out []uint64
		for range k {
			out = append(out, pinnedEntryHash(seed, b, n0, top|rng.Uint32()&0xffff))
		}
		return out
	}
	deadline := time.Now().Add(dur)
	flushes, merges, grewDuring := 0, 0, 0
	for time.Now().Before(deadline) || merges < 10 || lt.fewChecks() {
		cur := lt.tables()
		if len(cur) >= 8 {
			k := 2 + rng.IntN(3)
			at := rng.IntN(len(cur) - k + 1)
			inputs, hs, dropped := mergeOf(cur[at:at+k], func(h uint64) bool { return mortal(h) && rng.IntN(2) == 0 })
			// Keys the index never held, first: they fill the newest
			// segment, so the inputs' keys that follow may find a new one.
			extra := hashesOf(testkeys.Random(100+rng.IntN(300), 16, rng.Uint64()))
			hs = append(extra, hs...)
			m := lt.register(hs)
			before := x.Stats().Segments
			if err := x.Replace(inputs, m.id, hs, dropped); err != nil {
				t.Fatal(err)
			}
			if x.Stats().Segments > before {
				grewDuring++
			}
			lt.merged(at, k, m)
			merges++
			continue
		}
		hs := hashesOf(testkeys.Random(50+rng.IntN(150), 16, rng.Uint64()))
		for range 3 {
			hs = append(hs, cell(3+rng.IntN(4))...)
		}
		for _, tb := range cur {
			hs = append(hs, tb.keys[rng.IntN(len(tb.keys))]) // overwrites
		}
		tb := lt.register(hs)
		if err := x.AddTable(tb.id, hs); err != nil {
			t.Fatal(err)
		}
		lt.flushed(tb)
		flushes++
	}
	checks := lt.finish(t)
	st := x.Stats()
	t.Logf("%d flushes, %d merges (%d grew the index), %d checks: %+v", flushes, merges, grewDuring, checks, st)
	if grewDuring == 0 || checks == 0 {
		t.Fatal("no Replace grew the index, or no lookup: not exercised")
	}
	// Quiet now: every key of every live table, mortal or not.
	lt.checkAllNamed(t, x)
	if st.Tables != len(lt.tables()) {
		t.Errorf("index has %d tables, store %d", st.Tables, len(lt.tables()))
	}
	checkCanonical(t, x)
}

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
	x.hooks.recoded = func() {
		if recoded++; recoded == 1 {
			oneSegment = len(*x.segs.Load()) == 1
			close(startLookup)
			<-paused
		}
	}
	x.hooks.afterFirstRead = func(s *idxSegment) {
		if s == s0 && !inOld {
			inOld = true
			close(paused)
			<-resume
		}
	}
	x.hooks.entryCleared = func(s *idxSegment) {
		if s == s0 && inOld && !resumed && kGone() {
			resumed = true
			close(resume)
			<-lookupDone
		}
	}
	defer func() {
		x.hooks.recoded, x.hooks.afterFirstRead, x.hooks.entryCleared = nil, nil, nil
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
