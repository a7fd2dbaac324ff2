package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// checkAnswerOrder checks that ids, a lookup's answer, names each table
// once and newest first under the current codebook (a merged table and its
// inputs share a rank).
func checkAnswerOrder(t *testing.T, x *Index, ids []uint64, what string) {
	t.Helper()
	book := x.book.Load()
	rankOf := map[uint64]uint64{}
	for _, ti := range book.tables {
		if ti.live {
			rankOf[ti.id] = ti.rank
		}
	}
	seen := map[uint64]bool{}
	for k, id := range ids {
		if seen[id] {
			t.Fatalf("%s: table %d named twice in %v", what, id, ids)
		}
		seen[id] = true
		if k > 0 && rankOf[id] > rankOf[ids[k-1]] {
			t.Fatalf("%s: %v is not newest first (ranks %d then %d)", what, ids, rankOf[ids[k-1]], rankOf[id])
		}
	}
}

// everyIndexShape returns one budget, the smallest, for each distinct slot
// layout (slot width and tag width) that budgets of 8 to 17 bits per key
// give (budgets 8 to 10 share 10-bit slots, and 16 and 17 share 16-bit
// ones): the heavy model histories run once per layout rather than once
// per budget, which repeated identical indexes under other seeds.
func everyIndexShape() []float64 {
	type shape struct{ w, m uint }
	seen := map[shape]bool{}
	var out []float64
	for bits := 8.0; bits <= 17; bits++ {
		w, m, _ := indexShape(bits)
		if !seen[shape{w, m}] {
			seen[shape{w, m}] = true
			out = append(out, bits)
		}
	}
	return out
}

// TestIndexModelEveryWidth runs a deterministic random history of
// AddTable, AddTables, Replace (with keys new to the index, dropped keys
// and crowds of keys sharing buckets, nibbles and fingerprints) and
// removals on tiny indexes of every slot layout that budgets of 8 to 17
// bits give (every slot width, 10 to 16 bits, with its tag width:
// everyIndexShape), with more tables
// than the code tree has short codes, so that codes are lengthened, also
// during Replace's claim, and some tables are named by every lookup. After
// each key a Replace handles, and once it has cleared its inputs' leftover
// entries, every key of every table must be named by a table that holds
// it; after every call, every bucket must be canonical and the counts
// exact, and the answer of a lookup, and of one that names every table,
// must be newest first, each table once, with every live table in the
// latter.
func TestIndexModelEveryWidth(t *testing.T) {
	race.SkipLong(t)
	for _, bits := range everyIndexShape() {
		for seed := uint32(1); seed <= 2; seed++ {
			capacity := 150
			if seed == 2 {
				capacity = 20 // seven buckets: growth comes at once
			}
			t.Run(fmt.Sprintf("bits=%v/seed=%d/capacity=%d", bits, seed, capacity), func(t *testing.T) {
				testModel(t, bits, seed, capacity)
			})
		}
	}
	if modelLengthened == 0 || modelStashed == 0 {
		t.Fatalf("%d codes lengthened, %d entries stashed: not exercised", modelLengthened, modelStashed)
	}
}

// modelLengthened counts the codes the model histories lengthened.
var modelLengthened, modelStashed int

