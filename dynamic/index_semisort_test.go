package dynamic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// checkCanonical decodes every bucket of every segment of a quiet index:
// each must hold a valid nibble code, its entries in ascending order, and
// encode back to the same bits (one encoding per content); the entries
// found must be those Stats, the segments and the tables count.
func checkCanonical(t *testing.T, x *Index) {
	t.Helper()
	var found, segCounted int64
	for k, s := range *x.segs.Load() {
		var inSeg int64
		for i := uint32(0); i < s.n; i++ {
			raw := x.raw(s, i)
			e, ok := semisort.Decode(raw, x.w)
			if !ok {
				t.Fatalf("segment %d bucket %d: invalid nibble code %d", k, i, raw&0xfff)
			}
			for j := 1; j < idxSlots; j++ {
				if e[j-1] > e[j] {
					t.Fatalf("segment %d bucket %d: entries %x not sorted", k, i, e)
				}
			}
			if re := semisort.Pack(e[0], e[1], e[2], e[3], x.w); re != raw {
				t.Fatalf("segment %d bucket %d: %#x re-encodes to %#x", k, i, raw, re)
			}
			for _, v := range e {
				if v >= 1<<x.w {
					t.Fatalf("segment %d bucket %d: entry %#x wider than %d bits", k, i, v, x.w)
				}
				if v != 0 {
					inSeg++
				}
			}
		}
		if inSeg != s.entries.Load() {
			t.Fatalf("segment %d: %d entries decoded, %d counted", k, inSeg, s.entries.Load())
		}
		found += inSeg
		segCounted += s.entries.Load()
	}
	st := x.Stats()
	if found != st.Entries-int64(st.Stashed) {
		t.Fatalf("%d entries decoded; Stats: %d entries, %d stashed", found, st.Entries, st.Stashed)
	}
	var byTable int64
	for _, c := range x.count {
		byTable += c
	}
	if byTable != found {
		t.Fatalf("%d entries decoded, %d counted by table", found, byTable)
	}
}

// TestIndexBucketsCanonical fills indexes of every slot width (10 to 16
// bits) past their first segment, with growth, code lengthening,
// compactions and removals, and checks every bucket's encoding and the
// entry counts after each step, and that no key is lost.
func TestIndexBucketsCanonical(t *testing.T) {
	for _, bits := range []float64{9, 11, 12, 13, 14, 15, 16, 18} {
		x := newIndexSeeded(3000, bits, uint32(bits))
		tables := map[uint64][]uint64{}
		check := func(when string) {
			t.Helper()
			checkCanonical(t, x)
			for id, hs := range tables {
				for _, h := range hs {
					if !holds(x.LookupHash(h, nil), id) {
						t.Fatalf("w=%d %s: a key of table %d is not named", x.w, when, id)
					}
				}
			}
		}
		// 40 tables: more than 2^d−1 codes at d=5 (w=10), so codes are
		// lengthened and some tables go without.
		for id := uint64(1); id <= 40; id++ {
			tables[id] = hashesOf(testkeys.Random(50+int(id)*20, 16, id*31+uint64(bits)))
			if err := x.AddTable(id, tables[id]); err != nil {
				t.Fatal(err)
			}
		}
		check("after adds")
		var merged []uint64
		for id := uint64(5); id <= 12; id++ {
			merged = append(merged, tables[id]...)
			delete(tables, id)
		}
		if err := x.Replace([]uint64{5, 6, 7, 8, 9, 10, 11, 12}, 100, merged, nil); err != nil {
			t.Fatal(err)
		}
		tables[100] = merged
		check("after a Replace")
		for id := uint64(20); id <= 30; id++ {
			if err := x.RemoveTable(id); err != nil {
				t.Fatal(err)
			}
			delete(tables, id)
		}
		check("after removals")
		st := x.Stats()
		t.Logf("bits %v: w=%d m=%d d=%d: %+v", bits, x.w, x.m, x.d, st)
		if st.Segments < 2 {
			t.Errorf("bits %v: the index never grew: %+v", bits, st)
		}
	}
}

