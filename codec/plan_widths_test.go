package codec

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
)

// TestPlannersAnyFingerprintWidth: each version's planner ends with a
// usable plan for any forced width, negative and past every shape's
// widest included, on tiny and large key counts, with a budget, a target
// rate or neither. NewBuilder clamps the width before any planner sees
// it; this holds the planners without it (version 3's and version 4's
// searches for the fewest lines never ended on a width no shape has).
func TestPlannersAnyFingerprintWidth(t *testing.T) {
	for _, fp := range []int{-1 << 40, -17, -1, 1, 4, 5, 16, 17, 31, 40, 1 << 20} {
		for _, n := range []int{0, 1, 7, 300, 100_000} {
			for _, o := range []frame.Sizing{
				{FingerprintBits: fp},
				{FingerprintBits: fp, BitsPerKey: 0.5},
				{FingerprintBits: fp, BitsPerKey: 12},
				{FingerprintBits: fp, FalsePositiveRate: 1e-9},
				{FingerprintBits: fp, FalsePositiveRate: 0.3, Densest: true},
			} {
				if p := linev2.PlanFor(&o, n); p.Lines < 1 || p.F < 5 || p.F > 16 {
					t.Fatalf("version 2, %+v, %d keys: plan %+v", o, n, p)
				}
				p3 := linev3.PlanFor(&o, n)
				if s := p3.Shape; p3.Lines < 1 || s.Q < 1 || s.K < 1 || s.R < 1 || s.R > 16 ||
					s.Q+s.K > linev3.HeaderMax || uint64(p3.Lines)*uint64(s.K) < uint64(n) {
					t.Fatalf("version 3, %+v, %d keys: plan %+v", o, n, p3)
				}
				if want := uint32(min(fp, 16)); fp > 0 && p3.Shape.R != want {
					t.Fatalf("version 3, %+v, %d keys: remainders of %d bits, want %d", o, n, p3.Shape.R, want)
				}
				if p4, _ := linev4.PlanFor(&o, n); p4.Lines < 1 || p4.Shape.R < 1 || p4.Shape.R > linev4.MaxColumns ||
					p4.Shape.M < 1 || p4.Shape.M > 128 || p4.K < 1 {
					t.Fatalf("version 4, %+v, %d keys: plan %+v", o, n, p4)
				}
			}
		}
	}
}