func testModel(t *testing.T, bits float64, seed uint32, capacity int) {
	x := newIndexSeeded(capacity, bits, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(bits)*7919))
	tables := map[uint64][]uint64{} // live table -> its keys
	nextID := uint64(1)
	var crowds [][]uint64
	for range 4 {
		crowds = append(crowds, crowd(x, rng, 16))
	}
	// Pairs: keys sharing primary bucket and tag in the first segment, so
	// both of their buckets, and differing after the tag: more distinct
	// entries than the pair's eight slots, so that some go to the stash.
	var pairs [][]uint64
	s0 := (*x.segs.Load())[0]
	for range 2 {
		b := uint32(rng.Uint64N(uint64(s0.n)))
		tag := uint32(rng.IntN(1 << x.m))
		var pair []uint64
		for range 12 {
			pair = append(pair, pinnedEntryHash(seed, b, s0.n, tag<<(32-x.m)|rng.Uint32()>>x.m))
		}
		pairs = append(pairs, pair)
	}
	newKeys := func() []uint64 {
		n := 1 + rng.IntN(60)
		if rng.IntN(10) == 0 {
			n = 0 // an empty table
		}
		hs := hashesOf(testkeys.Random(n, 8+rng.IntN(12), rng.Uint64()))
		if rng.IntN(3) == 0 {
			c := crowds[rng.IntN(len(crowds))]
			at := rng.IntN(len(c) - 6)
			hs = append(hs, c[at:at+6]...)
		}
		if rng.IntN(4) == 0 {
			p := pairs[rng.IntN(len(pairs))]
			at := rng.IntN(len(p) - 8)
			hs = append(hs, p[at:at+8]...)
		}
		if len(hs) > 1 && rng.IntN(4) == 0 {
			hs = append(hs, hs[:1+rng.IntN(len(hs)-1)]...) // versions in one table
		}
		return hs
	}
	var buf []uint64
	// check: every key of every live table is named by a table holding it;
	// during a Replace (mergeSet != nil), a key of the merge held by an
	// input may instead be named by the merge or an input holding it, and
	// an input key the merge drops may be missed; keys new to the merge
	// are not asked for (a store reads the merge unfiltered until Replace
	// returns).
	var mergeID uint64
	var mergeSet, inputSet map[uint64]bool
	var inputIDs []uint64
	check := func(when string) {
		t.Helper()
		for id, hs := range tables {
			for _, h := range hs {
				buf = x.LookupHash(h, buf[:0])
				checkAnswerOrder(t, x, buf, when)
				if holds(buf, id) {
					continue
				}
				if mergeSet != nil && slices.Contains(inputIDs, id) {
					if !mergeSet[h] || holds(buf, mergeID) {
						continue
					}
					ok := false
					for _, in := range inputIDs {
						if holds(buf, in) && slices.Contains(tables[in], h) {
							ok = true
						}
					}
					if ok {
						continue
					}
				}
				t.Fatalf("%s: key %#x of table %d names %v", when, h, id, buf)
			}
		}
		if mergeSet != nil {
			for h := range mergeSet {
				buf = x.LookupHash(h, buf[:0])
				if holds(buf, mergeID) {
					continue
				}
				ok := false
				for _, in := range inputIDs {
					if holds(buf, in) && slices.Contains(tables[in], h) {
						ok = true
					}
				}
				if !ok && inputSet[h] {
					t.Fatalf("%s: key %#x of the merge %d (inputs %v) names %v", when, h, mergeID, inputIDs, buf)
				}
			}
		}
		every := x.everyTable(nil)
		checkAnswerOrder(t, x, every, when+", every table")
		for id := range tables {
			if !holds(every, id) {
				t.Fatalf("%s: every table %v misses live table %d", when, every, id)
			}
		}
		if mergeSet != nil && !holds(every, mergeID) {
			t.Fatalf("%s: every table %v misses the merge %d", when, every, mergeID)
		}
	}
	// A check reads every key: after every fifth key a Replace recodes
	// (every eleventh with -short) keeps the histories quick.
	checkEvery := 5
	if testing.Short() {
		checkEvery = 11
	}
	steps, lengthened, stashed, always := 0, 0, 0, 0
	codeLen := map[uint64]uint8{}
	for op := 0; op < 80; op++ {
		ids := make([]uint64, 0, len(tables))
		for id := range tables {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		var what string
		switch r := rng.IntN(10); {
		case r < 5 || len(ids) < 2:
			what = "AddTable"
			hs := newKeys()
			if err := x.AddTable(nextID, hs); err != nil {
				t.Fatal(err)
			}
			tables[nextID] = hs
			nextID++
		case r < 6:
			what = "AddTables"
			var add []uint64
			var sets [][]uint64
			for range 1 + rng.IntN(4) {
				add = append(add, nextID)
				sets = append(sets, newKeys())
				nextID++
			}
			if err := x.AddTables(add, sets); err != nil {
				t.Fatal(err)
			}
			for i, id := range add {
				tables[id] = sets[i]
			}
		case r < 9:
			what = "Replace"
			// Adjacent tables by age, as a compaction merges them.
			n := min(len(ids), 1+rng.IntN(4))
			at := rng.IntN(len(ids) - n + 1)
			inputIDs = slices.Clone(ids[at : at+n])
			mergeID = nextID
			nextID++
			mergeSet, inputSet = map[uint64]bool{}, map[uint64]bool{}
			var merged, dropped []uint64
			for _, in := range inputIDs {
				for _, h := range tables[in] {
					if inputSet[h] {
						continue
					}
					inputSet[h] = true
					if rng.IntN(6) == 0 {
						dropped = append(dropped, h)
					} else {
						merged = append(merged, h)
						mergeSet[h] = true
					}
				}
			}
			if rng.IntN(3) == 0 { // keys of an input never indexed
				for _, h := range newKeys() {
					if !inputSet[h] && !mergeSet[h] {
						merged = append(merged, h)
						mergeSet[h] = true
					}
				}
			}
			rng.Shuffle(len(merged), func(i, j int) { merged[i], merged[j] = merged[j], merged[i] })
			x.hooks.recoded = func() {
				if steps++; steps%checkEvery != 0 {
					return
				}
				check(fmt.Sprintf("op %d: during Replace(%v, %d)", op, inputIDs, mergeID))
			}
			x.hooks.cleared = func() { check(fmt.Sprintf("op %d: Replace(%v, %d) cleared", op, inputIDs, mergeID)) }
			err := x.Replace(inputIDs, mergeID, merged, dropped)
			x.hooks.recoded, x.hooks.cleared = nil, nil
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range inputIDs {
				delete(tables, in)
			}
			tables[mergeID] = merged
			mergeSet, inputSet, inputIDs = nil, nil, nil
		default:
			what = "RemoveTables"
			var gone []uint64
			for _, id := range ids {
				if rng.IntN(6) == 0 {
					gone = append(gone, id)
				}
			}
			if err := x.RemoveTables(gone...); err != nil {
				t.Fatal(err)
			}
			for _, id := range gone {
				delete(tables, id)
			}
		}
		check(fmt.Sprintf("op %d, after %s", op, what))
		checkCanonical(t, x)
		for _, ti := range x.book.Load().tables {
			if ti.live && codeLen[ti.id] != 0 && ti.length > codeLen[ti.id] {
				lengthened++
			}
			if ti.live {
				codeLen[ti.id] = ti.length
			}
		}
		st := x.Stats()
		stashed, always = max(stashed, st.Stashed), max(always, st.Always)
		if x.Tables() != len(tables) {
			t.Fatalf("op %d: %d tables in the index, %d live", op, x.Tables(), len(tables))
		}
	}
	if steps == 0 {
		t.Fatal("no Replace recoded a key: not exercised")
	}
	st := x.Stats()
	t.Logf("w=%d m=%d: %d keys recoded, %d codes lengthened, up to %d stashed, up to %d tables named always; %+v", x.w, x.m, steps, lengthened, stashed, always, st)
	modelLengthened += lengthened
	modelStashed += stashed
}

