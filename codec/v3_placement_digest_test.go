package codec

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// v3PlacementDigest is the SHA-256 of the version-3 blocks and build
// statistics of v3PlacementCorpus: it freezes every placement decision of
// the version-3 builder (planning, the quotient sort, repeat removal,
// overflow, evictions, thresholds, encoding) on filters large enough to
// overflow many lines, so that speed work on the builder can show it
// writes the same bytes. Change it only together with a deliberate change
// of planning or placement (which keeps the format readable but makes new
// blocks differ), and say so in the commit. (Taken again, before any
// version-3 block was released, when the primary line came from a fixed
// line hash, small filters came to keep a large one's shape, and repeats
// came to be removed by sort once one is seen; and again when BuildStats
// gained Version, with every block's bytes unchanged.)
const v3PlacementDigest = "28367c8071b108faf8dc05d4a50422bbe423b9f800a0279d8a764c15e2003281"

// v3BalancedDigest is v3PlacementDigest for the default plan, whose lines
// keep second-line reads under linev3.SecondLineCap (the corpus built without
// Options.Densest; v3PlacementDigest is the densest plan's, which every
// version-3 block had before the default changed).
const v3BalancedDigest = "e4aa1fec82c093c52ad4787fde8260e9e07cbff8053b10212d7c391c74c943ec"

// v3PlacementCorpus builds version-3 blocks under pinned seeds: several
// sizes and budgets, non-consecutive repeats, false-positive targets, a
// forced remainder width, sequential keys and host hashes.
func v3PlacementCorpus(densest bool) []byte {
	h := sha256.New()
	for _, n := range []int{1, 7, 100, 1000, 33_333, 100_000} {
		for _, bpk := range []float64{4, 6, 10, 13.5, 16, 30} {
			for seed := uint32(1); seed <= 2; seed++ {
				b := NewBuilder(Options{BitsPerKey: bpk, Seed: seed, Version: 3, Densest: densest})
				b.exactVersion = true // 4 bits/key: the small shapes older releases wrote
				keys := testkeys.Random(n, 16, uint64(seed))
				for _, k := range keys {
					b.Add(k)
				}
				if n > 1000 {
					for _, k := range keys[:n/10] { // repeats, not consecutive
						b.Add(k)
					}
				}
				h.Write(b.Finish(nil))
				fmt.Fprint(h, digestStats(b.Stats()))
			}
		}
	}
	for _, o := range []Options{{FalsePositiveRate: 0.001, Seed: 9}, {FalsePositiveRate: 0.05, Seed: 10}, {FingerprintBits: 9, Seed: 11}} {
		o.Version, o.Densest = 3, densest
		b := NewBuilder(o)
		for _, k := range testkeys.Sequential("k", 0, 50_000) {
			b.Add(k)
		}
		h.Write(b.Finish(nil))
		fmt.Fprint(h, digestStats(b.Stats()))
	}
	b := NewBuilder(Options{Hash: HashHost32, Seed: 3, Version: 3, Densest: densest})
	for i := range 20_000 {
		b.AddHash32(uint32(i * 7919))
	}
	h.Write(b.Finish(nil))
	fmt.Fprint(h, digestStats(b.Stats()))
	return h.Sum(nil)
}

func TestV3PlacementDigest(t *testing.T) {
	race.SkipLong(t)
	if got := fmt.Sprintf("%x", v3PlacementCorpus(true)); got != v3PlacementDigest {
		t.Errorf("version-3 blocks of the placement corpus changed (densest plan): digest %s, want %s", got, v3PlacementDigest)
	}
	if got := fmt.Sprintf("%x", v3PlacementCorpus(false)); got != v3BalancedDigest {
		t.Errorf("version-3 blocks of the placement corpus changed (default plan): digest %s, want %s", got, v3BalancedDigest)
	}
}

// digestStats is BuildStats laid out as one flat record, every version's
// fields side by side, as the placement digests have always hashed it
// (fmt's %+v prints field names and values, not the type).
func digestStats(st BuildStats) string {
	type flatStats struct {
		Version         int
		Keys            int
		FingerprintBits int
		Buckets         int
		Load            float64
		Reseeds         int
		Seed            uint32
		Bytes           int
		Lines           int
		WideLines       int
		PrimaryOverflow int
		Overflowed      int
		OverflowLines   int
		OverflowBits    int
		SecondLineShare float64
		Fallback        bool
		Quotients       int
		LineCapacity    int
		SeededLines     bool
		Blocks          int
		PlannedLoad     float64
		BumpedBlocks    int
	}
	return fmt.Sprintf("%+v", flatStats{st.Version, st.Keys, st.V1.FingerprintBits + st.V2.FingerprintBits + st.V3.RemainderBits,
		st.V1.Buckets + st.V2.Buckets, st.V1.Load + st.V2.Load + st.V3.Load, st.Reseeds, st.Seed, st.Bytes,
		st.V2.Lines + st.V3.Lines, st.V2.WideLines, st.V2.PrimaryOverflow + st.V3.PrimaryOverflow,
		st.V2.Overflowed + st.V3.Overflowed, st.V2.OverflowLines + st.V3.OverflowLines, st.V2.OverflowBits,
		st.V2.SecondLineShare + st.V3.SecondLineShare, st.Fallback, st.V3.Quotients, st.V3.LineCapacity, st.V3.SeededLines,
		st.V1.Blocks, st.V1.PlannedLoad, st.V1.BumpedBlocks})
}
