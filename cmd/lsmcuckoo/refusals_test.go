package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	bloom1 "github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/v2"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// prefixSplit drops a key's last three bytes: under it a filter holds one
// prefix per thousand keys of the test stores.
func prefixSplit(k []byte) int { return max(0, len(k)-3) }

// keepSeparator and keepSuccessor shorten no key: the test's keys are all
// of one length, so prefixSplit orders them as the bytewise comparison
// does, but a shortened index key would not be (Pebble's invariant checks
// under the race detector panic on one).
func keepSeparator(dst, a, _ []byte) []byte { return append(dst, a...) }

func keepSuccessor(dst, a []byte) []byte { return append(dst, a...) }

// An application whose comparer has the default comparer's name and a
// Split of its own writes filters of prefixes and probes them with
// prefixes. Rewritten under the default comparer, the filters would hold
// whole keys and its prefix probes would miss nearly every key. migrate
// must refuse such a store, in both Pebbles, and change nothing.
func TestMigrateRefusesForeignSplit(t *testing.T) {
	write := func(t *testing.T, set func(k, v []byte), flush func()) {
		for i := 0; i < 3000; i++ {
			set(key(i), value(i, 16))
		}
		flush()
	}
	stores := map[string]func(t *testing.T, dir string){
		"pebble1": func(t *testing.T, dir string) {
			c := *pebble1.DefaultComparer
			c.Split = prefixSplit
			c.Separator, c.Successor = keepSeparator, keepSuccessor
			o := &pebble1.Options{Comparer: &c, FormatMajorVersion: pebble1.FormatNewest, Logger: quietLogger{}}
			o.Levels = []pebble1.LevelOptions{{FilterPolicy: bloom1.FilterPolicy(10)}}
			db, err := pebble1.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			write(t, func(k, v []byte) { _ = db.Set(k, v, nil) }, func() { _ = db.Flush() })
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
		"pebble2": func(t *testing.T, dir string) {
			c := *pebble.DefaultComparer
			c.Split = prefixSplit
			c.Separator, c.Successor = keepSeparator, keepSuccessor
			o := &pebble.Options{Comparer: &c, Logger: quietLogger{}}
			bloomPolicy(o)
			db, err := pebble.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			write(t, func(k, v []byte) { _ = db.Set(k, v, nil) }, func() { _ = db.Flush() })
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, build := range stores {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			build(t, dir)
			h := hashDir(t, dir)
			code, out, stderr := runCLI("migrate", "-bits", "10", "-quiet", "-format", name, dir)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "holds key prefixes") || !strings.Contains(stderr, "last 3 bytes") {
				t.Fatalf("exit %d: %q\n%s", code, stderr, out)
			}
			if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
				t.Fatal("a refused migration changed the store")
			}
		})
	}
}

// A manifest damaged in the middle reads, to Pebble, as one a crash cut
// short: the tables its lost records list look obsolete, and a read-write
// open deletes them. migrate must refuse such a store, in both Pebbles,
// and change nothing, instead of compacting what is left.
func TestMigrateRefusesDamagedManifest(t *testing.T) {
	stores := map[string]func(t *testing.T, dir string){
		"pebble1": func(t *testing.T, dir string) {
			buildV1Store(t, dir, 3000, pebble1.FormatNewest, gethBloom, gethBloom)
		},
		"pebble2": func(t *testing.T, dir string) {
			buildStore(t, dir, storeSpec{keys: 3000, policy: bloomPolicy})
		},
	}
	for name, build := range stores {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			build(t, dir)
			manifest, err := pebblestore.CurrentManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, manifest)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The second record's payload: its checksum fails, and Pebble
			// reads only the first record, a snapshot of the tables of
			// an older version.
			second := 7 + (int(b[4]) | int(b[5])<<8)
			if second+12 > len(b) {
				t.Fatalf("%s holds one record", manifest)
			}
			b[second+10] ^= 0xff
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			h := hashDir(t, dir)
			code, out, stderr := runCLI("migrate", "-bits", "10", "-quiet", "-format", name, dir)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "is damaged after its record") {
				t.Fatalf("exit %d: %q\n%s", code, stderr, out)
			}
			if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
				t.Fatal("a refused migration changed the store")
			}
			// inspect reports what it read, and says, with exit 2, that
			// the figures miss the tables the manifest lost.
			code, out, stderr = runCLI("inspect", "-probes", "10", dir)
			if code != 2 || !strings.Contains(stderr, "miss tables") || !strings.Contains(out, "DAMAGED manifest") {
				t.Fatalf("inspect: exit %d: %q\n%s", code, stderr, out)
			}
		})
	}
}

// flipNamesV1 and flipNames are lsmcuckoo policies whose name alternates
// between two budgets at each call, as a self-tuning level's does when a
// refit lands between Pebble's two calls as it finishes a table: the
// metaindex key names one budget, the properties the other.
type flipNamesV1 struct {
	pebble1.FilterPolicy
	calls *atomic.Int64
}

func (p flipNamesV1) Name() string {
	return pebblev1.NewPolicy(10 + 2*float64(p.calls.Add(1)%2)).Name()
}

type flipNames struct {
	pebble.FilterPolicy
	calls *atomic.Int64
}

func (p flipNames) Name() string {
	return tablefilter.NewPolicy(10 + 2*float64(p.calls.Add(1)%2)).Name()
}

// A table whose metaindex and properties name two lsmcuckoo budgets is
// read filtered by Pebble, through the metaindex key: inspect reads it too,
// and does not report it damaged.
func TestInspectFilterNamedTwice(t *testing.T) {
	stores := map[string]func(t *testing.T, dir string){
		"pebble1": func(t *testing.T, dir string) {
			o := &pebble1.Options{Logger: quietLogger{}}
			o.Levels = []pebble1.LevelOptions{{FilterPolicy: flipNamesV1{pebblev1.NewPolicy(10), new(atomic.Int64)}}}
			db, err := pebble1.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2000; i++ {
				_ = db.Set(key(i), value(i, 8), nil)
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
		"pebble2": func(t *testing.T, dir string) {
			o := &pebble.Options{Logger: quietLogger{}}
			for l := range o.Levels {
				o.Levels[l].FilterPolicy = flipNames{tablefilter.NewPolicy(10), new(atomic.Int64)}
			}
			db, err := pebble.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2000; i++ {
				_ = db.Set(key(i), value(i, 8), nil)
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, build := range stores {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			build(t, dir)
			r := inspectJSON(t, dir, "-probes", "200")
			if len(r.Damaged) > 0 {
				t.Fatalf("damaged: %+v", r.Damaged)
			}
			// The filter block was found and probed.
			if lv := r.Levels[0]; lv.Tables == 0 || lv.FilterBytes == 0 || lv.Unprobed != 0 || lv.FPR > 0.05 {
				t.Fatalf("L0: %+v", r.Levels[0])
			}
		})
	}
}
