// Package linev3 is format version 3, quotient lines: like version 2, L
// lines of 64 bytes and the 40-byte trailer frame (package frame), and a
// key lives in its primary line or, when that line overflowed, in its
// secondary line. A line is not cut into buckets: it is a small quotient
// filter. Each key of a line has a quotient in [0, Q) and an r-bit
// remainder; the line stores, in a unary header, how many keys hold each
// quotient, and their remainders in quotient order. A key may be in the
// line iff a remainder of its quotient's run equals its own, so the
// false-positive rate is the run's length over 2^r, about (keys per
// line)/(Q·2^r): the header spends about 1 + Q/K bits per key where
// version 2's buckets spent them on slots that may stay empty and on two
// candidate buckets. A line overflows only as a whole (it holds K keys,
// whatever their quotients), and it records as one threshold T which of
// its keys may have left: those whose quotient is T or more. A negative
// lookup reads a second line only when its quotient is at least T.
//
// The package holds the layout, the lookup (with its amd64 assembly
// probe), Decode's checks, the planner and the encoder; FORMAT.md has the
// byte diagram.
package linev3

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Version is the trailer's version byte.
const Version = 3

const (
	// HeaderMax bounds Q+K, so that the unary header lies in a line's
	// first three 64-bit words.
	HeaderMax = 192
	// MaxRun is the longest run of one quotient a line may hold: a
	// lookup reads a run's length from one unaligned 8-byte load (57 bits
	// from any bit offset). Only keys aimed at a known seed come near it.
	MaxRun = 56
	// Byte 5 of the trailer: bits 0..4 r, bit 5 the hash kind, bit 6 always
	// maybe, bit 7 seeded lines.
	KindShift       = 5
	FlagAlwaysMaybe = 1 << 6
	// FlagSeededLines: the primary line comes from the seeded position
	// hash, not from the fixed line hash (see Line). The builder sets
	// it only when keys crowd lines under the fixed hash, which only keys
	// chosen against that hash do.
	FlagSeededLines = 1 << 7
	// LineMultiplier is the line hash's fixed odd multiplier.
	LineMultiplier = 0xd6e8_feb8_6659_fd93
)

// Shape is how every line of a version-3 filter is cut.
type Shape struct {
	R uint32 // remainder bits, 1..16
	K uint32 // capacity: keys a line holds
	Q uint32 // quotients
}

// TBits is the width of the line's threshold field: T is in [0, Q].
func (s Shape) TBits() uint32 { return uint32(bits.Len32(s.Q)) }

// RemOff is the line bit where the remainders start, after the header.
func (s Shape) RemOff() uint32 { return s.Q + s.K }

// Valid reports whether the shape fits a line: the header in three words,
// and header, remainders and threshold in 512 bits.
func (s Shape) Valid() bool {
	return s.R-1 < 16 && s.K >= 1 && s.Q >= 1 && s.Q+s.K <= HeaderMax &&
		uint64(s.Q)+uint64(s.K)+uint64(s.K)*uint64(s.R)+uint64(s.TBits()) <= frame.LineBits
}

// Header is a version-3 trailer's fields.
type Header struct {
	Shape       Shape
	Kind        uint8
	AlwaysMaybe bool
	SeededLines bool
	Lines, Seed uint32
}

// IDWord is the low 40 bits of the trailer's first id word: magic and
// version 3. A variable, so that the assembly probe can compare with it.
var IDWord = frame.IDWord(Version)

// Put writes the trailer, all but its CRC, into t (frame.PutTrailer):
// byte 5 holds r, the hash kind and the flags, bytes 6 and 7 K and Q.
func (h *Header) Put(t []byte, keys uint32) {
	b5 := byte(h.Shape.R) | h.Kind<<KindShift
	if h.AlwaysMaybe {
		b5 |= FlagAlwaysMaybe
	}
	if h.SeededLines {
		b5 |= FlagSeededLines
	}
	frame.PutTrailer(t, keys, Version, b5, byte(h.Shape.K), byte(h.Shape.Q), h.Lines, h.Seed)
}

