package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// runCLI runs the command and returns its exit status and streams.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageAndBadInput(t *testing.T) {
	empty := t.TempDir()
	notStore := t.TempDir()
	if err := os.WriteFile(filepath.Join(notStore, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	buildStore(t, store, storeSpec{keys: 3000, policy: bloomPolicy})
	for _, c := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"inspect"}, 2, "missing DIR"},
		{[]string{"inspect", "-h"}, 0, "Usage: lsmcuckoo inspect"},
		{[]string{"migrate", "-h"}, 0, "Usage: lsmcuckoo migrate"},
		{[]string{"inspect", "-nosuchflag", store}, 2, "flag provided but not defined"},
		{[]string{"inspect", filepath.Join(empty, "nope")}, 2, "no such directory"},
		{[]string{"inspect", empty}, 2, "empty directory"},
		{[]string{"inspect", notStore}, 2, "not a Pebble store"},
		{[]string{"inspect", store, store}, 2, "one DIR expected"},
		{[]string{"inspect", "-path", "scan", store}, 2, "-path"},
		{[]string{"inspect", "-bits", "0.5", store}, 2, "budgets are 1..64"},
		{[]string{"inspect", "-bits", "65", store}, 2, "budgets are 1..64"},
		{[]string{"inspect", "-bits", "2", store}, 2, "at least 4"},
		{[]string{"inspect", "-probes", "0", store}, 2, "-probes"},
		{[]string{"migrate", store}, 2, "-bits is required"},
		{[]string{"migrate", "-bits", "100", store}, 2, "budgets are 1..64"},
		{[]string{"migrate", "-bits", "10", empty}, 2, "empty directory"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
		if c.args != nil && c.code == 2 && strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: the error is not one line: %q", c.args, stderr)
		}
	}
	if code, out, _ := runCLI("-h"); code != 0 || !strings.Contains(out, "inspect") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
}

// damageable is a table file with a filter, and its filter block's offset.
type damageable struct {
	path         string
	filterOffset uint64
}

// tableFiles lists the store's tables that have filters, lowest level first.
func tableFiles(t *testing.T, dir string) []damageable {
	t.Helper()
	return tableFilesOf(t, dir, pebblestore.Open)
}

// tableFilesOf is tableFiles with the snapshot taken by open.
func tableFilesOf(t *testing.T, dir string, open func(string) (*pebblestore.Snapshot, error)) []damageable {
	t.Helper()
	s, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []damageable
	for l := len(s.Levels) - 1; l >= 0; l-- {
		for _, tb := range s.Levels[l] {
			if len(tb.Filter) > 0 {
				files = append(files, damageable{filepath.Join(dir, fmt.Sprintf("%06d.sst", tb.FileNum)), tb.FilterOffset})
			}
		}
	}
	if len(files) < 2 {
		t.Fatalf("want at least two tables with filters, got %d", len(files))
	}
	return files
}

// A damaged table is reported as damaged, the rest of the store still is,
// and the exit status is 2 with a one-line error.
func TestInspectDamage(t *testing.T) {
	checkDamage(t, func(t *testing.T, dir string) []damageable {
		buildStore(t, dir, storeSpec{keys: 30000, policy: bloomPolicy})
		return tableFiles(t, dir)
	})
}

// checkDamage damages a table of the store build makes, in each way, and
// checks inspect's report and exit status.
func checkDamage(t *testing.T, build func(t *testing.T, dir string) []damageable) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, d damageable)
		want   string
	}{
		{"truncated", func(t *testing.T, d damageable) {
			p := d.path
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, ".sst"},
		{"filter-flipped", func(t *testing.T, d damageable) {
			// Flip a byte of the filter block: its checksum fails.
			b, err := os.ReadFile(d.path)
			if err != nil {
				t.Fatal(err)
			}
			b[d.filterOffset+3] ^= 0x40
			if err := os.WriteFile(d.path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "checksum"},
		{"missing", func(t *testing.T, d damageable) {
			if err := os.Remove(d.path); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := build(t, dir)
			c.damage(t, files[0])
			code, out, stderr := runCLI("inspect", "-probes", "500", dir)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and one line with %q", code, stderr, c.want)
			}
			if !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "rocksdb.BuiltinBloomFilter") {
				t.Fatalf("report does not show the damage and the rest:\n%s", out)
			}
		})
	}
}

// A store Pebble v2.1.7 cannot open: a format major version from the future.
func futureFormat(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "marker.format-version.") {
			parts := strings.Split(e.Name(), ".")
			parts[len(parts)-1] = "999"
			if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, strings.Join(parts, "."))); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("no format marker")
}

func TestInspectUnopenableFormat(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 3000, policy: bloomPolicy})
	futureFormat(t, dir)
	code, _, stderr := runCLI("inspect", dir)
	if code != 2 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, %q", code, stderr)
	}
}
