// Package layering holds one test: the module's packages depend on each
// other in one direction, kvdemo and bench → tablefilter → codec and
// dynamic → internal (codec → codec/internal → internal), and a store that wants one piece does not link the
// engines it does not use.
package layering

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lsmcuckoo/lsmcuckoo"

// TestLayering reads the dependency closure of each library package with
// `go list -deps` and checks that no package reaches a layer above its own
// and that each links only the storage engine it adapts.
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH: go list is how this test reads the dependencies")
	}
	pebble, badger := "github.com/cockroachdb/pebble", "github.com/dgraph-io/badger"
	for _, c := range []struct {
		pkg       string
		forbidden []string // import path prefixes not in its dependency closure
	}{
		{"internal/keyhash", []string{module + "/codec", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"internal/semisort", []string{module + "/codec", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"internal/relocate", []string{module + "/codec", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"internal/levelfit", []string{module + "/codec", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"codec/internal/frame", []string{module + "/codec\n", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"codec/internal/bucket", []string{module + "/codec\n", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"codec/internal/blockv1", []string{module + "/codec\n", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"codec/internal/linev2", []string{module + "/codec\n", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"codec/internal/linev3", []string{module + "/codec\n", module + "/dynamic", module + "/tablefilter", pebble, badger}},
		{"codec", []string{module + "/dynamic", module + "/tablefilter", module + "/kvdemo", module + "/bench", pebble, badger}},
		{"dynamic", []string{module + "/codec", module + "/tablefilter", module + "/kvdemo", module + "/bench", pebble, badger}},
		{"tablefilter", []string{module + "/tablefilter/badgerfilter", module + "/kvdemo", module + "/bench", badger}},
		{"tablefilter/badgerfilter", []string{module + "/tablefilter\n", module + "/dynamic", module + "/kvdemo", module + "/bench", pebble}},
	} {
		out, err := exec.Command("go", "list", "-deps", module+"/"+c.pkg).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("go list -deps %s: %v\n%s", c.pkg, err, ee.Stderr)
			}
			t.Fatalf("go list -deps %s: %v", c.pkg, err)
		}
		for _, dep := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			for _, bad := range c.forbidden {
				// A prefix ending in a newline names exactly that package.
				if exact, ok := strings.CutSuffix(bad, "\n"); ok && dep == exact || !ok && strings.HasPrefix(dep, bad) {
					t.Errorf("%s depends on %s", c.pkg, dep)
				}
			}
		}
	}
}
