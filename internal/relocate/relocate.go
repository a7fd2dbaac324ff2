// Package relocate finds room in a cuckoo table: the shortest chain of
// moves, each a resident item to its other bucket, that frees a slot in
// one of a new item's two buckets. It is a breadth-first search over the
// buckets (the search of Li, Andersen, Kaminsky and Freedman,
// "Algorithmic Improvements for Fast Concurrent Cuckoo Hashing", in place
// of the random walk of Fan, Andersen, Kaminsky and Mitzenmacher, "Cuckoo
// Filter: Practically Better Than Bloom"): the shortest path moves the
// fewest items, and a search without a bound finds a path whenever one
// exists, so a static builder that places keys one by one this way places
// a maximum set of them (augmenting paths of a b-matching), and its
// failure is exact. A mutable filter bounds the search (Limits) and
// carries out the moves itself, in reverse order, so that every moved
// item stays in one of its buckets throughout.
//
// The search reads the table through Table and changes nothing: one
// search serves tables with different bucket encodings, from a static
// builder's to a lock-free filter's whose buckets change under it.
package relocate

import "math"

// Slots is the number of slots per bucket the search expects.
const Slots = 4

// Table is a cuckoo table as the search sees it: buckets numbered from 0,
// of Slots slots each, whose items each have one other bucket they may
// move to.
type Table interface {
	// Room reports whether bucket b has a free slot.
	Room(b uint32) bool
	// Items returns bucket b's items slot by slot, read at one instant (a
	// lock-free table's bucket in one load); 0 is an empty slot. An item
	// is whatever lets Other find its other bucket: a fingerprint, a key's
	// number plus one, a slot's number plus one.
	Items(b uint32) [Slots]uint32
	// Other is the other bucket of item v when it sits in bucket b (b
	// itself when the item has only one bucket).
	Other(b, v uint32) uint32
}

// Step is one move of a path: item Item, in slot Slot of bucket From,
// moves to bucket To. A table whose buckets may change before the move
// finds the item by Item; one that does not, by Slot.
type Step struct {
	From, To uint32
	Item     uint32
	Slot     int
}

// Limits bound a search; a zero field bounds nothing.
type Limits struct {
	// Depth is the most moves in a path.
	Depth int
	// Nodes is the most buckets queued: once that many are, the search
	// takes no further bucket from its queue (the last one it took may
	// have queued up to Slots-1 past Nodes).
	Nodes int
}

// Node is a bucket the search reached from node parent (-1 for a root):
// the item item, in slot slot of parent's bucket, moves here. Callers
// hold an array of them only to lend it to Revisit.
type Node struct {
	bucket uint32
	parent int32
	item   uint32
	slot   int32
}

// Search is a search's working memory, kept across searches so that a
// search allocates nothing once it has grown. It is not safe for
// concurrent use. It keeps a set of the buckets reached, so that each
// bucket is queued once: a bucket reached again is full (it was tested
// when first reached), and items with equal fingerprints move between the
// same two buckets, so without the set a pair crowded with one key's
// copies sends the search back and forth between its two buckets, and
// anywhere a bucket reached again spends the bounds on nothing.
type Search struct {
	nodes []Node
	path  []Step
	set   visited
}

// visited is the set of buckets a search reached. low holds those below
// 64, one bit each: small tables (a 64-byte line's buckets) never need
// more. seen is the set of the others, open addressing: an entry is
// gen<<32 | bucket, so that a new search empties it by bumping gen.
type visited struct {
	low  uint64
	seen []uint64
	gen  uint32
}

// Find returns the shortest path from bucket a or b (a first) to a bucket
// with room, in the order of the search: the buckets are taken in the
// order they were reached, the slots of each in order, and the first
// bucket reached that has room ends the search. path[0] moves an item out
// of a or b; carried out from the last step back, each move fills a slot
// the step after it freed, and the first frees a slot in a root. ok is
// false when no bucket with room is reachable within lim. The path is
// valid until the next Find.
//
// Find is generic, not an interface call per slot, so that a table type
// with small methods is searched at the speed of a search written for it.
func Find[T Table](s *Search, t T, a, b uint32, lim Limits) (path []Step, ok bool) {
	s.set.reset()
	nodes, end := search(t, a, b, lim, s.nodes[:0], &s.set)
	s.nodes = nodes
	if end < 0 {
		return nil, false
	}
	s.path = walk(nodes, end, s.path[:0])
	return s.path, true
}

// Revisit is Find for a table that many inserts search at once, lock-free,
// each with a short search of its own: it keeps no set of the buckets
// reached, so a bucket may be queued more than once, which costs only
// work, and it works in storage the caller lends, queue for its queue and
// path for the path, so that both may live on the caller's stack and no
// set has to be held or emptied per insert. Either grows on the heap when
// too small. The path is nil when there is none within lim; queued is the
// number of buckets the search queued, roots included.
func Revisit[T Table](t T, a, b uint32, lim Limits, queue []Node, path []Step) (moves []Step, queued int) {
	nodes, end := search(t, a, b, lim, queue[:0], nil)
	if end < 0 {
		return nil, len(nodes)
	}
	return walk(nodes, end, path[:0]), len(nodes)
}

