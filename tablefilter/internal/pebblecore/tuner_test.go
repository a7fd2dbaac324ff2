package pebblecore

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// writeTable runs a tuned writer of level over keys, each added versions
// times in a row (the MVCC versions of a prefix), and returns the live
// table its properties would describe.
func writeTable(tu *Tuner, level int, keys [][]byte, versions int) LiveTable {
	w := tu.NewWriter(level)
	for _, k := range keys {
		for range versions {
			w.AddKey(k)
		}
	}
	block := w.Finish(nil)
	p, _ := FromName(tu.Policy(level).Name())
	return LiveTable{
		FilterBytes: uint64(len(block)),
		PointKeys:   uint64(len(keys) * versions),
		Ours:        true,
		Budget:      p.BitsPerKey(),
		Level:       level,
	}
}

// TestTunerCountsDistinctKeys: a table whose filter this tuner wrote counts
// its distinct keys, not its versions; a table it did not write counts at
// most its filter's bits over its budget.
func TestTunerCountsDistinctKeys(t *testing.T) {
	var b [NumLevels]float64
	for l := range b {
		b[l] = 10
	}
	tu := NewTuner("test", 10, b)
	keys := testkeys.Random(5000, 16, 3)
	tb := writeTable(tu, 6, keys, 3)
	if d := tu.distinct(tb); d != uint64(len(keys)) {
		t.Errorf("ledger: %d distinct keys, want %d", d, len(keys))
	}
	other := NewTuner("test", 10, b)
	if d := other.distinct(tb); d < uint64(len(keys)) || d > uint64(len(keys))*12/10 {
		t.Errorf("estimate: %d distinct keys, want about %d", d, len(keys))
	}
	bpk, n := tu.LiveAverage([]LiveTable{tb, {FilterBytes: 1000, PointKeys: 10, Ours: false}})
	if n != uint64(len(keys)) || bpk < 9 || bpk > 11 {
		t.Errorf("LiveAverage = %v over %d keys", bpk, n)
	}
}

// TestTunerDebtSteersTheLevel: a level whose live tables spend under its
// target (tables written by an earlier allocation) owes bits after a
// refit, and its next writer asks for more than the target; one that
// spends over asks for less; the debt stays bounded however long the
// error lasts; and every budget is a registered grid point.
func TestTunerDebtSteersTheLevel(t *testing.T) {
	keys := testkeys.Random(40000, 16, 5)
	for _, tc := range []struct {
		name    string
		initial float64
		raise   bool
	}{{"under", 6, true}, {"over", 16, false}} {
		var b [NumLevels]float64
		for l := range b {
			b[l] = tc.initial
		}
		tu := NewTuner("test", 10, b)
		old := []LiveTable{writeTable(tu, 6, keys[:30000], 1)}
		tu.Refit(LevelShape{}, old)
		target := tu.Target(6)
		if math.Abs(target-10) > 1e-9 {
			t.Errorf("%s: target %v for a tree on one level, asked 10", tc.name, target)
		}
		next := tu.writeBudget(6, target)
		if tc.raise && next <= target || !tc.raise && next >= target {
			t.Errorf("%s: next writer asks %v, target %v", tc.name, next, target)
		}
		for range 20 { // the same error for ever: the debt is bounded
			tu.Refit(LevelShape{}, old)
		}
		tu.debts.mu.Lock()
		owed, bound := tu.debts.owed[6], tu.debts.bound[6]
		tu.debts.mu.Unlock()
		if math.Abs(owed) > bound || bound > maxDebtShare*target*30000*1.0001 {
			t.Errorf("%s: debt %v, bound %v", tc.name, owed, bound)
		}
		for l := range NumLevels {
			if b := tu.Budget(l); !ValidBitsPerKey(b) || BudgetFloor(b) != b {
				t.Errorf("%s: L%d budget %v is not a registered grid point", tc.name, l, b)
			}
		}
	}
}

