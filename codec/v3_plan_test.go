package codec

import (
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestV3RandomKeysNeverFallBack builds random keys, which nobody aimed at
// the seed, at every budget from below the smallest filter to past the
// largest and at several false-positive targets, for table sizes from one
// key to a few thousand: no build may end in the always-maybe block (a
// table whose filter excludes nothing), and reseeds must stay rare. A
// plan whose lines hold many more keys per quotient than a run may hold
// (v3MaxRun) fails under every seed.
func TestV3RandomKeysNeverFallBack(t *testing.T) {
	builds, reseeds := 0, 0
	for _, o := range []Options{{BitsPerKey: 0.5}, {BitsPerKey: 1}, {BitsPerKey: 2}, {BitsPerKey: 3}, {BitsPerKey: 4}, {BitsPerKey: 6},
		{BitsPerKey: 10}, {BitsPerKey: 24}, {BitsPerKey: 48}, {FalsePositiveRate: 0.9}, {FalsePositiveRate: 0.3}, {FalsePositiveRate: 1e-6}} {
		o.Version = 3
		for n := 1; n <= 4000; n += 1 + n/16 {
			keys := testkeys.Random(n, 16, uint64(n))
			b := NewBuilder(o)
			for _, k := range keys {
				b.Add(k)
			}
			block := b.Finish(nil)
			st := b.Stats()
			builds++
			reseeds += st.Reseeds
			name := fmt.Sprintf("%+v n=%d", o, n)
			if st.Fallback {
				p := planV3(&o, n)
				t.Errorf("%s: random keys fell back to always-maybe (plan %+v: %.0f keys per quotient)", name, p, float64(n)/float64(p.lines)/float64(p.shape.q))
				continue
			}
			mustNotMiss(t, name, block, keys)
		}
	}
	if reseeds > builds/100 {
		t.Errorf("%d reseeds in %d builds of random keys", reseeds, builds)
	}
}
