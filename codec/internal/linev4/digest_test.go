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
		s := Shape{R: 1 + rng.Uint32N(MaxColumns), M: 1 + rng.Uint32N(MaxHeight)}
		switch rng.IntN(4) {
		case 0:
			s.U = 255
		case 1:
			s.U = rng.Uint32N(256)
		}
		if !s.Valid() {
			continue
		}
		k := 1 + rng.Uint32N(s.M)
		if rng.IntN(3) == 0 {
			k = Capacity(s)
		}
		lines := 1 + rng.Uint32N(40)
		n := rng.IntN(int(lines*k) + 2)
		pool := n + 1
		if rng.IntN(2) == 0 {
			pool = 1 + rng.IntN(n+1)
		}
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = uint64(rng.IntN(pool))*0x9e3779b97f4a7c15 + uint64(it)
		}
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
