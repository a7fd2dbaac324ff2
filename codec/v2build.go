package codec

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	freshseed "github.com/lsmcuckoo/lsmcuckoo/internal/seed"
)

// Version-2 build limits. Each caps the cost an adversarial key set can
// impose; past them the builder writes an "always maybe" block.
// v2MaxLoad is the highest planned fraction of occupied slots. Lines
// receive a Poisson number of keys, so the fullest lines overflow; the
// overflow goes to secondary lines, which must still have room. A higher
// load buys wider fingerprints for the same bits (a larger share of wide
// lines), for more lookups reading a second line and slower builds
// (go test ./codec -run TestV2LoadSweep -v measures the trade).
var v2MaxLoad = 0.93

// v2HardLoad is the load a small filter may be planned at to keep the
// fingerprint width of a large one: placement reaches it, at the price of
// more second-line reads in that filter.
const v2HardLoad = 0.97

const (
	// v2Attempts bounds the placements one Finish may try: two at the
	// planned size under fresh seeds, then two at geometrically larger
	// sizes. Each attempt is linear in the keys, so a Finish is too.
	v2Attempts = 4
	// v2GrowStep is the growth of the line count per attempt after the
	// second; the last attempt is the size cap, (1+v2GrowStep)^2 of the plan.
	v2GrowStep = 0.08
	// v2EvictionsPerKey caps how many primary residents secondary
	// placements may push out, per key, before an attempt is abandoned.
	v2EvictionsPerKey = 0.5
)

// v2Bucket is one bucket under placement. Each slot carries what a move
// or an eviction needs (the key's other bucket, its overflow bit), so the
// search inside a line touches only the line's buckets.
//
// It is 16 bytes, four to a cache line: the slot count is not stored but
// read off the fingerprint lanes, which are filled from lane 0 up and are
// never 0 when occupied. Which key sits in a slot (needed only when a key
// moves or leaves, or a repeat is checked) is kept apart, in v2Keys, so
// that a line's search touches half the memory.
type v2Bucket struct {
	fp   uint64       // four 16-bit lanes, 0 for an empty slot
	meta [slots]uint8 // overflow bit in the primary line, or v2SecondaryMeta
	alt  [slots]uint8 // the key's other candidate bucket in this line
}

// v2Keys is, for the bucket of the same index, each slot's position hash.
// Holding the hash itself, not its index in the hash array, lets a key be
// pushed out to its secondary line, or checked for a repeat, without a
// load from anywhere in that array (a cache and TLB miss in a large filter).
type v2Keys = [slots]uint64

// count returns the occupied slots.
func (b *v2Bucket) count() uint8 { return uint8(bits.Len64(b.fp)+15) >> 4 }

func (b *v2Bucket) fpAt(j uint8) uint16 { return uint16(b.fp >> (16 * j)) }

// fpMatches has bit 16j+15 set for each slot j holding fp (fp != 0, so
// empty slots never match): a SWAR zero-lane test, no loop, no branch.
func (b *v2Bucket) fpMatches(fp uint16) uint64 {
	const lo, hi = 0x0001_0001_0001_0001, 0x8000_8000_8000_8000
	v := b.fp ^ uint64(fp)*lo
	return (v - lo) &^ v & hi
}

// v2Secondary in a slot's meta marks a key placed in its secondary line:
// it cannot overflow again.
const v2SecondaryMeta = 0x80

// v2Placer holds the placement state of every line at once: primary
// placement leaves some keys over, and those are then placed in their
// secondary lines, which were placed before.
type v2Placer struct {
	g      v2Geom
	x      []uint64   // position hashes, grouped by primary line
	pos    []uint32   // one line's keys' primary positions, packed
	bkt    []v2Bucket // g.firstBucket(line) + i
	keys   []v2Keys   // parallel to bkt
	ovMask []uint64   // per line: overflow bits set
	queue  []v2Move   // keys waiting for their secondary line
	sorted []v2Move   // one round of the queue, sorted by secondary line
	// lineCount counts a round's moves per line for the sort.
	lineCount []uint32
	// touched keeps the sum of touch's loads, so that they are not
	// removed as unused.
	touched uint64

	// BFS scratch for one line (B <= 31 buckets).
	from    [32]int8
	via     [32]uint8 // slot, in bucket from[v], of the key that moves to v
	bfsQ    [32]uint8
	evicted int // primary residents pushed out by secondary placement
	dups    int // repeats found in place of a slot
}

// v2Move is a key waiting for its secondary line, with where it goes.
type v2Move struct {
	x      uint64
	line   uint32
	fp     uint16
	i1, i2 uint8
}

