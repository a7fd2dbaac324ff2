// Package dbbench measures filters where users feel them: point lookups on a
// real Pebble database on disk, with tables spread over L0..L5 (Pebble's Get
// never consults L6 filters, so a database compacted into L6 would measure
// nothing) and a block cache smaller than the data.
package dbbench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Policy is a filter setting under test; a nil FilterPolicy means no filter.
type Policy struct {
	Name   string
	Filter pebble.FilterPolicy
}

// PebbleConfig shapes the database.
type PebbleConfig struct {
	// BaseKeys are written first with automatic compactions on and a tiny
	// Lbase, so they settle into a tall tree (L3..L6), not all into L6.
	BaseKeys int
	// L0Keys are written afterwards with compactions off, flushed into
	// L0Tables overlapping L0 tables. An absent Get then consults a filter
	// on L0..L5, the levels where Pebble's Get uses filters at all (it
	// never consults L6's).
	L0Keys   int
	L0Tables int
	// ValueSize is the value length.
	ValueSize int
	// CacheBytes is the block cache size; keep it well under the data.
	CacheBytes int64
	// Gets per workload.
	Gets int
}

// QuickPebble is small enough for CI and a first look; FullPebble is the
// report's configuration (2M keys).
var (
	QuickPebble = PebbleConfig{BaseKeys: 250_000, L0Keys: 100_000, L0Tables: 4, ValueSize: 64, CacheBytes: 4 << 20, Gets: 100_000}
	FullPebble  = PebbleConfig{BaseKeys: 1_600_000, L0Keys: 400_000, L0Tables: 6, ValueSize: 100, CacheBytes: 32 << 20, Gets: 400_000}
)

// PebbleResult is one policy on one workload.
type PebbleResult struct {
	Policy         string    `json:"policy"`
	Workload       string    `json:"workload"` // "absent" or "50/50"
	Gets           int       `json:"gets"`
	GetsPerSec     float64   `json:"gets_per_sec"`
	BlockReadsPer  float64   `json:"block_reads_per_get"` // block-cache misses per Get
	FilterHits     int64     `json:"filter_hits"`         // tables skipped by the filter
	FilterMisses   int64     `json:"filter_misses"`       // filter said maybe
	FilterBytes    uint64    `json:"filter_bytes"`
	TablesPerLevel [7]int    `json:"tables_per_level"`
	KeysPerLevel   [7]uint64 `json:"-"`
}

// key i of the data set; absent keys use odd numbers, present even, so the
// absent ones interleave with the present ones inside every table's range.
func key(i uint64) []byte {
	var k [16]byte
	copy(k[:], "user")
	binary.BigEndian.PutUint64(k[4:], i*0x9e3779b97f4a7c15) // scatter, keep unique
	binary.BigEndian.PutUint32(k[12:], uint32(i))
	return k[:]
}

func presentKey(i int) []byte { return key(uint64(2 * i)) }
func absentKey(i int) []byte  { return key(uint64(2*i + 1)) }

func options(p Policy, cache *pebble.Cache, compactions bool) *pebble.Options {
	o := &pebble.Options{
		Cache:                       cache,
		DisableAutomaticCompactions: !compactions,
		MemTableSize:                2 << 20,
		// A tiny Lbase makes dynamic level sizing open levels above L6 for
		// a few hundred megabytes of data, as a large store would have.
		LBaseMaxBytes:         64 << 10,
		L0CompactionThreshold: 1,
		// With compactions off (the L0 phase) L0 grows past Pebble's
		// write-stall threshold by design.
		L0StopWritesThreshold: 1 << 20,
		Logger:                quietLogger{},
	}
	o.TargetFileSizes[0] = 512 << 10
	if p.Filter != nil {
		o.Levels[0].FilterPolicy = p.Filter
		o.Filters = map[string]pebble.FilterPolicy{p.Filter.Name(): p.Filter}
	}
	o.EnsureDefaults()
	return o
}

// BuildPebble writes the data set for one policy into dir.
func BuildPebble(dir string, p Policy, cfg PebbleConfig) error {
	value := make([]byte, cfg.ValueSize)
	// Phase 1: the bulk, in memtable-sized steps with a flush each, so
	// compactions build the tree as they would in a long-running store.
	db, err := pebble.Open(dir, options(p, nil, true))
	if err != nil {
		return err
	}
	step := max(1, (2<<20)/(16+cfg.ValueSize+8))
	for from := 0; from < cfg.BaseKeys; from += step {
		if err := writeRange(db, value, from, min(step, cfg.BaseKeys-from)); err != nil {
			db.Close()
			return err
		}
		if err := db.Flush(); err != nil {
			db.Close()
			return err
		}
	}
	settle(db)
	if err := db.Close(); err != nil {
		return err
	}
	// Phase 2: overlapping L0 tables, one flush each.
	db, err = pebble.Open(dir, options(p, nil, false))
	if err != nil {
		return err
	}
	per := max(1, cfg.L0Keys/max(1, cfg.L0Tables))
	for t := 0; t < cfg.L0Tables; t++ {
		if err := writeRange(db, value, cfg.BaseKeys+t*per, per); err != nil {
			db.Close()
			return err
		}
		if err := db.Flush(); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// settle waits until compactions have emptied L0 and drained. Compactions
// are scheduled asynchronously, so "none in progress" right after a flush
// proves nothing; an empty L0 does.
func settle(db *pebble.DB) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		m := db.Metrics()
		if m.Levels[0].TablesCount == 0 && m.Compact.NumInProgress == 0 {
			return
		}
	}
}

