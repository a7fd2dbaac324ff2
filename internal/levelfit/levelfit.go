// Package levelfit shares filter bits out across the levels of an LSM tree:
// the allocation of Monkey (Dayan, Athanassoulis & Idreos, "Monkey: Optimal
// Navigable Key-Value Store", SIGMOD 2017), found by an exact search over a
// grid of budgets rather than by Monkey's closed form, so that it holds for
// any filter's measured or planned rate curve.
//
// The problem: levels hold keys (level l a share w_l of them) and a lookup
// for an absent key consults runs_l tables on level l, reading their
// filters in a share c_l of lookups (Pebble's DB.Get never reads L6's
// filters, so a store whose absent lookups are Gets has c_6 = 0). Choose a
// budget b_l in bits per key from a grid for every level that holds keys,
// to minimise the tables read in vain per lookup that a filter could have
// skipped, Σ c_l · runs_l · rate(b_l), while the key-weighted average
// Σ w_l · b_l stays at or under a given average. A level no lookup
// consults (c_l = 0) buys nothing with its bits, so it takes the grid's
// smallest budget, and when the grid holds "no filter" (0 bits, rate 1),
// that.
//
// The search is dynamic programming over the budget spent, in units of
// avg/units bits per key, with each level's spend rounded up to whole
// units. Rounding up alone would miss an allocation that spends the
// average exactly (three levels at 5.5, 5.5 and 7 bits for an average of
// 6 round up past it), so the search runs a unit per level past the
// average and keeps, of the allocations it finds, the best whose exact
// spend is within the average: one it returns never exceeds it. It keeps
// one allocation per number of units spent, so a feasible allocation can
// hide behind a cheaper one of the same units that overspends; up to that,
// it is exact on the grid (on the half-bit grid LevelBudgets uses, the
// tests' exhaustive searches find none missed). That matters because rate
// curves are not convex (a cuckoo filter's halves at each
// step of fingerprint width and falls slowly between), and a Lagrangian
// solution, which equalises the marginal gain per bit and so only sees the
// curve's convex hull, misses much of the attainable gain at small budgets.
//
// tablefilter.LevelBudgets uses it with lsmcuckoo's planned rates, and the
// benchmark's fitted bloom baseline with the bloom filter's measured rates,
// so that both filters are given the same treatment.
package levelfit

import "math"

// Tree is where a tree's keys sit.
type Tree struct {
	// Keys is each level's key count (or any quantity proportional to it,
	// such as bytes). A level with zero, a negative, an infinite or a NaN
	// count holds no keys and gets no budget of its own.
	Keys []float64
	// L0Runs is how many runs a lookup meets on level 0 (its sublevels);
	// every other level is one run. Under 1, or NaN, counts as 1.
	L0Runs float64
	// Consulted is, for each level, the share of lookups that read its
	// filters: it weighs the level's runs in the tables read in vain. A
	// level past the slice's end (all of them when it is nil) counts as
	// 1, and so does a negative, infinite or NaN share; 0 means lookups
	// never read that level's filters.
	Consulted []float64
}

// consulted returns the share of lookups that read level l's filters.
func (t Tree) consulted(l int) float64 {
	if l >= len(t.Consulted) {
		return 1
	}
	c := t.Consulted[l]
	if !(c >= 0) || math.IsInf(c, 0) {
		return 1
	}
	return c
}

