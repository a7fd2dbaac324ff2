package codec

// Semi-sorting (Fan et al., "Cuckoo Filter: Practically Better Than Bloom",
// §5.2): a bucket's four fingerprints are stored in ascending order, so the
// four high nibbles form a sorted 4-multiset of [0,16). There are
// C(16+4-1, 4) = 3876 such multisets, which fit a 12-bit code instead of 16
// raw bits: one bit saved per slot, for free in false-positive terms.
//
// The code is the multiset's rank in the combinatorial number system: with
// a <= b <= c <= d, the strictly increasing a < b+1 < c+2 < d+3 ranks as
// C(a,1) + C(b+1,2) + C(c+2,3) + C(d+3,4).

// nibbleCodes is the number of valid 12-bit codes; codes at or above it
// only appear in corrupt blocks.
const nibbleCodes = 3876

// nibblesOfCode maps a code to its four nibbles packed as d<<12|c<<8|b<<4|a.
var nibblesOfCode [nibbleCodes]uint16

// binom[n][k] for the ranks above; n < 19, k <= 4.
var binom [19][5]uint16

// rankTerm[i][n] is the term a nibble n in sorted position i adds to the
// code, binom[n+i][i+1]: the rank is four loads and three adds.
var rankTerm [4][16]uint16

func init() {
	for n := range binom {
		binom[n][0] = 1
		for k := 1; k < len(binom[n]) && k <= n; k++ {
			binom[n][k] = binom[n-1][k-1]
			if k <= n-1 {
				binom[n][k] += binom[n-1][k]
			}
		}
	}
	for i := range rankTerm {
		for n := range rankTerm[i] {
			rankTerm[i][n] = binom[n+i][i+1]
		}
	}
	for a := 0; a < 16; a++ {
		for b := a; b < 16; b++ {
			for c := b; c < 16; c++ {
				for d := c; d < 16; d++ {
					nibblesOfCode[nibbleRank(a, b, c, d)] = uint16(d<<12 | c<<8 | b<<4 | a)
				}
			}
		}
	}
}

// nibbleRank returns the code of the sorted nibbles a <= b <= c <= d.
func nibbleRank(a, b, c, d int) uint16 {
	return binom[a][1] + binom[b+1][2] + binom[c+2][3] + binom[d+3][4]
}

// encodeBucket packs four fingerprints of f bits (0 = empty slot) into a
// bucket word of 4f-4 bits: the 12-bit nibble code in bits [0,12), then the
// low f-4 bits of each fingerprint in ascending order. The input is sorted
// in place; sorting by the whole fingerprint (not only the nibble) makes the
// encoding canonical, so equal bucket contents always produce equal bytes.
func encodeBucket(fps *[4]uint32, f uint) uint64 {
	sort4(fps)
	return packSorted(fps[0], fps[1], fps[2], fps[3], f)
}

// encodeLanes is encodeBucket for four fingerprints held in the 16-bit
// lanes of one word, as the version-2 builder holds a bucket. packSorted
// stays a call: written out here, it makes the function large enough that
// the compiler turns the sort's min and max into branches, which go
// either way at random.
func encodeLanes(w uint64, f uint) uint64 {
	a, b := uint32(w&0xffff), uint32(w>>16&0xffff)
	c, d := uint32(w>>32&0xffff), uint32(w>>48)
	a, b = min(a, b), max(a, b)
	c, d = min(c, d), max(c, d)
	a, c = min(a, c), max(a, c)
	b, d = min(b, d), max(b, d)
	b, c = min(b, c), max(b, c)
	return packSorted(a, b, c, d, f)
}

// packSorted is the bucket word of the sorted fingerprints a <= b <= c <= d
// of f bits.
func packSorted(a, b, c, d uint32, f uint) uint64 {
	low := (f - 4) & 15
	code := rankTerm[0][a>>low&15] + rankTerm[1][b>>low&15] + rankTerm[2][c>>low&15] + rankTerm[3][d>>low&15]
	m := uint32(1)<<low - 1
	return uint64(code) | uint64(a&m)<<12 | uint64(b&m)<<(12+low) | uint64(c&m)<<(12+2*low) | uint64(d&m)<<(12+3*low)
}

// decodeBucket unpacks a bucket word into its four fingerprints in stored
// (ascending) order. ok is false when the nibble code is not a valid one.
func decodeBucket(w uint64, f uint) (fps [4]uint32, ok bool) {
	code := w & 0xfff
	if code >= nibbleCodes {
		return fps, false
	}
	nibs := uint32(nibblesOfCode[code])
	low := f - 4
	mask := uint64(1)<<low - 1
	for j := uint(0); j < 4; j++ {
		fps[j] = (nibs>>(4*j)&0xf)<<low | uint32(w>>(12+j*low)&mask)
	}
	return fps, true
}

// sort4 sorts four values with a fixed five-comparison network, written
// with min and max so that it compiles to conditional moves: the builder
// sorts every bucket, and the branches of a compare-and-swap on random
// fingerprints mispredict about half the time.
func sort4(v *[4]uint32) {
	a, b := min(v[0], v[1]), max(v[0], v[1])
	c, d := min(v[2], v[3]), max(v[2], v[3])
	a, c = min(a, c), max(a, c)
	b, d = min(b, d), max(b, d)
	b, c = min(b, c), max(b, c)
	v[0], v[1], v[2], v[3] = a, b, c, d
}
