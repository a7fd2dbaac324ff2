package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lsmcuckoo/lsmcuckoo/bench/binaryfuse"
	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/badgerstore"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/kvdemostore"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/internal/terminal"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
	"github.com/schollz/progressbar/v3"
)

type compareFlags struct {
	keys, from, absent string
	hex, base64        bool
	bits, tableKeys    string
	sample, probes     int
	reps, lookups      int
	coldMiB            int
	seed               uint64
	out                string
	quiet              bool

	budgets []int // parsed -bits
	sizes   []int // parsed -table-keys; nil: the default
}

func newCompareFlags(stderr io.Writer) (*flag.FlagSet, *compareFlags) {
	f := &compareFlags{}
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.keys, "keys", "", "key `FILE`: one key per line, each line at most 1 MiB")
	fs.BoolVar(&f.hex, "hex", false, "the key files' lines are hex")
	fs.BoolVar(&f.base64, "base64", false, "the key files' lines are base64")
	fs.StringVar(&f.from, "from", "", "sample the keys of the store (Pebble v1.1 or v2, Badger v4, kvdemo) in `DIR`, read-only")
	fs.StringVar(&f.absent, "absent", "", "absent keys, one a line, in `FILE` (default: made from your keys, two ways)")
	fs.StringVar(&f.bits, "bits", "8,10,12,16", "budgets in whole bits per key, each 1..64")
	fs.StringVar(&f.tableKeys, "table-keys", "", "keys per table filter, comma separated (default: the table sizes found with -from, else 100000)")
	fs.IntVar(&f.sample, "sample", 1_000_000, "keys kept, sampled uniformly, from -keys or -from")
	fs.IntVar(&f.probes, "probes", 100_000, "absent keys probed per filter for each kind of absent key")
	fs.IntVar(&f.reps, "reps", 3, "repetitions of every timing; medians are reported")
	fs.IntVar(&f.lookups, "lookups", 500_000, "lookups per timing")
	fs.IntVar(&f.coldMiB, "cold-mib", 32, "MiB the cold copies of each filter spread over (0: no cold timings)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the sampling and of the absent keys")
	fs.StringVar(&f.out, "out", "", "write report.md, results.json and SVG plots into `DIR`")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: lsmcuckoo compare -keys FILE [flags]
       lsmcuckoo compare -from DIR [flags]

Builds, on your keys, Pebble's bloom filter, Badger's y.Filter, binary fuse
filters (the filter Pebble's unreleased master adopts) and lsmcuckoo at each
budget, and reports against Pebble's bloom at the same budget. lsmcuckoo is
built three ways, each named for the policy that writes it: lsmcuckoo
(tablefilter.NewPolicy, format version 3), lsmcuckoo-densest
(NewDensestPolicy, version 3's densest layout) and lsmcuckoo-v4
(NewV4Policy, format version 4). It reports bits/key, false-positive rate
with its 95% interval, build ns/key, hot and cold lookup ns, and false
negatives (any is a bug: the key is printed and the exit status is 1).
Binary fuse is shown at each of its widths beside the bloom of nearest
size, and, at each budget, the widest fuse that fits it.

Absent keys come from -absent, or are made two ways and reported both:
"shaped" (your keys with a neighbouring counter or a changed last byte) and
"random" (uniform bytes of your keys' lengths); each is checked absent.

-from reads the live tables of a Pebble v1.1 or v2, Badger v4 or kvdemo store
without writing into it, even while its owner runs; a Badger key's versions are
one key. Unlike inspect, it reads the tables' data blocks: the keys are what the
filters are built from. Under a comparer with a Split,
a table filter holds key prefixes, and so does the sample: CockroachDB's
Split is known, another comparer's is found from the store's own filters.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, f
}

func runCompare(args []string, stdout, stderr io.Writer) int {
	fs, f := newCompareFlags(stderr)
	err := parseNoArgs(fs, args)
	if err == nil {
		err = f.validate()
	}
	if err != nil {
		return exitFor(err, fs, stderr)
	}
	rep, err := compare(f, stderr)
	if err != nil {
		return exitFor(err, fs, stderr)
	}
	writeCompare(stdout, rep)
	if f.out != "" {
		if err := writeCompareFiles(f.out, rep); err != nil {
			return exitFor(err, fs, stderr)
		}
		fmt.Fprintf(stdout, "\nWrote %s: report.md, results.json and plots.\n", f.out)
	}
	if fn := rep.firstFalseNegative(); fn != nil {
		fmt.Fprintf(stderr, "lsmcuckoo compare: FALSE NEGATIVE (a bug): %s, table of %d keys, rejected present key %q (hex %x)\n",
			fn.Family, fn.TableKeys, fn.FalseNegative, fn.FalseNegative)
		return exitFinding
	}
	return exitOK
}

// parseNoArgs parses flags and accepts no positional argument.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.Usage()
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q (keys come from -keys FILE or -from DIR)", fs.Arg(0))}
	}
	return nil
}

