// Package linev4 is format version 4, retrieval lines: like versions 2
// and 3, L lines of 64 bytes and the 40-byte trailer frame (package
// frame), a key lives in its primary line or, when that line overflowed,
// in its secondary line, and a threshold in each line says which of its
// keys may have left. A line stores no fingerprints: it is the solution
// of a system of linear equations over GF(2), one per key stored in it.
// Each key has an m-bit coefficient vector c and a fingerprint f; the
// line holds r columns of m bits, and a key may be in the line iff, for
// every column j, the parity of c AND column j is bit j of f. The keys of
// a line are independent equations, so the line holds up to m of them in
// r·m bits, and an absent key matches every column with probability
// 2^-r: the line spends about r bits per key where a quotient filter
// spends r plus its header's two (the construction of the retrieval
// filters in "Fast Succinct Retrieval and Membership Using Ribbons",
// with the bumping of its buckets, confined to a cache line). An extra
// column of the line's spare bits checks one more fingerprint bit of a
// share of the keys: the rate moves in fine steps with the budget instead
// of halving with each column.
//
// The package holds the layout, the lookup, Decode's checks, the planner
// and the encoder; FORMAT.md has the byte diagram.
package linev4

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Version is the trailer's version byte.
const Version = 4

const (
	// MaxHeight is the most rows a column has: a column is at most two
	// 64-bit words, and a key's coefficients two words of its hash (the
	// second only for columns of more than 64 rows).
	MaxHeight = 128
	// MaxColumns is the most full columns a line has: a fingerprint has
	// 32 bits, for the full columns and the extra column.
	MaxColumns = 31
	// MaxExtra is the most rows the extra column has: its coefficients
	// stay clear of the coefficient word's top 16 bits, which are
	// fingerprint bits 16..31 (only used when the full columns have at
	// most 31 rows).
	MaxExtra = 48
	// ThresholdBits is the width of each line's threshold field, at the
	// top of the line.
	ThresholdBits = 6
	// NoThreshold is the threshold of a line none of whose keys left:
	// priorities are below it.
	NoThreshold = 1<<ThresholdBits - 1
	// ColumnBits is the room the columns have in a line.
	ColumnBits = frame.LineBits - ThresholdBits
	// Byte 5 of the trailer: bits 0..4 r, bit 5 the hash kind, bit 6
	// always maybe, bit 7 seeded lines.
	KindShift       = 5
	FlagAlwaysMaybe = 1 << 6
	FlagSeededLines = 1 << 7
	// LineMultiplier is the fixed line hash's odd multiplier (version 3's:
	// the primary line needs nothing from the trailer).
	LineMultiplier = 0xd6e8_feb8_6659_fd93
	// CoefficientSalt derives a key's coefficients from its position hash:
	// rows 0..63, and with CoefficientSalt2 rows 64..127.
	CoefficientSalt  = 0xc0ef_f1c1
	CoefficientSalt2 = 0xc0ef_f1c2
)

// Shape is how every line of a version-4 filter is cut.
type Shape struct {
	R uint32 // full columns: fingerprint bits every key is checked on, 1..31
	M uint32 // rows of each column, 1..128: coefficient bits
	// U, 0..255: a key whose share byte is below U is also checked on the
	// extra column, of Extra() rows, in the bits the full columns leave.
	U uint32
}

// Extra is the extra column's rows: the bits the full columns leave,
// at most MaxExtra; 0 when U is 0.
func (s Shape) Extra() uint32 {
	if s.U == 0 {
		return 0
	}
	return min(MaxExtra, ColumnBits-s.R*s.M)
}

// Valid reports whether the shape fits a line.
func (s Shape) Valid() bool {
	return s.R-1 < MaxColumns && s.M-1 < MaxHeight && s.U < 256 && s.R*s.M <= ColumnBits &&
		(s.U == 0 || s.R*s.M < ColumnBits)
}

// Header is a version-4 trailer's fields.
type Header struct {
	Shape       Shape
	Kind        uint8
	AlwaysMaybe bool
	SeededLines bool
	Lines, Seed uint32
}

// Put writes the trailer, all but its CRC, into t (frame.PutTrailer):
// byte 5 holds r, the hash kind and the flags, bytes 6 and 7 M and U.
func (h *Header) Put(t []byte, keys uint32) {
	b5 := byte(h.Shape.R) | h.Kind<<KindShift
	if h.AlwaysMaybe {
		b5 |= FlagAlwaysMaybe
	}
	if h.SeededLines {
		b5 |= FlagSeededLines
	}
	frame.PutTrailer(t, keys, Version, b5, byte(h.Shape.M), byte(h.Shape.U), h.Lines, h.Seed)
}

