package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/dgraph-io/badger/v4"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/advice"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// writerLoop is the child process that owns a Pebble v2 store (ownerLoop).
func writerLoop(dir string) {
	o := testOptions()
	bloomPolicy(o)
	o.DisableAutomaticCompactions = true
	db, err := pebble.Open(dir, o)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	ownerLoop(dir, ownedV2{db})
}

// ownedStore is the store an owner child writes: Pebble v1 or v2.
type ownedStore interface {
	set(k, v []byte)
	flush()
	compact(start, end []byte)
}

type ownedV2 struct{ *pebble.DB }

func (db ownedV2) set(k, v []byte)           { _ = db.Set(k, v, pebble.NoSync) }
func (db ownedV2) flush()                    { _ = db.Flush() }
func (db ownedV2) compact(start, end []byte) { _ = db.Compact(context.Background(), start, end, true) }

// ownerLoop holds the store open, says READY, then obeys its standard
// input line by line: "write" writes a batch of keys, flushes, waits until
// its background work has settled and says OK; "burst" says OK and then
// writes, flushes and compacts without pause until the process is killed.
// Compactions run only when it asks, so that an idle owner leaves the
// directory alone.
func ownerLoop(dir string, db ownedStore) {
	next := 1_000_000
	write := func() {
		for i := 0; i < 3000; i++ {
			db.set(key(next), value(next, 48))
			next++
		}
		db.flush()
	}
	settle(dir)
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "write":
			write()
			settle(dir)
			fmt.Println("OK")
		case "burst":
			fmt.Println("OK")
			for n := 0; ; n++ {
				write()
				if n%3 == 2 {
					db.compact(key(0), key(next))
				}
			}
		}
	}
	os.Exit(0)
}

// settle waits until the directory's listing stops changing: the owner's
// deletions of obsolete files run in the background.
func settle(dir string) {
	list := func() string {
		ents, _ := os.ReadDir(dir)
		var b strings.Builder
		for _, e := range ents {
			info, _ := e.Info()
			if info != nil {
				fmt.Fprintf(&b, "%s %d %v;", e.Name(), info.Size(), info.ModTime())
			}
		}
		return b.String()
	}
	prev := list()
	for stable := 0; stable < 3; {
		time.Sleep(50 * time.Millisecond)
		if cur := list(); cur == prev {
			stable++
		} else {
			prev, stable = cur, 0
		}
	}
}

// owner is a writer child process holding a store.
type owner struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

func startOwner(t *testing.T, dir string) *owner {
	t.Helper()
	return startOwnerAs(t, dir, "writer")
}

// startOwnerAs starts the child process of the role (writer: Pebble v2,
// writer1: Pebble v1) on dir.
func startOwnerAs(t *testing.T, dir, role string) *owner {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+role, envDir+"="+dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &owner{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	o.expect(t, "READY")
	return o
}

func (o *owner) expect(t *testing.T, want string) {
	t.Helper()
	if !o.lines.Scan() || o.lines.Text() != want {
		t.Fatalf("owner said %q, want %q", o.lines.Text(), want)
	}
}

func (o *owner) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := fmt.Fprintln(o.in, cmd); err != nil {
		t.Fatal(err)
	}
	o.expect(t, "OK")
}

// pebbleView is what Pebble itself says about the store's levels.
type pebbleView struct {
	tables, keys, filterBytes, tableBytes [pebblestore.NumLevels]uint64
	families                              [pebblestore.NumLevels]map[string]int
	sublevels                             int
}

func viewOf(t *testing.T, dir string) pebbleView {
	t.Helper()
	o := testOptions()
	pebblestore.ReadFilters(o)
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
	m := db.Metrics()
	var v pebbleView
	v.sublevels = len(db.DebugCurrentVersion().L0SublevelFiles)
	for l, infos := range levels {
		for _, info := range infos {
			v.add(l, info.Properties.NumEntries, info.Properties.FilterSize, info.Properties.FilterPolicyName)
		}
		if uint64(m.Levels[l].TablesCount) != v.tables[l] {
			t.Fatalf("L%d: Metrics has %d tables, SSTables %d", l, m.Levels[l].TablesCount, v.tables[l])
		}
		v.tableBytes[l] = uint64(m.Levels[l].TablesSize)
	}
	return v
}

// add counts a table of level l, from either Pebble's properties.
func (v *pebbleView) add(l int, entries, filterSize uint64, filter string) {
	if v.families[l] == nil {
		v.families[l] = map[string]int{}
	}
	if filter == "" {
		filter = pebblestore.NoneName
	}
	v.tables[l]++
	v.keys[l] += entries
	v.filterBytes[l] += filterSize
	v.families[l][filter]++
}

