package dynamic

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// idxSegment is one cuckoo table of packed buckets.
type idxSegment struct {
	large   bool // prefetched by bulk updates (idxPrefetchBytes)
	n       uint32
	words   []atomic.Uint64
	ctr     []atomic.Uint32
	entries atomic.Int64 // written by the writer only; read by Stats
	// byTable counts the entries of each table slot here (writer only),
	// so that Replace and removals visit only the segments that hold
	// their tables' entries.
	byTable []int64
}

// holds reports whether s has entries of any of the table slots ts.
func (s *idxSegment) holds(ts []int) bool {
	for _, t := range ts {
		if t < len(s.byTable) && s.byTable[t] > 0 {
			return true
		}
	}
	return false
}

// firstBuckets is the size of an index's first segment: capacityHint
// entries (at most MaxCapacityHint) at the load its tags reach.
func firstBuckets(capacityHint int, load float64) uint64 {
	return uint64(float64(min(max(capacityHint, 1), MaxCapacityHint))/(idxSlots*load)) + 2
}

// segmentArrays returns the lengths of the words and counters of a
// segment asked for buckets buckets of bucketBits bits each.
func segmentArrays(buckets, bucketBits uint64) (words, ctrs uint64) {
	buckets = segmentBuckets(buckets)
	return buckets*bucketBits/64 + 2, buckets>>idxGroupShift + 1 // +1 word so a straddling read never runs off
}

// segmentBuckets is the size of a segment asked for buckets buckets: at
// least two, at most idxMaxBuckets.
func segmentBuckets(buckets uint64) uint64 { return min(max(buckets, 2), idxMaxBuckets) }

// entryBits is what an entry costs in a segment of w-bit slots at load:
// a semi-sorted bucket and its share of a 32-bit counter, over four
// entries times the load.
func entryBits(w uint, load float64) float64 {
	return (float64(idxSlots*w-4) + 32.0/(1<<idxGroupShift)) / (idxSlots * load)
}

// idxMaxBuckets caps a segment (bucket indexes are 32-bit): an index that
// outgrows it adds segments of this size. A variable so that a test can
// reach it.
var idxMaxBuckets uint64 = 1 << 31

func (x *Index) newSegment(buckets uint64) *idxSegment {
	words, ctrs := segmentArrays(buckets, x.bucketBits())
	buckets = segmentBuckets(buckets)
	return &idxSegment{
		large: buckets*x.bucketBits()/8 > idxPrefetchBytes,
		n:     uint32(buckets),
		words: make([]atomic.Uint64, words),
		ctr:   make([]atomic.Uint32, ctrs),
	}
}

// probe is a key's position in the index: its mixed hash, tag, and the
// fingerprint bits after the tag.
type probe struct {
	x   uint64
	hi  uint32
	lo  uint32
	tag uint32
}

func (x *Index) probeOf(h uint64) probe {
	v := keyhash.Mix(h, x.seed)
	lo := uint32(v)
	return probe{x: v, hi: keyhash.Hi(v), lo: lo, tag: lo >> (32 - x.m)}
}

// slotValue is the entry of a key for a table with code c of length l.
func (x *Index) slotValue(p probe, c uint32, l uint) uint32 {
	k := x.w - x.m - l
	var extra uint32
	if k > 0 {
		extra = (p.lo >> (32 - x.m - k)) & (1<<k - 1)
	}
	return p.tag<<(x.w-x.m) | c<<k | extra
}

func (s *idxSegment) primary(hi uint32) uint32 {
	i, _ := keyhash.Reduce(hi, s.n)
	return i
}

func (x *Index) alt(s *idxSegment, i, tag uint32) uint32 {
	h, _ := keyhash.Reduce(x.altHash[tag&(idxMaxTags-1)], s.n)
	if h >= i {
		return h - i
	}
	return h + s.n - i
}

// bucketBits is a bucket's size: four w-bit entries, semi-sorted.
func (x *Index) bucketBits() uint64 { return uint64(idxSlots*x.w - 4) }

// raw reads bucket i's encoded bits. Each word is one atomic load; see the
// package doc, step 2, for why a bucket spread over two loads is safe.
func (x *Index) raw(s *idxSegment, i uint32) uint64 {
	bw := x.bucketBits()
	off := uint64(i) * bw
	q, r := off>>6, off&63
	v := s.words[q].Load() >> r
	if r+bw > 64 {
		v |= s.words[q+1].Load() << (64 - r)
	}
	return v & (1<<bw - 1)
}

