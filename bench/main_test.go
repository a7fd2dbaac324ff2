package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportTiny runs the whole report on tiny sizes so CI catches a broken
// report before anyone waits 15 minutes for it.
func TestReportTiny(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-tiny", "-out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lsmcuckoo/9.6", "pebble-bloom/10", "badger-bloom/default", "binary-fuse8", "## 1000 keys"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	var raw struct {
		Results []struct {
			Family string  `json:"family"`
			FPR    float64 `json:"fpr"`
			Bits   float64 `json:"bits_per_key"`
		} `json:"results"`
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Results) == 0 {
		t.Fatal("no results in results.json")
	}
	for _, r := range raw.Results {
		if r.Bits <= 0 || r.FPR < 0 || r.FPR > 0.5 {
			t.Errorf("%s: implausible bits/key %v or FPR %v", r.Family, r.Bits, r.FPR)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-sizes", "abc"}, &out, &errb); err == nil {
		t.Fatal("bad -sizes accepted")
	}
	if err := run([]string{"stray"}, &out, &errb); err == nil || !strings.Contains(errb.String(), "Usage") {
		t.Fatalf("stray argument: err=%v, stderr=%q", err, errb.String())
	}
}