// TestTunerSpendsTheTargetOnSmallTables: tables of a few hundred keys,
// whose filters are whole 64-byte lines (about two bits per key each) and
// a trailer, spend their level's real-valued target on average, where
// asking the codec for the target spends a step of its size function: the
// level's live tables, those written before the refit (at the initial
// budget) and after it, spend the target together.
func TestTunerSpendsTheTargetOnSmallTables(t *testing.T) {
	var b [NumLevels]float64
	for l := range b {
		b[l] = 9.5
	}
	tu := NewTuner("test", 9.3, b)
	keys := testkeys.Random(60000, 16, 9)
	var tables []LiveTable
	for i := 0; i+300 <= 30000; i += 300 { // the first half: a tree to refit from
		tables = append(tables, writeTable(tu, 6, keys[i:i+300], 2))
	}
	tu.Refit(LevelShape{}, tables)
	target := tu.Target(6)
	var bits, n float64
	for _, tb := range tables {
		bits += 8 * float64(tb.FilterBytes)
	}
	n = 30000
	for i := 30000; i < len(keys); {
		size := 200 + i%170 // table sizes vary, as a compaction's do
		size = min(size, len(keys)-i)
		tb := writeTable(tu, 6, keys[i:i+size], 2)
		bits += 8 * float64(tb.FilterBytes)
		n += float64(size)
		i += size
	}
	if got := bits / n; math.Abs(got-target) > 0.01*target {
		t.Errorf("the level's small tables spend %.3f bits/key, target %.3f", got, target)
	}
	plain := New(target, 0, false)
	var plainBits float64
	for i := 30000; i+300 <= len(keys); i += 300 {
		w := plain.NewWriter()
		for _, k := range keys[i : i+300] {
			w.AddKey(k)
		}
		plainBits += 8 * float64(len(w.Finish(nil)))
	}
	t.Logf("target %.3f: the tuned level spends %.3f bits/key, a writer at the target %.3f", target, bits/n, plainBits/30000)
}