// Read decodes the trailer of a version-4 block. ok is false when the
// block is not a well-formed version-4 block: too short, the two copies
// disagree, wrong magic or version, a field out of range, or a length other
// than the one the fields imply.
func Read(block []byte, h *Header) bool {
	w0, w1, ok := frame.ReadTrailer(block, Version)
	if !ok {
		return false
	}
	return parse(w0, w1, len(block), h)
}

// parse fills h from the trailer's id words of a block of n bytes and
// reports whether they describe a well-formed block.
func parse(w0, w1 uint64, n int, h *Header) bool {
	b5 := uint8(w0 >> 40)
	h.Shape = Shape{R: uint32(b5 & 31), M: uint32(uint8(w0 >> 48)), U: uint32(uint8(w0 >> 56))}
	h.Kind = b5 >> KindShift & 1
	h.AlwaysMaybe = b5&FlagAlwaysMaybe != 0
	h.SeededLines = b5&FlagSeededLines != 0
	h.Lines, h.Seed = uint32(w1), uint32(w1>>32)
	if h.AlwaysMaybe {
		return b5 == FlagAlwaysMaybe|h.Kind<<KindShift && h.Shape == Shape{} && h.Lines == 0 && n == frame.TrailerSize
	}
	return h.Shape.Valid() && h.Lines > 0 && uint64(n) == uint64(h.Lines)*frame.LineBytes+frame.TrailerSize
}

// Line is the line of line hash z in a filter of lines lines: its high
// 32 bits by multiply-shift. A key's primary line hash is its key hash
// under the fixed multiplier (frame.Position(h, LineMultiplier)), so a
// lookup loads the line while it reads the trailer; under the flag
// FlagSeededLines, and always for the secondary line, it is the seeded
// position hash.
func Line(z, lines uint64) uint64 { return (z >> 32) * lines >> 32 }

// Parts are what a key's position hash x says inside a line: the
// fingerprint f (bit j for full column j, bit r for the extra column),
// the share byte u, the priority p and the coefficients c. None shares a
// hash bit with another or with the line (bits 32..63): f's bits 16..31
// are c's top 16 bits, which are coefficients of no column (a shape with
// more than 16 columns has at most 31 rows, and the extra column at most
// MaxExtra).
type Parts struct {
	F, U, P, C uint64
	X          uint64 // the position hash, whose second coefficient word a column of over 64 rows needs
}

// PartsOf is Parts of position hash x: f bits 0..15 from x's bits
// 0..15, u bits 16..23, p from bits 24..31 by multiply-shift onto [0,
// NoThreshold), c a mix of x, and f bits 16..31 c's bits 48..63.
func PartsOf(x uint64) Parts { return partsMixed(x, keyhash.Mix(x, CoefficientSalt)) }

// partsMixed is PartsOf(x) for c = keyhash.Mix(x, CoefficientSalt), which
// the encoder mixes a key ahead of its elimination.
func partsMixed(x, c uint64) Parts {
	return Parts{F: x&0xffff | c>>48<<16, U: x >> 16 & 0xff, P: (x >> 24 & 0xff) * NoThreshold >> 8, C: c, X: x}
}

// Priority is PartsOf(x).P alone.
func Priority(x uint64) uint64 { return (x >> 24 & 0xff) * NoThreshold >> 8 }

// Secondary is the position hash that places a key of position hash x in
// its secondary line (its line, and its parts there).
func Secondary(x uint64) uint64 { return keyhash.Mix(x, frame.SecondarySalt) }

// Threshold is the line's threshold field.
func Threshold(l []byte) uint64 {
	return binary.LittleEndian.Uint64(l[frame.LineBytes-8:]) >> (64 - ThresholdBits)
}

