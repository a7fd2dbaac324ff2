package kvdemo

// The fault sweep: instead of hand-picked fault points (faults_test.go),
// one workload is run once to count the filesystem operations of each
// kind it makes, then again with the i-th operation of a kind failing
// (ENOSPC for writes, EIO for the rest, or a short write), or with a
// crash just before it, for i across the whole run. After each fault the
// workload carries on as a user would, the filesystem crashes (dropping
// all that is not durable), and the store is opened again on the same
// directory without faults. Then every acknowledged write must read back
// its latest acknowledged value (an acknowledged delete stays deleted), a
// write reported not stored must be absent, no file that was durable when
// the fault fired may have vanished unless the store made it obsolete,
// every file in lost/ must have been reported, and `check` must find
// nothing wrong.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

var (
	sweepOnly = flag.String("sweep-only", "",
		"fault sweep: run only the fault named filter/mode/op/index (as a failure names it), e.g. cuckoo/error/syncdir/43")
	sweepStride = flag.Int("sweep-stride", 0,
		"fault sweep: fail every stride-th operation of each kind (1: every one); 0: a few points per kind, spread over the run")
	sweepPoints = flag.Int("sweep-points", 3,
		"fault sweep: with -sweep-stride 0, how many operations of each kind to fail")
)

// sweepOps are the operation kinds the sweep fails, in the order tried.
var sweepOps = []errorfs.Op{
	errorfs.OpWrite, errorfs.OpSync, errorfs.OpCreate, errorfs.OpRename, errorfs.OpSyncDir,
	errorfs.OpRemove, errorfs.OpOpen, errorfs.OpRead, errorfs.OpTruncate,
}

// faultMode is how the chosen operation goes wrong.
type faultMode int

const (
	faultError faultMode = iota // ENOSPC for a write, EIO otherwise
	faultShort                  // writes only: half the buffer lands, then ENOSPC
	faultCrash                  // the machine loses power just before it
	faultTorn                   // the same, and unsynced writes are torn, not dropped
)

func (m faultMode) String() string { return [...]string{"error", "short", "crash", "torn"}[m] }

// absentValue marks "no value" in a key's set of acceptable values.
const absentValue = "\x00absent"

// syncBuffer collects a store's log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sweepWorkload describes one run.
type sweepWorkload struct {
	filter  FilterKind
	steps   int // writes
	keys    int // distinct keys: overwrites and deletes hit the same ones
	writers int // concurrent writers (1: deterministic order)
	// batched: Options.NoSyncEachWrite, with a Sync every few writes: a
	// write is durable once a Sync (or Close) after it returned nil.
	batched bool
}

// sweepRun is one run of the workload on its own directory.
type sweepRun struct {
	t     testing.TB
	w     sweepWorkload
	where string // the fault, for messages
	dir   string
	efs   *errorfs.FS
	logs  *syncBuffer
	db    *DB
	dbMu  sync.Mutex // guards db across writers (reopen swaps it)

	mu    sync.Mutex
	model map[string]map[string]bool // key -> values it may have after a crash
	// unsynced: the latest value written to each key since the last Sync
	// that succeeded (batched), or served after a reopen when in doubt
	// (see served); a crash may keep it or not until a Sync or Close
	// returns nil.
	unsynced map[string]string
}

func newSweepRun(t testing.TB, w sweepWorkload, where string) *sweepRun {
	r := &sweepRun{t: t, w: w, where: where, dir: t.TempDir(), efs: errorfs.New(vfs.Default),
		logs: &syncBuffer{}, model: map[string]map[string]bool{}, unsynced: map[string]string{}}
	for i := 0; i < w.keys; i++ {
		r.model[sweepKey(i)] = map[string]bool{absentValue: true}
	}
	// A removal is durable only once its directory is fsynced, as POSIX
	// allows: a crash may bring a removed file back.
	r.efs.DeferRemoves()
	return r
}

func sweepKey(i int) string { return fmt.Sprintf("key-%03d", i) }

func (r *sweepRun) options() *Options {
	return &Options{
		Filter:          r.w.filter,
		MemtableBytes:   4 << 10, // a flush every few dozen writes
		MaxTables:       3,       // and a compaction every few flushes
		NoSyncEachWrite: r.w.batched,
		FS:              r.efs,
		Logger:          log.New(r.logs, "", 0),
		noIdleRebuild:   true,
	}
}

