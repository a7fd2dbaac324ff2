package tablefilter

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// mvccWorkload is a store's keys: prefixes, each with one to three
// versions ("<prefix>@<version>", pebbleAtComparer's form), and prefixes
// absent from it.
type mvccWorkload struct {
	prefixes, absent [][]byte
	versions         []int
}

func newMVCCWorkload(n int, seed uint64) mvccWorkload {
	keys := testkeys.Random(2*n, 16, seed)
	for _, k := range keys {
		// pebbleAtComparer splits at the last '@': keep it out of prefixes.
		for i := range k {
			if k[i] == '@' {
				k[i] = '#'
			}
		}
	}
	w := mvccWorkload{prefixes: keys[:n], absent: keys[n:], versions: make([]int, n)}
	for i := range w.versions {
		w.versions[i] = 1 + i%7/5 + i%11/10 // mostly one, some two or three
	}
	return w
}

func mvccKey(prefix []byte, version int) []byte {
	return fmt.Appendf(append([]byte(nil), prefix...), "@%06d", version)
}

// write puts every version of every prefix, flushing every flushEvery
// prefixes, and calls between after each flush.
func (w mvccWorkload) write(tb testing.TB, db *pebble.DB, flushEvery int, between func()) {
	val := make([]byte, 48) // incompressible, so the data fills levels
	src := rand.NewChaCha8([32]byte{2})
	for i, p := range w.prefixes {
		b := db.NewBatch()
		for v := range w.versions[i] {
			src.Read(val)
			if err := b.Set(mvccKey(p, v+1), val, nil); err != nil {
				tb.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			tb.Fatal(err)
		}
		if i%flushEvery == flushEvery-1 {
			if err := db.Flush(); err != nil {
				tb.Fatal(err)
			}
			between()
		}
	}
	if err := db.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// waitQuiet waits until no compaction has run for a while.
func waitQuiet(db *pebble.DB) {
	quiet, last := 0, db.Metrics().Compact.Count
	for deadline := time.Now().Add(time.Minute); quiet < 10 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		if m := db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.Count == last {
			quiet++
		} else {
			quiet, last = 0, m.Compact.Count
		}
	}
}

// treeFilterBits returns the filter bytes of db's tables, times 8, and
// checks that every table carries a filter under a name opts registers.
func treeFilterBits(tb testing.TB, db *pebble.DB, opts *pebble.Options) (bits uint64, tables int) {
	tb.Helper()
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		tb.Fatal(err)
	}
	for l, ts := range levels {
		for _, t := range ts {
			name := t.Properties.FilterPolicyName
			if _, ok := opts.Filters[name]; !ok || t.Properties.FilterSize == 0 {
				tb.Errorf("L%d table %s: filter %q of %d bytes, registered %v", l, t.FileNum, name, t.Properties.FilterSize, ok)
			}
			bits += 8 * t.Properties.FilterSize
			tables++
		}
	}
	return bits, tables
}