// writeRange writes present keys [from, from+n) in a shuffled order, so each
// flushed table spans the whole key space.
func writeRange(db *pebble.DB, value []byte, from, n int) error {
	r := rand.New(rand.NewPCG(uint64(from), 9))
	b := db.NewBatch()
	for _, i := range r.Perm(n) {
		k := presentKey(from + i)
		copy(value, k)
		if err := b.Set(k, value, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

// Open opens the database BuildPebble wrote, with compactions off so the
// layout stays as built while it is measured.
func Open(dir string, p Policy, cacheBytes int64) (*pebble.DB, func(), error) {
	cache := pebble.NewCache(cacheBytes)
	db, err := pebble.Open(dir, options(p, cache, false))
	if err != nil {
		cache.Unref()
		return nil, nil, err
	}
	return db, func() { db.Close(); cache.Unref() }, nil
}

// Probes returns a deterministic probe function for a workload: "absent"
// returns only absent keys that interleave with the present ones, "50/50"
// alternates present and absent.
func Probes(cfg PebbleConfig, workload string, seed uint64) func(i int) []byte {
	total := cfg.BaseKeys + cfg.L0Keys
	r := rand.New(rand.NewPCG(seed, 7))
	return func(i int) []byte {
		j := r.IntN(total)
		if workload == "50/50" && i%2 == 0 {
			return presentKey(j)
		}
		return absentKey(j)
	}
}

// Get reads k and checks that a found value is k's; a missing key is not an
// error (absent probes miss by design).
func Get(db *pebble.DB, k []byte) error { return get(db, k) }

// RunPebble opens the database built for p and times Gets: "absent" probes
// only absent keys that interleave with the present ones, "50/50" mixes
// present and absent. The layout is frozen (no compactions) while measuring.
func RunPebble(dir string, p Policy, cfg PebbleConfig, workload string) (PebbleResult, error) {
	db, closeDB, err := Open(dir, p, cfg.CacheBytes)
	if err != nil {
		return PebbleResult{}, err
	}
	defer closeDB()
	res := PebbleResult{Policy: p.Name, Workload: workload, Gets: cfg.Gets}
	tables, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		return res, err
	}
	for lvl, ts := range tables {
		res.TablesPerLevel[lvl] = len(ts)
		for _, t := range ts {
			if t.Properties != nil {
				res.FilterBytes += t.Properties.FilterSize
			}
		}
	}
	probe := Probes(cfg, workload, 42)
	// Warm the cache with a tenth of the workload, then measure.
	for i := 0; i < cfg.Gets/10; i++ {
		if err := get(db, probe(i)); err != nil {
			return res, err
		}
	}
	before := db.Metrics()
	start := time.Now()
	for i := 0; i < cfg.Gets; i++ {
		if err := get(db, probe(i)); err != nil {
			return res, err
		}
	}
	el := time.Since(start)
	after := db.Metrics()
	res.GetsPerSec = float64(cfg.Gets) / el.Seconds()
	res.BlockReadsPer = float64(after.BlockCache.Misses-before.BlockCache.Misses) / float64(cfg.Gets)
	res.FilterHits = after.Filter.Hits - before.Filter.Hits
	res.FilterMisses = after.Filter.Misses - before.Filter.Misses
	return res, nil
}

func get(db *pebble.DB, k []byte) error {
	v, closer, err := db.Get(k)
	if err == pebble.ErrNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if len(v) >= len(k) && string(v[:len(k)]) != string(k) {
		closer.Close()
		return fmt.Errorf("key %x read back a wrong value", k)
	}
	return closer.Close()
}

// RunAllPebble builds one database per policy under root and runs both
// workloads on each, interleaving policies per workload.
func RunAllPebble(root string, policies []Policy, cfg PebbleConfig, progress func(string)) ([]PebbleResult, error) {
	for _, p := range policies {
		if progress != nil {
			progress("pebble build " + p.Name)
		}
		if err := BuildPebble(filepath.Join(root, sanitize(p.Name)), p, cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	var out []PebbleResult
	for _, w := range []string{"absent", "50/50"} {
		for _, p := range policies {
			if progress != nil {
				progress("pebble " + w + " " + p.Name)
			}
			r, err := RunPebble(filepath.Join(root, sanitize(p.Name)), p, cfg, w)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", p.Name, w, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
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
