package main

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestCoreFamiliesCompareVersions: the core side-by-side holds, at every
// budget, lsmcuckoo in each format version (and version 3's densest
// layout) beside Pebble's bloom, and each
// lsmcuckoo family really builds the version its name says (the default,
// "lsmcuckoo", is version 3), so a table of ratios compares what it names.
func TestCoreFamiliesCompareVersions(t *testing.T) {
	keys := testkeys.Random(5000, 16, 100)
	budgets := []int{8, 10, 16}
	fams := coreFamilies(budgets...)
	byName := map[string]filterbench.Family{}
	for _, f := range fams {
		byName[f.Name] = f
	}
	for _, b := range budgets {
		for _, c := range []struct {
			prefix, kind string
			version      int
			policy       string // the Pebble policy's name: the one a user sets
		}{
			{"lsmcuckoo", "lsmcuckoo", 3, "lsmcuckoo.v3.bpk="},
			{"lsmcuckoo-densest", "lsmcuckoo-densest", 3, "lsmcuckoo.v3.densest.bpk="},
			{"lsmcuckoo-v4", "lsmcuckoo-v4", 4, "lsmcuckoo.v4.bpk="},
			{"lsmcuckoo-v2", "lsmcuckoo-v2", 2, "lsmcuckoo.v2.bpk="},
			{"lsmcuckoo-v1", "lsmcuckoo-v1", 1, "lsmcuckoo.v1.bpk="},
			{"pebble-bloom", "pebble-bloom", 0, ""},
		} {
			name := fmt.Sprintf("%s/%d", c.prefix, b)
			fam, ok := byName[name]
			if !ok {
				t.Errorf("coreFamilies(%v) lacks %s", budgets, name)
				continue
			}
			if fam.Kind != c.kind || fam.Param != float64(b) {
				t.Errorf("%s: kind %q, param %v", name, fam.Kind, fam.Param)
			}
			if c.version == 0 {
				continue
			}
			if fam.Policy == nil {
				t.Fatalf("%s does not build through its Pebble policy", name)
			}
			if want := fmt.Sprintf("%s%d", c.policy, b); fam.Policy.Name() != want {
				t.Errorf("%s builds through policy %q, want %q", name, fam.Policy.Name(), want)
			}
			w := fam.Policy.NewWriter(pebble.TableFilter)
			for _, k := range keys {
				w.AddKey(k)
			}
			d, err := codec.Decode(w.Finish(nil))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := d.Info().Version; got != c.version {
				t.Errorf("%s builds format version %d, want %d", name, got, c.version)
			}
		}
	}
	if len(fams) != 6*len(budgets) {
		t.Errorf("coreFamilies(%v) has %d families, want 6 per budget", budgets, len(fams))
	}
	if all := coreFamilies(); len(all) != 6*9 || all[0].Name != "lsmcuckoo/8" || all[len(all)-1].Name != "pebble-bloom/16" {
		t.Errorf("coreFamilies() = %d families from %s to %s, want 6 per budget 8..16", len(all), all[0].Name, all[len(all)-1].Name)
	}
}