// crashed says the filesystem is gone: the workload stops as a killed
// process would.
func (r *sweepRun) crashed() bool { return r.efs.Crashed() }

// open opens (or reopens) the store as a user would after an error:
// close what is open, then try a few times. One transient fault must not
// keep a store from opening twice in a row.
func (r *sweepRun) open() bool {
	r.dbMu.Lock()
	defer r.dbMu.Unlock()
	return r.openLocked()
}

func (r *sweepRun) openLocked() bool {
	if r.db != nil {
		// Close may fail (read-only, crashed): Open recovers. If it
		// succeeds, it made every write before it durable. If not,
		// writes not yet synced stay either-or, until the next store
		// says which (see served).
		if err := r.db.Close(); err != nil {
			r.mu.Lock()
			clear(r.unsynced)
			r.mu.Unlock()
		} else {
			r.synced(nil)
		}
		r.db = nil
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if r.crashed() {
			return false
		}
		var db *DB
		if db, err = Open(r.dir, r.options()); err == nil {
			r.served(db)
			r.db = db
			return true
		}
	}
	if !r.crashed() {
		r.t.Errorf("%s: the store does not open after one fault (3 attempts): %v", r.where, err)
	}
	return false
}

// served reads, from a store just opened (before any writer may use it),
// every key whose value is in doubt: the store serves one of the values
// the key may have, and owes it after a crash once a Sync or Close after
// this returns nil. (A store that served what it had not made durable,
// and let Sync vouch for it without an fsync, is caught here.)
func (r *sweepRun) served(db *DB) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, vals := range r.model {
		if len(vals) < 2 {
			continue
		}
		got, err := db.Get([]byte(k))
		v := string(got)
		if errors.Is(err, ErrNotFound) {
			v, err = absentValue, nil
		}
		if err != nil || !vals[v] {
			r.t.Errorf("%s: after a reopen, Get(%s) = %s, %v; may be %s", r.where, k, show(v), err, showSet(vals))
			continue
		}
		r.unsynced[k] = v
	}
}

// synced files what a Sync or Close said: nil makes every write
// acknowledged before it, and every value served since the last open,
// durable.
func (r *sweepRun) synced(err error) {
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.unsynced {
		r.model[k] = map[string]bool{v: true}
	}
	clear(r.unsynced)
}

// current is the open store (nil once the run is over).
func (r *sweepRun) current() *DB {
	r.dbMu.Lock()
	defer r.dbMu.Unlock()
	return r.db
}

// reopenAfter reopens the store unless another writer already did since
// db was current.
func (r *sweepRun) reopenAfter(db *DB) bool {
	r.dbMu.Lock()
	defer r.dbMu.Unlock()
	if r.db != db {
		return r.db != nil
	}
	return r.openLocked()
}

// note files what a write was told.
func (r *sweepRun) note(key, value string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil && r.w.batched:
		r.model[key][value] = true // durable at the next Sync
		r.unsynced[key] = value
	case err == nil:
		r.model[key] = map[string]bool{value: true}
		delete(r.unsynced, key)
	case errors.Is(err, ErrOutcomeUnknown):
		r.model[key][value] = true
		delete(r.unsynced, key)
	case errors.Is(err, ErrNotStored), errors.Is(err, ErrClosed):
		// ErrClosed: refused before it reached the log (another writer
		// was reopening the store).
	default:
		// After a crash, nothing can be vouched for; before it, an error
		// must say which of the two it is.
		if !r.efs.Crashed() {
			r.t.Errorf("%s: write of %s failed saying neither not-stored nor unknown: %v", r.where, key, err)
		}
		r.model[key][value] = true
	}
}

