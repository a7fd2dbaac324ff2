package codec

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Format version 3 ("quotient lines"): like version 2, L lines of 64 bytes
// and a 40-byte trailer, and a key lives in its primary line or, when that
// line overflowed, in its secondary line. A line is no longer cut into
// buckets of four slots: it is a small quotient filter. Each key of a line
// has a quotient in [0, Q) and an r-bit remainder; the line stores, in a
// unary header, how many keys hold each quotient, and their remainders in
// quotient order. A key may be in the line iff a remainder of its
// quotient's run equals its own, so the false-positive rate is the run's
// length over 2^r, about (keys per line)/(Q·2^r): the header spends about
// 1 + Q/K bits per key where version 2's buckets spent them on slots that
// may stay empty and on two candidate buckets. A line overflows only as a
// whole (it holds K keys, whatever their quotients), and it records as
// one threshold T which of its keys may have left: those whose quotient
// is T or more. A negative lookup reads a second line only when its
// quotient is at least T. See FORMAT.md for the byte diagram.
const (
	// v3HeaderMax bounds Q+K, so that the unary header lies in a line's
	// first three 64-bit words.
	v3HeaderMax = 192
	// v3MaxRun is the longest run of one quotient a line may hold: a
	// lookup reads a run's length from one unaligned 8-byte load (57 bits
	// from any bit offset). Only keys aimed at a known seed come near it.
	v3MaxRun = 56
	// v3Byte5 layout: bits 0..4 r, bit 5 the hash kind, bit 6 always
	// maybe, bit 7 seeded lines.
	v3KindShift    = 5
	v3FlagAlwaysIn = 1 << 6
	// v3FlagSeededLines: the primary line comes from the seeded position
	// hash, not from the fixed line hash (see v3Lines). The builder sets
	// it only when keys crowd lines under the fixed hash, which only keys
	// chosen against that hash do.
	v3FlagSeededLines = 1 << 7
	// v3LineMultiplier is the line hash's fixed odd multiplier.
	v3LineMultiplier = 0xd6e8_feb8_6659_fd93
)

// v3Shape is how every line of a version-3 filter is cut.
type v3Shape struct {
	r uint32 // remainder bits, 1..16
	k uint32 // capacity: keys a line holds
	q uint32 // quotients
}

// tBits is the width of the line's threshold field: T is in [0, Q].
func (s v3Shape) tBits() uint32 { return uint32(bits.Len32(s.q)) }

// remOff is the line bit where the remainders start, after the header.
func (s v3Shape) remOff() uint32 { return s.q + s.k }

// valid reports whether the shape fits a line: the header in three words,
// and header, remainders and threshold in 512 bits.
func (s v3Shape) valid() bool {
	return s.r-1 < 16 && s.k >= 1 && s.q >= 1 && s.q+s.k <= v3HeaderMax &&
		uint64(s.q)+uint64(s.k)+uint64(s.k)*uint64(s.r)+uint64(s.tBits()) <= lineBits
}

// v3Header is a version-3 trailer's fields.
type v3Header struct {
	shape       v3Shape
	kind        HashKind
	alwaysMaybe bool
	seededLines bool
	lines, seed uint32
}

// v3IDWord is the low 40 bits of the trailer's first id word: magic and
// version 3.
var v3IDWord = uint64(binary.LittleEndian.Uint32(magic[:])) | 3<<32

// put writes the trailer (without its CRC) into t, 40 bytes: the same frame
// as version 2's, with the id's bytes 5..7 holding r, the hash kind and
// the always-maybe flag, K and Q.
func (h *v3Header) put(t []byte, keys uint32) {
	binary.LittleEndian.PutUint32(t[0:], keys)
	id := t[4:20]
	copy(id[0:4], magic[:])
	id[4] = 3
	b5 := byte(h.shape.r) | byte(h.kind)<<v3KindShift
	if h.alwaysMaybe {
		b5 |= v3FlagAlwaysIn
	}
	if h.seededLines {
		b5 |= v3FlagSeededLines
	}
	id[5] = b5
	id[6] = byte(h.shape.k)
	id[7] = byte(h.shape.q)
	binary.LittleEndian.PutUint32(id[8:], h.lines)
	binary.LittleEndian.PutUint32(id[12:], h.seed)
	for i := range 16 {
		t[20+i] = ^id[i]
	}
}

