package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/advice"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/internal/terminal"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
	"github.com/schollz/progressbar/v3"
)

type migrateFlags struct {
	bits    float64
	levels  bool
	reserve uint64
	probes  int
	quiet   bool
	format  string
	ratchet bool
}

// tableCreatedHook, if set, runs each time the migration creates a table
// file: the crash test stops the process there, mid-compaction.
var tableCreatedHook func()

func newMigrateFlags(stderr io.Writer) (*flag.FlagSet, *migrateFlags) {
	f := &migrateFlags{}
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&f.bits, "bits", 0, "lsmcuckoo bits per key (required; 4..64); with -levels, the average over the tree")
	fs.BoolVar(&f.levels, "levels", false, "budgets per level, fitted to the store's measured shape (LevelBudgets of tablefilter or tablefilter/pebblev1)")
	fs.Uint64Var(&f.reserve, "reserve", 0, "bytes of disk to leave free beyond the rewrite's estimate")
	fs.IntVar(&f.probes, "probes", 2000, "random absent keys probed per table in the before/after summaries")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fs.StringVar(&f.format, "format", "pebble", "the Pebble that rewrites the store: pebble (the one inspect finds), pebble1 or pebble2")
	fs.BoolVar(&f.ratchet, "ratchet", false, "Pebble v1: first raise a store older than FormatRangeKeys (8) to it; releases before Pebble v22.2 no longer open the store")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: lsmcuckoo migrate [flags] DIR -bits N

Rewrites every table of the Pebble store in DIR with lsmcuckoo filters: it
opens the store with the new policy (uniform, or per level with -levels),
registers every filter name its tables carry so none is read unfiltered
meanwhile, and compacts the whole key range. A Pebble v1.1 store is rewritten
with Pebble v1 and package tablefilter/pebblev1, a Pebble v2 store with Pebble
v2 and package tablefilter, chosen as inspect chooses (-format to force).
Stop the store's owner first: migrate refuses a store another process holds, a
disk with too little room for the rewrite, a store the chosen Pebble cannot
open, and a Pebble v1 store older than FormatRangeKeys (8) unless -ratchet,
changing nothing. An interrupted migration leaves a store that opens with all
its data; run migrate again to finish it.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, f
}

func runMigrate(args []string, stdout, stderr io.Writer) int {
	fs, f := newMigrateFlags(stderr)
	dir, err := parse(fs, args)
	if err == nil {
		if f.bits == 0 {
			err = usageError{"-bits is required"}
		} else {
			err = checkBits("-bits", f.bits)
		}
	}
	if err == nil && (f.probes < 1 || f.probes > 10_000_000) {
		err = usageError{fmt.Sprintf("-probes %d: want 1..10000000", f.probes)}
	}
	if err == nil && f.format != "pebble" && f.format != "pebble1" && f.format != "pebble2" {
		err = usageError{fmt.Sprintf("-format %q: want pebble, pebble1 or pebble2", f.format)}
	}
	if err != nil {
		return exitFor(err, fs, stderr)
	}
	if err := migrate(dir, f, stdout, stderr); err != nil {
		return exitFor(err, fs, stderr)
	}
	return exitOK
}

// migration is one Pebble module's part of migrate: its refusals, the
// options that write the new filters, its lock and its open store. The
// rest of migrate is the same for both.
type migration interface {
	// refuse says why this module cannot rewrite the store, nil if it can.
	refuse(s *pebblestore.Snapshot, f *migrateFlags) error
	// configure sets the options that write the plan's filters and read
	// those the tables carry now, and returns the Go line the application
	// must run on every open.
	configure(p plan) (line string)
	// lock takes Pebble's lock on dir, which open then uses.
	lock(dir string) (io.Closer, error)
	// open opens the store with the configured options; created runs
	// each time a table file is created.
	open(dir string, created func()) (migrationDB, error)
}

// migrationDB is a store open for the rewrite.
type migrationDB interface {
	// pending returns the tables not yet carrying their level's new
	// filter, the store's table bytes and those of the pending tables,
	// and the store's whole key range [start, end).
	pending(want [pebblestore.NumLevels]string) (left int, total, leftBytes uint64, start, end []byte, err error)
	// unsetRangeKeys writes a range-key unset of suffix over [start, end).
	unsetRangeKeys(start, end, suffix []byte) error
	// compact compacts [start, end) and reports a damaged table by name.
	compact(start, end []byte) error
	close() error
}