// TestIndexOverwriteHistoryEveryWidth attacks Replace's search, which stops
// at the newest segment holding a key's merged entry or an input entry of
// it, with the shape that search is for: keys overwritten in flush after
// flush (versions), in tiny indexes (seven buckets at first, so that
// nearly every flush and many merges grow the index: a key's versions end
// up in three or more segments), at every budget from 8 to 17 bits (every
// slot width). Flushes mix fresh keys, overwrites of live keys (from every
// table, so from every segment) and crowds (keys sharing bucket pair, tag
// nibble and all but the lowest fingerprint bits, so entries shared within
// and across tables); merges of adjacent runs drop some keys and take keys
// the index never held. After every few keys a Replace handles, and once
// it has cleared its inputs' entries, every key of every table must be
// named by a table that holds it; after every call the buckets must be
// canonical with exact counts (a removed table's entry left behind breaks
// them), a merged key must no longer name an input, the merge must hold
// no more entries than it has keys, and the index no more entries than
// the live tables have keys: stale versions must not accumulate.
func TestIndexOverwriteHistoryEveryWidth(t *testing.T) {
	race.SkipLong(t)
	overwriteDeep, overwriteShorter, overwriteLonger, overwriteGrew = 0, 0, 0, 0
	for bits := 8; bits <= 17; bits++ {
		for _, capacity := range []int{20, 40} {
			t.Run(fmt.Sprintf("bits=%d/capacity=%d", bits, capacity), func(t *testing.T) {
				testOverwriteHistory(t, float64(bits), uint32(bits)*31+uint32(capacity), capacity)
			})
		}
	}
	if overwriteDeep < 10 || overwriteShorter == 0 || overwriteLonger == 0 || overwriteGrew == 0 {
		t.Fatalf("a merged key's versions sat in three segments or more in %d histories of 20; merges with a code shorter than an input's %d, longer %d; Replaces that grew the index %d: not exercised",
			overwriteDeep, overwriteShorter, overwriteLonger, overwriteGrew)
	}
	t.Logf("versions in 3+ segments in %d histories of 20; merge codes shorter than an input's %d times, longer %d; %d Replaces grew the index",
		overwriteDeep, overwriteShorter, overwriteLonger, overwriteGrew)
}

