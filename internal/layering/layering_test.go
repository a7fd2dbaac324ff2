// Package layering holds one test: the module's packages depend on each
// other in one direction, kvdemo and bench → tablefilter → codec and
// dynamic → internal (codec → codec/internal → internal), and a store that
// wants one piece does not link the engines it does not use (a Pebble v1
// store does not link Pebble v2, nor the reverse).
package layering

import (
	"errors"
	"os/exec"
	"slices"
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
	// Pebble v2's module path lies under v1's: a v1 check forbids pebble
	// except pebbleV2, a v2 check forbids pebbleV2.
	pebbleV2 := pebble + "/v2"
	tf := module + "/tablefilter"
	for _, c := range []struct {
		pkg       string
		forbidden []string // import path prefixes not in its dependency closure
		except    []string // prefixes allowed although a forbidden one matches
	}{
		{"internal/keyhash", []string{module + "/codec", module + "/dynamic", tf, pebble, badger}, nil},
		{"internal/semisort", []string{module + "/codec", module + "/dynamic", tf, pebble, badger}, nil},
		{"internal/levelfit", []string{module + "/codec", module + "/dynamic", tf, pebble, badger}, nil},
		{"internal/relocate", []string{module + "/codec", module + "/dynamic", tf, pebble, badger}, nil},
		{"internal/terminal", []string{module + "/codec", module + "/dynamic", tf, pebble, badger}, nil},
		{"codec/internal/frame", []string{module + "/codec\n", module + "/dynamic", tf, pebble, badger}, nil},
		{"codec/internal/bucket", []string{module + "/codec\n", module + "/dynamic", tf, pebble, badger}, nil},
		{"codec/internal/blockv1", []string{module + "/codec\n", module + "/dynamic", tf, pebble, badger}, nil},
		{"codec/internal/linev2", []string{module + "/codec\n", module + "/dynamic", tf, pebble, badger}, nil},
		{"codec/internal/linev3", []string{module + "/codec\n", module + "/dynamic", tf, pebble, badger}, nil},
		{"codec", []string{module + "/dynamic", tf, module + "/kvdemo", module + "/bench", pebble, badger}, nil},
		{"dynamic", []string{module + "/codec", tf, module + "/kvdemo", module + "/bench", pebble, badger}, nil},
		// The Pebble adapters: each links its own Pebble and the shared
		// core, never the other Pebble or the other adapter; the core
		// links no Pebble at all.
		{"tablefilter/internal/pebblecore", []string{tf + "\n", tf + "/pebblev1", tf + "/badgerfilter", module + "/dynamic", module + "/kvdemo", module + "/bench", pebble, badger}, nil},
		{"tablefilter", []string{tf + "/pebblev1", tf + "/badgerfilter", module + "/dynamic", module + "/kvdemo", module + "/bench", pebble, badger}, []string{pebbleV2}},
		{"tablefilter/pebblev1", []string{tf + "\n", tf + "/badgerfilter", module + "/dynamic", module + "/kvdemo", module + "/bench", pebbleV2, badger}, nil},
		{"tablefilter/badgerfilter", []string{tf + "\n", tf + "/pebblev1", tf + "/internal/pebblecore", module + "/dynamic", module + "/kvdemo", module + "/bench", pebble}, nil},
		// The command's compare measures with the benchmarks' public
		// filter-level code, and nothing else of bench.
		{"cmd/lsmcuckoo", []string{module + "/kvdemo", module + "/bench"}, []string{module + "/bench/filterbench", module + "/bench/binaryfuse", module + "/bench/internal/turn", module + "/bench/internal/svgplot"}},
		// The command's store readers: the Pebble v2 reader links no
		// Pebble v1; the Pebble v1 reader builds on it (the snapshot, the
		// probes and the filter-block check are shared) and links no
		// other engine.
		{"cmd/lsmcuckoo/internal/pebblestore", []string{pebble, tf + "/pebblev1", module + "/cmd/lsmcuckoo/internal/pebble1store", badger, module + "/kvdemo", module + "/bench"}, []string{pebbleV2}},
		{"cmd/lsmcuckoo/internal/pebble1store", []string{badger, module + "/cmd/lsmcuckoo/internal/badgerstore", module + "/cmd/lsmcuckoo/internal/kvdemostore", module + "/kvdemo", module + "/bench"}, nil},
		// The benchmarks' public measurement surface stays filter-level:
		// no store-level benchmark, no demo store.
		{"bench/filterbench", []string{module + "/bench/internal/dbbench", module + "/bench/internal/membench", module + "/kvdemo"}, nil},
		// The binary fuse anchor is a Pebble policy and nothing of ours
		// but the key hash.
		{"bench/binaryfuse", []string{module + "/codec", module + "/dynamic", tf, module + "/kvdemo", module + "/bench/filterbench", badger}, nil},
		{"bench/internal/turn", []string{module + "/codec", module + "/dynamic", tf, module + "/kvdemo", pebble, badger}, nil},
		{"bench/internal/svgplot", []string{module + "/codec", module + "/dynamic", tf, module + "/kvdemo", pebble, badger}, nil},
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
			if slices.ContainsFunc(c.except, func(ok string) bool { return strings.HasPrefix(dep, ok) }) {
				continue
			}
			for _, bad := range c.forbidden {
				// A prefix ending in a newline names exactly that package.
				if exact, ok := strings.CutSuffix(bad, "\n"); ok && dep == exact || !ok && strings.HasPrefix(dep, bad) {
					t.Errorf("%s depends on %s", c.pkg, dep)
				}
			}
		}
	}
}
