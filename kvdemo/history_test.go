package kvdemo

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// The history tests run a store under concurrent Puts, Deletes and Gets of
// a small key space, record every operation's start, end and outcome on
// one logical clock, and check the history afterwards: a Get must return
// what a register would, given which writes had finished before it began
// and which overlapped it. A Get that misses a key, returns a stale
// version or a value never written to that key fails, naming the writes
// around it.

var historyFor = flag.Duration("kvdemo.history", 0,
	"run each history test's workload for this long (default: a short run; a few seconds each makes a deep local run)")

// Operation kinds in a history.
const (
	opPut = iota
	opDel
	opGet
)

// histOp is one operation of a history. For a write, id names it (every
// Put writes a value no other write writes; a Delete has its own id too);
// for a Get, id is the write whose value it returned, 0 for ErrNotFound,
// and raw holds a value that names no write of that key.
type histOp struct {
	kind       uint8
	key        int
	id         uint64
	start, end int64
	raw        []byte
	err        error
}

// histKey is the store key of key number i.
func histKey(i int) []byte { return fmt.Appendf(nil, "k%07d", i) }

// histValue is the value Put writes with id: the key and id, then filler
// of a length that varies with id, so that tables hold entries of
// several sizes.
func histValue(key []byte, id uint64) []byte {
	v := fmt.Appendf(nil, "%s=%d;", key, id)
	return append(v, bytes.Repeat([]byte{'.'}, int(id%29))...)
}

// parseHistValue returns the id in v if v is a value histValue made for
// key.
func parseHistValue(key, v []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(v, append(slices.Clone(key), '='))
	if !ok {
		return 0, false
	}
	num, filler, ok := bytes.Cut(rest, []byte{';'})
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(string(num), 10, 64)
	if err != nil || id == 0 || !bytes.Equal(v, histValue(key, id)) || len(filler) != int(id%29) {
		return 0, false
	}
	return id, true
}

// histConfig is one workload.
type histConfig struct {
	filter FilterKind
	// writers each own the hot keys k with k%writers == w, and write
	// fresh cold keys of their own (the store grows); with shared, every
	// writer writes every hot key (several writers per key).
	writers, readers int
	hot              int
	shared           bool
	memtable         int64
	maxTables        int
	sync             bool
	// reopens: Close and Open the store this many times during the run,
	// the history going on across them.
	reopens int
	// settle: a goroutine calls Settle (global: the idle consolidation)
	// over and over.
	settle bool
	// coldDeletes: three fresh cold keys in four are Deletes, the
	// smallest memtable entries, so that a memtable holds more keys than
	// its MemFilter was sized for and the filter grows under the Gets;
	// the Puts among them are keys that only the memtable holds.
	coldDeletes bool
	// burst: each writer's first burst writes are cold keys, so that the
	// store grows fast at first (the global index by segments, past its
	// rebuild trigger) while readers run.
	burst int
	dur   time.Duration
	// untilRebuild: the run goes on past dur (5 s at most) until the
	// global index was rebuilt at least once.
	untilRebuild bool
}

// histRun is a running workload: the store behind a gate that a reopen
// takes exclusively, the clock, and what it did.
type histRun struct {
	t     *testing.T
	cfg   histConfig
	dir   string
	gate  sync.RWMutex
	db    *DB
	clock atomic.Int64
	// cold[w]: how many cold keys writer w has written; readers aim at
	// the newest ones (Gets racing the Puts of the same key).
	cold []atomic.Int64
	// Store counters summed over every Open.
	flushes, compactions, rebuilds int64
	// The most segments the global index and a MemFilter had, sampled
	// during the run.
	indexSegments, memSegments atomic.Int64
	// manyLookups: sampled lookups of hot keys for which the index named
	// more tables than a query keeps (every table is then searched).
	manyLookups atomic.Int64
	failed      atomic.Bool
	pausing     atomic.Bool // pauseSometimes is on
}

func (h *histRun) opts() Options {
	return Options{
		Filter:          h.cfg.filter,
		MemtableBytes:   h.cfg.memtable,
		MaxTables:       h.cfg.maxTables,
		NoSyncEachWrite: !h.cfg.sync,
		Logger:          quiet(),
		pause:           h.pauseSometimes,
	}
}

