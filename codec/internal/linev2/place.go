package linev2

import (
	"encoding/binary"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
)

// lineBucket is one bucket under placement. Each slot carries what a move
// or an eviction needs (the key's other bucket, its overflow bit), so the
// search inside a line touches only the line's buckets.
//
// It is 16 bytes, four to a cache line: the slot count is not stored but
// read off the fingerprint lanes, which are filled from lane 0 up and are
// never 0 when occupied. Which key sits in a slot (needed only when a key
// moves or leaves, or a repeat is checked) is kept apart, in slotKeys, so
// that a line's search touches half the memory.
type lineBucket struct {
	fp   uint64              // four 16-bit lanes, 0 for an empty slot
	meta [bucket.Slots]uint8 // overflow bit in the primary line, or secondaryMeta
	alt  [bucket.Slots]uint8 // the key's other candidate bucket in this line
}

// slotKeys is, for the bucket of the same index, each slot's position hash.
// Holding the hash itself, not its index in the hash array, lets a key be
// pushed out to its secondary line, or checked for a repeat, without a
// load from anywhere in that array (a cache and TLB miss in a large filter).
type slotKeys = [bucket.Slots]uint64

// count returns the occupied slots.
func (b *lineBucket) count() uint8 { return uint8(bits.Len64(b.fp)+15) >> 4 }

func (b *lineBucket) fpAt(j uint8) uint16 { return uint16(b.fp >> (16 * j)) }

// fpMatches has bit 16j+15 set for each slot j holding fp (fp != 0, so
// empty slots never match): a SWAR zero-lane test, no loop, no branch.
func (b *lineBucket) fpMatches(fp uint16) uint64 {
	const lo, hi = 0x0001_0001_0001_0001, 0x8000_8000_8000_8000
	v := b.fp ^ uint64(fp)*lo
	return (v - lo) &^ v & hi
}

// secondaryMeta in a slot's meta marks a key placed in its secondary line:
// it cannot overflow again.
const secondaryMeta = 0x80

// placer holds the placement state of every line at once: primary
// placement leaves some keys over, and those are then placed in their
// secondary lines, which were placed before.
type placer struct {
	g      Geom
	x      []uint64     // position hashes, grouped by primary line
	pos    []uint32     // one line's keys' primary positions, packed
	bkt    []lineBucket // g.FirstBucket(line) + i
	keys   []slotKeys   // parallel to bkt
	ovMask []uint64     // per line: overflow bits set
	queue  []move       // keys waiting for their secondary line
	sorted []move       // one round of the queue, sorted by secondary line
	// lineCount counts a round's moves per line for the sort.
	lineCount []uint32
	// touched keeps the sum of touch's loads, so that they are not
	// removed as unused.
	touched uint64

	relocation relocate.Search
	reached    []uint32         // the buckets insertFull's search reached
	step       [1]relocate.Step // moveOne's path
	evicted    int              // primary residents pushed out by secondary placement
	dups       int              // repeats found in place of a slot
}

// move is a key waiting for its secondary line, with where it goes.
type move struct {
	x      uint64
	line   uint32
	fp     uint16
	i1, i2 uint8
}

// insert places the key of position hash x, with fingerprint fp and
// candidate buckets i1 != i2 of line ln. meta is its overflow bit for a
// primary placement, or secondaryMeta. It returns false only when x is
// a secondary key and every key it can reach in the line is secondary
// too.
func (p *placer) insert(bk []lineBucket, ks []slotKeys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8) bool {
	// A repeat of a key already in one of its buckets takes no slot. Repeats
	// have equal hashes, hence equal buckets and fingerprints.
	if p.holds(bk, ks, x, i1, i2, fp) {
		p.dups++
		return true
	}
	if n1, n2 := bk[i1].count(), bk[i2].count(); n1 < bucket.Slots || n2 < bucket.Slots {
		if n2 < n1 {
			i1, i2 = i2, i1
		}
		bk[i1].put(&ks[i1], x, fp, uint8(i2), meta)
		return true
	}
	return p.search(bk, ks, x, ln, i1, i2, fp, meta)
}

