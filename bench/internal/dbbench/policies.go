package dbbench

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/bench/binaryfuse"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Progressive is the per-level bloom setting of Pebble's unreleased master
// ("progressive" policy): 16/16/16/16/14/10/8 bits per key on L0..L6, a
// per-level bloom setting a user can copy onto Pebble v2.1.7 by hand. It is
// not fitted to the measured tree and does not spend the same filter bytes
// as the 10-bits/key policies (on a tree whose keys sit mostly on L6 it
// spends fewer), so ratios against it are not at equal bytes.
var Progressive = [7]int{16, 16, 16, 16, 14, 10, 8}

// Policies are the report's compared configurations: no filter (first: its
// tree gives the shape FittedLevels fits to), uniform bloom and lsmcuckoo
// (format version 3, the default, its densest layout, version 4, and version 2) at
// 10 bits per key,
// lsmcuckoo per level averaging 10 as
// tablefilter.SetLevelPolicies models the tree and as fitted to the
// measured tree, bloom per level at Progressive and fitted to the
// measured tree at the same average (FittedBloom), and binary fuse filters
// of 8 and 10-bit fingerprints on every level, the anchor Pebble's master
// adopts (about 9.8 and 12.3 bits per key on tables of these sizes).
func Policies() []Policy {
	var prog [7]pebble.FilterPolicy
	for l, b := range Progressive {
		prog[l] = bloom.FilterPolicy(b)
	}
	return []Policy{
		{Name: "none"},
		Uniform("pebble-bloom/10", bloom.FilterPolicy(10)),
		UniformCuckoo(10),
		UniformCuckooDensest(10),
		UniformCuckooV4(10),
		UniformCuckooV2(10),
		{Name: "lsmcuckoo/levels-10", Apply: func(o *pebble.Options) { tablefilter.SetLevelPolicies(o, 10) }},
		FittedLevels(10),
		PerLevel("pebble-bloom/progressive", prog),
		FittedBloom(10),
		Uniform("binary-fuse/8", binaryfuse.NewPolicy(8)),
		Uniform("binary-fuse/10", binaryfuse.NewPolicy(10)),
	}
}

// SavingPolicies are the extra configurations of the memory-saving view:
// uniform lsmcuckoo and per-level lsmcuckoo at smaller budgets, to find the
// budget at which each matches bloom/10's false-positive reads.
func SavingPolicies(uniform, levels []float64) []Policy {
	var ps []Policy
	for _, b := range uniform {
		ps = append(ps, UniformCuckoo(b))
	}
	for _, b := range levels {
		ps = append(ps, FittedLevels(b))
	}
	return ps
}

// FittedLevels is lsmcuckoo per level averaging avg bits per key over the
// measured tree: tablefilter.LevelBudgets of the tree's own shape, what a
// user does when the store's shape differs from SetLevelPolicies' model.
func FittedLevels(avg float64) Policy {
	return Policy{Name: fmt.Sprintf("lsmcuckoo/levels-%g-fit", avg), Fit: func(o *pebble.Options, s tablefilter.LevelShape) {
		tablefilter.SetLevelBudgets(o, tablefilter.LevelBudgets(s, avg))
	}, Family: "lsmcuckoo per level (fitted)", Budget: avg}
}

// UniformCuckooDensest is lsmcuckoo with version 3's densest layout
// (tablefilter.NewDensestPolicy) at b bits per key on every level.
func UniformCuckooDensest(b float64) Policy {
	return Uniform(fmt.Sprintf("lsmcuckoo-densest/%g", b), tablefilter.NewDensestPolicy(b))
}

// UniformCuckooV4 is lsmcuckoo in format version 4
// (tablefilter.NewV4Policy) at b bits per key on every level.
func UniformCuckooV4(b float64) Policy {
	return Uniform(fmt.Sprintf("lsmcuckoo-v4/%g", b), tablefilter.NewV4Policy(b))
}

// UniformCuckooV2 is lsmcuckoo in format version 2 (tablefilter.NewV2Policy)
// at b bits per key on every level: the previous default, beside
// UniformCuckoo. It is on no curve of the memory-saving view (measured at
// one budget only).
func UniformCuckooV2(b float64) Policy {
	return Uniform(fmt.Sprintf("lsmcuckoo-v2/%g", b), tablefilter.NewV2Policy(b))
}

// UniformCuckoo is lsmcuckoo at b bits per key on every level.
func UniformCuckoo(b float64) Policy {
	p := Uniform(fmt.Sprintf("lsmcuckoo/%g", b), tablefilter.NewPolicy(b))
	p.Family, p.Budget = "lsmcuckoo uniform", b
	return p
}