// checkAgainstPebble compares inspect's figures with Pebble's own.
func checkAgainstPebble(t *testing.T, r *advice.Report, v pebbleView) {
	t.Helper()
	if r.Format != "pebble" || len(r.Levels) != pebblestore.NumLevels {
		t.Fatalf("format %q, %d levels", r.Format, len(r.Levels))
	}
	populated := 0
	for l, lv := range r.Levels {
		if lv.Level != l || uint64(lv.Tables) != v.tables[l] || lv.Keys != v.keys[l] ||
			lv.FilterBytes != v.filterBytes[l] || lv.TableBytes != v.tableBytes[l] {
			t.Errorf("L%d: inspect tables %d keys %d filter %d bytes %d; pebble %d %d %d %d", l,
				lv.Tables, lv.Keys, lv.FilterBytes, lv.TableBytes, v.tables[l], v.keys[l], v.filterBytes[l], v.tableBytes[l])
		}
		if fmt.Sprint(lv.Families) != fmt.Sprint(v.families[l]) {
			t.Errorf("L%d: families %v, pebble %v", l, lv.Families, v.families[l])
		}
		if lv.Tables > 0 {
			populated++
		}
	}
	if r.Levels[0].Tables > 0 && r.Levels[0].Sublevels != v.sublevels {
		t.Errorf("L0 sublevels %d, pebble %d", r.Levels[0].Sublevels, v.sublevels)
	}
	if populated < 2 {
		t.Fatalf("the test store has %d populated levels; the test wants a tree", populated)
	}
}

func TestInspectBloomMatchesPebble(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 60000, policy: bloomPolicy})
	r := inspectJSON(t, dir)
	checkAgainstPebble(t, r, viewOf(t, dir))
	for _, lv := range r.Levels {
		// Pebble's 10-bit bloom filter: about 1%.
		if lv.Tables > 0 && (lv.FPR < 0.002 || lv.FPR > 0.03 || lv.Probes != 4000*lv.Tables) {
			t.Errorf("L%d: bloom FPR %.4f over %d probes", lv.Level, lv.FPR, lv.Probes)
		}
	}
	checkReads(t, r)
	if r.Recommendation.FilterBytes > r.FilterBytes*11/10 {
		t.Errorf("same-memory recommendation takes %d bytes, the store's filters %d", r.Recommendation.FilterBytes, r.FilterBytes)
	}
	if r.Saving.FilterBytes >= r.FilterBytes || r.Saving.ReadsGet > r.ReadsGet {
		t.Errorf("same-reads option: %d bytes, %.4f reads; now %d bytes, %.4f reads", r.Saving.FilterBytes, r.Saving.ReadsGet, r.FilterBytes, r.ReadsGet)
	}
	if !strings.Contains(strings.Join(r.GoLines, "\n"), `opts.Filters["rocksdb.BuiltinBloomFilter"] = bloom.FilterPolicy(10)`) {
		t.Errorf("Go lines do not register the bloom filter:\n%s", strings.Join(r.GoLines, "\n"))
	}
}

// checkReads recomputes the read-path model from the levels.
func checkReads(t *testing.T, r *advice.Report) {
	t.Helper()
	var get, seek float64
	for _, lv := range r.Levels {
		if lv.Tables == 0 {
			continue
		}
		runs := 1.0
		if lv.Level == 0 {
			runs = float64(lv.Sublevels)
		}
		if lv.Level < 6 {
			get += runs * lv.FPR
		}
		seek += runs * lv.FPR
	}
	if math.Abs(get-r.ReadsGet) > 1e-9 || math.Abs(seek-r.ReadsSeek) > 1e-9 {
		t.Errorf("reads get %.6f seek %.6f, levels give %.6f %.6f", r.ReadsGet, r.ReadsSeek, get, seek)
	}
}

func TestInspectNoFilters(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 40000, policy: noPolicy})
	r := inspectJSON(t, dir)
	checkAgainstPebble(t, r, viewOf(t, dir))
	want := 0.0
	for _, lv := range r.Levels {
		if lv.Tables == 0 {
			continue
		}
		if lv.FPR != 1 || lv.FilterBytes != 0 || lv.Unprobed != lv.Tables {
			t.Errorf("L%d without filters: FPR %v, %d filter bytes, %d unprobed", lv.Level, lv.FPR, lv.FilterBytes, lv.Unprobed)
		}
		if lv.Level == 0 {
			want += float64(lv.Sublevels)
		} else if lv.Level < 6 {
			want++
		}
	}
	if r.ReadsGet != want {
		t.Errorf("reads per absent Get %v, want one per table consulted: %v", r.ReadsGet, want)
	}
	if r.Recommendation.ReadsGet >= r.ReadsGet {
		t.Errorf("recommendation reads %v, no better than none", r.Recommendation.ReadsGet)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", "-fail-unfiltered", dir}, &out, &errb); code != 1 {
		t.Errorf("-fail-unfiltered on a store without filters: exit %d, %s", code, errb.String())
	}
	// A table written without a filter is "none", not an unknown name.
	if !strings.Contains(out.String(), "none (") || strings.Contains(out.String(), "unknown") {
		t.Errorf("tables without filters are not shown as none:\n%s", out.String())
	}
}