// probeMVCC checks every version of every prefix with Get and every prefix
// with SeekPrefixGE (L6 filters on), then probes the absent prefixes, and
// returns the tables read in vain per absent Get and per absent
// SeekPrefixGE (Pebble's filter misses: for an absent key, every table
// whose filter said "maybe").
func probeMVCC(tb testing.TB, db *pebble.DB, w mvccWorkload) (perGet, perSeek float64) {
	tb.Helper()
	for i, p := range w.prefixes {
		for v := range w.versions[i] {
			_, closer, err := db.Get(mvccKey(p, v+1))
			if err != nil {
				tb.Fatalf("Get of a present key %q: %v", mvccKey(p, v+1), err)
			}
			closer.Close()
		}
	}
	it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer it.Close()
	for _, p := range w.prefixes {
		if !it.SeekPrefixGE(p) {
			tb.Fatalf("SeekPrefixGE missed a present prefix %q", p)
		}
	}
	before := db.Metrics().Filter
	for _, p := range w.absent {
		if _, _, err := db.Get(mvccKey(p, 1)); err != pebble.ErrNotFound {
			tb.Fatalf("Get of an absent key: %v", err)
		}
	}
	afterGet := db.Metrics().Filter
	for _, p := range w.absent {
		if it.SeekPrefixGE(p) {
			tb.Fatalf("SeekPrefixGE found an absent prefix %q", p)
		}
	}
	afterSeek := db.Metrics().Filter
	// Pebble's Get never reads an L6 table's filter: when compactions
	// have moved the whole tree to L6 (a small tree's base level is L6,
	// and the last flushes may have been compacted too), or the tables
	// above it span no absent key, no Get reads a filter, and only
	// SeekPrefixGE's count says anything. Gets that read filters must
	// have been spared some table.
	getChecks := (afterGet.Hits + afterGet.Misses) - (before.Hits + before.Misses)
	if (getChecks > 0 && afterGet.Hits == before.Hits) || afterSeek.Hits == afterGet.Hits {
		tb.Errorf("filters excluded no table: Get %d of %d filter checks, SeekPrefixGE %d",
			afterGet.Hits-before.Hits, getChecks, afterSeek.Hits-afterGet.Hits)
	}
	n := float64(len(w.absent))
	return float64(afterGet.Misses-before.Misses) / n, float64(afterSeek.Misses-afterGet.Misses) / n
}

func adaptiveTestOptions() *pebble.Options {
	o := levelsTestOptions()
	o.Comparer = pebbleAtComparer
	// Memtables small next to the tree, as in a store of any size: L0's
	// tables, which the fit gives wide budgets and compactions soon
	// rewrite, then hold a small share of the keys, and the tree at rest
	// is close to the tree under writes.
	o.MemTableSize = 128 << 10
	for l := range o.TargetFileSizes {
		o.TargetFileSizes[l] = 32 << 10
	}
	return o
}

// openAdaptive opens dir with the one call and a short refit interval,
// and attaches the handle.
func openAdaptive(tb testing.TB, dir string, o *pebble.Options, avg float64) (*pebble.DB, *AdaptiveBudgets) {
	tb.Helper()
	return openAdaptiveWith(tb, dir, o, avg, SetAdaptiveBudgets)
}

// openAdaptiveWith is openAdaptive with the one call set.
func openAdaptiveWith(tb testing.TB, dir string, o *pebble.Options, avg float64,
	set func(*pebble.Options, float64, ...AdaptiveOption) *AdaptiveBudgets) (*pebble.DB, *AdaptiveBudgets) {
	tb.Helper()
	tuned := set(o, avg)
	tuned.core.Loop = pebblecore.NewRefitLoop(tuned.core.Tuner, 20*time.Millisecond)
	db, err := pebble.Open(dir, o)
	if err != nil {
		tb.Fatal(err)
	}
	tuned.Attach(db)
	return db, tuned
}

// TestAdaptiveBudgetsPebble grows a real store under the self-tuning setup
// and checks that its budgets change while it runs, that every table keeps
// a registered filter, that no present key is missed by Get or
// SeekPrefixGE (L6 filters on), that the live tree spends about the
// average asked, and that a reopen with the same one call reads every
// table with its filter.
//
// The live average is every table's FilterSize × 8 over the distinct
// prefixes written: no key is overwritten or deleted, so each prefix lives
// in one table, or in two when a table boundary splits its versions, which
// counts the prefix once here but in both filters, an error under
// tables/prefixes that the test reports.
func TestAdaptiveBudgetsPebble(t *testing.T) {
	race.SkipLong(t)
	testAdaptiveStore(t, SetAdaptiveBudgets, SetAdaptiveBudgets, pebblecore.NamePrefix(3, false))
}

// TestAdaptiveBudgetsV4Pebble is TestAdaptiveBudgetsPebble for
// SetAdaptiveBudgetsV4, reopened under SetAdaptiveBudgets: every table the
// tuned store writes carries a version-4 name, and the version-3 setup
// reads every one of them through its filter.
func TestAdaptiveBudgetsV4Pebble(t *testing.T) {
	race.SkipLong(t)
	testAdaptiveStore(t, SetAdaptiveBudgetsV4, SetAdaptiveBudgets, pebblecore.NamePrefix(4, false))
}