// crowd returns hashes whose mixed values (under x's seed, for its first
// segment) fall in a few adjacent primary buckets, with tags that share
// their top nibble (so a bucket holds four equal nibbles) and fingerprint
// bits after the tag that differ only in their lowest bits: entries that
// the semi-sorted code tells apart by their low parts alone, and that
// entries of tables with short codes share.
func crowd(x *Index, rng *rand.Rand, n int) []uint64 {
	s := (*x.segs.Load())[0]
	nib := uint32(rng.IntN(16))
	first := uint32(rng.Uint64N(uint64(s.n - 4)))
	top := rng.Uint32() & 0x0fff_ff00 // the same for every key of the crowd
	out := make([]uint64, n)
	for k := range out {
		tag := nib<<(x.m-4) | uint32(rng.IntN(1<<(x.m-4)))
		low := uint32(rng.IntN(1 << (32 - x.w + 3))) // up to the three lowest entry bits, and below
		lo := tag<<(32-x.m) | top>>x.m&^(1<<(32-x.w+3)-1) | low
		out[k] = pinnedEntryHash(x.seed, first+uint32(rng.IntN(3)), s.n, lo)
	}
	return out
}

// TestIndexSemiSortedCrowds: tables built from crowds of keys that fill
// buckets with equal nibbles and entries differing only in low bits, shared
// within a table and across tables, then merged (while every lookup during
// the Replace is checked), removed, and merged again. No key may be lost
// at any step, and every bucket stays canonical.
func TestIndexSemiSortedCrowds(t *testing.T) {
	race.SkipLong(t)
	for _, bits := range []float64{10, 13, 16} {
		for seed := uint32(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("bits=%v/seed=%d", bits, seed), func(t *testing.T) {
				testSemiSortedCrowds(t, bits, seed)
			})
		}
	}
}

func testSemiSortedCrowds(t *testing.T, bits float64, seed uint32) {
	x := newIndexSeeded(2000, bits, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(bits)))
	var crowds [][]uint64
	for range 6 {
		crowds = append(crowds, crowd(x, rng, 24))
	}
	tables := map[uint64][]uint64{}
	for id := uint64(1); id <= 10; id++ {
		hs := hashesOf(testkeys.Random(100, 16, uint64(seed)*100+id))
		for _, c := range crowds {
			// Each table takes a part of every crowd; parts overlap, so
			// keys repeat across tables (versions).
			at := rng.IntN(len(c) - 8)
			hs = append(hs, c[at:at+8]...)
		}
		tables[id] = hs
		if err := x.AddTable(id, hs); err != nil {
			t.Fatal(err)
		}
	}
	var buf []uint64
	check := func(when string, ok func(h uint64, got []uint64) bool) {
		t.Helper()
		for id, hs := range tables {
			for _, h := range hs {
				buf = x.LookupHash(h, buf[:0])
				if !holds(buf, id) && (ok == nil || !ok(h, buf)) {
					t.Fatalf("%s: key %#x of table %d names %v", when, h, id, buf)
				}
			}
		}
	}
	check("after adds", nil)
	checkCanonical(t, x)
	// The crowds must have made what they are for: buckets of four
	// entries with one nibble, and entries that differ in low bits only.
	fourEqual, lowOnly := 0, 0
	s0 := (*x.segs.Load())[0]
	for i := uint32(0); i < s0.n; i++ {
		e := x.entries(s0, i)
		if e[0] != 0 && e[0]>>(x.w-4) == e[3]>>(x.w-4) {
			fourEqual++
		}
		for j := 1; j < idxSlots; j++ {
			if e[j-1] != 0 && e[j] != e[j-1] && e[j]-e[j-1] < 8 {
				lowOnly++
			}
		}
	}
	if fourEqual == 0 || lowOnly == 0 {
		t.Fatalf("%d buckets of four equal nibbles, %d neighbours differing in low bits: not exercised", fourEqual, lowOnly)
	}
	// Merge 3..7 into 50, checking every key after each key the Replace
	// handles: a key of an input may name the input or the merge.
	inputs := []uint64{3, 4, 5, 6, 7}
	inMerge := map[uint64]bool{}
	var merged, dropped []uint64
	for _, id := range inputs {
		for _, h := range tables[id] {
			if inMerge[h] {
				continue
			}
			inMerge[h] = true
			if rng.IntN(8) == 0 {
				dropped = append(dropped, h)
			} else {
				merged = append(merged, h)
			}
		}
	}
	isDropped := map[uint64]bool{}
	for _, h := range dropped {
		isDropped[h] = true
	}
	during := 0
	x.hooks.recoded = func() {
		during++
		check("during Replace", func(h uint64, got []uint64) bool {
			return inMerge[h] && (isDropped[h] || holds(got, 50))
		})
	}
	err := x.Replace(inputs, 50, merged, dropped)
	x.hooks.recoded = nil
	if err != nil {
		t.Fatal(err)
	}
	if during == 0 {
		t.Fatal("no key recoded: not exercised")
	}
	for _, id := range inputs {
		delete(tables, id)
	}
	tables[50] = merged
	check("after Replace", nil)
	checkCanonical(t, x)
	for _, id := range []uint64{1, 9} {
		if err := x.RemoveTable(id); err != nil {
			t.Fatal(err)
		}
		delete(tables, id)
		check(fmt.Sprintf("after removing %d", id), nil)
		checkCanonical(t, x)
	}
	// The merge and an older table merged again (codes change length).
	var again []uint64
	seen := map[uint64]bool{}
	for _, id := range []uint64{50, 2} {
		for _, h := range tables[id] {
			if !seen[h] {
				seen[h] = true
				again = append(again, h)
			}
		}
	}
	if err := x.Replace([]uint64{50, 2}, 60, again, nil); err != nil {
		t.Fatal(err)
	}
	delete(tables, 50)
	delete(tables, 2)
	tables[60] = again
	check("after the second Replace", nil)
	checkCanonical(t, x)
	t.Logf("%+v", x.Stats())
}