func TestInspectLsmcuckoo(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy func(*pebble.Options)
	}{{"uniform", uniformPolicy(10)}, {"levels", levelPolicy}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			buildStore(t, dir, storeSpec{keys: 60000, policy: c.policy})
			r := inspectJSON(t, dir)
			checkAgainstPebble(t, r, viewOf(t, dir))
			checkReads(t, r)
			for _, lv := range r.Levels {
				if lv.Tables == 0 || lv.Keys < 1000*uint64(lv.Tables) {
					continue // tables of a range deletion and a few keys
				}
				for name := range lv.Families {
					b, ok := pebblestore.LsmcuckooBudget(name)
					if !ok {
						t.Fatalf("L%d: family %q is not lsmcuckoo", lv.Level, name)
					}
					// The measured rate of each level's filters agrees with
					// the codec's plan within sampling noise and the spread
					// of table sizes.
					planned := codec.PlannedFPR(codec.Options{BitsPerKey: b}, int(lv.Keys)/lv.Tables)
					if lv.FilterFPR > 3*planned+0.002 || lv.FilterFPR < planned/3-0.002 {
						t.Errorf("L%d %s: measured %.5f, planned %.5f", lv.Level, name, lv.FilterFPR, planned)
					}
				}
			}
			if c.name == "uniform" && !strings.Contains(strings.Join(r.GoLines, "\n"), "tablefilter.RegisterPolicies(opts, 10)") {
				t.Errorf("Go lines miss the store's budget:\n%s", strings.Join(r.GoLines, "\n"))
			}
		})
	}
}

// A store whose policy changed: bloom, then lsmcuckoo at 12 bits.
func TestInspectMixedFamilies(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 40000, policy: bloomPolicy})
	o := testOptions()
	uniformPolicy(12)(o)
	o.DisableAutomaticCompactions = true // keep the bloom tables as they are
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, storeSpec{seed: 2}, 40000, 43000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := inspectJSON(t, dir, "-path", "seek")
	checkAgainstPebble(t, r, viewOf(t, dir))
	seen := map[string]bool{}
	for _, lv := range r.Levels {
		for n := range lv.Families {
			seen[n] = true
		}
	}
	if !seen[pebblestore.BloomName] || !seen[tablefilter.NewPolicy(12).Name()] {
		for _, lv := range r.Levels {
			t.Logf("L%d %v", lv.Level, lv.Families)
		}
		t.Fatalf("families %v: want both bloom and lsmcuckoo 12", seen)
	}
	lines := strings.Join(r.GoLines, "\n")
	for _, want := range []string{"tablefilter.RegisterPolicies(opts, 12)", "bloom.FilterPolicy(10)", "SetLevelBudgets"} {
		if !strings.Contains(lines, want) {
			t.Errorf("Go lines miss %q:\n%s", want, lines)
		}
	}
	if r.Path != "seek" || r.Recommendation.LevelBits[6] == 0 {
		t.Errorf("fitted to seek, L6 must keep a filter: %v", r.Recommendation.LevelBits)
	}
}

