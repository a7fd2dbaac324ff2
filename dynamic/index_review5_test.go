package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestIndexReplaceVersionsAcrossGrowthNoPass: a small merge whose keys have
// versions on both sides of a growth (a flush just before the index grew,
// one or two after) must clear its inputs' entries itself, by the keys'
// hashes, and leave none for the removal's pass over the segments: that
// pass costs the whole of a large older segment, the index's size rather
// than the merge's, which a compaction in place is meant not to pay.
// Lookups of every key are checked while the Replace runs, and after.
func TestIndexReplaceVersionsAcrossGrowthNoPass(t *testing.T) {
	for _, bits := range []float64{8, 10, 12, 14, 16, 17} {
		for seed := uint32(1); seed <= 3; seed++ {
			for _, three := range []bool{false, true} {
				t.Run(fmt.Sprintf("bits=%v/seed=%d/three=%v", bits, seed, three), func(t *testing.T) {
					testVersionsAcrossGrowthNoPass(t, bits, seed, three)
				})
			}
		}
	}
}

func testVersionsAcrossGrowthNoPass(t *testing.T, bits float64, seed uint32, three bool) {
	const big, hot = 20_000, 300
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(bits)))
	gen := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = rng.Uint64()
		}
		return out
	}
	x := newIndexSeeded(big+hot, bits, seed)
	tables := map[uint64][]uint64{1: gen(big)}
	hotKeys := gen(hot)
	tables[2] = hotKeys
	next := uint64(3)
	grow := func() {
		newest := (*x.segs.Load())[len(*x.segs.Load())-1]
		for n := len(*x.segs.Load()); len(*x.segs.Load()) == n; next++ {
			tables[next] = gen(int(newest.n) / 2)
			if err := x.AddTable(next, tables[next]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range []uint64{1, 2} {
		if err := x.AddTable(id, tables[id]); err != nil {
			t.Fatal(err)
		}
	}
	if len(*x.segs.Load()) != 1 {
		t.Fatal("the index grew before the first flush of the hot keys: not exercised")
	}
	grow()
	const second, third, m = 1 << 40, 1<<40 + 1, 1<<40 + 2
	inputs := []uint64{2, second}
	tables[second] = hotKeys
	if err := x.AddTable(second, hotKeys); err != nil {
		t.Fatal(err)
	}
	if three {
		grow()
		tables[third] = hotKeys[:hot/2]
		if err := x.AddTable(third, tables[third]); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, third)
	}
	segs := *x.segs.Load()
	if s0 := segs[0]; s0.byTable[x.byID[2]] == 0 || int(s0.n) < 8*hot {
		t.Fatal("the first flush of the hot keys is not in a large first segment: not exercised")
	}
	slots := make([]int, len(inputs))
	for i, id := range inputs {
		slots[i] = x.byID[id]
	}
	var buf []uint64
	check := func(when string, during bool) {
		t.Helper()
		for id, hs := range tables {
			if id == 2 || id >= second {
				continue
			}
			for _, h := range hs {
				if buf = x.LookupHash(h, buf[:0]); !holds(buf, id) {
					t.Fatalf("%s: key %#x of table %d names %v", when, h, id, buf)
				}
			}
		}
		for _, h := range hotKeys {
			buf = x.LookupHash(h, buf[:0])
			ok := holds(buf, m) || during && (holds(buf, 2) || holds(buf, second))
			if !ok {
				t.Fatalf("%s: hot key %#x names %v", when, h, buf)
			}
		}
	}
	steps, cleared := 0, false
	idxTestHookRecoded = func() {
		if steps++; steps%29 == 0 {
			check("during the Replace", true)
		}
	}
	idxTestHookCleared = func() {
		cleared = true
		check("once the inputs' entries are cleared", true)
		for k, s := range *x.segs.Load() {
			for _, it := range slots {
				if it < len(s.byTable) && s.byTable[it] > 0 {
					t.Errorf("segment %d of %d (%d buckets) still holds %d entries of input slot %d: the removal must pass over it", k, len(*x.segs.Load()), s.n, s.byTable[it], it)
				}
			}
		}
	}
	defer func() { idxTestHookRecoded, idxTestHookCleared = nil, nil }()
	if err := x.Replace(inputs, m, hotKeys, nil); err != nil {
		t.Fatal(err)
	}
	idxTestHookRecoded, idxTestHookCleared = nil, nil
	if !cleared || steps < hot {
		t.Fatalf("cleared hook %v, %d keys recoded: not exercised", cleared, steps)
	}
	for _, id := range inputs {
		delete(tables, id)
	}
	check("after the Replace", false)
	for _, h := range hotKeys {
		n := 0
		for _, id := range x.LookupHash(h, nil) {
			if id == 2 || id == second || id == third {
				t.Fatalf("hot key %#x names removed table %d", h, id)
			}
			if id == m {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("hot key %#x names the merge %d times", h, n)
		}
	}
	checkCanonical(t, x)
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
	defer func() { idxTestHookRecoded, idxTestHookCleared = nil, nil }()
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
			idxTestHookRecoded = func() {
				if steps++; steps%3 == 0 {
					check(fmt.Sprintf("op %d: during Replace(%v, %d)", op, ids, during.id))
				}
			}
			idxTestHookCleared = func() {
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
			idxTestHookRecoded, idxTestHookCleared = nil, nil
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

// TestIndexHotKeysStashBounded: keys overwritten in every flush (counters)
// have more versions than their two buckets have slots, so the versions
// beyond half of them go to the stash. Merging tables must not leave the
// stash with an entry per input for the merge (duplicates), nor keep a
// stash entry for a key that got its slot entry for the merge: those pile
// up merge after merge until the stash is full, and then every table a
// further version cannot be placed for is named by every lookup. Here the
// stash must hold at most one entry per hot key and live table, no table
// may become one that every lookup names, and every key stays named.
func TestIndexHotKeysStashBounded(t *testing.T) {
	for _, bits := range []float64{10, 16} {
		t.Run(fmt.Sprintf("bits=%v", bits), func(t *testing.T) { testHotKeysStashBounded(t, bits) })
	}
}

func testHotKeysStashBounded(t *testing.T, bits float64) {
	rng := rand.New(rand.NewPCG(uint64(bits), 2))
	hot := []uint64{rng.Uint64(), rng.Uint64(), rng.Uint64()}
	x := newIndexSeeded(30_000, bits, 3)
	type table struct {
		id   uint64
		keys []uint64
	}
	var live []*table // newest first
	next := uint64(0)
	check := func(when string) {
		t.Helper()
		for _, tb := range live {
			for _, h := range tb.keys {
				if !holds(x.LookupHash(h, nil), tb.id) {
					t.Fatalf("%s: key %#x of table %d not named", when, h, tb.id)
				}
			}
		}
	}
	maxStashed := 0
	for f := 0; f < 700; f++ {
		ks := append(slices.Clone(hot), make([]uint64, 100)...)
		for i := len(hot); i < len(ks); i++ {
			ks[i] = rng.Uint64()
		}
		next++
		if err := x.AddTable(next, ks); err != nil {
			t.Fatal(err)
		}
		live = append([]*table{{next, ks}}, live...)
		for len(live) > 24 {
			// The four adjacent tables holding the fewest keys, as kvdemo's
			// size-tiered compaction picks them.
			best, at := -1, 0
			for i := 0; i+4 <= len(live); i++ {
				n := 0
				for _, tb := range live[i : i+4] {
					n += len(tb.keys)
				}
				if best < 0 || n < best {
					best, at = n, i
				}
			}
			seen := map[uint64]bool{}
			var ids, merged []uint64
			for _, tb := range live[at : at+4] {
				ids = append(ids, tb.id)
				for _, h := range tb.keys {
					if !seen[h] {
						seen[h] = true
						merged = append(merged, h)
					}
				}
			}
			next++
			if err := x.Replace(ids, next, merged, nil); err != nil {
				t.Fatal(err)
			}
			live = append(append(append([]*table(nil), live[:at]...), &table{next, merged}), live[at+4:]...)
		}
		st := x.Stats()
		maxStashed = max(maxStashed, st.Stashed)
		if st.Stashed > len(hot)*len(live) || st.Always != 0 {
			t.Fatalf("flush %d: %d stashed for %d hot keys in %d tables, %d tables named by every lookup", f, st.Stashed, len(hot), len(live), st.Always)
		}
		if f%100 == 99 {
			check(fmt.Sprintf("flush %d", f))
		}
	}
	check("at the end")
	checkCanonical(t, x)
	if maxStashed == 0 {
		t.Fatal("no version went to the stash: not exercised")
	}
	for _, h := range hot {
		got := x.LookupHash(h, nil)
		if len(got) != len(live) {
			t.Fatalf("hot key names %d tables, %d live: %v", len(got), len(live), got)
		}
	}
	t.Logf("bits %v: up to %d stashed; %+v", bits, maxStashed, x.Stats())
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
	for time.Now().Before(deadline) || merges < 8 || grew == 0 && merges < 400 {
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

// TestIndexRelocationCrowdedPair: a key held by more tables than its two
// buckets have slots fills them with its own versions, entries of one tag,
// which can only move between those same two buckets. The relocation
// search for its next version must see that at once, not go back and forth
// between the two buckets until its node limit: a key overwritten in
// flush after flush would make each of its inserts cost thousands of
// bucket reads, and a store whose keys are overwritten often spent nearly
// all its index upkeep there (BenchmarkIndexOverwrites). Every version
// must still be named.
func TestIndexRelocationCrowdedPair(t *testing.T) {
	searched := 0 // the most nodes a search queued
	idxTestHookSearched = func(n int) { searched = max(searched, n) }
	defer func() { idxTestHookSearched = nil }()
	for bits := 8; bits <= 17; bits++ {
		searched = 0
		x := newIndexSeeded(1000, float64(bits), uint32(bits))
		h := uint64(0x1234_5678_9abc_def0) + uint64(bits)
		var ids []uint64
		for id := uint64(1); id <= 2*idxSlots+3; id++ {
			if err := x.AddTable(id, []uint64{h}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if st := x.Stats(); st.Stashed == 0 {
			t.Fatalf("bits %d: no version of the key went to the stash: not exercised (%+v)", bits, st)
		}
		if c := searched; c > 4*idxSlots {
			t.Errorf("bits %d: the relocation search from a pair full of one key's versions grew its queue to %d nodes", bits, c)
		}
		got := x.LookupHash(h, nil)
		slices.Reverse(ids)
		if !slices.Equal(got, ids) {
			t.Fatalf("bits %d: the key names %v, want %v", bits, got, ids)
		}
		checkCanonical(t, x)
	}
}

// TestIndexReplaceStashedKeyAlsoDropped: a caller that lists a key both in
// merged's keys and among the dropped ones (a bug of the store's, say) must
// not lose it: a key whose input entry was only in the stash keeps its
// stash entry, now naming the merge, however dropped lists it.
func TestIndexReplaceStashedKeyAlsoDropped(t *testing.T) {
	for bits := 8; bits <= 17; bits += 3 {
		x := newIndexSeeded(1000, float64(bits), uint32(bits)+50)
		h := uint64(0x0fed_cba9_8765_4321) + uint64(bits)
		for id := uint64(1); id <= 2*idxSlots+3; id++ {
			if err := x.AddTable(id, []uint64{h}); err != nil {
				t.Fatal(err)
			}
		}
		book := x.book.Load()
		if len(book.stash) == 0 {
			t.Fatalf("bits %d: no version stashed: not exercised", bits)
		}
		in := book.tables[book.stash[0].table].id
		other := hashesOf([][]byte{[]byte("other key")})
		if err := x.Replace([]uint64{in}, 100, append(other, h), []uint64{h}); err != nil {
			t.Fatal(err)
		}
		if got := x.LookupHash(h, nil); !holds(got, 100) {
			t.Fatalf("bits %d: the merge of stashed table %d names the key in %v", bits, in, got)
		}
		checkCanonical(t, x)
	}
}
