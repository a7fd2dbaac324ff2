package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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

// TestIndexReviewModelEveryWidth runs a deterministic random history of
// AddTable, AddTables, Replace (with keys new to the index, dropped keys
// and crowds of keys sharing buckets, nibbles and fingerprints) and
// removals on tiny indexes of every budget from 8 to 17 bits (every slot
// width, 10 to 16 bits, with each of their tag widths), with more tables
// than the code tree has short codes, so that codes are lengthened, also
// during Replace's claim, and some tables are named by every lookup. After
// each key a Replace handles, and once it has cleared its inputs' leftover
// entries, every key of every table must be named by a table that holds
// it; after every call, every bucket must be canonical and the counts
// exact, and the answer of a lookup, and of one that names every table,
// must be newest first, each table once, with every live table in the
// latter.
func TestIndexReviewModelEveryWidth(t *testing.T) {
	for bits := 8; bits <= 17; bits++ {
		for seed := uint32(1); seed <= 2; seed++ {
			capacity := 150
			if seed == 2 {
				capacity = 20 // seven buckets: growth comes at once
			}
			t.Run(fmt.Sprintf("bits=%d/seed=%d/capacity=%d", bits, seed, capacity), func(t *testing.T) {
				testReviewModel(t, float64(bits), seed, capacity)
			})
		}
	}
	if reviewLengthened == 0 || reviewStashed == 0 {
		t.Fatalf("%d codes lengthened, %d entries stashed: not exercised", reviewLengthened, reviewStashed)
	}
}

// reviewLengthened counts the codes the model histories lengthened.
var reviewLengthened, reviewStashed int

func testReviewModel(t *testing.T, bits float64, seed uint32, capacity int) {
	defer func() { idxTestHookRecoded, idxTestHookCleared = nil, nil }()
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
			idxTestHookRecoded = func() {
				if steps++; steps%checkEvery != 0 {
					return
				}
				check(fmt.Sprintf("op %d: during Replace(%v, %d)", op, inputIDs, mergeID))
			}
			idxTestHookCleared = func() { check(fmt.Sprintf("op %d: Replace(%v, %d) cleared", op, inputIDs, mergeID)) }
			err := x.Replace(inputIDs, mergeID, merged, dropped)
			idxTestHookRecoded, idxTestHookCleared = nil, nil
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
	reviewLengthened += lengthened
	reviewStashed += stashed
}

// TestIndexReviewConcurrentEveryWidth: at every budget from 8 to 17 bits,
// readers look up, all the while, keys of tables whose AddTable or Replace
// had returned, while the writer adds tables made partly of crowds (keys
// sharing buckets, nibbles and all but the low fingerprint bits), keeps up
// to 40 tables live so that codes are lengthened, merges runs of them
// (dropping only mortal keys, adding keys the index never held, so that
// segments are added during Replaces) and removes tables of mortal keys
// only. Every lookup must name a table that holds its key. Run with -race.
func TestIndexReviewConcurrentEveryWidth(t *testing.T) {
	dur := 300 * time.Millisecond
	if testing.Short() {
		dur = 100 * time.Millisecond
	}
	for bits := 8; bits <= 17; bits++ {
		t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
			testReviewConcurrent(t, float64(bits), uint32(bits)*31, dur)
		})
	}
}