// TestRefitLoop: Start refits at once, Notify triggers refits no more often
// than the interval, Stop waits for a refit under way and ends them, and a
// measurement error keeps the budgets and is reported.
func TestRefitLoop(t *testing.T) {
	var b [NumLevels]float64
	for l := range b {
		b[l] = 10
	}
	tu := NewTuner("test", 10, b)
	loop := NewRefitLoop(tu, 10*time.Millisecond)
	var calls atomic.Int64
	var fail atomic.Bool
	measure := func() (LevelShape, []LiveTable, error) {
		calls.Add(1)
		if fail.Load() {
			return LevelShape{}, nil, errors.New("closed")
		}
		time.Sleep(time.Millisecond)
		s := LevelShape{}
		s.Keys[6], s.Keys[5] = 100, 10
		return s, nil, nil
	}
	loop.Notify() // not running: ignored
	loop.Start(measure)
	if calls.Load() != 1 {
		t.Fatalf("Start measured %d times, want 1", calls.Load())
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				loop.Notify()
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	time.Sleep(30 * time.Millisecond)
	loop.Stop()
	n := calls.Load()
	if n < 2 {
		t.Errorf("notices led to %d refits", n-1)
	}
	time.Sleep(30 * time.Millisecond)
	loop.Notify()
	time.Sleep(30 * time.Millisecond)
	if calls.Load() != n {
		t.Errorf("a stopped loop measured %d more times", calls.Load()-n)
	}
	before := tu.Budgets()
	fail.Store(true)
	if err := loop.Refit(measure); err == nil || loop.Err() == nil {
		t.Error("a failed measurement reported no error")
	}
	if tu.Budgets() != before {
		t.Error("a failed measurement changed the budgets")
	}
	loop.Stop() // idempotent
}

// TestTargetsHoldTheTreeAverageAsL0Fills: on fitted shapes whose L0 fills
// from empty to its modelled fullest, the targets, weighted by the keys
// each level holds at every fill, spend the average asked within l0Swing
// (and a rounding hair), however wide the fit makes L0; and the levels
// below L0 keep the fit's proportions.
func TestTargetsHoldTheTreeAverageAsL0Fills(t *testing.T) {
	for _, avg := range []float64{6, 10, 14} {
		for _, full := range []float64{0.01, 0.05, 0.2, 0.45} {
			for _, mult := range []int{4, 10} {
				var shape LevelShape
				shape.Keys[NumLevels-1] = 1
				for l := NumLevels - 2; l >= 3; l-- {
					shape.Keys[l] = shape.Keys[l+1] / float64(mult)
				}
				var below float64
				for _, w := range shape.Keys[1:] {
					below += w
				}
				shape.Keys[0] = below * full / (1 - full)
				shape.L0Runs = 4
				budgets := LevelBudgets("test", shape, avg)
				targets := targetsFor(shape, budgets, avg, full)
				if r := targets[NumLevels-1] / targets[NumLevels-2]; math.Abs(r-budgets[NumLevels-1]/budgets[NumLevels-2]) > 1e-9 {
					t.Errorf("avg %v full %v: L6/L5 targets %v, budgets %v", avg, full, targets, budgets)
				}
				for _, fill := range []float64{0, 0.25, 0.5, 0.75, 1} {
					w0 := below * fill * full / (1 - fill*full)
					spent := w0 * targets[0]
					for l := 1; l < NumLevels; l++ {
						spent += shape.Keys[l] * targets[l]
					}
					got := spent / (below + w0)
					if math.Abs(got/avg-1) > l0Swing+1e-3 {
						t.Errorf("avg %v full %v mult %d, L0 %.0f%% full: the tree spends %.3f (targets %v, budgets %v)",
							avg, full, mult, 100*fill, got, targets, budgets)
					}
				}
			}
		}
	}
}

// TestL0FullShare: L0 at its fullest is the modelled sublevels at the
// bytes of a sublevel L0 last held (the memtable's until one is seen),
// or L0 as it stands if that is more.
func TestL0FullShare(t *testing.T) {
	var b [NumLevels]float64
	for l := range b {
		b[l] = 10
	}
	tu := NewTuner("test", 10, b)
	tu.ModelL0(4, 50)
	shape := LevelShape{Keys: [NumLevels]float64{0, 0, 0, 0, 0, 100, 900}}
	if got, want := tu.l0FullShare(shape), 200.0/1200; math.Abs(got-want) > 1e-12 {
		t.Errorf("from the memtable: %v, want %v", got, want)
	}
	shape.Keys[0], shape.L0Runs = 200, 2
	if got, want := tu.l0FullShare(shape), 400.0/1400; math.Abs(got-want) > 1e-12 {
		t.Errorf("from L0's sublevels: %v, want %v", got, want)
	}
	shape.Keys[0], shape.L0Runs = 0, 0
	if got, want := tu.l0FullShare(shape), 400.0/1400; math.Abs(got-want) > 1e-12 {
		t.Errorf("L0 drained: %v, want %v (the last sublevel's bytes)", got, want)
	}
	shape.Keys[0], shape.L0Runs = 3000, 6
	if got, want := tu.l0FullShare(shape), 3000.0/4000; math.Abs(got-want) > 1e-12 {
		t.Errorf("L0 over its model: %v, want %v", got, want)
	}
}

// TestVersionTunerWritesAndFitsItsVersion: a version-4 tuner's writers
// write version-4 blocks holding every key, under version-4 names, and its
// refits fit the budgets version 4's rate calls for (VersionBudgets), not
// version 3's; a version-3 tuner keeps version 3's names and fit.
func TestVersionTunerWritesAndFitsItsVersion(t *testing.T) {
	shape := ModelShape(10, 4, 64<<20, 64<<20)
	keys := testkeys.Random(3000, 16, 11)
	for _, version := range []int{codec.FormatVersion, codec.NewestVersion} {
		tu := NewVersionTuner("test", 10, VersionBudgets("test", shape, 10, version), version)
		if tu.Version() != version {
			t.Errorf("version %d: tuner says %d", version, tu.Version())
		}
		for l := range NumLevels {
			if name, want := tu.Policy(l).Name(), NamePrefix(version, false); !strings.HasPrefix(name, want) {
				t.Errorf("version %d: L%d named %s, want %s*", version, l, name, want)
			}
		}
		w := tu.NewWriter(NumLevels - 1)
		for _, k := range keys {
			w.AddKey(k)
		}
		block := w.Finish(nil)
		f, err := codec.Decode(block)
		if err != nil || f.Info().Version != version {
			t.Fatalf("version %d: the writer's block decodes as %+v, %v", version, f, err)
		}
		for _, k := range keys {
			if !codec.MayContain(block, k) {
				t.Fatalf("version %d: false negative for %q", version, k)
			}
		}
		// A tree whose keys sit as the model's, in the tables' units.
		var tables []LiveTable
		for l, k := range shape.Keys {
			if k > 0 {
				n := uint64(math.Ceil(k * 1e6))
				tables = append(tables, LiveTable{Level: l, FilterBytes: n * 10 / 8, PointKeys: n, Ours: true, Budget: 10})
			}
		}
		tu.Refit(shape, tables)
		var live LevelShape
		live.L0Runs = shape.L0Runs
		for _, tb := range tables {
			live.Keys[tb.Level] += float64(tu.distinct(tb))
		}
		if got, want := tu.Budgets(), VersionBudgets("test", live, 10, version); got != want {
			t.Errorf("version %d: refit to %v, want %v", version, got, want)
		}
	}
	if v3, v4 := VersionBudgets("test", shape, 10, codec.FormatVersion), VersionBudgets("test", shape, 10, codec.NewestVersion); v3 == v4 {
		t.Errorf("both versions fit %v to this shape: the refit check above cannot tell them apart", v3)
	}
}
