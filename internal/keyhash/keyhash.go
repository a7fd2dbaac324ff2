// Package keyhash is the one place where a key becomes the numbers every
// filter in lsmcuckoo works with: a 64-bit key hash, a seeded mix of it, and
// from the mix a fingerprint and bucket positions.
//
// Every filter in the module derives its values the same way:
//
//	h  = Hash(key)                      xxhash64 (codec format version 1, the
//	                                    memtable filter), or MulHash(key)
//	                                    (codec format version 2), or a host's
//	                                    32-bit hash, widened
//	x  = a seeded bijection of h        Mix(h, seed), or codec version 2's
//	                                    multiply-xorshift: 64 well-mixed bits
//	hi = x >> 32                        selects the block or line / primary bucket
//	lo = x & 0xffffffff                 bits 16..31 place the second bucket,
//	                                    bits 0..15 make the fingerprint
//
// Keeping the fingerprint in bits that never take part in choosing the
// bucket matters: a fingerprint correlated with its bucket would make the
// keys that share a bucket share fingerprints too, and the false-positive
// rate would drift above 2b/2^f.
package keyhash

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Hash is the key hash every lsmcuckoo filter starts from.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Mix combines a key hash with a filter's seed into 64 bits whose every
// output bit depends on every input bit (the splitmix64 finaliser). It is a
// bijection for a fixed seed, so distinct hashes never collide here; that is
// also what lets a host's 32-bit hash (Badger's) be widened without losing
// what little it carries.
func Mix(h uint64, seed uint32) uint64 {
	z := h + (uint64(seed)+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Reduce maps v uniformly onto [0, n) without a division (Lemire's
// multiply-shift range reduction). The low half of the product is returned
// too: it is still uniform and is reused to pick a position inside the
// range just chosen, so one 32-bit word can place a key twice.
func Reduce(v, n uint32) (index, rest uint32) {
	p := uint64(v) * uint64(n)
	return uint32(p >> 32), uint32(p)
}

// Fingerprint returns an f-bit fingerprint in [1, 2^f-1] taken from the low
// 16 bits of x; 0 is reserved for an empty slot. f must be in [1, 16].
func Fingerprint(x uint64, f uint) uint32 {
	max := uint32(1)<<f - 1
	return 1 + uint32((uint64(x&0xffff)*uint64(max))>>16)
}

// AltOffset returns a value in [0, n) from bits 16..31 of x, used to place a
// key's second bucket relative to its first.
func AltOffset(x uint64, n uint32) uint32 {
	return uint32((uint64((x>>16)&0xffff) * uint64(n)) >> 16)
}

// Hi returns the 32 bits of x that choose a key's block or primary bucket.
func Hi(x uint64) uint32 { return uint32(x >> 32) }

// FingerprintHash scrambles a fingerprint into 32 bits. Dynamic filters that
// must find a key's other bucket from its fingerprint alone (the memtable
// filter relocates fingerprints without the key) use it as the offset.
func FingerprintHash(fp uint32) uint32 {
	return uint32(bits.RotateLeft64(uint64(fp)*0x5bd1e9955bd1e995, 23) >> 32)
}

// Unmix inverts Mix: Unmix(Mix(h, seed), seed) == h. A builder that stored
// mixed hashes uses it to re-place its keys under another seed.
func Unmix(x uint64, seed uint32) uint64 {
	x ^= x>>31 ^ x>>62
	x *= inv94d0
	x ^= x>>27 ^ x>>54
	x *= invBf58
	x ^= x>>30 ^ x>>60
	return x - (uint64(seed)+1)*0x9e3779b97f4a7c15
}

var (
	inv94d0 = ModInverse(0x94d049bb133111eb)
	invBf58 = ModInverse(0xbf58476d1ce4e5b9)
)

// ModInverse returns the inverse of odd a modulo 2^64 by Newton's iteration,
// which doubles the number of correct low bits each step.
func ModInverse(a uint64) uint64 {
	x := a // correct to 3 bits for odd a
	for i := 0; i < 5; i++ {
		x *= 2 - a*x
	}
	return x
}
