package codec

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// v4WideDigest is the SHA-256 of v4WideCorpus's blocks and statistics:
// it widens v4PlacementDigest to sizes from 0 keys up, the budgets of
// binary fuse's widths on tables of 30k and 100k keys, the thinnest
// budgets that still hold a line's keys (where contradictions and
// evictions abound), the sparsest, and repeats in several shares, so
// that speed work on the version-4 builder shows it writes the same
// bytes. Change it only together with a deliberate change of placement.
const v4WideDigest = "b2b76022a27a42e0ceeaf45c4917334c3313ce47f37f48b11769e75b7c7b2623"

func v4WideCorpus() []byte {
	h := sha256.New()
	sizes := []int{0, 1, 2, 3, 5, 8, 13, 31, 64, 65, 127, 128, 129, 200, 500, 999, 2047, 4096, 10_000, 30_000, 100_000}
	budgets := []float64{4.3, 5, 6.5, 8, 9.5, 9.84, 11.88, 12.3, 14.26, 14.75, 19.01, 19.67, 24, 48}
	for i, n := range sizes {
		for j, bpk := range budgets {
			if n >= 30_000 && j%2 == 1 && bpk != 9.84 && bpk != 19.01 {
				continue // keep the test short: half the budgets on the largest sizes
			}
			seed := uint32(100 + i*len(budgets) + j)
			b := NewBuilder(Options{BitsPerKey: bpk, Seed: seed, Version: NewestVersion})
			b.exactVersion = true
			keys := testkeys.Random(n, 16, uint64(seed))
			for _, k := range keys {
				b.Add(k)
			}
			for _, k := range keys[:n/(2+j%4)] { // repeats in several shares
				b.Add(k)
			}
			h.Write(b.Finish(nil))
			fmt.Fprintf(h, "%+v", b.Stats())
		}
	}
	return h.Sum(nil)
}

func TestV4WideDigest(t *testing.T) {
	race.SkipLong(t)
	if got := fmt.Sprintf("%x", v4WideCorpus()); got != v4WideDigest {
		t.Errorf("version-4 blocks of the wide corpus changed: digest %s, want %s", got, v4WideDigest)
	}
}