func migrate(dir string, f *migrateFlags, stdout, stderr io.Writer) error {
	if err := checkDir(dir, "pebble"); err != nil {
		return err
	}
	// Every refusal comes before the lock is taken: pebble.LockDirectory
	// truncates LOCK, and a refused migration changes nothing.
	held, err := heldByOther(dir)
	if err != nil {
		return fmt.Errorf("check the lock of %s: %v", dir, err)
	}
	if held {
		return fmt.Errorf("refused: %s is held by another process (stop it first)", dir)
	}
	format := f.format
	if format == "pebble" {
		format = "auto"
	}
	module, err := whichPebble(dir, format)
	if err != nil {
		return fmt.Errorf("refused: %v", err)
	}
	var m migration = &migrationV2{}
	if module.module == pebblestore.ModuleV1 {
		m = &migrationV1{}
	}
	before, err := module.open(dir)
	if err != nil {
		return fmt.Errorf("refused: %v", err)
	}
	if err := m.refuse(before, f); err != nil {
		return err
	}
	if err := pebblestore.CheckManifest(dir, before); err != nil {
		return fmt.Errorf("refused: %v", err)
	}
	if _, def := pebblestore.Comparer(before.Comparer); !def {
		return fmt.Errorf("refused: the store uses comparer %q; migrate from the application: open the store with its own comparer and an lsmcuckoo policy, and run db.Compact over the whole key range", before.Comparer)
	}
	if before.Merger != pebble.DefaultMerger.Name {
		return fmt.Errorf("refused: the store uses merger %q, which compactions need; rewrite it from the application", before.Merger)
	}
	// The rewrite's filters hold whole keys, as the default comparer's
	// reads probe them; an application whose comparer has the default's
	// name and a Split of its own would probe them with prefixes and find
	// nothing.
	table, how, err := module.filterKeys(dir)
	if err != nil {
		return fmt.Errorf("refused: %v", err)
	}
	if table != "" {
		return fmt.Errorf("refused: the filter of %s holds key prefixes (%s), not whole keys: the application opens the store with a comparer named %q that has a Split of its own, "+
			"and filters rewritten under the default comparer would hide its keys from its reads; migrate from the application: open the store with its own comparer and an lsmcuckoo policy, and run db.Compact over the whole key range",
			table, how, before.Comparer)
	}
	rep := advice.Build(before, f.probes, 1, advice.PathGet, f.bits)
	if len(rep.Damaged) > 0 {
		d := rep.Damaged[0]
		return fmt.Errorf("refused: %d damaged or missing tables, first %06d.sst on L%d: %s", len(rep.Damaged), d.FileNum, d.Level, d.Error)
	}
	fmt.Fprintf(stdout, "%s store (%s); the rewrite uses %s.\nBefore:\n", module.name, module.why, module.name)
	writeSummary(stdout, rep)

	p := planOf(before, rep, f)
	want, line := p.want, m.configure(p)
	need, avail, err := diskEstimate(dir, before, want, f.reserve)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nDisk: the rewrite needs up to %s free (every table written anew before the old one is removed, plus %s reserve); %s available.\n",
		kb(need), kb(f.reserve), kb(avail))
	if avail < need {
		return fmt.Errorf("refused: too little free disk: the rewrite needs up to %s, %s is available", kb(need), kb(avail))
	}
	lock, err := m.lock(dir)
	if err != nil {
		if held, _ := heldByOther(dir); held {
			return fmt.Errorf("refused: %s is held by another process (stop it first): %v", dir, firstLine(err))
		}
		return fmt.Errorf("refused: cannot lock %s: %v", dir, firstLine(err))
	}
	defer lock.Close()
	if err := rewrite(dir, m, want, f.quiet, stderr); err != nil {
		return err
	}

	after, err := module.open(dir)
	if err != nil {
		return err
	}
	repAfter := advice.Build(after, f.probes, 1, advice.PathGet, f.bits)
	fmt.Fprintln(stdout, "\nAfter:")
	writeSummary(stdout, repAfter)
	if left := stale(after, want); left > 0 {
		return fmt.Errorf("%d tables still carry another filter; run migrate again", left)
	}
	fmt.Fprintf(stdout, "\nGo lines to set on every open from now on (Pebble does not restore filter policies from OPTIONS):\n")
	fmt.Fprintf(stdout, "  %s\n", line)
	return nil
}

// migrationV2 rewrites a Pebble v2 store with package tablefilter.
type migrationV2 struct {
	opts *pebble.Options
}

func (*migrationV2) refuse(*pebblestore.Snapshot, *migrateFlags) error { return nil }

