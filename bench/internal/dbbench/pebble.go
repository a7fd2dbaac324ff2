// Package dbbench measures filters where users feel them: lookups on a real
// Pebble database on disk, in a tree grown the way a production tree grows
// (random-order writes, automatic compactions, L0 sublevels over Lbase..L6,
// all scaled down), with a block cache smaller than the tables, and
// optionally a modelled device latency under every block read that misses
// the cache (LatencyFS).
package dbbench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/turn"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Policy is a filter configuration under test. Apply sets the filter
// policies on options (per level, and registered in Filters); nil means no
// filters at all.
type Policy struct {
	Name  string
	Apply func(*pebble.Options)
	// Fit, if set, replaces Apply with one that knows the shape of the
	// tree being measured (from the first tree RunAllPebble builds), as a
	// user tunes a store from DB.Metrics.
	Fit func(*pebble.Options, tablefilter.LevelShape)
	// Match, if set, replaces Apply with one that knows the shape of the
	// tree being measured and the trees of the policies named in MatchTo,
	// built before it: a policy fitted to spend another's filter bytes.
	Match   func(o *pebble.Options, shape tablefilter.LevelShape, built map[string]Tree)
	MatchTo []string
	// Attach, if set, is called with every store opened under the options
	// Apply set, before anything is written, and returns what to call
	// before the store closes: a self-tuning setup follows the store it
	// writes (tablefilter.AdaptiveBudgets).
	Attach func(*pebble.DB) (detach func())
	// Family and Budget place the policy on a curve of the memory-saving
	// view (Report.Savings): policies of one family differ only in their
	// average bits per key.
	Family string
	Budget float64
}

// Uniform is the policy of one filter on every level, set the way Pebble's
// documentation shows: on L0, which the levels below inherit.
func Uniform(name string, fp pebble.FilterPolicy) Policy {
	return Policy{Name: name, Apply: func(o *pebble.Options) {
		o.Levels[0].FilterPolicy = fp
		if o.Filters == nil {
			o.Filters = map[string]pebble.FilterPolicy{}
		}
		o.Filters[fp.Name()] = fp
	}}
}

// PerLevel is the policy of one filter per level, L0..L6.
func PerLevel(name string, fps [7]pebble.FilterPolicy) Policy {
	return Policy{Name: name, Apply: func(o *pebble.Options) {
		if o.Filters == nil {
			o.Filters = map[string]pebble.FilterPolicy{}
		}
		for l, fp := range fps {
			o.Levels[l].FilterPolicy = fp
			o.Filters[fp.Name()] = fp
		}
	}}
}

// PebbleConfig shapes the database and the measurement.
type PebbleConfig struct {
	// Keys are written in random order, one memtable at a time, with
	// automatic compactions on: the tree grows as a store's does.
	Keys int
	// L0Flushes more memtables of fresh keys are then flushed with
	// compactions off, leaving that many L0 sublevels over the tree, as a
	// store has between L0 compactions.
	L0Flushes int
	// ValueSize is the value length; values are incompressible.
	ValueSize int
	// MemTableBytes, LBaseMaxBytes and TargetFileBytes scale the tree
	// down: together with Keys they decide how many levels it has.
	MemTableBytes   int64
	LBaseMaxBytes   int64
	TargetFileBytes int64
	// LevelMultiplier is the size ratio of adjacent levels (0: Pebble's
	// default). A tree too small for its levels keeps only a sliver in the
	// base level, which the next compaction may push down; a smaller
	// ratio gives a tiny tree its depth with margin.
	LevelMultiplier int
	// CacheBytes is the block cache; keep it well under the tables.
	CacheBytes int64
	// Probes per workload in memory, and with the modelled latency.
	Probes, LatencyProbes int
	// Latency is the modelled device latency per block read.
	Latency time.Duration
	// GetFPProbes is how many absent Gets count the false-positive reads
	// of the policies GetProbed names (untimed; 0: none).
	GetFPProbes int
}