func testReviewConcurrent(t *testing.T, bits float64, seed uint32, dur time.Duration) {
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
	for time.Now().Before(deadline) || merges < 10 {
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

// TestIndexReviewAddTablesBeyondCodes: AddTables with more tables than
// the code tree has leaves (31 to 255 at depths 5 to 8), of skewed sizes
// and sharing a key, at every budget from 8 to 17 bits, into an index
// sized for them and into a tiny one (which grows while they are added):
// every key names its table, the shared key names every table once,
// newest first, and every bucket is canonical. Then half of the tables are
// merged into one, and each key names a table holding it.
func TestIndexReviewAddTablesBeyondCodes(t *testing.T) {
	for bits := 8; bits <= 17; bits++ {
		for _, tiny := range []bool{false, true} {
			t.Run(fmt.Sprintf("bits=%d/tiny=%v", bits, tiny), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(bits), 11))
				var ids []uint64
				var sets [][]uint64
				total := 0
				shared := KeyHash([]byte("shared"))
				w, m, _ := indexShape(float64(bits))
				for i := 0; i < 1<<(w-m)+20; i++ { // leaves, and then some
					n := 1 + rng.IntN(40)
					if i%20 == 0 {
						n = 2000 // a few large tables take the short codes
					}
					hs := append(hashesOf(testkeys.Random(n, 12, rng.Uint64())), shared)
					ids = append(ids, uint64(i+1))
					sets = append(sets, hs)
					total += len(hs)
				}
				capacity := total
				if tiny {
					capacity = 10
				}
				x := newIndexSeeded(capacity, float64(bits), uint32(bits))
				if err := x.AddTables(ids, sets); err != nil {
					t.Fatal(err)
				}
				check := func(when string, holder func(id uint64) uint64) {
					t.Helper()
					for i, id := range ids {
						for _, h := range sets[i] {
							got := x.LookupHash(h, nil)
							if h%64 == 0 { // the order check reads the codebook
								checkAnswerOrder(t, x, got, when)
							}
							ok := holds(got, holder(id))
							if !ok {
								t.Fatalf("%s: key %#x of table %d names %v", when, h, id, got)
							}
						}
					}
				}
				check("after AddTables", func(id uint64) uint64 { return id })
				want := slices.Clone(ids)
				slices.Reverse(want)
				if got := x.LookupHash(shared, nil); !slices.Equal(got, want) {
					t.Fatalf("the shared key names %d tables, want all %d newest first", len(got), len(want))
				}
				checkCanonical(t, x)
				st := x.Stats()
				// Merge the older half into table 1000.
				half := ids[:len(ids)/2]
				seen := map[uint64]bool{}
				var merged []uint64
				for i := range half {
					for _, h := range sets[i] {
						if !seen[h] {
							seen[h] = true
							merged = append(merged, h)
						}
					}
				}
				if err := x.Replace(half, 1000, merged, nil); err != nil {
					t.Fatal(err)
				}
				check("after merging the older half", func(id uint64) uint64 {
					if id <= uint64(len(half)) {
						return 1000
					}
					return id
				})
				checkCanonical(t, x)
				t.Logf("w=%d m=%d: %+v; after the merge %+v", x.w, x.m, st, x.Stats())
			})
		}
	}
}

// TestIndexReviewManyCandidatesOrder: a lookup that names more tables than
// the insertion sort takes (tables named by every lookup once the code
// tree is full, with slots reused out of age order by removals) answers
// newest first, each table once, with every such table, and allocates
// nothing when dst has room.
func TestIndexReviewManyCandidatesOrder(t *testing.T) {
	x := newIndexSeeded(2000, 10, 3)
	var live []uint64
	add := func(id uint64) {
		if err := x.AddTable(id, hashesOf(testkeys.Random(20, 12, id))); err != nil {
			t.Fatal(err)
		}
		live = append(live, id)
	}
	for id := uint64(1); id <= 60; id++ {
		add(id)
	}
	// Free slots in the middle, then reuse them for the newest tables.
	for _, id := range []uint64{5, 17, 18, 33, 40} {
		if err := x.RemoveTable(id); err != nil {
			t.Fatal(err)
		}
		live = slices.DeleteFunc(live, func(v uint64) bool { return v == id })
	}
	for id := uint64(61); id <= 70; id++ {
		add(id)
	}
	st := x.Stats()
	if st.Always <= idxInsertionSortMax {
		t.Fatalf("%d tables named always: the long sort is not exercised", st.Always)
	}
	var always []uint64
	for _, ti := range x.book.Load().tables {
		if ti.live && ti.always {
			always = append(always, ti.id)
		}
	}
	absent := hashesOf(testkeys.Absent(200, 9))
	buf := make([]uint64, 0, 128)
	for _, h := range absent {
		buf = x.LookupHash(h, buf[:0])
		checkAnswerOrder(t, x, buf, "absent key")
		for _, id := range always {
			if !holds(buf, id) {
				t.Fatalf("table %d, named always, missing from %v", id, buf)
			}
		}
	}
	every := x.everyTable(nil)
	checkAnswerOrder(t, x, every, "every table")
	if len(every) != len(live) {
		t.Fatalf("every table named %d, %d live", len(every), len(live))
	}
	if a := testing.AllocsPerRun(100, func() { buf = x.LookupHash(absent[0], buf[:0]) }); a != 0 {
		t.Fatalf("%v allocations per lookup", a)
	}
}