func (m *migrationV2) lock(dir string) (io.Closer, error) {
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, err
	}
	m.opts.Lock = lock
	return lock, nil
}

// plan is what a migration writes and what it reads meanwhile.
type plan struct {
	levels  bool                           // per-level budgets, else uniform
	budgets [pebblestore.NumLevels]float64 // each level's budget
	want    [pebblestore.NumLevels]string  // the filter name each level's tables end up with
	carried []float64                      // the lsmcuckoo budgets the tables carry now
	bloom   bool                           // some table carries Pebble's bloom filter
	ratchet bool                           // -ratchet
	format  uint64                         // the store's format major version
}

// planOf plans the migration of the store: uniform -bits, or with -levels
// the budgets LevelBudgets fits to its measured shape. The policy names
// and the fitted budgets are the same in both Pebbles' adapters.
func planOf(s *pebblestore.Snapshot, rep *advice.Report, f *migrateFlags) plan {
	p := plan{levels: f.levels, budgets: uniformOf(f.bits), ratchet: f.ratchet, format: s.FormatVersion}
	if f.levels {
		p.budgets = tablefilter.LevelBudgets(shapeOf(s), f.bits)
	}
	for l, b := range p.budgets {
		p.want[l] = tablefilter.NewPolicy(b).Name()
	}
	// Every name the tables carry now, so that none is read unfiltered
	// while the rewrite runs. A completed migration leaves no table under
	// the old names, so the application needs only the new policy.
	for _, n := range rep.Names {
		switch pebblestore.Kind(n) {
		case pebblestore.KindLsmcuckoo:
			if x, ok := pebblestore.LsmcuckooBudget(n); ok {
				p.carried = append(p.carried, x)
			}
		case pebblestore.KindBloom:
			p.bloom = true
		}
	}
	return p
}

// configure sets Pebble v2's options (migration.configure): Options.Levels
// has seven entries, and a level whose policy is unset takes the one above.
func (m *migrationV2) configure(p plan) string {
	opts := &pebble.Options{Logger: quietLogger{}}
	m.opts = opts
	line := fmt.Sprintf("tablefilter.SetLevelBudgets(opts, [7]float64{%s})", budgetList(p.budgets))
	if p.levels {
		tablefilter.SetLevelBudgets(opts, p.budgets)
	} else {
		policy := tablefilter.NewPolicy(p.budgets[0])
		for l := range opts.Levels {
			opts.Levels[l].FilterPolicy = policy
		}
		tablefilter.RegisterPolicies(opts, p.budgets[0])
		line = fmt.Sprintf("opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(%s) // levels left unset take L0's", fmtBits(p.budgets[0]))
	}
	if len(p.carried) > 0 {
		tablefilter.RegisterPolicies(opts, p.carried...)
	}
	if p.bloom {
		opts.Filters[pebblestore.BloomName] = bloom.FilterPolicy(10)
	}
	return line
}

// budgetList is the Go literal of seven budgets' elements.
func budgetList(b [pebblestore.NumLevels]float64) string {
	parts := make([]string, len(b))
	for l, x := range b {
		parts[l] = fmtBits(x)
	}
	return strings.Join(parts, ", ")
}

// shapeOf is the store's measured shape: each level's keys and L0's
// sublevels (tablefilter.MeasuredLevelShape takes the sublevels from
// Metrics, which a freshly opened store does not fill in yet).
func shapeOf(s *pebblestore.Snapshot) tablefilter.LevelShape {
	var shape tablefilter.LevelShape
	for l := range s.Levels {
		for _, t := range s.Levels[l] {
			shape.Keys[l] += float64(t.NumEntries)
		}
	}
	shape.L0Runs = float64(s.Sublevels)
	return shape
}

func fmtBits(b float64) string { return fmt.Sprint(b) }

// diskEstimate returns the free bytes the rewrite may need and those
// available. A full-range compaction keeps each input table until the
// compaction that replaces it finishes, so the worst case holds every table
// twice, with the new filters' size in place of the old.
func diskEstimate(dir string, s *pebblestore.Snapshot, want [pebblestore.NumLevels]string, reserve uint64) (need, avail uint64, err error) {
	var tables, oldFilters, newFilters uint64
	for l := range s.Levels {
		b, _ := pebblestore.LsmcuckooBudget(want[l])
		for _, t := range s.Levels[l] {
			tables += t.Size
			oldFilters += uint64(len(t.Filter))
			newFilters += uint64(float64(t.NumEntries) * b / 8)
		}
	}
	need = addSat(tables, reserve)
	if newFilters > oldFilters {
		need = addSat(need, newFilters-oldFilters)
	}
	u, err := vfs.Default.GetDiskUsage(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("free disk of %s: %v", dir, err)
	}
	return need, u.AvailBytes, nil
}

