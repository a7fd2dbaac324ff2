package codec

import (
	"encoding/binary"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// Format version 2 ("lined"): the filter is L lines of 64 bytes followed by
// a 40-byte trailer. A key's two candidate buckets lie in one line, so a
// negative lookup reads one cache line (plus the trailer, which stays hot)
// in the common case. See FORMAT.md for the byte diagram.
const (
	lineBytes      = 64
	lineBits       = lineBytes * 8
	v2TrailerSize  = 40
	v2VersionAt    = 8 // offset of the version byte in the trailer (after the key count and magic)
	v2FlagAlwaysIn = 1 // flags bit 0: the block answers "maybe" for every key (build fell back)
	// Flags bits 1..7 are the share of wide lines in 128ths: lines
	// [0, L·w/128) hold fingerprints of wideWidth[f] bits, the rest f bits.
	v2WideShift = 1
	// secondarySalt derives a key's secondary line and buckets from its
	// position hash; any fixed odd constant works, it only has to differ
	// from the seeds Mix is given elsewhere.
	secondarySalt = 0x5ec0_11d2
)

// lineShape is how a 512-bit line is cut for fingerprints of f bits: B
// semi-sorted buckets of 4f-4 bits, and the O bits left over track which
// keys of the line overflowed into their secondary line.
type lineShape struct {
	buckets  uint8 // B
	overflow uint8 // O = 512 - B·(4f-4), at least 8
	bktBits  uint8 // 4f-4
	ovShift  uint8 // B·(4f-4) - 448: where the overflow bits start in the line's last word
}

// lineShapes[f] for f in [minFPBits, maxFPBits]: the most whole buckets
// that leave at least 8 overflow bits.
var lineShapes [maxFPBits + 1]lineShape

// wideWidth[f] is the fingerprint width of the wide lines of a filter whose
// narrow lines hold f bits: the widest width whose lines hold as many
// buckets as lines of f+1 bits (f+1, except that 14-bit lines hold no more
// buckets than 15-bit ones, so f=13 pairs with 15).
var wideWidth [maxFPBits + 1]uint8

// probeShape is what a lookup needs of a line's shape, in one 8-byte
// entry: probeShapes[2f+1] for the wide lines of a filter whose narrow
// lines hold f bits, probeShapes[2f] for its narrow lines.
type probeShape struct {
	buckets  uint8
	bktBits  uint8
	overflow uint8
	ovShift  uint8
	low      uint8 // bits of each slot's low part: width - 4
	_        uint8
	fpMax    uint16 // 2^width - 1
}

var probeShapes [64]probeShape

func init() {
	for f := minFPBits; f <= maxFPBits; f++ {
		bb := 4*f - 4
		b := (lineBits - 8) / bb
		lineShapes[f] = lineShape{
			buckets:  uint8(b),
			overflow: uint8(lineBits - b*bb),
			bktBits:  uint8(bb),
			ovShift:  uint8(b*bb - (lineBits - 64)),
		}
	}
	for f := minFPBits; f < maxFPBits; f++ {
		w := f + 1
		for w < maxFPBits && lineShapes[w+1].buckets == lineShapes[f+1].buckets {
			w++
		}
		wideWidth[f] = uint8(w)
	}
	wideWidth[maxFPBits] = maxFPBits
	for f := minFPBits; f <= maxFPBits; f++ {
		for wide, w := range []int{f, int(wideWidth[f])} {
			ls := lineShapes[w]
			probeShapes[2*f+wide] = probeShape{buckets: ls.buckets, bktBits: ls.bktBits, overflow: ls.overflow,
				ovShift: ls.ovShift, low: uint8(w - 4), fpMax: uint16(1<<w - 1)}
		}
	}
}

// v2Header is the lookup-critical part of a version-2 trailer.
type v2Header struct {
	fpBits uint8
	kind   HashKind
	flags  uint8
	lines  uint32
	seed   uint32
}

// geom is the header's line geometry.
func (h *v2Header) geom() v2Geom {
	return v2Geom{f: uint(h.fpBits), lines: h.lines, wide: v2WideLines(h.lines, h.flags>>v2WideShift)}
}

// v2WideLines is how many lines (the first ones) hold the wider
// fingerprints, for a share of w/128.
func v2WideLines(lines uint32, w uint8) uint32 { return uint32(uint64(lines) * uint64(w) >> 7) }

// v2Geom is the line geometry of a version-2 filter. Whole buckets cap the
// fingerprint width a line can hold at a given load (a 512-bit line holds 14
// buckets of f=10, but only 12 of f=11); mixing lines of two widths lets a
// budget between two widths buy the false-positive rate between them.
type v2Geom struct {
	f     uint   // fingerprint bits of the narrow lines
	lines uint32 // L
	wide  uint32 // lines [0, wide) hold wideWidth[f]-bit fingerprints
}

// width returns the fingerprint bits of a line.
func (g *v2Geom) width(line uint32) uint {
	if line < g.wide {
		return uint(wideWidth[g.f])
	}
	return g.f
}

func (g *v2Geom) shape(line uint32) *lineShape { return &lineShapes[g.width(line)] }

// firstBucket numbers a line's first bucket, counting the buckets of the
// lines before it (the builder's bucket array; not a byte offset).
func (g *v2Geom) firstBucket(line uint32) uint32 {
	nb := uint32(lineShapes[g.f].buckets)
	if g.wide == 0 {
		return line * nb
	}
	wb := uint32(lineShapes[wideWidth[g.f]].buckets)
	if line <= g.wide {
		return line * wb
	}
	return g.wide*wb + (line-g.wide)*nb
}

// Trailer layout, from the end of the block (n = block length):
//
//	n-40  keys u32
//	n-36  "LSMC" 2 f kind flags lines(u32) seed(u32)   (16 bytes, the "id")
//	n-20  the same 16 bytes, every bit complemented
//	n-4   CRC-32C of bytes [0, n-4)
//
// The complemented copy lets every lookup notice a damaged trailer with two
// compares: a flipped bit in the seed or line count would otherwise move
// every key and turn present keys absent.
func (h *v2Header) put(t []byte, keys uint32) {
	binary.LittleEndian.PutUint32(t[0:], keys)
	id := t[4:20]
	copy(id[0:4], magic[:])
	id[4] = 2
	id[5] = h.fpBits
	id[6] = byte(h.kind)
	id[7] = h.flags
	binary.LittleEndian.PutUint32(id[8:], h.lines)
	binary.LittleEndian.PutUint32(id[12:], h.seed)
	for i := range 16 {
		t[20+i] = ^id[i]
	}
}

// readV2 decodes the trailer of a version-2 block. ok is false when the
// block is not a well-formed version-2 block: too short, the two copies
// disagree, wrong magic or version, a field out of range, or a length other
// than the one the fields imply. It does not allocate and runs on every
// lookup.
func readV2(block []byte, h *v2Header) bool {
	n := len(block)
	if n < v2TrailerSize {
		return false
	}
	t := block[n-36 : n-4]
	w0 := binary.LittleEndian.Uint64(t[0:])
	w1 := binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) {
		return false
	}
	if w0&0xff_ffff_ffff != v2IDWord {
		return false
	}
	h.fpBits, h.kind, h.flags = uint8(w0>>40), HashKind(w0>>48), uint8(w0>>56)
	h.lines, h.seed = uint32(w1), uint32(w1>>32)
	if h.fpBits-minFPBits > maxFPBits-minFPBits || h.kind > HashHost32 || h.fpBits == maxFPBits && h.flags>>v2WideShift != 0 {
		return false
	}
	if h.flags&v2FlagAlwaysIn != 0 {
		return h.flags == v2FlagAlwaysIn && h.lines == 0 && n == v2TrailerSize
	}
	return h.lines > 0 && uint64(n) == uint64(h.lines)*lineBytes+v2TrailerSize
}