// TestIndexReviewHotKeyNoGrowth: a key held by more tables than its two
// buckets have slots (a counter overwritten in every flush) must not grow
// the index: its versions beyond the buckets' eight slots go to the stash,
// not to a new segment that costs as much as the whole index. Built at
// once (AddTables: a store's Open or rebuild) or table by table into a
// full index, with 9 to 40 tables holding the key; every version is named.
func TestIndexReviewHotKeyNoGrowth(t *testing.T) {
	hot := KeyHash([]byte("hot"))
	for _, tables := range []int{9, 16, 17, 22, 40} {
		for _, atOnce := range []bool{true, false} {
			var ids []uint64
			var sets [][]uint64
			total := 0
			for i := 0; i < tables; i++ {
				hs := append(hashesOf(testkeys.Random(3000, 16, uint64(i)+7)), hot)
				ids = append(ids, uint64(i+1))
				sets = append(sets, hs)
				total += len(hs)
			}
			x := newIndexSeeded(total+total/100+1024, 10, 5)
			if atOnce {
				if err := x.AddTables(ids, sets); err != nil {
					t.Fatal(err)
				}
			} else {
				for i, id := range ids {
					if err := x.AddTable(id, sets[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			st := x.Stats()
			t.Logf("hot key in %d tables, at once %v: %+v", tables, atOnce, st)
			if st.Segments != 1 {
				t.Errorf("hot key in %d tables (at once %v): %d segments, %.1f bits per entry", tables, atOnce, st.Segments, st.BitsPerKey)
			}
			got := x.LookupHash(hot, nil)
			want := slices.Clone(ids)
			slices.Reverse(want)
			if !slices.Equal(got, want) {
				t.Fatalf("hot key in %d tables (at once %v): named %v", tables, atOnce, got)
			}
			for i, id := range ids {
				for _, h := range sets[i] {
					if !holds(x.LookupHash(h, nil), id) {
						t.Fatalf("key %#x of table %d not named", h, id)
					}
				}
			}
			checkCanonical(t, x)
		}
	}
}

// TestIndexReviewAddTablesGrowsByHalf: an index that AddTables overfills
// (sized for fewer keys than it is given) first grows by half of its
// segment, as after AddTables, not by twice it: it was sized for these
// tables, and a first growth of twice its size triples its memory.
func TestIndexReviewAddTablesGrowsByHalf(t *testing.T) {
	x := newIndexSeeded(2000, 10, 1)
	var ids []uint64
	var sets [][]uint64
	for i := 0; i < 3; i++ {
		ids = append(ids, uint64(i+1))
		sets = append(sets, hashesOf(testkeys.Random(1000, 16, uint64(i)+40)))
	}
	if err := x.AddTables(ids, sets); err != nil {
		t.Fatal(err)
	}
	segs := *x.segs.Load()
	if len(segs) < 2 {
		t.Fatalf("%d segment(s): the index did not grow, not exercised", len(segs))
	}
	if segs[1].n != segs[0].n/2 {
		t.Fatalf("first growth: %d buckets after %d, want half", segs[1].n, segs[0].n)
	}
	for i, id := range ids {
		for _, h := range sets[i] {
			if !holds(x.LookupHash(h, nil), id) {
				t.Fatalf("key %#x of table %d not named", h, id)
			}
		}
	}
	checkCanonical(t, x)
}
