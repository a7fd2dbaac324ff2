package codec

import "github.com/lsmcuckoo/lsmcuckoo/internal/semisort"

// A bucket's four fingerprints are stored semi-sorted (internal/semisort;
// FORMAT.md, "Bucket encoding"): their high nibbles as one 12-bit code, then
// their low bits in ascending order.

// nibbleCodes is the number of valid 12-bit codes; codes at or above it
// only appear in corrupt blocks.
const nibbleCodes = semisort.Codes

// encodeBucket packs four fingerprints of f bits (0 = empty slot) into a
// bucket word of 4f-4 bits. The input is sorted in place; sorting by the
// whole fingerprint (not only the nibble) makes the encoding canonical, so
// equal bucket contents always produce equal bytes.
func encodeBucket(fps *[4]uint32, f uint) uint64 {
	semisort.Sort4(fps)
	return semisort.Pack(fps[0], fps[1], fps[2], fps[3], f)
}

// encodeLanes is encodeBucket for four fingerprints held in the 16-bit
// lanes of one word, as the version-2 builder holds a bucket. Pack stays a
// call: written out here, it makes the function large enough that the
// compiler turns the sort's min and max into branches, which go either way
// at random.
func encodeLanes(w uint64, f uint) uint64 {
	a, b := uint32(w&0xffff), uint32(w>>16&0xffff)
	c, d := uint32(w>>32&0xffff), uint32(w>>48)
	a, b = min(a, b), max(a, b)
	c, d = min(c, d), max(c, d)
	a, c = min(a, c), max(a, c)
	b, d = min(b, d), max(b, d)
	b, c = min(b, c), max(b, c)
	return semisort.Pack(a, b, c, d, f)
}
