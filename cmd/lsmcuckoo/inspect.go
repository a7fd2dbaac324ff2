package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/advice"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/badgerstore"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/kvdemostore"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebble1store"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

type inspectFlags struct {
	format         string
	json           bool
	probes         int
	path           string
	bits           float64
	seed           uint64
	failUnfiltered bool
}

func newInspectFlags(stderr io.Writer) (*flag.FlagSet, *inspectFlags) {
	f := &inspectFlags{}
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.format, "format", "auto", "store format: auto (detect from DIR), pebble (v1 or v2, detected), pebble1, pebble2, badger or kvdemo")
	fs.BoolVar(&f.json, "json", false, "write the report as one JSON object")
	fs.IntVar(&f.probes, "probes", 10000, "random absent keys probed against each table's filter block")
	fs.StringVar(&f.path, "path", advice.PathGet, "read path the recommendations are fitted to: get (DB.Get) or seek (SeekPrefixGE with UseL6Filters)")
	fs.Float64Var(&f.bits, "bits", 10, "bits per key to recommend when the store's filters take too little memory to match (4..64)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the random probe keys")
	fs.BoolVar(&f.failUnfiltered, "fail-unfiltered", false, "exit 1 if any table has no filter lsmcuckoo or Pebble's bloom can read")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: lsmcuckoo inspect [flags] DIR

Reports, level by level, the table filters of the Pebble store in DIR: filter
families, bytes, bits per key and the false-positive rate measured on each
table's real filter block; the false-positive table reads per absent key of
DB.Get and of SeekPrefixGE with UseL6Filters; and lsmcuckoo budgets, uniform and
per level, at the same filter memory and at the same reads, with the Go lines to
set. Nothing is written into DIR, even while another process has it open.
A Pebble v1.1 store (github.com/cockroachdb/pebble) is read with Pebble v1 and
gets Go lines for package tablefilter/pebblev1; a Pebble v2 store, for package
tablefilter. Which one is told by the store's format major version (below 13
only v1 opens it, above 16 only v2), and in between by its newest OPTIONS file;
-format pebble1 or pebble2 forces it. A Badger v4 directory or a kvdemo store is
reported the same way, with its engine's read path.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, f
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs, f := newInspectFlags(stderr)
	dir, err := parse(fs, args)
	if err == nil {
		err = f.validate()
	}
	if err != nil {
		return exitFor(err, fs, stderr)
	}
	snap, err := openStore(dir, f.format)
	if err != nil {
		return exitFor(err, fs, stderr)
	}
	r := advice.Build(snap, f.probes, f.seed, f.path, f.bits)
	manifestErr := checkIdleManifest(dir, snap)
	if manifestErr != nil {
		r.Notes = append(r.Notes, "DAMAGED manifest: "+manifestErr.Error())
	}
	if r.Format == "pebble" {
		// Read after the snapshot: a flush in between moves writes from
		// the log into a table the snapshot missed, never the other way.
		if u, err := pebblestore.ReadUnflushed(dir); err == nil && u != nil {
			r.Unflushed = u
			r.Notes = append(r.Notes, unflushedNote(u))
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return exitFor(err, fs, stderr)
		}
	} else {
		writeReport(stdout, r)
	}
	if len(r.Damaged) > 0 {
		fmt.Fprintf(stderr, "lsmcuckoo inspect: %d damaged or missing tables, first %06d.sst on L%d: %s\n",
			len(r.Damaged), r.Damaged[0].FileNum, r.Damaged[0].Level, r.Damaged[0].Error)
		return exitUsage
	}
	if manifestErr != nil {
		fmt.Fprintf(stderr, "lsmcuckoo inspect: the figures above miss tables: %v\n", manifestErr)
		return exitUsage
	}
	if f.failUnfiltered {
		if n := unfiltered(r); n > 0 {
			fmt.Fprintf(stderr, "lsmcuckoo inspect: %d tables are read without a filter\n", n)
			return exitFinding
		}
	}
	return exitOK
}