// Read decodes the trailer of a version-3 block. ok is false when the
// block is not a well-formed version-3 block: too short, the two copies
// disagree, wrong magic or version, a field out of range, or a length other
// than the one the fields imply.
func Read(block []byte, h *Header) bool {
	n := len(block)
	w0, w1, ok := frame.ReadTrailer(block, Version)
	if !ok {
		return false
	}
	b5 := uint8(w0 >> 40)
	h.Shape = Shape{R: uint32(b5 & 31), K: uint32(uint8(w0 >> 48)), Q: uint32(uint8(w0 >> 56))}
	h.Kind = uint8(b5 >> KindShift & 1)
	h.AlwaysMaybe = b5&FlagAlwaysMaybe != 0
	h.SeededLines = b5&FlagSeededLines != 0
	h.Lines, h.Seed = uint32(w1), uint32(w1>>32)
	if h.AlwaysMaybe {
		return b5 == FlagAlwaysMaybe|byte(h.Kind)<<KindShift && h.Shape == Shape{} && h.Lines == 0 && n == frame.TrailerSize
	}
	return h.Shape.Valid() && h.Lines > 0 && uint64(n) == uint64(h.Lines)*frame.LineBytes+frame.TrailerSize
}

// Line is the line of line hash z in a filter of lines lines: its high
// 32 bits by multiply-shift. A key's primary line hash is its key hash
// under a fixed multiplier (frame.Position(h, LineMultiplier)), which needs
// nothing from the block: a lookup computes the line from the key and the
// block's length alone, and loads it while it loads and checks the
// trailer, so the two cache misses of a cold lookup overlap instead of
// following one another. (Under the flag FlagSeededLines, and always
// for the secondary line, the line hash is the seeded position hash.)
func Line(z, lines uint64) uint64 { return (z >> 32) * lines >> 32 }

// QR is the quotient and remainder of position hash x (seeded): the
// quotient from bits 16..31 by multiply-shift, the remainder the low r
// bits. Neither shares a bit with the line, nor with each other.
func QR(x uint64, s *Shape) (q, r uint64) {
	return (x >> 16 & 0xffff) * uint64(s.Q) >> 16, x & (1<<s.R - 1)
}

