package levelfit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// cuckooLikeRates is a rate curve of the shape the search is for: it halves
// at each whole bit and falls slowly between, so it is not convex.
func cuckooLikeRates(grid []float64) []float64 {
	r := make([]float64, len(grid))
	for i, b := range grid {
		r[i] = math.Pow(2, -math.Floor(b)) * (1.2 - 0.3*(b-math.Floor(b)))
	}
	return r
}

// TestFitMatchesExhaustiveSearch compares the search with every allocation
// of a small grid: it never spends more than the average, and it is at
// least as good as every allocation that fits with room for the rounding of
// each level's spend to whole units.
func TestFitMatchesExhaustiveSearch(t *testing.T) {
	grid := []float64{4.5, 5, 6, 7.5, 9, 10, 12, 16}
	rate := cuckooLikeRates(grid)
	r := rand.New(rand.NewPCG(3, 4))
	const units = 2048
	fitted := 0
	defer func() {
		if fitted < 100 {
			t.Errorf("only %d of 300 trees got an allocation: the comparison was not exercised", fitted)
		}
	}()
	for trial := range 300 {
		n := 1 + r.IntN(4)
		tree := Tree{Keys: make([]float64, n), L0Runs: float64(r.IntN(6))}
		for l := range tree.Keys {
			if r.IntN(5) > 0 {
				tree.Keys[l] = math.Pow(8, float64(l)) * (0.5 + r.Float64())
			}
		}
		avg := 4.5 + 10*r.Float64()
		uniformRate := rate[0]
		choice, ok := Fit(tree, grid, rate, avg, units, uniformRate)

		var total float64
		runs := make([]float64, n)
		for l, k := range tree.Keys {
			if k > 0 {
				total += k
				runs[l] = 1
			}
		}
		if total > 0 && tree.Keys[0] > 0 && tree.L0Runs > 1 {
			runs[0] = tree.L0Runs
		}
		costOf := func(c []int) (cost, spent float64) {
			for l, i := range c {
				if i >= 0 {
					cost += runs[l] * rate[i]
					spent += tree.Keys[l] / total * grid[i]
				}
			}
			return
		}
		// Exhaustive: the best allocation with spend at most avg less the
		// rounding slack.
		slack := float64(n) * avg / units
		best := math.Inf(1)
		c := make([]int, n)
		var walk func(l int)
		walk = func(l int) {
			if l == n {
				if cost, spent := costOf(c); spent <= avg-slack && cost < best {
					best = cost
				}
				return
			}
			if tree.Keys[l] == 0 {
				c[l] = -1
				walk(l + 1)
				return
			}
			for i := range grid {
				c[l] = i
				walk(l + 1)
			}
		}
		walk(0)

		if total == 0 {
			if ok {
				t.Fatalf("trial %d: ok for a tree without keys", trial)
			}
			continue
		}
		uniformCost := 0.0
		for _, x := range runs {
			uniformCost += x * uniformRate
		}
		if !ok {
			if best < uniformCost {
				t.Fatalf("trial %d: %+v avg %v: no allocation, but %v beats uniform %v", trial, tree, avg, best, uniformCost)
			}
			continue
		}
		for l, i := range choice {
			if (i < 0) != (tree.Keys[l] == 0) {
				t.Fatalf("trial %d: level %d has keys %v but choice %d", trial, l, tree.Keys[l], i)
			}
		}
		fitted++
		cost, spent := costOf(choice)
		if spent > avg*(1+1e-12) {
			t.Fatalf("trial %d: %+v spends %v bits per key, over the average %v", trial, choice, spent, avg)
		}
		if cost > best*(1+1e-12) {
			t.Fatalf("trial %d: %+v costs %v, the exhaustive search found %v", trial, choice, cost, best)
		}
		if !(cost < uniformCost) {
			t.Fatalf("trial %d: ok but cost %v does not beat uniform %v", trial, cost, uniformCost)
		}
	}
}