// write puts (or, for absentValue, deletes) key, retrying as a user
// would: a write not stored is retried, after a reopen if the store
// turned read-only; one whose outcome is unknown is not. It returns false
// once the store is gone.
func (r *sweepRun) write(key, value string) bool {
	for attempt := 0; ; attempt++ {
		db := r.current()
		if db == nil {
			return false
		}
		var err error
		if value == absentValue {
			err = db.Delete([]byte(key))
		} else {
			err = db.Put([]byte(key), []byte(value))
		}
		r.note(key, value, err)
		switch {
		case err == nil:
			return true
		case r.crashed():
			return false
		case errors.Is(err, ErrOutcomeUnknown):
			return r.reopenAfter(db)
		case errors.Is(err, ErrReadOnly), errors.Is(err, ErrClosed):
			if !r.reopenAfter(db) {
				return false
			}
		case attempt >= 40: // about 4 s: a flush retried after its backoff has long succeeded
			r.t.Errorf("%s: a write is still not stored after %d attempts, one fault ago: %v", r.where, attempt+1, err)
			return false
		default:
			time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond) // a flush being retried
		}
	}
}

// checkGet reads key from the open store: it must hold a value the key
// may have (read-your-writes, faults or not).
func (r *sweepRun) checkGet(key string) {
	db := r.current()
	if db == nil {
		return
	}
	got, err := db.Get([]byte(key))
	val := string(got)
	switch {
	case errors.Is(err, ErrNotFound):
		val = absentValue
	case errors.Is(err, ErrClosed) || r.crashed():
		return
	case err != nil:
		r.t.Errorf("%s: Get(%s) during the workload: %v", r.where, key, err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.model[key][val] {
		r.t.Errorf("%s: Get(%s) = %s during the workload; may be %s", r.where, key, show(val), showSet(r.model[key]))
	}
}

// run runs the workload: writes with overwrites and deletes over a small
// key space, a restart half-way, explicit flushes now and then, and
// reads checked as it goes. It ends with Close, as a clean shutdown.
func (r *sweepRun) run() {
	if !r.open() {
		return
	}
	per := r.w.steps / r.w.writers
	var restart sync.Once
	var wg sync.WaitGroup
	for w := 0; w < r.w.writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for step := 0; step < per; step++ {
				if w == 0 && step == per/2 {
					restart.Do(func() { r.reopenAfter(r.current()) })
				}
				if w == 0 && step%97 == 96 {
					if db := r.current(); db != nil {
						if err := db.Flush(); errors.Is(err, ErrReadOnly) {
							r.reopenAfter(db)
						}
					}
				}
				// Writers own disjoint keys when there are several, so
				// that each key's acknowledged order is its writer's.
				k := sweepKey(w + r.w.writers*rng.IntN(r.w.keys/r.w.writers))
				v := absentValue
				if rng.IntN(5) != 0 {
					v = fmt.Sprintf("%s@%d.%d-%s", k, w, step, strings.Repeat("v", rng.IntN(40)))
				}
				if !r.write(k, v) {
					return
				}
				if r.w.batched && step%10 == 9 {
					if db := r.current(); db != nil {
						err := db.Sync()
						r.synced(err)
						if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrReadOnly) {
							r.reopenAfter(db)
						}
					}
				}
				if step%5 == 0 {
					r.checkGet(sweepKey(w + r.w.writers*rng.IntN(r.w.keys/r.w.writers)))
				}
			}
		}(w)
	}
	wg.Wait()
	r.dbMu.Lock()
	if r.db != nil {
		r.synced(r.db.Close()) // a failure leaves durability to be checked below
		r.db = nil
	}
	r.dbMu.Unlock()
}

