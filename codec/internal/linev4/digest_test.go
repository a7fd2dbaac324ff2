package linev4

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"
)

// anyShapeDigest is the SHA-256 of the blocks and statistics anyShapeCorpus
// gives: the encoder's every decision on shapes the planner never picks
// (columns of 1 to 128 rows, capacities up to a column's height, keys
// from small pools), where contradictions, returns and failed placements
// abound, so that speed work on the encoder shows it writes the same
// bytes. Change it only together with a deliberate change of placement.
const anyShapeDigest = "d91252be5693ff94f4013996498199c4f40658089379a05150af172ccb95b9cc"

func anyShapeCorpus() []byte {
	h := sha256.New()
	rng := rand.New(rand.NewPCG(17, 19))
	var e Encoder
	for it := range 3000 {
		c, ok := drawAnyShapeCase(rng, it)
		if !ok {
			continue
		}
		s, k, lines, hashes, n := c.s, c.k, c.lines, c.hashes, len(c.hashes)
		e.Start()
		kind, seeded := uint8(rng.IntN(2)), rng.IntN(2) == 0
		block, st, ok := e.Encode(nil, [][]uint64{hashes}, n, kind, rng.Uint32(), seeded, Plan{Shape: s, Lines: lines, K: k}, lines)
		fmt.Fprintf(h, "%v %+v %d %v", ok, st, e.Repeats(), e.Crowded())
		h.Write(block)
	}
	return h.Sum(nil)
}

func TestAnyShapeDigest(t *testing.T) {
	if got := fmt.Sprintf("%x", anyShapeCorpus()); got != anyShapeDigest {
		t.Errorf("blocks of the any-shape corpus changed: digest %s, want %s", got, anyShapeDigest)
	}
}