// v2IDWord is the low 40 bits of the trailer's first id word: magic and
// version 2.
var v2IDWord = uint64(binary.LittleEndian.Uint32(magic[:])) | 2<<32

// v2Multiplier turns a block's seed into the odd 64-bit multiplier of its
// position hash: one multiply, which a lookup computes from the trailer
// while the key is still being hashed.
func v2Multiplier(seed uint32) uint64 { return (uint64(seed)+1)*0x9e3779b97f4a7c15 | 1 }

// v2Position is the position hash of a key hash h under multiplier m:
// y = h·m, x = y XOR (y >> 32). Multiply-shift with a random odd
// multiplier is universal for the high bits (two distinct hashes share
// their top k bits with probability at most 2/2^k), which is what chooses
// the line: keys chosen to share a line under one seed are spread under
// another, and the seed is secret. The xorshift brings high product bits
// down to the fingerprint. Both steps are bijections (see v2Unposition):
// distinct hashes never become equal.
func v2Position(h, m uint64) uint64 {
	y := h * m
	return y ^ y>>32
}

// v2Unposition inverts v2Position, given the inverse of the multiplier.
func v2Unposition(x, mInv uint64) uint64 { return (x ^ x>>32) * mInv }

// v2Pos is where a key's fingerprint may sit in one line.
type v2Pos struct {
	line   uint32
	i1, i2 uint32 // bucket indexes inside the line, i1 != i2
	ob     uint32 // overflow bit (primary positions only)
	fp     uint16 // fingerprint, of the line's width; never 0 (an empty slot)
}

