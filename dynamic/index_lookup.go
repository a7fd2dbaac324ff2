package dynamic

import (
	"math/bits"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// PrefetchHash asks the processor to bring in the buckets a lookup of the
// key given by KeyHash(key) will read, and returns at once: a caller with
// other work before the lookup (a memtable probe, say) overlaps the two
// cache misses. Safe for concurrent use; it changes nothing.
func (x *Index) PrefetchHash(h uint64) {
	for _, s := range *x.segs.Load() {
		x.prefetchKey(s, h)
	}
}

// Lookup appends to dst the IDs of the tables that may hold key, newest
// first, and returns the extended slice. A table added before the call
// (its AddTable, AddTables or Replace returned) and not removed since is
// always among them if it holds key. Other tables appear as false
// candidates, at the rate the slot width buys, and every table is named
// when the lookup keeps meeting writers (IndexStats.Contended). Safe for
// concurrent use with everything; takes no lock and never waits for a
// writer (see Index); allocation-free when dst has room.
func (x *Index) Lookup(key []byte, dst []uint64) []uint64 {
	return x.LookupHash(keyhash.Hash(key), dst)
}

// LookupHash is Lookup for a key given by KeyHash(key).
func (x *Index) LookupHash(h uint64, dst []uint64) []uint64 {
	p := x.probeOf(h)
	start := len(dst)
	var book *codebook
	for try := 0; ; try++ {
		if try == idxReadTries {
			return x.everyTable(dst[:start])
		}
		book = x.book.Load()
		read := true
		for _, s := range *x.segs.Load() {
			if dst, read = x.lookupSegment(s, p, book, dst); !read {
				break
			}
		}
		if !read {
			return x.everyTable(dst[:start])
		}
		// Entries change format only between two codebook publications
		// (lengthen): if none happened while we read, the codebook we
		// decoded with describes every entry we saw.
		if x.book.Load() == book {
			break
		}
		dst = dst[:start]
	}
	if len(book.stash) > 0 {
		// Sorted by hash: the first entry >= p.x, then its equals.
		lo, hi := 0, len(book.stash)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if book.stash[mid].x < p.x {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		for ; lo < len(book.stash) && book.stash[lo].x == p.x; lo++ {
			dst = append(dst, uint64(book.stash[lo].table))
		}
	}
	for _, t := range book.always {
		dst = append(dst, uint64(t))
	}
	if len(dst) == start {
		return dst
	}
	// Newest first, each table once; then table slots become IDs. A few
	// candidates are sorted by insertion; many (tables named by every
	// lookup, once the code tree is full) in n log n steps, which an
	// insertion sort's n² would make the cost of every lookup.
	c := dst[start:]
	if len(c) <= idxInsertionSortMax {
		for i := 1; i < len(c); i++ {
			for j := i; j > 0 && newer(book, c[j], c[j-1]); j-- {
				c[j], c[j-1] = c[j-1], c[j]
			}
		}
	} else {
		sortNewestFirst(book, c)
	}
	n := 0
	for i := range c {
		if i > 0 && c[i] == c[n-1] {
			continue
		}
		c[n] = c[i]
		n++
	}
	for i := 0; i < n; i++ {
		c[i] = book.tables[c[i]].id
	}
	return dst[:start+n]
}

// idxInsertionSortMax: answers up to this long are sorted by insertion.
const idxInsertionSortMax = 16

// sortNewestFirst sorts table slots newest first (newer).
func sortNewestFirst(book *codebook, c []uint64) {
	slices.SortFunc(c, func(a, b uint64) int {
		switch {
		case a == b:
			return 0
		case newer(book, a, b):
			return -1
		}
		return 1
	})
}

// newer orders table slots newest first; equal ranks (a merged table and
// its inputs during Replace) by slot, so that repeats end up adjacent.
func newer(book *codebook, a, b uint64) bool {
	ra, rb := book.tables[a].rank, book.tables[b].rank
	return ra > rb || ra == rb && a > b
}

// lookupSegment appends the tables that s names for p; read is false when
// a writer changed p's buckets under each of idxReadTries reads.
func (x *Index) lookupSegment(s *idxSegment, p probe, book *codebook, dst []uint64) (_ []uint64, read bool) {
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	g1, g2 := &s.ctr[i1>>idxGroupShift], &s.ctr[i2>>idxGroupShift]
	for try := 0; try < idxReadTries; try++ {
		t1 := g1.Load()
		b1 := x.raw(s, i1)
		if x.hooks.afterFirstRead != nil {
			x.hooks.afterFirstRead(s)
		}
		t2 := g2.Load()
		b2 := x.raw(s, i2)
		if t1&1 != 0 || t2&1 != 0 || g1.Load() != t1 || g2.Load() != t2 {
			continue // i1 or i2 changed while we looked
		}
		dst = x.matchBucket(b1, p, book, dst)
		if i2 != i1 {
			dst = x.matchBucket(b2, p, book, dst)
		}
		return dst, true
	}
	return dst, false
}

// idxReadTries bounds a lookup's reads of one segment, and its passes
// over the segments while codebooks are published under it: a writer
// holds a group for a few stores, so a lookup that meets one that often
// has met a writer stopped mid-write, and does not wait for it.
const idxReadTries = 8

// everyTable is a lookup's answer when it could not read the index
// consistently: every table it holds, newest first. A table whose
// AddTable returned before the lookup began and that has not been removed
// is live in every codebook published since, so it is among them.
func (x *Index) everyTable(dst []uint64) []uint64 {
	x.contended.Add(1)
	book := x.book.Load()
	start := len(dst)
	for t := range book.tables {
		if book.tables[t].live {
			dst = append(dst, uint64(t))
		}
	}
	c := dst[start:]
	sortNewestFirst(book, c)
	for i := range c {
		c[i] = book.tables[c[i]].id
	}
	return dst
}

// matchBucket appends the tables that bucket b (encoded, read whole)
// names for p. The four high nibbles are compared with the tag's at once
// (XOR into every 4-bit lane, then an exact zero-lane test), so most
// buckets are done after one table load; only slots whose nibble matches
// are decoded.
func (x *Index) matchBucket(b uint64, p probe, book *codebook, dst []uint64) []uint64 {
	nibs := uint32(semisort.NibblesOfCode[b&0xfff])
	xn := nibs ^ (p.tag>>(x.m-4))*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888 // bit 4j+3 set: slot j's nibble matches
	if eq == 0 {
		return dst
	}
	return x.matchSlots(b, nibs, eq, p, book, dst)
}

// matchSlots is matchBucket for the slots flagged in eq.
func (x *Index) matchSlots(b uint64, nibs, eq uint32, p probe, book *codebook, dst []uint64) []uint64 {
	tagShift := x.w - x.m
	low := x.w - 4
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		eq &= eq - 1
		v := (nibs>>(4*j)&0xf)<<low | uint32(b>>(12+j*low)&lowMask)
		if v>>tagShift != p.tag || v == 0 {
			continue
		}
		leaf := (v >> (tagShift - x.d)) & (1<<x.d - 1)
		t := book.decode[leaf]
		if t < 0 {
			continue
		}
		ti := &book.tables[t]
		if v>>ti.relax == x.slotValue(p, ti.code, uint(ti.length))>>ti.relax ||
			ti.prevLength != 0 && v == x.slotValue(p, ti.prevCode, uint(ti.prevLength)) {
			dst = append(dst, uint64(t))
		}
	}
	return dst
}