// testAdaptiveStore grows a store under the one call set, checks it, and
// reopens it under reopen; every table the first open writes carries a
// name starting with prefix.
func testAdaptiveStore(t *testing.T, set, reopen func(*pebble.Options, float64, ...AdaptiveOption) *AdaptiveBudgets, prefix string) {
	const avg = 10
	w := newMVCCWorkload(60_000, 21)
	dir := t.TempDir()
	o := adaptiveTestOptions()
	var userFlushes atomic.Int64
	o.EventListener = &pebble.EventListener{FlushEnd: func(pebble.FlushInfo) { userFlushes.Add(1) }}
	db, tuned := openAdaptiveWith(t, dir, o, avg, set)

	seen := map[[NumLevels]float64]bool{tuned.Budgets(): true}
	w.write(t, db, 4000, func() {
		time.Sleep(30 * time.Millisecond) // let a refit land between flushes
		seen[tuned.Budgets()] = true
	})
	waitQuiet(db)
	if err := tuned.Refit(db); err != nil {
		t.Fatal(err)
	}
	seen[tuned.Budgets()] = true
	if len(seen) < 2 {
		t.Errorf("budgets never changed: %v", tuned.Budgets())
	}
	if userFlushes.Load() == 0 {
		t.Error("the user's own event listener was not called")
	}
	if err := tuned.Err(); err != nil {
		t.Errorf("refit: %v", err)
	}

	checkTree := func(what string, db *pebble.DB, o *pebble.Options) {
		t.Helper()
		bits, tables := treeFilterBits(t, db, o)
		live := float64(bits) / float64(len(w.prefixes))
		own, ownKeys, err := tuned.LiveBitsPerKey(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d tables, live %.3f bits/key (tuner counts %.3f over %d keys), budgets %v, %d budget sets seen\n%s",
			what, tables, live, own, ownKeys, tuned.Budgets(), len(seen), db.Metrics())
		// The goal, within 2% of the average asked, is measured on the
		// benchmark's tree (go run ./bench -quick -levels). This tree is
		// small, and where it ends depends on when Pebble's background
		// compactions land: runs end between 9.5 and 10.4 bits/key. So
		// this checks that the tuner follows the average, within 6%; the
		// tuner's own tests (pebblecore) check its arithmetic exactly.
		if slack := float64(tables) / float64(len(w.prefixes)); live < avg*(0.94-slack) || live > avg*(1.06+slack) {
			t.Errorf("%s: live tree spends %.3f bits/key, asked %v", what, live, avg)
		}
		probeMVCC(t, db, w)
		checkEveryTableFiltered(t, db, w, 300)
	}
	checkTree("first open", db, o)
	for name, n := range filterNames(t, db, o) {
		if name != prefix {
			t.Errorf("%d tables named %s*, want %s* only", n, name, prefix)
		}
	}
	populated := 0
	for _, l := range db.Metrics().Levels {
		if l.TablesCount > 0 {
			populated++
		}
	}
	if populated < 3 {
		t.Errorf("only %d populated levels; the test needs a taller tree", populated)
	}
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	o = adaptiveTestOptions()
	db, tuned = openAdaptiveWith(t, dir, o, avg, reopen)
	checkTree("reopened", db, o)
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAdaptiveVersusUniform builds the same store under the
// self-tuning setup and under one uniform policy spending the same filter
// bytes, and reports the tables each reads in vain per absent Get and per
// absent SeekPrefixGE (L6 filters on), and each tree's bits per key. The
// uniform budget that spends the tuned tree's bytes is found by building
// that tree twice: first at the tuned tree's bits per key, then at that
// budget scaled by what the first build overspent (small tables' filters
// spend more than their budget).
func BenchmarkAdaptiveVersusUniform(b *testing.B) {
	const avg = 10
	w := newMVCCWorkload(60_000, 21)
	uniform := func(budget float64) (bpk, perGet, perSeek float64) {
		o := adaptiveTestOptions()
		for l := range o.Levels {
			o.Levels[l].FilterPolicy = NewPolicy(budget)
		}
		RegisterPolicies(o, budget)
		db, err := pebble.Open(b.TempDir(), o)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		w.write(b, db, 4000, func() {})
		waitQuiet(db)
		bits, _ := treeFilterBits(b, db, o)
		perGet, perSeek = probeMVCC(b, db, w)
		return float64(bits) / float64(len(w.prefixes)), perGet, perSeek
	}
	for range b.N {
		o := adaptiveTestOptions()
		db, tuned := openAdaptive(b, b.TempDir(), o, avg)
		w.write(b, db, 4000, func() {})
		waitQuiet(db)
		bits, _ := treeFilterBits(b, db, o)
		tunedBPK := float64(bits) / float64(len(w.prefixes))
		tunedGet, tunedSeek := probeMVCC(b, db, w)
		b.Logf("tuned budgets %v", tuned.Budgets())
		tuned.Detach()
		db.Close()

		first, _, _ := uniform(tunedBPK)
		budget := tunedBPK * tunedBPK / first
		uniformBPK, uniformGet, uniformSeek := uniform(budget)
		b.Logf("uniform budget %.3f", budget)
		b.ReportMetric(tunedBPK, "tuned-bits/key")
		b.ReportMetric(uniformBPK, "uniform-bits/key")
		b.ReportMetric(tunedGet, "tuned-fp/get")
		b.ReportMetric(uniformGet, "uniform-fp/get")
		b.ReportMetric(tunedSeek, "tuned-fp/seek")
		b.ReportMetric(uniformSeek, "uniform-fp/seek")
	}
}

// BenchmarkAdaptiveV4VersusV3 builds the same store under
// SetAdaptiveBudgetsV4 and under SetAdaptiveBudgets at the same average,
// and reports the tables each reads in vain per absent Get and per absent
// SeekPrefixGE (L6 filters on), and each tree's bits per key.
func BenchmarkAdaptiveV4VersusV3(b *testing.B) {
	const avg = 10
	w := newMVCCWorkload(60_000, 21)
	for range b.N {
		for _, c := range []struct {
			name string
			set  func(*pebble.Options, float64, ...AdaptiveOption) *AdaptiveBudgets
		}{{"v3", SetAdaptiveBudgets}, {"v4", SetAdaptiveBudgetsV4}} {
			o := adaptiveTestOptions()
			db, tuned := openAdaptiveWith(b, b.TempDir(), o, avg, c.set)
			w.write(b, db, 4000, func() {})
			waitQuiet(db)
			bits, _ := treeFilterBits(b, db, o)
			perGet, perSeek := probeMVCC(b, db, w)
			b.Logf("%s budgets %v", c.name, tuned.Budgets())
			tuned.Detach()
			db.Close()
			b.ReportMetric(float64(bits)/float64(len(w.prefixes)), c.name+"-bits/key")
			b.ReportMetric(perGet, c.name+"-fp/get")
			b.ReportMetric(perSeek, c.name+"-fp/seek")
		}
	}
}

// TestAdaptiveBudgetsRefitsUnderWrites runs refits as fast as the loop
// allows while flushes and compactions write tables, for the race
// detector: budgets change under writers, and no key goes missing.
func TestAdaptiveBudgetsRefitsUnderWrites(t *testing.T) {
	w := newMVCCWorkload(4000, 23)
	o := adaptiveTestOptions()
	tuned := SetAdaptiveBudgets(o, 8)
	tuned.core.Loop = pebblecore.NewRefitLoop(tuned.core.Tuner, time.Millisecond)
	db, err := pebble.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	tuned.Attach(db)
	w.write(t, db, 500, func() {})
	waitQuiet(db)
	tuned.Detach()
	treeFilterBits(t, db, o)
	probeMVCC(t, db, w)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
