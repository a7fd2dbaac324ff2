package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// readOptions opens a store with every filter this command knows.
func readOptions() *pebble.Options {
	o := testOptions()
	pebblestore.ReadFilters(o)
	return o
}

// checkMigrated checks every table carries want(level) and no range-key
// unset (the migration's marker) is left behind.
func checkMigrated(t *testing.T, dir string, want func(level int) string) {
	t.Helper()
	o := readOptions()
	o.ReadOnly = true
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	var tables []migratedTable
	for l, infos := range levels {
		for _, info := range infos {
			tables = append(tables, migratedTable{l, info.FileNum.String(), info.Properties.FilterPolicyName, info.Properties.NumRangeKeyUnsets})
		}
	}
	checkMigratedTables(t, tables, want)
}

// migratedTable is what checkMigratedTables reads of a table, from either
// Pebble.
type migratedTable struct {
	level  int
	num    string
	filter string
	unsets uint64 // range-key unsets
}

// checkMigratedTables checks every table carries want(level) and no
// range-key unset (the migration's marker).
func checkMigratedTables(t *testing.T, tables []migratedTable, want func(level int) string) {
	t.Helper()
	for _, tb := range tables {
		if tb.filter != want(tb.level) {
			t.Errorf("L%d table %s: filter %q, want %q", tb.level, tb.num, tb.filter, want(tb.level))
		}
		if tb.unsets != 0 {
			t.Errorf("L%d table %s keeps %d range-key unsets", tb.level, tb.num, tb.unsets)
		}
	}
	if len(tables) == 0 {
		t.Fatal("no tables")
	}
}

func TestMigrateUniform(t *testing.T) {
	race.SkipLong(t)
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 60000, policy: bloomPolicy})
	before := contents(t, dir, readOptions())
	code, out, stderr := runCLI("migrate", "-bits", "12", "-quiet", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"Before:", "After:", "opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(12)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	name := tablefilter.NewPolicy(12).Name()
	checkMigrated(t, dir, func(int) string { return name })
	if after := contents(t, dir, readOptions()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("contents changed: %d entries before, %d after", len(before), len(after))
	}
	// Keys a range deletion covered stay deleted, the range key stays.
	db, err := pebble.Open(dir, readOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := db.Get(key(15)); err != pebble.ErrNotFound {
		t.Errorf("a key under the range deletion reads back: %v", err)
	}
	if !strings.Contains(fmt.Sprint(before), `R ["user000000030","user000000040") ""="rk"`) {
		t.Errorf("the range key is not in the contents")
	}
}

func TestMigrateLevels(t *testing.T) {
	race.SkipLong(t)
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 60000, policy: noPolicy})
	before := contents(t, dir, readOptions())
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	budgets := tablefilter.LevelBudgets(shapeOf(s), 10)
	code, out, stderr := runCLI("migrate", "-bits", "10", "-levels", "-quiet", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	if !strings.Contains(out, "tablefilter.SetLevelBudgets(opts, [7]float64{") {
		t.Errorf("no SetLevelBudgets line:\n%s", out)
	}
	checkMigrated(t, dir, func(l int) string { return tablefilter.NewPolicy(budgets[l]).Name() })
	if after := contents(t, dir, readOptions()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("contents changed")
	}
}

func TestMigrateRefuses(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		dir := t.TempDir()
		buildStore(t, dir, storeSpec{keys: 5000, policy: bloomPolicy})
		h := hashDir(t, dir)
		code, out, stderr := runCLI("migrate", "-bits", "10", "-reserve", "1000000000000000000", dir)
		if code != 2 || !strings.Contains(stderr, "too little free disk") || !strings.Contains(out, "needs up to") {
			t.Fatalf("exit %d: %s\n%s", code, stderr, out)
		}
		if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
			t.Fatal("a refused migration changed the store")
		}
	})
	// A reserve near 2^64 must not wrap the estimate round to a small
	// figure that lets the rewrite start.
	t.Run("disk-huge-reserve", func(t *testing.T) {
		dir := t.TempDir()
		buildStore(t, dir, storeSpec{keys: 5000, policy: bloomPolicy})
		h := hashDir(t, dir)
		code, out, stderr := runCLI("migrate", "-bits", "10", "-quiet", "-reserve", "18446744073709551615", dir)
		if code != 2 || !strings.Contains(stderr, "too little free disk") {
			t.Fatalf("exit %d: %s\n%s", code, stderr, out)
		}
		if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
			t.Fatal("a refused migration changed the store")
		}
	})
	t.Run("format", func(t *testing.T) {
		dir := t.TempDir()
		buildStore(t, dir, storeSpec{keys: 5000, policy: bloomPolicy})
		futureFormat(t, dir)
		h := hashDir(t, dir)
		code, _, stderr := runCLI("migrate", "-bits", "10", dir)
		if code != 2 || !strings.Contains(stderr, "refused") || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("exit %d: %q", code, stderr)
		}
		if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
			t.Fatal("a refused migration changed the store")
		}
	})
	t.Run("locked", func(t *testing.T) {
		dir := t.TempDir()
		buildStore(t, dir, storeSpec{keys: 5000, policy: bloomPolicy})
		own := startOwner(t, dir)
		own.send(t, "write")
		h := hashDir(t, dir)
		code, _, stderr := runCLI("migrate", "-bits", "10", dir)
		if code != 2 || !strings.Contains(stderr, "held by another process") {
			t.Fatalf("exit %d: %q", code, stderr)
		}
		if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
			t.Fatal("a refused migration changed the store")
		}
	})
}

