// Package membench measures memtable filters under concurrency: lsmcuckoo's
// lock-free dynamic.MemFilter beside the same filter behind a sync.Mutex
// and behind a sync.RWMutex, which is what a store would do with a filter
// that is not safe for concurrent use. The locked variants run the very
// same code (an uncontended atomic load costs what a plain load does on
// the machines measured), so the comparison prices the locks and nothing
// else. The testing.B benchmarks and the report command both call it.
package membench

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// Impl is one filter under test.
type Impl struct {
	Name     string
	Add      func(key []byte)
	Contains func(key []byte) bool
	// Concurrent: may be driven by several goroutines (all of these).
	Concurrent bool
}

// Impls returns fresh filters sized for capacity keys.
func Impls(capacity int) []Impl {
	out := make([]Impl, len(implNames))
	for i, name := range implNames {
		out[i] = ImplNamed(name, capacity)
	}
	return out
}

// ImplNamed returns the named fresh filter, building only that one (so a
// measurement leaves no other filters' garbage behind for the next).
func ImplNamed(name string, capacity int) Impl {
	f := dynamic.NewMemFilter(capacity)
	switch name {
	case "memfilter":
		return Impl{name, f.Add, f.MayContain, true}
	case "mutex":
		var mu sync.Mutex
		return Impl{name, func(k []byte) { mu.Lock(); f.Add(k); mu.Unlock() },
			func(k []byte) bool { mu.Lock(); defer mu.Unlock(); return f.MayContain(k) }, true}
	case "rwmutex":
		var rw sync.RWMutex
		return Impl{name, func(k []byte) { rw.Lock(); f.Add(k); rw.Unlock() },
			func(k []byte) bool { rw.RLock(); defer rw.RUnlock(); return f.MayContain(k) }, true}
	}
	panic("membench: no filter named " + name)
}

// Split runs ops operations over exactly g goroutines, each a fixed share
// (no shared counter: a contended cache line would distort the result),
// and returns the wall time.
func Split(g, ops int, op func(i int)) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(from, to int) {
			defer wg.Done()
			for i := from; i < to; i++ {
				op(i)
			}
		}(w*ops/g, (w+1)*ops/g)
	}
	wg.Wait()
	return time.Since(start)
}

// Mixed runs one writer adding keys[len(keys)/2:] nonstop while readers
// goroutines look up ops keys from the first half (already added). It
// returns the readers' wall time and the number of writes done meanwhile.
// misses counts reads that answered false: any is a bug.
func Mixed(im Impl, keys [][]byte, readers, ops int) (elapsed time.Duration, writes int64, misses int64) {
	half := len(keys) / 2
	for _, k := range keys[:half] {
		im.Add(k)
	}
	var stop atomic.Bool
	var w atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := half; !stop.Load(); i++ {
			if i == len(keys) {
				i = half
			}
			im.Add(keys[i])
			w.Add(1)
		}
	}()
	var miss atomic.Int64
	elapsed = Split(readers, ops, func(i int) {
		if !im.Contains(keys[i%half]) {
			miss.Add(1)
		}
	})
	stop.Store(true)
	<-done
	return elapsed, w.Load(), miss.Load()
}

// Result is one line of the concurrency table.
type Result struct {
	Impl       string  `json:"impl"`
	Workload   string  `json:"workload"` // "lookup", "add", "mixed"
	Goroutines int     `json:"goroutines"`
	Mops       float64 `json:"mops"`       // lookups or adds per second, millions
	WriteMops  float64 `json:"write_mops"` // mixed: the writer's rate
}

// Run measures every implementation: lookups and adds by 1, 2 and 4
// goroutines, and one writer beside 1, 2 and 4 readers; reps times, each
// figure the median.
func Run(keys [][]byte, ops, reps int) ([]Result, error) {
	var all [][]Result
	for r := 0; r < max(1, reps); r++ {
		runtime.GC() // a collection mid-measurement steals one of two cores
		res, err := runOnce(keys, ops, r)
		if err != nil {
			return nil, err
		}
		all = append(all, res)
	}
	out := all[0]
	for i := range out {
		mops := make([]float64, len(all))
		wmops := make([]float64, len(all))
		for r := range all {
			mops[r], wmops[r] = all[r][i].Mops, all[r][i].WriteMops
		}
		slices.Sort(mops)
		slices.Sort(wmops)
		out[i].Mops, out[i].WriteMops = mops[len(mops)/2], wmops[len(wmops)/2]
	}
	return out, nil
}

// implNames lists the implementations in the order results are reported.
var implNames = []string{"memfilter", "mutex", "rwmutex"}

// runOnce measures every implementation once. Repetition r starts with
// the r-th implementation, so the lock-free filter does not always run
// first, right after Run's collection, while the locked ones run on the
// garbage of the filters measured before them; results come back in
// implNames order whatever the turn.
func runOnce(keys [][]byte, ops, r int) ([]Result, error) {
	byName := map[string][]Result{}
	for j := range implNames {
		name := implNames[(j+r)%len(implNames)]
		res, err := runImpl(name, keys, ops)
		if err != nil {
			return nil, err
		}
		byName[name] = res
	}
	var out []Result
	for _, name := range implNames {
		out = append(out, byName[name]...)
	}
	return out, nil
}

// runImpl measures one implementation: adds and lookups by 1, 2 and 4
// goroutines, then one writer beside 1, 2 and 4 readers.
func runImpl(name string, keys [][]byte, ops int) ([]Result, error) {
	var out []Result
	for _, g := range []int{1, 2, 4} {
		im := ImplNamed(name, len(keys))
		if !im.Concurrent && g > 1 {
			continue
		}
		el := Split(g, len(keys), func(i int) { im.Add(keys[i]) })
		out = append(out, Result{name, "add", g, float64(len(keys)) / el.Seconds() / 1e6, 0})
		var miss atomic.Int64
		el = Split(g, ops, func(i int) {
			if !im.Contains(keys[i%len(keys)]) {
				miss.Add(1)
			}
		})
		if miss.Load() > 0 {
			return nil, errFalseNegative(name)
		}
		out = append(out, Result{name, "lookup", g, float64(ops) / el.Seconds() / 1e6, 0})
	}
	for _, readers := range []int{1, 2, 4} {
		el, writes, misses := Mixed(ImplNamed(name, len(keys)), keys, readers, ops)
		if misses > 0 {
			return nil, errFalseNegative(name)
		}
		out = append(out, Result{name, "mixed", readers, float64(ops) / el.Seconds() / 1e6, float64(writes) / el.Seconds() / 1e6})
	}
	return out, nil
}

type errFalseNegative string

func (e errFalseNegative) Error() string {
	return "membench: " + string(e) + " answered false for a key that was added"
}
