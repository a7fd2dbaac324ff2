package dbbench

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/bloom"
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