// TestFitGivesSmallLevelsMore checks the point of the allocation on a
// Pebble-like tree, each level ten times the one above: budgets do not
// increase with depth, and the top gets more than the average.
func TestFitGivesSmallLevelsMore(t *testing.T) {
	grid := make([]float64, 0, 56)
	for b := 4.5; b <= 32; b += 0.5 {
		grid = append(grid, b)
	}
	tree := Tree{Keys: []float64{1, 0, 1, 10, 100, 1000, 10000}, L0Runs: 4}
	choice, ok := Fit(tree, grid, cuckooLikeRates(grid), 10, 8192, cuckooLikeRates([]float64{10})[0])
	if !ok {
		t.Fatal("no allocation beats uniform on a Pebble-shaped tree")
	}
	budget := make([]float64, len(choice))
	for l, i := range choice {
		if i >= 0 {
			budget[l] = grid[i]
		}
	}
	FillEmpty(budget, choice)
	for l := 1; l < len(budget); l++ {
		if budget[l] > budget[l-1] {
			t.Fatalf("budgets %v increase from L%d to L%d", budget, l-1, l)
		}
	}
	if budget[1] != budget[2] {
		t.Fatalf("empty L1 has %v, not the budget of L2 below it (%v)", budget[1], budget[2])
	}
	if budget[0] <= 10 || budget[6] > 10 {
		t.Fatalf("budgets %v: the top should get more than the average and the bottom no more", budget)
	}
}

// TestFitRefusesBadInput checks the cases where the caller must fall back
// to a uniform budget, including inputs no caller should send.
func TestFitRefusesBadInput(t *testing.T) {
	grid := []float64{5, 10}
	rate := []float64{0.03, 0.001}
	keys := []float64{1, 10}
	for _, c := range []struct {
		name string
		tree Tree
		avg  float64
		rate []float64
	}{
		{"no levels", Tree{}, 10, rate},
		{"no keys", Tree{Keys: []float64{0, 0}}, 10, rate},
		{"non-finite keys", Tree{Keys: []float64{math.NaN(), math.Inf(1), -1}}, 10, rate},
		{"zero average", Tree{Keys: keys}, 0, rate},
		{"NaN average", Tree{Keys: keys}, math.NaN(), rate},
		{"infinite average", Tree{Keys: keys}, math.Inf(1), rate},
		{"rates do not match the grid", Tree{Keys: keys}, 10, rate[:1]},
		{"one level: nothing to gain", Tree{Keys: []float64{0, 5}}, 10, rate},
	} {
		choice, ok := Fit(c.tree, grid, c.rate, c.avg, 64, 0.001)
		if ok {
			t.Errorf("%s: ok with choice %v", c.name, choice)
		}
		for _, i := range choice {
			if i != -1 {
				t.Errorf("%s: choice %v on refusal", c.name, choice)
			}
		}
	}
	// A NaN L0Runs counts as one run, as documented.
	if _, ok := Fit(Tree{Keys: []float64{1, 1000}, L0Runs: math.NaN()}, []float64{5, 6, 10}, []float64{0.03, 0.02, 0.001}, 6, 1024, 0.02); !ok {
		t.Error("NaN L0Runs: no allocation, where one run per level gives one")
	}
}

func TestFillEmpty(t *testing.T) {
	for _, c := range []struct {
		choice []int
		in     []int
		want   []int
	}{
		{[]int{-1, 2, -1, 3, -1}, []int{0, 20, 0, 30, 0}, []int{20, 20, 30, 30, 30}},
		{[]int{-1, -1, -1}, []int{7, 7, 7}, []int{7, 7, 7}},
		{[]int{1, -1, -1}, []int{9, 0, 0}, []int{9, 9, 9}},
	} {
		got := append([]int(nil), c.in...)
		FillEmpty(got, c.choice)
		for l := range got {
			if got[l] != c.want[l] {
				t.Errorf("FillEmpty(%v, %v) = %v, want %v", c.in, c.choice, got, c.want)
				break
			}
		}
	}
}

