// Package frame holds what the filter block formats share: the magic, the
// CRC-32C, the errors a reader reports, the 64-byte line and 40-byte
// trailer frame of versions 2 and 3 and their seeded position hash, and the
// sizing request every version's planner reads. A change to one version's
// encoding never touches this package.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Hash kinds, as codec.HashKind numbers them and every version records.
const (
	HashKey64  = 0
	HashHost32 = 1
)

// DefaultBitsPerKey is the budget a planner uses when the request names
// neither a budget nor a false-positive rate (codec.DefaultBitsPerKey).
const DefaultBitsPerKey = 10

// Sizing is what a version's planner reads of codec.Options.
type Sizing struct {
	BitsPerKey        float64
	FalsePositiveRate float64
	FingerprintBits   int // version 3: the remainder width; 0 lets the planner choose
	Densest           bool
}

// Errors a reader reports, wrapped with a description of what is wrong
// (codec exports them as ErrCorrupt and ErrVersion).
var (
	ErrCorrupt = errors.New("codec: corrupt filter block")
	ErrVersion = errors.New("codec: unsupported filter format version")
)

// Magic identifies a filter block: the first four bytes of a version-1
// block, bytes n-36..n-33 of a version-2 or version-3 block of n bytes.
var Magic = [4]byte{'L', 'S', 'M', 'C'}

// MagicWord is Magic read as a little-endian word.
var MagicWord = binary.LittleEndian.Uint32(Magic[:])

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C (Castagnoli) every version ends a block with.
func Checksum(body []byte) uint32 { return crc32.Checksum(body, castagnoli) }

// Seal writes the CRC-32C of all but the last four bytes of blk into them.
func Seal(blk []byte) {
	n := len(blk)
	binary.LittleEndian.PutUint32(blk[n-4:], Checksum(blk[:n-4]))
}

// VerifyChecksum checks the stored CRC-32C of body, the bytes before it.
func VerifyChecksum(body []byte, stored uint32) error {
	if got := Checksum(body); got != stored {
		return fmt.Errorf("%w: checksum mismatch: computed %#08x, stored %#08x", ErrCorrupt, got, stored)
	}
	return nil
}

// GrowBytes extends dst by n zeroed bytes, returning the whole slice and
// the new part.
func GrowBytes(dst []byte, n int) (all, added []byte) {
	l := len(dst)
	dst = slices.Grow(dst, n)[:l+n]
	clear(dst[l:])
	return dst, dst[l:]
}

// Resize returns s with length n, reallocated (with room to spare) only
// when its capacity is short.
func Resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// Versions 2 and 3: a block is L lines of LineBytes bytes and a trailer of
// TrailerSize bytes, laid out from the end of the block (n = its length):
//
//	n-40  keys u32
//	n-36  "LSMC" version b5 b6 b7 lines(u32) seed(u32)   (16 bytes, the "id")
//	n-20  the same 16 bytes, every bit complemented
//	n-4   CRC-32C of bytes [0, n-4)
//
// The complemented copy lets every lookup notice a damaged trailer with two
// compares: a flipped bit in the seed or line count would otherwise move
// every key and turn present keys absent. Bytes b5..b7 are each version's.
const (
	LineBytes   = 64
	LineBits    = LineBytes * 8
	TrailerSize = 40
	// VersionAt is the offset of the version byte in the trailer.
	VersionAt = 8
	// SecondarySalt derives a key's secondary line from its position
	// hash; any fixed odd constant works, it only has to differ from the
	// seeds keyhash.Mix is given elsewhere.
	SecondarySalt = 0x5ec0_11d2
)

// IDWord is the low 40 bits of a trailer's first id word: the magic and
// the version byte.
func IDWord(version byte) uint64 { return uint64(MagicWord) | uint64(version)<<32 }

// TrailerSays reports whether the version byte of block's trailer frame is
// version (the version's reader then checks the rest of the trailer). A
// block is version 2 or 3 only if this byte says so, so a lookup runs the
// one reader it names instead of trying each.
func TrailerSays(block []byte, version byte) bool {
	n := len(block)
	return n >= TrailerSize && block[n-TrailerSize+VersionAt] == version
}

// PutTrailer writes a trailer, all but its CRC, into t (TrailerSize bytes).
func PutTrailer(t []byte, keys uint32, version, b5, b6, b7 byte, lines, seed uint32) {
	binary.LittleEndian.PutUint32(t[0:], keys)
	id := t[4:20]
	copy(id[0:4], Magic[:])
	id[4], id[5], id[6], id[7] = version, b5, b6, b7
	binary.LittleEndian.PutUint32(id[8:], lines)
	binary.LittleEndian.PutUint32(id[12:], seed)
	for i := range 16 {
		t[20+i] = ^id[i]
	}
}

// ReadTrailer returns the two id words of block's trailer: ok is false
// when the block is shorter than a trailer, the id and its complemented
// copy disagree, or the magic and version are not version's.
func ReadTrailer(block []byte, version byte) (w0, w1 uint64, ok bool) {
	n := len(block)
	if n < TrailerSize {
		return 0, 0, false
	}
	t := block[n-36 : n-4]
	w0 = binary.LittleEndian.Uint64(t[0:])
	w1 = binary.LittleEndian.Uint64(t[8:])
	if w0 != ^binary.LittleEndian.Uint64(t[16:]) || w1 != ^binary.LittleEndian.Uint64(t[24:]) || w0&0xff_ffff_ffff != IDWord(version) {
		return 0, 0, false
	}
	return w0, w1, true
}

