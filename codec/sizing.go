package codec

import "math"

// Version-1 shape decisions, each measured with
// `go test ./codec -run TestPlacementSweep -sweep -v`
// (see FORMAT.md, "Choosing the block size and load").
const (
	// defaultBlockKeys is the expected number of keys per block. Blocks are
	// sized for the keys they actually receive, so balls-into-bins does not
	// bound the block size; it trades offset-table bits (about w/1024, under
	// 0.015 bit/key at 1M keys) and BFS cost against the finite-size loss
	// of small random graphs: at a planned load of 97%, 64-key blocks reach
	// 95.6% and need extra buckets in 16% of blocks, 256-key blocks reach
	// 96.8% (15%), 1024-key blocks 97.0% (5.5%). A block of 1024 keys is
	// about 1.2 KiB at f=10, so its two buckets still share a page.
	defaultBlockKeys = 1024
	// defaultMaxLoad is the highest planned fraction of occupied slots, just
	// under the 97.7% orientability threshold of 2-choice, 4-slot cuckoo
	// tables. Offline placement reaches it in most blocks; the rest get a
	// bucket or two more. A high ceiling matters because the fingerprint
	// width is chosen as the widest that fits the budget at this load.
	defaultMaxLoad = 0.97
	// minLoad bounds how empty a filter may be planned, which bounds the
	// smallest false-positive rate a target can ask for: with f=16 at this
	// load the rate is about 2.4e-5... below that, spend the bits elsewhere.
	minLoad = 0.2
	// fixedOverheadBits is header plus checksum.
	fixedOverheadBits = (headerSize + trailerSize) * 8
)

// expectedFPR is the false-positive rate of a lookup that compares a random
// fingerprint against the 2·4·load occupied slots of its two buckets;
// fingerprints are uniform over [1, 2^f-1].
func expectedFPR(f uint, load float64) float64 {
	return 1 - math.Pow(1-1/float64(uint32(1)<<f-1), 2*slots*load)
}

// estOffsetBits estimates the offset table's size for d keys in c blocks:
// cumulative block sizes drift from the average by a Brownian bridge of
// standard deviation about sqrt(d)/2 keys, i.e. sqrt(d)/8 buckets.
func estOffsetBits(d, c int) float64 {
	if c <= 1 {
		return 0 // a single block starts at 0 and ends at N: both deltas are 0
	}
	dev := 4*math.Sqrt(float64(d))/8 + 2
	return float64(c+1) * (math.Ceil(math.Log2(dev)) + 2)
}

type shape struct {
	fpBits uint
	load   float64
}

// chooseShape picks the fingerprint width and planned load for d distinct
// keys. With a bits-per-key budget it takes the widest fingerprint whose
// buckets still fit at the maximum load, then spends any slack on a lower
// load (the false-positive rate is proportional to load, so slack is never
// wasted). With a target rate it takes the cheapest width that meets it.
func chooseShape(o *Options, d, blocks int, maxLoad float64) shape {
	overhead := float64(fixedOverheadBits) + estOffsetBits(d, blocks)
	if o.FingerprintBits != 0 {
		f := uint(o.FingerprintBits)
		load := maxLoad
		switch {
		case o.FalsePositiveRate > 0:
			load = math.Min(maxLoad, loadForFPR(f, o.FalsePositiveRate))
		case o.BitsPerKey > 0 && d > 0:
			avail := o.BitsPerKey*float64(d) - overhead
			load = math.Min(maxLoad, float64(f-1)*float64(d)/math.Max(avail, 1))
		}
		return shape{f, math.Max(load, minLoad)}
	}
	if o.FalsePositiveRate > 0 {
		best := shape{maxFPBits, minLoad}
		bestBits := math.Inf(1)
		for f := uint(minFPBits); f <= maxFPBits; f++ {
			load := math.Min(maxLoad, loadForFPR(f, o.FalsePositiveRate))
			if load < minLoad {
				continue
			}
			if bits := float64(f-1) / load; bits < bestBits {
				best, bestBits = shape{f, load}, bits
			}
		}
		return best
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = DefaultBitsPerKey
	}
	// Per key, slots cost (f-1)/load bits; the fixed overhead is shared.
	perKey := budget
	if d > 0 {
		perKey = budget - overhead/float64(d)
	}
	for f := uint(maxFPBits); f >= minFPBits; f-- {
		if load := float64(f-1) / perKey; load <= maxLoad {
			return shape{f, math.Max(load, minLoad)}
		}
	}
	return shape{minFPBits, maxLoad}
}

// loadForFPR inverts expectedFPR for a given width.
func loadForFPR(f uint, fpr float64) float64 {
	if fpr >= 1 {
		return math.Inf(1)
	}
	return math.Log1p(-fpr) / (2 * slots * math.Log1p(-1/float64(uint32(1)<<f-1)))
}
