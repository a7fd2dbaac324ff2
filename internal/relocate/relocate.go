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
// failure is exact. A mutable filter bounds the search (Find's limit) and
// carries out the moves itself, in reverse order, so that every moved
// item stays in one of its buckets throughout.
//
// The search reads the table through Table and changes nothing.
package relocate

// Table is a cuckoo table as the search sees it: buckets numbered from 0,
// each with occupied slots 0..Occupied-1, whose items each have one other
// bucket they may move to.
type Table interface {
	// Room reports whether bucket b has a free slot.
	Room(b uint32) bool
	// Occupied is the number of occupied slots of bucket b.
	Occupied(b uint32) int
	// Other is the other bucket of the item in slot j of bucket b (b
	// itself when the item has only one bucket).
	Other(b uint32, j int) uint32
}

// Step is one move of a path: the item in slot Slot of bucket From moves
// to bucket To.
type Step struct {
	From uint32
	Slot int
	To   uint32
}

// Search is a search's working memory, kept across searches so that a
// search allocates nothing once it has grown. It is not safe for
// concurrent use.
type Search struct {
	nodes []node
	path  []Step
	// low holds the buckets below 64 the search reached, one bit each:
	// small tables (a 64-byte line's buckets) never need more. seen is the
	// set of the others, open addressing: an entry is gen<<32 | bucket, so
	// that a new search empties it by bumping gen.
	low  uint64
	seen []uint64
	gen  uint32
}

// node is a bucket the search reached: parent is the node it was reached
// from (-1 for a root), slot the slot there whose item moves here.
type node struct {
	bucket uint32
	parent int32
	slot   int32
}

// Find returns the shortest path from bucket a or b (a first) to a bucket
// with room, in the order of the search: the buckets are taken in the
// order they were reached, the slots of each in order, and the first
// bucket not yet reached that has room ends the search. path[0] moves an
// item out of a or b; carried out from the last step back, each move
// fills a slot the step after it freed, and the first frees a slot in a
// root. ok is false when no bucket with room is reachable, or none within
// limit buckets reached (0: no limit). The path is valid until the next
// Find.
//
// Find is generic, not an interface call per slot, so that a table type
// with small methods is searched at the speed of a search written for it.
func Find[T Table](s *Search, t T, a, b uint32, limit int) (path []Step, ok bool) {
	s.reset()
	s.visit(a, -1, 0)
	if b != a {
		s.visit(b, -1, 0)
	}
	for q := 0; q < len(s.nodes); q++ {
		u := s.nodes[q].bucket
		for j, n := 0, t.Occupied(u); j < n; j++ {
			v := t.Other(u, j)
			if v == u || !s.visit(v, int32(q), int32(j)) {
				continue
			}
			if t.Room(v) {
				return s.walk(len(s.nodes) - 1), true
			}
			if limit > 0 && len(s.nodes) >= limit {
				return nil, false
			}
		}
	}
	return nil, false
}

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
func (s *Search) PathTo(i int) []Step { return s.walk(i) }

func (s *Search) reset() {
	s.nodes, s.low = s.nodes[:0], 0
	if len(s.seen) == 0 {
		s.seen = make([]uint64, 64)
	}
	if s.gen++; s.gen == 0 { // a generation's entries would look current
		clear(s.seen)
		s.gen = 1
	}
}

// visit adds bucket v, reached from node parent by its slot, unless the
// search reached it before; it reports whether v is new.
func (s *Search) visit(v uint32, parent, slot int32) bool {
	if v < 64 {
		if s.low>>v&1 != 0 {
			return false
		}
		s.low |= 1 << v
		s.nodes = append(s.nodes, node{v, parent, slot})
		return true
	}
	if 2*(len(s.nodes)+1) > len(s.seen) {
		s.grow()
	}
	mask := uint64(len(s.seen) - 1)
	for i := hash(v) & mask; ; i = (i + 1) & mask {
		e := s.seen[i]
		if uint32(e>>32) != s.gen {
			s.seen[i] = uint64(s.gen)<<32 | uint64(v)
			s.nodes = append(s.nodes, node{v, parent, slot})
			return true
		}
		if uint32(e) == v {
			return false
		}
	}
}

// grow doubles the set and enters the buckets reached so far again.
func (s *Search) grow() {
	s.seen = make([]uint64, 2*len(s.seen))
	mask := uint64(len(s.seen) - 1)
	for _, n := range s.nodes {
		if n.bucket < 64 {
			continue
		}
		i := hash(n.bucket) & mask
		for uint32(s.seen[i]>>32) == s.gen {
			i = (i + 1) & mask
		}
		s.seen[i] = uint64(s.gen)<<32 | uint64(n.bucket)
	}
}

func hash(v uint32) uint64 { return uint64(v) * 0x9e3779b97f4a7c15 >> 32 }

// walk returns the path from a root to node end (empty for a root).
func (s *Search) walk(end int) []Step {
	s.path = s.path[:0]
	for c := end; s.nodes[c].parent >= 0; c = int(s.nodes[c].parent) {
		p := s.nodes[c].parent
		s.path = append(s.path, Step{From: s.nodes[p].bucket, Slot: int(s.nodes[c].slot), To: s.nodes[c].bucket})
	}
	for i, j := 0, len(s.path)-1; i < j; i, j = i+1, j-1 {
		s.path[i], s.path[j] = s.path[j], s.path[i]
	}
	return s.path
}
