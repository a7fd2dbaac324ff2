package relocate

import (
	"math/rand/v2"
	"testing"
)

// cuckoo is a table of 4-slot buckets whose items each know their two
// buckets: the shape both codec builders and a mutable filter have.
type cuckoo struct {
	items [][]int // per bucket: item ids
	b1    []uint32
	b2    []uint32
}

func (c *cuckoo) Room(b uint32) bool { return len(c.items[b]) < Slots }

// Items numbers an item by its id plus one, 0 being an empty slot.
func (c *cuckoo) Items(b uint32) (items [Slots]uint32) {
	for j, e := range c.items[b] {
		items[j] = uint32(e) + 1
	}
	return items
}
func (c *cuckoo) Other(b, v uint32) uint32 { return c.b1[v-1] + c.b2[v-1] - b }

func (c *cuckoo) move(st Step) {
	e := c.items[st.From][st.Slot]
	c.items[st.From] = append(c.items[st.From][:st.Slot], c.items[st.From][st.Slot+1:]...)
	c.items[st.To] = append(c.items[st.To], e)
}

// insert places a new item with the given buckets, moving others along
// the path Find returns; it reports whether it placed it.
func (c *cuckoo) insert(s *Search, a, b uint32, lim Limits) bool {
	id := len(c.b1)
	c.b1, c.b2 = append(c.b1, a), append(c.b2, b)
	for _, r := range []uint32{a, b} {
		if c.Room(r) {
			c.items[r] = append(c.items[r], id)
			return true
		}
	}
	path, ok := Find(s, c, a, b, lim)
	if !ok {
		c.b1, c.b2 = c.b1[:id], c.b2[:id]
		return false
	}
	for i := len(path) - 1; i >= 0; i-- {
		c.move(path[i])
	}
	c.items[path[0].From] = append(c.items[path[0].From], id)
	return true
}

// shortest is the length of the shortest path from a or b to a bucket
// with room, by a search written independently (distances over the whole
// table), or -1.
func shortest(c *cuckoo, a, b uint32) int {
	dist := make([]int, len(c.items))
	for i := range dist {
		dist[i] = -1
	}
	dist[a], dist[b] = 0, 0
	q := []uint32{a, b}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for _, e := range c.items[u] {
			v := c.Other(u, uint32(e)+1)
			if dist[v] >= 0 {
				continue
			}
			dist[v] = dist[u] + 1
			if c.Room(v) {
				return dist[v]
			}
			q = append(q, v)
		}
	}
	return -1
}

// TestFindShortestValidPaths fills random tables to the brim and checks
// every path Find returns: it is as short as any, each step moves an item
// to its other bucket, it ends at a bucket with room, and carrying it out
// loses no item and leaves every item in one of its buckets.
func TestFindShortestValidPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s Search
	for trial := range 40 {
		m := uint32(8 + rng.IntN(300))
		c := &cuckoo{items: make([][]int, m)}
		searched, failed := 0, 0
		for range 4 * int(m) {
			a := rng.Uint32N(m)
			b := rng.Uint32N(m)
			if c.Room(a) || c.Room(b) {
				c.insert(&s, a, b, Limits{})
				continue
			}
			want := shortest(c, a, b)
			path, ok := Find(&s, c, a, b, Limits{})
			searched++
			if !ok {
				failed++
				if want >= 0 {
					t.Fatalf("trial %d: no path found, one of %d moves exists", trial, want)
				}
				continue
			}
			if len(path) != want {
				t.Fatalf("trial %d: path of %d moves, the shortest has %d", trial, len(path), want)
			}
			if path[0].From != a && path[0].From != b || !c.Room(path[len(path)-1].To) {
				t.Fatalf("trial %d: path %v does not run from a root to room", trial, path)
			}
			for i, st := range path {
				e := uint32(c.items[st.From][st.Slot]) + 1
				if c.Other(st.From, e) != st.To || st.Item != e || i > 0 && path[i-1].To != st.From {
					t.Fatalf("trial %d: step %d of %v is not a move to the item's other bucket", trial, i, path)
				}
			}
			if !c.insert(&s, a, b, Limits{}) {
				t.Fatalf("trial %d: insert failed where Find found a path", trial)
			}
		}
		total := 0
		for u, items := range c.items {
			total += len(items)
			for _, e := range items {
				if uint32(u) != c.b1[e] && uint32(u) != c.b2[e] {
					t.Fatalf("trial %d: item %d in bucket %d, not one of its own", trial, e, u)
				}
			}
		}
		if total != len(c.b1) {
			t.Fatalf("trial %d: %d items stored, %d inserted", trial, total, len(c.b1))
		}
		if searched == 0 || failed == 0 {
			t.Fatalf("trial %d: %d searches, %d failed: the table never filled", trial, searched, failed)
		}
	}
}

// TestFindOrderAndLimit pins the search order (roots a then b, slots in
// order, the first bucket with room reached ends it) on a small table, and
// that a limit on the buckets queued cuts the search off.
func TestFindOrderAndLimit(t *testing.T) {
	// Buckets 0 and 1 full. Bucket 0's items lead to 2 (full) and 3 (room);
	// bucket 1's to 4 (room). Bucket 2's items lead to 5 (room).
	c := &cuckoo{items: make([][]int, 6)}
	add := func(b, other uint32, n int) {
		for range n {
			c.b1, c.b2 = append(c.b1, b), append(c.b2, other)
			c.items[b] = append(c.items[b], len(c.b1)-1)
		}
	}
	add(0, 2, 1)
	add(0, 3, 3)
	add(1, 4, 4)
	add(2, 5, 4)
	var s Search
	path, ok := Find(&s, c, 0, 1, Limits{})
	if !ok || len(path) != 1 || path[0] != (Step{From: 0, Slot: 1, To: 3, Item: 2}) {
		t.Fatalf("path %v, %v: want bucket 0's slot 1 to bucket 3", path, ok)
	}
	if got := s.Reached(nil); len(got) != 4 || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 3 {
		t.Fatalf("reached %v, want [0 1 2 3]", got)
	}
	if p := s.PathTo(2); len(p) != 1 || p[0] != (Step{From: 0, Slot: 0, To: 2, Item: 1}) {
		t.Fatalf("path to bucket 2: %v", p)
	}
	if p := s.PathTo(1); len(p) != 0 {
		t.Fatalf("path to root 1: %v", p)
	}
	path, ok = Find(&s, c, 1, 0, Limits{})
	if !ok || path[0] != (Step{From: 1, Slot: 0, To: 4, Item: 5}) {
		t.Fatalf("roots swapped: path %v, %v: want bucket 1's slot 0 to bucket 4", path, ok)
	}
	if _, ok := Find(&s, c, 0, 1, Limits{Nodes: 2}); ok || s.Queued() != 2 {
		t.Fatalf("a limit of 2 buckets queued: the search went past the roots (%d queued)", s.Queued())
	}
	if a := testing.AllocsPerRun(100, func() { Find(&s, c, 0, 1, Limits{}) }); a != 0 {
		t.Fatalf("Find allocates %.1f times once grown", a)
	}
}