// Fit returns, for each level of t, the index in grid of its budget, or -1
// for a level without keys. grid holds budgets in bits per key and rate[i]
// is the filter's false-positive rate at grid[i]. The allocation minimises
// the tables read in vain per absent lookup under the average avg,
// searched at a resolution of units steps (see the package doc). A level
// with keys that no lookup consults (Tree.Consulted 0) gets the grid's
// smallest budget, the first of equal ones.
//
// ok is false, and the caller should give every level one uniform budget,
// when no level holds keys, when avg is not a positive number, or when the
// best allocation found does not read fewer tables in vain than every
// level at the uniform budget's rate, uniformRate: rounding each level's
// spend up can make even the smallest grid point look unaffordable at a
// tiny average, while the uniform allocation is always feasible, and a
// tree whose keys sit on one level has nothing to gain. Both costs count
// each level's runs times its consulted share, so a tree none of whose
// levels with keys is consulted has nothing to gain either: a caller
// falling back to a uniform budget still owes no bits to a level that
// lookups never consult.
func Fit(t Tree, grid, rate []float64, avg float64, units int, uniformRate float64) (choice []int, ok bool) {
	n := len(t.Keys)
	choice = make([]int, n)
	weight := make([]float64, n)
	runs := make([]float64, n)
	var total float64
	for l, k := range t.Keys {
		choice[l] = -1
		if k > 0 && !math.IsInf(k, 0) {
			weight[l], runs[l] = k, 1
			total += k
		}
	}
	if total == 0 || !(avg > 0) || math.IsInf(avg, 0) || units < 1 || len(grid) != len(rate) {
		return choice, false
	}
	if n > 0 && weight[0] > 0 && t.L0Runs > 1 {
		runs[0] = t.L0Runs
	}
	// cheapest is the grid's smallest budget, the only choice searched for
	// a level never consulted: any other costs the same and spends more.
	cheapest := 0
	for i, b := range grid {
		if b < grid[cheapest] {
			cheapest = i
		}
	}
	for l := range runs {
		runs[l] *= t.consulted(l)
	}
	for l := range weight {
		weight[l] /= total // key shares: the constraint is then Σ w·b <= avg
	}
	// spend is the units a level's budget takes, rounded up; capacity is
	// the units searched, one per level past the average's.
	unit := avg / float64(units)
	spend := func(l, i int) int { return int(math.Ceil(weight[l] * grid[i] / unit)) }
	capacity := units
	for l := range weight {
		if weight[l] > 0 {
			capacity++
		}
	}

	inf := math.Inf(1)
	cost := make([]float64, capacity+1) // best cost of the levels so far, by units spent
	next := make([]float64, capacity+1)
	// pick[l][u]: grid index of level l in the best way to spend u units
	// on levels 0..l.
	pick := make([][]int32, n)
	for l := range n {
		if weight[l] == 0 {
			continue
		}
		pick[l] = make([]int32, capacity+1)
		for u := range next {
			next[u] = inf
		}
		for i := range grid {
			if runs[l] == 0 && i != cheapest {
				continue
			}
			s := spend(l, i)
			c := runs[l] * rate[i]
			for u := s; u <= capacity; u++ {
				if v := cost[u-s] + c; v < next[u] {
					next[u], pick[l][u] = v, int32(i)
				}
			}
		}
		cost, next = next, cost
	}
	// cost[u] is the best cost spending at most u units: walk the picks back from
	// each u, and keep the cheapest allocation whose exact spend is within
	// the average (every one of at most units units is).
	walk := func(u int, into []int) float64 {
		spent := 0.0
		for l := n - 1; l >= 0; l-- {
			if weight[l] == 0 {
				continue
			}
			i := int(pick[l][u])
			into[l] = i
			spent += weight[l] * grid[i]
			u -= spend(l, i)
		}
		return spent
	}
	best := -1
	trial := make([]int, n)
	for u := range cost {
		if math.IsInf(cost[u], 1) || best >= 0 && cost[u] >= cost[best] {
			continue
		}
		if u <= units || walk(u, trial) <= avg*(1+1e-12) {
			best = u
		}
	}
	var uniformCost float64
	for l := range weight {
		uniformCost += runs[l] * uniformRate
	}
	if best < 0 || !(cost[best] < uniformCost) {
		return choice, false
	}
	walk(best, choice)
	return choice, true
}

// FillEmpty gives each level whose choice is -1 (no keys) the budget of the
// nearest level below it that holds keys, or, for levels under the lowest
// such level, that level's: a level that opens later (a new Lbase above
// the current one) starts at the budget of the level it is about to feed.
func FillEmpty[T any](budget []T, choice []int) {
	lowest := -1
	for l := len(choice) - 1; l >= 0 && lowest < 0; l-- {
		if choice[l] >= 0 {
			lowest = l
		}
	}
	below := lowest
	for l := len(choice) - 1; l >= 0; l-- {
		if choice[l] >= 0 {
			below = l
		} else if below >= 0 {
			budget[l] = budget[below]
		}
	}
}