// Keys is the key count of a block's trailer.
func Keys(block []byte) uint32 { return binary.LittleEndian.Uint32(block[len(block)-TrailerSize:]) }

// Multiplier turns a block's seed into the odd 64-bit multiplier of its
// position hash: one multiply, which a lookup computes from the trailer
// while the key is still being hashed.
func Multiplier(seed uint32) uint64 { return (uint64(seed)+1)*0x9e3779b97f4a7c15 | 1 }

// Position is the position hash of a key hash h under multiplier m:
// y = h·m, x = y XOR (y >> 32). Multiply-shift with a random odd
// multiplier is universal for the high bits (two distinct hashes share
// their top k bits with probability at most 2/2^k), which is what chooses
// the line: keys chosen to share a line under one seed are spread under
// another, and the seed is secret. The xorshift brings high product bits
// down to the fingerprint. Both steps are bijections (see Unposition):
// distinct hashes never become equal.
func Position(h, m uint64) uint64 {
	y := h * m
	return y ^ y>>32
}

// Unposition inverts Position, given the inverse of the multiplier.
func Unposition(x, mInv uint64) uint64 { return (x ^ x>>32) * mInv }

// BitsPerKey is a block's size in bits over its keys, 0 for none.
func BitsPerKey(size uint64, keys uint32) float64 {
	if keys == 0 {
		return 0
	}
	return float64(size) * 8 / float64(keys)
}

// Every version's build makes at most Attempts placements: two in the
// planned size under two seeds, then (versions 2 and 3) two in
// geometrically more lines. Each attempt is linear in the keys, so a
// build is too, whatever the keys.
const (
	Attempts = 4
	// GrowStep is the growth of the line count per attempt after the
	// second; the last attempt is the size cap, (1+GrowStep)^2 of the plan.
	GrowStep = 0.08
	// EvictionsPerKey caps how many keys secondary placements may push
	// out of their primary lines, per key, before an attempt is abandoned.
	EvictionsPerKey = 0.5
)

// AttemptLines is the line count of placement attempt 0, 1, ...: the
// plan twice (under two seeds), then geometrically more.
func AttemptLines(planned uint32, attempt int) uint32 {
	if g := attempt - 1; g > 0 {
		return uint32(math.Ceil(float64(planned)*math.Pow(1+GrowStep, float64(g)))) + 1
	}
	return planned
}

// SizeCap is the most lines any attempt may use for a plan of planned
// lines.
func SizeCap(planned uint32) float64 { return float64(AttemptLines(planned, Attempts-1)) }

// Common is what Decode reports of a block of any version.
type Common struct {
	Kind        uint8
	Keys        uint32
	Seed        uint32
	Bytes       int
	BitsPerKey  float64
	ExpectedFPR float64
	AlwaysMaybe bool
}

// DecodeTrailer verifies the CRC-32C of a version-2 or version-3 block
// whose trailer its version's reader accepted, and returns what the
// trailer says; an always-maybe block must record no keys, and its
// expected rate is 1; any other block's rate is its version's model, the
// caller's to fill.
func DecodeTrailer(block []byte, kind uint8, seed uint32, alwaysMaybe bool) (Common, error) {
	n := len(block)
	if err := VerifyChecksum(block[:n-4], binary.LittleEndian.Uint32(block[n-4:])); err != nil {
		return Common{}, err
	}
	c := Common{Kind: kind, Keys: Keys(block), Seed: seed, Bytes: n, AlwaysMaybe: alwaysMaybe}
	if alwaysMaybe {
		if c.Keys != 0 {
			return Common{}, fmt.Errorf("%w: an always-maybe block records %d keys", ErrCorrupt, c.Keys)
		}
		c.ExpectedFPR = 1
	}
	c.BitsPerKey = BitsPerKey(uint64(n), c.Keys)
	return c, nil
}

// BudgetLines is how versions 3 and 4 spend bpk bits per key on n keys:
// a large filter's lines receive perLine = LineBits/bpk keys, and the
// keys need that many lines; large reports whether those lines cost at
// most 5% over the budget (so that a small filter keeps a large one's
// shape and rate). Otherwise lines is the count the budget buys: as many
// as 5% over it buys, or, where that is none or one, as many as it buys.
// A tiny filter, whose 40-byte trailer is over 5% of its budget, may
// exceed the budget by the trailer.
func BudgetLines(bpk, n float64) (perLine float64, need uint32, large bool, lines uint32) {
	trailer := float64(TrailerSize * 8)
	if trailer > 0.05*bpk*n {
		trailer = 0
	}
	perLine = LineBits / bpk
	needF := max(1, math.Ceil(n/perLine))
	large = needF > 1 && needF*LineBits+trailer <= 1.05*bpk*n
	lines = uint32(max(1, min(needF, math.Floor((1.05*bpk*n-trailer)/LineBits))))
	if float64(lines)*LineBits+trailer > 1.05*bpk*n || lines == 1 {
		lines = uint32(max(1, math.Floor((bpk*n-trailer)/LineBits)))
	}
	return perLine, uint32(needF), large, lines
}
