package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/internal/terminal"
)

// quick keeps a comparison's timings short: the tests check what is
// measured and reported, not how fast.
var quick = []string{"-reps", "1", "-lookups", "2000", "-cold-mib", "1", "-probes", "4000", "-quiet"}

func writeLines(t *testing.T, dir, name string, lines []string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// compareJSON runs compare with -out and decodes results.json.
func compareJSON(t *testing.T, args ...string) (*compareReport, string, string) {
	t.Helper()
	out := t.TempDir()
	code, stdout, stderr := runCLI(append(append([]string{"compare", "-out", out}, quick...), args...)...)
	if code != 0 {
		t.Fatalf("compare %v: exit %d\n%s", args, code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r compareReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	checkSchema(t, b)
	return &r, stdout, out
}

// checkSchema checks the field names of results.json that docs/cli.md
// documents, on the raw object.
func checkSchema(t *testing.T, b []byte) {
	t.Helper()
	var raw struct {
		Top     map[string]json.RawMessage
		Keys    map[string]any   `json:"keys"`
		Absent  []map[string]any `json:"absent"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &raw.Top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	has := func(what string, m map[string]any, fields ...string) {
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("results.json: %s has no %q", what, f)
			}
		}
	}
	for _, f := range []string{"processor", "goarch", "keys", "absent", "budgets", "table_keys", "options", "results"} {
		if _, ok := raw.Top[f]; !ok {
			t.Errorf("results.json has no %q", f)
		}
	}
	has("keys", raw.Keys, "source", "encoding", "read", "sampled")
	for _, a := range raw.Absent {
		has("absent", a, "name", "how", "count")
	}
	if len(raw.Results) == 0 {
		t.Fatal("results.json: no results")
	}
	for _, r := range raw.Results {
		has("a result", r, "table_keys", "budget", "role", "family", "kind", "param", "bytes", "bits_per_key", "fpr",
			"build_ns_per_key", "hot_lookup_ns", "cold_lookup_ns", "cold_latency_ns", "false_negatives", "ratio_to_pebble_bloom")
		has("a ratio", r["ratio_to_pebble_bloom"].(map[string]any), "bits_per_key", "fpr", "build", "hot", "cold", "cold_latency")
		for _, f := range r["fpr"].([]any) {
			has("an fpr", f.(map[string]any), "absent", "fpr", "lo95", "hi95", "probes")
		}
	}
}

// The same keys as text, hex and base64 give the same filters, so the same
// sizes and false-positive rates; every family is there at every budget,
// with Pebble's bloom as the ratio's base; the files are written.
func TestCompareKeyFiles(t *testing.T) {
	dir := t.TempDir()
	var text, hx, b64 []string
	for i := 0; i < 3000; i++ {
		k := fmt.Sprintf("order/%06d", 7*i)
		text, hx, b64 = append(text, k), append(hx, hex.EncodeToString([]byte(k))), append(b64, base64.StdEncoding.EncodeToString([]byte(k)))
	}
	hx[5] = strings.ToUpper(hx[5])
	runs := map[string]*compareReport{}
	for enc, args := range map[string][]string{
		"text":   {"-keys", writeLines(t, dir, "keys.txt", text)},
		"hex":    {"-hex", "-keys", writeLines(t, dir, "keys.hex", hx)},
		"base64": {"-base64", "-keys", writeLines(t, dir, "keys.b64", b64)},
	} {
		r, stdout, out := compareJSON(t, append(args, "-bits", "8,12", "-table-keys", "2000")...)
		runs[enc] = r
		if r.Keys.Sampled != 3000 || r.Keys.Lines != 3000 || r.Keys.Encoding != enc || !slices.Equal(r.TableKeys, []int{2000}) || !slices.Equal(r.Budgets, []int{8, 12}) {
			t.Fatalf("%s: keys %+v, table keys %v, budgets %v", enc, r.Keys, r.TableKeys, r.Budgets)
		}
		if r.Processor == "" || len(r.Absent) != 2 || r.Absent[0].Name != "shaped" || r.Absent[1].Name != "random" || r.Absent[0].Count != 4000 {
			t.Fatalf("%s: processor %q, absent %+v", enc, r.Processor, r.Absent)
		}
		for _, f := range []string{"report.md", "fpr-vs-bits-2000.svg", "frontier-2000.svg"} {
			if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
				t.Errorf("%s: %s not written: %v", enc, f, err)
			}
		}
		if !strings.Contains(stdout, "Tables of 2000 keys") || !strings.Contains(stdout, "lsmcuckoo-densest/12") || !strings.Contains(stdout, "lsmcuckoo-v4/12") {
			t.Errorf("%s: the terminal table lacks rows:\n%s", enc, stdout)
		}
		checkRows(t, r)
	}
	// lsmcuckoo draws its placement afresh for every filter, so only its
	// size repeats; the other families are deterministic.
	for _, enc := range []string{"hex", "base64"} {
		for i, row := range runs[enc].Rows {
			want := runs["text"].Rows[i]
			sameRate := strings.HasPrefix(row.Kind, "lsmcuckoo") || row.FPR[0].FPR == want.FPR[0].FPR && row.FPR[1].FPR == want.FPR[1].FPR
			if row.Family != want.Family || row.Bytes != want.Bytes || !sameRate {
				t.Errorf("%s %s: %d bytes, FPR %v; text gave %s %d bytes, FPR %v", enc, row.Family, row.Bytes, row.FPR, want.Family, want.Bytes, want.FPR)
			}
		}
	}
}

// checkRows checks the rows' invariants: each group starts with Pebble's
// bloom at its budget, whose ratios are 1; each budget holds the line-up;
// rates lie in their intervals; no false negative.
func checkRows(t *testing.T, r *compareReport) {
	t.Helper()
	kinds := map[[2]int][]string{} // by table size and budget
	for i, row := range r.Rows {
		if row.FalseNegatives != 0 {
			t.Errorf("%s: %d false negatives", row.Family, row.FalseNegatives)
		}
		if len(row.FPR) != len(r.Absent) || len(row.Ratio.FPR) != len(r.Absent) {
			t.Fatalf("%s: %d rates for %d absent sets", row.Family, len(row.FPR), len(r.Absent))
		}
		for _, f := range row.FPR {
			if f.Probes == 0 || f.FPR < f.Lo || f.FPR > f.Hi || f.Hi > 1 {
				t.Errorf("%s %s: FPR %v outside its interval", row.Family, f.Absent, f)
			}
		}
		if row.BitsPerKey <= 0 || row.BuildNsKey <= 0 || row.HotNs <= 0 || row.ColdNs <= 0 || row.Ratio.BitsPerKey <= 0 || row.Ratio.Hot <= 0 {
			t.Errorf("%s: a figure is missing: %+v", row.Family, row)
		}
		if row.Kind == "pebble-bloom" {
			if row.Family != fmt.Sprintf("pebble-bloom/%d", row.Budget) || row.Ratio.BitsPerKey != 1 || row.Ratio.Build != 1 {
				t.Errorf("%s at budget %d: ratios %+v, want the base", row.Family, row.Budget, row.Ratio)
			}
		} else if i == 0 || r.Rows[i-1].TableKeys != row.TableKeys {
			t.Errorf("%s starts a group", row.Family)
		}
		if row.Role == "budget" {
			at := [2]int{row.TableKeys, row.Budget}
			kinds[at] = append(kinds[at], row.Kind)
			if row.Kind == "binary-fuse" && row.BitsPerKey > float64(row.Budget) {
				t.Errorf("%s: %.2f bits/key does not fit budget %d", row.Family, row.BitsPerKey, row.Budget)
			}
		}
	}
	for _, n := range r.TableKeys {
		for _, b := range r.Budgets {
			want := []string{"pebble-bloom", "badger-bloom", "lsmcuckoo", "lsmcuckoo-densest", "lsmcuckoo-v4", "binary-fuse"}
			if got := kinds[[2]int{n, b}]; !slices.Equal(got, want) {
				t.Errorf("%d keys, budget %d: families %v, want %v", n, b, got, want)
			}
		}
	}
}

// -from samples a Pebble store's keys without writing into it, and takes
// the table sizes from it.
func TestCompareFromPebble(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 12000, policy: bloomPolicy})
	before := hashDir(t, dir)
	r, stdout, _ := compareJSON(t, "-from", dir, "-bits", "10")
	if after := hashDir(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("compare -from changed the store's files")
	}
	// The tables hold every visible key, and the deleted ones their
	// compactions have not dropped yet.
	visible := 0
	for _, c := range contents(t, dir, testOptions()) {
		if strings.HasPrefix(c, "P ") {
			visible++
		}
	}
	if r.Keys.Sampled < visible || r.Keys.Sampled > 12000 || r.Keys.Encoding != "store" || r.Keys.Prefixes {
		t.Fatalf("keys %+v, %d visible keys", r.Keys, visible)
	}
	if len(r.TableKeys) == 0 || r.TableKeys[len(r.TableKeys)-1] > 12000 {
		t.Fatalf("table sizes %v", r.TableKeys)
	}
	if !strings.Contains(stdout, "pebble-bloom/10") {
		t.Fatalf("output:\n%s", stdout)
	}
	checkRows(t, r)
}

// Under a comparer with a Split this command does not know, the filter
// holds prefixes: compare finds the split from the store's filters and
// compares the prefixes.
func TestCompareFromSplitComparer(t *testing.T) {
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
	for i := 0; i < 5000; i++ {
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
	r, _, _ := compareJSON(t, "-from", dir, "-bits", "10", "-table-keys", "4000")
	if r.Keys.Sampled != 5000 || !r.Keys.Prefixes || r.Keys.Comparer != "acme.versioned" {
		t.Fatalf("keys %+v", r.Keys)
	}
	if !strings.Contains(strings.Join(r.Notes, " "), `prefixes (the key before its last '@')`) {
		t.Fatalf("notes %v", r.Notes)
	}
	checkRows(t, r)
}

// A false negative is printed with its key, and the exit status is 1.
func TestCompareFalseNegative(t *testing.T) {
	extraFamily = func(b int) filterbench.Family {
		return filterbench.Family{Name: fmt.Sprintf("broken/%d", b), Kind: "broken", Param: float64(b), Policy: forgetful{}}
	}
	defer func() { extraFamily = nil }()
	keys := writeLines(t, t.TempDir(), "keys.txt", []string{"apple", "banana", "cherry", "damson"})
	code, _, stderr := runCLI(append([]string{"compare", "-keys", keys, "-bits", "10"}, quick...)...)
	if code != 1 || !strings.Contains(stderr, "FALSE NEGATIVE") || !strings.Contains(stderr, `"banana"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// forgetful is a filter that rejects "banana", which it holds.
type forgetful struct{ renamedBloom }

func (forgetful) Name() string { return "forgetful" }
func (forgetful) MayContain(ft pebble.FilterType, f, k []byte) bool {
	return string(k) != "banana"
}

func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	keys := writeLines(t, dir, "keys.txt", []string{"a1", "a2", "a3"})
	empty := writeLines(t, dir, "empty.txt", nil)
	badHex := writeLines(t, dir, "bad.hex", []string{"00ff", "abcd", "0g12"})
	// A 1 GiB line, as a sparse file: the reader must stop at its bound.
	huge := filepath.Join(dir, "huge.txt")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("first\nsecond"); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	notStore := t.TempDir()
	writeLines(t, notStore, "notes.txt", []string{"hello"})
	badgerDir := t.TempDir()
	writeLines(t, badgerDir, "KEYREGISTRY", nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare"}, "give -keys FILE or -from DIR"},
		{[]string{"compare", "-keys", keys, "-from", dir}, "not both"},
		{[]string{"compare", "-keys", keys, "extra"}, "unexpected argument"},
		{[]string{"compare", "-keys", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"compare", "-keys", empty}, "no keys"},
		{[]string{"compare", "-hex", "-keys", badHex}, "bad.hex:3: invalid hex"},
		{[]string{"compare", "-keys", huge}, "huge.txt:2: a line longer than 1048576 bytes"},
		{[]string{"compare", "-keys", keys, "-bits", "0"}, "budgets are whole bits per key in 1..64"},
		{[]string{"compare", "-keys", keys, "-bits", "8,65"}, "budgets are whole bits per key in 1..64"},
		{[]string{"compare", "-keys", keys, "-bits", "9.5"}, "budgets are whole bits per key"},
		{[]string{"compare", "-keys", keys, "-bits", "ten"}, "not a number"},
		{[]string{"compare", "-keys", keys, "-table-keys", "0"}, "-table-keys 0"},
		{[]string{"compare", "-from", notStore}, "not a Pebble store"},
		{[]string{"compare", "-from", badgerDir}, "MANIFEST: no such file"},
		{[]string{"compare", "-keys", keys, "-absent", keys}, "no key absent from the key set"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := runCLI("compare", "-h"); code != 0 || !strings.Contains(stderr, "Usage: lsmcuckoo compare") {
		t.Errorf("compare -h: exit %d, %q", code, stderr)
	}
}

// The FPR plot renders: rsvg-convert reads the SVG bench's plotting code
// wrote.
func TestCompareSVGRenders(t *testing.T) {
	conv, err := exec.LookPath("rsvg-convert")
	if err != nil {
		t.Skip("rsvg-convert is not installed")
	}
	var lines []string
	for i := 0; i < 2000; i++ {
		lines = append(lines, fmt.Sprintf("k%05d", i))
	}
	_, _, out := compareJSON(t, "-keys", writeLines(t, t.TempDir(), "keys.txt", lines), "-bits", "8,16")
	png := filepath.Join(t.TempDir(), "fpr.png")
	if b, err := exec.Command(conv, "-o", png, filepath.Join(out, "fpr-vs-bits-2000.svg")).CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert: %v\n%s", err, b)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Fatalf("png: %v", err)
	}
}

// CockroachDB's comparer is known: its tables' filters hold the MVCC keys
// without their timestamps, and so do the keys compared.
func TestCompareFromCockroachComparer(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.Comparer = &cockroachkvs.Comparer
	o.KeySchema = cockroachkvs.KeySchema.Name
	o.KeySchemas = sstable.MakeKeySchemas(&cockroachkvs.KeySchema)
	bloomPolicy(o)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for i := 0; i < 4000; i++ {
		for v := 1; v <= 2; v++ {
			_ = b.Set(cockroachkvs.EncodeMVCCKey(nil, key(i), uint64(1000+v), 0), []byte("v"), nil)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r, _, _ := compareJSON(t, "-from", dir, "-bits", "10", "-table-keys", "3000")
	if r.Keys.Sampled != 4000 || !r.Keys.Prefixes || r.Keys.Comparer != cockroachkvs.Comparer.Name {
		t.Fatalf("keys %+v", r.Keys)
	}
	if !strings.Contains(strings.Join(r.Notes, " "), "CockroachDB's Split") {
		t.Fatalf("notes %v", r.Notes)
	}
	checkRows(t, r)
}

// compare -from writes nothing into a store another process holds, and
// answers while that process flushes and compacts.
func TestCompareFromHeldStore(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 12000, policy: bloomPolicy})
	own := startOwner(t, dir)
	own.send(t, "write")
	before := hashDir(t, dir)
	r, _, _ := compareJSON(t, "-from", dir, "-bits", "10", "-table-keys", "5000")
	if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(before) {
		t.Fatal("compare -from changed a store held by an idle owner")
	}
	if r.Keys.Sampled < 12000 {
		t.Fatalf("keys %+v: the owner's flushed keys are missing", r.Keys)
	}
	own.send(t, "burst")
	for i := 0; i < 3; i++ {
		code, _, stderr := runCLI(append([]string{"compare", "-from", dir, "-bits", "10", "-table-keys", "2000"}, quick...)...)
		if code != 0 {
			t.Fatalf("compare -from during writes: exit %d: %s", code, stderr)
		}
	}
}

// TestProgressOnlyOnATerminal: the progress bars of compare and migrate
// redraw a line with carriage returns, which in a log file, a pipe or a
// test's buffer is a wall of partial lines, so neither draws one there
// (internal/terminal's test covers a buffer, a file and a pipe), -quiet or
// not; on a real terminal the bar is drawn.
func TestProgressOnlyOnATerminal(t *testing.T) {
	if os.Getenv("LSMCUCKOO_TEST_ON_TERMINAL") == "1" {
		// Run by the part below inside a terminal: the bar is drawn.
		if !terminal.Is(os.Stderr) || newProgress(10, false, os.Stderr).quiet {
			t.Fatal("stderr on a terminal, and compare would draw no progress bar")
		}
		fmt.Fprintln(os.Stderr, "progress bar drawn on the terminal")
		return
	}
	if p := newProgress(10, false, new(bytes.Buffer)); !p.quiet {
		t.Error("compare would draw its progress bar into a buffer")
	}
	// This test again, run by script(1) on a pseudo-terminal.
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) (Debian's bsdutils, util-linux elsewhere) not installed: the terminal half of this test needs a pseudo-terminal; .ci/run installs it")
	}
	cmd := exec.Command(script, "-qec", strconv.Quote(os.Args[0])+" -test.run '^TestProgressOnlyOnATerminal$' -test.v", "/dev/null")
	cmd.Env = append(os.Environ(), "LSMCUCKOO_TEST_ON_TERMINAL=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "progress bar drawn on the terminal") {
		t.Errorf("on a terminal: %v\n%s", err, out)
	}
}