// A migration killed mid-compaction leaves a store that opens with all its
// data, and a second run finishes the job.
func TestMigrateKilled(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 60000, policy: bloomPolicy})
	before := contents(t, dir, readOptions())

	killMidMigration(t, dir)
	if after := contents(t, dir, readOptions()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after SIGKILL: %d entries, before %d", len(after), len(before))
	}
	code, out, errs := runCLI("migrate", "-bits", "11", "-quiet", dir)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s\n%s", code, errs, out)
	}
	name := tablefilter.NewPolicy(11).Name()
	checkMigrated(t, dir, func(int) string { return name })
	if after := contents(t, dir, readOptions()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("contents changed after the second run")
	}
}

// killMidMigration runs migrate -bits=11 on dir in a child process and
// kills it with SIGKILL when the rewrite creates its first table.
func killMidMigration(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "migrate", "-bits="+"11", dir)
	// The last three arguments are the command's: migrate -bits=11 DIR.
	cmd.Env = append(os.Environ(), envChild+"=migrate-stall")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stalled := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			if sc.Text() == "STALLED" {
				stalled <- true
				return
			}
		}
		stalled <- false
	}()
	select {
	case ok := <-stalled:
		if !ok {
			_ = cmd.Wait()
			t.Fatal("the migration ended without creating a table")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the migration did not start compacting")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

}

// A table whose data block is damaged (which the checks before the rewrite
// do not read) stops the rewrite with a one-line error naming the table and
// exit status 2, not a panic.
func TestMigrateDamagedDataBlock(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 30000, policy: bloomPolicy})
	var largest string
	var size int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if st, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".sst") && st.Size() > size {
			largest, size = filepath.Join(dir, e.Name()), st.Size()
		}
	}
	b, err := os.ReadFile(largest)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0x55 // inside the first data block
	if err := os.WriteFile(largest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI("migrate", "-bits", "10", "-quiet", dir)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, filepath.Base(largest)) {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, out)
	}
}

// A fatal error inside Pebble during the rewrite ends the command with one
// line and exit status 2, not a stack dump.
func TestMigrateFatalIsOneLine(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=fatal")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.Contains(stderr.String(), "no space left on device") {
		t.Fatalf("%v, stderr %q", err, stderr.String())
	}
}

// migrate's -probes has inspect's limits: no probes would print NaN or 0%
// rates in the summaries, and the usage mistake is refused before anything.
func TestMigrateProbesRange(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 3000, policy: bloomPolicy})
	h := hashDir(t, dir)
	for _, p := range []string{"0", "-3"} {
		code, out, stderr := runCLI("migrate", "-bits", "10", "-quiet", "-probes", p, dir)
		if code != 2 || !strings.Contains(stderr, "-probes") || out != "" {
			t.Errorf("-probes %s: exit %d, %q\n%s", p, code, stderr, out)
		}
	}
	if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
		t.Fatal("a refused migration changed the store")
	}
}

// A LOCK file that cannot be opened for writing (immutable here) is not
// blamed on another process.
func TestMigrateLockUnwritable(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 3000, policy: bloomPolicy})
	lock := filepath.Join(dir, "LOCK")
	if err := exec.Command("chattr", "+i", lock).Run(); err != nil {
		t.Skipf("chattr +i: %v", err)
	}
	defer exec.Command("chattr", "-i", lock).Run()
	code, _, stderr := runCLI("migrate", "-bits", "10", "-quiet", dir)
	if code != 2 || strings.Contains(stderr, "another process") || !strings.Contains(stderr, "LOCK") {
		t.Fatalf("exit %d: %q", code, stderr)
	}
}