func (f *compareFlags) validate() error {
	switch {
	case f.keys == "" && f.from == "":
		return usageError{"give -keys FILE or -from DIR"}
	case f.keys != "" && f.from != "":
		return usageError{"give -keys or -from, not both"}
	case f.hex && f.base64:
		return usageError{"give -hex or -base64, not both"}
	case f.sample < 1:
		return usageError{fmt.Sprintf("-sample %d: want at least 1", f.sample)}
	case f.probes < 1 || f.probes > 10_000_000:
		return usageError{fmt.Sprintf("-probes %d: want 1..10000000", f.probes)}
	case f.reps < 1 || f.reps > 100:
		return usageError{fmt.Sprintf("-reps %d: want 1..100", f.reps)}
	case f.lookups < 1:
		return usageError{fmt.Sprintf("-lookups %d: want at least 1", f.lookups)}
	case f.coldMiB < 0 || f.coldMiB > 4096:
		return usageError{fmt.Sprintf("-cold-mib %d: want 0..4096", f.coldMiB)}
	}
	var err error
	if f.budgets, err = intList("-bits", f.bits, 1, tablefilter.MaxBitsPerKey); err != nil {
		return err
	}
	if f.tableKeys != "" {
		if f.sizes, err = intList("-table-keys", f.tableKeys, 1, 100_000_000); err != nil {
			return err
		}
	}
	return nil
}

// intList parses a comma-separated list of whole numbers in lo..hi, sorted
// and without repeats.
func intList(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return nil, usageError{fmt.Sprintf("%s %q: %q is not a number", name, s, p)}
		}
		if v != math.Trunc(v) || v < float64(lo) || v > float64(hi) {
			if name == "-bits" {
				return nil, usageError{fmt.Sprintf("-bits %s: budgets are whole bits per key in 1..%d (Pebble's bloom takes whole bits)", p, hi)}
			}
			return nil, usageError{fmt.Sprintf("%s %s: want a whole number in %d..%d", name, p, lo, hi)}
		}
		out = append(out, int(v))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (f *compareFlags) encoding() string {
	switch {
	case f.hex:
		return encHex
	case f.base64:
		return encBase64
	}
	return encText
}