// v2Primary cuts a position hash into the key's primary line, its two
// buckets there, its overflow bit and its fingerprint. The line and the
// first bucket come from the high 32 bits by multiply-shift; the second
// bucket's offset and the overflow bit from bits 16..31; the fingerprint
// from bits 0..15, which choose nothing else. The builder, MayContain and
// the FORMAT.md spec reader compute the same values.
func v2Primary(x uint64, g *v2Geom) v2Pos {
	p := uint64(uint32(x>>32)) * uint64(g.lines)
	line, rest := uint32(p>>32), uint32(p)
	s := g.shape(line)
	b := uint32(s.buckets)
	i1 := uint32((uint64(rest) * uint64(b)) >> 32)
	q := (x >> 16 & 0xffff) * uint64(b-1)
	i2 := i1 + 1 + uint32(q>>16)
	if i2 >= b {
		i2 -= b
	}
	ob := uint32(((q & 0xffff) * uint64(s.overflow)) >> 16)
	return v2Pos{line, i1, i2, ob, uint16(keyhash.Fingerprint(x, g.width(line)))}
}

// v2Secondary is where a key goes when its primary line is full: another
// line, two buckets and the fingerprint of that line's width, from a second
// mix of the position hash.
func v2Secondary(x uint64, g *v2Geom) v2Pos {
	p := v2Primary(keyhash.Mix(x, secondarySalt), g)
	p.ob = 0
	return p
}