// readV3 decodes the trailer of a version-3 block. ok is false when the
// block is not a well-formed version-3 block: too short, the two copies
// disagree, wrong magic or version, a field out of range, or a length other
// than the one the fields imply.
func readV3(block []byte, h *v3Header) bool {
	n := len(block)
	if n < v2TrailerSize {
		return false
	}
	t := block[n-36 : n-4]
	w0 := binary.LittleEndian.Uint64(t[0:])
	w1 := binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) || w0&0xff_ffff_ffff != v3IDWord {
		return false
	}
	b5 := uint8(w0 >> 40)
	h.shape = v3Shape{r: uint32(b5 & 31), k: uint32(uint8(w0 >> 48)), q: uint32(uint8(w0 >> 56))}
	h.kind = HashKind(b5 >> v3KindShift & 1)
	h.alwaysMaybe = b5&v3FlagAlwaysIn != 0
	h.seededLines = b5&v3FlagSeededLines != 0
	h.lines, h.seed = uint32(w1), uint32(w1>>32)
	if h.alwaysMaybe {
		return b5 == v3FlagAlwaysIn|byte(h.kind)<<v3KindShift && h.shape == v3Shape{} && h.lines == 0 && n == v2TrailerSize
	}
	return h.shape.valid() && h.lines > 0 && uint64(n) == uint64(h.lines)*lineBytes+v2TrailerSize
}

// v3Line is the line of line hash z in a filter of lines lines: its high
// 32 bits by multiply-shift. A key's primary line hash is its key hash
// under a fixed multiplier (v2Position(h, v3LineMultiplier)), which needs
// nothing from the block: a lookup computes the line from the key and the
// block's length alone, and loads it while it loads and checks the
// trailer, so the two cache misses of a cold lookup overlap instead of
// following one another. (Under the flag v3FlagSeededLines, and always
// for the secondary line, the line hash is the seeded position hash.)
func v3Line(z, lines uint64) uint64 { return (z >> 32) * lines >> 32 }

// v3QR is the quotient and remainder of position hash x (seeded): the
// quotient from bits 16..31 by multiply-shift, the remainder the low r
// bits. Neither shares a bit with the line, nor with each other.
func v3QR(x uint64, s *v3Shape) (q, r uint64) {
	return (x >> 16 & 0xffff) * uint64(s.q) >> 16, x & (1<<s.r - 1)
}

// v3Lookup answers a lookup of key hash h (of the given kind) in block.
// isV3 is false when block has no well-formed version-3 trailer (the
// caller then tries the older versions). It is one flat function, the
// trailer checks (readV3's) and the primary line's probe (v3LineHas's)
// written out, because a lookup is a few dozen instructions and every call
// costs.
func v3Lookup(block []byte, h uint64, kind HashKind) (maybe, isV3 bool) {
	n := len(block)
	if n < v2TrailerSize {
		return true, false
	}
	// The line first, from the key and the block's length: its load does
	// not wait for the trailer's.
	var l *[lineBytes + 8]byte
	if n >= lineBytes+v2TrailerSize {
		l = (*[lineBytes + 8]byte)(block[v3Line(v2Position(h, v3LineMultiplier), uint64(n-v2TrailerSize)/lineBytes)*lineBytes:])
	}
	t := block[n-36 : n-4]
	w0 := binary.LittleEndian.Uint64(t[0:])
	w1 := binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) || w0&0xff_ffff_ffff != v3IDWord {
		return true, false
	}
	b5 := w0 >> 40 & 0xff
	r := b5 & 31
	k := w0 >> 48 & 0xff
	nq := w0 >> 56
	tb := uint64(bits.Len64(nq))
	lines := uint64(uint32(w1))
	// b5>>5&3 holds the kind and the always-maybe flag: one compare checks
	// both. The rest is v3Shape.valid.
	if b5>>v3KindShift&3 != uint64(kind) || r-1 >= 16 || k == 0 || nq == 0 || nq+k > v3HeaderMax ||
		nq+k+k*r+tb > lineBits || uint64(n) != lines*lineBytes+v2TrailerSize || lines == 0 {
		return true, true
	}
	x := v2Position(h, v2Multiplier(uint32(w1>>32)))
	if b5&v3FlagSeededLines != 0 {
		l = (*[lineBytes + 8]byte)(block[v3Line(x, lines)*lineBytes:])
	}
	q := (x >> 16 & 0xffff) * nq >> 16
	rem := x & (1<<r - 1)

	// v3LineHas, written out.
	h0 := binary.LittleEndian.Uint64(l[0:])
	h1 := binary.LittleEndian.Uint64(l[8:])
	h2 := binary.LittleEndian.Uint64(l[16:])
	thr := binary.LittleEndian.Uint64(l[lineBytes-8:]) >> (64 - tb)
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
	// and its length within v3MaxRun (the load holds 57 bits past pos, so
	// a longer run cannot be measured): otherwise the line is not one we
	// wrote.
	if pos+run >= nq+k || pos-q+run > k || run > v3MaxRun {
		return true, true
	}
	off := nq + k + (pos-q)*r
	rw := binary.LittleEndian.Uint64(l[off>>3&63:]) >> (off & 7)
	nb := run * r
	if nb > 56 {
		if v3RunHas(l, off, run, rem, r) {
			return true, true
		}
	} else {
		lo := v3Lanes[r&31]
		v := rw ^ rem*lo
		if (v-lo)&^v&(lo<<(r-1))&(1<<nb-1) != 0 {
			return true, true
		}
	}
	if q < thr {
		return false, true
	}
	return v3SecondaryHas(block, x, w0), true
}

