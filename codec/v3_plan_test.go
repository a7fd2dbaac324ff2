package codec

import (
	"fmt"
	"math"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestV3RandomKeysNeverFallBack builds random keys, which nobody aimed at
// the seed, at every budget from below the smallest filter to past the
// largest and at several false-positive targets, for table sizes from one
// key to a few thousand: no build may end in the always-maybe block (a
// table whose filter excludes nothing), and reseeds must stay rare. A
// plan whose lines hold many more keys per quotient than a run may hold
// (linev3.MaxRun) fails under every seed.
func TestV3RandomKeysNeverFallBack(t *testing.T) {
	race.SkipLong(t)
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
				p := linev3.PlanFor(sizingOf(&o), n)
				t.Errorf("%s: random keys fell back to always-maybe (plan %+v: %.0f keys per quotient)", name, p, float64(n)/float64(p.Lines)/float64(p.Shape.Q))
				continue
			}
			mustNotMiss(t, name, block, keys)
		}
	}
	if reseeds > builds/100 {
		t.Errorf("%d reseeds in %d builds of random keys", reseeds, builds)
	}
}

// TestV3SecondLineShareMatchesStats: BuildStats.SecondLineShare is the
// expected share of negative lookups that read a second line (those whose
// quotient is at or past their primary line's threshold); measured with
// FORMAT.md's reader's thresholds over absent keys it must agree.
func TestV3SecondLineShareMatchesStats(t *testing.T) {
	keys := testkeys.Random(100_000, 16, 51)
	absent := testkeys.Absent(200_000, 52)
	for _, bpk := range []float64{6, 10, 16} {
		b := NewBuilder(Options{BitsPerKey: bpk, Seed: 53, Version: 3})
		for _, k := range keys {
			b.Add(k)
		}
		block := b.Finish(nil)
		st := b.Stats()
		spec := newSpecV3(t, block)
		second := 0
		for _, k := range absent {
			h := specMulHash(k)
			prim, _ := v3Where(h, st.Seed, linev3.Plan{Shape: linev3.Shape{R: uint32(spec.r), K: uint32(spec.k), Q: uint32(spec.q)}, Lines: uint32(spec.lines)}, spec.seededLines)
			if prim.q >= spec.threshold(prim.line) {
				second++
			}
		}
		got := float64(second) / float64(len(absent))
		sigma := math.Sqrt(st.V3.SecondLineShare * (1 - st.V3.SecondLineShare) / float64(len(absent)))
		t.Logf("bpk %v: %.4f of negative lookups read a second line, stats say %.4f", bpk, got, st.V3.SecondLineShare)
		if math.Abs(got-st.V3.SecondLineShare) > 5*sigma+0.002 {
			t.Errorf("bpk %v: %.4f of negative lookups read a second line, stats say %.4f", bpk, got, st.V3.SecondLineShare)
		}
	}
}

// TestV3SecondLineModel: linev3.SecondLineShare, which the default plan is
// chosen by, predicts the share of negative lookups that read a second
// line (BuildStats.SecondLineShare, itself checked against lookups
// above) on large random key sets, for both layouts at every budget from
// 7 to 20 bits per key, and for lines planned far below and near full.
func TestV3SecondLineModel(t *testing.T) {
	race.SkipLong(t)
	keys := testkeys.Random(300_000, 16, 61)
	check := func(name string, o Options) {
		t.Helper()
		b := NewBuilder(o)
		for _, k := range keys {
			b.Add(k)
		}
		b.Finish(nil)
		st := b.Stats()
		p := linev3.PlanFor(sizingOf(&o), len(keys))
		model := linev3.SecondLineShare(p.Shape, float64(len(keys))/float64(p.Lines))
		t.Logf("%s: shape %+v, share %.4f, model %.4f", name, p.Shape, st.V3.SecondLineShare, model)
		if math.Abs(model-st.V3.SecondLineShare) > 0.1*st.V3.SecondLineShare+0.002 {
			t.Errorf("%s: modelled share %.4f, built %.4f", name, model, st.V3.SecondLineShare)
		}
	}
	for _, bpk := range []float64{7, 8, 9.6, 10, 12, 14, 16, 20} {
		for _, densest := range []bool{false, true} {
			check(fmt.Sprintf("bpk %v densest %v", bpk, densest), Options{BitsPerKey: bpk, Seed: 62, Version: 3, Densest: densest})
		}
	}
	// Shapes neither plan picks: every capacity from full lines to a
	// quarter free, at 10 bits per key.
	lam := frame.LineBits / 10.0
	for k := uint32(math.Ceil(lam / 0.97)); float64(k) < lam/0.75; k++ {
		s := linev3.BestShape(lam, k, 0)
		o := Options{BitsPerKey: 10, Seed: 63, Version: 3}
		linev3.LargeLast[0].Store(&linev3.LargeMemo{PerLine: lam, Shape: s})
		if p := linev3.PlanFor(sizingOf(&o), len(keys)); p.Shape != s {
			t.Fatalf("capacity %d: planned %+v, want %+v", k, p.Shape, s)
		}
		check(fmt.Sprintf("capacity %d", k), o)
	}
	linev3.LargeLast[0].Store(nil)
}

// TestV3DefaultPlanKeepsSecondLinesRare: the default plan keeps the share
// of negative lookups that read a second line near linev3.SecondLineCap at
// every budget it applies to and every table size, writes version 3 there,
// and spends the budget like the densest plan, at no lower a rate (that a
// larger budget never plans a higher rate is TestSmallBudgetsWriteVersion2's
// sweep); the densest plan is the one every version-3 block had before
// (TestV3PlacementDigest freezes it).
func TestV3DefaultPlanKeepsSecondLinesRare(t *testing.T) {
	race.SkipLong(t)
	for _, n := range []int{1000, 10_000, 200_000} {
		keys := testkeys.Random(n, 16, uint64(n)+64)
		for _, bpk := range []float64{7, 8, 9, 9.6, 10, 10.6, 11, 12, 13, 14, 15.9, 16, 20, 24} {
			o := Options{BitsPerKey: bpk, Seed: 65}
			b := NewBuilder(o)
			for _, k := range keys {
				b.Add(k)
			}
			block := b.Finish(nil)
			st := b.Stats()
			d := Options{BitsPerKey: bpk, Seed: 65, Densest: true}
			dense := Build(keys, d)
			name := fmt.Sprintf("n=%d bpk=%v", n, bpk)
			mustNotMiss(t, name, block, keys)
			mustNotMiss(t, name+" densest", dense, keys)
			if st.Version != 3 {
				t.Errorf("%s: version %d", name, st.Version)
				continue
			}
			// Binomial noise of a few hundred lines' thresholds.
			slack := 3 * math.Sqrt(linev3.SecondLineCap/float64(st.V3.Lines))
			if st.V3.SecondLineShare > linev3.SecondLineCap+slack {
				t.Errorf("%s: %.4f of negative lookups read a second line (cap %v)", name, st.V3.SecondLineShare, linev3.SecondLineCap)
			}
			if got, want := len(block), len(dense); got > want+want/100+8 {
				t.Errorf("%s: %d bytes, the densest plan %d", name, got, want)
			}
			fd, fb := mustInfo(t, dense).ExpectedFPR, mustInfo(t, block).ExpectedFPR
			if fb < fd {
				t.Errorf("%s: default plans rate %.4g below the densest plan's %.4g", name, fb, fd)
			}
		}
	}
}
