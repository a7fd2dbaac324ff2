package pebblecore

import (
	"errors"
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

// TestTunerRefitSteersTheAverage: a tree that spends under the average
// asked (tables written by an earlier allocation) raises the correction
// once fresh tables arrive, one that spends over lowers it, tables from
// before the last refit do not move it, and it stays bounded however long
// the error lasts.
func TestTunerRefitSteersTheAverage(t *testing.T) {
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
		tu.Refit(LevelShape{}, nil) // old is now from before the last refit
		tu.Refit(LevelShape{}, old)
		if tu.offset != 0 {
			t.Errorf("%s: corrected %v with no fresh tables", tc.name, tu.offset)
		}
		fresh := writeTable(tu, 6, keys[30000:], 1)
		tu.Refit(LevelShape{}, append(old, fresh))
		if tc.raise && tu.offset <= 0 || !tc.raise && tu.offset >= 0 {
			t.Errorf("%s: correction %v after a fresh table", tc.name, tu.offset)
		}
		for range 200 { // the same error for ever: the correction is bounded
			fresh = writeTable(tu, 6, keys[30000:], 1)
			tu.Refit(LevelShape{}, append(old, fresh))
		}
		if tu.offset < -maxCorrection*10 || tu.offset > maxCorrection*10 {
			t.Errorf("%s: correction %v out of bounds", tc.name, tu.offset)
		}
		for l := range NumLevels {
			if b := tu.Budget(l); !ValidBitsPerKey(b) || BudgetFloor(b) != b {
				t.Errorf("%s: L%d budget %v is not a registered grid point", tc.name, l, b)
			}
		}
	}
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
