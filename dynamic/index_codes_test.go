package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexAddTablesBeyondCodes: AddTables with more tables than
// the code tree has leaves (31 to 255 at depths 5 to 8), of skewed sizes
// and sharing a key, at every budget from 8 to 17 bits, into an index
// sized for them and into a tiny one (which grows while they are added):
// every key names its table, the shared key names every table once,
// newest first, and every bucket is canonical. Then half of the tables are
// merged into one, and each key names a table holding it.
func TestIndexAddTablesBeyondCodes(t *testing.T) {
	race.SkipLong(t)
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

// TestIndexManyCandidatesOrder: a lookup that names more tables than
// the insertion sort takes (tables named by every lookup once the code
// tree is full, with slots reused out of age order by removals) answers
// newest first, each table once, with every such table, and allocates
// nothing when dst has room.
func TestIndexManyCandidatesOrder(t *testing.T) {
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