// Lookup answers a lookup of key hash h (of the given kind) in block.
// isV3 is false when block has no well-formed version-3 trailer (the
// caller then tries the older versions). It is one flat function, the
// trailer checks (Read's) and the primary line's probe (LineHas's)
// written out, because a lookup is a few dozen instructions and every call
// costs.
func Lookup(block []byte, h uint64, kind uint8) (maybe, isV3 bool) {
	n := len(block)
	if n < frame.TrailerSize {
		return true, false
	}
	// The line first, from the key and the block's length: its load does
	// not wait for the trailer's.
	var l *[frame.LineBytes + 8]byte
	if n >= frame.LineBytes+frame.TrailerSize {
		l = (*[frame.LineBytes + 8]byte)(block[Line(frame.Position(h, LineMultiplier), uint64(n-frame.TrailerSize)/frame.LineBytes)*frame.LineBytes:])
	}
	t := block[n-36 : n-4]
	w0 := binary.LittleEndian.Uint64(t[0:])
	w1 := binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) || w0&0xff_ffff_ffff != IDWord {
		return true, false
	}
	b5 := w0 >> 40 & 0xff
	r := b5 & 31
	k := w0 >> 48 & 0xff
	nq := w0 >> 56
	tb := uint64(bits.Len64(nq))
	lines := uint64(uint32(w1))
	// b5>>5&3 holds the kind and the always-maybe flag: one compare checks
	// both. The rest is Shape.valid.
	if b5>>KindShift&3 != uint64(kind) || r-1 >= 16 || k == 0 || nq == 0 || nq+k > HeaderMax ||
		nq+k+k*r+tb > frame.LineBits || uint64(n) != lines*frame.LineBytes+frame.TrailerSize || lines == 0 {
		return true, true
	}
	x := frame.Position(h, frame.Multiplier(uint32(w1>>32)))
	if b5&FlagSeededLines != 0 {
		l = (*[frame.LineBytes + 8]byte)(block[Line(x, lines)*frame.LineBytes:])
	}
	q := (x >> 16 & 0xffff) * nq >> 16
	rem := x & (1<<r - 1)

	// LineHas, written out.
	h0 := binary.LittleEndian.Uint64(l[0:])
	h1 := binary.LittleEndian.Uint64(l[8:])
	h2 := binary.LittleEndian.Uint64(l[16:])
	thr := binary.LittleEndian.Uint64(l[frame.LineBytes-8:]) >> (64 - tb)
	pos := uint64(0)
	if q > 0 {
		// The word holding the zero, chosen by masks rather than
		// branches: which word it is depends on the key, so a branch
		// would be mispredicted about every other lookup.
		c0 := uint64(bits.OnesCount64(^h0))
		c01 := c0 + uint64(bits.OnesCount64(^h1))
		j := q - 1
		m1 := uint64(int64(c0-1-j) >> 63)  // all ones when the zero is past word 0
		m2 := uint64(int64(c01-1-j) >> 63) // all ones when it is past word 1
		w := ^h0&^m1 | ^h1&m1&^m2 | ^h2&m2
		base := 64&m1 + 64&m2
		jj := j - c0&(m1&^m2) - c01&m2
		// select64(w, jj), written out.
		const ones8, high8 = 0x0101_0101_0101_0101, 0x8080_8080_8080_8080
		s := w - w>>1&0x5555_5555_5555_5555
		s = s&0x3333_3333_3333_3333 + s>>2&0x3333_3333_3333_3333
		s = (s + s>>4) & 0x0f0f_0f0f_0f0f_0f0f
		s *= ones8
		if jj >= s>>56 {
			return true, true // fewer zeros than quotients: not a block we wrote
		}
		b := uint64(bits.OnesCount64((jj*ones8 | high8 - s) & high8))
		before := (s << 8) >> (b << 3 & 63) & 0xff
		pos = base + b<<3 + uint64(selectByte[(w>>(b<<3&63))&0xff<<3|(jj-before)&7]) + 1
	}
	run := uint64(bits.TrailingZeros64(^(binary.LittleEndian.Uint64(l[pos>>3&31:]) >> (pos & 7))))
	// The run must end inside the header, its slots inside the capacity,
	// and its length within MaxRun (the load holds 57 bits past pos, so
	// a longer run cannot be measured): otherwise the line is not one we
	// wrote.
	if pos+run >= nq+k || pos-q+run > k || run > MaxRun {
		return true, true
	}
	off := nq + k + (pos-q)*r
	rw := binary.LittleEndian.Uint64(l[off>>3&63:]) >> (off & 7)
	nb := run * r
	if nb > 56 {
		if runHas(l, off, run, rem, r) {
			return true, true
		}
	} else {
		lo := lanes[r&31]
		v := rw ^ rem*lo
		if (v-lo)&^v&(lo<<(r-1))&(1<<nb-1) != 0 {
			return true, true
		}
	}
	if q < thr {
		return false, true
	}
	return secondaryHas(block, x, w0), true
}

// ProbeBMI2's outcomes (its assembly writes these values).
const (
	Absent = 0 // the block proves the key absent
	Maybe  = 1 // the key may be in the block
	Other  = 2 // not settled: the Go lookups decide
)