// unflushedNote says what the live write-ahead logs hold: a newcomer who
// has just written keys and finds fewer in the tables learns where the
// rest are.
func unflushedNote(u *pebblestore.Unflushed) string {
	plural := func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	var parts []string
	if u.Batches > 0 {
		parts = append(parts, fmt.Sprintf("%s in %s (%s) since the last flush: in no table and no filter yet, so counted nowhere above; Pebble puts them in a table at its next flush",
			plural(u.Writes, "write", "writes"), plural(u.Batches, "batch", "batches"), kb(uint64(u.Bytes))))
	}
	if u.Ingests > 0 {
		parts = append(parts, fmt.Sprintf("%s whose tables overlapped the memtable: the tables, with their own filters, wait for that flush to place them in a level, and are counted nowhere above",
			plural(u.Ingests, "ingestion", "ingestions")))
	}
	if u.FailoverSegments > 0 {
		parts = append(parts, fmt.Sprintf("%s of WAL failover here (and perhaps more in the secondary directory) are not counted: the logs hold more than this says",
			plural(int64(u.FailoverSegments), "segment file", "segment files")))
	}
	return "write-ahead log (" + strings.Join(u.Logs, ", ") + "): " + strings.Join(parts, "; ")
}

func (f *inspectFlags) validate() error {
	switch f.format {
	case "auto", "pebble", "pebble1", "pebble2", "badger", "kvdemo":
	default:
		return usageError{fmt.Sprintf("-format %q: want auto, pebble, pebble1, pebble2, badger or kvdemo", f.format)}
	}
	if f.path != advice.PathGet && f.path != advice.PathSeek {
		return usageError{fmt.Sprintf("-path %q: want get or seek", f.path)}
	}
	if f.probes < 1 || f.probes > 10_000_000 {
		return usageError{fmt.Sprintf("-probes %d: want 1..10000000", f.probes)}
	}
	return checkBits("-bits", f.bits)
}

// checkBits accepts a budget lsmcuckoo can build: the usage limits are
// 1..64, and below tablefilter.MinBitsPerKey the codec cannot honour one.
func checkBits(name string, b float64) error {
	if !(b >= 1 && b <= tablefilter.MaxBitsPerKey) {
		return usageError{fmt.Sprintf("%s %g: budgets are 1..%d bits per key", name, b, tablefilter.MaxBitsPerKey)}
	}
	if b < tablefilter.MinBitsPerKey {
		return usageError{fmt.Sprintf("%s %g: lsmcuckoo filters need at least %d bits per key", name, b, tablefilter.MinBitsPerKey)}
	}
	return nil
}

// openStore detects the format of dir and takes a read-only snapshot.
func openStore(dir, format string) (*pebblestore.Snapshot, error) {
	if format == "badger" || format == "kvdemo" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("%s: no such directory", dir)
		}
	}
	switch format {
	case "badger":
		return badgerstore.Open(dir)
	case "kvdemo":
		return kvdemostore.Open(dir)
	}
	err := checkDir(dir, format)
	if format != "auto" && (errors.Is(err, errBadger) || errors.Is(err, errKvdemo)) {
		return nil, fmt.Errorf("%s: not a Pebble store (-format auto detects the store it is)", dir)
	}
	switch {
	case errors.Is(err, errBadger):
		return badgerstore.Open(dir)
	case errors.Is(err, errKvdemo):
		return kvdemostore.Open(dir)
	}
	if err != nil {
		return nil, err
	}
	pebble, err := whichPebble(dir, format)
	if err != nil {
		return nil, err
	}
	snap, err := pebble.open(dir)
	if err != nil {
		return nil, err
	}
	snap.ModuleWhy = pebble.why
	return snap, nil
}

// pebbleModule is one Pebble module's readers of a store.
type pebbleModule struct {
	module string
	name   string // "Pebble v1" or "Pebble v2"
	why    string // how the store was found to be this module's
	open   func(dir string) (*pebblestore.Snapshot, error)
	sample func(dir string, add func([]byte)) (*pebblestore.Sample, error)
	// filterKeys names a table whose filter does not hold whole keys
	// (pebblestore.ForeignSplit).
	filterKeys func(dir string) (table, how string, err error)
}