// QuickPebble is small enough for CI and a first look; FullPebble is the
// report's configuration.
var (
	QuickPebble = PebbleConfig{Keys: 400_000, L0Flushes: 3, ValueSize: 64,
		MemTableBytes: 1 << 20, LBaseMaxBytes: 64 << 10, TargetFileBytes: 256 << 10,
		CacheBytes: 8 << 20, Probes: 40_000, LatencyProbes: 4_000, Latency: 100 * time.Microsecond,
		GetFPProbes: 2_000_000}
	FullPebble = PebbleConfig{Keys: 2_000_000, L0Flushes: 3, ValueSize: 100,
		MemTableBytes: 4 << 20, LBaseMaxBytes: 1 << 20, TargetFileBytes: 1 << 20,
		CacheBytes: 32 << 20, Probes: 200_000, LatencyProbes: 20_000, Latency: 100 * time.Microsecond,
		GetFPProbes: 2_000_000}
)

// Workloads, in report order. Every one probes user keys spread over the
// whole key space; absent ones interleave with the present ones inside
// every table's range, so only a filter can skip a table.
const (
	AbsentGet    = "absent Get"
	PresentGet   = "present Get"
	MixedGet     = "50/50 Get"
	AbsentPrefix = "absent SeekPrefixGE+L6"
)

// Workloads lists the workloads in report order.
var Workloads = []string{AbsentGet, PresentGet, MixedGet, AbsentPrefix}

// LevelInfo is one level of a built tree.
type LevelInfo struct {
	Tables      int    `json:"tables"`
	Keys        uint64 `json:"keys"`
	FilterBytes uint64 `json:"filter_bytes"`
	DataBytes   uint64 `json:"data_bytes"`
	IndexBytes  uint64 `json:"index_bytes"`
	// Filters counts tables by the filter policy name they carry.
	Filters map[string]int `json:"filters,omitempty"`
}

// Tree is the shape of one policy's built database.
type Tree struct {
	Policy    string       `json:"policy"`
	Levels    [7]LevelInfo `json:"levels"`
	Sublevels int          `json:"l0_sublevels"`
	// BuildCPU is the process's CPU time (every thread: the writer and
	// Pebble's flushes and compactions) spent growing the tree, which is
	// where a filter's build cost shows on the write path. On systems
	// other than Linux it is wall-clock time.
	BuildCPU time.Duration `json:"build_cpu_ns"`
}

// LevelShape is the tree's shape for tablefilter.LevelBudgets: entries per
// level and L0's sublevels.
func (t Tree) LevelShape() tablefilter.LevelShape {
	var s tablefilter.LevelShape
	for l, li := range t.Levels {
		s.Keys[l] = float64(li.Keys)
	}
	s.L0Runs = float64(t.Sublevels)
	return s
}

// TotalFilterBytes sums the filter blocks of every table.
func (t Tree) TotalFilterBytes() (n uint64) {
	for _, l := range t.Levels {
		n += l.FilterBytes
	}
	return n
}

// TotalBytes sums data, index and filter blocks: what a block cache would
// need to hold everything.
func (t Tree) TotalBytes() (n uint64) {
	for _, l := range t.Levels {
		n += l.FilterBytes + l.DataBytes + l.IndexBytes
	}
	return n
}

// TotalKeys sums the entries of every table.
func (t Tree) TotalKeys() (n uint64) {
	for _, l := range t.Levels {
		n += l.Keys
	}
	return n
}

// PebbleResult is one policy on one workload, in memory or with latency.
type PebbleResult struct {
	Policy   string `json:"policy"`
	Workload string `json:"workload"`
	// Latency is the modelled device latency (0: in memory).
	Latency     time.Duration `json:"latency"`
	Probes      int           `json:"probes"`
	ProbesPerS  float64       `json:"probes_per_sec"`
	BlockReads  float64       `json:"block_reads_per_probe"`  // block-cache misses per probe
	DeviceReads float64       `json:"device_reads_per_probe"` // sstable ReadAt calls per probe
	// FilterHits and FilterMisses are Pebble's filter metrics per probe:
	// tables a filter skipped, and tables whose filter said "maybe". For
	// absent keys every miss is a false positive: a table read in vain.
	FilterHits   float64 `json:"filter_hits_per_probe"`
	FilterMisses float64 `json:"filter_misses_per_probe"`
	// MeanWait is the measured mean modelled wait per device read.
	MeanWait time.Duration `json:"mean_wait"`
}