// LineHas reports whether the line l (64 bytes and at least 8 after it:
// the next line or the trailer) solves the equations of a key of parts k:
// every full column, and, in the key's primary line (primary true), the
// extra column when the key's share byte is below U. A key's equation in
// its secondary line leaves the extra column out: the few keys a line
// receives from their secondary line are the ones it must hold, and the
// extra column's small system could contradict them.
func LineHas(l []byte, k *Parts, s *Shape, primary bool) bool {
	// Column by column, stopping at the first that fails: an absent key
	// fails each with probability 1/2, so a negative lookup reads two
	// columns on average, whatever r.
	if s.M > 64 {
		c1 := keyhash.Mix(k.X, CoefficientSalt2) & mask(s.M-64)
		for j, f := uint32(0), k.F; j < s.R; j, f = j+1, f>>1 {
			v := bits.OnesCount64(k.C&field(l, j*s.M, 64)) + bits.OnesCount64(c1&field(l, j*s.M+64, s.M-64))
			if uint64(v)&1 != f&1 {
				return false
			}
		}
	} else {
		c := k.C & mask(s.M)
		for j, f := uint32(0), k.F; j < s.R; j, f = j+1, f>>1 {
			if uint64(bits.OnesCount64(c&field(l, j*s.M, s.M)))&1 != f&1 {
				return false
			}
		}
	}
	if !primary || k.U >= uint64(s.U) {
		return true
	}
	e := s.Extra()
	return uint64(bits.OnesCount64(k.C&field(l, s.R*s.M, e))&1) == k.F>>s.R&1
}

// field is the n-bit field (n ≤ 64) at bit off (< 512) of line l, which
// must have 8 bytes after the field's first byte, and 16 for a field
// longer than 57 bits: one load from the field's first byte holds 57 of
// its bits from any offset.
func field(l []byte, off, n uint32) uint64 {
	i, sh := off>>3&63, off&7
	v := binary.LittleEndian.Uint64(l[i:]) >> sh
	if n+sh > 64 {
		v |= uint64(l[i+8]) << (64 - sh)
	}
	return v & mask(n)
}

// mask is the n low bits (all 64 for n ≥ 64).
func mask(n uint32) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return ^uint64(0) >> (64 - n)
}

// Lookup answers a lookup of key hash h (of the given kind) in block.
// isV4 is false when block has no well-formed version-4 trailer.
//
// It is the lookup of every well-formed block, written for a loop
// of lookups: the trailer's fields are checked as words, a column is read
// from the 9 bytes at its first byte with one shift and no mask (the
// key's coefficients are masked once), and columns are compared four at a
// time, their mismatches ORed, so that an absent key, which fails a
// column with probability 1/2, takes one well-predicted branch where a
// column-by-column loop mispredicted about once per lookup. Everything
// else (an always-maybe block, a hash kind not asked, a trailer out of range)
// goes to lookupAnyShape, the column-by-column reference: it answers
// those maybe, or reports the block not version 4's.
func Lookup(block []byte, h uint64, kind uint8) (maybe, isV4 bool) {
	n := uint64(len(block))
	w0, w1, ok := frame.ReadTrailer(block, Version)
	if !ok {
		return true, false
	}
	b5 := w0 >> 40 & 0xff
	r, m, u := b5&31, w0>>48&0xff, w0>>56
	lines := w1 & 0xffff_ffff
	// Byte 5's hash-kind bit is the kind asked for and the always-maybe
	// bit is clear; the shape is Valid;
	// the length is exactly the lines' and the trailer's.
	if b5>>KindShift&3 != uint64(kind) || r-1 >= MaxColumns || m-1 >= MaxHeight || r*m > ColumnBits ||
		(u != 0 && r*m == ColumnBits) || lines == 0 || n != lines*frame.LineBytes+frame.TrailerSize {
		return lookupAnyShape(block, h, kind)
	}
	x := frame.Position(h, frame.Multiplier(uint32(w1>>32)))
	z := frame.Position(h, LineMultiplier)
	if b5&FlagSeededLines != 0 {
		z = x
	}
	l := window(block, Line(z, lines))
	c := keyhash.Mix(x, CoefficientSalt)
	f := x&0xffff | c>>48<<16
	if solves(l, x, c, f, r, m) {
		if x>>16&0xff >= u {
			return true, true
		}
		// The extra column, in the key's primary line only: its rows
		// are c's low bits.
		e := min(MaxExtra, ColumnBits-r*m)
		if uint64(bits.OnesCount64(c&column(l, r*m)&mask64(e)))&1 == f>>r&1 {
			return true, true
		}
	}
	if (x>>24&0xff)*NoThreshold>>8 < binary.LittleEndian.Uint64(l[frame.LineBytes-8:])>>(64-ThresholdBits) {
		return false, true
	}
	x2 := Secondary(x)
	c2 := keyhash.Mix(x2, CoefficientSalt)
	return solves(window(block, Line(x2, lines)), x2, c2, x2&0xffff|c2>>48<<16, r, m), true
}

// windowBytes is a line and the 40 bytes after it (the next lines, or
// the trailer), which every line of a well-formed block has.
const windowBytes = frame.LineBytes + frame.TrailerSize