// v2Lookup answers a lookup of key hash h (of the given kind) in block.
// isV2 is false when block has no well-formed version-2 trailer (the
// caller then tries version 1). It is one flat function, the trailer
// checks (readV2's, repeated here for speed) included, because a lookup is
// a few dozen instructions and every call costs.
func v2Lookup(block []byte, h uint64, kind HashKind) (maybe, isV2 bool) {
	n := len(block)
	if n < v2TrailerSize {
		return true, false
	}
	t := block[n-36 : n-4]
	w0 := binary.LittleEndian.Uint64(t[0:])
	w1 := binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) || w0&0xff_ffff_ffff != v2IDWord {
		return true, false
	}
	f := uint(w0>>40) & 0xff
	flags := w0 >> 56
	lines := uint64(uint32(w1))
	if f-minFPBits > maxFPBits-minFPBits || HashKind(w0>>48) != kind || flags&v2FlagAlwaysIn != 0 ||
		uint64(n) != lines*lineBytes+v2TrailerSize || lines == 0 || f == maxFPBits && flags != 0 {
		// Another kind, the always-maybe flag, or a malformed trailer.
		return true, true
	}
	wide := lines * (flags >> v2WideShift) >> 7
	x := v2Position(h, v2Multiplier(uint32(w1>>32)))

	p := (x >> 32) * lines
	line := p >> 32
	// A wide line (line < wide) has the wide width: one table load, no
	// branch.
	s := &probeShapes[(f<<1|uint((line-wide)>>63))&63]
	bb := uint64(s.bktBits)
	b := uint64(s.buckets)
	i1 := (uint64(uint32(p)) * b) >> 32
	q := (x >> 16 & 0xffff) * (b - 1)
	i2 := i1 + 1 + q>>16
	i2 -= b & uint64(int64(b-1-i2)>>63)              // i2 -= b if i2 >= b, without a branch
	fp := 1 + uint32((x&0xffff)*uint64(s.fpMax)>>16) // keyhash.Fingerprint(x, s.f)

	// Both bucket words and the overflow word are loaded before any is
	// tested, so the one cache miss serves them all. The line is viewed as
	// 72 bytes (the trailer or the next line follows it) so that each
	// 8-byte load at a byte offset inside it needs no bounds check.
	l := (*[lineBytes + 8]byte)(block[line*lineBytes:])
	o1, o2 := i1*bb, i2*bb
	bw1 := binary.LittleEndian.Uint64(l[o1>>3&(lineBytes-1):]) >> (o1 & 7)
	bw2 := binary.LittleEndian.Uint64(l[o2>>3&(lineBytes-1):]) >> (o2 & 7)
	ov := binary.LittleEndian.Uint64(l[lineBytes-8:]) >> (s.ovShift & 63)

	// The semi-sorted test of bucketHas, for both buckets at once.
	c1, c2 := bw1&0xfff, bw2&0xfff
	if c1 >= nibbleCodes || c2 >= nibbleCodes {
		return true, true // an invalid code: only in a damaged block
	}
	low := uint(s.low)
	fpn := (fp >> (low & 31)) * 0x1111
	x1 := uint32(semisort.NibblesOfCode[c1]) ^ fpn
	x2 := uint32(semisort.NibblesOfCode[c2]) ^ fpn
	eq1 := ^((x1&0x7777 + 0x7777) | x1) & 0x8888
	eq2 := ^((x2&0x7777 + 0x7777) | x2) & 0x8888
	// Usually no slot or one slot per bucket agrees on the nibble: compare
	// that slot's low bits without a branch, and take the loop of
	// lowsMatch only when a bucket has two or more candidates.
	if firstLowMatches(bw1, eq1, fp, low)|firstLowMatches(bw2, eq2, fp, low) != 0 {
		return true, true
	}
	if eq1&(eq1-1)|eq2&(eq2-1) != 0 && (lowsMatch(bw1, eq1, fp, low) || lowsMatch(bw2, eq2, fp, low)) {
		return true, true
	}
	ob := ((q & 0xffff) * uint64(s.overflow)) >> 16
	if ov>>(ob&63)&1 == 0 {
		return false, true
	}
	return v2SecondaryHas(block, x), true
}

// v2SecondaryHas probes the key's secondary line: the rare path, kept out
// of line so v2Lookup stays small. block's trailer has been verified; the
// geometry is read from it again here so that none of it has to stay live
// across the call.
//
//go:noinline
func v2SecondaryHas(block []byte, x uint64) bool {
	var h v2Header
	if !readV2(block, &h) {
		return true
	}
	geom := h.geom()
	g := &geom
	sp := v2Secondary(x, g)
	f := g.width(sp.line)
	bb := uint64(lineShapes[f].bktBits)
	base := uint64(sp.line) * lineBytes
	o1, o2 := uint64(sp.i1)*bb, uint64(sp.i2)*bb
	w1 := binary.LittleEndian.Uint64(block[base+o1>>3:]) >> (o1 & 7)
	w2 := binary.LittleEndian.Uint64(block[base+o2>>3:]) >> (o2 & 7)
	return bucketHas(w1, uint32(sp.fp), f) || bucketHas(w2, uint32(sp.fp), f)
}

// firstLowMatches is 1 when the slot of the lowest bit of eq (bit 4j+3 for
// slot j) holds fp's low bits, 0 otherwise or when eq is 0.
func firstLowMatches(w uint64, eq, fp uint32, low uint) uint64 {
	j := uint(bits.TrailingZeros32(eq|1<<16)) >> 2 // 4 when eq is 0
	d := (w>>((12+j*low)&63) ^ uint64(fp)) & (1<<(low&31) - 1)
	return (d - 1) >> 63 & uint64(((eq-1)>>31)^1)
}