// pauseSometimes holds one Get in eight for up to 3 ms, once it has its
// view or once it made its index lookup, one write in 32 between its log
// and its memtable, and the store's own work at each
// of its steps (up to 3 ms; a global rebuild's, up to 30 ms): a goroutine
// descheduled there while the others go on. A Get as fast as the test's
// otherwise rarely meets a flush, a compaction's Replace or a rebuild
// between its steps.
func (h *histRun) pauseSometimes(at pausePoint) {
	if !h.pausing.Load() {
		return
	}
	most := 3 * time.Millisecond
	switch at {
	case pauseGetView, pauseGetLookup:
		if rand.IntN(8) != 0 {
			return
		}
	case pauseWriteCommitted:
		// One write in 32, between its log and its memtable: a flush
		// of that memtable must wait for it.
		if rand.IntN(32) != 0 {
			return
		}
	case pauseRebuildTracking, pauseRebuildBuilt:
		// Rebuilds are few: long enough for compactions to happen
		// meanwhile.
		most = 30 * time.Millisecond
	}
	time.Sleep(rand.N(most))
}

// note adds the current store's counters to the run's totals.
func (h *histRun) note() {
	st := h.db.Stats()
	h.flushes += st.Flushes
	h.compactions += st.Compactions
	if g, ok := h.db.filter.(*globalFilter); ok {
		h.rebuilds += g.rebuilds.Load()
	}
}

// rebuildsSoFar counts the global index's rebuilds over every Open.
func (h *histRun) rebuildsSoFar() int64 {
	h.gate.RLock()
	defer h.gate.RUnlock()
	n := h.rebuilds
	if g, ok := h.db.filter.(*globalFilter); ok {
		n += g.rebuilds.Load()
	}
	return n
}

// compactionsSoFar counts compactions over every Open.
func (h *histRun) compactionsSoFar() int64 {
	h.gate.RLock()
	defer h.gate.RUnlock()
	return h.compactions + h.db.Stats().Compactions
}

// sample notes how many segments the index and the MemFilters have.
func (h *histRun) sample() {
	h.gate.RLock()
	defer h.gate.RUnlock()
	storeMax(&h.indexSegments, h.db.Stats().Index.Segments)
	if g, ok := h.db.filter.(*globalFilter); ok {
		for k := 0; k < h.cfg.hot; k++ {
			if g.prepare(histKey(k), dynamic.KeyHash(histKey(k))).many {
				h.manyLookups.Add(1)
			}
		}
	}
	v, err := h.db.acquire()
	if err != nil {
		return
	}
	defer v.release()
	for _, m := range [2]*memtable{v.mem, v.imm} {
		if m != nil {
			storeMax(&h.memSegments, m.filter.Stats().Segments)
		}
	}
}