// loadKeys reads the user's keys: a uniform sample of the key file or of
// the store's tables.
func (f *compareFlags) loadKeys(rep *compareReport) ([][]byte, error) {
	s := newSampler(f.sample, f.seed)
	if f.keys != "" {
		n, err := readKeyFile(f.keys, f.encoding(), s.add)
		if err != nil {
			return nil, err
		}
		rep.Keys = keySource{Source: f.keys, Encoding: f.encoding(), Lines: n, Read: s.offered}
	} else {
		// A table compacted away by the store's owner while it is read
		// vanishes: the sample starts again, from the new version.
		format, sampleKeys, err := storeSampler(f.from)
		if err != nil {
			return nil, err
		}
		var smp *pebblestore.Sample
		for try := 0; try < 5; try++ {
			s = newSampler(f.sample, f.seed)
			if smp, err = sampleKeys(f.from, s.add); !errors.Is(err, pebblestore.ErrVanished) {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		rep.Keys = keySource{Source: f.from, Encoding: "store", Read: s.offered, Comparer: smp.Comparer, Prefixes: smp.Prefixes, Format: format}
		switch {
		case smp.Prefixes:
			rep.Notes = append(rep.Notes, fmt.Sprintf("comparer %s has a Split: a table filter holds key prefixes (%s), so the keys compared are those prefixes", smp.Comparer, smp.SplitHow))
		case !smp.SplitKnown:
			rep.Notes = append(rep.Notes, fmt.Sprintf("comparer %s: its Split is the application's code, and no table filter could be matched to whole keys or to a prefix; whole keys are compared, which overstates the keys if the filters hold prefixes", smp.Comparer))
		}
		if f.sizes == nil {
			f.sizes = tableSizes(smp)
		}
		rep.TablesRead = smp.TableKeys
	}
	if len(s.keys) == 0 {
		return nil, errors.New("no keys found")
	}
	rep.Keys.Sampled = len(s.keys)
	// Shuffled, so that the first n keys of any table size are a uniform
	// sample too.
	rng := rand.New(rand.NewPCG(f.seed, 0x5eed))
	rng.Shuffle(len(s.keys), func(i, j int) { s.keys[i], s.keys[j] = s.keys[j], s.keys[i] })
	return s.keys, nil
}

// storeSampler names the format of the store in dir and returns the
// reader of its keys: Pebble v1's or v2's (whichPebble), or for a Badger v4
// or kvdemo store, whose tables are both in Badger's table format, the
// reader of those tables' user keys.
func storeSampler(dir string) (string, func(dir string, add func([]byte)) (*pebblestore.Sample, error), error) {
	err := checkDir(dir, "pebble")
	switch {
	case err == nil:
		m, err := whichPebble(dir, "auto")
		if err != nil {
			return "", nil, err
		}
		return m.name, m.sample, nil
	case errors.Is(err, errBadger):
		return "Badger v4", badgerstore.SampleKeys, nil
	case errors.Is(err, errKvdemo):
		return "kvdemo", kvdemostore.SampleKeys, nil
	}
	return "", nil, err
}

// tableSizes is the default table sizes with -from: each level's median
// table (in filter keys), rounded to two significant digits.
func tableSizes(s *pebblestore.Sample) []int {
	var sizes []int
	for _, tk := range s.TableKeys {
		if len(tk) == 0 {
			continue
		}
		m := tk[len(tk)/2]
		if m == 0 {
			continue
		}
		mag := int(math.Pow(10, math.Max(0, math.Floor(math.Log10(float64(m)))-1)))
		sizes = append(sizes, max(1, (m+mag/2)/mag*mag))
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// absentSets returns the absent key sets to probe with.
func (f *compareFlags) absentSets(keys [][]byte, rep *compareReport) ([]absentSet, error) {
	present := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		present[string(k)] = struct{}{}
	}
	if f.absent != "" {
		s := newSampler(f.probes, f.seed+1)
		dropped := 0
		if _, err := readKeyFile(f.absent, f.encoding(), func(k []byte) {
			if _, in := present[string(k)]; in {
				dropped++
				return
			}
			s.add(k)
		}); err != nil {
			return nil, err
		}
		if dropped > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d lines of %s are keys of the key set, not absent: left out", dropped, f.absent))
		}
		if len(s.keys) == 0 {
			return nil, fmt.Errorf("%s: no key absent from the key set", f.absent)
		}
		return []absentSet{{Name: "file", How: f.absent, Keys: s.keys}}, nil
	}
	var sets []absentSet
	for _, how := range []string{"shaped", "random"} {
		a := absentKeys(keys, present, f.probes, how, f.seed+2)
		if len(a) == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("no %s absent key could be made: every candidate is a key of the set", how))
			continue
		}
		if len(a) < f.probes {
			rep.Notes = append(rep.Notes, fmt.Sprintf("only %d %s absent keys could be made: the key set leaves little room", len(a), how))
		}
		sets = append(sets, absentSet{Name: how, How: absentHow[how], Keys: a})
	}
	if len(sets) == 0 {
		return nil, errors.New("no absent key could be made from the key set; give -absent FILE")
	}
	return sets, nil
}

var absentHow = map[string]string{
	"shaped": "your keys with a neighbouring counter or a changed last byte",
	"random": "uniform random bytes of your keys' lengths",
}

type absentSet struct {
	Name string
	How  string
	Keys [][]byte
}

// group is one Measure call: families compared with the baseline, Pebble's
// bloom at Budget.
type group struct {
	Budget int
	Role   string // "budget": every family at the budget; "fuse-width": one fuse width beside the bloom nearest its size
	Fams   []filterbench.Family
}

// extraFamily, if set, adds a family at each budget: the test of the false
// negative report adds a broken one.
var extraFamily func(bitsPerKey int) filterbench.Family

// groups returns the line-up at one table size: at each budget, Pebble's
// bloom, Badger's bloom, lsmcuckoo's default, densest and version-4
// policies (each family named for the policy a user sets) and the widest binary
// fuse whose bits/key on these keys fit the budget; then each fuse width
// beside the bloom of nearest whole bits/key.
func groups(budgets []int, keys [][]byte) ([]group, []string) {
	fuseBits := map[int]float64{}
	for _, w := range binaryfuse.Widths {
		fuseBits[w] = bitsPerKeyOf(binaryfuse.NewPolicy(w), keys)
	}
	var gs []group
	var notes []string
	for _, b := range budgets {
		g := group{Budget: b, Role: "budget", Fams: []filterbench.Family{filterbench.PebbleBloom(b), filterbench.BadgerBloom(b)}}
		if b >= tablefilter.MinBitsPerKey {
			g.Fams = append(g.Fams, filterbench.Cuckoo(float64(b)), filterbench.CuckooDensest(float64(b)), filterbench.CuckooV4(float64(b)))
		} else {
			notes = append(notes, fmt.Sprintf("%d bits/key: below lsmcuckoo's least budget (%d), lsmcuckoo is not built", b, tablefilter.MinBitsPerKey))
		}
		best := 0
		for _, w := range binaryfuse.Widths {
			if fuseBits[w] <= float64(b) {
				best = w
			}
		}
		if best > 0 {
			g.Fams = append(g.Fams, filterbench.BinaryFuse(best))
		}
		if extraFamily != nil {
			g.Fams = append(g.Fams, extraFamily(b))
		}
		gs = append(gs, g)
	}
	for _, w := range binaryfuse.Widths {
		b := min(tablefilter.MaxBitsPerKey, max(1, int(math.Round(fuseBits[w]))))
		gs = append(gs, group{Budget: b, Role: "fuse-width", Fams: []filterbench.Family{filterbench.PebbleBloom(b), filterbench.BinaryFuse(w)}})
	}
	return gs, notes
}

