package keyhash

import (
	"encoding/binary"
	"math/bits"
)

// MulHash is the key hash of codec format version 2: 64 bits from
// 128-bit multiplies of the key's words, folded high half into low half.
//
// It exists because a filter probe's cost is mostly hashing: xxhash64
// spends about a dozen dependent multiplies on a 15-byte key (one round per
// 8-, 4- and 1-byte piece, then the finaliser), where this spends two. A key
// of up to 16 bytes is read as two possibly overlapping words (first and
// last 8, 4 or 1..3 bytes), which together cover every byte, so keys of one
// length that differ anywhere give different word pairs; the length enters
// the final multiply. Longer keys fold 16 bytes per multiply.
//
// Quality is what a filter needs, uniform output on structured keys
// (sequential IDs, shared prefixes), not resistance to chosen inputs: keys
// chosen to collide exactly in MulHash only share a filter slot, which
// costs false positives, never a false negative; and where keys land is
// decided by each filter's secret seed, not by this function alone.
func MulHash(b []byte) uint64 {
	n := len(b)
	var x, y uint64
	switch {
	case n > 16:
		return mulHashLong(b)
	case n >= 8:
		x, y = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		x, y = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		x = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	return fold(fold(x^mulK0, y^mulK1)^mulK2, uint64(n)^mulK3)
}

// MulHashWords is MulHash of a key of n bytes, 8 <= n <= 16, given its
// first and its last 8 bytes as little-endian words: small enough to be
// inlined where a caller hashes keys one at a time, as a table's filter
// writer does.
func MulHashWords(first, last uint64, n int) uint64 {
	return fold(fold(first^mulK0, last^mulK1)^mulK2, uint64(n)^mulK3)
}

// mulHashLong folds 16 bytes per multiply into an accumulator, then the
// key's last 16 bytes (overlapping bytes already folded when the length is
// not a multiple of 16) with the length.
func mulHashLong(key []byte) uint64 {
	n := len(key)
	acc := uint64(n) ^ mulK2
	for b := key; len(b) > 16; b = b[16:] {
		acc = fold(binary.LittleEndian.Uint64(b)^mulK0, binary.LittleEndian.Uint64(b[8:])^acc^mulK1)
	}
	last := key[n-16:]
	x := fold(binary.LittleEndian.Uint64(last)^mulK0, binary.LittleEndian.Uint64(last[8:])^acc^mulK1)
	return fold(x^mulK2, uint64(n)^mulK3)
}

// fold multiplies two words to 128 bits and folds the halves together.
func fold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// Odd constants with well-spread bits (the fractional parts of the square
// roots of small primes, as SHA-2 uses for its initial values).
const (
	mulK0 = 0x6a09e667f3bcc909
	mulK1 = 0xbb67ae8584caa73b
	mulK2 = 0x3c6ef372fe94f82b
	mulK3 = 0xa54ff53a5f1d36f1
)
