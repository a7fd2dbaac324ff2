// Package linev2 is format version 2, lines of buckets: L lines of 64
// bytes and the 40-byte trailer frame (package frame). A line is cut into
// buckets of four semi-sorted fingerprints (package bucket) and overflow
// bits; a key's two candidate buckets lie in one line, so a negative lookup
// reads one cache line (plus the trailer, which stays hot) unless its
// primary line overflowed. It holds the layout, the lookup, Decode's checks
// and the encoder; FORMAT.md has the byte diagram.
package linev2

import (
	"encoding/binary"
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// Version is the trailer's version byte.
const Version = 2

const (
	// FlagAlwaysMaybe, flags bit 0: the block answers "maybe" for every
	// key (its build fell back).
	FlagAlwaysMaybe = 1
	// Flags bits 1..7 are the share of wide lines in 128ths: lines
	// [0, L·w/128) hold fingerprints of WideWidth[f] bits, the rest f bits.
	WideShift = 1
)

// LineShape is how a 512-bit line is cut for fingerprints of f bits: B
// semi-sorted buckets of 4f-4 bits, and the O bits left over track which
// keys of the line overflowed into their secondary line.
type LineShape struct {
	Buckets  uint8 // B
	Overflow uint8 // O = 512 - B·(4f-4), at least 8
	BktBits  uint8 // 4f-4
	OvShift  uint8 // B·(4f-4) - 448: where the overflow bits start in the line's last word
}

// LineShapes[f] for f in [bucket.MinFPBits, bucket.MaxFPBits]: the most whole buckets
// that leave at least 8 overflow bits.
var LineShapes [bucket.MaxFPBits + 1]LineShape

// WideWidth[f] is the fingerprint width of the wide lines of a filter whose
// narrow lines hold f bits: the widest width whose lines hold as many
// buckets as lines of f+1 bits (f+1, except that 14-bit lines hold no more
// buckets than 15-bit ones, so f=13 pairs with 15).
var WideWidth [bucket.MaxFPBits + 1]uint8

// ProbeShape is what a lookup needs of a line's shape, in one 8-byte
// entry: ProbeShapes[2f+1] for the wide lines of a filter whose narrow
// lines hold f bits, ProbeShapes[2f] for its narrow lines.
type ProbeShape struct {
	Buckets  uint8
	BktBits  uint8
	Overflow uint8
	OvShift  uint8
	Low      uint8 // bits of each slot's low part: width - 4
	_        uint8
	FPMax    uint16 // 2^width - 1
}

var ProbeShapes [64]ProbeShape

func init() {
	for f := bucket.MinFPBits; f <= bucket.MaxFPBits; f++ {
		bb := 4*f - 4
		b := (frame.LineBits - 8) / bb
		LineShapes[f] = LineShape{
			Buckets:  uint8(b),
			Overflow: uint8(frame.LineBits - b*bb),
			BktBits:  uint8(bb),
			OvShift:  uint8(b*bb - (frame.LineBits - 64)),
		}
	}
	for f := bucket.MinFPBits; f < bucket.MaxFPBits; f++ {
		w := f + 1
		for w < bucket.MaxFPBits && LineShapes[w+1].Buckets == LineShapes[f+1].Buckets {
			w++
		}
		WideWidth[f] = uint8(w)
	}
	WideWidth[bucket.MaxFPBits] = bucket.MaxFPBits
	for f := bucket.MinFPBits; f <= bucket.MaxFPBits; f++ {
		for wide, w := range []int{f, int(WideWidth[f])} {
			ls := LineShapes[w]
			ProbeShapes[2*f+wide] = ProbeShape{Buckets: ls.Buckets, BktBits: ls.BktBits, Overflow: ls.Overflow,
				OvShift: ls.OvShift, Low: uint8(w - 4), FPMax: uint16(1<<w - 1)}
		}
	}
}

// Header is the lookup-critical part of a version-2 trailer.
type Header struct {
	FPBits uint8
	Kind   uint8
	Flags  uint8
	Lines  uint32
	Seed   uint32
}

// Geom is the header's line geometry.
func (h *Header) Geom() Geom {
	return Geom{F: uint(h.FPBits), Lines: h.Lines, Wide: WideLines(h.Lines, h.Flags>>WideShift)}
}

// WideLines is how many lines (the first ones) hold the wider
// fingerprints, for a share of w/128.
func WideLines(lines uint32, w uint8) uint32 { return uint32(uint64(lines) * uint64(w) >> 7) }

// Geom is the line geometry of a version-2 filter. Whole buckets cap the
// fingerprint width a line can hold at a given load (a 512-bit line holds 14
// buckets of f=10, but only 12 of f=11); mixing lines of two widths lets a
// budget between two widths buy the false-positive rate between them.
type Geom struct {
	F     uint   // fingerprint bits of the narrow lines
	Lines uint32 // L
	Wide  uint32 // lines [0, wide) hold WideWidth[f]-bit fingerprints
}

// Width returns the fingerprint bits of a line.
func (g *Geom) Width(line uint32) uint {
	if line < g.Wide {
		return uint(WideWidth[g.F])
	}
	return g.F
}

func (g *Geom) Shape(line uint32) *LineShape { return &LineShapes[g.Width(line)] }

// FirstBucket numbers a line's first bucket, counting the buckets of the
// lines before it (the builder's bucket array; not a byte offset).
func (g *Geom) FirstBucket(line uint32) uint32 {
	nb := uint32(LineShapes[g.F].Buckets)
	if g.Wide == 0 {
		return line * nb
	}
	wb := uint32(LineShapes[WideWidth[g.F]].Buckets)
	if line <= g.Wide {
		return line * wb
	}
	return g.Wide*wb + (line-g.Wide)*nb
}

// Put writes the trailer, all but its CRC, into t (frame.PutTrailer): byte
// 5 is f, 6 the hash kind, 7 the flags.
func (h *Header) Put(t []byte, keys uint32) {
	frame.PutTrailer(t, keys, Version, h.FPBits, h.Kind, h.Flags, h.Lines, h.Seed)
}

// Read decodes the trailer of a version-2 block. ok is false when the
// block is not a well-formed version-2 block: too short, the two copies
// disagree, wrong magic or version, a field out of range, or a length other
// than the one the fields imply. It does not allocate and runs on every
// lookup.
func Read(block []byte, h *Header) bool {
	n := len(block)
	w0, w1, ok := frame.ReadTrailer(block, Version)
	if !ok {
		return false
	}
	h.FPBits, h.Kind, h.Flags = uint8(w0>>40), uint8(w0>>48), uint8(w0>>56)
	h.Lines, h.Seed = uint32(w1), uint32(w1>>32)
	if h.FPBits-bucket.MinFPBits > bucket.MaxFPBits-bucket.MinFPBits || h.Kind > frame.HashHost32 || h.FPBits == bucket.MaxFPBits && h.Flags>>WideShift != 0 {
		return false
	}
	if h.Flags&FlagAlwaysMaybe != 0 {
		return h.Flags == FlagAlwaysMaybe && h.Lines == 0 && n == frame.TrailerSize
	}
	return h.Lines > 0 && uint64(n) == uint64(h.Lines)*frame.LineBytes+frame.TrailerSize
}

var idWord = frame.IDWord(Version)

// Pos is where a key's fingerprint may sit in one line.
type Pos struct {
	Line   uint32
	I1, I2 uint32 // bucket indexes inside the line, i1 != i2
	OB     uint32 // overflow bit (primary positions only)
	fp     uint16 // fingerprint, of the line's width; never 0 (an empty slot)
}

// Primary cuts a position hash into the key's primary line, its two
// buckets there, its overflow bit and its fingerprint. The line and the
// first bucket come from the high 32 bits by multiply-shift; the second
// bucket's offset and the overflow bit from bits 16..31; the fingerprint
// from bits 0..15, which choose nothing else. The builder, MayContain and
// the FORMAT.md spec reader compute the same values.
func Primary(x uint64, g *Geom) Pos {
	p := uint64(uint32(x>>32)) * uint64(g.Lines)
	line, rest := uint32(p>>32), uint32(p)
	s := g.Shape(line)
	b := uint32(s.Buckets)
	i1 := uint32((uint64(rest) * uint64(b)) >> 32)
	q := (x >> 16 & 0xffff) * uint64(b-1)
	i2 := i1 + 1 + uint32(q>>16)
	if i2 >= b {
		i2 -= b
	}
	ob := uint32(((q & 0xffff) * uint64(s.Overflow)) >> 16)
	return Pos{line, i1, i2, ob, uint16(keyhash.Fingerprint(x, g.Width(line)))}
}

// Secondary is where a key goes when its primary line is full: another
// line, two buckets and the fingerprint of that line's width, from a second
// mix of the position hash.
func Secondary(x uint64, g *Geom) Pos {
	p := Primary(keyhash.Mix(x, frame.SecondarySalt), g)
	p.OB = 0
	return p
}

// Lookup answers a lookup of key hash h (of the given kind) in block.
// isV2 is false when block has no well-formed version-2 trailer (the
// caller then tries version 1). It is one flat function, the trailer
// checks (Read's, repeated here for speed) included, because a lookup is
// a few dozen instructions and every call costs.
func Lookup(block []byte, h uint64, kind uint8) (maybe, isV2 bool) {
	n := len(block)
	if n < frame.TrailerSize {
		return true, false
	}
	t := block[n-36 : n-4]
	w0 := binary.LittleEndian.Uint64(t[0:])
	w1 := binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) || w0&0xff_ffff_ffff != idWord {
		return true, false
	}
	f := uint(w0>>40) & 0xff
	flags := w0 >> 56
	lines := uint64(uint32(w1))
	if f-bucket.MinFPBits > bucket.MaxFPBits-bucket.MinFPBits || uint8(w0>>48) != kind || flags&FlagAlwaysMaybe != 0 ||
		uint64(n) != lines*frame.LineBytes+frame.TrailerSize || lines == 0 || f == bucket.MaxFPBits && flags != 0 {
		// Another kind, the always-maybe flag, or a malformed trailer.
		return true, true
	}
	wide := lines * (flags >> WideShift) >> 7
	x := frame.Position(h, frame.Multiplier(uint32(w1>>32)))

	p := (x >> 32) * lines
	line := p >> 32
	// A wide line (line < wide) has the wide width: one table load, no
	// branch.
	s := &ProbeShapes[(f<<1|uint((line-wide)>>63))&63]
	bb := uint64(s.BktBits)
	b := uint64(s.Buckets)
	i1 := (uint64(uint32(p)) * b) >> 32
	q := (x >> 16 & 0xffff) * (b - 1)
	i2 := i1 + 1 + q>>16
	i2 -= b & uint64(int64(b-1-i2)>>63)              // i2 -= b if i2 >= b, without a branch
	fp := 1 + uint32((x&0xffff)*uint64(s.FPMax)>>16) // keyhash.Fingerprint(x, s.F)

	// Both bucket words and the overflow word are loaded before any is
	// tested, so the one cache miss serves them all. The line is viewed as
	// 72 bytes (the trailer or the next line follows it) so that each
	// 8-byte load at a byte offset inside it needs no bounds check.
	l := (*[frame.LineBytes + 8]byte)(block[line*frame.LineBytes:])
	o1, o2 := i1*bb, i2*bb
	bw1 := binary.LittleEndian.Uint64(l[o1>>3&(frame.LineBytes-1):]) >> (o1 & 7)
	bw2 := binary.LittleEndian.Uint64(l[o2>>3&(frame.LineBytes-1):]) >> (o2 & 7)
	ov := binary.LittleEndian.Uint64(l[frame.LineBytes-8:]) >> (s.OvShift & 63)

	// The semi-sorted test of bucket.Has, for both buckets at once.
	c1, c2 := bw1&0xfff, bw2&0xfff
	if c1 >= bucket.NibbleCodes || c2 >= bucket.NibbleCodes {
		return true, true // an invalid code: only in a damaged block
	}
	low := uint(s.Low)
	fpn := (fp >> (low & 31)) * 0x1111
	x1 := uint32(semisort.NibblesOfCode[c1]) ^ fpn
	x2 := uint32(semisort.NibblesOfCode[c2]) ^ fpn
	eq1 := ^((x1&0x7777 + 0x7777) | x1) & 0x8888
	eq2 := ^((x2&0x7777 + 0x7777) | x2) & 0x8888
	// Usually no slot or one slot per bucket agrees on the nibble: compare
	// that slot's low bits without a branch, and take the loop of
	// lowsMatch only when a bucket has two or more candidates.
	if bucket.FirstLowMatches(bw1, eq1, fp, low)|bucket.FirstLowMatches(bw2, eq2, fp, low) != 0 {
		return true, true
	}
	if eq1&(eq1-1)|eq2&(eq2-1) != 0 && (bucket.LowsMatch(bw1, eq1, fp, low) || bucket.LowsMatch(bw2, eq2, fp, low)) {
		return true, true
	}
	ob := ((q & 0xffff) * uint64(s.Overflow)) >> 16
	if ov>>(ob&63)&1 == 0 {
		return false, true
	}
	return secondaryHas(block, x), true
}

