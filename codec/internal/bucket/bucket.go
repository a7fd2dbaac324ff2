// Package bucket is the four-slot bucket of semi-sorted fingerprints that
// versions 1 and 2 store (Fan, Andersen, Kaminsky and Mitzenmacher,
// "Cuckoo Filter: Practically Better Than Bloom"): its encoding, its
// probe, its check, and the false-positive model of two such buckets.
// FORMAT.md ("Bucket encoding") specifies the bits.
package bucket

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

const (
	// Slots is the number of fingerprints a bucket holds.
	Slots = 4
	// MinFPBits and MaxFPBits bound a fingerprint's width: below 5 bits
	// the low part of a slot vanishes, above 16 a slot no longer fits a
	// 16-bit lane.
	MinFPBits = 5
	MaxFPBits = 16
	// NibbleCodes is the number of valid 12-bit codes; codes at or above
	// it only appear in corrupt blocks.
	NibbleCodes = semisort.Codes
	// MinLoad bounds how empty a filter may be planned, which bounds the
	// smallest false-positive rate a target can ask for: with f=16 at
	// this load the rate is about 2.4e-5; below that, spend the bits
	// elsewhere.
	MinLoad = 0.2
)

// Encode packs four fingerprints of f bits (0 = empty slot) into a bucket
// word of 4f-4 bits. The input is sorted in place; sorting by the whole
// fingerprint (not only the nibble) makes the encoding canonical, so equal
// bucket contents always produce equal bytes.
func Encode(fps *[Slots]uint32, f uint) uint64 {
	semisort.Sort4(fps)
	return semisort.Pack(fps[0], fps[1], fps[2], fps[3], f)
}

// EncodeLanes is Encode for four fingerprints held in the 16-bit lanes of
// one word, as the version-2 builder holds a bucket. Pack stays a call:
// written out here, it makes the function large enough that the compiler
// turns the sort's min and max into branches, which go either way at
// random.
func EncodeLanes(w uint64, f uint) uint64 {
	a, b := uint32(w&0xffff), uint32(w>>16&0xffff)
	c, d := uint32(w>>32&0xffff), uint32(w>>48)
	a, b = min(a, b), max(a, b)
	c, d = min(c, d), max(c, d)
	a, c = min(a, c), max(a, c)
	b, d = min(b, d), max(b, d)
	b, c = min(b, c), max(b, c)
	return semisort.Pack(a, b, c, d, f)
}

// Has reports whether the bucket word w holds fp; a bucket with an invalid
// nibble code (only in a corrupt block) answers true.
//
// The nibbles are tested first, all four at once: XOR with fp's nibble in
// every lane and an exact zero-lane test. About three lookups in four find
// no equal nibble and stop there without touching the low bits; the rest
// compare the low bits of just the matching slots.
//
// w is the bucket's word: buckets are 4f-4 bits and start nibble-aligned,
// so a bucket is always inside the 64-bit word loaded at its first byte.
func Has(w uint64, fp uint32, f uint) bool {
	code := w & 0xfff
	if code >= NibbleCodes {
		return true
	}
	low := (f - 4) & 15
	xn := uint32(semisort.NibblesOfCode[code]) ^ (fp>>low)*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888 // bit 4j+3 set: slot j's nibble matches
	return eq != 0 && LowsMatch(w, eq, fp, low)
}

// LowsMatch compares the low bits of the slots flagged in eq with fp's; it
// is Has's rare path, apart so that Has inlines.
func LowsMatch(w uint64, eq, fp uint32, low uint) bool {
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		if w>>((12+j*low)&63)&lowMask == uint64(fp)&lowMask {
			return true
		}
		eq &= eq - 1
	}
	return false
}

// FirstLowMatches is 1 when the slot of the lowest bit of eq (bit 4j+3 for
// slot j) holds fp's low bits, 0 otherwise or when eq is 0.
func FirstLowMatches(w uint64, eq, fp uint32, low uint) uint64 {
	j := uint(bits.TrailingZeros32(eq|1<<16)) >> 2 // 4 when eq is 0
	d := (w>>((12+j*low)&63) ^ uint64(fp)) & (1<<(low&31) - 1)
	return (d - 1) >> 63 & uint64(((eq-1)>>31)^1)
}

// Check returns the number of occupied slots of a bucket word, or what is
// wrong with it.
func Check(w uint64, f uint) (int, error) {
	fps, ok := semisort.Decode(w, f)
	if !ok {
		return 0, fmt.Errorf("invalid nibble code %d", w&0xfff)
	}
	n := 0
	for j := 0; j < Slots; j++ {
		if j > 0 && fps[j] < fps[j-1] {
			return 0, errors.New("not in canonical order")
		}
		if fps[j] != 0 {
			n++
		}
	}
	return n, nil
}

// ExpectedFPR is the false-positive rate of a lookup that compares a
// random fingerprint against the 2·4·load occupied slots of its two
// buckets; fingerprints are uniform over [1, 2^f-1].
func ExpectedFPR(f uint, load float64) float64 {
	return 1 - math.Pow(1-1/float64(uint32(1)<<f-1), 2*Slots*load)
}

// LoadForFPR inverts ExpectedFPR for a given width.
func LoadForFPR(f uint, fpr float64) float64 {
	if fpr >= 1 {
		return math.Inf(1)
	}
	return math.Log1p(-fpr) / (2 * Slots * math.Log1p(-1/float64(uint32(1)<<f-1)))
}