func options(p Policy, cfg PebbleConfig) *pebble.Options {
	o := &pebble.Options{
		Comparer:      Comparer,
		MemTableSize:  uint64(cfg.MemTableBytes),
		LBaseMaxBytes: cfg.LBaseMaxBytes,
		Logger:        quietLogger{},
		// Phase 2 grows L0 past the write-stall threshold by design.
		L0StopWritesThreshold: 1 << 20,
	}
	o.Experimental.LevelMultiplier = cfg.LevelMultiplier
	for l := range o.TargetFileSizes {
		o.TargetFileSizes[l] = cfg.TargetFileBytes
	}
	if p.Apply != nil {
		p.Apply(o)
	}
	return o
}

// BuildPebble grows one policy's tree in dir. The writes and the points
// where the store may compact are the same for every policy, and
// compactions run one at a time, each step waiting for the store to go
// quiet, so trees of different policies come out of the same shape (the
// report prints each one's).
func BuildPebble(dir string, p Policy, cfg PebbleConfig) (Tree, error) {
	runtime.GC() // the previous tree's garbage is not this one's cost
	start := processTime()
	o := options(p, cfg)
	db, err := open(dir, o, p)
	if err != nil {
		return Tree{}, err
	}
	entry := prefixLen + versionLen + cfg.ValueSize
	step := max(1, int(cfg.MemTableBytes)*7/10/(entry+32))
	order := rand.New(rand.NewPCG(1, 2)).Perm(cfg.Keys)
	for from := 0; from < len(order); from += step {
		if err := writeKeys(db.DB, order[from:min(from+step, len(order))], cfg.ValueSize); err != nil {
			db.Close()
			return Tree{}, err
		}
		if err := db.Flush(); err != nil {
			db.Close()
			return Tree{}, err
		}
		quiesce(db.DB)
	}
	if err := db.Close(); err != nil {
		return Tree{}, err
	}
	o = options(p, cfg)
	o.DisableAutomaticCompactions = true
	db, err = open(dir, o, p)
	if err != nil {
		return Tree{}, err
	}
	fresh := rand.New(rand.NewPCG(3, 4)).Perm(step * cfg.L0Flushes)
	for f := 0; f < cfg.L0Flushes; f++ {
		keys := fresh[f*step : (f+1)*step]
		for i := range keys {
			keys[i] += cfg.Keys
		}
		if err := writeKeys(db.DB, keys, cfg.ValueSize); err != nil {
			db.Close()
			return Tree{}, err
		}
		if err := db.Flush(); err != nil {
			db.Close()
			return Tree{}, err
		}
	}
	tree, err := shape(db, p.Name)
	if err != nil {
		db.Close()
		return tree, err
	}
	err = db.Close()
	tree.BuildCPU = processTime() - start
	return tree, err
}

// attached is a store opened under a policy with an Attach hook: Close
// detaches the hook before it closes the store.
type attached struct {
	*pebble.DB
	detach func()
}

func (a attached) Close() error {
	if a.detach != nil {
		a.detach()
	}
	return a.DB.Close()
}

// open opens dir under o and attaches p's hook, if any, to the store.
func open(dir string, o *pebble.Options, p Policy) (attached, error) {
	db, err := pebble.Open(dir, o)
	if err != nil {
		return attached{}, err
	}
	a := attached{DB: db}
	if p.Attach != nil {
		a.detach = p.Attach(db)
	}
	return a, nil
}

// TotalKeys is the number of present user keys BuildPebble writes.
func (cfg PebbleConfig) TotalKeys() int {
	entry := prefixLen + versionLen + cfg.ValueSize
	step := max(1, int(cfg.MemTableBytes)*7/10/(entry+32))
	return cfg.Keys + step*cfg.L0Flushes
}

// quiesce waits until no compaction has run for a while: compactions are
// scheduled asynchronously after a flush, so "none in progress" at one
// instant proves nothing.
func quiesce(db *pebble.DB) {
	quiet := 0
	last := db.Metrics().Compact.Count
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && quiet < 4; {
		time.Sleep(5 * time.Millisecond)
		m := db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Compact.Count == last {
			quiet++
		} else {
			quiet = 0
			last = m.Compact.Count
		}
	}
}