var (
	pebbleV1 = pebbleModule{module: pebblestore.ModuleV1, name: "Pebble v1", open: pebble1store.Open, sample: pebble1store.SampleKeys, filterKeys: pebble1store.CheckFilterKeys}
	pebbleV2 = pebbleModule{module: pebblestore.ModuleV2, name: "Pebble v2", open: pebblestore.Open, sample: pebblestore.SampleKeys, filterKeys: pebblestore.CheckFilterKeys}
)

// whichPebble returns the module to read the Pebble store in dir with:
// the one format forces (pebble1, pebble2), else the one
// pebblestore.Module finds from the store's files.
func whichPebble(dir, format string) (pebbleModule, error) {
	switch format {
	case "pebble1":
		m := pebbleV1
		m.why = "-format pebble1"
		return m, nil
	case "pebble2":
		m := pebbleV2
		m.why = "-format pebble2"
		return m, nil
	}
	module, _, why, err := pebblestore.Module(dir)
	if err != nil {
		return pebbleModule{}, err
	}
	m := pebbleV2
	if module == pebblestore.ModuleV1 {
		m = pebbleV1
	}
	m.why = why
	return m, nil
}

// errBadger and errKvdemo mark stores only inspect reads.
var (
	errBadger = errors.New("a Badger store; migrate rewrites Pebble stores only")
	errKvdemo = errors.New("a kvdemo store; migrate rewrites Pebble stores only")
)

// checkDir checks that dir is a store of the format (auto: any this command
// reads).
func checkDir(dir, format string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no such directory", dir)
		}
		return err
	}
	if len(ents) == 0 {
		return fmt.Errorf("%s: empty directory, not a store", dir)
	}
	switch detected := detect(dir, ents); detected {
	case "pebble", "pebble1", "pebble2":
		return nil
	case "Badger":
		return fmt.Errorf("%s: %w", dir, errBadger)
	case "kvdemo":
		return fmt.Errorf("%s: %w", dir, errKvdemo)
	case "":
		return fmt.Errorf("%s: not a Pebble store (no MANIFEST-NNNNNN)", dir)
	default:
		return fmt.Errorf("%s looks like a %s store; this release reads Pebble v1.1, Pebble v2, Badger v4 and kvdemo stores only", dir, detected)
	}
}

// detect names the store format of dir from its files: Pebble's numbered
// MANIFEST-NNNNNN, Badger's KEYREGISTRY and value logs, or kvdemo's single
// MANIFEST beside its .cf filter files.
func detect(dir string, ents []os.DirEntry) string {
	if pebblestore.IsStore(dir) {
		return "pebble"
	}
	if badgerstore.IsStore(dir) {
		return "Badger"
	}
	if kvdemostore.IsStore(dir) {
		return "kvdemo"
	}
	var manifest, badger bool
	for _, e := range ents {
		n := e.Name()
		switch {
		case n == "KEYREGISTRY" || filepath.Ext(n) == ".vlog":
			badger = true
		case n == "MANIFEST":
			manifest = true
		}
	}
	switch {
	case badger:
		return "Badger"
	case manifest:
		return "kvdemo"
	}
	return ""
}

// pebbleName names a Pebble module for the user.
func pebbleName(module string) string {
	if module == pebblestore.ModuleV1 {
		return "Pebble v1"
	}
	return "Pebble v2"
}

func unfiltered(r *advice.Report) int {
	n := 0
	for _, lv := range r.Levels {
		n += lv.Unprobed
	}
	return n
}

