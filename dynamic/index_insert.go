package dynamic

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
)

// AddTable adds the keys of a new table (each given by KeyHash), as the
// newest table. Repeated hashes (versions of one key) take one entry.
// An id already in the index is an error wrapping ErrTableExists, and
// adds nothing; any other id, 0 included, is valid. An index that already
// holds IndexMaxTables tables refuses the table with an error wrapping
// ErrTooManyTables, and adds nothing. Writer calls (AddTable,
// AddTables, Replace, RemoveTable, RemoveTables) may come from any
// goroutines: they are serialised by the index's mutex, and Lookups run
// beside them without waiting.
func (x *Index) AddTable(id uint64, hashes []uint64) error {
	x.mu.Lock()
	defer x.unlock()
	if _, ok := x.byID[id]; ok {
		return fmt.Errorf("%w: %d", ErrTableExists, id)
	}
	if err := x.tooMany(1); err != nil {
		return err
	}
	x.nextRank++
	x.addLocked(id, x.nextRank, hashes, nil)
	return nil
}

// AddTables adds several tables at once, oldest first (as if by AddTable
// in that order). Each table's code length is chosen knowing all of them,
// so a store that opens with many tables does not give the first ones
// short codes that the later ones must then lengthen, with a pass over the
// index each time. An ID already present, or repeated, is an error
// wrapping ErrTableExists, and adds nothing; so does len(ids) !=
// len(hashes), an error of its own, and tables that would take the index
// past IndexMaxTables, an error wrapping ErrTooManyTables (none of them
// is added: a caller that wants some indexed passes fewer).
func (x *Index) AddTables(ids []uint64, hashes [][]uint64) error {
	x.mu.Lock()
	defer x.unlock()
	if len(ids) != len(hashes) {
		return fmt.Errorf("dynamic: %d table IDs for %d key sets", len(ids), len(hashes))
	}
	seen := map[uint64]bool{}
	for _, id := range ids {
		if _, ok := x.byID[id]; ok || seen[id] {
			return fmt.Errorf("%w: %d", ErrTableExists, id)
		}
		seen[id] = true
	}
	if err := x.tooMany(len(ids)); err != nil {
		return err
	}
	// Lengths by the square-root rule over the live tables and all of
	// these; then, largest tables first, one bit shorter while the free
	// leaves allow (rounding every length up leaves part of the tree
	// unused); codes taken shortest first, so that no long code splits a
	// subtree a short one needs.
	var sum float64
	for _, hs := range hashes {
		sum += math.Sqrt(float64(max(len(hs), 1)))
	}
	x.pendingSqrt = sum
	lengths := make([]uint, len(ids))
	for i, hs := range hashes {
		x.pendingSqrt = sum - math.Sqrt(float64(max(len(hs), 1)))
		lengths[i] = x.codeLength(len(hs), nil)
	}
	x.pendingSqrt = 0
	free := 0
	for leaf := 1; leaf < len(x.leafUsed); leaf++ {
		if !x.leafUsed[leaf] {
			free++
		}
	}
	used := 0
	for _, l := range lengths {
		used += 1 << (x.d - l)
	}
	// A bit off table i's code halves its false candidates, keys_i·2^ℓ,
	// and takes 2^(d−ℓ) more leaves: take the best ratio while leaves
	// last.
	for {
		best, bestGain := -1, 0.0
		for i, l := range lengths {
			if l <= 1 || used+1<<(x.d-l) > free {
				continue
			}
			if g := float64(max(len(hashes[i]), 1)) * math.Ldexp(1, 2*int(l)); g > bestGain {
				best, bestGain = i, g
			}
		}
		if best < 0 {
			break
		}
		used += 1 << (x.d - lengths[best])
		lengths[best]--
	}
	// Growth while these tables are added is by half too (insert): the
	// index was sized for them, and a hot key must not triple it.
	x.builtAtOnce = len(*x.segs.Load()) == 1
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(lengths[a], lengths[b]) })
	pre := make([]*[2]uint32, len(ids))
	for _, i := range order {
		if code, length, ok := x.allocCode(lengths[i]); ok {
			pre[i] = &[2]uint32{code, uint32(length)}
		}
	}
	for i, id := range ids {
		x.nextRank++
		x.presetCode = pre[i] // nil: claim finds one itself
		x.addLocked(id, x.nextRank, hashes[i], nil)
	}
	x.presetCode = nil
	x.builtAtOnce = len(*x.segs.Load()) == 1
	return nil
}