func bitsPerKeyOf(p pebble.FilterPolicy, keys [][]byte) float64 {
	w := p.NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return float64(8*len(w.Finish(nil))) / float64(len(keys))
}

// compare runs the whole comparison.
func compare(f *compareFlags, stderr io.Writer) (*compareReport, error) {
	rep := &compareReport{
		Processor: processorName(),
		GoArch:    runtime.GOARCH,
		Budgets:   f.budgets,
		Options:   compareOptions{Reps: f.reps, Lookups: f.lookups, ColdMiB: f.coldMiB, Probes: f.probes, Seed: f.seed},
	}
	if load, ok := loadAverage(); ok && load > float64(runtime.NumCPU()) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the machine is busy (load average %.1f on %d processors): timings, and their ratios, move between runs", load, runtime.NumCPU()))
	}
	keys, err := f.loadKeys(rep)
	if err != nil {
		return nil, err
	}
	sets, err := f.absentSets(keys, rep)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		rep.Absent = append(rep.Absent, absentInfo{Name: s.Name, How: s.How, Count: len(s.Keys)})
	}
	sizes := f.sizes
	if len(sizes) == 0 {
		sizes = []int{100_000}
	}
	for _, n := range sizes {
		if n > len(keys) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("a table of %d keys asked for, %d keys available: measured at %d", n, len(keys), len(keys)))
			n = len(keys)
		}
		if !slices.Contains(rep.TableKeys, n) {
			rep.TableKeys = append(rep.TableKeys, n)
		}
	}
	plan := make(map[int][]group, len(rep.TableKeys))
	steps := 0
	for _, n := range rep.TableKeys {
		gs, notes := groups(f.budgets, keys[:n])
		plan[n] = gs
		for _, n := range notes {
			if !slices.Contains(rep.Notes, n) {
				rep.Notes = append(rep.Notes, n)
			}
		}
		for _, g := range gs {
			steps += len(g.Fams) * (f.reps + len(sets) - 1)
		}
	}
	prog := newProgress(steps, f.quiet, stderr)
	defer prog.finish()
	for _, n := range rep.TableKeys {
		for _, g := range plan[n] {
			rep.Rows = append(rep.Rows, measureGroup(g, keys[:n], sets, f, prog.step)...)
		}
	}
	return rep, nil
}

// measureGroup measures one group with the first absent set, timings
// included, and takes only the false-positive rate of the other sets.
func measureGroup(g group, keys [][]byte, sets []absentSet, f *compareFlags, step func(string)) []compareRow {
	base := g.Fams[0].Name
	opts := filterbench.Options{Lookups: f.lookups, ColdMiB: f.coldMiB, Reps: f.reps, Baseline: base}
	main := filterbench.Measure(g.Fams, keys, sets[0].Keys, opts, step)
	rows := make([]compareRow, len(main))
	for i, r := range main {
		rows[i] = newRow(g, r, sets[0].Name)
	}
	for _, s := range sets[1:] {
		// The rate alone: one repetition, no cold copies, one timed lookup.
		rs := filterbench.Measure(g.Fams, keys, s.Keys, filterbench.Options{Lookups: 1, Reps: 1}, step)
		for i, r := range rs {
			rows[i].addRate(s.Name, r)
		}
	}
	for i := range rows {
		rows[i].ratios(rows[0])
	}
	return rows
}

// progress shows a bar on stderr once the work has lasted a second: a short
// run prints nothing, nor does a run whose stderr is not a terminal.
type progress struct {
	total, done int
	start       time.Time
	quiet       bool
	w           io.Writer
	bar         *progressbar.ProgressBar
}

func newProgress(total int, quiet bool, w io.Writer) *progress {
	return &progress{total: total, start: time.Now(), quiet: quiet || !terminal.Is(w), w: w}
}

func (p *progress) step(family string) {
	p.done++
	if p.quiet {
		return
	}
	if p.bar == nil && time.Since(p.start) > time.Second {
		p.bar = progressbar.NewOptions(p.total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowCount(),
		)
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("%-24s", family))
		_ = p.bar.Set(p.done)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

// processorName is the processor's model name from /proc/cpuinfo, or the
// architecture where that is unavailable.
func processorName() string {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOOS + "/" + runtime.GOARCH
}

// loadAverage is the one-minute load average from /proc/loadavg.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return v, err == nil
}
