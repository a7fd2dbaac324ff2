package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
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

// -format forces the format: a kvdemo store inspected with -format pebble is
// refused as not a Pebble store, not reported as what detection found.
func TestInspectForcedFormat(t *testing.T) {
	dir := t.TempDir()
	db, err := kvdemo.Open(dir, &kvdemo.Options{MemtableBytes: 256 << 10, NoSyncEachWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("key%06d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI("inspect", "-probes", "10", dir); code != 0 {
		t.Fatalf("detected: exit %d, %s", code, stderr)
	}
	code, out, stderr := runCLI("inspect", "-format", "pebble", dir)
	if code != 2 || !strings.Contains(stderr, "not a Pebble store") || out != "" {
		t.Fatalf("-format pebble on a kvdemo store: exit %d, %q\n%s", code, stderr, out)
	}
}
