// Package semisort encodes a cuckoo bucket of four fingerprints as a sorted
// multiset (Fan et al., "Cuckoo Filter: Practically Better Than Bloom",
// §5.2): the fingerprints are kept in ascending order, so their four high
// nibbles form a sorted 4-multiset of [0,16). There are C(16+4-1, 4) = 3876
// such multisets, which fit a 12-bit code instead of 16 raw bits: a bucket of
// four f-bit fingerprints costs 4f-4 bits, one bit per slot less, for free in
// false-positive terms.
//
// The code is the multiset's rank in the combinatorial number system: with
// a <= b <= c <= d, the strictly increasing a < b+1 < c+2 < d+3 ranks as
// C(a,1) + C(b+1,2) + C(c+2,3) + C(d+3,4).
//
// The bucket word: the 12-bit code in bits [0,12), then the low f-4 bits of
// each fingerprint in ascending order. codec stores it in its filter blocks
// (codec/FORMAT.md, "Bucket encoding"), dynamic in its index's segments.
package semisort

// Codes is the number of valid 12-bit codes; a code at or above it is not
// the rank of any multiset (codec only meets one in a damaged block).
const Codes = 3876

// NibblesOfCode maps a code to its four sorted nibbles packed as
// d<<12|c<<8|b<<4|a. It has 4096 entries so that any 12-bit value indexes it
// without a bounds check; the entries at and above Codes are zero, and a
// reader that may meet them checks the code against Codes first.
var NibblesOfCode [4096]uint16

// RankTerm[i][n] is the term a nibble n in sorted position i adds to the
// code, C(n+i, i+1): a rank is four loads and three adds.
var RankTerm [4][16]uint16

func init() {
	var binom [19][5]uint16 // binom[n][k], n < 19, k <= 4
	for n := range binom {
		binom[n][0] = 1
		for k := 1; k < len(binom[n]) && k <= n; k++ {
			binom[n][k] = binom[n-1][k-1]
			if k <= n-1 {
				binom[n][k] += binom[n-1][k]
			}
		}
	}
	for i := range RankTerm {
		for n := range RankTerm[i] {
			RankTerm[i][n] = binom[n+i][i+1]
		}
	}
	for a := 0; a < 16; a++ {
		for b := a; b < 16; b++ {
			for c := b; c < 16; c++ {
				for d := c; d < 16; d++ {
					NibblesOfCode[Rank(a, b, c, d)] = uint16(d<<12 | c<<8 | b<<4 | a)
				}
			}
		}
	}
}

// Rank returns the code of the sorted nibbles a <= b <= c <= d.
func Rank(a, b, c, d int) uint16 {
	return RankTerm[0][a&15] + RankTerm[1][b&15] + RankTerm[2][c&15] + RankTerm[3][d&15]
}

// Pack returns the bucket word of the sorted fingerprints a <= b <= c <= d
// of f bits (5 <= f <= 16): 4f-4 bits.
func Pack(a, b, c, d uint32, f uint) uint64 {
	low := (f - 4) & 15
	code := RankTerm[0][a>>low&15] + RankTerm[1][b>>low&15] + RankTerm[2][c>>low&15] + RankTerm[3][d>>low&15]
	m := uint32(1)<<low - 1
	return uint64(code) | uint64(a&m)<<12 | uint64(b&m)<<(12+low) | uint64(c&m)<<(12+2*low) | uint64(d&m)<<(12+3*low)
}

// Decode unpacks a bucket word of f-bit fingerprints into its four
// fingerprints in stored (ascending) order. ok is false when the nibble code
// is not a valid one.
func Decode(w uint64, f uint) (fps [4]uint32, ok bool) {
	code := w & 0xfff
	if code >= Codes {
		return fps, false
	}
	nibs := uint32(NibblesOfCode[code])
	low := (f - 4) & 15
	mask := uint64(1)<<low - 1
	for j := uint(0); j < 4; j++ {
		fps[j] = (nibs>>(4*j)&0xf)<<low | uint32(w>>(12+j*low)&mask)
	}
	return fps, true
}

// Sort4 sorts four values with a fixed five-comparison network, written with
// min and max so that it compiles to conditional moves: a builder sorts
// every bucket, and the branches of a compare-and-swap on random
// fingerprints mispredict about half the time.
func Sort4(v *[4]uint32) {
	a, b := min(v[0], v[1]), max(v[0], v[1])
	c, d := min(v[2], v[3]), max(v[2], v[3])
	a, c = min(a, c), max(a, c)
	b, d = min(b, d), max(b, d)
	b, c = min(b, c), max(b, c)
	v[0], v[1], v[2], v[3] = a, b, c, d
}
