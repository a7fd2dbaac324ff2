package race

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkippedPackagesRunWithoutRace: every package with a test that skips
// itself under the race detector (SkipLong) is in the Makefile's second
// pass, the one without it; otherwise those tests would run nowhere.
func TestSkippedPackagesRunWithoutRace(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(mk), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "$(GO)" && f[1] == "test" && !strings.Contains(line, "-race") && !strings.Contains(line, "-fuzz") {
			for _, p := range f[2:] {
				if strings.HasPrefix(p, "./") {
					patterns = append(patterns, p)
				}
			}
		}
	}
	if len(patterns) == 0 {
		t.Fatal("no test pass without -race in the Makefile")
	}
	covered := func(dir string) bool {
		for _, p := range patterns {
			p = strings.TrimPrefix(p, "./")
			if base, ok := strings.CutSuffix(p, "/..."); ok && (dir == base || strings.HasPrefix(dir, base+"/")) || dir == p {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "race.SkipLong(") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if dir == "internal/race" {
			return nil // this test, which names the call
		}
		if !seen[dir] && !covered(dir) {
			t.Errorf("%s skips long tests under -race but is not in the Makefile's pass without it (%v)", dir, patterns)
		}
		seen[dir] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Error("found no test calling race.SkipLong: the walk looked in the wrong place")
	}
}
