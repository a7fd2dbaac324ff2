package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexHotKeyNoGrowth: a key held by more tables than its two
// buckets have slots (a counter overwritten in every flush) must not grow
// the index: its versions beyond the buckets' eight slots go to the stash,
// not to a new segment that costs as much as the whole index. Built at
// once (AddTables: a store's Open or rebuild) or table by table into a
// full index, with 9 to 40 tables holding the key; every version is named.
func TestIndexHotKeyNoGrowth(t *testing.T) {
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

// TestIndexAddTablesGrowsByHalf: an index that AddTables overfills
// (sized for fewer keys than it is given) first grows by half of its
// segment, as after AddTables, not by twice it: it was sized for these
// tables, and a first growth of twice its size triples its memory.
func TestIndexAddTablesGrowsByHalf(t *testing.T) {
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
	for bits := 8; bits <= 17; bits++ {
		searched = 0
		x := newIndexSeeded(1000, float64(bits), uint32(bits))
		x.hooks.searched = func(n int) { searched = max(searched, n) }
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
