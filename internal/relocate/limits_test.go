package relocate

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// table is a plain cuckoo table for the tests: n buckets of four entries,
// each its own item (a fingerprint), Other(i, v) = (v − i) mod n, an
// involution, 0 empty.
type table struct {
	b [][Slots]uint32
}

func (t *table) Items(i uint32) [Slots]uint32 { return t.b[i] }
func (t *table) Other(i, v uint32) uint32 {
	n := uint32(len(t.b))
	return ((v % n) + n - i) % n
}
func (t *table) Room(i uint32) bool {
	for _, v := range t.b[i] {
		if v == 0 {
			return true
		}
	}
	return false
}

// apply carries out path and reports whether each move found its entry in
// From and room in To.
func (t *table) apply(path []Step) bool {
	for k := len(path) - 1; k >= 0; k-- {
		m := path[k]
		from, to := &t.b[m.From], &t.b[m.To]
		src, dst := -1, -1
		for j := range Slots {
			if from[j] == m.Item && src < 0 {
				src = j
			}
			if to[j] == 0 && dst < 0 {
				dst = j
			}
		}
		if src < 0 || dst < 0 || t.Other(m.From, m.Item) != m.To {
			return false
		}
		to[dst], from[src] = m.Item, 0
	}
	return true
}

// bfsDepth is the fewest moves that free a slot in i1 or i2, by an
// exhaustive breadth-first search with no bounds (-1: none within limit).
func (t *table) bfsDepth(i1, i2 uint32, limit int) int {
	dist := map[uint32]int{i1: 0, i2: 0}
	frontier := []uint32{i1, i2}
	for d := 1; d <= limit; d++ {
		var next []uint32
		for _, i := range frontier {
			for _, v := range t.b[i] {
				if v == 0 {
					continue
				}
				to := t.Other(i, v)
				if t.Room(to) {
					return d
				}
				if _, ok := dist[to]; !ok {
					dist[to] = d
					next = append(next, to)
				}
			}
		}
		frontier = next
	}
	return -1
}

// TestSearchShortestValidPath fills random tables nearly full and checks
// that every path found is made of real moves (each entry in its bucket,
// each destination its other bucket), ends in a free slot, and is as
// short as an exhaustive search finds, with and without a set of the
// buckets reached.
func TestSearchShortestValidPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var seen Search
	var queue [64]Node // grows on the heap
	found := 0
	for round := 0; round < 300; round++ {
		n := uint32(8 + rng.IntN(200))
		tb := &table{b: make([][Slots]uint32, n)}
		// Place entries at random into their bucket, leaving a few slots free.
		for k := 0; k < int(n)*Slots*9/10; k++ {
			v := 1 + rng.Uint32N(1<<20)
			i := rng.Uint32N(n)
			for j := range Slots {
				if tb.b[i][j] == 0 {
					tb.b[i][j] = v
					break
				}
			}
		}
		i1 := rng.Uint32N(n)
		i2 := tb.Other(i1, 1+rng.Uint32N(1<<20))
		if tb.Room(i1) || tb.Room(i2) {
			continue
		}
		want := tb.bfsDepth(i1, i2, 5)
		for _, revisit := range []bool{true, false} {
			c := &table{b: append([][Slots]uint32(nil), tb.b...)}
			lim := Limits{Depth: 5, Nodes: 1 << 20}
			var path []Step
			var queued int
			if revisit {
				path, queued = Revisit(c, i1, i2, lim, queue[:], nil)
			} else {
				path, _ = Find(&seen, c, i1, i2, lim)
				queued = seen.Queued()
			}
			if want < 0 {
				if path != nil {
					t.Fatalf("round %d: a path of %d moves where none exists within 5", round, len(path))
				}
				continue
			}
			if len(path) != want {
				t.Fatalf("round %d (revisit %v): path of %d moves, shortest is %d", round, revisit, len(path), want)
			}
			if path[0].From != i1 && path[0].From != i2 {
				t.Fatalf("round %d: path starts at bucket %d, not %d or %d", round, path[0].From, i1, i2)
			}
			if queued < 3 || !c.apply(path) || !c.Room(path[0].From) {
				t.Fatalf("round %d: path %v does not free a slot in its first bucket", round, path)
			}
			found++
		}
	}
	if found < 50 {
		t.Fatalf("only %d paths checked: the tables are not full enough to exercise the search", found)
	}
}

