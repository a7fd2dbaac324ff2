package codec

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// v4PlacementDigest is the SHA-256 of the version-4 blocks and build
// statistics of v4PlacementCorpus: it freezes every placement decision of
// the version-4 builder (planning, the priority sort, repeat removal,
// overflow, evictions, contradictions, thresholds, the solved columns) on
// filters large enough to overflow many lines, so that speed work on the
// builder can show it writes the same bytes. Change it only together with
// a deliberate change of planning or placement, and say so in the commit.
const v4PlacementDigest = "f17adc2c9ff75dcab3a2b84a2d7ab4ea0793fbfda5ba2d3ff3f184690472b5a5"

// v4PlacementCorpus builds version-4 blocks under pinned seeds: several
// sizes and budgets, non-consecutive repeats, false-positive targets, a
// forced fingerprint width, sequential keys and host hashes.
func v4PlacementCorpus() []byte {
	h := sha256.New()
	for _, n := range []int{1, 7, 100, 1000, 33_333, 100_000} {
		for _, bpk := range []float64{8.5, 10, 13.5, 16, 19.67, 30} {
			for seed := uint32(1); seed <= 2; seed++ {
				b := NewBuilder(Options{BitsPerKey: bpk, Seed: seed, Version: NewestVersion})
				b.exactVersion = true
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
				fmt.Fprintf(h, "%+v", b.Stats())
			}
		}
	}
	for _, o := range []Options{{FalsePositiveRate: 0.001, Seed: 9}, {FalsePositiveRate: 0.05, Seed: 10}, {FingerprintBits: 9, Seed: 11}} {
		o.Version = NewestVersion
		b := NewBuilder(o)
		b.exactVersion = true
		for _, k := range testkeys.Sequential("k", 0, 50_000) {
			b.Add(k)
		}
		h.Write(b.Finish(nil))
		fmt.Fprintf(h, "%+v", b.Stats())
	}
	b := NewBuilder(Options{Hash: HashHost32, Seed: 3, Version: NewestVersion})
	for i := range 20_000 {
		b.AddHash32(uint32(i * 7919))
	}
	h.Write(b.Finish(nil))
	fmt.Fprintf(h, "%+v", b.Stats())
	return h.Sum(nil)
}

func TestV4PlacementDigest(t *testing.T) {
	race.SkipLong(t)
	if got := fmt.Sprintf("%x", v4PlacementCorpus()); got != v4PlacementDigest {
		t.Errorf("version-4 blocks of the placement corpus changed: digest %s, want %s", got, v4PlacementDigest)
	}
}