// secondaryHas probes the key's secondary line: the rare path, kept out
// of line so Lookup stays small. block's trailer has been verified; the
// geometry is read from it again here so that none of it has to stay live
// across the call.
//
//go:noinline
func secondaryHas(block []byte, x uint64) bool {
	var h Header
	if !Read(block, &h) {
		return true
	}
	geom := h.Geom()
	g := &geom
	sp := Secondary(x, g)
	f := g.Width(sp.Line)
	bb := uint64(LineShapes[f].BktBits)
	base := uint64(sp.Line) * frame.LineBytes
	o1, o2 := uint64(sp.I1)*bb, uint64(sp.I2)*bb
	w1 := binary.LittleEndian.Uint64(block[base+o1>>3:]) >> (o1 & 7)
	w2 := binary.LittleEndian.Uint64(block[base+o2>>3:]) >> (o2 & 7)
	return bucket.Has(w1, uint32(sp.fp), f) || bucket.Has(w2, uint32(sp.fp), f)
}

// Info is what Decode reports of a version-2 block.
type Info struct {
	frame.Common
	Lines           int
	WideLines       int
	Buckets         int
	FingerprintBits int // of the narrow lines
	Load            float64
}

// Decode verifies a whole version-2 block whose trailer Read accepted into
// h: the CRC-32C, every bucket's code and canonical order, and that the
// stored fingerprints number exactly the trailer's keys.
func Decode(block []byte, h *Header) (Info, error) {
	c, err := frame.DecodeTrailer(block, h.Kind, h.Seed, h.Flags == FlagAlwaysMaybe)
	if err != nil {
		return Info{}, err
	}
	info := Info{Common: c, Lines: int(h.Lines), FingerprintBits: int(h.FPBits)}
	if c.AlwaysMaybe {
		return info, nil
	}
	keys := c.Keys
	g := h.Geom()
	stored := uint64(0)
	for ln := uint32(0); ln < h.Lines; ln++ {
		f := g.Width(ln)
		s := &LineShapes[f]
		bb := uint64(s.BktBits)
		for i := uint64(0); i < uint64(s.Buckets); i++ {
			c, err := bucket.Check(bitpack.Read(block, uint64(ln)*frame.LineBits+i*bb, uint(bb)), f)
			if err != nil {
				return Info{}, fmt.Errorf("%w: line %d bucket %d: %s", frame.ErrCorrupt, ln, i, err)
			}
			stored += uint64(c)
		}
	}
	if stored != uint64(keys) {
		return Info{}, fmt.Errorf("%w: %d fingerprints, trailer says %d keys", frame.ErrCorrupt, stored, keys)
	}
	info.Buckets = int(g.FirstBucket(h.Lines))
	info.WideLines = int(g.Wide)
	info.Load = float64(keys) / (bucket.Slots * float64(info.Buckets))
	wide := float64(g.Wide) / float64(h.Lines)
	info.ExpectedFPR = (1 - wide) * bucket.ExpectedFPR(g.F, info.Load)
	if g.Wide > 0 {
		info.ExpectedFPR += wide * bucket.ExpectedFPR(uint(WideWidth[g.F]), info.Load)
	}
	return info, nil
}