// TestIndexTagLoads: a segment with m-bit tags takes entries up to the
// load it is sized to (idxTagLoad[m]) without a failed insert, for every
// tag width NewIndex uses and segments of 500 to about 80k buckets, and
// NewIndex's shapes keep to their budget.
func TestIndexTagLoads(t *testing.T) {
	race.SkipLong(t)
	const n = 300_000
	keys := hashesOf(testkeys.Random(n, 16, 5))
	for m := uint(idxTag); m < uint(len(idxTagLoad)); m++ {
		for seed := uint32(1); seed <= 2; seed++ {
			x := newIndexSeeded(n, 14, seed)
			x.w, x.m, x.d = m+idxMinDepth, m, idxMinDepth
			s := x.newSegment(uint64(float64(n)/(idxSlots*idxTagLoad[m])) + 2)
			placed := 0
			for _, h := range keys {
				p := x.probeOf(h)
				v := x.slotValue(p, 1, 1)
				if x.dupOrFree(s, p, v) == idxDuplicate {
					continue // a repeated (tag, fingerprint) pair: shared
				}
				if !x.insertSegment(s, p, v, true) {
					t.Fatalf("m=%d seed %d: an insert failed at load %.4f, sized for %.3f", m, seed, float64(placed)/float64(s.n*idxSlots), idxTagLoad[m])
				}
				placed++
			}
			if load := float64(placed) / float64(s.n*idxSlots); load < idxTagLoad[m]-0.01 {
				t.Fatalf("m=%d: filled to %.4f only", m, load)
			}
		}
	}
	// Small segments (a small store's index) reach the same load, for
	// every tag width.
	for _, nb := range []uint64{500, 5000} {
		for m := uint(idxTag); m < uint(len(idxTagLoad)); m++ {
			for seed := uint32(1); seed <= 3; seed++ {
				x := newIndexSeeded(1000, 14, seed)
				x.w, x.m, x.d = m+idxMinDepth, m, idxMinDepth
				fillSegmentToTagLoad(t, x, nb, seed, fmt.Sprintf("%d buckets, m=%d, seed %d", nb, m, seed))
			}
		}
	}
	// Segment sizes where the second bucket's offsets, from an unkeyed
	// multiplicative hash of the tag, fell in near arithmetic progression
	// and 5-bit tags failed from 0.86 (54056 buckets), and neighbours.
	for _, nb := range []uint64{54055, 54056, 54057, 50763} {
		for seed := uint32(1); seed <= 4; seed++ {
			x := newIndexSeeded(1000, 10, seed)
			x.w, x.m, x.d = idxMinSlot, idxTag, idxMinDepth
			fillSegmentToTagLoad(t, x, nb, seed, fmt.Sprintf("%d buckets, seed %d", nb, seed))
		}
	}
	for bits := 8.0; bits <= 20; bits += 0.25 {
		w, m, load := indexShape(bits)
		cost := entryBits(w, load)
		if got := IndexEntryBits(bits); got != cost {
			t.Errorf("bits %v: IndexEntryBits %.3f, shape costs %.3f", bits, got, cost)
		}
		// An index built as IndexEntryBits' documentation says spends
		// about the budget and holds its entries.
		if bits >= 10 && bits <= 16 && bits == math.Trunc(bits) {
			const n = 200_000
			x := newIndexSeeded(int(n*bits/cost), bits, 1)
			st := x.Stats()
			if spent := float64(st.Bytes*8) / n; spent > bits*1.01 || spent < bits*0.95 {
				t.Errorf("bits %v: sized by IndexEntryBits, %.2f bits per entry", bits, spent)
			}
		}
		if w < idxMinSlot || w > 16 || w-m < idxMinDepth || w-m > idxMaxDepth || cost > max(bits, 10.2) {
			t.Errorf("bits %v: w=%d m=%d load %.3f: %.2f bits per entry", bits, w, m, load, cost)
		}
		if bits >= 11 && w < 16 && cost < bits-1.2 {
			t.Errorf("bits %v: w=%d m=%d load %.3f: %.2f bits per entry leaves the budget unspent", bits, w, m, load, cost)
		}
	}
}

