package codec

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// v2LargeDigest is TestV2PlacementDigest's guard for filters too large
// for its corpus: the builder takes paths of its own (touching lines
// ahead in the secondary rounds) once its placement state outgrows a
// second-level cache, and those paths must decide the same. The value is
// the digest the builder produced before its speed work, changed twice
// since, deliberately: filters with non-consecutive repeats (5% here) are
// planned for their distinct keys, and placed with their repeats removed
// (finishV2, dropRepeats).
const v2LargeDigest = "1929995c445fdb90bdad7eb59e46808912c5aad782ec147d1ee0093755c45f17"

func TestV2PlacementDigestLarge(t *testing.T) {
	race.SkipLong(t)
	if testing.Short() {
		t.Skip("builds six filters of up to a million keys")
	}
	h := sha256.New()
	for _, n := range []int{400_000, 1_000_000} {
		for _, bpk := range []float64{7, 10, 16} {
			b := NewBuilder(Options{BitsPerKey: bpk, Seed: 7, Version: 2})
			keys := testkeys.Random(n, 16, 3)
			for _, k := range keys {
				b.Add(k)
			}
			for _, k := range keys[:n/20] { // repeats, not consecutive
				b.Add(k)
			}
			h.Write(b.Finish(nil))
			h.Write(v2StatsText(b.Stats()))
		}
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != v2LargeDigest {
		t.Errorf("version-2 blocks of large filters changed: digest %s, want %s", got, v2LargeDigest)
	}
}
