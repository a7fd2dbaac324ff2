package workload

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// DemoConfig sizes RunDemo. Zero fields take the defaults in brackets.
type DemoConfig struct {
	Dir          string              // parent of the stores (one per filter kind); "" = a temporary directory, removed afterwards
	Keys         int                 // keys loaded into each store [1_000_000]
	Gets         int                 // point lookups per store [100_000]
	Miss         float64             // share of lookups for absent keys [0.9]; negative means 0
	MemtableKeys int                 // keys per memtable, so Keys/MemtableKeys tables [65_536]
	ValueSize    int                 // bytes per value [64]
	Filters      []kvdemo.FilterKind // [cuckoo, global, bloom, none]
	BitsPerKey   float64             // filter budget of every store [10]
	// BlockCacheBytes is each store's block cache (kvdemo.Options) [64 MiB;
	// negative: none].
	BlockCacheBytes int64
	Seed            uint64 // lookup key choice [1]
	// Misses, if set, runs the lookups once per share of absent keys
	// (each over every store in turn, interleaved) instead of once with
	// Miss: one result per store and share, in that order.
	Misses []float64
	// MemtableBytes, if set, is the stores' flush threshold instead of
	// the one MemtableKeys implies.
	MemtableBytes int64
	// Progress, if set, is told what runs.
	Progress func(string)
}

// DemoResult is one store's outcome.
type DemoResult struct {
	LookupResult
	LoadSeconds      float64 `json:"load_seconds"`
	TableFilterBytes int64   `json:"table_filter_bytes"`
	BitsPerKey       float64 `json:"bits_per_key"` // table filter bits per loaded key
}