// addSat adds without wrapping: a reserve near 2^64 must refuse the
// rewrite, not wrap the estimate round to a figure any disk meets.
func addSat(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

// stale counts the tables whose filter is not the one their level's policy
// writes.
func stale(s *pebblestore.Snapshot, want [pebblestore.NumLevels]string) int {
	n := 0
	for l := range s.Levels {
		for _, t := range s.Levels[l] {
			if t.FilterName != want[l] {
				n++
			}
		}
	}
	return n
}

// rewrite opens the store with the new policies and compacts its whole key
// range until every table carries its level's new filter.
//
// DB.Compact alone does not rewrite every table: it compacts level by level
// into the next and never L6 into itself, and a table with nothing to merge
// below it is moved, keeping its old filter. So before each round a range-key
// unset of a suffix no key carries is written over the whole key range: it
// removes nothing, but it gives every level a table overlapping every table
// below, so each table is merged, and so rewritten, on its way down; at the
// bottom level the unset has nothing beneath it and is dropped.
func rewrite(dir string, m migration, want [pebblestore.NumLevels]string, quiet bool, stderr io.Writer) error {
	db, err := m.open(dir, func() {
		if tableCreatedHook != nil {
			tableCreatedHook()
		}
	})
	if err != nil {
		return fmt.Errorf("open %s: %v", dir, firstLine(err))
	}
	closed := false
	defer func() {
		if !closed {
			db.close()
		}
	}()
	const rounds = 3
	for round := 0; round < rounds; round++ {
		left, _, leftBytes, start, end, err := db.pending(want)
		if err != nil {
			return err
		}
		if left == 0 {
			break
		}
		var suffix [16]byte
		copy(suffix[:], "lsmcuckoo")
		_, _ = rand.Read(suffix[9:])
		if err := db.unsetRangeKeys(start, end, suffix[:]); err != nil {
			return fmt.Errorf("mark the key range: %v", firstLine(err))
		}
		if err := compactWithProgress(db, want, start, end, leftBytes, quiet, stderr); err != nil {
			return err
		}
	}
	closed = true
	if err := db.close(); err != nil {
		return fmt.Errorf("close %s: %v", dir, firstLine(err))
	}
	return nil
}

// open opens the store for the rewrite (migration.open).
func (m *migrationV2) open(dir string, created func()) (migrationDB, error) {
	// Pebble's default answer to a damaged block is Logger.Fatalf. The
	// checks before the rewrite read no data block, so a damaged one shows
	// first here: the compaction reading it fails, and the damage is named
	// in the error the command reports.
	db := &dbV2{}
	m.opts.EventListener = &pebble.EventListener{
		TableCreated: func(pebble.TableCreateInfo) { created() },
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			db.mu.Lock()
			defer db.mu.Unlock()
			if db.corruption == "" {
				db.corruption = info.Path
				if info.Details != nil {
					db.corruption += ": " + firstLine(info.Details)
				}
			}
		},
	}
	var err error
	db.DB, err = pebble.Open(dir, m.opts)
	if err != nil {
		return nil, err
	}
	return db, nil
}

// dbV2 is a Pebble v2 store open for the rewrite.
type dbV2 struct {
	*pebble.DB
	mu         sync.Mutex
	corruption string // the first damaged table a compaction met
}

func (db *dbV2) pending(want [pebblestore.NumLevels]string) (left int, total, leftBytes uint64, start, end []byte, err error) {
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		return 0, 0, 0, nil, nil, fmt.Errorf("list tables: %v", firstLine(err))
	}
	return sumPending(levels, want, func(t pebble.SSTableInfo) tableFacts {
		return tableFacts{t.Size, t.Properties.FilterPolicyName, t.Smallest.UserKey, t.Largest.UserKey}
	})
}

func (db *dbV2) unsetRangeKeys(start, end, suffix []byte) error {
	return db.RangeKeyUnset(start, end, suffix, pebble.Sync)
}

func (db *dbV2) compact(start, end []byte) error {
	err := db.Compact(context.Background(), start, end, true)
	if err != nil {
		db.mu.Lock()
		defer db.mu.Unlock()
		if db.corruption != "" {
			return stopped{fmt.Sprintf("stopped: damaged table %s; the store keeps the data it had", db.corruption)}
		}
	}
	return err
}