// overwriteDeep counts the histories in which a merged key's versions sat
// in three segments or more; overwriteShorter and overwriteLonger the
// (merge, input) pairs whose codes differ; overwriteGrew the Replaces that
// added a segment.
var overwriteDeep, overwriteShorter, overwriteLonger, overwriteGrew int

func testOverwriteHistory(t *testing.T, bits float64, seed uint32, capacity int) {
	x := newIndexSeeded(capacity, bits, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 5))
	type table struct {
		id   uint64
		keys []uint64
		set  map[uint64]bool
	}
	var live []*table // newest first, as a store lists them
	byID := map[uint64]*table{}
	mk := func(id uint64, keys []uint64) *table {
		tb := &table{id: id, keys: keys, set: map[uint64]bool{}}
		for _, h := range keys {
			tb.set[h] = true
		}
		byID[id] = tb
		return tb
	}
	var crowds [][]uint64
	for range 3 {
		crowds = append(crowds, crowd(x, rng, 12))
	}
	fresh := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = rng.Uint64()
		}
		return out
	}
	var buf []uint64
	// During a Replace, a key of the merge may be named by the merge or by
	// an input holding it; a key the merge drops may be missed.
	var during *table
	var inputs []*table
	var droppedSet map[uint64]bool
	check := func(when string) {
		t.Helper()
		for _, tb := range live {
			for _, h := range tb.keys {
				buf = x.LookupHash(h, buf[:0])
				if holds(buf, tb.id) {
					continue
				}
				ok := false
				if during != nil && slices.Contains(inputs, tb) {
					if droppedSet[h] || holds(buf, during.id) {
						ok = true
					}
					for _, in := range inputs {
						ok = ok || in.set[h] && holds(buf, in.id)
					}
				}
				if !ok {
					t.Fatalf("%s: key %#x of table %d names %v", when, h, tb.id, buf)
				}
			}
		}
	}
	nextID := uint64(1)
	steps, merges, deepest, segments := 0, 0, 0, 0
	for op := 0; op < 70; op++ {
		if len(live) >= 3 && rng.IntN(3) == 0 {
			n := min(len(live), 2+rng.IntN(3))
			at := rng.IntN(len(live) - n + 1)
			inputs = slices.Clone(live[at : at+n])
			seen := map[uint64]bool{}
			var merged, dropped []uint64
			droppedSet = map[uint64]bool{}
			for _, in := range inputs {
				for _, h := range in.keys {
					if seen[h] {
						continue
					}
					seen[h] = true
					if rng.IntN(7) == 0 {
						dropped = append(dropped, h)
						droppedSet[h] = true
					} else {
						merged = append(merged, h)
					}
				}
			}
			if rng.IntN(3) == 0 {
				merged = append(fresh(5+rng.IntN(40)), merged...) // an input never indexed
			}
			rng.Shuffle(len(merged), func(i, j int) { merged[i], merged[j] = merged[j], merged[i] })
			during = mk(nextID, merged)
			nextID++
			var ids []uint64
			for _, in := range inputs {
				ids = append(ids, in.id)
			}
			for _, h := range merged {
				deepest = max(deepest, segmentsHolding(x, h, ids))
			}
			x.hooks.recoded = func() {
				if steps++; steps%3 == 0 {
					check(fmt.Sprintf("op %d: during Replace(%v, %d)", op, ids, during.id))
				}
			}
			x.hooks.cleared = func() {
				check(fmt.Sprintf("op %d: Replace(%v, %d) cleared", op, ids, during.id))
				book := x.book.Load()
				ml := book.tables[x.byID[during.id]].length
				for _, id := range ids {
					switch il := book.tables[x.byID[id]].length; {
					case ml < il:
						overwriteShorter++
					case ml > il:
						overwriteLonger++
					}
				}
			}
			before := len(*x.segs.Load())
			if err := x.Replace(ids, during.id, merged, dropped); err != nil {
				t.Fatal(err)
			}
			if len(*x.segs.Load()) > before {
				overwriteGrew++
			}
			x.hooks.recoded, x.hooks.cleared = nil, nil
			m := during
			live = append(append(append([]*table(nil), live[:at]...), m), live[at+n:]...)
			during, droppedSet = nil, nil
			for _, h := range m.keys {
				for _, id := range x.LookupHash(h, buf[:0]) {
					if slices.ContainsFunc(inputs, func(in *table) bool { return in.id == id }) {
						t.Fatalf("op %d: key %#x of merge %d still names input %d", op, h, m.id, id)
					}
				}
			}
			for _, h := range m.keys {
				if k, n := mergedTwice(x, h, m.id); n > 1 {
					t.Fatalf("op %d: key %#x of merge %d has %d equal entries in segment %d", op, h, m.id, n, k)
				}
			}
			if c, n := x.count[x.byID[m.id]], int64(len(m.keys)); c > n {
				t.Fatalf("op %d: merge %d holds %d entries for %d keys", op, m.id, c, n)
			}
			inputs = nil
			merges++
		} else {
			hs := fresh(3 + rng.IntN(30))
			for _, tb := range live {
				for range 1 + rng.IntN(4) {
					hs = append(hs, tb.keys[rng.IntN(len(tb.keys))]) // overwrites
				}
			}
			if rng.IntN(2) == 0 {
				c := crowds[rng.IntN(len(crowds))]
				at := rng.IntN(len(c) - 5)
				hs = append(hs, c[at:at+5]...)
			}
			slices.Sort(hs)
			hs = slices.Compact(hs)
			tb := mk(nextID, hs)
			nextID++
			if err := x.AddTable(tb.id, hs); err != nil {
				t.Fatal(err)
			}
			live = append([]*table{tb}, live...)
		}
		check(fmt.Sprintf("op %d", op))
		checkCanonical(t, x)
		keys := 0
		for _, tb := range live {
			keys += len(tb.keys)
		}
		st := x.Stats()
		if st.Entries > int64(keys) {
			t.Fatalf("op %d: %d entries (%d stashed) for %d keys of live tables: stale versions kept", op, st.Entries, st.Stashed, keys)
		}
		segments = max(segments, st.Segments)
	}
	if deepest >= 3 {
		overwriteDeep++
	}
	if merges == 0 || steps == 0 || deepest < 2 {
		t.Fatalf("%d merges, %d keys recoded, a merged key's entries in up to %d segments: not exercised", merges, steps, deepest)
	}
	t.Logf("w=%d: %d merges, %d keys recoded, a merged key's entries in up to %d segments of %d; %+v", x.w, merges, steps, deepest, segments, x.Stats())
}