func storeMax(a *atomic.Int64, n int) {
	for {
		old := a.Load()
		if int64(n) <= old || a.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

func (h *histRun) reopen() {
	h.gate.Lock()
	defer h.gate.Unlock()
	h.note()
	if err := h.db.Close(); err != nil {
		h.t.Errorf("Close: %v", err)
	}
	h.db = open(h.t, h.dir, h.opts())
}

// do runs one operation on the store and records it.
func (h *histRun) do(kind uint8, key int, id uint64) histOp {
	k := histKey(key)
	op := histOp{kind: kind, key: key, id: id}
	h.gate.RLock()
	defer h.gate.RUnlock()
	op.start = h.clock.Add(1)
	switch kind {
	case opPut:
		op.err = h.db.Put(k, histValue(k, id))
	case opDel:
		op.err = h.db.Delete(k)
	case opGet:
		v, err := h.db.Get(k)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			op.err = err
		default:
			if got, ok := parseHistValue(k, v); ok {
				op.id = got
			} else {
				op.raw = slices.Clone(v)
			}
		}
	}
	op.end = h.clock.Add(1)
	if op.err != nil && h.failed.CompareAndSwap(false, true) {
		h.t.Errorf("%s(%s): %v", opName(kind), k, op.err)
	}
	return op
}

func opName(kind uint8) string {
	return [...]string{"Put", "Delete", "Get"}[kind]
}

// coldKey is writer w's n-th cold key.
func (h *histRun) coldKey(w, n int) int { return h.cfg.hot + w + h.cfg.writers*n }

// runHistory runs cfg and returns its history.
func runHistory(t *testing.T, cfg histConfig) ([]histOp, *histRun) {
	if *historyFor > 0 {
		cfg.dur = *historyFor
	}
	h := &histRun{t: t, cfg: cfg, dir: t.TempDir(), cold: make([]atomic.Int64, cfg.writers)}
	logs := make([][]histOp, cfg.writers+cfg.readers+1)
	h.db = open(t, h.dir, h.opts())
	h.pausing.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < cfg.writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var n uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				n++
				id := uint64(w+1)<<40 | n
				// A hot key of this writer's own, or any with shared.
				key := w + cfg.writers*rng.IntN(cfg.hot/cfg.writers)
				if cfg.shared {
					key = rng.IntN(cfg.hot)
				}
				var op histOp
				c := int(h.cold[w].Load())
				switch r := rng.IntN(20); {
				case n <= uint64(cfg.burst) || r >= 17:
					// A fresh cold key, written once; with coldDeletes
					// half of them are Deletes (a key never written).
					kind := uint8(opPut)
					if cfg.coldDeletes && rng.IntN(4) != 0 {
						kind = opDel
					}
					op = h.do(kind, h.coldKey(w, c), id)
					h.cold[w].Store(int64(c + 1))
				case r == 15 && c > 0:
					// An older cold key comes back, or goes.
					kind := uint8(opPut)
					if rng.IntN(2) == 0 {
						kind = opDel
					}
					op = h.do(kind, h.coldKey(w, rng.IntN(c)), id)
				case r < 10:
					op = h.do(opPut, key, id)
				default:
					op = h.do(opDel, key, id)
				}
				logs[w] = append(logs[w], op)
				if op.err != nil {
					return
				}
			}
		}(w)
	}
	for r := 0; r < cfg.readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			i := cfg.writers + r
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := rng.IntN(cfg.hot)
				if rng.IntN(3) == 0 {
					// A cold key at or near its writer's newest, or one
					// not written yet.
					w := rng.IntN(cfg.writers)
					n := max(int(h.cold[w].Load())-rng.IntN(40)+2, 0)
					if rng.IntN(4) == 0 {
						n = rng.IntN(n + 1)
					}
					key = h.coldKey(w, n)
				}
				op := h.do(opGet, key, 0)
				logs[i] = append(logs[i], op)
				if op.err != nil {
					return
				}
			}
		}(r)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			h.sample()
		}
	}()
	if cfg.settle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				h.gate.RLock()
				err := h.db.Settle()
				h.gate.RUnlock()
				if err != nil {
					t.Errorf("Settle: %v", err)
					return
				}
			}
		}()
	}
	for i := 0; i < cfg.reopens; i++ {
		time.Sleep(cfg.dur / time.Duration(cfg.reopens+1))
		h.reopen()
	}
	time.Sleep(cfg.dur / time.Duration(cfg.reopens+1))
	// A slow machine (or the race detector) may not have grown the index
	// past a rebuild, or the tables past a compaction, yet: go on a while
	// longer for them.
	for extra := 0; (cfg.untilRebuild && h.rebuildsSoFar() == 0 || h.compactionsSoFar() == 0) && extra < 100; extra++ {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	h.pausing.Store(false)

	// Every key ever written, read once the store has settled, and again
	// after a last reopen.
	final := &logs[len(logs)-1]
	keys := h.cfg.hot
	for w := range h.cold {
		keys = max(keys, h.coldKey(w, int(h.cold[w].Load())))
	}
	for round := 0; round < 2; round++ {
		if err := h.db.Settle(); err != nil {
			t.Errorf("Settle: %v", err)
		}
		for k := 0; k < keys; k++ {
			*final = append(*final, h.do(opGet, k, 0))
		}
		if round == 0 {
			h.reopen()
		}
	}
	h.note()
	if err := h.db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	var ops []histOp
	for _, l := range logs {
		ops = append(ops, l...)
	}
	return ops, h
}