// secondaryHas probes the key's secondary line: the rare path, kept out
// of line so that Lookup stays small. w0 is the verified trailer's
// first id word, which holds the shape; the block's length gives the
// line count.
//
//go:noinline
func secondaryHas(block []byte, x, w0 uint64) bool {
	s := Shape{R: uint32(w0 >> 40 & 31), K: uint32(w0 >> 48 & 0xff), Q: uint32(w0 >> 56)}
	lines := uint64(len(block)-frame.TrailerSize) / frame.LineBytes
	x2 := keyhash.Mix(x, frame.SecondarySalt)
	q, r := QR(x2, &s)
	return LineHas((*[frame.LineBytes + 8]byte)(block[Line(x2, lines)*frame.LineBytes:]), q, r, &s)
}

// LineHas reports whether the line l (viewed with the 8 bytes after it:
// the next line or the trailer) holds remainder r in the run of quotient
// q, or cannot tell (a malformed header).
//
// The run of quotient q starts after the header's q-th zero (the zeros
// end the runs of quotients 0..q-1) and is as long as the ones there; the
// ones before it are the keys of lower quotients, so the run's first
// remainder is slot pos-q.
func LineHas(l *[frame.LineBytes + 8]byte, q, r uint64, s *Shape) bool {
	h0 := binary.LittleEndian.Uint64(l[0:])
	h1 := binary.LittleEndian.Uint64(l[8:])
	h2 := binary.LittleEndian.Uint64(l[16:])
	pos := uint64(0)
	if q > 0 {
		// Select the (q-1)-th zero of the header, counting from 0.
		z0, z1, z2 := ^h0, ^h1, ^h2
		c0 := uint64(bits.OnesCount64(z0))
		c01 := c0 + uint64(bits.OnesCount64(z1))
		j := q - 1
		w, base, jj := z0, uint64(0), j
		if j >= c0 {
			w, base, jj = z1, 64, j-c0
		}
		if j >= c01 {
			w, base, jj = z2, 128, j-c01
		}
		if jj >= uint64(bits.OnesCount64(w)) {
			return true // fewer zeros than quotients: not a block we wrote
		}
		pos = base + select64(w, jj) + 1
	}
	run := uint64(bits.TrailingZeros64(^(binary.LittleEndian.Uint64(l[pos>>3&31:]) >> (pos & 7))))
	if pos+run >= uint64(s.RemOff()) || pos-q+run > uint64(s.K) || run > MaxRun {
		return true // a run past the header or the capacity: not a line we wrote
	}
	off := uint64(s.RemOff()) + (pos-q)*uint64(s.R)
	rw := binary.LittleEndian.Uint64(l[off>>3&63:]) >> (off & 7)
	nb := run * uint64(s.R)
	if nb > 56 {
		return runHas(l, off, run, r, uint64(s.R))
	}
	// A SWAR compare of every remainder of the run at once: lanes of r
	// bits, those past the run masked off. (v-lo)&^v&hi is non-zero
	// exactly when some lane of v is zero; a borrow can only flag a lane
	// above a zero one, which the answer already counts.
	lo := lanes[s.R&31]
	v := rw ^ r*lo
	return (v-lo)&^v&(lo<<(s.R-1))&(1<<nb-1) != 0
}

// runHas is LineHas's compare for a run longer than one 8-byte load
// reaches (only in lines with many keys of one quotient).
//
//go:noinline
func runHas(l *[frame.LineBytes + 8]byte, off, run, r, rb uint64) bool {
	for i := uint64(0); i < run; i++ {
		o := off + i*rb
		if o+rb > frame.LineBits {
			return true // a run past the line: not a block we wrote
		}
		if binary.LittleEndian.Uint64(l[o>>3&63:])>>(o&7)&(1<<rb-1) == r {
			return true
		}
	}
	return false
}

// lanes[r] has bit i·r set for every whole r-bit lane of a 64-bit word.
var lanes [32]uint64

// selectByte[b<<3|j] is the position of the j-th set bit of byte b.
var selectByte [256 * 8]uint8

