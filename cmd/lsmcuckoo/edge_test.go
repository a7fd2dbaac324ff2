package main

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// A store that holds no table yet (its writes are in the log) is reported,
// with no level and the fallback budget.
func TestInspectStoreWithoutTables(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("a"), []byte("b"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"get", "seek"} {
		r := inspectJSON(t, dir, "-path", path)
		if r.Keys != 0 || r.ReadsGet != 0 || r.Recommendation.UniformBits != 10 {
			t.Errorf("%s: keys %d, reads %v, uniform %v", path, r.Keys, r.ReadsGet, r.Recommendation.UniformBits)
		}
		if code, _, stderr := runCLI("inspect", "-path", path, dir); code != 0 {
			t.Errorf("text report: exit %d, %s", code, stderr)
		}
	}
	if code, out, stderr := runCLI("migrate", "-bits", "10", "-quiet", dir); code != 0 {
		t.Errorf("migrate of a store without tables: exit %d, %s\n%s", code, stderr, out)
	}
}