// search is insert for a key that is no repeat and whose buckets are both
// full.
func (p *placer) search(bk []lineBucket, ks []slotKeys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8) bool {
	// A line has at most 31 buckets, so a closure over bit masks tells at
	// little cost whether any bucket with room is reachable; when none is,
	// the line is full as far as x can reach, and insertFull chooses who
	// leaves for their secondary line.
	room := roomMask(bk)
	if room == 0 || !reachesRoom(bk, uint32(1)<<i1|uint32(1)<<i2, room) {
		return p.insertFull(bk, ks, x, ln, i1, i2, fp, meta)
	}
	path, _ := relocate.Find(&p.relocation, lineTable(bk), i1, i2, relocate.Limits{})
	p.carry(bk, ks, path, i1, x, fp, meta, i1, i2)
	return true
}

// lineTable is a line's buckets as relocate.Find reads them: an item is
// its slot's number plus one, its other bucket is in alt, and a bucket
// has room while its last lane is empty (lanes fill from the first).
type lineTable []lineBucket

func (t lineTable) Room(b uint32) bool                    { return t[b].fp>>(16*(bucket.Slots-1)) == 0 }
func (t lineTable) Items(b uint32) [relocate.Slots]uint32 { return slotItems(&t[b]) }
func (t lineTable) Other(b, v uint32) uint32              { return uint32(t[b].alt[v-1]) }

// slotItems numbers bucket b's occupied slots from 1, 0 being an empty
// slot: a line's search moves a slot's key by its slot.
func slotItems(b *lineBucket) [relocate.Slots]uint32 { return slotNumbers[b.count()] }

// slotNumbers is slotItems' answer by the number of occupied slots (lanes
// fill from the first).
var slotNumbers = [bucket.Slots + 1][relocate.Slots]uint32{{}, {1}, {1, 2}, {1, 2, 3}, {1, 2, 3, 4}}

// evict ends an insert that found no chain of moves to room: the key
// leaves itself if it is primary and no resident with its overflow bit set
// (best 2) was found; otherwise resident vj of bucket vu (of the best
// kind found), which path leads to from a root (vu is a root when path is
// empty), leaves for its secondary line and the key takes its place.
func (p *placer) evict(bk []lineBucket, ks []slotKeys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8, path []relocate.Step, vu, vj uint8, best int) bool {
	if best < 2 && meta != secondaryMeta {
		p.overflow(x, ln, meta)
		return true
	}
	if best == 0 {
		return false
	}
	b := &bk[vu]
	p.overflow(ks[vu][vj], ln, b.meta[vj])
	b.remove(&ks[vu], vj)
	if meta == secondaryMeta {
		p.evicted++
	}
	p.carry(bk, ks, path, uint32(vu), x, fp, meta, i1, i2)
	return true
}

// reachesRoom reports whether a bucket in room can be reached from the
// buckets in seen (full buckets, none of them in room) by moving keys,
// as the breadth-first search would: a closure over bit masks, with no
// queue.
func reachesRoom(bk []lineBucket, seen, room uint32) bool {
	reach, frontier := seen, seen
	for frontier != 0 {
		var next uint32
		for f := frontier; f != 0; f &= f - 1 {
			w := binary.LittleEndian.Uint32(bk[bits.TrailingZeros32(f)&31].alt[:])
			next |= 1<<(w&31) | 1<<(w>>8&31) | 1<<(w>>16&31) | 1<<(w>>24&31)
		}
		next &^= reach
		if next&room != 0 {
			return true
		}
		reach |= next
		frontier = next
	}
	return false
}

// roomMask has bit i set for each bucket i of the line with a free slot.
func roomMask(bk []lineBucket) uint32 {
	var m uint32
	for i := range bk {
		m |= uint32(bk[i].fp>>(16*(bucket.Slots-1))-1) >> 31 << (i & 31)
	}
	return m
}

// residents returns, as bit masks of slots, the primary residents of a
// full bucket (the secondary ones never leave again) and those of them
// whose overflow bit is set in mask. A secondary resident's meta is at
// least 64, so mask>>meta is 0 for it.
func residents(b *lineBucket, mask uint64) (primary, set uint8) {
	// Written out, with the four metas read as one word: in a loop the
	// compiler keeps the masks on the stack.
	w := binary.LittleEndian.Uint32(b.meta[:])
	primary = uint8((^w>>7&0x01010101)*0x01020408>>24) & 0xf
	set = uint8(mask>>(w&0xff)&1 | mask>>(w>>8&0xff)&1<<1 | mask>>(w>>16&0xff)&1<<2 | mask>>(w>>24)&1<<3)
	return primary, set
}

