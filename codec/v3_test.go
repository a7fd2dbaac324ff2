package codec

import (
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

func TestV3NoFalseNegatives(t *testing.T) {
	race.SkipLong(t)
	for _, n := range []int{0, 1, 2, 3, 10, 57, 100, 1000, 10000, 100000} {
		for _, bpk := range []float64{4, 6, 8, 9.6, 10, 12, 16, 20, 30} {
			for _, densest := range []bool{false, true} {
				testV3NoFalseNegatives(t, n, bpk, densest)
			}
		}
	}
}

func testV3NoFalseNegatives(t *testing.T, n int, bpk float64, densest bool) {
	keys := testkeys.Random(n, 16, uint64(n)+7)
	b := NewBuilder(Options{BitsPerKey: bpk, Seed: 99, Densest: densest})
	for _, k := range keys {
		b.Add(k)
	}
	blk := b.Finish(nil)
	st := b.Stats()
	f, err := Decode(blk)
	if err != nil {
		t.Fatalf("n=%d bpk=%v: %v", n, bpk, err)
	}
	for i, k := range keys {
		if !MayContain(blk, k) {
			t.Fatalf("n=%d bpk=%v densest=%v: false negative %d (stats %+v)", n, bpk, densest, i, st)
		}
	}
	if n >= 10000 {
		abs := testkeys.Absent(100000, 5)
		fp := 0
		for _, k := range abs {
			if MayContain(blk, k) {
				fp++
			}
		}
		t.Log(fmt.Sprintf("n=%d bpk=%v densest=%v: %.2f bits/key FPR %.4f%% (expected %.4f%%) r=%d K=%d Q=%d p2 %.3f fallback %v", n, bpk, densest, f.Info().BitsPerKey, 100*float64(fp)/float64(len(abs)), 100*f.Info().ExpectedFPR, st.V3.RemainderBits, st.V3.LineCapacity, st.V3.Quotients, st.V3.SecondLineShare, st.Fallback))
	}
}

// buildExactV3 builds a version-3 block at any budget, even one at which
// the builder now writes version 2: readers must still read the
// small-budget shapes that earlier releases wrote.
func buildExactV3(keys [][]byte, o Options) []byte {
	o.Version = FormatVersion
	b := NewBuilder(o)
	b.exactVersion = true
	for _, k := range keys {
		b.Add(k)
	}
	return b.Finish(nil)
}