// checkHistory checks every Get of ops against the writes of its key, as
// a register: a Get may return the value (or absence) of a write w to its
// key only if w started before the Get ended, and no other write to the
// key started after w ended and itself ended before the Get started (that
// one would have overwritten w). Absence is the initial state, or a
// Delete. A Get that returns a value no write of its key wrote fails.
//
// With ordered (each key has one writer, so its writes happen one after
// another), Gets must also not go back in time: a Get that starts after
// another Get of the key ended returns the same write or a later one.
//
// It returns the failures found, at most max.
func checkHistory(ops []histOp, ordered bool, maxFailures int) []string {
	type write struct {
		id         uint64
		del        bool
		start, end int64
		// overwritten: the earliest end of a write that started after
		// this one ended.
		overwritten int64
	}
	writes := map[int][]write{}
	gets := map[int][]histOp{}
	for _, op := range ops {
		switch op.kind {
		case opGet:
			gets[op.key] = append(gets[op.key], op)
		default:
			if op.err == nil {
				writes[op.key] = append(writes[op.key], write{id: op.id, del: op.kind == opDel, start: op.start, end: op.end})
			}
		}
	}
	var failures []string
	fail := func(format string, args ...any) {
		if len(failures) < maxFailures {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	for key, gs := range gets {
		// The initial state (absent) is a delete that ended before
		// anything started.
		ws := append([]write{{del: true}}, writes[key]...)
		sort.Slice(ws, func(i, j int) bool { return ws[i].start < ws[j].start })
		// Suffix minimum of ends over writes sorted by start.
		suffix := make([]int64, len(ws)+1)
		suffix[len(ws)] = 1<<63 - 1
		for i := len(ws) - 1; i >= 0; i-- {
			suffix[i] = min(suffix[i+1], ws[i].end)
		}
		byID := map[uint64]int{}
		for i := range ws {
			first := sort.Search(len(ws), func(j int) bool { return ws[j].start > ws[i].end })
			ws[i].overwritten = suffix[first]
			if !ws[i].del {
				byID[ws[i].id] = i
			}
		}
		describe := func(g histOp) string {
			var b bytes.Buffer
			for _, w := range ws {
				overlaps := w.end > g.start && w.start < g.end
				latest := w.end < g.start && w.overwritten > g.start
				if overlaps || latest || !w.del && w.id == g.id {
					what := putName(w.id)
					if w.del {
						what = "Delete"
						if w.start == 0 {
							what = "initial absence"
						}
					}
					fmt.Fprintf(&b, "\n\t\t%s [%d,%d]", what, w.start, w.end)
				}
			}
			return b.String()
		}
		valid := func(w write, g histOp) bool { return w.start < g.end && w.overwritten > g.start }
		// lo, hi: the first and last write (in ws order) the Get may
		// have returned.
		type seen struct {
			start, end int64
			lo, hi     int
		}
		var reads []seen
		for _, g := range gs {
			if g.err != nil {
				continue // reported when it happened
			}
			if g.raw != nil {
				fail("Get(%s) [%d,%d] returned %q, which no write of the key wrote", histKey(key), g.start, g.end, g.raw)
				continue
			}
			lo, hi := -1, -1
			if g.id != 0 {
				i, ok := byID[g.id]
				if !ok {
					fail("Get(%s) [%d,%d] returned the value of %s, not a write of the key that succeeded", histKey(key), g.start, g.end, putName(g.id))
					continue
				}
				if valid(ws[i], g) {
					lo, hi = i, i
				}
			} else {
				for i, w := range ws {
					if w.del && valid(w, g) {
						if lo < 0 {
							lo = i
						}
						hi = i
					}
				}
			}
			if lo < 0 {
				got := "ErrNotFound"
				if g.id != 0 {
					got = "the value of " + putName(g.id)
				}
				fail("Get(%s) [%d,%d] returned %s; writes of the key around it:%s", histKey(key), g.start, g.end, got, describe(g))
				continue
			}
			reads = append(reads, seen{g.start, g.end, lo, hi})
		}
		if !ordered {
			continue
		}
		// A Get that starts after another ended may not return an
		// earlier write than the other's earliest possible one.
		sort.Slice(reads, func(i, j int) bool { return reads[i].end < reads[j].end })
		prefix := make([]int, len(reads)) // max lo over reads[:i+1]
		for i, r := range reads {
			prefix[i] = r.lo
			if i > 0 {
				prefix[i] = max(prefix[i], prefix[i-1])
			}
		}
		for _, b := range reads {
			n := sort.Search(len(reads), func(i int) bool { return reads[i].end >= b.start })
			if n > 0 && prefix[n-1] > b.hi {
				fail("Get(%s) [%d,%d] went back in time: an earlier Get returned write %d of the key, this one at most write %d", histKey(key), b.start, b.end, prefix[n-1], b.hi)
			}
		}
	}
	sort.Strings(failures)
	return failures
}

// putName names a Put by its id: writer and the writer's count.
func putName(id uint64) string {
	return fmt.Sprintf("Put w%d#%d", id>>40-1, id&(1<<40-1))
}

func histSummary(ops []histOp) (puts, dels, gets, found int) {
	for _, op := range ops {
		switch op.kind {
		case opPut:
			puts++
		case opDel:
			dels++
		default:
			gets++
			if op.id != 0 {
				found++
			}
		}
	}
	return
}

// TestHistoryReadYourWrites: each hot key has one writer that Puts,
// overwrites and Deletes it, while readers Get hot keys and the newest
// cold keys; a 1 KiB memtable and four tables at most keep flushes and
// compactions running all the time, a goroutine Settles (global: the
// idle consolidation) over and over, and the store is closed and opened
// twice while the history goes on. Every Get is checked against the
// writes around it, for every filter kind. Run with -race; -kvdemo.history
// lengthens it.
func TestHistoryReadYourWrites(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) {
			cfg := histConfig{filter: f, writers: 3, readers: 2, hot: 48, memtable: 16 << 10, maxTables: 4,
				reopens: 2, settle: true, burst: 1000, untilRebuild: f == FilterGlobal, dur: 1200 * time.Millisecond}
			if testing.Short() {
				cfg.dur = 400 * time.Millisecond
			}
			ops, h := runHistory(t, cfg)
			reportHistory(t, ops, h, true)
			if f == FilterGlobal && h.rebuilds == 0 {
				t.Error("not exercised: the global index was never rebuilt")
			}
		})
	}
}