// v3ProbeBMI2's outcomes (its assembly writes these values).
const (
	v3Absent = 0 // the block proves the key absent
	v3Maybe  = 1 // the key may be in the block
	v3Other  = 2 // not settled: the Go lookups decide
)

// v3SecondaryHas probes the key's secondary line: the rare path, kept out
// of line so that v3Lookup stays small. w0 is the verified trailer's
// first id word, which holds the shape; the block's length gives the
// line count.
//
//go:noinline
func v3SecondaryHas(block []byte, x, w0 uint64) bool {
	s := v3Shape{r: uint32(w0 >> 40 & 31), k: uint32(w0 >> 48 & 0xff), q: uint32(w0 >> 56)}
	lines := uint64(len(block)-v2TrailerSize) / lineBytes
	x2 := keyhash.Mix(x, secondarySalt)
	q, r := v3QR(x2, &s)
	return v3LineHas((*[lineBytes + 8]byte)(block[v3Line(x2, lines)*lineBytes:]), q, r, &s)
}

// v3LineHas reports whether the line l (viewed with the 8 bytes after it:
// the next line or the trailer) holds remainder r in the run of quotient
// q, or cannot tell (a malformed header).
//
// The run of quotient q starts after the header's q-th zero (the zeros
// end the runs of quotients 0..q-1) and is as long as the ones there; the
// ones before it are the keys of lower quotients, so the run's first
// remainder is slot pos-q.
func v3LineHas(l *[lineBytes + 8]byte, q, r uint64, s *v3Shape) bool {
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
	if pos+run >= uint64(s.remOff()) || pos-q+run > uint64(s.k) || run > v3MaxRun {
		return true // a run past the header or the capacity: not a line we wrote
	}
	off := uint64(s.remOff()) + (pos-q)*uint64(s.r)
	rw := binary.LittleEndian.Uint64(l[off>>3&63:]) >> (off & 7)
	nb := run * uint64(s.r)
	if nb > 56 {
		return v3RunHas(l, off, run, r, uint64(s.r))
	}
	// A SWAR compare of every remainder of the run at once: lanes of r
	// bits, those past the run masked off. (v-lo)&^v&hi is non-zero
	// exactly when some lane of v is zero; a borrow can only flag a lane
	// above a zero one, which the answer already counts.
	lo := v3Lanes[s.r&31]
	v := rw ^ r*lo
	return (v-lo)&^v&(lo<<(s.r-1))&(1<<nb-1) != 0
}

// v3RunHas is v3LineHas's compare for a run longer than one 8-byte load
// reaches (only in lines with many keys of one quotient).
//
//go:noinline
func v3RunHas(l *[lineBytes + 8]byte, off, run, r, rb uint64) bool {
	for i := uint64(0); i < run; i++ {
		o := off + i*rb
		if o+rb > lineBits {
			return true // a run past the line: not a block we wrote
		}
		if binary.LittleEndian.Uint64(l[o>>3&63:])>>(o&7)&(1<<rb-1) == r {
			return true
		}
	}
	return false
}

// v3Lanes[r] has bit i·r set for every whole r-bit lane of a 64-bit word.
var v3Lanes [32]uint64

// selectByte[b<<3|j] is the position of the j-th set bit of byte b.
var selectByte [256 * 8]uint8

