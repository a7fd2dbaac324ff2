package dbbench

import (
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// The per-level line-up's fits for absent Gets, which never read L6's
// filters (Pebble reads them only for an iterator with
// IterOptions.UseL6Filters): tablefilter.LevelShape.SkipL6 1.
const (
	// FuseGets is binary fuse per level fitted for absent Gets: L6
	// without a filter, each level above at one of Pebble master's
	// widths, at most LevelsFitted's filter bytes.
	FuseGets = "binary-fuse/levels-fit-get"
	// LevelsGets and V4Gets are lsmcuckoo per level (format versions 3
	// and 4) fitted for absent Gets at FuseGets' filter bytes.
	LevelsGets = "lsmcuckoo/levels-fit-get@fuse-get-bytes"
	V4Gets     = "lsmcuckoo-v4/levels-fit-get@fuse-get-bytes"
	// V4Mixed is version 4 fitted at FuseFitted's filter bytes for a mix
	// of absent Gets and prefix seeks with L6 filters (MixedFit): one
	// allocation held against FuseFitted on both.
	V4Mixed = "lsmcuckoo-v4/levels-fit-mixed@fuse-bytes"
)

// GetLineup is the Get-fitted part of the per-level line-up; its
// policies, and FuseFitted and V4AtFuse, count their false positives per
// absent Get over PebbleConfig.GetFPProbes probes.
func GetLineup() []Policy {
	return []Policy{
		fittedFuse(FuseGets, LevelsFitted, 1),
		fittedLevelsAt(LevelsGets, FuseGets, FitV3, 1),
		fittedLevelsAt(V4Gets, FuseGets, FitV4, 1),
		{Name: V4Mixed, MatchTo: []string{FuseFitted, LevelsFitted}, Match: func(o *pebble.Options, s tablefilter.LevelShape, built map[string]Tree) {
			m := MixedFit(s, built[LevelsFitted], built[FuseFitted])
			FitV4.Set(o, m.Rows[m.Chosen].Budgets)
		}},
	}
}

// GetProbed are the policies whose false-positive reads per absent Get
// are counted over PebbleConfig.GetFPProbes probes: a Get-fitted tree
// reads about 1e-5 tables in vain per table it consults, which the timed
// workloads' probes cannot resolve.
var GetProbed = []string{FuseFitted, V4AtFuse, FuseGets, LevelsGets, V4Gets, V4Mixed}

// MixedShares are the shares of absent lookups that are Gets MixedFit
// tries.
var MixedShares = []float64{0, 0.5, 0.9, 0.99, 0.995, 0.999}

// MixedL6 are the L6 budgets MixedFit pins.
var MixedL6 = []float64{4.5, 5, 5.5, 6, 6.5, 7}

// MixedRow is one share's fit in MixedFit, with its modelled tables read
// in vain per absent prefix seek with L6 filters and per absent Get, each
// as a ratio to the fitted fuse's.
type MixedRow struct {
	// SkipL6 is the share of Gets the fit was asked for, or, when L6 is
	// over 0, the fit pinned L6 at that budget and fitted the levels
	// above for Gets with what is left of the average.
	SkipL6, L6          float64
	Budgets             [7]float64
	SeekRatio, GetRatio float64
}

// Mixed is MixedFit's answer: every share's row and the one chosen.
type Mixed struct {
	Rows []MixedRow
	// Chosen is the first row whose fit reads at most 0.8× the fuse's
	// tables in vain on both workloads, or, when none does, the row whose
	// worse ratio is the smallest; Found says which.
	Chosen int
	Found  bool
	// FuseWidths are FuseFitted's widths the model compares with.
	FuseWidths [7]int
}

// MixedFit asks whether one version-4 allocation at the fitted fuse's
// filter bytes beats it on absent prefix seeks with L6 filters and on
// absent Gets: for each share in MixedShares, the fit for lookups of
// which that share are Gets (tablefilter.LevelShape.SkipL6), its tables
// read in vain on the rate model (codec.PlannedFPR for version 4, 2^-width
// for the fuse, whose widths FuseLevelWidths gives as FittedFuse did),
// and the ratios to the fuse's. fitted is LevelsFitted's tree, whose
// bytes the fuse was fitted to, and fuse the fuse's, whose bytes the
// fits spend (scaled as FittedLevelsAt does).
func MixedFit(shape tablefilter.LevelShape, fitted, fuse Tree) Mixed {
	var m Mixed
	m.FuseWidths = FuseLevelWidths(shape, fitted.BitsPerKey(), fitted.KeysPerTable())
	avg := fuse.BitsPerKey() * 10 / fitted.BitsPerKey()
	avg = max(tablefilter.MinBitsPerKey, min(tablefilter.MaxBitsPerKey, avg))
	var fuseRate [7]float64
	for l, w := range m.FuseWidths {
		fuseRate[l] = 1
		if w != NoFuse {
			fuseRate[l] = math.Ldexp(1, -w)
		}
	}
	fuseSeek, fuseGet := modelReads(shape, fuseRate)
	var candidates []MixedRow
	for _, p := range MixedShares {
		s := shape
		s.SkipL6 = p
		candidates = append(candidates, MixedRow{SkipL6: p, Budgets: FitV4.Budgets(s, avg)})
	}
	// The shares trace only the allocations a weighted sum of the two
	// workloads' reads can reach (the rate curve is not convex): also pin
	// L6 at each budget and fit the levels above for Gets with the rest.
	var total float64
	for _, k := range shape.Keys {
		total += max(k, 0)
	}
	for _, b6 := range MixedL6 {
		w6 := shape.Keys[6] / total
		if !(w6 > 0 && w6 < 1) || b6 > avg {
			continue
		}
		s := shape
		s.Keys[6], s.SkipL6 = 0, 1
		rest := (avg - w6*b6) / (1 - w6)
		if rest < tablefilter.MinBitsPerKey {
			continue
		}
		b := FitV4.Budgets(s, min(rest, tablefilter.MaxBitsPerKey))
		b[6] = b6
		candidates = append(candidates, MixedRow{SkipL6: 1, L6: b6, Budgets: b})
	}
	worst := math.Inf(1)
	for _, row := range candidates {
		var rate [7]float64
		for l, x := range row.Budgets {
			rate[l] = 1
			if x != tablefilter.NoFilter {
				rate[l] = codec.PlannedFPR(codec.Options{BitsPerKey: x, Version: codec.NewestVersion}, 100_000)
			}
		}
		seek, get := modelReads(shape, rate)
		row.SeekRatio, row.GetRatio = seek/fuseSeek, get/fuseGet
		m.Rows = append(m.Rows, row)
		if !m.Found && row.SeekRatio <= 0.8 && row.GetRatio <= 0.8 {
			m.Chosen, m.Found = len(m.Rows)-1, true
		}
		if w := max(row.SeekRatio, row.GetRatio); !m.Found && w < worst {
			m.Chosen, worst = len(m.Rows)-1, w
		}
	}
	return m
}

// modelReads is the tables read in vain per absent prefix seek with L6
// filters and per absent Get (L6 skipped) for the rate of each level's
// filter, on the populated levels of shape.
func modelReads(shape tablefilter.LevelShape, rate [7]float64) (seek, get float64) {
	for l, k := range shape.Keys {
		if !(k > 0) {
			continue
		}
		runs := 1.0
		if l == 0 {
			runs = max(shape.L0Runs, 1)
		}
		seek += runs * rate[l]
		if l < 6 {
			get += runs * rate[l]
		}
	}
	return seek, get
}

// measureGetFP counts the false-positive reads per absent Get of the
// stores whose policies GetProbed names, over cfg.GetFPProbes probes each
// (untimed), after a warm-up of cfg.Probes/4.
func measureGetFP(stores []*Store, names []string, cfg PebbleConfig, say func(string)) ([]PebbleResult, error) {
	if cfg.GetFPProbes <= 0 {
		return nil, nil
	}
	var out []PebbleResult
	for i, s := range stores {
		if !slices.Contains(GetProbed, names[i]) {
			continue
		}
		say(fmt.Sprintf("pebble false positives per absent Get, %d probes: %s", cfg.GetFPProbes, names[i]))
		if err := s.warm(AbsentGet, cfg.Probes/4); err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		// In chunks, so millions of keys are never held at once.
		var sp span
		probe := Prober(cfg, AbsentGet, 43)
		for done := 0; done < cfg.GetFPProbes; {
			n := min(100_000, cfg.GetFPProbes-done)
			keys, present := make([][]byte, n), make([]bool, n)
			for j := range keys {
				keys[j], present[j] = probe(done + j)
			}
			part, err := s.measure(AbsentGet, keys, present)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
			sp.add(part)
			done += n
		}
		out = append(out, sp.result(names[i], AbsentGet, 0))
	}
	return out, nil
}