// verifyAfterCrash crashes the filesystem, opens the store on the same
// directory without faults, and checks every key, what became of the
// files in before (durable when the fault fired), and lost/.
func (r *sweepRun) verifyAfterCrash(before dirSnapshot) {
	t := r.t
	if err := r.efs.Crash(); err != nil {
		t.Fatalf("%s: crash: %v", r.where, err)
	}
	if before == nil {
		before = snapshotDir(t, r.dir) // what the crash left
	}
	logs := &syncBuffer{}
	o := r.options()
	o.FS, o.Logger = nil, log.New(logs, "", 0)
	db, err := Open(r.dir, o)
	if err != nil {
		t.Errorf("%s: the store does not open after the fault and a crash: %v; before, the store said:\n%s", r.where, err, r.logs.String())
		return
	}
	for k, vals := range r.model {
		got, err := db.Get([]byte(k))
		val := string(got)
		if errors.Is(err, ErrNotFound) {
			val, err = absentValue, nil
		}
		if err != nil || !vals[val] {
			t.Errorf("%s: after the crash, %s = %s, %v; acknowledged: %s", r.where, k, show(val), err, showSet(vals))
		}
	}
	if err := db.Close(); err != nil {
		t.Errorf("%s: Close after recovery: %v", r.where, err)
	}
	failed := t.Failed()
	checkNothingDestroyed(t, r.dir, before, filesKept{filtersRebuilt: true, manifestChanged: true, unfinishedOutputs: true})
	if !failed && t.Failed() {
		t.Errorf("%s: files destroyed (above); the store said:\n%s%s", r.where, r.logs.String(), logs.String())
	}

	// Every file kept in lost/ was reported, by name, when it was put there.
	reported := r.logs.String() + logs.String()
	lost, _ := os.ReadDir(filepath.Join(r.dir, lostDir))
	for _, e := range lost {
		if !strings.Contains(reported, e.Name()) {
			t.Errorf("%s: lost/%s was never reported; the store said:\n%s", r.where, e.Name(), reported)
		}
	}
	var out bytes.Buffer
	res, err := Check(r.dir, &out, nil)
	if err != nil || res.Problems != 0 {
		t.Errorf("%s: check after recovery: %d problems, %v\n%s", r.where, res.Problems, err, out.String())
	}
}

func show(v string) string {
	if v == absentValue {
		return "absent"
	}
	return fmt.Sprintf("%q", v)
}

func showSet(vals map[string]bool) string {
	var s []string
	for v := range vals {
		s = append(s, show(v))
	}
	slices.Sort(s)
	return strings.Join(s, " or ")
}

// durableSnapshot is snapshotDir as a crash at this moment would leave
// it: files not durably created are left out, the rest cut to their
// durable length.
func durableSnapshot(dir string, durable func(string) (int64, bool)) dirSnapshot {
	snap := dirSnapshot{}
	for _, name := range evidenceFiles(dir) {
		path := filepath.Join(dir, name)
		n, ok := durable(path)
		if !ok {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue // removed meanwhile by the store: nothing to compare
		}
		snap[name] = b[:min(int64(len(b)), n)]
	}
	return snap
}

// sweepOne runs the workload with operation i of kind op going wrong as
// mode says, then verifies. It reports whether the fault fired.
func sweepOne(t *testing.T, w sweepWorkload, op errorfs.Op, i int, mode faultMode) bool {
	where := fmt.Sprintf("%s: %s #%d of kind %s", w.filter, mode, i, op)
	if w.batched {
		where = "batched " + where
	}
	r := newSweepRun(t, w, where)
	var before dirSnapshot
	fired := false
	rule := &errorfs.Rule{Op: op, Skip: i, Times: 1, Err: errorfs.EIO}
	switch mode {
	case faultCrash, faultTorn:
		rule.Crash, rule.Torn = true, mode == faultTorn
	case faultShort:
		rule.Short, rule.Err = true, errorfs.ENOSPC
	default:
		if op == errorfs.OpWrite {
			rule.Err = errorfs.ENOSPC
		}
	}
	rule.OnFire = func(durable func(string) (int64, bool)) {
		fired = true
		if mode == faultError || mode == faultShort {
			before = durableSnapshot(r.dir, durable)
		}
	}
	r.efs.Add(rule)
	// A hang (a writer waiting forever on a flush that failed, say) is a
	// finding too: name the fault rather than wait for the test timeout.
	watchdog := time.AfterFunc(2*time.Minute, func() {
		panic(fmt.Sprintf("fault sweep: %s: the workload hung", where))
	})
	defer watchdog.Stop()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s: panic: %v", where, p)
			}
		}()
		r.run()
	}()
	if t.Failed() {
		return fired
	}
	if mode == faultCrash || mode == faultTorn {
		before = nil // verifyAfterCrash snapshots what the crash left
	}
	r.verifyAfterCrash(before)
	return fired
}

// sweepCounts runs the workload once without faults and counts the
// operations of each kind.
func sweepCounts(t *testing.T, w sweepWorkload) map[errorfs.Op]int {
	r := newSweepRun(t, w, fmt.Sprintf("%s: no fault", w.filter))
	r.run()
	counts := map[errorfs.Op]int{}
	for _, op := range sweepOps {
		counts[op] = r.efs.Count(op)
	}
	r.verifyAfterCrash(nil)
	return counts
}