func init() {
	for r := 1; r <= 16; r++ {
		for i := 0; (i+1)*r <= 64; i++ {
			v3Lanes[r] |= 1 << (i * r)
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

// v3Overflow is the expected share of a line's keys that do not fit its
// capacity k when it receives a Poisson number of keys of mean lam.
func v3Overflow(lam float64, k uint32) float64 {
	if lam <= 0 {
		return 0
	}
	// E[(X-k)+] = sum over x > k of (x-k)·P(X=x), summed until negligible.
	p := math.Exp(-lam)
	for x := 1; x <= int(k); x++ {
		p *= lam / float64(x)
	}
	sum := 0.0
	for x := int(k) + 1; x < int(k)+int(10*math.Sqrt(lam))+20; x++ {
		p *= lam / float64(x)
		sum += float64(x-int(k)) * p
	}
	return sum / lam
}

// v3SecondLineWithin reports whether the modelled share of negative
// lookups that read a second line (v3SecondLineShare) is at most limit,
// stopping as soon as it is not: the model's iteration only raises it.
func v3SecondLineWithin(s v3Shape, lam, limit float64) bool {
	return v3SecondLineModel(s, lam, limit) <= limit
}

// v3SecondLineShare models the share of negative lookups that read a
// second line in a filter of lam keys per line and shape s: a key reads
// one when its quotient is at or past its primary line's threshold, and
// the threshold of a line is lowered, a whole quotient at a time, until
// the keys at or past it are as many as the line's keys beyond its
// capacity. Those keys include the ones sent on from other lines, which
// in turn may send keys on: the share m of keys moved satisfies
// m = (1+m)·v3Overflow(lam·(1+m), k), whose solution the iteration from
// m = 0 approaches from below. A line that receives y
// keys (about Poisson with mean lam·(1+m)) and holds k then sends on
// y−k of its y/(1+m) own keys, plus half a quotient's share for the
// whole quotients. TestV3SecondLineModel holds it to the share builds
// measure (BuildStats.SecondLineShare) at loads from full lines down.
func v3SecondLineShare(s v3Shape, lam float64) float64 {
	return v3SecondLineModel(s, lam, math.Inf(1))
}

// v3SecondLineModel is v3SecondLineShare, or a value past stop once one
// step of the iteration exceeds stop.
func v3SecondLineModel(s v3Shape, lam, stop float64) float64 {
	if s.q == 0 || lam <= 0 {
		return 0
	}
	if lam >= 0.99*float64(s.k) {
		return 1 // lines fuller than this send keys on without end: no answer short of all
	}
	// step returns, for a share m of keys moved, the next m and the share
	// of lookups reading a second line, from one pass over the tail of
	// y, the keys a line receives: P(y) starts from its logarithm, since
	// the lines below capacity contribute nothing.
	k := float64(s.k)
	lg, _ := math.Lgamma(k + 2) // log((k+1)!)
	step := func(m float64) (next, share float64) {
		mu := lam * (1 + m)
		p := math.Exp(-mu + (k+1)*math.Log(mu) - lg)
		moved := 0.0
		for y := k + 1; y < max(k, mu)+10*math.Sqrt(mu)+20; y++ {
			moved += (y - k) * p
			share += p * min(1, (y-k)*(1+m)/y+0.5/float64(s.q))
			p *= mu / (y + 1)
		}
		return moved / lam, share
	}
	// The plain iteration from m = 0 (whose first step gives
	// v3Overflow(lam, k)) rises towards the solution, so each share it
	// gives is a lower bound on the answer (a share past stop already
	// decides); secant steps then finish the solve, which plain steps
	// approach only slowly near a full line.
	m0, sh := step(0)
	if sh > stop {
		return sh
	}
	m1, sh := step(m0)
	if sh > stop {
		return sh
	}
	g0 := m1 - m0
	m2, sh := step(m1)
	if sh > stop {
		return sh
	}
	g1 := m2 - m1
	for range 32 {
		if math.Abs(g1) <= 1e-6*m1 {
			break
		}
		m := m1 + g1 // a plain step, should the secant's be no use
		if d := g1 - g0; d != 0 {
			if c := m1 - g1*(m1-m0)/d; c > 0 && c < 2*m1+1 {
				m = c
			}
		}
		var next float64
		next, sh = step(m)
		m0, g0, m1, g1 = m1, g1, m, next-m
	}
	return sh
}

// v3ExpectedFPR models a version-3 filter's false-positive rate for lam
// keys per line: a line's remainders that match an absent key's quotient
// and remainder, lam/(Q·2^r), counted again for the lookups that read a
// second line, about twice the share of keys that overflow their primary
// line (each overflow pushes about one more key out of a full secondary
// line, and each lowers a threshold).
func v3ExpectedFPR(s v3Shape, lam float64) float64 {
	return v3ExpectedFPRWith(s, lam, v3Overflow(lam, s.k))
}

// v3ExpectedFPRWith is v3ExpectedFPR given overflow, v3Overflow(lam, s.k):
// shapes of one capacity share it.
func v3ExpectedFPRWith(s v3Shape, lam, overflow float64) float64 {
	if s.q == 0 || lam <= 0 {
		return 0
	}
	// A quotient's run is about Poisson with mean lam/Q, and each of its
	// remainders matches with probability 2^-r: no match has probability
	// exp(-lam/(Q·2^r)), which the plain sum overstates at small r.
	matches := lam / (float64(s.q) * float64(uint64(1)<<s.r)) * (1 + 2*overflow)
	return -math.Expm1(-matches)
}
