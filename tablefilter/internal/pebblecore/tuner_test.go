package pebblecore

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