// sweepIndexes chooses which operations of a kind (of n) to fail.
func sweepIndexes(n int) []int {
	var idx []int
	if *sweepStride > 0 {
		for i := 0; i < n; i += *sweepStride {
			idx = append(idx, i)
		}
		return idx
	}
	p := min(*sweepPoints, n)
	for j := 0; j < p; j++ {
		// Spread over the run, from the first operation to the last.
		i := 0
		if p > 1 {
			i = j * (n - 1) / (p - 1)
		}
		idx = append(idx, i)
	}
	return slices.Compact(idx)
}

func sweep(t *testing.T, w sweepWorkload, modes []faultMode) {
	if *sweepOnly != "" {
		var f, m, o string
		var i int
		if _, err := fmt.Sscanf(strings.ReplaceAll(*sweepOnly, "/", " "), "%s %s %s %d", &f, &m, &o, &i); err != nil {
			t.Fatalf("-sweep-only %q: %v", *sweepOnly, err)
		}
		if f != string(w.filter) {
			t.Skip("-sweep-only names another filter")
		}
		for _, mode := range modes {
			for _, op := range sweepOps {
				if mode.String() == m && op.String() == o {
					t.Logf("fired: %v", sweepOne(t, w, op, i, mode))
					return
				}
			}
		}
		t.Skip("-sweep-only names another mode")
	}
	counts := sweepCounts(t, w)
	t.Logf("%s: operations without a fault: %v", w.filter, counts)
	for _, op := range []errorfs.Op{errorfs.OpWrite, errorfs.OpSync, errorfs.OpCreate, errorfs.OpRename, errorfs.OpSyncDir} {
		if counts[op] == 0 {
			t.Fatalf("the workload made no %s: it exercises less than it should", op)
		}
	}
	runs, unfired := 0, 0
	for _, mode := range modes {
		for _, op := range sweepOps {
			if mode == faultShort && op != errorfs.OpWrite {
				continue
			}
			if mode == faultTorn && op != errorfs.OpWrite && op != errorfs.OpSync {
				// With every write fsynced before it is acknowledged,
				// only a log write and its fsync have unsynced bytes to
				// tear; elsewhere a torn crash is a plain one.
				continue
			}
			for _, i := range sweepIndexes(counts[op]) {
				runs++
				if !sweepOne(t, w, op, i, mode) {
					unfired++ // background timing made this run shorter
				}
				if t.Failed() {
					return // the first failure is the one to read
				}
			}
		}
	}
	t.Logf("%s: %d faulted runs (%d ran out of operations before the fault)", w.filter, runs, unfired)
}

// TestFaultSweep fails each kind of filesystem operation at points across
// a workload, for every filter kind, and checks what survives.
func TestFaultSweep(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel() // runs wait on fsyncs and flush retries: overlap them
			sweep(t, sweepWorkload{filter: f, steps: 600, keys: 60, writers: 1}, []faultMode{faultError, faultShort})
		})
	}
}

// TestFaultSweepCrash crashes the machine just before each kind of
// operation at points across the workload, for every filter kind: once
// dropping every write not fsynced, once tearing them (half survives).
func TestFaultSweepCrash(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel() // runs wait on fsyncs and flush retries: overlap them
			sweep(t, sweepWorkload{filter: f, steps: 600, keys: 60, writers: 1}, []faultMode{faultCrash, faultTorn})
		})
	}
}

// TestFaultSweepConcurrent is the sweep with four concurrent writers (on
// disjoint keys), for the race detector: coarse, one filter kind per
// mode.
func TestFaultSweepConcurrent(t *testing.T) {
	w := sweepWorkload{filter: FilterGlobal, steps: 800, keys: 80, writers: 4}
	sweep(t, w, []faultMode{faultError, faultTorn})
}

// TestFaultSweepBatched is the sweep with NoSyncEachWrite: writes are
// acknowledged once in the OS and made durable by a Sync every ten writes
// (and by Close); a write is owed to the user after a crash only once a
// Sync after it succeeded.
func TestFaultSweepBatched(t *testing.T) {
	race.SkipLong(t)
	w := sweepWorkload{filter: FilterCuckoo, steps: 600, keys: 60, writers: 1, batched: true}
	sweep(t, w, []faultMode{faultError, faultTorn})
}
