package dynamic

import (
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
)

var sweep = flag.Bool("sweep", false, "run TestIndexLoadSweep")

// TestIndexLoadSweep reports, for each tag width, the load at which a
// segment's first insert fails over 30 segment sizes of 10k to 100k
// buckets (`go test ./dynamic -run TestIndexLoadSweep -sweep -v`): the
// measurement behind idxTagLoad. It asserts only that every size passes the
// load segments are sized to, as TestIndexTagLoads does for fewer sizes.
func TestIndexLoadSweep(t *testing.T) {
	if !*sweep {
		t.Skip("a measurement: run with -sweep")
	}
	for m := uint(idxTag); m < uint(len(idxTagLoad)); m++ {
		rng := rand.New(rand.NewPCG(3, uint64(m)))
		var loads []float64
		for run := range 30 {
			nb := 10_000 + rng.IntN(90_000)
			x := newIndexSeeded(1000, 14, uint32(run+1))
			x.w, x.m, x.d = m+idxMinDepth, m, idxMinDepth
			s := x.newSegment(uint64(nb))
			placed := 0
			for {
				p := x.probeOf(rng.Uint64())
				v := x.slotValue(p, 1, 1)
				if x.dupOrFree(s, p, v) == idxDuplicate {
					continue
				}
				if !x.insertSegment(s, p, v, true) {
					break
				}
				placed++
			}
			loads = append(loads, float64(placed)/float64(s.n*idxSlots))
		}
		slices.Sort(loads)
		t.Logf("%d-bit tags: first failed insert at load %.4f (lowest), %.4f (median), %.4f (highest); sized to %.3f", m, loads[0], loads[len(loads)/2], loads[len(loads)-1], idxTagLoad[m])
		if loads[0] < idxTagLoad[m] {
			t.Errorf("%d-bit tags: a segment failed at %.4f, below %.3f", m, loads[0], idxTagLoad[m])
		}
	}
}