// TestFitSpendsTheAverageExactly: an allocation whose spend equals the
// average, which rounding each level's spend up to whole units would make
// look unaffordable, is found (three equal levels at 5.5, 5.5 and 7 bits
// for an average of 6: 1.8333… and 2.3333… bits each round up past it).
func TestFitSpendsTheAverageExactly(t *testing.T) {
	grid := []float64{5.5, 7}
	rate := cuckooLikeRates(grid)
	tree := Tree{Keys: []float64{1, 1, 1}}
	for _, units := range []int{2048, 8192, 3000} {
		choice, ok := Fit(tree, grid, rate, 6, units, rate[0])
		if !ok {
			t.Fatalf("units %d: no allocation", units)
		}
		at7, spent := 0, 0.0
		for _, i := range choice {
			spent += grid[i] / 3
			if grid[i] == 7 {
				at7++
			}
		}
		if at7 != 1 || spent > 6*(1+1e-12) {
			t.Errorf("units %d: %v (spend %v), want one level at 7 and two at 5.5", units, choice, spent)
		}
	}
}

// TestFitWeighsConsultedShares compares the search with every allocation
// of a small grid that holds "no filter" (0 bits, rate 1), on trees whose
// levels lookups consult in random shares, 0 among them: it never spends
// more than the average, it is at least as good as every allocation that
// fits with room for the rounding, and a level never consulted gets the
// grid's cheapest point, no filter.
func TestFitWeighsConsultedShares(t *testing.T) {
	grid := []float64{5, 0, 6, 7.5, 10, 12, 16}
	rate := cuckooLikeRates(grid)
	rate[1] = 1 // no filter: every table is read
	r := rand.New(rand.NewPCG(5, 6))
	const units = 2048
	fitted, unconsulted := 0, 0
	for trial := range 300 {
		n := 1 + r.IntN(4)
		tree := Tree{Keys: make([]float64, n), L0Runs: float64(r.IntN(6)), Consulted: make([]float64, r.IntN(n+1))}
		for l := range tree.Keys {
			if r.IntN(5) > 0 {
				tree.Keys[l] = math.Pow(8, float64(l)) * (0.5 + r.Float64())
			}
		}
		for l := range tree.Consulted {
			switch r.IntN(3) {
			case 0:
				tree.Consulted[l] = 0
			case 1:
				tree.Consulted[l] = r.Float64()
			default:
				tree.Consulted[l] = 1
			}
		}
		share := func(l int) float64 {
			if l < len(tree.Consulted) {
				return tree.Consulted[l]
			}
			return 1
		}
		avg := 3 + 10*r.Float64()
		uniformRate := rate[0]
		choice, ok := Fit(tree, grid, rate, avg, units, uniformRate)

		var total float64
		runs := make([]float64, n)
		for l, k := range tree.Keys {
			if k > 0 {
				total += k
				runs[l] = 1
			}
		}
		if total > 0 && tree.Keys[0] > 0 && tree.L0Runs > 1 {
			runs[0] = tree.L0Runs
		}
		for l := range runs {
			runs[l] *= share(l)
		}
		costOf := func(c []int) (cost, spent float64) {
			for l, i := range c {
				if i >= 0 {
					cost += runs[l] * rate[i]
					spent += tree.Keys[l] / total * grid[i]
				}
			}
			return
		}
		slack := float64(n) * avg / units
		best := math.Inf(1)
		c := make([]int, n)
		var walk func(l int)
		walk = func(l int) {
			if l == n {
				if cost, spent := costOf(c); spent <= avg-slack && cost < best {
					best = cost
				}
				return
			}
			if tree.Keys[l] == 0 {
				c[l] = -1
				walk(l + 1)
				return
			}
			for i := range grid {
				c[l] = i
				walk(l + 1)
			}
		}
		walk(0)
		if total == 0 {
			continue
		}
		uniformCost := 0.0
		for _, x := range runs {
			uniformCost += x * uniformRate
		}
		if !ok {
			if best < uniformCost {
				t.Fatalf("trial %d: %+v avg %v: no allocation, but %v beats uniform %v", trial, tree, avg, best, uniformCost)
			}
			continue
		}
		fitted++
		cost, spent := costOf(choice)
		if spent > avg*(1+1e-12) {
			t.Fatalf("trial %d: %+v spends %v bits per key, over the average %v", trial, choice, spent, avg)
		}
		if cost > best*(1+1e-12) {
			t.Fatalf("trial %d: %+v: %v costs %v, the exhaustive search found %v", trial, tree, choice, cost, best)
		}
		for l, i := range choice {
			if tree.Keys[l] > 0 && share(l) == 0 {
				unconsulted++
				if grid[i] != 0 {
					t.Fatalf("trial %d: %+v: level %d is never consulted but gets %v bits", trial, tree, l, grid[i])
				}
			}
		}
	}
	if fitted < 100 || unconsulted < 30 {
		t.Errorf("%d of 300 trees got an allocation, %d levels never consulted: the comparison was not exercised", fitted, unconsulted)
	}
}