// insertFull is insert in a full line, deciding exactly as insert does
// but with less work. No chain of moves can end in room, so a primary key
// whose overflow bit is set leaves at once; otherwise a resident leaves for
// its secondary line: the first, in the order the relocation search
// reaches buckets, whose overflow bit is set (best 2), or else the first
// primary resident (best 1). The search for the best kind stops at the
// first bucket that holds one, instead of visiting every bucket first.
func (p *placer) insertFull(bk []lineBucket, ks []slotKeys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8) bool {
	mask := p.ovMask[ln]
	if meta != secondaryMeta && mask>>meta&1 != 0 {
		p.overflow(x, ln, meta)
		return true
	}
	if mask == 0 {
		// No overflow bit is set in the line (it has just filled), so no
		// resident is of the best kind and the search would visit every
		// bucket: a primary key leaves itself, and a secondary one takes
		// the place of the first primary resident in search order, which
		// is in a root unless both roots hold only secondary keys.
		if meta != secondaryMeta {
			p.overflow(x, ln, meta)
			return true
		}
		for _, u := range [2]uint8{uint8(i1), uint8(i2)} {
			if primary, _ := residents(&bk[u&31], 0); primary != 0 {
				return p.evict(bk, ks, x, ln, i1, i2, fp, meta, nil, u, uint8(bits.TrailingZeros8(primary)), 1)
			}
		}
	}
	for _, u := range [2]uint8{uint8(i1), uint8(i2)} {
		if _, set := residents(&bk[u&31], mask); set != 0 {
			return p.evict(bk, ks, x, ln, i1, i2, fp, meta, nil, u, uint8(bits.TrailingZeros8(set)), 2)
		}
	}
	if path, ok := relocate.Find(&p.relocation, overflowTable{bk, mask}, i1, i2, relocate.Limits{}); ok {
		vu := uint8(path[len(path)-1].To)
		_, set := residents(&bk[vu&31], mask)
		return p.evict(bk, ks, x, ln, i1, i2, fp, meta, path, vu, uint8(bits.TrailingZeros8(set)), 2)
	}
	p.reached = p.relocation.Reached(p.reached[:0])
	for i, u := range p.reached {
		if primary, _ := residents(&bk[u&31], mask); primary != 0 {
			return p.evict(bk, ks, x, ln, i1, i2, fp, meta, p.relocation.PathTo(i), uint8(u), uint8(bits.TrailingZeros8(primary)), 1)
		}
	}
	return p.evict(bk, ks, x, ln, i1, i2, fp, meta, nil, 0, 0, 0)
}

// overflowTable is a full line as insertFull's search reads it: a bucket
// "has room" when it holds a primary resident whose overflow bit (in
// mask) is set, the resident that should leave first.
type overflowTable struct {
	bk   []lineBucket
	mask uint64
}

func (t overflowTable) Room(b uint32) bool {
	_, set := residents(&t.bk[b], t.mask)
	return set != 0
}
func (t overflowTable) Items(b uint32) [relocate.Slots]uint32 { return slotItems(&t.bk[b]) }
func (t overflowTable) Other(b, v uint32) uint32              { return uint32(t.bk[b].alt[v-1]) }

// smallRound: a secondary round of fewer than lines/smallRound moves
// is sorted by comparison rather than counted.
const smallRound = 16

// touchAhead is how many moves ahead a secondary round touches the line
// it will insert into, in filters whose placement state is over
// touchBytes (about a second-level cache).
const (
	touchAhead = 16
	touchBytes = 2 << 20
)

// touch loads a word from each cache line of the buckets and keys of line
// ln, and its overflow bits, and returns their sum.
func (p *placer) touch(ln uint32) uint64 {
	first := p.g.FirstBucket(ln)
	end := first + uint32(p.g.Shape(ln).Buckets)
	if int(end) > len(p.bkt) || int(end) > len(p.keys) || int(ln) >= len(p.ovMask) {
		return 0
	}
	t := p.ovMask[ln] + p.bkt[end-1].fp + p.keys[end-1][bucket.Slots-1]
	for i := first; i < end; i += 4 { // four buckets to a cache line
		t += p.bkt[i].fp
	}
	for i := first; i < end; i += 2 { // two buckets' keys to a cache line
		t += p.keys[i][0]
	}
	return t
}

