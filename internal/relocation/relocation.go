// Package relocation finds where a cuckoo table can make room for a key
// whose two buckets are full: the shortest chain of moves, each taking an
// entry from a bucket to its other bucket, that ends in a bucket with an
// empty slot. The search is breadth first, so the chain is as short as any
// within the depth bound, and it reads a table only through Buckets, so one
// search serves tables with different bucket encodings (Fan et al.,
// "Cuckoo Filter: Practically Better Than Bloom", §3, for the moves; the
// breadth-first search and its bound after Li et al., "Algorithmic
// Improvements for Fast Concurrent Cuckoo Hashing", EuroSys 2014).
package relocation

// Slots is the number of entries per bucket the search expects.
const Slots = 4

// Buckets is the view of one cuckoo table that a search reads. A search
// never writes: the caller carries out the moves and checks each against
// the table as it is then.
type Buckets interface {
	// Entries returns bucket i's entries; 0 is an empty slot.
	Entries(i uint32) [Slots]uint32
	// Alt is the other bucket of entry v when it sits in bucket i.
	Alt(i, v uint32) uint32
	// HasRoom reports whether bucket i has an empty slot.
	HasRoom(i uint32) bool
}

// Move takes entry Entry from bucket From to bucket To, its other bucket.
type Move struct {
	From, To uint32
	Entry    uint32
}

// Node is a bucket the search reached: from its parent's bucket, entry
// moves here. Callers hold a slice of them only to lend it to the next
// search.
type Node struct {
	bucket uint32
	parent int32
	entry  uint32
}

// Limits bound a search.
type Limits struct {
	Depth int // moves in a chain, at most
	Nodes int // buckets queued, at most
}

// Search returns the shortest chain of moves from bucket i1 or i2 to a
// bucket with an empty slot, path[0] moving an entry out of i1 or i2, and
// nil when there is none within lim. queue lends the search its working
// memory and comes back, grown, as queued: its length is the number of
// buckets the search queued.
//
// With seen not nil, each bucket is queued once: a bucket already reached
// is full (it was tested when reached), and entries with equal tags move
// between the same two buckets, so without it a pair crowded with one
// key's copies sends the search back and forth between its two buckets
// until the node limit; anywhere, a bucket reached again spends the budget
// on nothing, so the search reaches fewer buckets. A search with seen
// queues at most MaxSeen buckets. With seen nil, a bucket may be queued
// more than once, which costs only work: a caller whose buckets change
// under it (a lock-free table) keeps its own search small instead.
func Search[B Buckets](b B, i1, i2 uint32, lim Limits, queue []Node, seen *Seen) (path []Move, queued []Node) {
	nodes := append(queue[:0], Node{i1, -1, 0}, Node{i2, -1, 0})
	if seen != nil {
		lim.Nodes = min(lim.Nodes, MaxSeen)
		seen.reset()
		seen.add(i1)
		seen.add(i2)
	}
	for head, depth := 0, 0; head < len(nodes) && depth < lim.Depth; depth++ {
		end := len(nodes)
		for ; head < end && len(nodes) < lim.Nodes; head++ {
			n := nodes[head]
			for _, v := range b.Entries(n.bucket) {
				if v == 0 {
					continue // an empty slot: nothing to move (the bucket changed under a lock-free search)
				}
				to := b.Alt(n.bucket, v)
				if seen != nil && (to == n.bucket || !seen.add(to)) {
					continue
				}
				nodes = append(nodes, Node{to, int32(head), v})
				if b.HasRoom(to) {
					return unwind(nodes), nodes
				}
			}
		}
	}
	return nil, nodes
}

// unwind returns the moves from a root to the last node queued.
func unwind(nodes []Node) []Move {
	var path []Move
	for c := int32(len(nodes) - 1); nodes[c].parent >= 0; c = nodes[c].parent {
		par := nodes[nodes[c].parent]
		path = append(path, Move{From: par.bucket, To: nodes[c].bucket, Entry: nodes[c].entry})
	}
	for a, z := 0, len(path)-1; a < z; a, z = a+1, z-1 {
		path[a], path[z] = path[z], path[a]
	}
	return path
}

// Seen is the set of buckets a search has reached: open addressing over
// twice the most buckets a search queues with it, emptied in O(1) by a new
// generation. It is large (64 KiB): a caller keeps one per writer, not per
// search.
type Seen struct {
	bucket [seenSize]uint32
	gen    [seenSize]uint32
	cur    uint32
}

const (
	seenBits = 13
	seenSize = 1 << seenBits
	// MaxSeen is the most buckets a search with a Seen queues: the last
	// node's children may add Slots more, and the table stays at most
	// half full, so that probes stay short.
	MaxSeen = seenSize/2 - Slots
)

func (s *Seen) reset() {
	if s.cur++; s.cur == 0 {
		clear(s.gen[:])
		s.cur = 1
	}
}

// add reports whether i was not in the set yet, and adds it.
func (s *Seen) add(i uint32) bool {
	for h := (i * 0x9e3779b1) >> (32 - seenBits); ; h = (h + 1) & (seenSize - 1) {
		if s.gen[h] != s.cur {
			s.gen[h], s.bucket[h] = s.cur, i
			return true
		}
		if s.bucket[h] == i {
			return false
		}
	}
}