func init() {
	for r := 1; r <= 16; r++ {
		for i := 0; (i+1)*r <= 64; i++ {
			lanes[r] |= 1 << (i * r)
		}
	}
	for b := range 256 {
		j := 0
		for i := range 8 {
			if b>>i&1 == 1 {
				selectByte[b<<3|j] = uint8(i)
				j++
			}
		}
	}
}

// select64 returns the position of the j-th set bit of w, counting from 0,
// for j < popcount(w), without a loop or a branch: per-byte counts summed
// by a multiply, the byte found by a SWAR compare, then a table.
func select64(w, j uint64) uint64 {
	const ones8, high8 = 0x0101_0101_0101_0101, 0x8080_8080_8080_8080
	s := w - w>>1&0x5555_5555_5555_5555
	s = s&0x3333_3333_3333_3333 + s>>2&0x3333_3333_3333_3333
	s = (s + s>>4) & 0x0f0f_0f0f_0f0f_0f0f
	s *= ones8 // byte i: the set bits of bytes 0..i
	// Bytes whose running count is at most j precede the byte of the bit.
	b := uint64(bits.OnesCount64((j*ones8 | high8 - s) & high8))
	before := (s << 8) >> (b << 3 & 63) & 0xff
	return b<<3 + uint64(selectByte[(w>>(b<<3&63))&0xff<<3|(j-before)&7])
}

// Info is what Decode reports of a version-3 block.
type Info struct {
	frame.Common
	Lines       int
	Shape       Shape
	SeededLines bool
	Load        float64
}

// Decode verifies a whole version-3 block whose trailer Read accepted into
// h: the CRC-32C, every line (CheckLine), and that the lines hold exactly
// the trailer's keys.
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
	keys := c.Keys
	stored := uint64(0)
	for ln := uint64(0); ln < uint64(h.Lines); ln++ {
		c, err := CheckLine(block[ln*frame.LineBytes:(ln+1)*frame.LineBytes], s)
		if err != nil {
			return Info{}, fmt.Errorf("%w: line %d: %s", frame.ErrCorrupt, ln, err)
		}
		stored += uint64(c)
	}
	if stored != uint64(keys) {
		return Info{}, fmt.Errorf("%w: %d remainders, trailer says %d keys", frame.ErrCorrupt, stored, keys)
	}
	info.Load = float64(keys) / (float64(h.Lines) * float64(s.K))
	info.ExpectedFPR = ExpectedFPR(s, float64(keys)/float64(h.Lines))
	return info, nil
}

// CheckLine returns the keys a version-3 line holds, or what is wrong
// with it: the header must end its Q runs within Q+K bits, every bit the
// format leaves unused must be zero, no run may exceed MaxRun, and the
// threshold must be at most Q.
func CheckLine(line []byte, s Shape) (int, error) {
	bit := func(i uint32) uint64 { return uint64(line[i>>3]>>(i&7)) & 1 }
	zeros, ones, run := uint32(0), uint32(0), uint32(0)
	i := uint32(0)
	for ; zeros < s.Q; i++ {
		if i >= s.Q+s.K {
			return 0, fmt.Errorf("header holds %d of %d quotients' runs", zeros, s.Q)
		}
		if bit(i) == 1 {
			ones++
			run++
			if run > MaxRun {
				return 0, fmt.Errorf("a run longer than %d", MaxRun)
			}
		} else {
			zeros++
			run = 0
		}
	}
	if ones > s.K {
		return 0, fmt.Errorf("%d keys, capacity %d", ones, s.K)
	}
	end := s.RemOff() + ones*s.R
	for ; i < frame.LineBits-s.TBits(); i++ {
		if (i < s.RemOff() || i >= end) && bit(i) != 0 {
			return 0, fmt.Errorf("bit %d is set outside the header's runs and the remainders", i)
		}
	}
	if t := binary.LittleEndian.Uint64(line[frame.LineBytes-8:]) >> (64 - s.TBits()); t > uint64(s.Q) {
		return 0, fmt.Errorf("threshold %d above %d quotients", t, s.Q)
	}
	return int(ones), nil
}