// placePrimary places xs, the keys whose primary line is ln, in the
// line's buckets bk. It does insert's common cases itself (no repeat, and
// a root bucket with room or a resident of a root that can move to its
// other bucket); anything else goes through insert, which decides the
// same.
//
// It works in two passes: first Primary for every key, with the line's
// shape hoisted, packed into one word per key (independent multiplies
// the processor overlaps); then placement, a loop whose values stay in
// registers in the common case.
func (p *placer) placePrimary(bk []lineBucket, ks []slotKeys, xs []uint64, ln uint32) {
	s := p.g.Shape(ln)
	nb, ov := uint64(s.Buckets), uint64(s.Overflow)
	fpMax := uint64(1)<<p.g.Width(ln) - 1
	lines := uint64(p.g.Lines)
	pos := frame.Resize(p.pos, len(xs))
	p.pos = pos
	packPrimary(pos, xs, lines, nb, ov, fpMax)
	// Two loops, so that the inner one leaves for insert (a possible
	// repeat, rare) by break: written as one loop with the call inside,
	// the compiler keeps more of its values on the stack.
	for k := 0; k < len(pos); k++ {
		var v uint32
		for ; k < len(pos); k++ {
			v = pos[k]
			i1, i2, fp := v&31, v>>5&31, uint16(v>>16)
			b1, b2 := &bk[i1], &bk[i2]
			if b1.fpMatches(fp)|b2.fpMatches(fp) != 0 {
				break
			}
			n1, n2 := b1.count(), b2.count()
			if n1 >= bucket.Slots && n2 >= bucket.Slots {
				// insert's first search step, here without its call and
				// checks: a resident of a root moves to its other
				// bucket, if that has room (the first such in search
				// order); otherwise the search goes on.
				if !p.moveOne(bk, ks, xs[k], i1, i2, fp, uint8(v>>10&63)) {
					p.search(bk, ks, xs[k], ln, i1, i2, fp, uint8(v>>10&63))
				}
				continue
			}
			// The emptier bucket, the first on a tie.
			at, alt, n := i1, i2, n1
			if n2 < n1 {
				at, alt, n = i2, i1, n2
			}
			bk[at].putAt(&ks[at], n, xs[k], fp, uint8(alt), uint8(v>>10&63))
		}
		if k < len(pos) {
			p.insert(bk, ks, xs[k], ln, v&31, v>>5&31, uint16(v>>16), uint8(v>>10&63))
		}
	}
}

// moveOne is the first step of insert's search for the key x whose
// buckets i1 and i2 are both full, without the search's set-up: the first
// resident of i1, then of i2, whose other bucket has room moves there and
// x takes its slot (the path relocate.Find would find first). It reports
// whether it placed x.
func (p *placer) moveOne(bk []lineBucket, ks []slotKeys, x uint64, i1, i2 uint32, fp uint16, meta uint8) bool {
	for _, u := range [2]uint32{i1, i2} {
		w := binary.LittleEndian.Uint32(bk[u].alt[:])
		for j := uint8(0); j < bucket.Slots; j, w = j+1, w>>8 {
			if v := uint8(w) & 31; bk[v].fp>>(16*(bucket.Slots-1)) == 0 {
				p.step[0] = relocate.Step{From: u, Slot: int(j), To: uint32(v)}
				p.carry(bk, ks, p.step[:], u, x, fp, meta, i1, i2)
				return true
			}
		}
	}
	return false
}

// packPrimary is placePrimary's first pass, a function of its own so that
// its loop keeps its values in registers: pos[k] is the primary position
// of xs[k] in a line of nb buckets and ov overflow bits, of a filter of
// lines lines, with fingerprints of at most fpMax, packed as i1 | i2<<5 |
// ob<<10 | fp<<16.
func packPrimary(pos []uint32, xs []uint64, lines, nb, ov, fpMax uint64) {
	pos = pos[:len(xs)]
	for k, x := range xs {
		rest := uint32(uint64(uint32(x>>32)) * lines)
		i1 := (uint64(rest) * nb) >> 32
		q := (x >> 16 & 0xffff) * (nb - 1)
		i2 := i1 + 1 + q>>16
		i2 -= nb & uint64(int64(nb-1-i2)>>63) // i2 -= nb if i2 >= nb
		ob := ((q & 0xffff) * ov) >> 16
		fp := 1 + (x&0xffff)*fpMax>>16
		pos[k] = uint32(i1 | i2<<5 | ob<<10 | fp<<16)
	}
}