// mergedTwice returns the most entries equal to table id's entry for key
// h that one segment holds in h's two buckets, and that segment: a second
// one there is a slot lost, and a sign that a key's search missed its own
// entry.
func mergedTwice(x *Index, h uint64, id uint64) (seg, most int) {
	ti := x.book.Load().tables[x.byID[id]]
	if ti.length == 0 {
		return 0, 0
	}
	p := x.probeOf(h)
	v := x.slotValue(p, ti.code, uint(ti.length))
	for k, s := range *x.segs.Load() {
		i1 := s.primary(p.hi)
		i2 := x.alt(s, i1, p.tag)
		n := 0
		for _, i := range []uint32{i1, i2} {
			for _, e := range x.entries(s, i) {
				if e == v {
					n++
				}
			}
			if i2 == i1 {
				break
			}
		}
		if n > most {
			seg, most = k, n
		}
	}
	return seg, most
}

// segmentsHolding counts the segments where key h has an entry of one of
// the tables ids (its versions).
func segmentsHolding(x *Index, h uint64, ids []uint64) int {
	book := x.book.Load()
	p := x.probeOf(h)
	n := 0
	for _, s := range *x.segs.Load() {
		i1 := s.primary(p.hi)
		i2 := x.alt(s, i1, p.tag)
		has := false
		for _, id := range ids {
			ti := book.tables[x.byID[id]]
			if ti.length == 0 {
				continue
			}
			v := x.slotValue(p, ti.code, uint(ti.length))
			has = has || x.bucketHas(s, i1, v) || x.bucketHas(s, i2, v)
		}
		if has {
			n++
		}
	}
	return n
}