func (c DemoConfig) withDefaults() DemoConfig {
	if c.Keys <= 0 {
		c.Keys = 1_000_000
	}
	if c.Gets <= 0 {
		c.Gets = 100_000
	}
	switch {
	case c.Miss == 0:
		c.Miss = 0.9
	case c.Miss < 0:
		c.Miss = 0
	case c.Miss > 1:
		c.Miss = 1
	}
	if c.MemtableKeys <= 0 {
		c.MemtableKeys = 65_536
	}
	if c.ValueSize <= 0 {
		c.ValueSize = 64
	}
	if len(c.Filters) == 0 {
		c.Filters = []kvdemo.FilterKind{kvdemo.FilterCuckoo, kvdemo.FilterGlobal, kvdemo.FilterBloom, kvdemo.FilterNone}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// RunDemo is the store's end-to-end demonstration: it loads the same keys
// in the same order into one store per filter kind (same memtable size, so
// the same table layout; compaction off, so the tables stay many and
// filters matter), runs the same point-lookup workload on each, and writes
// a side-by-side table to w. Every present key looked up must be found.
func RunDemo(ctx context.Context, w io.Writer, cfg DemoConfig) ([]DemoResult, error) {
	cfg = cfg.withDefaults()
	root := cfg.Dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "kvdemo-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	memBytes := kvdemo.MemtableBytesFor(cfg.MemtableKeys, len(Key(0)), cfg.ValueSize)
	if cfg.MemtableBytes > 0 {
		memBytes = cfg.MemtableBytes
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	fmt.Fprintf(w, "kvdemo demo: %d keys (16-byte keys, %d-byte values) per store, memtable ≈ %d keys (%d bytes), compaction off, in %s\n",
		cfg.Keys, cfg.ValueSize, cfg.MemtableKeys, memBytes, root)

	var out, loads []DemoResult
	var dbs []*kvdemo.DB
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	for _, f := range cfg.Filters {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		dir := filepath.Join(root, string(f))
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			// Loading again into an old demo store would double its
			// tables and compare nothing like for like.
			return out, fmt.Errorf("kvdemo demo: %s is not empty; remove it or choose another directory", dir)
		}
		db, err := kvdemo.Open(dir, &kvdemo.Options{
			Filter:          f,
			BitsPerKey:      cfg.BitsPerKey,
			BlockCacheBytes: cfg.BlockCacheBytes,
			MemtableBytes:   memBytes,
			NoSyncEachWrite: true, // bulk load: one fsync per table, not per key
			MaxTables:       -1,
			Logger:          log.New(w, "kvdemo: ", 0),
		})
		if err != nil {
			return out, err
		}
		dbs = append(dbs, db)
		progress("kvdemo load " + string(f))
		start := time.Now()
		if err := Load(db, cfg.Keys, cfg.ValueSize); err != nil {
			return out, fmt.Errorf("loading %s store: %w", f, err)
		}
		el := time.Since(start)
		st := db.Stats()
		fmt.Fprintf(w, "  loaded %-6s in %5.1fs (%4.0fk puts/s): %d tables, %.1f MiB of tables\n",
			f, el.Seconds(), float64(cfg.Keys)/el.Seconds()/1e3, st.Tables, float64(st.TableBytes)/(1<<20))
		loads = append(loads, DemoResult{
			LoadSeconds:      el.Seconds(),
			TableFilterBytes: st.TableFilterBytes,
			BitsPerKey:       float64(st.TableFilterBytes*8) / float64(cfg.Keys),
		})
	}
	// Measure each store as it settles once the load is over: a global
	// index that grew by segments during the load is rebuilt in one.
	for i, db := range dbs {
		start := time.Now()
		if err := db.Settle(); err != nil {
			return out, err
		}
		if st := db.Stats().Index; st.Segments > 0 {
			fmt.Fprintf(w, "  settled %-6s in %4.1fs: index in %d segment(s), %.1f bits/entry\n",
				cfg.Filters[i], time.Since(start).Seconds(), st.Segments, st.BitsPerKey)
		}
	}
	misses := cfg.Misses
	if len(misses) == 0 {
		misses = []float64{cfg.Miss}
	}
	for _, miss := range misses {
		fmt.Fprintf(w, "point lookups: %d Gets per store, %.0f%% for absent keys, one goroutine\n", cfg.Gets, 100*miss)
		for i, db := range dbs {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			progress(fmt.Sprintf("kvdemo lookups %s miss=%g", cfg.Filters[i], miss))
			r, err := Lookups(db, cfg.Keys, cfg.Gets, miss, cfg.Seed)
			if err != nil {
				return out, err
			}
			res := loads[i]
			res.LookupResult = r
			// The filters as the lookups met them (a global index may
			// have been rebuilt since the load ended).
			res.TableFilterBytes = db.Stats().TableFilterBytes
			res.BitsPerKey = float64(res.TableFilterBytes*8) / float64(cfg.Keys)
			out = append(out, res)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Names padded by hand: the tabwriter right-aligns every column.
	fmt.Fprintln(tw, "filter  \tGets/s\tµs/Get\ttables\tprobed/Get\tFPR\tfilter bytes\tbits/key\t")
	for _, r := range out {
		fmt.Fprintf(tw, "%-8s\t%.0f\t%.2f\t%d\t%.3f\t%s\t%d\t%.1f\t\n", r.Filter, r.GetsPerSec, 1e6/r.GetsPerSec,
			r.Tables, r.ProbedPerGet, fprString(r), r.FilterBytes, r.BitsPerKey)
	}
	tw.Flush()
	fmt.Fprintln(w, "probed/Get: tables searched per Get; FPR: share of tables without the key that the filter did not skip;")
	fmt.Fprintln(w, "filter bytes: table filters (global: the store-wide index) plus memtable filters in memory; bits/key: table filters only.")
	if slices.Contains(cfg.Filters, kvdemo.FilterBloom) {
		// A reader comparing the rows asks why the bloom has fewer bits.
		fmt.Fprintln(w, "bloom: Badger's own table bloom at its default BloomFalsePositive 0.01, which Badger sizes to about 7 bits/key (docs/badger.md).")
	}
	return out, nil
}

func fprString(r DemoResult) string {
	if r.Filter == kvdemo.FilterNone {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*r.FPR)
}