// An unknown filter name is reported as such, and the table counts as
// unfiltered.
func TestInspectUnknownFilter(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	for l := range o.Levels {
		o.Levels[l].FilterPolicy = renamedBloom{}
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, storeSpec{}, 0, 5000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := inspectJSON(t, dir)
	var lv advice.Level
	for _, lv = range r.Levels {
		if lv.Tables > 0 {
			break
		}
	}
	if lv.Families["acme.filter"] != lv.Tables || lv.FPR != 1 || lv.Unprobed != lv.Tables {
		t.Fatalf("unknown filter: %+v", lv)
	}
	if !strings.Contains(strings.Join(r.GoLines, "\n"), `"acme.filter"`) {
		t.Errorf("Go lines do not name the unknown filter: %v", r.GoLines)
	}
}

type renamedBloom struct{}

func (renamedBloom) Name() string { return "acme.filter" }
func (renamedBloom) MayContain(ft pebble.FilterType, f, k []byte) bool {
	return bloom.FilterPolicy(10).MayContain(ft, f, k)
}
func (renamedBloom) NewWriter(ft pebble.FilterType) pebble.FilterWriter {
	return bloom.FilterPolicy(10).NewWriter(ft)
}

// Inspect writes nothing into the store: not when it is closed, not while
// another process holds it open, idle or writing.
func TestInspectReadOnly(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 30000, policy: bloomPolicy})
	same := func(what string) {
		t.Helper()
		before := hashDir(t, dir)
		r := inspectJSON(t, dir)
		if r.Keys == 0 {
			t.Fatalf("%s: inspect saw no keys", what)
		}
		after := hashDir(t, dir)
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("%s: inspect changed the store:\nbefore %v\nafter  %v", what, before, after)
		}
	}
	same("closed store")

	own := startOwner(t, dir)
	own.send(t, "write") // a table flushed and a memtable in the owner
	same("store held by an idle owner")

	// While the owner flushes and compacts, inspect still answers.
	own.send(t, "burst")
	for i := 0; i < 3; i++ {
		var out, errb bytes.Buffer
		if code := run([]string{"inspect", "-probes", "200", dir}, &out, &errb); code != 0 {
			t.Fatalf("inspect during writes: exit %d: %s", code, errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
}

// A store written under a comparer of its own, with a Split: inspect opens
// it under the recorded name, says the filters hold prefixes, and its
// figures still match Pebble's.
func TestInspectOwnComparer(t *testing.T) {
	dir := t.TempDir()
	cmp := *pebble.DefaultComparer
	cmp.Name = "acme.versioned"
	cmp.Split = func(k []byte) int {
		if i := bytes.IndexByte(k, '@'); i >= 0 {
			return i
		}
		return len(k)
	}
	o := testOptions()
	o.Comparer = &cmp
	uniformPolicy(10)(o)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for i := 0; i < 20000; i++ {
		for v := 1; v <= 3; v++ {
			_ = b.Set([]byte(fmt.Sprintf("%s@%d", key(i), v)), []byte("v"), nil)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := inspectJSON(t, dir)
	if r.Comparer != "acme.versioned" || !strings.Contains(strings.Join(r.Notes, " "), "prefixes") {
		t.Fatalf("comparer %q, notes %v", r.Comparer, r.Notes)
	}
	if r.Keys != 60000 || r.FilterBytes == 0 {
		t.Fatalf("keys %d, filter bytes %d", r.Keys, r.FilterBytes)
	}
	// Each prefix is in the filter once: three entries a prefix, so about
	// a third of the budget per entry.
	for _, lv := range r.Levels {
		if lv.Tables > 0 && lv.Keys > 1000 && (lv.BitsPerKey < 2 || lv.BitsPerKey > 5) {
			t.Errorf("L%d: %.2f filter bits per entry, want about 10/3", lv.Level, lv.BitsPerKey)
		}
	}
}

// A Badger directory is detected and reported with Badger's read path: every
// L0 table and one table on each other level, the last included.
func TestInspectBadger(t *testing.T) {
	dir := t.TempDir()
	opt := badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(1 << 20).
		WithBaseTableSize(256 << 10).WithBaseLevelSize(1 << 20).WithValueThreshold(1 << 10).WithSyncWrites(false)
	db, err := badger.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	for i := 0; i < 100000; i++ {
		if err := wb.Set(key(i*7919%100000), make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	h := hashDir(t, dir)
	r := inspectJSON(t, dir)
	if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
		t.Fatal("inspect changed the Badger directory")
	}
	if r.Format != "badger" || r.Keys == 0 || r.FilterBytes == 0 {
		t.Fatalf("format %q, %d keys, %d filter bytes", r.Format, r.Keys, r.FilterBytes)
	}
	var get float64
	for _, lv := range r.Levels {
		if lv.Tables == 0 {
			continue
		}
		if lv.Families["badger.bloom"] != lv.Tables {
			t.Errorf("L%d families %v", lv.Level, lv.Families)
		}
		runs := 1.0
		if lv.Level == 0 {
			runs = float64(lv.Tables)
		}
		get += runs * lv.FPR
	}
	if math.Abs(get-r.ReadsGet) > 1e-9 || r.ReadsSeek != r.ReadsGet {
		t.Errorf("reads get %v seek %v, want %v for both", r.ReadsGet, r.ReadsSeek, get)
	}
	if code, _, stderr := runCLI("migrate", "-bits", "10", dir); code != 2 || !strings.Contains(stderr, "Pebble stores only") {
		t.Errorf("migrate on Badger: exit %d, %q", code, stderr)
	}
}
