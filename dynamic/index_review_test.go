package dynamic

import (
	"math/rand/v2"
	"testing"
	"time"

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
	for time.Now().Before(deadline) || merges < 10 {
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