// TestSearchLimits: no path longer than Depth, no more than Nodes buckets
// queued (plus the last bucket's children), and with a set of the buckets
// reached, no bucket queued twice (but the root, given twice).
func TestSearchLimits(t *testing.T) {
	// Every bucket full of entries whose other bucket is the next one: a
	// chain of n buckets, the last with room.
	const n = 8
	tb := &table{b: make([][Slots]uint32, n)}
	for i := uint32(0); i < n-1; i++ {
		v := 2*i + 1 // Other(i, v) = v − i = i + 1
		tb.b[i] = [Slots]uint32{v, v + n, v + 2*n, v + 3*n}
	}
	if p, _ := Revisit(tb, 0, 0, Limits{Depth: n - 2, Nodes: 1 << 20}, nil, nil); p != nil {
		t.Fatalf("a path of %d moves with depth %d", len(p), n-2)
	}
	p, _ := Revisit(tb, 0, 0, Limits{Depth: n - 1, Nodes: 1 << 20}, nil, nil)
	if len(p) != n-1 {
		t.Fatalf("path of %d moves, want %d", len(p), n-1)
	}
	var seen Search
	p, _ = Find(&seen, tb, 0, 0, Limits{Depth: n - 1, Nodes: 1 << 20})
	if len(p) != n-1 || seen.Queued() != n+1 {
		t.Fatalf("with a set: path of %d moves, %d buckets queued; want %d and %d", len(p), seen.Queued(), n-1, n+1)
	}
	if _, queued := Revisit(tb, 0, 0, Limits{Depth: n - 1, Nodes: 6}, nil, nil); queued > 6+Slots {
		t.Fatalf("%d buckets queued with a limit of 6", queued)
	}
}

// TestRevisitingQueuesAgain: without a set, a bucket reached twice is
// queued twice (the roots given as one bucket, and a pair of buckets whose
// items lead to each other), the path found is the one a search with a
// set finds, and a search whose queue and path are lent storage large
// enough allocates nothing.
func TestRevisitingQueuesAgain(t *testing.T) {
	// Buckets 0 and 1 full of items leading to each other; item 5 in
	// bucket 1 leads to bucket 4, which has room.
	tb := &table{b: make([][Slots]uint32, 5)}
	tb.b[0] = [Slots]uint32{1, 6, 11, 16} // Other(0, v) = v mod 5 = 1
	tb.b[1] = [Slots]uint32{2, 7, 12, 5}  // Other(1, v) = v − 1 mod 5: 1, 1, 1, 4
	var queue [64]Node
	var moves [4]Step
	var seen Search
	for _, roots := range [][2]uint32{{0, 0}, {0, 1}} {
		want, _ := Find(&seen, tb, roots[0], roots[1], Limits{})
		want = append([]Step(nil), want...)
		path, queued := Revisit(tb, roots[0], roots[1], Limits{}, queue[:], moves[:])
		if !slices.Equal(path, want) || path[len(path)-1].To != 4 {
			t.Fatalf("roots %v: path %v without a set, %v with one", roots, path, want)
		}
		if queued <= seen.Queued() {
			t.Fatalf("roots %v: %d buckets queued without a set, %d with one", roots, queued, seen.Queued())
		}
	}
	if a := testing.AllocsPerRun(100, func() {
		if p, _ := Revisit(tb, 0, 1, Limits{Depth: 2}, queue[:], moves[:]); len(p) != 1 {
			t.Fatalf("path %v", p)
		}
	}); a != 0 {
		t.Fatalf("a search in lent storage allocates %.1f times", a)
	}
}