func (db *dbV2) close() error { return db.Close() }

// stopped is a rewrite stopped by a damaged table, its message complete.
type stopped struct{ msg string }

func (e stopped) Error() string { return e.msg }

// tableFacts is what migrate needs of one table from either Pebble's
// SSTables.
type tableFacts struct {
	size              uint64
	filter            string
	smallest, largest []byte
}

// sumPending answers migrationDB.pending from the tables of a store, level
// by level. The largest key is inclusive (or a range's exclusive end, which
// a successor still covers); its bytewise successor is the first key past
// it. Both Pebbles' default comparer, the only one migrate rewrites under,
// orders keys bytewise.
func sumPending[T any](levels [][]T, want [pebblestore.NumLevels]string, facts func(T) tableFacts) (left int, total, leftBytes uint64, start, end []byte, err error) {
	for l, tables := range levels {
		for _, t := range tables {
			f := facts(t)
			total += f.size
			if f.filter != want[l] {
				left++
				leftBytes += f.size
			}
			if start == nil || bytes.Compare(f.smallest, start) < 0 {
				start = append([]byte(nil), f.smallest...)
			}
			if end == nil || bytes.Compare(f.largest, end) > 0 {
				end = append([]byte(nil), f.largest...)
			}
		}
	}
	return left, total, leftBytes, start, append(end, 0), nil
}

// compactWithProgress compacts [start, end) and shows, on stderr when it is
// a terminal, how many of the bytes that were pending (tables not yet
// carrying their new filter) are done.
func compactWithProgress(db migrationDB, want [pebblestore.NumLevels]string, start, end []byte, pendingBytes uint64, quiet bool, stderr io.Writer) error {
	var bar *progressbar.ProgressBar
	if !quiet && terminal.Is(stderr) {
		bar = progressbar.NewOptions64(int64(pendingBytes),
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("rewriting table filters"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
		)
	}
	finished := make(chan error, 1)
	go func() { finished <- db.compact(start, end) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-finished:
			if err != nil {
				if errors.As(err, new(stopped)) {
					return err
				}
				return fmt.Errorf("compact: %v", firstLine(err))
			}
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(stderr)
			}
			return nil
		case <-tick.C:
			if bar == nil {
				continue
			}
			if _, _, left, _, _, err := db.pending(want); err == nil && left <= pendingBytes {
				_ = bar.Set64(int64(pendingBytes - left))
			}
		}
	}
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// quietLogger keeps Pebble's informational logging out of the report and
// turns a fatal error (a manifest that cannot be written, say) into one line
// and exit status 2 rather than a stack dump. Pebble has written nothing
// half-done that its next open does not recover, so migrate can run again.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	msg := strings.SplitN(fmt.Sprintf(format, args...), "\n", 2)[0]
	fmt.Fprintf(os.Stderr, "lsmcuckoo migrate: pebble: %s; run migrate again once the cause is fixed\n", msg)
	os.Exit(exitUsage)
}

// writeSummary prints the per-level table and the read figures of rep.
func writeSummary(w io.Writer, r *advice.Report) {
	fmt.Fprintf(w, "%-5s %7s %12s %10s %11s %8s %9s  %s\n", "level", "tables", "keys", "table MB", "filter KB", "bits/key", "FPR", "filters (tables)")
	for _, lv := range r.Levels {
		if lv.Tables == 0 {
			continue
		}
		name := fmt.Sprintf("L%d", lv.Level)
		if lv.Level == 0 {
			name = fmt.Sprintf("L0/%d", lv.Sublevels)
		}
		fmt.Fprintf(w, "%-5s %7d %12d %10.2f %11.1f %8.2f %9s  %s\n", name, lv.Tables, lv.Keys,
			float64(lv.TableBytes)/(1<<20), float64(lv.FilterBytes)/1024, lv.BitsPerKey, pct(lv.FPR), families(lv.Families))
	}
	if r.Format != "pebble" {
		fmt.Fprintf(w, "(L0/n: n tables, each consulted by a lookup)\nFalse-positive table reads per absent key: Get (every L0 table, L1-L6) %.4f\n", r.ReadsGet)
		return
	}
	fmt.Fprintf(w, "(L0/n: n sublevels)\nFalse-positive table reads per absent key: DB.Get (L0 sublevels, L1-L5) %.4f, SeekPrefixGE with UseL6Filters (L0-L6) %.4f\n", r.ReadsGet, r.ReadsSeek)
}