// TestHistoryMemtableFilterGrows: Gets race the Puts and Deletes of the
// same fresh keys in a memtable that takes more keys than its MemFilter
// was sized for, so that the filter grows by segments under them.
func TestHistoryMemtableFilterGrows(t *testing.T) {
	cfg := histConfig{filter: FilterCuckoo, writers: 3, readers: 3, hot: 48, memtable: 64 << 10, maxTables: 4,
		coldDeletes: true, burst: 2000, dur: 800 * time.Millisecond}
	if testing.Short() {
		cfg.dur = 300 * time.Millisecond
	}
	ops, h := runHistory(t, cfg)
	reportHistory(t, ops, h, true)
	if h.memSegments.Load() < 2 {
		t.Errorf("not exercised: no MemFilter grew (%d segments at most)", h.memSegments.Load())
	}
}

// TestHistoryManyWritersPerKey: several writers write every hot key at
// once (so a Get may return any of the writes it overlaps), fsyncing
// each write (group commit: writes of one key wait in the same commit,
// and land in the memtable in any order). Up to twelve tables: a hot key
// has versions in more tables than the global index's lookup keeps
// candidates for.
func TestHistoryManyWritersPerKey(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) {
			cfg := histConfig{filter: f, writers: 4, readers: 2, hot: 16, shared: true, memtable: 2 << 10,
				maxTables: 12, sync: true, reopens: 1, dur: 800 * time.Millisecond}
			if testing.Short() {
				cfg.dur = 300 * time.Millisecond
			}
			ops, h := runHistory(t, cfg)
			reportHistory(t, ops, h, false)
		})
	}
}

func reportHistory(t *testing.T, ops []histOp, h *histRun, ordered bool) {
	t.Helper()
	puts, dels, gets, found := histSummary(ops)
	t.Logf("%d Puts, %d Deletes, %d Gets (%d found a value); %d flushes, %d compactions, %d index rebuilds, up to %d index segments (%d sampled lookups named more than four tables), up to %d MemFilter segments",
		puts, dels, gets, found, h.flushes, h.compactions, h.rebuilds, h.indexSegments.Load(), h.manyLookups.Load(), h.memSegments.Load())
	for _, f := range checkHistory(ops, ordered, 10) {
		t.Error(f)
	}
	if h.flushes == 0 || h.compactions == 0 || found == 0 || gets == found {
		t.Errorf("not exercised: %d flushes, %d compactions, %d of %d Gets found a value", h.flushes, h.compactions, found, gets)
	}
}