func writeReport(w io.Writer, r *advice.Report) {
	if r.Format == "pebble" {
		fmt.Fprintf(w, "%s store %s (format major version %d, comparer %s)\n", pebbleName(r.PebbleModule), r.Dir, r.FormatVersion, r.Comparer)
		if r.PebbleModuleWhy != "" {
			fmt.Fprintf(w, "Read with %s: %s\n", pebbleName(r.PebbleModule), r.PebbleModuleWhy)
		}
	} else {
		fmt.Fprintf(w, "%s store %s\n", r.Format, r.Dir)
	}
	fmt.Fprintf(w, "FPR: %d random absent keys probed against each table's filter block; a table without a readable filter counts 1\n\n", r.ProbesPerTable)
	writeSummary(w, r)
	fitted := pathName(r.Path)
	if r.Format != "pebble" {
		fitted = "Get"
	}
	fmt.Fprintf(w, "\nlsmcuckoo for this tree, per level fitted to %s (filter memory now %s):\n", fitted, kb(r.FilterBytes))
	fmt.Fprintf(w, "  %-28s %-34s %10s %9s %9s\n", "", "budgets L0..L6 (bits/key)", "filter", "get", "seek")
	now := advice.Figures{FilterBytes: r.FilterBytes, ReadsGet: r.ReadsGet, ReadsSeek: r.ReadsSeek}
	row(w, "now", "", now, now)
	opt(w, "same memory", r.Recommendation, now)
	opt(w, "same reads ("+r.Path+")", r.Saving, now)
	if r.Format == "pebble" && r.Recommendation.LevelBits[pebblestore.NumLevels-1] == 0 {
		fmt.Fprintf(w, "  per level for DB.Get leaves L6 without a filter (\"-\"): an iterator's SeekPrefixGE with UseL6Filters\n  would read every L6 table it meets; fit to -path seek if you use it\n")
	}
	for _, o := range []advice.Option{r.Recommendation, r.Saving} {
		if o.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", o.Note)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Format == "pebble" {
		fmt.Fprintf(w, "\nGo lines to set on every open (Pebble does not restore filter policies from OPTIONS):\n")
	} else {
		fmt.Fprintln(w)
	}
	for _, l := range r.GoLines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	for _, d := range r.Damaged {
		fmt.Fprintf(w, "DAMAGED L%d %06d.sst: %s\n", d.Level, d.FileNum, d.Error)
	}
}

func opt(w io.Writer, what string, o advice.Option, now advice.Figures) {
	row(w, what+", uniform", budgetsOf(uniformOf(o.UniformBits)), o.Uniform, now)
	row(w, what+", per level", budgetsOf(o.LevelBits), advice.Figures{FilterBytes: o.FilterBytes, ReadsGet: o.ReadsGet, ReadsSeek: o.ReadsSeek}, now)
}

func row(w io.Writer, what, budgets string, f, now advice.Figures) {
	mem := kb(f.FilterBytes)
	if f != now && now.FilterBytes > 0 {
		mem += fmt.Sprintf(" (%+.0f%%)", 100*(float64(f.FilterBytes)/float64(now.FilterBytes)-1))
	}
	fmt.Fprintf(w, "  %-28s %-34s %16s %9.4f %9.4f\n", what, budgets, mem, f.ReadsGet, f.ReadsSeek)
}

func uniformOf(b float64) (u [pebblestore.NumLevels]float64) {
	for i := range u {
		u[i] = b
	}
	return u
}

func budgetsOf(b [pebblestore.NumLevels]float64) string {
	parts := make([]string, len(b))
	for i, x := range b {
		if x == 0 {
			parts[i] = "-"
		} else {
			parts[i] = fmt.Sprintf("%g", x)
		}
	}
	return strings.Join(parts, " ")
}

func families(m map[string]int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		label := n
		if k := pebblestore.Kind(n); k == pebblestore.KindUnknown && n != "damaged" && n != pebblestore.NoneName {
			label += " [unknown: Pebble ignores it unless registered]"
		}
		parts[i] = fmt.Sprintf("%s (%d)", label, m[n])
	}
	return strings.Join(parts, ", ")
}

func pct(x float64) string { return fmt.Sprintf("%.3f%%", 100*x) }

func kb(b uint64) string {
	switch {
	case b >= 10<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 10<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func pathName(p string) string {
	if p == advice.PathSeek {
		return "SeekPrefixGE with UseL6Filters"
	}
	return "DB.Get"
}

// checkIdleManifest checks the manifest of a Pebble store no process holds
// (pebblestore.CheckManifest): one ending in a damaged record hides the
// tables its lost records list, from this report and from Pebble, whose
// next read-write open deletes them. While an owner writes, the manifest's
// tail and its compactions' unlisted outputs are work in progress, not
// damage, so a held store is not checked.
func checkIdleManifest(dir string, s *pebblestore.Snapshot) error {
	if s.Format != "pebble" {
		return nil
	}
	if held, err := heldByOther(dir); err != nil || held {
		return nil
	}
	return pebblestore.CheckManifest(dir, s)
}