// window is line ln of block, with the bytes after it that column reads.
func window(block []byte, ln uint64) *[windowBytes]byte {
	off := ln * frame.LineBytes
	return (*[windowBytes]byte)(block[off : off+windowBytes])
}

// column is the 64 bits of line l from bit off (< ColumnBits): one load
// from the bit's byte and the byte after those 8 for the bits the shift
// pushed out; the caller masks the rows it needs.
func column(l *[windowBytes]byte, off uint64) uint64 {
	i, sh := off>>3&63, off&7
	return binary.LittleEndian.Uint64(l[i:])>>sh | uint64(l[i+8])<<(64-sh)
}

// solves reports whether line l solves the equations of a key of
// position hash x on its r full columns of m rows: coefficients c (rows
// 0..63; rows 64.. from keyhash.Mix(x, CoefficientSalt2)), fingerprint
// bit j for column j.
func solves(l *[windowBytes]byte, x, c, f, r, m uint64) bool {
	var miss uint64
	if m > 64 {
		c1 := keyhash.Mix(x, CoefficientSalt2) & mask64(m-64)
		for j, off := uint64(0), uint64(0); j < r; j, off = j+1, off+m {
			miss |= uint64(bits.OnesCount64(c&column(l, off))^bits.OnesCount64(c1&column(l, off+64))) ^ f>>j
			if j&3 == 3 && miss&1 != 0 {
				return false
			}
		}
		return miss&1 == 0
	}
	c &= mask64(m)
	for j, off := uint64(0), uint64(0); j < r; j, off = j+1, off+m {
		miss |= uint64(bits.OnesCount64(c&column(l, off))) ^ f>>j
		if j&3 == 3 && miss&1 != 0 {
			return false
		}
	}
	return miss&1 == 0
}

// mask64 is the n low bits, 1 ≤ n ≤ 64.
func mask64(n uint64) uint64 { return ^uint64(0) >> (64 - n) }

// lookupAnyShape is Lookup for every version-4 trailer, column by column
// (LineHas): the reference Lookup's fast path is held to, and the lookup
// of shapes it leaves out.
func lookupAnyShape(block []byte, h uint64, kind uint8) (maybe, isV4 bool) {
	n := len(block)
	w0, w1, ok := frame.ReadTrailer(block, Version)
	if !ok {
		return true, false
	}
	var hd Header
	if !parse(w0, w1, n, &hd) || hd.AlwaysMaybe || hd.Kind != kind {
		return true, true
	}
	lines := uint64(hd.Lines)
	x := frame.Position(h, frame.Multiplier(hd.Seed))
	z := frame.Position(h, LineMultiplier)
	if hd.SeededLines {
		z = x
	}
	l := block[Line(z, lines)*frame.LineBytes:]
	k := PartsOf(x)
	if LineHas(l, &k, &hd.Shape, true) {
		return true, true
	}
	if k.P < Threshold(l) {
		return false, true
	}
	x2 := Secondary(x)
	k2 := PartsOf(x2)
	return LineHas(block[Line(x2, lines)*frame.LineBytes:], &k2, &hd.Shape, false), true
}

// Info is what Decode reports of a version-4 block.
type Info struct {
	frame.Common
	Lines       int
	Shape       Shape
	SeededLines bool
	Load        float64 // keys over the lines' rows, Lines·M
}

// Decode verifies a whole version-4 block whose trailer Read accepted into
// h: the CRC-32C and every line's unused bits (zero). A line's columns
// are any bits: unlike a fingerprint table, nothing in them can be
// malformed, so damage inside a line is the CRC's to find.
func Decode(block []byte, h *Header) (Info, error) {
	c, err := frame.DecodeTrailer(block, h.Kind, h.Seed, h.AlwaysMaybe)
	if err != nil {
		return Info{}, err
	}
	s := h.Shape
	info := Info{Common: c, Lines: int(h.Lines), Shape: s, SeededLines: h.SeededLines}
	if c.AlwaysMaybe {
		return info, nil
	}
	used := s.R*s.M + s.Extra()
	for ln := 0; ln < int(h.Lines); ln++ {
		l := block[ln*frame.LineBytes:]
		for off := used; off < ColumnBits; off += 64 {
			if v := field(l, off, min(64, ColumnBits-off)); v != 0 {
				return Info{}, fmt.Errorf("%w: line %d: bits set past the columns", frame.ErrCorrupt, ln)
			}
		}
	}
	lam := float64(c.Keys) / float64(h.Lines)
	info.Load = lam / float64(s.M)
	info.ExpectedFPR = ExpectedFPR(s, lam, 0)
	return info, nil
}
