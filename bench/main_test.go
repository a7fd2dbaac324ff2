package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// TestReportTiny runs the whole report, Pebble level included, on tiny
// sizes so CI catches a broken report before anyone waits for a full run.
func TestReportTiny(t *testing.T) {
	// Whole Pebble trees: Pebble built with invariants, as under -race,
	// takes ten times as long. What runs concurrently here is covered
	// under -race where it lives: the builders Pebble's flushes and
	// compactions run side by side (codec's TestConcurrentBuilders),
	// lookups from many goroutines (tablefilter's Pebble stores), and
	// membench's goroutines (its TestRunTiny).
	race.SkipLong(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-tiny", "-out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lsmcuckoo/9.6", "lsmcuckoo-v2/10", "lsmcuckoo-v1/10", "pebble-bloom/10", "| lsmcuckoo-v2/10 |", "- Format version 3 vs 2: `lsmcuckoo/10` vs `lsmcuckoo-v2/10`", "- Version 3's layouts, default vs densest: `lsmcuckoo/10` vs `lsmcuckoo-densest/10`", "lsmcuckoo-densest/9.6", "lsmcuckoo-v4/9.6", "| lsmcuckoo-v4/10 |", "- Format version 4 vs version 3's densest layout: `lsmcuckoo-v4/10` vs `lsmcuckoo-densest/10`", "badger-bloom/default", "binary-fuse/8", "### 1000 keys", "## Pebble database level", "fpr-vs-bits-1000.svg", "frontier-1000.svg", "pebble-gets.svg", "## Memtable filter", "| memfilter |", "## kvdemo level", "| cuckoo | 100% |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, svg := range []string{"fpr-vs-bits-1000.svg", "frontier-1000.svg", "pebble-gets.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, svg))
		if err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s: not an SVG (%v)", svg, err)
		}
	}
	rep := readReport(t, dir)
	if len(rep.Filters) == 0 || rep.Pebble == nil || len(rep.Pebble.Results) != 2*len(dbbench.Workloads)*len(dbbench.Policies()) || len(rep.Mem) == 0 || len(rep.KV) != 8 {
		t.Fatalf("results.json: %d filter results, pebble %v, %d memtable results, %d kvdemo results", len(rep.Filters), rep.Pebble != nil, len(rep.Mem), len(rep.KV))
	}
	for _, r := range rep.Filters {
		if r.BitsPerKey <= 0 || r.FPR < 0 || r.FPR > 0.5 {
			t.Errorf("%s: implausible bits/key %v or FPR %v", r.Family, r.BitsPerKey, r.FPR)
		}
	}
	for _, r := range rep.Pebble.Results {
		if r.ProbesPerS <= 0 {
			t.Errorf("pebble %s %s: %v probes/s", r.Policy, r.Workload, r.ProbesPerS)
		}
	}
	for _, tr := range rep.Pebble.Trees {
		if tr.Policy != "none" && tr.TotalFilterBytes() == 0 {
			t.Errorf("pebble %s: no filter bytes", tr.Policy)
		}
	}
	for _, want := range []string{"### Trees", "### With 50µs per block read", "### Memory saving", "### Targets"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

// TestReportPebbleOnly: -pebble-only runs the Pebble database level alone
// (the README's full-run Pebble table is produced that way), with no
// filter, memtable or kvdemo level in the report.
func TestReportPebbleOnly(t *testing.T) {
	// Whole Pebble trees: Pebble built with invariants, as under -race,
	// takes ten times as long. What runs concurrently here is covered
	// under -race where it lives: the builders Pebble's flushes and
	// compactions run side by side (codec's TestConcurrentBuilders),
	// lookups from many goroutines (tablefilter's Pebble stores), and
	// membench's goroutines (its TestRunTiny).
	race.SkipLong(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-tiny", "-pebble-only", "-out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Pebble database level", "### Trees", "pebble-gets.svg"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, unwanted := range []string{"## Filter level", "## Memtable filter", "## kvdemo level"} {
		if bytes.Contains(md, []byte(unwanted)) {
			t.Errorf("report.md has %q", unwanted)
		}
	}
	rep := readReport(t, dir)
	if len(rep.Filters) != 0 || len(rep.Mem) != 0 || len(rep.KV) != 0 || rep.Pebble == nil || len(rep.Pebble.Results) != 2*len(dbbench.Workloads)*len(dbbench.Policies()) {
		t.Fatalf("results.json: %d filter results, %d memtable, %d kvdemo, pebble %v", len(rep.Filters), len(rep.Mem), len(rep.KV), rep.Pebble != nil)
	}
	if err := run([]string{"-pebble-only", "-filters-only"}, &stdout, &stderr); err == nil {
		t.Error("-pebble-only with -filters-only accepted")
	}
}

func TestUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-sizes", "abc"}, &out, &errb); err == nil {
		t.Fatal("bad -sizes accepted")
	}
	errb.Reset()
	if err := run([]string{"-levels", "-filters-only"}, &out, &errb); err == nil {
		t.Fatal("-levels with -filters-only accepted")
	}
	errb.Reset()
	if err := run([]string{"stray"}, &out, &errb); err == nil || !strings.Contains(errb.String(), "usage") {
		t.Fatalf("stray argument: err=%v, stderr=%q", err, errb.String())
	}
}

// readReport reads the results.json a report run wrote into dir.
func readReport(t *testing.T, dir string) report {
	t.Helper()
	var rep report
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}