// writeKeys writes present keys idx with incompressible values that begin
// with the key, so a read can check it got its own value.
func writeKeys(db *pebble.DB, idx []int, valueSize int) error {
	b := db.NewBatch()
	value := make([]byte, valueSize)
	for _, i := range idx {
		k := versioned(presentPrefix(i))
		r := rand.New(rand.NewPCG(uint64(i), 5))
		for j := range value {
			value[j] = byte(r.Uint32())
		}
		copy(value, k)
		if err := b.Set(k, value, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

func shape(db attached, policy string) (Tree, error) {
	t := Tree{Policy: policy, Sublevels: int(db.Metrics().Levels[0].Sublevels)}
	tables, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		return t, err
	}
	for lvl, ts := range tables {
		li := &t.Levels[lvl]
		for _, tab := range ts {
			li.Tables++
			if tab.Properties == nil {
				continue
			}
			pr := tab.Properties
			li.Keys += pr.NumEntries
			li.FilterBytes += pr.FilterSize
			li.DataBytes += pr.DataSize
			li.IndexBytes += pr.IndexSize
			if li.Filters == nil {
				li.Filters = map[string]int{}
			}
			name := pr.FilterPolicyName
			if name == "" {
				name = "none"
			}
			li.Filters[name]++
		}
	}
	return t, nil
}

// Store is a built database opened for measurement: compactions off, so
// the tree stays as built, a block cache of cfg.CacheBytes, and every
// sstable read through a LatencyFS.
type Store struct {
	DB  *pebble.DB
	FS  *LatencyFS
	cfg PebbleConfig
	it  *pebble.Iterator
}

// OpenStore opens the database BuildPebble wrote in dir.
func OpenStore(dir string, p Policy, cfg PebbleConfig) (*Store, error) {
	cache := pebble.NewCache(cfg.CacheBytes)
	defer cache.Unref() // the DB holds its own reference
	o := options(p, cfg)
	o.Cache = cache
	o.DisableAutomaticCompactions = true
	fs := NewLatencyFS(vfs.Default)
	o.FS = fs
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	// One iterator serves every prefix seek, as an MVCC reader keeps one
	// per transaction; L6 filters are consulted only when asked for.
	it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{DB: db, FS: fs, cfg: cfg, it: it}, nil
}

// Close closes the store.
func (s *Store) Close() error {
	return errors.Join(s.it.Close(), s.DB.Close())
}

// Prober returns the i-th probe's key for a workload: a versioned key for
// Gets, a bare prefix for SeekPrefixGE. The sequence depends on seed only.
func Prober(cfg PebbleConfig, workload string, seed uint64) func(i int) (key []byte, present bool) {
	total := cfg.TotalKeys()
	r := rand.New(rand.NewPCG(seed, 7))
	return func(i int) ([]byte, bool) {
		j := r.IntN(total)
		present := workload == PresentGet || workload == MixedGet && i%2 == 0
		var k []byte
		if present {
			k = presentPrefix(j)
		} else {
			k = absentPrefix(j)
		}
		if workload == AbsentPrefix {
			return k, false
		}
		return versioned(k), present
	}
}

// Probe runs one lookup and checks its answer: a present key must be found
// with its own value, an absent one must not be.
func (s *Store) Probe(workload string, key []byte, present bool) error {
	if workload == AbsentPrefix {
		if s.it.SeekPrefixGE(key) {
			return fmt.Errorf("SeekPrefixGE found absent prefix %x at %x", key, s.it.Key())
		}
		return s.it.Error()
	}
	v, closer, err := s.DB.Get(key)
	switch {
	case err == pebble.ErrNotFound && !present:
		return nil
	case err == pebble.ErrNotFound:
		return fmt.Errorf("present key %x not found", key)
	case err != nil:
		return err
	}
	defer closer.Close()
	if !present {
		return fmt.Errorf("absent key %x found", key)
	}
	if len(v) < len(key) || string(v[:len(key)]) != string(key) {
		return fmt.Errorf("key %x read back a wrong value", key)
	}
	return nil
}

// span is what one stretch of probes cost.
type span struct {
	probes              int
	elapsed, waited     time.Duration
	blockReads, devices int64
	hits, misses        int64
	rates               []float64 // probes per second of each slice added
}

func (a *span) add(b span) {
	a.rates = append(a.rates, float64(b.probes)/b.elapsed.Seconds())
	a.probes += b.probes
	a.elapsed += b.elapsed
	a.waited += b.waited
	a.blockReads += b.blockReads
	a.devices += b.devices
	a.hits += b.hits
	a.misses += b.misses
}

func (a span) result(policy, workload string, latency time.Duration) PebbleResult {
	per := func(d int64) float64 { return float64(d) / float64(max(a.probes, 1)) }
	// The median slice's rate: the cores are shared, and a slice that
	// another process interrupted says nothing about the filter.
	rate := float64(a.probes) / a.elapsed.Seconds()
	if len(a.rates) >= 3 {
		sorted := slices.Sorted(slices.Values(a.rates))
		rate = sorted[len(sorted)/2]
	}
	r := PebbleResult{Policy: policy, Workload: workload, Latency: latency, Probes: a.probes,
		ProbesPerS: rate,
		BlockReads: per(a.blockReads), DeviceReads: per(a.devices),
		FilterHits: per(a.hits), FilterMisses: per(a.misses)}
	if a.devices > 0 {
		r.MeanWait = a.waited / time.Duration(a.devices)
	}
	return r
}

// probeKeys materialises n probes of a workload, so generating keys is not
// timed.
func probeKeys(cfg PebbleConfig, workload string, seed uint64, n int) ([][]byte, []bool) {
	probe := Prober(cfg, workload, seed)
	keys := make([][]byte, n)
	present := make([]bool, n)
	for i := range keys {
		keys[i], present[i] = probe(i)
	}
	return keys, present
}

// warm runs n probes of the workload from another part of the sequence
// than the measured one, so the block cache holds what it would in a
// steady state of this workload.
func (s *Store) warm(workload string, n int) error {
	keys, present := probeKeys(s.cfg, workload, 1000+uint64(len(workload)), n)
	for i, k := range keys {
		if err := s.Probe(workload, k, present[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) measure(workload string, keys [][]byte, present []bool) (span, error) {
	// Locked to one thread, the goroutine's time is its thread's: see
	// threadTime.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := s.DB.Metrics()
	reads0, wait0 := s.FS.Reads()
	start := threadTime()
	for i, k := range keys {
		if err := s.Probe(workload, k, present[i]); err != nil {
			return span{}, err
		}
	}
	el := threadTime() - start
	after := s.DB.Metrics()
	reads1, wait1 := s.FS.Reads()
	return span{probes: len(keys), elapsed: el, waited: wait1 - wait0,
		blockReads: after.BlockCache.Misses - before.BlockCache.Misses,
		devices:    reads1 - reads0,
		hits:       after.Filter.Hits - before.Filter.Hits,
		misses:     after.Filter.Misses - before.Filter.Misses}, nil
}

// Run measures n probes of a workload with the given modelled latency,
// after a warm-up of n/4 probes.
func (s *Store) Run(policy, workload string, latency time.Duration, n int) (PebbleResult, error) {
	s.FS.SetDelay(latency)
	defer s.FS.SetDelay(0)
	if err := s.warm(workload, n/4); err != nil {
		return PebbleResult{}, err
	}
	keys, present := probeKeys(s.cfg, workload, 42, n)
	sp, err := s.measure(workload, keys, present)
	return sp.result(policy, workload, latency), err
}

// Rounds is how many slices each measurement is cut into: the policies
// take turns slice by slice, so a change in the machine's load (other
// processes share its cores) falls on all of them alike, and the reported
// rate is the median slice's.
const Rounds = 15

// runInterleaved measures one workload on every store, in turns; each
// round starts one store later (turn.Order), so no policy always probes
// first after the previous workload's switch or always right after the
// same neighbour.
func runInterleaved(stores []*Store, names []string, cfg PebbleConfig, workload string, latency time.Duration, n int) ([]PebbleResult, error) {
	for _, s := range stores {
		s.FS.SetDelay(latency)
		if err := s.warm(workload, n/4); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, s := range stores {
			s.FS.SetDelay(0)
		}
	}()
	keys, present := probeKeys(cfg, workload, 42, n)
	acc := make([]span, len(stores))
	for r := range Rounds {
		lo, hi := r*n/Rounds, (r+1)*n/Rounds
		for _, i := range turn.Order(r, len(stores)) {
			s := stores[i]
			sp, err := s.measure(workload, keys[lo:hi], present[lo:hi])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
			acc[i].add(sp)
		}
	}
	out := make([]PebbleResult, len(stores))
	for i := range acc {
		out[i] = acc[i].result(names[i], workload, latency)
	}
	return out, nil
}

// Report is everything RunAllPebble measured.
type Report struct {
	Config  PebbleConfig   `json:"config"`
	Trees   []Tree         `json:"trees"`
	Results []PebbleResult `json:"results"`
	// FPOnly are policies built only for their false-positive reads per
	// absent SeekPrefixGE (the memory-saving view); untimed.
	FPOnly []PebbleResult `json:"fp_only,omitempty"`
	// GetFP are the false-positive reads per absent Get of the policies
	// GetProbed names, over Config.GetFPProbes probes each; untimed.
	GetFP []PebbleResult `json:"get_fp,omitempty"`
	// Savings: per family, the budget at which it matches the baseline's
	// false-positive reads per absent SeekPrefixGE, and its filter bytes.
	Savings []Saving `json:"savings,omitempty"`
}

// SavingBaseline is the policy the memory-saving view matches.
const SavingBaseline = "pebble-bloom/10"

// Saving is one family's point of equal false-positive reads with
// SavingBaseline: the budget, interpolated between the two measured
// budgets that bracket the baseline's false-positive reads per probe (the
// logarithm of the reads is close to linear in bits per key), and the
// filter bytes interpolated the same way.
type Saving struct {
	Family        string  `json:"family"`
	BitsPerKey    float64 `json:"bits_per_key"`
	FilterBytes   float64 `json:"filter_bytes"`
	BaselineBytes uint64  `json:"baseline_bytes"`
	BaselineFP    float64 `json:"baseline_fp_per_probe"`
	// Bracketed is false when no two measured budgets enclose the
	// baseline's reads; BitsPerKey is then the measured budget nearest to
	// it, and the saving a bound.
	Bracketed bool `json:"bracketed"`
	// Points are the family's measured budgets.
	Points []SavingPoint `json:"points"`
}

// SavingPoint is one measured budget of a family.
type SavingPoint struct {
	Policy      string  `json:"policy"`
	BitsPerKey  float64 `json:"bits_per_key"`
	FPPerProbe  float64 `json:"fp_per_probe"`
	FilterBytes float64 `json:"filter_bytes"`
}

func savings(all []Policy, rep *Report) []Saving {
	fp := map[string]float64{}
	for _, r := range append(append([]PebbleResult(nil), rep.Results...), rep.FPOnly...) {
		if r.Workload == AbsentPrefix && r.Latency == 0 {
			fp[r.Policy] = r.FilterMisses
		}
	}
	bytes := map[string]uint64{}
	for _, t := range rep.Trees {
		bytes[t.Policy] = t.TotalFilterBytes()
	}
	base, ok := fp[SavingBaseline]
	if !ok || base <= 0 {
		return nil
	}
	type point struct {
		bits, fp, bytes float64
		policy          string
	}
	curves := map[string][]point{}
	var families []string
	for _, p := range all {
		v, ok := fp[p.Name]
		if p.Family == "" || !ok || v <= 0 {
			continue
		}
		if _, seen := curves[p.Family]; !seen {
			families = append(families, p.Family)
		}
		curves[p.Family] = append(curves[p.Family], point{p.Budget, v, float64(bytes[p.Name]), p.Name})
	}
	var out []Saving
	for _, f := range families {
		pts := curves[f]
		slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.bits, b.bits) })
		sv := Saving{Family: f, BaselineBytes: bytes[SavingBaseline], BaselineFP: base}
		for _, p := range pts {
			sv.Points = append(sv.Points, SavingPoint{p.policy, p.bits, p.fp, p.bytes})
		}
		for i := 0; i+1 < len(pts); i++ {
			a, b := pts[i], pts[i+1]
			if (a.fp-base)*(b.fp-base) <= 0 && a.fp != b.fp {
				t := (math.Log(a.fp) - math.Log(base)) / (math.Log(a.fp) - math.Log(b.fp))
				sv.BitsPerKey = a.bits + t*(b.bits-a.bits)
				sv.FilterBytes = a.bytes + t*(b.bytes-a.bytes)
				sv.Bracketed = true
				break
			}
		}
		if !sv.Bracketed {
			near := pts[0]
			for _, p := range pts {
				if math.Abs(math.Log(p.fp/base)) < math.Abs(math.Log(near.fp/base)) {
					near = p
				}
			}
			sv.BitsPerKey, sv.FilterBytes = near.bits, near.bytes
		}
		out = append(out, sv)
	}
	return out
}

// RunAllPebble builds one tree per policy under root, then measures every
// workload in memory and under cfg.Latency, the policies interleaved per
// workload. Each policy in fpOnly is built too, and measured for its
// false-positive reads per absent prefix seek only.
func RunAllPebble(root string, policies, fpOnly []Policy, cfg PebbleConfig, progress func(string)) (Report, error) {
	rep := Report{Config: cfg}
	say := func(s string) {
		if progress != nil {
			progress(s)
		}
	}
	all := append(append([]Policy(nil), policies...), fpOnly...)
	var fit tablefilter.LevelShape
	built := map[string]Tree{}
	for i := range all {
		p := &all[i]
		if (p.Fit != nil || p.Match != nil) && i == 0 {
			return rep, fmt.Errorf("%s: the first policy's tree gives the shape others fit to", p.Name)
		}
		if p.Fit != nil {
			fitTo := p.Fit
			p.Apply = func(o *pebble.Options) { fitTo(o, fit) }
		}
		if p.Match != nil {
			refs := map[string]Tree{}
			for _, name := range p.MatchTo {
				ref, ok := built[name]
				if !ok {
					return rep, fmt.Errorf("%s: %q, whose tree it matches, is not built before it", p.Name, name)
				}
				refs[name] = ref
			}
			match := p.Match
			p.Apply = func(o *pebble.Options) { match(o, fit, refs) }
		}
		say("pebble build " + p.Name)
		t, err := BuildPebble(filepath.Join(root, sanitize(p.Name)), *p, cfg)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", p.Name, err)
		}
		if i == 0 {
			fit = t.LevelShape()
		}
		built[p.Name] = t
		rep.Trees = append(rep.Trees, t)
	}
	stores := make([]*Store, len(all))
	defer func() {
		for _, s := range stores {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i, p := range all { // all, not the arguments: Fit set Apply there
		s, err := OpenStore(filepath.Join(root, sanitize(p.Name)), p, cfg)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", p.Name, err)
		}
		stores[i] = s
	}
	names := make([]string, len(all))
	for i, p := range all {
		names[i] = p.Name
	}
	for _, lat := range []time.Duration{0, cfg.Latency} {
		n := cfg.Probes
		if lat > 0 {
			n = cfg.LatencyProbes
		}
		for _, w := range Workloads {
			say(fmt.Sprintf("pebble %s, latency %v", w, lat))
			rs, err := runInterleaved(stores[:len(policies)], names, cfg, w, lat, n)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", w, err)
			}
			rep.Results = append(rep.Results, rs...)
		}
	}
	getFP, err := measureGetFP(stores[:len(policies)], names, cfg, say)
	if err != nil {
		return rep, fmt.Errorf("absent Get false positives: %w", err)
	}
	rep.GetFP = getFP
	for i, p := range fpOnly {
		say("pebble false positives " + p.Name)
		r, err := stores[len(policies)+i].Run(p.Name, AbsentPrefix, 0, cfg.Probes)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", p.Name, err)
		}
		rep.FPOnly = append(rep.FPOnly, r)
	}
	rep.Savings = savings(all, &rep)
	return rep, nil
}

// quietLogger drops Pebble's informational chatter; errors still surface
// through the returned errors, and Fatalf still stops the process.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// TempRoot makes a scratch directory for the databases.
func TempRoot() (string, func(), error) {
	dir, err := os.MkdirTemp("", "lsmcuckoo-dbbench-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