// TestFitConsultedDefaults checks the shares the doc counts as 1 (nil, a
// slice shorter than the levels, negative, infinite and NaN) give the
// allocation of a tree without shares, and that a tree whose only level
// with keys is never consulted gets no allocation (nothing to gain over
// uniform), while one never-consulted level among consulted ones takes
// the cheapest point, whatever the grid's order.
func TestFitConsultedDefaults(t *testing.T) {
	grid := make([]float64, 0, 56)
	for b := 4.5; b <= 32; b += 0.5 {
		grid = append(grid, b)
	}
	rate := cuckooLikeRates(grid)
	keys := []float64{1, 0, 1, 10, 100, 1000, 10000}
	want, ok := Fit(Tree{Keys: keys, L0Runs: 4}, grid, rate, 10, 8192, rate[11])
	if !ok {
		t.Fatal("no allocation on a Pebble-shaped tree")
	}
	for _, consulted := range [][]float64{nil, {1, 1}, {-1, math.Inf(1), math.NaN(), 1, 1, 1, 1, 1}} {
		got, ok := Fit(Tree{Keys: keys, L0Runs: 4, Consulted: consulted}, grid, rate, 10, 8192, rate[11])
		if !ok || !slices.Equal(got, want) {
			t.Errorf("Consulted %v: %v, %v; want %v as without shares", consulted, got, ok, want)
		}
	}
	if c, ok := Fit(Tree{Keys: []float64{0, 0, 5}, Consulted: []float64{1, 1, 0}}, grid, rate, 10, 8192, rate[11]); ok {
		t.Errorf("only an unconsulted level holds keys: ok with %v", c)
	}
	// The grid backwards, "no filter" in the middle: L6 unconsulted still
	// takes 0 bits, and the levels above get more than without shares.
	rev := append([]float64(nil), grid...)
	slices.Reverse(rev)
	rev = slices.Insert(rev, 20, 0)
	rrate := cuckooLikeRates(rev)
	rrate[20] = 1
	got, ok := Fit(Tree{Keys: keys, L0Runs: 4, Consulted: []float64{1, 1, 1, 1, 1, 1, 0}}, rev, rrate, 10, 8192, rate[11])
	if !ok || rev[got[6]] != 0 {
		t.Fatalf("L6 never consulted: %v, %v; want no filter on L6", got, ok)
	}
	for l := range 6 {
		if keys[l] > 0 && rev[got[l]] <= grid[want[l]] {
			t.Errorf("L%d gets %v bits with L6 unconsulted, no more than the %v without", l, rev[got[l]], grid[want[l]])
		}
	}
}
