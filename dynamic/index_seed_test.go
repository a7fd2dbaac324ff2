package dynamic

import "testing"

// TestIndexSeedsDiffer: each Index draws its own secret seed (crypto/rand),
// which places every key and its second bucket; a fixed seed would let
// anyone precompute keys that crowd one bucket pair (TestIndexCraftedClusters
// plays such an adversary with the seed in hand) in every store at once.
func TestIndexSeedsDiffer(t *testing.T) {
	a, b := NewIndex(100, 10), NewIndex(100, 10)
	if a.seed == b.seed {
		t.Fatalf("two indexes drew the same seed %#x", a.seed)
	}
	if a.altHash == b.altHash {
		t.Fatal("two indexes place second buckets alike")
	}
}
