package codec

import (
	"math"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
)

// smallBudgetPrefersV2 reports whether a version-3 request is served by a
// version-2 block instead: at a budget of a few bits per key a line's
// header leaves version 3's remainders one or two bits, and version 2's
// buckets give the lower modelled rate (at 3 bits per key or less no
// version-3 shape filters at all). With a target rate the smaller block
// that meets it wins. The choice is made for a large filter, so that a
// table of any size at one setting gets one version, and against version
// 3's densest plan, so that the layout (Options.Densest) never changes
// the version: version 2 fills its lines as densely. Every reader of
// version 3 reads version 2. A forced remainder width keeps version 3.
func smallBudgetPrefersV2(o *Options) bool {
	if o.Version != FormatVersion || o.FingerprintBits != 0 {
		return false
	}
	memo := &versionChoices[linev3.RecentSlot(math.Float64bits(o.BitsPerKey), math.Float64bits(o.FalsePositiveRate))]
	if m := memo.Load(); m != nil && m.bpk == o.BitsPerKey && m.rate == o.FalsePositiveRate {
		return m.v2
	}
	const n = 1 << 20
	sz := frame.Sizing{BitsPerKey: o.BitsPerKey, FalsePositiveRate: o.FalsePositiveRate, FingerprintBits: o.FingerprintBits}
	sz3 := sz
	sz3.Densest = true // the choice between formats does not follow the layout
	p3 := linev3.PlanFor(&sz3, n)
	f3 := linev3.ExpectedFPR(p3.Shape, float64(n)/float64(p3.Lines))
	f2 := linev2.PlannedFPR(&sz, n)
	v2 := f2 < f3
	if t := o.FalsePositiveRate; t > 0 && !math.IsNaN(t) {
		meets2, meets3 := f2 <= t, f3 <= t
		switch {
		case meets2 && meets3:
			v2 = linev2.PlanFor(&sz, n).Lines < p3.Lines
		case meets2 != meets3:
			v2 = meets2
		}
	}
	memo.Store(&versionChoice{o.BitsPerKey, o.FalsePositiveRate, v2})
	return v2
}

// versionChoice is an answer of smallBudgetPrefersV2, for the setting
// asked: writers build table after table at a few settings (a tree's
// levels, each with its own budget).
type versionChoice struct {
	bpk, rate float64
	v2        bool
}

// versionChoices remembers recent answers, each in the slot its setting
// hashes to.
var versionChoices [linev3.RecentSlots]atomic.Pointer[versionChoice]

// PlannedFPR is the false-positive rate that a filter of keys distinct
// keys, built with o, is planned to have, in the format o.Version selects
// (0 or 3: version 3, or version 2 where the builder writes it instead
// at a small budget; 4: version 4, or version 3's densest layout where
// the builder writes that instead; 2: version 2; 1 is modelled as version 2, whose
// bucket rate it shares within a few percent): from the shape and load the
// builder will choose, before any block exists. It is the rate model for
// callers that choose a budget without building a filter (per-level
// budgets in tablefilter); Filter.Info().ExpectedFPR is the same figure
// for a block that exists. Version 3's model counts its second-line
// reads; version 2's does not.
func PlannedFPR(o Options, keys int) float64 {
	if keys <= 0 {
		return 0
	}
	sz := frame.Sizing{BitsPerKey: o.BitsPerKey, FalsePositiveRate: o.FalsePositiveRate, FingerprintBits: o.FingerprintBits, Densest: o.Densest}
	if o.Version == NewestVersion {
		if v4Serves(&o) {
			p, _ := linev4.PlanFor(&sz, keys)
			return linev4.ExpectedFPR(p.Shape, float64(keys)/float64(p.Lines), p.K)
		}
		o.Version, o.Densest, sz.Densest = FormatVersion, true, true
	}
	if o.Version != 1 && o.Version != 2 {
		o.Version = FormatVersion
		if !smallBudgetPrefersV2(&o) {
			p := linev3.PlanFor(&sz, keys)
			return linev3.ExpectedFPR(p.Shape, float64(keys)/float64(p.Lines))
		}
	}
	return linev2.PlannedFPR(&sz, keys)
}
