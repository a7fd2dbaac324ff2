package dbbench

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// TestPebbleTiny runs the database benchmark on a tiny data set: the layout
// must put tables on levels Get consults, the filter must skip tables, and
// no present key may be reported wrong.
func TestPebbleTiny(t *testing.T) {
	cfg := PebbleConfig{BaseKeys: 60_000, L0Keys: 20_000, L0Tables: 3, ValueSize: 32, CacheBytes: 1 << 20, Gets: 5_000}
	policies := []Policy{{"pebble-bloom/10", bloom.FilterPolicy(10)}, {"none", nil}}
	res, err := RunAllPebble(t.TempDir(), policies, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for _, r := range res {
		if r.TablesPerLevel[0] < cfg.L0Tables || r.TablesPerLevel[6] == 0 {
			t.Errorf("%s: levels %v: want >= %d L0 tables over a compacted base", r.Policy, r.TablesPerLevel, cfg.L0Tables)
		}
		switch r.Policy {
		case "none":
			if r.FilterHits != 0 || r.FilterBytes != 0 {
				t.Errorf("none: filter hits %d, bytes %d", r.FilterHits, r.FilterBytes)
			}
		default:
			// Every absent Get meets at least the L0 tables' filters.
			if r.Workload == "absent" && r.FilterHits < int64(cfg.L0Tables*cfg.Gets*9/10) {
				t.Errorf("%s: only %d filter hits for %d absent Gets (levels %v)", r.Policy, r.FilterHits, cfg.Gets, r.TablesPerLevel)
			}
			if r.FilterBytes == 0 {
				t.Errorf("%s: no filter bytes", r.Policy)
			}
		}
	}
}

// BenchmarkPebbleGet times Gets on a real Pebble database per policy and
// workload (the report's database level, on QuickPebble's data set), with
// Pebble's block reads and filter passes per Get as metrics, for benchstat.
func BenchmarkPebbleGet(b *testing.B) {
	cfg := QuickPebble
	root := b.TempDir()
	policies := []Policy{
		{"lsmcuckoo/10", tablefilter.NewPolicy(10)},
		{"pebble-bloom/10", bloom.FilterPolicy(10)},
		{"none", nil},
	}
	for _, p := range policies {
		if err := BuildPebble(filepath.Join(root, sanitize(p.Name)), p, cfg); err != nil {
			b.Fatal(err)
		}
	}
	for _, w := range []string{"absent", "50/50"} {
		for _, p := range policies {
			b.Run(fmt.Sprintf("%s/%s", w, p.Name), func(b *testing.B) {
				db, closeDB, err := Open(filepath.Join(root, sanitize(p.Name)), p, cfg.CacheBytes)
				if err != nil {
					b.Fatal(err)
				}
				defer closeDB()
				probe := Probes(cfg, w, 42)
				for i := 0; i < 10_000; i++ { // warm the cache
					Get(db, probe(i))
				}
				before := db.Metrics()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := Get(db, probe(i)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				after := db.Metrics()
				b.ReportMetric(float64(after.BlockCache.Misses-before.BlockCache.Misses)/float64(b.N), "blockreads/get")
				b.ReportMetric(float64(after.Filter.Misses-before.Filter.Misses)/float64(b.N), "filterpasses/get")
			})
		}
	}
}