// insert places the key of position hash x, with fingerprint fp and
// candidate buckets i1 != i2 of line ln. meta is its overflow bit for a
// primary placement, or v2SecondaryMeta. It returns false only when x is
// a secondary key and every key it can reach in the line is secondary
// too.
func (p *v2Placer) insert(bk []v2Bucket, ks []v2Keys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8) bool {
	// A repeat of a key already in one of its buckets takes no slot. Repeats
	// have equal hashes, hence equal buckets and fingerprints.
	if p.holds(bk, ks, x, i1, i2, fp) {
		p.dups++
		return true
	}
	if n1, n2 := bk[i1].count(), bk[i2].count(); n1 < slots || n2 < slots {
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
func (p *v2Placer) search(bk []v2Bucket, ks []v2Keys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8) bool {
	room := roomMask(bk)
	if room == 0 {
		return p.insertFull(bk, ks, x, ln, i1, i2, fp, meta)
	}
	// Breadth-first search for a chain of moves inside the line. Every
	// bucket it queues is full (the roots are, and a bucket with room ends
	// the search), so each has exactly slots keys to follow. A line has at
	// most 31 buckets: the visited set is one word.
	q := &p.bfsQ
	q[0], q[1] = uint8(i1), uint8(i2)
	qn := 2
	seen := uint32(1)<<i1 | uint32(1)<<i2
	p.from[i1&31], p.from[i2&31] = -1, -1
	for i := 0; i < qn; i++ {
		if i == 2 && !reachesRoom(bk, seen, room) {
			// Past the roots' own moves: when no bucket with room is
			// reachable at all, the search would fail having visited
			// every reachable bucket, which is all insertFull needs to
			// know, and it picks the same resident with less work.
			return p.insertFull(bk, ks, x, ln, i1, i2, fp, meta)
		}
		u := q[i&31]
		b := &bk[u]
		// The first slot whose key can move to a bucket with room that
		// the search has not seen ends it. (A bucket seen earlier from
		// this one has no room, or the search would have ended there.)
		w := binary.LittleEndian.Uint32(b.alt[:])
		avail := room &^ seen
		hit := avail>>(w&31)&1 | avail>>(w>>8&31)&1<<1 | avail>>(w>>16&31)&1<<2 | avail>>(w>>24&31)&1<<3
		if hit != 0 {
			j := uint8(bits.TrailingZeros32(hit))
			v := uint8(w>>(8*j)) & 31
			p.from[v], p.via[v] = int8(u), j
			p.shift(bk, ks, x, fp, meta, i1, i2, v)
			return true
		}
		seen, qn = p.queueFrom(w, u, seen, qn)
	}
	// The line is full as far as x can reach. Somebody leaves for their
	// secondary line: preferably a key whose overflow bit is already set,
	// so that few bits are set and few lookups need a second line.
	mask := p.ovMask[ln]
	if meta != v2SecondaryMeta && mask>>meta&1 != 0 {
		p.overflow(x, ln, meta)
		return true
	}
	vu, vj, best := uint8(0), uint8(0), 0
	for _, u := range q[:qn] {
		primary, set := residents(&bk[u], mask)
		if set != 0 {
			vu, vj, best = u, uint8(bits.TrailingZeros8(set)), 2
			break
		}
		if best == 0 && primary != 0 {
			vu, vj, best = u, uint8(bits.TrailingZeros8(primary)), 1
		}
	}
	return p.evict(bk, ks, x, ln, i1, i2, fp, meta, vu, vj, best)
}

// evict ends an insert that found no chain of moves to room: the key
// leaves itself if it is primary and no resident with its overflow bit set
// (best 2) was found; otherwise resident vj of bucket vu (of the best
// kind found) leaves for its secondary line and the key takes its place.
func (p *v2Placer) evict(bk []v2Bucket, ks []v2Keys, x uint64, ln, i1, i2 uint32, fp uint16, meta, vu, vj uint8, best int) bool {
	if best < 2 && meta != v2SecondaryMeta {
		p.overflow(x, ln, meta)
		return true
	}
	if best == 0 {
		return false
	}
	b := &bk[vu]
	p.overflow(ks[vu][vj], ln, b.meta[vj])
	b.remove(&ks[vu], vj)
	if meta == v2SecondaryMeta {
		p.evicted++
	}
	p.shift(bk, ks, x, fp, meta, i1, i2, vu)
	return true
}

// reachesRoom reports whether a bucket in room can be reached from the
// buckets in seen (full buckets, none of them in room) by moving keys,
// as the breadth-first search would: a closure over bit masks, with no
// queue.
func reachesRoom(bk []v2Bucket, seen, room uint32) bool {
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

// queueFrom is a step of the breadth-first search: it queues, in slot
// order, the buckets not yet seen that the keys of bucket u (whose other
// buckets are the bytes of alt) can move to, and returns the new seen set
// and queue length. A line has at most 31 buckets, so index 31 of from
// and via is free to take the writes for buckets already seen: the step
// does not branch on whether a bucket is new (which goes either way at
// random).
func (p *v2Placer) queueFrom(alt uint32, u uint8, seen uint32, qn int) (uint32, int) {
	for j := uint8(0); j < slots; j++ {
		v := uint8(alt) & 31
		alt >>= 8
		isNew := ^seen >> v & 1
		seen |= 1 << v
		d := v | uint8(isNew-1)&31
		p.from[d], p.via[d] = int8(u), j
		p.bfsQ[qn&31] = v
		qn += int(isNew)
	}
	return seen, qn
}

// roomMask has bit i set for each bucket i of the line with a free slot.
func roomMask(bk []v2Bucket) uint32 {
	var m uint32
	for i := range bk {
		m |= uint32(bk[i].fp>>(16*(slots-1))-1) >> 31 << (i & 31)
	}
	return m
}

// residents returns, as bit masks of slots, the primary residents of a
// full bucket (the secondary ones never leave again) and those of them
// whose overflow bit is set in mask. A secondary resident's meta is at
// least 64, so mask>>meta is 0 for it.
func residents(b *v2Bucket, mask uint64) (primary, set uint8) {
	// Written out, with the four metas read as one word: in a loop the
	// compiler keeps the masks on the stack.
	w := binary.LittleEndian.Uint32(b.meta[:])
	primary = uint8((^w>>7&0x01010101)*0x01020408>>24) & 0xf
	set = uint8(mask>>(w&0xff)&1 | mask>>(w>>8&0xff)&1<<1 | mask>>(w>>16&0xff)&1<<2 | mask>>(w>>24)&1<<3)
	return primary, set
}

// insertFull is insert in a full line, deciding exactly as insert does
// but with less work. No chain of moves can end in room, so a primary key
// whose overflow bit is set leaves at once, and the search for a resident
// to push out runs in step with the breadth-first search: insert would
// pick the first suitable resident in the order the search queues
// buckets, so the search stops as soon as the best kind is found, instead
// of visiting every bucket first and scanning them all again.
func (p *v2Placer) insertFull(bk []v2Bucket, ks []v2Keys, x uint64, ln, i1, i2 uint32, fp uint16, meta uint8) bool {
	mask := p.ovMask[ln]
	if meta != v2SecondaryMeta && mask>>meta&1 != 0 {
		p.overflow(x, ln, meta)
		return true
	}
	p.from[i1&31], p.from[i2&31] = -1, -1
	if mask == 0 {
		// No overflow bit is set in the line (it has just filled), so no
		// resident is of the best kind and the search would visit every
		// bucket: a primary key leaves itself, and a secondary one takes
		// the place of the first primary resident in search order, which
		// is in a root unless both roots hold only secondary keys.
		if meta != v2SecondaryMeta {
			p.overflow(x, ln, meta)
			return true
		}
		for _, u := range [2]uint8{uint8(i1), uint8(i2)} {
			if primary, _ := residents(&bk[u&31], 0); primary != 0 {
				return p.evict(bk, ks, x, ln, i1, i2, fp, meta, u, uint8(bits.TrailingZeros8(primary)), 1)
			}
		}
	}
	q := &p.bfsQ
	q[0], q[1] = uint8(i1), uint8(i2)
	qn := 2
	seen := uint32(1)<<i1 | uint32(1)<<i2
	vu, vj, best := uint8(0), uint8(0), 0
	for i := 0; i < qn; i++ {
		u := q[i&31]
		b := &bk[u]
		primary, set := residents(b, mask)
		if set != 0 {
			vu, vj, best = u, uint8(bits.TrailingZeros8(set)), 2
			break
		}
		if best == 0 && primary != 0 {
			vu, vj, best = u, uint8(bits.TrailingZeros8(primary)), 1
		}
		seen, qn = p.queueFrom(binary.LittleEndian.Uint32(b.alt[:]), u, seen, qn)
	}
	return p.evict(bk, ks, x, ln, i1, i2, fp, meta, vu, vj, best)
}

// v2SmallRound: a secondary round of fewer than lines/v2SmallRound moves
// is sorted by comparison rather than counted.
const v2SmallRound = 16

// v2TouchAhead is how many moves ahead a secondary round touches the line
// it will insert into, in filters whose placement state is over
// v2TouchBytes (about a second-level cache).
const (
	v2TouchAhead = 16
	v2TouchBytes = 2 << 20
)

// touch loads a word from each cache line of the buckets and keys of line
// ln, and its overflow bits, and returns their sum.
func (p *v2Placer) touch(ln uint32) uint64 {
	first := p.g.firstBucket(ln)
	end := first + uint32(p.g.shape(ln).buckets)
	if int(end) > len(p.bkt) || int(end) > len(p.keys) || int(ln) >= len(p.ovMask) {
		return 0
	}
	t := p.ovMask[ln] + p.bkt[end-1].fp + p.keys[end-1][slots-1]
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
// It works in two passes: first v2Primary for every key, with the line's
// shape hoisted, packed into one word per key (independent multiplies
// the processor overlaps); then placement, a loop whose values stay in
// registers in the common case.
func (p *v2Placer) placePrimary(bk []v2Bucket, ks []v2Keys, xs []uint64, ln uint32) {
	s := p.g.shape(ln)
	nb, ov := uint64(s.buckets), uint64(s.overflow)
	fpMax := uint64(1)<<p.g.width(ln) - 1
	lines := uint64(p.g.lines)
	pos := resize(p.pos, len(xs))
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
			if n1 >= slots && n2 >= slots {
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
// buckets i1 and i2 are both full: the first resident of i1, then of i2,
// whose other bucket has room moves there and x takes its slot. It
// reports whether it placed x.
func (p *v2Placer) moveOne(bk []v2Bucket, ks []v2Keys, x uint64, i1, i2 uint32, fp uint16, meta uint8) bool {
	for _, u := range [2]uint32{i1, i2} {
		w := binary.LittleEndian.Uint32(bk[u].alt[:])
		for j := uint8(0); j < slots; j, w = j+1, w>>8 {
			if v := uint8(w) & 31; bk[v].fp>>(16*(slots-1)) == 0 {
				p.from[u&31] = -1
				p.from[v], p.via[v] = int8(u), j
				p.shift(bk, ks, x, fp, meta, i1, i2, v)
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
func (p *v2Placer) holds(bk []v2Bucket, ks []v2Keys, x uint64, i1, i2 uint32, fp uint16) bool {
	if bk[i1].fpMatches(fp)|bk[i2].fpMatches(fp) == 0 {
		return false
	}
	return p.isRepeat(bk, ks, x, i1, i2, fp)
}

// isRepeat is holds' rare path, behind a fingerprint match.
func (p *v2Placer) isRepeat(bk []v2Bucket, ks []v2Keys, x uint64, i1, i2 uint32, fp uint16) bool {
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

func (b *v2Bucket) put(ks *v2Keys, x uint64, fp uint16, alt, meta uint8) {
	b.putAt(ks, b.count(), x, fp, alt, meta)
}

// putAt is put for a bucket whose count j the caller has at hand.
func (b *v2Bucket) putAt(ks *v2Keys, j uint8, x uint64, fp uint16, alt, meta uint8) {
	ks[j], b.alt[j], b.meta[j] = x, alt, meta
	b.fp |= uint64(fp) << (16 * j)
}

func (b *v2Bucket) remove(ks *v2Keys, j uint8) {
	n := b.count() - 1
	ks[j], b.alt[j], b.meta[j] = ks[n], b.alt[n], b.meta[n]
	last := b.fp >> (16 * n) & 0xffff
	b.fp &^= 0xffff<<(16*n) | 0xffff<<(16*j)
	if j != n {
		b.fp |= last << (16 * j)
	}
}

// line returns the buckets of line ln and their keys.
func (p *v2Placer) line(ln uint32) ([]v2Bucket, []v2Keys) {
	first := p.g.firstBucket(ln)
	end := first + uint32(p.g.shape(ln).buckets)
	return p.bkt[first:end], p.keys[first:end]
}

// shift frees a slot in a root bucket (i1 or i2) by moving each key on the
// BFS path one step towards v, which has room, then puts x in the root.
func (p *v2Placer) shift(bk []v2Bucket, ks []v2Keys, x uint64, fp uint16, meta uint8, i1, i2 uint32, v uint8) {
	for p.from[v] >= 0 {
		u := uint8(p.from[v])
		src := &bk[u]
		j := p.via[v]
		bk[v].put(&ks[v], ks[u][j], src.fpAt(j), u, src.meta[j])
		src.remove(&ks[u], j)
		v = u
	}
	alt := uint8(i2)
	if uint32(v) == i2 {
		alt = uint8(i1)
	}
	bk[v].put(&ks[v], x, fp, alt, meta)
}

// overflow sets overflow bit ob of line ln and queues the key of
// position hash x for its secondary line.
func (p *v2Placer) overflow(x uint64, ln uint32, ob uint8) {
	p.ovMask[ln] |= 1 << ob
	p.queue = append(p.queue, secondaryMove(x, &p.g))
}

// secondaryMove is v2Secondary for the builder, computed straight into a
// queued move: the same line, buckets and fingerprint, without v2Pos.
func secondaryMove(x uint64, g *v2Geom) v2Move {
	y := keyhash.Mix(x, secondarySalt)
	hp := uint64(uint32(y>>32)) * uint64(g.lines)
	line := uint32(hp >> 32)
	f := g.width(line)
	b := uint64(lineShapes[f].buckets)
	i1 := (uint64(uint32(hp)) * b) >> 32
	i2 := i1 + 1 + (y>>16&0xffff)*(b-1)>>16
	i2 -= b & uint64(int64(b-1-i2)>>63) // i2 -= b if i2 >= b
	fp := 1 + (y&0xffff)*(uint64(1)<<f-1)>>16
	return v2Move{x: x, line: line, i1: uint8(i1), i2: uint8(i2), fp: uint16(fp)}
}

// v2Plan is the fingerprint width, line count and share of wide lines
// (in 128ths) for d keys.
type v2Plan struct {
	f     uint
	lines uint32
	wide  uint8
}

// v2Slots is the number of slots in a line for fingerprints of f bits.
func v2Slots(f uint) float64 { return float64(slots) * float64(lineShapes[f].buckets) }

// planV2 sizes a version-2 filter. With a budget it spends all of it: the
// line count the budget buys, and the widest fingerprint whose lines still
// hold the keys at v2MaxLoad. With a target rate it takes the cheapest
// width and load that meet it.
func planV2(o *Options, d int) v2Plan {
	n := float64(max(d, 1))
	linesFor := func(f uint, load float64) uint32 {
		return uint32(max(1, math.Ceil(n/(v2Slots(f)*load))))
	}
	if o.FingerprintBits != 0 {
		f := uint(o.FingerprintBits)
		load := v2MaxLoad
		if o.FalsePositiveRate > 0 {
			load = min(v2MaxLoad, loadForFPR(f, o.FalsePositiveRate))
		} else if o.BitsPerKey > 0 {
			l := budgetLines(o.BitsPerKey, n, v2TrailerSize*8)
			load = min(v2MaxLoad, n/(float64(l)*v2Slots(f)))
		}
		return v2Plan{f, linesFor(f, max(load, minLoad)), 0}
	}
	if o.FalsePositiveRate > 0 {
		// A target no width meets at minLoad or above gets the lowest rate
		// there is, 16-bit fingerprints at minLoad, as version 1 does (not
		// the densest 16-bit filter, whose rate is several times higher
		// than a looser target's).
		best, bestBits := v2Plan{maxFPBits, linesFor(maxFPBits, minLoad), 0}, math.Inf(1)
		for f := uint(minFPBits); f <= maxFPBits; f++ {
			load := min(v2MaxLoad, loadForFPR(f, o.FalsePositiveRate))
			if load < minLoad {
				continue
			}
			if bits := lineBits / (v2Slots(f) * load); bits < bestBits {
				best, bestBits = v2Plan{f, linesFor(f, load), 0}, bits
			}
		}
		return best
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = DefaultBitsPerKey
	}
	// The widths are chosen for the budget's keys per line, so that small
	// filters get the fingerprints of large ones: the narrow width f is the
	// widest whose lines hold them at v2MaxLoad, and a share of the lines
	// (as large as that load allows) gets the wide width. A small filter
	// whose whole lines (and trailer) the budget cannot quite buy takes
	// fewer wide lines, or the few lines more it needs (up to 5% over the
	// budget), or else the next narrower width. A tiny filter, whose
	// 40-byte trailer alone is more than 5% of its budget, may exceed the
	// budget by the trailer, rather than fall to uselessly narrow
	// fingerprints.
	trailer := float64(v2TrailerSize * 8)
	if trailer > 0.05*budget*n {
		trailer = 0
	}
	perLine := lineBits / budget / v2MaxLoad // slots a line needs on average
	have := budgetLines(budget, n, trailer)
	for f := uint(maxFPBits); f >= minFPBits; f-- {
		if perLine > v2Slots(f) && f > minFPBits {
			continue
		}
		w := 0.0
		if f < maxFPBits {
			w = min(1, (v2Slots(f)-perLine)/(v2Slots(f)-v2Slots(uint(wideWidth[f]))))
		}
		need := func(w128 int, load float64) uint32 {
			avg := v2Slots(f)
			if w128 > 0 {
				avg -= float64(w128) / 128 * (v2Slots(f) - v2Slots(uint(wideWidth[f])))
			}
			return uint32(max(1, math.Ceil(n/(avg*load))))
		}
		// As many wide lines as the lines the budget buys can hold...
		for w128 := int(w * 127); w128 >= 0; w128-- {
			if need(w128, v2MaxLoad) <= have {
				return v2Plan{f, have, uint8(w128)}
			}
		}
		// ...or, for a small filter, a few lines more than it buys, or
		// a higher load (placement reaches v2HardLoad).
		for _, load := range []float64{v2MaxLoad, v2HardLoad} {
			if l := need(0, load); float64(l)*lineBits+trailer <= 1.05*budget*n || f == minFPBits {
				return v2Plan{f, l, 0}
			}
		}
	}
	return v2Plan{minFPBits, max(have, linesFor(minFPBits, v2MaxLoad)), 0}
}

// v2AttemptLines is the line count of placement attempt 0, 1, ...: the
// plan twice (under two seeds), then geometrically more.
func v2AttemptLines(planned uint32, attempt int) uint32 {
	if g := attempt - 1; g > 0 {
		return uint32(math.Ceil(float64(planned)*math.Pow(1+v2GrowStep, float64(g)))) + 1
	}
	return planned
}

// v2SizeCap is the most lines any attempt may use for a plan of planned
// lines: the size cap.
func v2SizeCap(planned uint32) float64 { return float64(v2AttemptLines(planned, v2Attempts-1)) }

// budgetLines is how many whole lines a budget of bpk bits for n keys buys
// after trailer bits, at least one, and at most what 16-bit fingerprints at
// minLoad fill: a filter emptier than that buys a negligibly lower rate
// with every further bit (the same floor a target rate or a forced width
// is planned with), so a budget far past it (a mistyped 1e6, an int meant
// as bytes) does not become a block of that size, nor a line count that
// overflows uint32.
func budgetLines(bpk, n, trailer float64) uint32 {
	most := math.Ceil(n / (v2Slots(maxFPBits) * minLoad))
	return uint32(max(1, min(most, math.Floor((bpk*n-trailer)/lineBits))))
}

// finishV2 encodes the builder's hashes (raw, not yet mixed) as a
// version-2 block appended to dst.
func (b *Builder) finishV2(dst []byte) []byte {
	pinned := b.opts.Seed != 0
	seed := b.opts.Seed
	if !pinned {
		seed = freshseed.New()
	}
	plan := planV2(&b.opts, b.n)
	b.stats = BuildStats{}
	out, g, seed, next, ok := b.placeV2(dst, plan, 0, seed, pinned)
	if !ok {
		// Past every cap: a block that honestly answers "maybe" for every
		// key.
		return b.alwaysMaybe(dst, plan.f, next, v2Attempts)
	}
	if b.stats.Keys >= b.n {
		return out
	}
	// The plan counted every hash added, because repeats that do not
	// arrive one after another (keys added out of order, as from a log)
	// are only found while placing; the budget is per distinct key. When
	// the distinct keys would plan materially fewer lines, the repeats are
	// removed and the distinct keys placed again in those lines, with the
	// same reseeds and growth as any placement. (Placing the repeats
	// again in the smaller plan would not do: placement recognises a
	// repeat only in the buckets it is looking at, and a repeat whose
	// first copy was pushed to its secondary line is placed a second
	// time, crowding lines planned without it.) Keys sorted as a table
	// writer adds them never get here: their repeats are consecutive and
	// dropped by Add.
	p := planV2(&b.opts, b.stats.Keys)
	if float64(p.lines) >= 0.97*float64(plan.lines) {
		return out
	}
	reseeds := b.stats.Reseeds
	b.dropRepeats()
	again, _, last, next, ok := b.placeV2(dst, p, seed, seed, pinned)
	if ok {
		b.stats.Reseeds += reseeds
		return again
	}
	// Every attempt at the smaller plan failed (as rarely as any
	// placement does): the first block, re-encoded from the distinct keys
	// in its geometry, where they placed with their repeats.
	if out, ok := b.encodeV2(dst, last, seed, g, plan.wide); ok {
		b.stats.Reseeds = reseeds
		return out
	}
	return b.alwaysMaybe(dst, plan.f, next, v2Attempts)
}

// placeV2 places the builder's hashes, mixed under prevSeed (raw when it
// is 0), by plan: under seed, then under fresh seeds in the plan's lines,
// then in geometrically more lines, up to v2Attempts attempts. It returns
// the block appended to dst and its geometry, the seed of the last
// attempt (the one the hashes are now mixed under) and the seed an attempt
// after it would take; ok is false when every attempt failed.
func (b *Builder) placeV2(dst []byte, plan v2Plan, prevSeed, seed uint32, pinned bool) (out []byte, g v2Geom, last, next uint32, ok bool) {
	for attempt := 0; attempt < v2Attempts; attempt++ {
		lines := v2AttemptLines(plan.lines, attempt)
		if b.rejectSeeds <= 0 {
			g = v2Geom{f: plan.f, lines: lines, wide: v2WideLines(lines, plan.wide)}
			out, ok = b.encodeV2(dst, prevSeed, seed, g, plan.wide)
			prevSeed = seed
			if ok {
				b.stats.Reseeds = attempt
				return out, g, seed, seed, true
			}
		}
		b.rejectSeeds--
		if pinned {
			seed = uint32(keyhash.Mix(uint64(seed), uint32(attempt+1))) | 1
		} else {
			seed = freshseed.New()
		}
	}
	return nil, g, prevSeed, seed, false
}

// dropRepeats removes repeated hashes from the builder's pages, which
// then hold the distinct hashes, in ascending order, and sets b.n to their
// count. Pages left empty stay in b.pages, so that Reset returns them to
// the pool.
func (b *Builder) dropRepeats() {
	all := slices.Grow(b.s.sorted[:0], b.n)
	for _, pg := range b.pages {
		all = append(all, pg...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	b.s.sorted = all
	at := 0
	for i, pg := range b.pages {
		n := copy(pg[:cap(pg)], all[at:])
		b.pages[i] = pg[:n]
		at += n
	}
	b.n = len(all)
}

// encodeV2 places every key under one seed and line count and appends the
// block; ok is false when placement failed (the caller reseeds or grows).
// The builder's pages hold hashes mixed under prevSeed (raw hashes when
// prevSeed is 0); they are left mixed under seed.
func (b *Builder) encodeV2(dst []byte, prevSeed, seed uint32, g v2Geom, wide uint8) ([]byte, bool) {
	p := &b.s.v2
	p.g = g
	lines := g.lines
	nb := int(g.firstBucket(lines))

	// Group the position hashes by primary line with a counting sort, so
	// each line is then placed while its keys and buckets are in cache.
	counts := slices.Grow(b.s.counts[:0], int(lines)+1)[:lines+1]
	clear(counts)
	m := v2Multiplier(seed)
	var prevInv uint64
	if prevSeed != 0 {
		prevInv = keyhash.ModInverse(v2Multiplier(prevSeed))
	}
	for _, pg := range b.pages {
		for i, h := range pg {
			if prevSeed != 0 {
				h = v2Unposition(h, prevInv)
			}
			x := v2Position(h, m)
			pg[i] = x
			counts[(uint64(uint32(x>>32))*uint64(lines))>>32+1]++
		}
	}
	for i := 1; i <= int(lines); i++ {
		counts[i] += counts[i-1]
	}
	b.s.fill = append(b.s.fill[:0], counts[:lines]...)
	fill := b.s.fill
	p.x = resize(p.x, b.n)
	for _, pg := range b.pages {
		for _, x := range pg {
			ln := (uint64(uint32(x>>32)) * uint64(lines)) >> 32
			p.x[fill[ln]] = x
			fill[ln]++
		}
	}
	b.s.counts = counts
	p.bkt = resize(p.bkt, nb)
	p.keys = resize(p.keys, nb)
	p.ovMask = resize(p.ovMask, int(lines))
	clear(p.ovMask)
	p.queue = p.queue[:0]
	p.evicted, p.dups = 0, 0

	// Primary placement, one line at a time while its keys and buckets are
	// in cache.
	for ln := uint32(0); ln < lines; ln++ {
		bk, ks := p.line(ln)
		for i := range bk {
			bk[i].fp = 0
		}
		first := len(p.queue)
		p.placePrimary(bk, ks, p.x[counts[ln]:counts[ln+1]], ln)
		// A key pushed out of this line may have a repeat that arrived
		// later and stayed: then the key is stored already. No copy can
		// enter the line after this, so this is the one place to look.
		kept := first
		for _, m := range p.queue[first:] {
			pos := v2Primary(m.x, &p.g)
			if p.holds(bk, ks, m.x, pos.i1, pos.i2, pos.fp) {
				p.dups++
				continue
			}
			p.queue[kept] = m
			kept++
		}
		p.queue = p.queue[:kept]
	}

	// Secondary placement, in rounds: each round's keys sorted by their
	// secondary line, so the lines are visited in memory order; the keys a
	// round pushes out of their primary lines make the next round.
	primaryOverflow := len(p.queue)
	touch := nb*int(unsafe.Sizeof(v2Bucket{})+unsafe.Sizeof(v2Keys{})) > v2TouchBytes
	limit := int(v2EvictionsPerKey*float64(b.n)) + 64
	for start := 0; start < len(p.queue); {
		end := len(p.queue)
		// Sort the round's moves by secondary line, stably, so that keys
		// of one line keep their queue order: a counting sort, or for the
		// short tail rounds (each round is a fraction of the one before) a
		// comparison sort, which costs less than a pass over every line.
		round := p.queue[start:end]
		p.sorted = resize(p.sorted, len(round))
		if len(round)*v2SmallRound < int(lines) {
			copy(p.sorted, round)
			slices.SortStableFunc(p.sorted, func(a, b v2Move) int { return cmp.Compare(a.line, b.line) })
		} else {
			p.lineCount = resize(p.lineCount, int(lines)+1)
			clear(p.lineCount)
			for _, m := range round {
				p.lineCount[m.line+1]++
			}
			for i := 1; i <= int(lines); i++ {
				p.lineCount[i] += p.lineCount[i-1]
			}
			for _, m := range round {
				p.sorted[p.lineCount[m.line]] = m
				p.lineCount[m.line]++
			}
		}
		var touched uint64
		for i, m := range p.sorted {
			// Load the buckets and keys of the line some moves ahead, so
			// that their cache misses overlap this insert (Go has no
			// prefetch instruction; loads whose sum is kept serve as one).
			// A small filter's lines are in cache already.
			if a := i + v2TouchAhead; a < len(p.sorted) && touch {
				touched += p.touch(p.sorted[a].line)
			}
			bk, ks := p.line(m.line)
			if !p.insert(bk, ks, m.x, m.line, uint32(m.i1), uint32(m.i2), m.fp, v2SecondaryMeta) || p.evicted > limit {
				return nil, false
			}
		}
		p.touched += touched
		start = end
	}

	size := int(lines)*lineBytes + v2TrailerSize
	out, blk := growBytes(dst, size)
	stored, ovLines, ovBits, p2 := 0, 0, 0, 0.0
	for ln := 0; ln < int(lines); ln++ {
		var w [lineBytes / 8]uint64
		bk, _ := p.line(uint32(ln))
		f := g.width(uint32(ln))
		shape := g.shape(uint32(ln))
		bb := uint(shape.bktBits)
		for i := range bk {
			stored += int(bk[i].count())
			v := encodeLanes(bk[i].fp, f)
			off := uint(i) * bb
			w[off>>6] |= v << (off & 63)
			if (off&63)+bb > 64 {
				w[off>>6+1] |= v >> (64 - off&63)
			}
		}
		m := p.ovMask[ln]
		w[len(w)-1] |= m << shape.ovShift
		if m != 0 {
			ovLines++
			ovBits += bits.OnesCount64(m)
			p2 += float64(bits.OnesCount64(m)) / float64(shape.overflow)
		}
		line := blk[ln*lineBytes:]
		for j, v := range w {
			binary.LittleEndian.PutUint64(line[j*8:], v)
		}
	}
	h := v2Header{fpBits: uint8(g.f), kind: b.opts.Hash, lines: lines, seed: seed, flags: wide << v2WideShift}
	h.put(blk[size-v2TrailerSize:], uint32(stored))
	binary.LittleEndian.PutUint32(blk[size-4:], checksum(blk[:size-4]))

	b.stats = BuildStats{
		Version:         2,
		Keys:            stored,
		Lines:           int(lines),
		Buckets:         nb,
		FingerprintBits: int(g.f),
		WideLines:       int(g.wide),
		Load:            float64(stored) / (float64(nb) * slots),
		Overflowed:      len(p.queue),
		PrimaryOverflow: primaryOverflow,
		OverflowLines:   ovLines,
		OverflowBits:    ovBits,
		SecondLineShare: p2 / float64(lines),
		Seed:            seed,
		Bytes:           size,
	}
	return out, true
}

// PlannedFPR is the false-positive rate that a filter of keys distinct
// keys, built with o, is planned to have, in the format o.Version selects
// (0 or 3: version 3, or version 2 where the builder writes it instead
// at a small budget; 2: version 2; 1 is modelled as version 2, whose
// bucket rate it shares within a few percent): from the shape and load the
// builder will choose, before any block exists. It is the rate model for
// callers that choose a budget without building a filter (per-level
// budgets in tablefilter); Filter.Info().ExpectedFPR is the same figure
// for a block that exists. Version 3's model counts its second-line
// reads; version 2's does not.
func PlannedFPR(o Options, keys int) float64 {
	if keys <= 0 {
		return 0
	}
	if o.Version != 1 && o.Version != 2 {
		o.Version = FormatVersion
		if v3SmallBudgetV2(&o) {
			o.Version = 2
			return plannedFPRV2(o, keys)
		}
		p := planV3(&o, keys)
		return v3ExpectedFPR(p.shape, float64(keys)/float64(p.lines))
	}
	return plannedFPRV2(o, keys)
}

// plannedFPRV2 is PlannedFPR's version-2 model.
func plannedFPRV2(o Options, keys int) float64 {
	if keys <= 0 {
		return 0
	}
	p := planV2(&o, keys)
	g := v2Geom{f: p.f, lines: p.lines, wide: v2WideLines(p.lines, p.wide)}
	buckets := float64(g.firstBucket(p.lines))
	load := min(1, float64(keys)/(slots*buckets))
	wide := float64(g.wide) / float64(p.lines)
	fpr := (1 - wide) * expectedFPR(p.f, load)
	if g.wide > 0 {
		fpr += wide * expectedFPR(uint(wideWidth[p.f]), load)
	}
	return fpr
}