func (x *Index) addLocked(id uint64, rank uint64, hashes []uint64, leaving []int) {
	t, ok := x.claim(id, rank, len(hashes), leaving)
	if !ok {
		return // named by every lookup: no entries needed
	}
	x.fill(t, hashes)
}

// fill inserts the entries of table t for hashes; keys that cannot be
// placed go to the stash or, past it, make t a table every lookup names.
func (x *Index) fill(t int, hashes []uint64) {
	old := x.book.Load()
	code, length := old.tables[t].code, uint(old.tables[t].length)
	var stashed []stashEntry
	always := false
	for j, h := range hashes {
		if segs := *x.segs.Load(); j+idxAhead < len(hashes) && segs[len(segs)-1].large {
			x.prefetchKey(segs[len(segs)-1], hashes[j+idxAhead])
		}
		p := x.probeOf(h)
		v := x.slotValue(p, code, length)
		switch r, s := x.insert(p, v); r {
		case idxInserted:
			x.added(s, t)
		case idxDuplicate:
		case idxStash:
			e := stashEntry{p.x, int16(t)}
			switch {
			case slices.Contains(stashed, e):
			case len(old.stash)+len(stashed) < idxStashSize:
				stashed = append(stashed, e)
			default:
				always = true
			}
		}
		if always {
			break
		}
	}
	x.publish(func(b *codebook) {
		b.tables[t].always = always
		b.stash = append(b.stash, stashed...)
		slices.SortFunc(b.stash, func(a, b stashEntry) int { return cmp.Compare(a.x, b.x) })
	})
}

type idxInsertResult int

const (
	idxInserted idxInsertResult = iota
	idxDuplicate
	idxStash
)

// insert places entry v of probe p: in the newest segment, else in an
// older one with room, else in a new segment if the newest is loaded
// enough to justify one; idxStash otherwise.
func (x *Index) insert(p probe, v uint32) (idxInsertResult, *idxSegment) {
	segs := *x.segs.Load()
	// The newest segment first, relocating if need be: its two buckets
	// are all a typical insert reads (older segments would cost a cache
	// miss each). Repeats of one key in one AddTable meet in the same
	// segment, so the duplicate check there is enough; a repeat split by
	// a growth costs a slot, never an entry.
	newest := segs[len(segs)-1]
	if x.dupOrFree(newest, p, v) == idxDuplicate {
		return idxDuplicate, nil
	}
	// The newest segment, relocating while it is loaded little enough
	// for the search to be short, keeps a table's entries together, so
	// that Replace and removals visit few segments. Past that, a free slot
	// in an older segment (drained by compactions) before a search in the
	// nearly full newest: a search per insert would be the whole cost.
	if x.insertSegment(newest, p, v, float64(newest.entries.Load()) < idxNearFull*float64(newest.n)*idxSlots) {
		return idxInserted, newest
	}
	for k := len(segs) - 2; k >= 0; k-- {
		if x.insertSegment(segs[k], p, v, false) {
			return idxInserted, segs[k]
		}
	}
	if x.insertSegment(newest, p, v, true) {
		return idxInserted, newest
	}
	if float64(newest.entries.Load()) < idxGrowLoad*float64(newest.n)*idxSlots || x.versionsCrowd(newest, p) {
		return idxStash, nil
	}
	// Twice the newest, except that an index built for a store's tables at
	// once (AddTables, at Open or by a store's rebuild) first grows by half:
	// such a store rebuilds again when it holds a few segments (kvdemo),
	// and a first growth of twice its size would triple its memory.
	size := 2 * uint64(newest.n)
	if len(segs) == 1 && x.builtAtOnce {
		size = uint64(newest.n) / 2
	}
	s := x.newSegment(size)
	next := append(append([]*idxSegment(nil), segs...), s)
	x.segs.Store(&next) // published before any entry goes in (package doc, step 4)
	if x.insertSegment(s, p, v, true) {
		return idxInserted, s
	}
	return idxStash, nil
}