// TestIndexLengthenMidLookup: between a lookup's reads of its two buckets,
// enough tables arrive that the looked-up key's table has its code
// lengthened, every one of its entries rewritten (and re-sorted in its
// bucket) to the longer code. The lookup must still name the table.
func TestIndexLengthenMidLookup(t *testing.T) {
	for seed := uint32(1); seed <= 4; seed++ {
		x := newIndexSeeded(5000, 10, seed)
		keys := hashesOf(testkeys.Random(2000, 16, uint64(seed)))
		if err := x.AddTable(1, keys); err != nil {
			t.Fatal(err)
		}
		before := x.book.Load().tables[x.byID[1]].length
		ran := false
		x.hooks.afterFirstRead = func(*idxSegment) {
			if ran {
				return
			}
			ran = true
			for id := uint64(2); id <= 24; id++ {
				if err := x.AddTable(id, hashesOf(testkeys.Random(50, 16, id*7+uint64(seed)))); err != nil {
					t.Error(err)
				}
			}
		}
		got := x.LookupHash(keys[int(seed)*17], nil)
		x.hooks.afterFirstRead = nil
		after := x.book.Load().tables[x.byID[1]].length
		if !ran || after <= before {
			t.Fatalf("seed %d: code length %d before, %d after: not exercised", seed, before, after)
		}
		if !holds(got, 1) || x.Stats().Contended != 0 {
			t.Fatalf("seed %d: lookup across a lengthening named %v (%d named every table)", seed, got, x.Stats().Contended)
		}
		for _, h := range keys {
			if !holds(x.LookupHash(h, nil), 1) {
				t.Fatalf("seed %d: a key of the lengthened table is not named", seed)
			}
		}
		checkCanonical(t, x)
	}
}

// fillSegmentToTagLoad fills a new segment of nb buckets of x with
// distinct random entries up to idxTagLoad for x's tag width, and fails t
// (naming what) if an insert fails before that load.
func fillSegmentToTagLoad(t *testing.T, x *Index, nb uint64, seed uint32, what string) {
	t.Helper()
	s := x.newSegment(nb)
	load := idxTagLoad[x.m]
	want := int(float64(nb*idxSlots) * load)
	rng := rand.New(rand.NewPCG(uint64(seed), nb))
	for placed := 0; placed < want; {
		p := x.probeOf(rng.Uint64())
		v := x.slotValue(p, 1, 1)
		if x.dupOrFree(s, p, v) == idxDuplicate {
			continue
		}
		if !x.insertSegment(s, p, v, true) {
			t.Fatalf("%s: an insert failed at load %.4f, sized for %.3f", what, float64(placed)/float64(nb*idxSlots), load)
		}
		placed++
	}
}