// A bulk update (AddTable, Replace) prefetches the buckets of the key
// idxAhead keys ahead of the one it writes, in segments larger than
// idxPrefetchBytes: its keys are independent, so their cache misses can
// overlap. A smaller segment stays in the processor's caches, where the
// prefetch would only add work.
const idxAhead = 8

// idxPrefetchBytes is a variable so that a benchmark can compare a large
// segment's bulk updates with and without the prefetch.
var idxPrefetchBytes uint64 = 1 << 20

// prefetchKey prefetches h's two buckets in segment s.
func (x *Index) prefetchKey(s *idxSegment, h uint64) {
	p := x.probeOf(h)
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	bw := x.bucketBits()
	prefetch(uintptr(unsafe.Pointer(&s.words[uint64(i1)*bw>>6])))
	prefetch(uintptr(unsafe.Pointer(&s.words[uint64(i2)*bw>>6])))
}

// entries decodes bucket i (writer only: the writer reads what it wrote, so
// the code is always valid): its four entries in ascending order, empty
// slots (0) first.
func (x *Index) entries(s *idxSegment, i uint32) [idxSlots]uint32 {
	e, _ := semisort.Decode(x.raw(s, i), x.w)
	return e
}

// store writes bucket i's entries (writer only), sorted and encoded, inside
// its group's seqlock: the counter is odd while the bucket's words are
// being written.
func (x *Index) store(s *idxSegment, i uint32, e [idxSlots]uint32) {
	semisort.Sort4(&e)
	enc := semisort.Pack(e[0], e[1], e[2], e[3], x.w)
	bw := x.bucketBits()
	off := uint64(i) * bw
	q, r := off>>6, off&63
	mask := uint64(1)<<bw - 1
	g := &s.ctr[i>>idxGroupShift]
	g.Add(1)
	w0 := s.words[q].Load()
	s.words[q].Store(w0&^(mask<<r) | enc<<r)
	if r+bw > 64 {
		sh := 64 - r
		w1 := s.words[q+1].Load()
		s.words[q+1].Store(w1&^(mask>>sh) | enc>>sh)
	}
	g.Add(1)
}

// swap replaces one entry old of bucket i by new in one bucket write (old 0
// takes an empty slot, new 0 clears the entry) and reports whether the
// bucket held old. Entries are re-sorted by every write, so writers name an
// entry by its bucket and value, never by its position; two equal entries
// of a bucket are interchangeable, so which one is replaced does not
// matter.
func (x *Index) swap(s *idxSegment, i uint32, old, new uint32) bool {
	e := x.entries(s, i)
	for j := range e {
		if e[j] == old {
			e[j] = new
			x.store(s, i, e)
			return true
		}
	}
	return false
}

// bucketHas reports whether bucket i holds entry v, testing the four
// nibbles at once as a lookup does (matchBucket).
func (x *Index) bucketHas(s *idxSegment, i uint32, v uint32) bool {
	b := x.raw(s, i)
	low := x.w - 4
	nibs := uint32(semisort.NibblesOfCode[b&0xfff])
	xn := nibs ^ (v>>low)*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		eq &= eq - 1
		if b>>(12+j*low)&lowMask == uint64(v)&lowMask {
			return true
		}
	}
	return false
}

// tagged returns the entries of the encoded bucket b whose tag is tag, and
// how many there are, decoding only those whose nibble matches the tag's.
func (x *Index) tagged(b uint64, tag uint32) (vals [idxSlots]uint32, n int) {
	low := x.w - 4
	nibs := uint32(semisort.NibblesOfCode[b&0xfff])
	xn := nibs ^ (tag>>(x.m-4))*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		eq &= eq - 1
		v := (nibs>>(4*j)&0xf)<<low | uint32(b>>(12+j*low)&lowMask)
		if v>>(x.w-x.m) == tag && v != 0 {
			vals[n&(idxSlots-1)] = v
			n++
		}
	}
	return vals, n
}

// hasRoom reports whether bucket i has an empty slot: the smallest entry,
// stored first, is 0 (nibble and low bits).
func (x *Index) hasRoom(s *idxSegment, i uint32) bool {
	b := x.raw(s, i)
	return semisort.NibblesOfCode[b&0xfff]&0xf == 0 && b>>12&(1<<(x.w-4)-1) == 0
}