// versionsCrowd reports whether p's key's own entries (naming other
// tables: versions of the key) take half of its two buckets in s or more.
// Such a key, held by more tables than the buckets have slots (a counter
// overwritten in every flush), fails its insert however empty the rest of
// the segment is, and a new segment would hold eight more of its versions
// at the price of the whole index's memory: the stash holds them exactly.
func (x *Index) versionsCrowd(s *idxSegment, p probe) bool {
	var buf [2 * idxSlots]uint64
	book := x.book.Load()
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	named := x.matchBucket(x.raw(s, i1), p, book, buf[:0])
	if i2 != i1 {
		named = x.matchBucket(x.raw(s, i2), p, book, named)
	}
	return len(named) >= idxSlots
}

// dupOrFree reports idxDuplicate if v is already in one of p's buckets
// of s.
func (x *Index) dupOrFree(s *idxSegment, p probe, v uint32) idxInsertResult {
	i1 := s.primary(p.hi)
	if x.bucketHas(s, i1, v) || x.bucketHas(s, x.alt(s, i1, p.tag), v) {
		return idxDuplicate
	}
	return idxInserted
}

// insertSegment puts v in one of p's buckets of s, relocating other
// entries along a shortest path if both are full.
func (x *Index) insertSegment(s *idxSegment, p probe, v uint32, relocate bool) bool {
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	for _, i := range [2]uint32{i1, i2} {
		if x.swap(s, i, 0, v) {
			return true
		}
	}
	if !relocate {
		return false
	}
	path := x.findPath(s, i1, i2)
	if path == nil {
		return false
	}
	// From the far end: each move frees the slot the previous fills. A
	// path that visits a bucket twice can find a move's entry gone or its
	// destination full; it stops there, every entry moved so far being in
	// its other bucket, and the insert goes elsewhere.
	for k := len(path) - 1; k >= 0; k-- {
		if !x.move(s, path[k]) {
			return false
		}
	}
	return x.swap(s, path[0].From, 0, v)
}

// move relocates one entry copy-then-remove, bumping the destination's
// counter between the two (package doc, steps 1 and 2); false, and nothing
// written, if the entry is not in its bucket or the destination is full.
func (x *Index) move(s *idxSegment, m relocate.Step) bool {
	if !x.bucketHas(s, m.From, m.Item) || !x.hasRoom(s, m.To) {
		return false
	}
	x.swap(s, m.To, 0, m.Item) // completes, counter even, before the clear
	x.swap(s, m.From, m.Item, 0)
	return true
}

// idxSearchPool holds relocation searches' working memory: a queue and
// the set of buckets reached, which grow with the deepest search and can
// outweigh the buckets of an index of tens of thousands of entries. Stats
// does not count it: an index holds a search only while a writer call
// runs, from this pool that every index shares, so that an index keeps
// between calls the memory Stats reports and no more
// (TestIndexHeldMemoryCounted).
var idxSearchPool = sync.Pool{New: func() any { return new(relocate.Search) }}

// idxBuckets is a segment as the relocation search reads it. The writer
// alone changes a segment, so the search reads what the moves will find.
type idxBuckets struct {
	x *Index
	s *idxSegment
}

func (b idxBuckets) Items(i uint32) [idxSlots]uint32 { return b.x.entries(b.s, i) }
func (b idxBuckets) Other(i, v uint32) uint32        { return b.x.alt(b.s, i, v>>(b.x.w-b.x.m)) }
func (b idxBuckets) Room(i uint32) bool              { return b.x.hasRoom(b.s, i) }

// findPath returns the moves that free a slot in bucket i1 or i2 of s,
// nil if the search finds none. Each bucket is queued once (the search's
// set of buckets reached): a pair crowded with one key's versions, a key
// overwritten in flush after flush, would otherwise keep the search going
// back and forth between its two buckets.
func (x *Index) findPath(s *idxSegment, i1, i2 uint32) []relocate.Step {
	if x.search == nil {
		x.search = idxSearchPool.Get().(*relocate.Search)
	}
	path, _ := relocate.Find(x.search, idxBuckets{x, s}, i1, i2,
		relocate.Limits{Depth: idxMaxPath, Nodes: idxMaxNodes})
	if x.hooks.searched != nil {
		x.hooks.searched(x.search.Queued())
	}
	return path
}
