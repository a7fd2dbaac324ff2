package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestMemFilterStashedKeysFound: keys that no relocation can place while
// the segment is mostly empty go to the stash, and a stashed key must be
// found like any other. The stash is only searched while it is not
// saturated (a saturated filter answers "maybe" for everything, which
// hides a stash that loses keys), so this fills it part way: one crafted
// window of buckets holding more fingerprints than slots.
func TestMemFilterStashedKeysFound(t *testing.T) {
	for _, seed := range []uint32{0x5eed, 1, 2, 3} {
		f := newMemFilterSeeded(3000, seed)
		s := (*f.segments.Load())[0]
		cluster := craftMemCluster(s, seed, 0, 6)
		cluster = cluster[:min(len(cluster), 4*6+memStashSize/2)]
		if len(cluster) <= 4*6 {
			t.Fatalf("seed %#x: the crafted window holds no more fingerprints than slots", seed)
		}
		for _, h := range cluster {
			f.addHash(h)
		}
		st := f.Stats()
		if st.Stashed == 0 || st.Saturated || st.Segments != 1 {
			t.Fatalf("seed %#x: want some keys stashed, the stash not saturated, one segment: %+v", seed, st)
		}
		for _, h := range cluster {
			x, fp, hi := f.mixed(h)
			if !f.contains(x, fp, hi) {
				t.Fatalf("seed %#x: false negative for hash %#x (%d keys stashed)", seed, h, st.Stashed)
			}
		}
	}
}

// TestMemFilterGrowthDoubles: every lookup probes every segment, so the
// segments must stay logarithmic in the keys: each new segment is twice the
// newest. A filter that grew by equal steps would answer a lookup in time
// linear in its keys, and with a false-positive rate growing as fast.
func TestMemFilterGrowthDoubles(t *testing.T) {
	const hint = 1000
	f := NewMemFilter(hint)
	keys := testkeys.Random(64*hint, 16, 91)
	for _, k := range keys {
		f.Add(k)
	}
	st := f.Stats()
	// 64 times the hint fits in the first segment and six doublings
	// (1+2+...+64 = 127 first segments' worth); allow one more for
	// segments filled below their planned load.
	t.Logf("%+v", st)
	if st.Segments > 8 || st.Saturated {
		t.Errorf("%d keys, 64 times the hint: %+v, want at most 8 segments", len(keys), st)
	}
	for _, k := range keys {
		if !f.MayContain(k) {
			t.Fatalf("false negative for %x", k)
		}
	}
}