// search is the breadth-first search of Find and Revisit, with the set of
// buckets reached or none (set nil). It returns the nodes it queued and
// the index of the one with room, or -1. Both roots are queued, even when
// they are one bucket: the second then finds every bucket it leads to
// queued already, unless the search keeps no set.
func search[T Table](t T, a, b uint32, lim Limits, nodes []Node, set *visited) ([]Node, int) {
	depth, most := bound(lim.Depth), bound(lim.Nodes)
	if set != nil {
		set.mark(a, nodes)
		set.mark(b, nodes)
	}
	nodes = append(nodes, Node{bucket: a, parent: -1}, Node{bucket: b, parent: -1})
	for head, level := 0, 0; head < len(nodes) && level < depth; level++ {
		for end := len(nodes); head < end; head++ {
			if len(nodes) >= most {
				return nodes, -1
			}
			u := nodes[head].bucket
			for j, v := range t.Items(u) {
				if v == 0 {
					continue // an empty slot: nothing to move (in a lock-free bucket, one freed since the search found it full)
				}
				w := t.Other(u, v)
				if set != nil { // mark, written out so that a line's buckets take no call
					if w < 64 {
						if set.low>>w&1 != 0 {
							continue
						}
						set.low |= 1 << w
					} else if !set.markHigh(w, nodes) {
						continue
					}
				}
				nodes = append(nodes, Node{bucket: w, parent: int32(head), item: v, slot: int32(j)})
				if t.Room(w) {
					return nodes, len(nodes) - 1
				}
			}
		}
	}
	return nodes, -1
}

func bound(n int) int {
	if n <= 0 {
		return math.MaxInt
	}
	return n
}

// Queued is the number of buckets the last Find queued, roots included.
func (s *Search) Queued() int { return len(s.nodes) }

// Reached returns the buckets the last Find reached, in the order it
// reached them (a builder that found no path chooses among them whom to
// evict). It is valid until the next Find.
func (s *Search) Reached(dst []uint32) []uint32 {
	for _, n := range s.nodes {
		dst = append(dst, n.bucket)
	}
	return dst
}

// PathTo returns the path from a root to the i-th bucket the last Find
// reached (as Reached numbers them): the moves that would carry an item of
// a root there, for a caller that frees a slot in that bucket itself. It
// is valid until the next Find.
func (s *Search) PathTo(i int) []Step {
	s.path = walk(s.nodes, i, s.path[:0])
	return s.path
}

func (v *visited) reset() {
	v.low = 0
	if len(v.seen) == 0 {
		v.seen = make([]uint64, 64)
	}
	if v.gen++; v.gen == 0 { // a generation's entries would look current
		clear(v.seen)
		v.gen = 1
	}
}

// mark adds bucket b to the set, the buckets in nodes being in it
// already; it reports whether b was not in the set yet.
func (v *visited) mark(b uint32, nodes []Node) bool {
	if b >= 64 {
		return v.markHigh(b, nodes)
	}
	old := v.low
	v.low |= 1 << b
	return v.low != old
}

// markHigh is mark for a bucket of 64 or more.
func (v *visited) markHigh(b uint32, nodes []Node) bool {
	if 2*(len(nodes)+1) > len(v.seen) {
		v.grow(nodes)
	}
	mask := uint64(len(v.seen) - 1)
	for i := hash(b) & mask; ; i = (i + 1) & mask {
		e := v.seen[i]
		if uint32(e>>32) != v.gen {
			v.seen[i] = uint64(v.gen)<<32 | uint64(b)
			return true
		}
		if uint32(e) == b {
			return false
		}
	}
}

// grow doubles the set and enters the buckets in nodes again.
func (v *visited) grow(nodes []Node) {
	v.seen = make([]uint64, 2*len(v.seen))
	mask := uint64(len(v.seen) - 1)
	for _, n := range nodes {
		if n.bucket < 64 {
			continue
		}
		i := hash(n.bucket) & mask
		for uint32(v.seen[i]>>32) == v.gen {
			i = (i + 1) & mask
		}
		v.seen[i] = uint64(v.gen)<<32 | uint64(n.bucket)
	}
}

func hash(v uint32) uint64 { return uint64(v) * 0x9e3779b97f4a7c15 >> 32 }

// walk appends to path the moves from a root to node end (none for a
// root), in order.
func walk(nodes []Node, end int, path []Step) []Step {
	for c := end; nodes[c].parent >= 0; c = int(nodes[c].parent) {
		n := &nodes[c]
		path = append(path, Step{From: nodes[n.parent].bucket, To: n.bucket, Item: n.item, Slot: int(n.slot)})
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}