// holds reports whether a key of position hash x is already in bucket
// i1 or i2 of the line bk.
func (p *placer) holds(bk []lineBucket, ks []slotKeys, x uint64, i1, i2 uint32, fp uint16) bool {
	if bk[i1].fpMatches(fp)|bk[i2].fpMatches(fp) == 0 {
		return false
	}
	return p.isRepeat(bk, ks, x, i1, i2, fp)
}

// isRepeat is holds' rare path, behind a fingerprint match.
func (p *placer) isRepeat(bk []lineBucket, ks []slotKeys, x uint64, i1, i2 uint32, fp uint16) bool {
	for _, u := range [2]uint32{i1, i2} {
		b := &bk[u]
		for j, n := uint8(0), b.count(); j < n; j++ {
			if b.fpAt(j) == fp && ks[u][j] == x {
				return true
			}
		}
	}
	return false
}

func (b *lineBucket) put(ks *slotKeys, x uint64, fp uint16, alt, meta uint8) {
	b.putAt(ks, b.count(), x, fp, alt, meta)
}

// putAt is put for a bucket whose count j the caller has at hand.
func (b *lineBucket) putAt(ks *slotKeys, j uint8, x uint64, fp uint16, alt, meta uint8) {
	ks[j], b.alt[j], b.meta[j] = x, alt, meta
	b.fp |= uint64(fp) << (16 * j)
}

func (b *lineBucket) remove(ks *slotKeys, j uint8) {
	n := b.count() - 1
	ks[j], b.alt[j], b.meta[j] = ks[n], b.alt[n], b.meta[n]
	last := b.fp >> (16 * n) & 0xffff
	b.fp &^= 0xffff<<(16*n) | 0xffff<<(16*j)
	if j != n {
		b.fp |= last << (16 * j)
	}
}

// line returns the buckets of line ln and their keys.
func (p *placer) line(ln uint32) ([]lineBucket, []slotKeys) {
	first := p.g.FirstBucket(ln)
	end := first + uint32(p.g.Shape(ln).Buckets)
	return p.bkt[first:end], p.keys[first:end]
}

// carry moves each key on path one step on, from the far end back (each
// move fills the slot the one after it freed), then puts x, whose buckets
// are i1 and i2, in the slot freed in the path's root (root itself when
// the path is empty).
func (p *placer) carry(bk []lineBucket, ks []slotKeys, path []relocate.Step, root uint32, x uint64, fp uint16, meta uint8, i1, i2 uint32) {
	for i := len(path) - 1; i >= 0; i-- {
		st := path[i]
		u, j := uint8(st.From), uint8(st.Slot)
		src := &bk[u]
		bk[st.To].put(&ks[st.To], ks[u][j], src.fpAt(j), u, src.meta[j])
		src.remove(&ks[u], j)
	}
	if len(path) > 0 {
		root = path[0].From
	}
	alt := uint8(i2)
	if root == i2 {
		alt = uint8(i1)
	}
	bk[root].put(&ks[root], x, fp, alt, meta)
}

// overflow sets overflow bit ob of line ln and queues the key of
// position hash x for its secondary line.
func (p *placer) overflow(x uint64, ln uint32, ob uint8) {
	p.ovMask[ln] |= 1 << ob
	p.queue = append(p.queue, secondaryMove(x, &p.g))
}

// secondaryMove is Secondary for the builder, computed straight into a
// queued move: the same line, buckets and fingerprint, without Pos.
func secondaryMove(x uint64, g *Geom) move {
	y := keyhash.Mix(x, frame.SecondarySalt)
	hp := uint64(uint32(y>>32)) * uint64(g.Lines)
	line := uint32(hp >> 32)
	f := g.Width(line)
	b := uint64(LineShapes[f].Buckets)
	i1 := (uint64(uint32(hp)) * b) >> 32
	i2 := i1 + 1 + (y>>16&0xffff)*(b-1)>>16
	i2 -= b & uint64(int64(b-1-i2)>>63) // i2 -= b if i2 >= b
	fp := 1 + (y&0xffff)*(uint64(1)<<f-1)>>16
	return move{x: x, line: line, i1: uint8(i1), i2: uint8(i2), fp: uint16(fp)}
}
