package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestFuseLineupAtFuseBytes: each lsmcuckoo family of the fuse line-up
// runs within its fuse filter's bytes on the same keys, and less than 5%
// below, and the report prints the comparison for every width.
func TestFuseLineupAtFuseBytes(t *testing.T) {
	keys := testkeys.Random(3000, 16, 100)
	fams := fuseFamilies(keys)
	var out bytes.Buffer
	dir := t.TempDir()
	if err := run([]string{"-tiny", "-fuse", "-filters-only", "-sizes", "3000", "-out", dir}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rep := readReport(t, dir)
	bytesOf := map[string]int{}
	for _, r := range rep.Filters {
		bytesOf[r.Family] = r.Bytes
	}
	for _, f := range fams {
		if f.Kind != "lsmcuckoo" && f.Kind != "lsmcuckoo-densest" && f.Kind != "lsmcuckoo-v4" {
			continue
		}
		found := false
		for _, g := range fams {
			fb, gb := float64(bytesOf[f.Name]), float64(bytesOf[g.Name])
			if g.Kind == "binary-fuse" && fb <= gb && fb >= 0.95*gb {
				found = true
			}
		}
		if !found {
			t.Errorf("%s (%d bytes) is within 5%% below no fuse filter's bytes", f.Name, bytesOf[f.Name])
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"8", "10", "12", "16"} {
		if !strings.Contains(string(md), "| binary-fuse/"+w+" | ") {
			t.Errorf("report lacks the fuse comparison for width %s", w)
		}
	}
	if !strings.Contains(string(md), "lsmcuckoo bits/key (v4 / default / densest)") {
		t.Errorf("report's fuse table does not name version 4 and version 3's layouts in its columns")
	}
	if !strings.Contains(string(md), "Against binary fuse at equal bytes") {
		t.Errorf("report lacks the fuse comparison")
	}
}
