package tablefilter

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// ---- Unit tests of the policy ----

func TestPebbleNameRoundTrip(t *testing.T) {
	for _, b := range []float64{4, 6, 9.5, 10, 10.6, 12, 15.9, 16, 1.0 / 3 * 30, 64} {
		for _, p := range []Policy{NewPolicy(b), NewDensestPolicy(b), NewV2Policy(b), NewV1Policy(b)} {
			name := p.Name()
			prefix := fmt.Sprintf("lsmcuckoo.v%d.bpk=", p.Version())
			if p.core.Densest() {
				prefix = fmt.Sprintf("lsmcuckoo.v%d.densest.bpk=", p.Version())
			}
			if !strings.HasPrefix(name, prefix) {
				t.Errorf("%v.Name() = %q: missing family/version prefix", p, name)
			}
			q, ok := PolicyFromName(name)
			if !ok {
				t.Fatalf("PolicyFromName(%q) rejected a name a policy wrote", name)
			}
			if q != pebble.FilterPolicy(p) || q.Name() != name {
				t.Errorf("PolicyFromName(%q) = %v, want %v", name, q, p)
			}
		}
	}
	if got := NewPolicy(10).Name(); got != "lsmcuckoo.v3.bpk=10" {
		t.Errorf("NewPolicy(10).Name() = %q", got)
	}
	if got := NewDensestPolicy(10).Name(); got != "lsmcuckoo.v3.densest.bpk=10" {
		t.Errorf("NewDensestPolicy(10).Name() = %q", got)
	}
	if NewDensestPolicy(10) == NewPolicy(10) {
		t.Error("NewDensestPolicy(10) == NewPolicy(10)")
	}
	if got := NewV2Policy(10).Name(); got != "lsmcuckoo.v2.bpk=10" {
		t.Errorf("NewV2Policy(10).Name() = %q", got)
	}
	if got := NewV1Policy(10).Name(); got != "lsmcuckoo.v1.bpk=10" {
		t.Errorf("NewV1Policy(10).Name() = %q", got)
	}
	if p := NewV4Policy(10); p.Name() != "lsmcuckoo.v4.bpk=10" || p.Version() != 4 {
		t.Errorf("NewV4Policy(10) is %q, version %d", p.Name(), p.Version())
	} else if q, ok := PolicyFromName(p.Name()); !ok || q != pebble.FilterPolicy(p) {
		t.Errorf("PolicyFromName(%q) = %v, %v", p.Name(), q, ok)
	}
	if got := (Policy{}).Name(); got != "lsmcuckoo.v3.bpk=10" || (Policy{}).BitsPerKey() != codec.DefaultBitsPerKey {
		t.Errorf("zero Policy is %q, %v bits/key; want the default", got, (Policy{}).BitsPerKey())
	}
	if got := NewPolicy(9.5).Name(); got != "lsmcuckoo.v3.bpk=9.5" {
		t.Errorf("NewPolicy(9.5).Name() = %q", got)
	}
	for _, bad := range []string{
		"", "lsmcuckoo", "lsmcuckoo.v1.bpk=", "lsmcuckoo.v1.bpk=10.0", "lsmcuckoo.v1.bpk=010",
		"lsmcuckoo.v1.bpk=1e1", "lsmcuckoo.v1.bpk=3", "lsmcuckoo.v1.bpk=65", "lsmcuckoo.v1.bpk=NaN",
		"lsmcuckoo.v1.bpk=+Inf", "lsmcuckoo.v1.bpk=10x", "lsmcuckoo.v5.bpk=10", "lsmcuckoo.v4.densest.bpk=10", "lsmcuckoo.v1.bpk=10 ",
		"lsmcuckoo.v2.bpk=10.0", "lsmcuckoo.v2.bpk=3", "lsmcuckoo.v0.bpk=10", "lsmcuckoo.v2.bpk=",
		"lsmcuckoo.v3.bpk=10.0", "lsmcuckoo.v3.bpk=65", "lsmcuckoo.v3.bpk=", "lsmcuckoo.v03.bpk=10",
		"lsmcuckoo.v2.densest.bpk=10", "lsmcuckoo.v1.densest.bpk=10", "lsmcuckoo.v3.densest.bpk=10.0",
		"lsmcuckoo.v3.densest.bpk=3", "lsmcuckoo.v3.densest.bpk=", "lsmcuckoo.v3.dense.bpk=10",
		"lsmcuckoo.v3.bpk=10.densest", "rocksdb.BuiltinBloomFilter",
	} {
		if p, ok := PolicyFromName(bad); ok {
			t.Errorf("PolicyFromName(%q) = %v, want rejection", bad, p)
		}
	}
}

func TestPebbleNewPolicyPanicsOnInvalid(t *testing.T) {
	for _, b := range []float64{0, -1, 3.99, 64.01, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewPolicy(%v) did not panic", b)
				}
			}()
			NewPolicy(b)
		}()
	}
}

func TestPebbleRegisterPolicies(t *testing.T) {
	o := &pebble.Options{}
	RegisterPolicies(o, 10, 16)
	RegisterPolicies(o, 12)
	want := []string{"lsmcuckoo.v1.bpk=10", "lsmcuckoo.v1.bpk=12", "lsmcuckoo.v1.bpk=16",
		"lsmcuckoo.v2.bpk=10", "lsmcuckoo.v2.bpk=12", "lsmcuckoo.v2.bpk=16",
		"lsmcuckoo.v3.bpk=10", "lsmcuckoo.v3.bpk=12", "lsmcuckoo.v3.bpk=16",
		"lsmcuckoo.v3.densest.bpk=10", "lsmcuckoo.v3.densest.bpk=12", "lsmcuckoo.v3.densest.bpk=16",
		"lsmcuckoo.v4.bpk=10", "lsmcuckoo.v4.bpk=12", "lsmcuckoo.v4.bpk=16"}
	var got []string
	for name, p := range o.Filters {
		if p.Name() != name {
			t.Errorf("Filters[%q] holds %q", name, p.Name())
		}
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("registered %q, want %q", got, want)
	}
}

// pebbleBuild builds a table filter through the policy's writer.
func pebbleBuild(p pebble.FilterPolicy, keys [][]byte) []byte {
	w := p.NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return w.Finish(nil)
}

func TestPebbleWriterNoFalseNegatives(t *testing.T) {
	p := NewPolicy(10)
	for _, s := range testkeys.Shapes(20000) {
		if len(s.Keys) == 0 {
			continue // Pebble never finishes a writer that saw no key
		}
		block := pebbleBuild(p, s.Keys)
		for _, k := range s.Keys {
			if !p.MayContain(pebble.TableFilter, block, k) {
				t.Fatalf("%s: false negative for %q", s.Name, k)
			}
		}
		f, err := codec.Decode(block)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if f.Info().Keys != s.Distinct {
			t.Errorf("%s: block holds %d keys, want %d distinct", s.Name, f.Info().Keys, s.Distinct)
		}
	}
}

// TestPebbleWriterVersions feeds the writer what Pebble feeds it under a
// Split comparer: each prefix once per version, consecutively. The block
// must hold each prefix once and be as large as a block built from the
// distinct prefixes (byte-identical for version 1; versions 2 and 3 draw a
// seed per block), and the writer must be reusable.
func TestPebbleWriterVersions(t *testing.T) {
	race.SkipLong(t)
	for _, p := range []Policy{NewPolicy(10), NewDensestPolicy(10), NewV2Policy(10), NewV1Policy(10)} {
		testPebbleWriterVersions(t, p)
	}
}

// TestPebbleDensestPolicy: NewDensestPolicy writes version 3's densest
// plan (fuller lines, a lower planned rate) and NewPolicy the default one,
// in blocks of the same size that either policy reads.
func TestPebbleDensestPolicy(t *testing.T) {
	keys := testkeys.Random(100_000, 16, 71)
	def, dense := pebbleBuild(NewPolicy(12), keys), pebbleBuild(NewDensestPolicy(12), keys)
	fd, err := codec.Decode(def)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := codec.Decode(dense)
	if err != nil {
		t.Fatal(err)
	}
	d, n := fd.Info(), fn.Info()
	t.Logf("default: K=%d rate %.4g; densest: K=%d rate %.4g", d.V3.LineCapacity, d.ExpectedFPR, n.V3.LineCapacity, n.ExpectedFPR)
	if d.Version != 3 || n.Version != 3 || d.V3.Lines != n.V3.Lines || n.V3.LineCapacity >= d.V3.LineCapacity || n.ExpectedFPR >= d.ExpectedFPR {
		t.Errorf("default %+v, densest %+v: want version 3 in as many lines, the densest with fuller lines and a lower rate", d, n)
	}
	for _, k := range keys {
		for _, b := range [][]byte{def, dense} {
			if !NewPolicy(12).MayContain(pebble.TableFilter, b, k) || !NewDensestPolicy(10).MayContain(pebble.TableFilter, b, k) {
				t.Fatalf("false negative for %q", k)
			}
		}
	}
}

func testPebbleWriterVersions(t *testing.T, p Policy) {
	prefixes := testkeys.Sequential("user", 0, 50000)
	w := p.NewWriter(pebble.TableFilter)
	for round := 0; round < 3; round++ {
		for i, k := range prefixes {
			for v := 0; v <= i%5; v++ {
				w.AddKey(k)
			}
		}
		withVersions := w.Finish(nil)
		distinct := pebbleBuild(p, prefixes)
		if p.Version() == 1 && !bytes.Equal(withVersions, distinct) || len(withVersions) != len(distinct) {
			t.Fatalf("%v round %d: block with repeated prefixes differs from block of distinct prefixes", p, round)
		}
		for _, k := range prefixes {
			if !p.MayContain(pebble.TableFilter, withVersions, k) {
				t.Fatalf("%v round %d: false negative for %q", p, round, k)
			}
		}
		info, err := codec.Decode(withVersions)
		if err != nil {
			t.Fatal(err)
		}
		// The codec may spend up to 5% over the budget to keep a large
		// filter's shape (codec.Options.BitsPerKey).
		if got := info.Info(); got.Keys != len(prefixes) || got.BitsPerKey > 10*1.05 {
			t.Fatalf("round %d: %d keys at %.2f bits/key, want %d at <= 10 (+5%%)", round, got.Keys, got.BitsPerKey, len(prefixes))
		}
	}
	// Finish appends.
	head := []byte("head")
	out := w.Finish(append([]byte(nil), head...))
	w.AddKey([]byte("x"))
	out = w.Finish(out)
	if !bytes.HasPrefix(out, head) || !p.MayContain(pebble.TableFilter, out[len(head):], []byte("x")) {
		t.Fatal("Finish(dst) did not append a block for the keys added since the last Finish")
	}
}

// TestPebbleWriterMemory checks the writer's footprint while building: about
// 8 bytes per distinct key, with the repeats of a key (its versions) costing
// nothing, and keys never retained.
func TestPebbleWriterMemory(t *testing.T) {
	const distinct, versions = 200000, 4
	keys := testkeys.Sequential("user", 0, distinct)
	w := NewPolicy(10).NewWriter(pebble.TableFilter)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		for v := 0; v < versions; v++ {
			w.AddKey(k)
		}
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// 8 bytes per key, plus one partly filled 32 KiB page of hashes and the
	// slice of page pointers.
	limit := uint64(8*distinct + 64<<10)
	if allocated > limit {
		t.Errorf("AddKey of %d keys x %d versions allocated %d bytes (%.1f per distinct key), want <= %d",
			distinct, versions, allocated, float64(allocated)/distinct, limit)
	}
	t.Logf("AddKey allocated %.2f bytes per distinct key (%d keys x %d versions)", float64(allocated)/distinct, distinct, versions)
	if block := w.Finish(nil); !NewPolicy(10).MayContain(pebble.TableFilter, block, keys[123]) {
		t.Fatal("false negative")
	}
}

func TestPebbleMayContainMalformed(t *testing.T) {
	p := NewPolicy(10)
	keys := testkeys.Random(5000, 16, 1)
	block := pebbleBuild(p, keys)
	absent := testkeys.Absent(2000, 3)
	rejects := func(b []byte) int {
		n := 0
		for _, k := range absent {
			if !p.MayContain(pebble.TableFilter, b, k) {
				n++
			}
		}
		return n
	}
	if rejects(block) < len(absent)*9/10 {
		t.Fatal("a well-formed block rejects too few absent keys; the malformed cases below would prove nothing")
	}
	cases := map[string][]byte{
		"nil":        nil,
		"empty":      {},
		"magic only": []byte("LSMC"),
		"header":     block[:32],
		"trailer":    block[len(block)-40:],
		"truncated":  block[:len(block)-1],
		"extended":   append(slices.Clone(block), 0),
		"garbage":    bytes.Repeat([]byte{0xa5}, len(block)),
		"bloom":      pebbleBuild(bloom.FilterPolicy(10), keys),
	}
	// The trailer's lookup fields, n-36..n-21, and their complemented copy,
	// in a block of the default version and in a version-2 block.
	v2 := pebbleBuild(NewV2Policy(10), keys)
	for _, back := range []int{36, 32, 31, 30, 29, 28, 24, 20, 16, 12, 8} {
		b := slices.Clone(block)
		b[len(b)-back] ^= 0x40
		cases[fmt.Sprintf("trailer byte n-%d flipped", back)] = b
		b = slices.Clone(v2)
		b[len(b)-back] ^= 0x40
		cases[fmt.Sprintf("v2 trailer byte n-%d flipped", back)] = b
	}
	next := slices.Clone(block)
	next[len(next)-32] = codec.NewestVersion + 1
	next[len(next)-16] = ^next[len(next)-32]
	cases["next format version"] = next
	v1 := pebbleBuild(NewV1Policy(10), keys)
	for _, off := range []int{4, 5, 8, 12, 16, 20, 24, 28} { // version, f, keys, seed, C, N, stride, check
		b := slices.Clone(v1)
		b[off] ^= 0x40
		cases[fmt.Sprintf("v1 header byte %d flipped", off)] = b
	}
	for name, b := range cases {
		if n := rejects(b); n != 0 {
			t.Errorf("%s: rejected %d absent keys, want 0 (a malformed block must answer maybe)", name, n)
		}
		for _, k := range keys[:100] {
			if !p.MayContain(pebble.TableFilter, b, k) {
				t.Fatalf("%s: present key rejected", name)
			}
		}
	}
	// A filter type this package does not know: maybe, never a panic.
	for _, ft := range []pebble.FilterType{-1, 1, 7} {
		n := 0
		for _, k := range absent {
			if !p.MayContain(ft, block, k) {
				n++
			}
		}
		if n != 0 {
			t.Errorf("FilterType %d: rejected %d keys, want 0", ft, n)
		}
	}
}

func TestPebbleMayContainAllocs(t *testing.T) {
	var p pebble.FilterPolicy = NewPolicy(10)
	keys := testkeys.Random(10000, 16, 1)
	block := pebbleBuild(p, keys)
	absent := testkeys.Absent(1000, 2)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p.MayContain(pebble.TableFilter, block, keys[i%len(keys)])
		p.MayContain(pebble.TableFilter, block, absent[i%len(absent)])
		i++
	})
	if allocs != 0 {
		t.Errorf("MayContain allocates %.1f times per call pair", allocs)
	}
}

// TestPebbleMayContainConcurrent probes one block from many goroutines
// (run with -race): answers must agree with a single-threaded pass, and the
// block must not be written.
func TestPebbleMayContainConcurrent(t *testing.T) {
	p := NewPolicy(10)
	keys := testkeys.Random(20000, 16, 1)
	absent := testkeys.Absent(20000, 2)
	block := pebbleBuild(p, keys)
	orig := slices.Clone(block)
	want := make([]bool, len(absent))
	for i, k := range absent {
		want[i] = p.MayContain(pebble.TableFilter, block, k)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range absent {
				j := (i + g*2500) % len(absent)
				if p.MayContain(pebble.TableFilter, block, absent[j]) != want[j] {
					errs <- fmt.Sprintf("goroutine %d: answer for absent key %d changed", g, j)
					return
				}
				if !p.MayContain(pebble.TableFilter, block, keys[j]) {
					errs <- fmt.Sprintf("goroutine %d: false negative", g)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if !bytes.Equal(block, orig) {
		t.Error("MayContain modified the block")
	}
}

// ---- A Pebble comparer with MVCC versions: "<prefix>@<version>" ----

// pebbleAtSplit splits a user key at its last '@': the prefix is what the
// filter sees, "@NNNNNN" the version.
func pebbleAtSplit(k []byte) int {
	if i := bytes.LastIndexByte(k, '@'); i >= 0 {
		return i
	}
	return len(k)
}

// pebbleAtCompareSuffixes orders a bare prefix (empty suffix) first, then
// versions newest first. Versions are fixed-width decimals, so descending
// byte order is descending version order.
func pebbleAtCompareSuffixes(a, b []byte) int {
	if len(a) == 0 || len(b) == 0 {
		return min(len(a), 1) - min(len(b), 1)
	}
	return bytes.Compare(b, a)
}

func pebbleAtCompare(a, b []byte) int {
	sa, sb := pebbleAtSplit(a), pebbleAtSplit(b)
	if c := bytes.Compare(a[:sa], b[:sb]); c != 0 {
		return c
	}
	return pebbleAtCompareSuffixes(a[sa:], b[sb:])
}

var pebbleAtComparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Name = "lsmcuckoo.test.at-versions"
	c.Split = pebbleAtSplit
	c.Compare = pebbleAtCompare
	c.Equal = func(a, b []byte) bool { return pebbleAtCompare(a, b) == 0 }
	c.ComparePointSuffixes = pebbleAtCompareSuffixes
	c.CompareRangeSuffixes = pebbleAtCompareSuffixes
	// Abbreviate the prefix only: monotone in the prefix order, which
	// dominates the key order.
	c.AbbreviatedKey = func(k []byte) uint64 { return pebble.DefaultComparer.AbbreviatedKey(k[:pebbleAtSplit(k)]) }
	// Returning a itself is always a valid separator and successor; the
	// default ones shorten keys by bytes and know nothing of versions.
	c.Separator = func(dst, a, b []byte) []byte { return append(dst, a...) }
	c.Successor = func(dst, a []byte) []byte { return append(dst, a...) }
	return &c
}()

func TestPebbleAtComparer(t *testing.T) {
	sorted := []string{"a", "a@000009", "a@000002", "a@000001", "a0", "a0@000005", "b", "b@000001"}
	for i := range sorted {
		for j := range sorted {
			a, b := []byte(sorted[i]), []byte(sorted[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := pebbleAtCompare(a, b); got != want {
				t.Errorf("Compare(%q, %q) = %d, want %d", a, b, got, want)
			}
			if ka, kb := pebbleAtComparer.AbbreviatedKey(a), pebbleAtComparer.AbbreviatedKey(b); i < j && ka > kb {
				t.Errorf("AbbreviatedKey not monotone for %q < %q", a, b)
			}
		}
	}
}

// ---- Integration: a real Pebble store on disk ----

// pebbleQuietLogger drops Pebble's informational logging.
type pebbleQuietLogger struct{}

func (pebbleQuietLogger) Infof(string, ...any)         {}
func (pebbleQuietLogger) Errorf(f string, a ...any)    { fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", a...) }
func (pebbleQuietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

func pebbleKey(i, version int) []byte { return fmt.Appendf(nil, "user%08d@%06d", i, version) }
func pebblePrefix(i int) []byte       { return fmt.Appendf(nil, "user%08d", i) }
func pebbleValue(i, version int) []byte {
	return fmt.Appendf(nil, "value-%d-%d", i, version)
}

// pebbleVersions is how many versions prefix i has: 1 to 3. Only even i
// are written; odd i are the absent keys, interleaved with the present ones
// so that every probe falls inside some table's key range.
func pebbleVersions(i int) int { return 1 + (i/2)%3 }

func pebbleOptions(policy pebble.FilterPolicy) *pebble.Options {
	o := &pebble.Options{
		Comparer:                    pebbleAtComparer,
		Logger:                      pebbleQuietLogger{},
		DisableAutomaticCompactions: true,
		FormatMajorVersion:          pebble.FormatNewest,
	}
	if policy != nil {
		o.Levels[0].FilterPolicy = policy
	}
	return o
}

// pebbleTestDB is built once and shared by the integration tests: a store
// whose tables sit on L0, on middle levels and on L6, holding versioned keys.
var pebbleTestDB struct {
	once sync.Once
	dir  string
	err  error
	keys int // versioned keys written
	n    int // prefixes span [0, n); even ones are present
}

// pebbleStride is the step between the prefixes the integration tests
// probe: all of them normally. Under the race detector Pebble enables its
// internal invariant checks, which make each lookup about 100 times slower,
// so there the tests probe every 32nd prefix (still thousands of lookups
// on every level, now with racing goroutines watched).
var pebbleStride = func() int {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return 32
			}
		}
	}
	return 1
}()

// pebbleTestN is the prefix space: n/2 present prefixes with 1-3 versions
// each, about n keys in all.
const pebbleTestN = 240000

func pebbleSharedDB(t *testing.T) (dir string, n int) {
	t.Helper()
	s := &pebbleTestDB
	s.once.Do(func() {
		s.dir, s.err = os.MkdirTemp("", "lsmcuckoo-pebble-*")
		if s.err == nil {
			s.keys, s.err = pebbleWriteDB(s.dir, pebbleTestN)
			s.n = pebbleTestN
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.dir, s.n
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pebbleTestDB.dir != "" {
		os.RemoveAll(pebbleTestDB.dir)
	}
	os.Exit(code)
}

// pebbleWriteDB writes the test store in three sessions so its tables end
// up on every kind of level Get treats differently:
//
//  1. Version 1 of every present prefix, with automatic compactions and
//     tiny level targets, so compactions push the data down through the
//     middle levels to L6.
//  2. Version 2 (of prefixes with 2 or 3 versions), flushed in four
//     interleaved rounds with compactions off: L0 tables spanning the
//     whole key range.
//  3. Version 3 likewise.
//
// Every table is written with NewPolicy(10).
func pebbleWriteDB(dir string, n int) (int, error) {
	written := 0
	write := func(o *pebble.Options, version, rounds int) error {
		db, err := pebble.Open(dir, o)
		if err != nil {
			return err
		}
		for r := 0; r < rounds; r++ {
			b := db.NewBatch()
			for i := 2 * r; i < n; i += 2 * rounds {
				if pebbleVersions(i) < version {
					continue
				}
				if err := b.Set(pebbleKey(i, version), pebbleValue(i, version), nil); err != nil {
					return err
				}
				written++
				if b.Len() > 1<<20 {
					if err := b.Commit(pebble.NoSync); err != nil {
						return err
					}
					b = db.NewBatch()
				}
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			if err := db.Flush(); err != nil {
				return err
			}
		}
		// Let automatic compactions finish before closing.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			m := db.Metrics()
			if m.Compact.NumInProgress == 0 && (o.DisableAutomaticCompactions || m.Levels[0].TablesCount == 0) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return db.Close()
	}
	o := pebbleOptions(NewPolicy(10))
	o.DisableAutomaticCompactions = false
	o.MemTableSize = 256 << 10
	o.L0CompactionThreshold = 1
	o.LBaseMaxBytes = 64 << 10
	o.TargetFileSizes[0] = 64 << 10
	if err := write(o, 1, 8); err != nil {
		return 0, err
	}
	for v := 2; v <= 3; v++ {
		if err := write(pebbleOptions(NewPolicy(10)), v, 4); err != nil {
			return 0, err
		}
	}
	return written, nil
}

// pebbleFilterDelta returns the filter hits and misses since m0.
func pebbleFilterDelta(db *pebble.DB, m0 *pebble.Metrics) (hits, misses int64) {
	m := db.Metrics()
	return m.Filter.Hits - m0.Filter.Hits, m.Filter.Misses - m0.Filter.Misses
}

// pebbleCheckContents verifies every present key with Get and every
// present prefix with SeekPrefixGE (all versions, newest first), and that
// absent keys are absent (every pebbleStride-th prefix of each). It returns
// the number of absent probes and the filter hits and misses they caused.
func pebbleCheckContents(t *testing.T, db *pebble.DB, n int) (probes int, absentHits, absentMisses int64) {
	t.Helper()
	get := func(k []byte) ([]byte, error) {
		v, c, err := db.Get(k)
		if err != nil {
			return nil, err
		}
		v = slices.Clone(v)
		return v, c.Close()
	}
	step := 2 * pebbleStride
	for i := 0; i < n; i += step {
		for v := 1; v <= pebbleVersions(i); v++ {
			got, err := get(pebbleKey(i, v))
			if err != nil || !bytes.Equal(got, pebbleValue(i, v)) {
				t.Fatalf("Get(%s) = %q, %v; want %q", pebbleKey(i, v), got, err, pebbleValue(i, v))
			}
		}
	}
	// UseL6Filters makes SeekPrefixGE consult the filters of L6 tables too,
	// which Get never does: every table's filter sees every present prefix.
	it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += step {
		p := pebblePrefix(i)
		versions := 0
		for ok := it.SeekPrefixGE(p); ok; ok = it.Next() {
			versions++
			want := pebbleKey(i, pebbleVersions(i)-versions+1)
			if !bytes.Equal(it.Key(), want) {
				t.Fatalf("SeekPrefixGE(%s): version %d is %s, want %s", p, versions, it.Key(), want)
			}
		}
		if versions != pebbleVersions(i) {
			t.Fatalf("SeekPrefixGE(%s) found %d versions, want %d (err %v)", p, versions, pebbleVersions(i), it.Error())
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	m0 := db.Metrics()
	for i := 1; i < n; i += step {
		if _, err := get(pebbleKey(i, 1)); !errors.Is(err, pebble.ErrNotFound) {
			t.Fatalf("Get(absent %s) err = %v, want ErrNotFound", pebbleKey(i, 1), err)
		}
		probes++
	}
	hits, misses := pebbleFilterDelta(db, m0)
	return probes, hits, misses
}

func TestPebbleDB(t *testing.T) {
	race.SkipLong(t)
	dir, n := pebbleSharedDB(t)
	start := time.Now()

	t.Run("registered", func(t *testing.T) {
		db, err := pebble.Open(dir, pebbleOptions(NewPolicy(10)))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		m := db.Metrics()
		var levels []string
		middle := 0
		for l := range m.Levels {
			if c := m.Levels[l].TablesCount; c > 0 {
				levels = append(levels, fmt.Sprintf("L%d:%d", l, c))
				if l > 0 && l < 6 {
					middle += int(c)
				}
			}
		}
		t.Logf("%d versioned keys, %d present prefixes; tables %s", pebbleTestDB.keys, n/2, strings.Join(levels, " "))
		if pebbleTestDB.keys < 200000 {
			t.Errorf("only %d keys written", pebbleTestDB.keys)
		}
		if m.Levels[0].TablesCount < 4 || middle == 0 || m.Levels[6].TablesCount == 0 {
			t.Fatalf("want tables on L0, on some of L1-L5 and on L6; have %s", strings.Join(levels, " "))
		}
		probes, hits, misses := pebbleCheckContents(t, db, n)
		rate := float64(hits) / float64(hits+misses)
		t.Logf("%d absent Gets: %d filter checks, %.2f%% rejected (%d passed)", probes, hits+misses, 100*rate, misses)
		if hits+misses < int64(probes)*4 {
			t.Errorf("only %d filter checks for %d absent Gets: the filters are not on the read path", hits+misses, probes)
		}
		// NewPolicy(10) measures 0.7% false positives; 3% leaves room for
		// statistical noise and nothing else.
		if rate < 0.97 {
			t.Errorf("filters rejected %.2f%% of absent in-range probes, want >= 97%%", 100*rate)
		}
	})

	t.Run("unregistered", func(t *testing.T) {
		// No policy at all: Pebble reads every table without its filter,
		// and must still answer correctly.
		db, err := pebble.Open(dir, pebbleOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, hits, misses := pebbleCheckContents(t, db, n)
		if hits+misses != 0 {
			t.Errorf("filters consulted (%d checks) with no policy registered", hits+misses)
		}
	})

	t.Run("other budget", func(t *testing.T) {
		// A process configured with another budget writes new tables with
		// it, but reads the store's bpk=10 tables without their filters...
		db, err := pebble.Open(dir, pebbleOptions(NewPolicy(16)))
		if err != nil {
			t.Fatal(err)
		}
		m0 := db.Metrics()
		for i := 1; i < 20001; i += 2 * pebbleStride {
			if _, _, err := db.Get(pebbleKey(i, 1)); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatal(err)
			}
		}
		hits, misses := pebbleFilterDelta(db, m0)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if hits+misses != 0 {
			t.Errorf("bpk=10 tables read with filters by a bpk=16 process that did not register bpk=10")
		}
		// ...unless it registers the old budget too.
		o := pebbleOptions(NewPolicy(16))
		RegisterPolicies(o, 10)
		db, err = pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		m0 = db.Metrics()
		for i := 1; i < 20001; i += 2 * pebbleStride {
			if _, _, err := db.Get(pebbleKey(i, 1)); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatal(err)
			}
		}
		hits, misses = pebbleFilterDelta(db, m0)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if hits < 9*(hits+misses)/10 || hits == 0 {
			t.Errorf("with bpk=10 registered: %d hits, %d misses", hits, misses)
		}
	})
	t.Logf("checks took %v", time.Since(start).Round(time.Millisecond))
}

// TestPebbleUpgrade is the upgrade path of a real store: tables written by
// an older policy, the process restarted with a newer one. Pebble looks
// filters up by name and silently reads a table without its filter when
// the name is not registered, so the old tables lose their filters unless
// RegisterPolicies registers the old names; with it, Pebble's filter
// metrics show them filtered, and new tables written by the newer policy
// sit beside them. The last case walks a store through every release:
// version-1 tables, then version-2, then version-3 ones, all filtered.
func TestPebbleUpgrade(t *testing.T) {
	race.SkipLong(t)
	for _, stages := range [][]Policy{
		{NewV1Policy(10), NewPolicy(10)},
		{NewV2Policy(10), NewPolicy(10)},
		{NewV1Policy(10), NewV2Policy(10)},
		{NewV1Policy(10), NewV2Policy(10), NewPolicy(10)},
		{NewPolicy(10), NewDensestPolicy(10)},
		{NewDensestPolicy(10), NewPolicy(10)},
	} {
		var names []string
		for _, p := range stages {
			names = append(names, p.Name())
		}
		t.Run(strings.Join(names, "->"), func(t *testing.T) { testPebbleUpgrade(t, stages) })
	}
}

func testPebbleUpgrade(t *testing.T, stages []Policy) {
	const n = 48000 // prefixes; even ones are present
	k := len(stages)
	dir := t.TempDir()
	// Stage s writes two L0 tables, of the even prefixes i with
	// i/2 mod 2k = s and s+k: together the stages write every even prefix.
	write := func(o *pebble.Options, s int) {
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 2; r++ {
			for i := 2*s + 2*k*r; i < n; i += 4 * k {
				if err := db.Set(pebbleKey(i, 1), pebbleValue(i, 1), pebble.NoSync); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	absentGets := func(db *pebble.DB) (hits, misses int64) {
		m0 := db.Metrics()
		for i := 1; i < n; i += 2 {
			if _, _, err := db.Get(pebbleKey(i, 1)); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("Get(absent %s): %v", pebbleKey(i, 1), err)
			}
		}
		return pebbleFilterDelta(db, m0)
	}
	presentGets := func(db *pebble.DB, upTo int) {
		for i := 0; i < n; i += 2 {
			if (i/2)%(2*k)%k > upTo {
				continue // a later stage writes it
			}
			v, c, err := db.Get(pebbleKey(i, 1))
			if err != nil || !bytes.Equal(v, pebbleValue(i, 1)) {
				t.Fatalf("Get(%s) = %q, %v", pebbleKey(i, 1), v, err)
			}
			c.Close()
		}
	}

	write(pebbleOptions(stages[0]), 0)
	if names := pebbleFilterNames(t, dir); !slices.Equal(names, []string{stages[0].Name()}) {
		t.Fatalf("old store's tables carry filters %q, want %q", names, stages[0].Name())
	}

	// Upgraded without registering the old names: every old table is read
	// without its filter.
	newest := stages[k-1]
	db, err := pebble.Open(dir, pebbleOptions(newest))
	if err != nil {
		t.Fatal(err)
	}
	hits, misses := absentGets(db)
	presentGets(db, 0)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if hits+misses != 0 {
		t.Fatalf("%s tables consulted %d filters without their name registered: the premise of this test is wrong", stages[0].Name(), hits+misses)
	}

	// Upgraded with RegisterPolicies: the old tables are filtered. Each
	// later stage writes its tables beside them.
	var want []string
	for s, p := range stages {
		want = append(want, p.Name())
		if s == 0 {
			continue
		}
		o := pebbleOptions(p)
		RegisterPolicies(o, 10)
		write(o, s)
	}
	slices.Sort(want)
	if names := pebbleFilterNames(t, dir); !slices.Equal(names, want) {
		t.Fatalf("upgraded store's tables carry filters %q, want %q", names, want)
	}
	o := pebbleOptions(newest)
	RegisterPolicies(o, 10)
	db, err = pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := db.Metrics()
	hits, misses = absentGets(db)
	presentGets(db, k-1)
	tables := m.Levels[0].TablesCount
	probes := int64(n / 2)
	t.Logf("%d L0 tables; %d absent Gets: %d filter checks, %d rejected", tables, probes, hits+misses, hits)
	if tables < int64(2*k) {
		t.Fatalf("%d L0 tables, want 2 per version", tables)
	}
	if hits+misses < probes*int64(2*k)*99/100 || hits < 97*(hits+misses)/100 {
		t.Errorf("absent Gets: %d filter hits, %d misses over %d tables: the tables are not all filtered", hits, misses, tables)
	}
}

// pebbleFilterNames lists the filter names the store's tables carry.
func pebbleFilterNames(t *testing.T, dir string) []string {
	t.Helper()
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(tables) == 0 {
		t.Fatalf("no tables in %s (%v)", dir, err)
	}
	seen := map[string]bool{}
	for _, path := range tables {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"v1", "v2", "v3", "v3.densest"} {
			if name := "lsmcuckoo." + v + ".bpk=10"; bytes.Contains(data, []byte("fullfilter."+name)) {
				seen[name] = true
			}
		}
	}
	names := slices.Sorted(maps.Keys(seen))
	return names
}

// TestPebbleDBConcurrentGets runs Gets from several goroutines against the
// filters (with -race, this is the concurrency test of MayContain on
// Pebble's shared block-cache buffers).
func TestPebbleDBConcurrentGets(t *testing.T) {
	dir, n := pebbleSharedDB(t)
	db, err := pebble.Open(dir, pebbleOptions(NewPolicy(10)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const goroutines = 4
	perG := 5000 / pebbleStride
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perG; j++ {
				i := (g*perG*2 + j*2*7919) % n // even: present
				v, c, err := db.Get(pebbleKey(i, 1))
				if err != nil {
					errs <- fmt.Errorf("Get(%s): %w", pebbleKey(i, 1), err)
					return
				}
				ok := bytes.Equal(v, pebbleValue(i, 1))
				c.Close()
				if !ok {
					errs <- fmt.Errorf("Get(%s): wrong value", pebbleKey(i, 1))
					return
				}
				if _, _, err := db.Get(pebbleKey(i+1, 1)); !errors.Is(err, pebble.ErrNotFound) {
					errs <- fmt.Errorf("Get(absent %s): %v", pebbleKey(i+1, 1), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPebbleOptionsFile checks that the policy's name survives Pebble's
// OPTIONS file (its value contains '=') and that PolicyFromName serves as
// the ParseHooks.NewFilterPolicy hook that turns it back into the policy:
// the default policy's, and a version-2 policy's, as the OPTIONS file of a
// store written before the upgrade records it.
func TestPebbleOptionsFile(t *testing.T) {
	for _, p := range []Policy{NewPolicy(9.5), NewV2Policy(9.5)} {
		t.Run(p.Name(), func(t *testing.T) { testPebbleOptionsFile(t, p) })
	}
}

func testPebbleOptionsFile(t *testing.T, want Policy) {
	dir := t.TempDir()
	o := pebbleOptions(want)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no OPTIONS file (%v)", err)
	}
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("filter_policy="+want.Name()+"\n")) {
		t.Fatalf("OPTIONS file does not record the policy:\n%s", data)
	}
	var parsed pebble.Options
	hooks := &pebble.ParseHooks{
		NewFilterPolicy: func(name string) (pebble.FilterPolicy, error) {
			if p, ok := PolicyFromName(name); ok {
				return p, nil
			}
			return nil, fmt.Errorf("unknown filter policy %q", name)
		},
		// Without it Pebble v2.1.7's Parse dereferences a nil comparer
		// when the file names a comparer other than the default.
		NewComparer: func(name string) (*pebble.Comparer, error) {
			if name != pebbleAtComparer.Name {
				return nil, fmt.Errorf("unknown comparer %q", name)
			}
			return pebbleAtComparer, nil
		},
	}
	if err := parsed.Parse(string(data), hooks); err != nil {
		t.Fatal(err)
	}
	for l := range parsed.Levels {
		if p := parsed.Levels[l].FilterPolicy; p != pebble.FilterPolicy(want) {
			t.Errorf("L%d: parsed policy %v, want %v", l, p, want)
		}
	}
}

// ---- Corrupted filter blocks ----

// pebbleFilterBlocks returns, for every table in dir, where its lsmcuckoo
// filter block lies, read from the table's own layout (metaindex).
func pebbleFilterBlocks(t *testing.T, dir string, o *pebble.Options) map[string]block.Handle {
	t.Helper()
	o = o.Clone()
	o.EnsureDefaults()
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no tables in %s (%v)", dir, err)
	}
	out := map[string]block.Handle{}
	for _, path := range ssts {
		f, err := vfs.Default.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		readable, err := sstable.NewSimpleReadable(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sstable.NewReader(context.Background(), readable, o.MakeReaderOptions())
		if err != nil {
			t.Fatal(err)
		}
		layout, err := r.Layout()
		if err != nil {
			t.Fatal(err)
		}
		h, ok := layout.FilterByName("fullfilter." + NewPolicy(10).Name())
		if !ok {
			t.Fatalf("%s has no lsmcuckoo filter block (filters %v)", path, layout.Filter)
		}
		out[path] = h
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// pebbleRewriteChecksum recomputes the block trailer of the block at h so
// Pebble's checksum passes over whatever the block now holds.
func pebbleRewriteChecksum(t *testing.T, file []byte, h block.Handle, orig []byte) {
	t.Helper()
	end := h.Offset + h.Length
	stored := binary.LittleEndian.Uint32(file[end+1:])
	for _, typ := range []block.ChecksumType{block.ChecksumTypeCRC32c, block.ChecksumTypeXXHash64} {
		var c block.Checksummer
		c.Init(typ)
		if c.Checksum(orig, file[end]) == stored {
			binary.LittleEndian.PutUint32(file[end+1:], c.Checksum(file[h.Offset:end], file[end]))
			return
		}
	}
	t.Fatal("block checksum matches neither crc32c nor xxhash64")
}

// TestPebbleCorruptFilter damages the filter block of every table and
// checks that no present key is ever reported absent. Two kinds of damage:
//
//   - bytes flipped on disk, nothing else touched: Pebble's block checksum
//     catches it when it loads the filter block, reports it to
//     EventListener.DataCorruption (by default Logger.Fatalf, which stops
//     the process) and Get returns a corruption error for lookups that
//     reach the table. A lookup never answers "not found" for a present key.
//   - the filter's header damaged and Pebble's block checksum recomputed
//     (damage that happened before Pebble checksummed the block): the
//     block reaches MayContain, whose header check notices and answers
//     "maybe", and every key is found with no error.
func TestPebbleCorruptFilter(t *testing.T) {
	const n = 20000
	src := t.TempDir()
	db, err := pebble.Open(src, pebbleOptions(NewPolicy(10)))
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ {
		for i := r * 2; i < n; i += 4 {
			if err := db.Set(pebbleKey(i, 1), pebbleValue(i, 1), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name        string
		fixChecksum bool
		damage      func(filter []byte)
	}{
		{"bytes flipped", false, func(f []byte) {
			for i := len(f) / 3; i < len(f)/3+64; i++ {
				f[i] ^= 0xff
			}
		}},
		{"trailer flipped, checksum fixed", true, func(f []byte) {
			n := len(f)
			f[n-24] ^= 0x01 // seed: would move every key to other buckets
			f[n-28] ^= 0x10 // line count
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			for path, h := range pebbleFilterBlocks(t, dir, pebbleOptions(NewPolicy(10))) {
				file, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				filter := file[h.Offset : h.Offset+h.Length]
				if len(filter) < 40 || string(filter[len(filter)-36:len(filter)-32]) != "LSMC" {
					t.Fatalf("%s: filter block does not carry the codec magic in its trailer", path)
				}
				orig := slices.Clone(filter)
				tc.damage(filter)
				if tc.fixChecksum {
					pebbleRewriteChecksum(t, file, h, orig)
				}
				if err := os.WriteFile(path, file, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Pebble reports every corruption it detects to
			// EventListener.DataCorruption, whose default calls
			// Logger.Fatalf: a production process stops. Record the events
			// instead, so the lookups' own answers can be checked.
			var events atomic.Int64
			o := pebbleOptions(NewPolicy(10))
			o.EventListener = &pebble.EventListener{
				DataCorruption: func(pebble.DataCorruptionInfo) { events.Add(1) },
			}
			db, err := pebble.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// When the checksum fails, Pebble searches the block for a
			// single flipped bit to report (a checksum per bit of the
			// block), about 10 ms per lookup here: probe a sample.
			step := 2
			if !tc.fixChecksum {
				step = 2 * 97
			}
			found, corrupt := 0, 0
			for i := 0; i < n; i += step {
				v, c, err := db.Get(pebbleKey(i, 1))
				switch {
				case err == nil:
					if !bytes.Equal(v, pebbleValue(i, 1)) {
						t.Fatalf("Get(%s): wrong value", pebbleKey(i, 1))
					}
					c.Close()
					found++
				case errors.Is(err, pebble.ErrNotFound):
					t.Fatalf("present key %s reported absent after filter corruption", pebbleKey(i, 1))
				case pebble.IsCorruptionError(err):
					corrupt++
				default:
					t.Fatalf("Get(%s): %v", pebbleKey(i, 1), err)
				}
			}
			t.Logf("%d present keys: %d found, %d corruption errors, %d DataCorruption events", found+corrupt, found, corrupt, events.Load())
			if int64(corrupt) > 0 && events.Load() == 0 {
				t.Errorf("corruption errors without a DataCorruption event")
			}
			if tc.fixChecksum && corrupt != 0 {
				t.Errorf("%d corruption errors although Pebble's checksum was valid", corrupt)
			}
			if !tc.fixChecksum && corrupt == 0 {
				t.Errorf("Pebble's block checksum did not catch the flipped filter bytes")
			}
		})
	}
}

// ---- Measurement: bits per key versus false-positive rate ----

// BenchmarkPebblePolicyFPR builds a table filter of 1M random 16-byte keys
// through each policy's writer (the timed part, reported per key) and
// measures the false-positive rate over 2M absent keys through MayContain.
// README.md's tables come from the bench command, which measures the same way.
func BenchmarkPebblePolicyFPR(b *testing.B) {
	const n, probes = 1000000, 2000000
	keys := testkeys.Random(n, 16, 1)
	absent := testkeys.Absent(probes, 2)
	type policy struct {
		name string
		p    pebble.FilterPolicy
	}
	var policies []policy
	for _, bpk := range []float64{6, 8, 9, 10, 12, 14, 16, 20} {
		policies = append(policies, policy{fmt.Sprintf("lsmcuckoo/bpk=%g", bpk), NewPolicy(bpk)})
		policies = append(policies, policy{fmt.Sprintf("lsmcuckoo-v1/bpk=%g", bpk), NewV1Policy(bpk)})
	}
	for _, bpk := range []int{6, 8, 9, 10, 12, 14, 16, 20} {
		policies = append(policies, policy{fmt.Sprintf("bloom/bpk=%d", bpk), bloom.FilterPolicy(bpk)})
	}
	for _, pc := range policies {
		b.Run(pc.name, func(b *testing.B) {
			var block []byte
			w := pc.p.NewWriter(pebble.TableFilter)
			for b.Loop() {
				for _, k := range keys {
					w.AddKey(k)
				}
				block = w.Finish(block[:0])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "build-ns/key")
			fp := 0
			for _, k := range absent {
				if pc.p.MayContain(pebble.TableFilter, block, k) {
					fp++
				}
			}
			b.ReportMetric(float64(len(block))*8/n, "bits/key")
			b.ReportMetric(100*float64(fp)/probes, "FPR%")
			if f, err := codec.Decode(block); err == nil {
				in := f.Info()
				b.ReportMetric(float64(in.V1.FingerprintBits+in.V2.FingerprintBits+in.V3.RemainderBits), "fp-bits")
				b.ReportMetric(in.V1.Load+in.V2.Load+in.V3.Load, "load")
			}
		})
	}
}

// stride is every pebbleStride-th key: all of them normally, fewer under
// the race detector, whose Pebble lookups are a hundred times slower.
func stride(keys [][]byte) [][]byte {
	var out [][]byte
	for i := 0; i < len(keys); i += pebbleStride {
		out = append(out, keys[i])
	}
	return out
}

// oddKeys are key shapes a demanding user's store holds: the empty
// key, every 1-byte key, 64 KiB keys, keys that differ only in their last
// byte after a long shared prefix, and ordinary ones. Half are written
// (even index), half kept absent.
func oddKeys() [][]byte {
	var keys [][]byte
	keys = append(keys, []byte{})
	for b := range 256 {
		keys = append(keys, []byte{byte(b)})
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	for i := range 8 {
		k := slices.Clone(big)
		k[len(k)-1] = byte(i)
		keys = append(keys, k)
	}
	long := bytes.Repeat([]byte{'L'}, 1000)
	for b := range 256 {
		keys = append(keys, append(slices.Clone(long), byte(b)))
	}
	for i := range 256 {
		keys = append(keys, fmt.Appendf(nil, "k%015d", i))
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, func(a, b []byte) bool { return bytes.Equal(a, b) })
}

// TestPebbleOddKeys writes oddKeys into a real store under each
// policy version, twice (two versions of each key, in two flushes, so the
// L0 tables and then the compacted L6 table meet repeats), and reads
// every key back through Get (L0 filters) and SeekPrefixGE with
// UseL6Filters (the L6 filter after a manual compaction): no present key
// may be missed, no absent key found, and the filters must have been
// consulted.
func TestPebbleOddKeys(t *testing.T) {
	keys := oddKeys()
	for _, policy := range []Policy{NewPolicy(10), NewV1Policy(10), NewPolicy(4), NewPolicy(64)} {
		t.Run(policy.Name(), func(t *testing.T) {
			o := &pebble.Options{DisableAutomaticCompactions: true, Logger: testLogger{}}
			o.Levels[0].FilterPolicy = policy
			db, err := pebble.Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for round := range 2 {
				for i := 0; i < len(keys); i += 2 {
					if err := db.Set(keys[i], []byte{byte(round)}, pebble.NoSync); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			check := func(where string, seek bool) (checks int64) {
				before := db.Metrics().Filter
				it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
				if err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					var found bool
					// Pebble v2.1.7 built with invariants (as under the
					// race detector) indexes key[0] in SeekPrefixGE and
					// panics on the empty key: Get checks that one.
					if seek && len(k) > 0 {
						found = it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k)
					} else {
						v, c, err := db.Get(k)
						if err == nil {
							found = len(v) == 1 && v[0] == 1
							c.Close()
						} else if !errors.Is(err, pebble.ErrNotFound) {
							t.Fatal(err)
						}
					}
					if found != (i%2 == 0) {
						t.Fatalf("%s: key %d (%d bytes) found %v, written %v", where, i, len(k), found, i%2 == 0)
					}
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
				after := db.Metrics().Filter
				return after.Hits - before.Hits + after.Misses - before.Misses
			}
			if c := check("L0 Get", false); c < int64(len(keys)) {
				t.Errorf("L0 Get: %d filter checks for %d keys over 2 tables", c, len(keys))
			}
			if err := db.Compact(context.Background(), []byte{}, bytes.Repeat([]byte{0xff}, 70000), true); err != nil {
				t.Fatal(err)
			}
			if n := db.Metrics().Levels[6].TablesCount; n == 0 {
				t.Fatal("nothing compacted into L6")
			}
			// Absent keys past either end of the table's range are
			// skipped without a filter check.
			if c := check("L6 SeekPrefixGE", true); c < int64(len(keys))-3 {
				t.Errorf("L6 SeekPrefixGE: %d filter checks for %d keys", c, len(keys))
			}
		})
	}
}

// TestPebbleWriterMillionKeys: a million distinct keys through the policy
// writer as Pebble feeds it under a Split comparer (each prefix twice in a
// row), with a few thousand repeats out of order besides; every key must
// be found, each prefix counted once.
func TestPebbleWriterMillionKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	// A tenth under the race detector: nothing here is concurrent.
	keys := testkeys.Random(1_000_000/min(pebbleStride, 10), 16, 95)
	for _, p := range []Policy{NewPolicy(10), NewV1Policy(10)} {
		w := p.NewWriter(pebble.TableFilter)
		for i, k := range keys {
			w.AddKey(k)
			w.AddKey(k)
			if i%331 == 0 {
				w.AddKey(keys[i/2])
			}
		}
		block := w.Finish(nil)
		f, err := codec.Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		if f.Info().Keys != len(keys) {
			t.Errorf("%s: %d keys stored, want %d", p.Name(), f.Info().Keys, len(keys))
		}
		for _, k := range keys {
			if !p.MayContain(pebble.TableFilter, block, k) {
				t.Fatalf("%s: false negative", p.Name())
			}
		}
	}
}

// FuzzPolicyFromName hands PolicyFromName any string (an OPTIONS file or
// a table's metaindex is not trusted): it must not panic, and a name it
// accepts must be exactly the name of the policy it returns (so Pebble's
// lookup by name finds it), with a budget NewPolicy accepts and a writer
// whose block finds its keys.
func FuzzPolicyFromName(f *testing.F) {
	for _, s := range []string{
		"lsmcuckoo.v2.bpk=10", "lsmcuckoo.v1.bpk=9.5", "lsmcuckoo.v2.bpk=4", "lsmcuckoo.v2.bpk=64",
		"lsmcuckoo.v2.bpk=0", "lsmcuckoo.v2.bpk=-10", "lsmcuckoo.v2.bpk=NaN", "lsmcuckoo.v2.bpk=Inf",
		"lsmcuckoo.v2.bpk=1e300", "lsmcuckoo.v2.bpk=0x1p3", "lsmcuckoo.v2.bpk=1_0", "lsmcuckoo.v2.bpk=10\x00",
		"lsmcuckoo.v2.bpk=" + strings.Repeat("9", 400), "lsmcuckoo.v2.bpk=4." + strings.Repeat("0", 300) + "1",
		"lsmcuckoo.v3.bpk=10", "lsmcuckoo.v3.bpk=9.5", "lsmcuckoo.v3.bpk=4", "lsmcuckoo.v3.bpk=64",
		"lsmcuckoo.v4.bpk=10", "lsmcuckoo.v02.bpk=10", "LSMCUCKOO.v2.bpk=10", "lsmcuckoo.v2.bpk=10.5.5",
		"lsmcuckoo.v2.bpk=63.99999999999999", "lsmcuckoo.v2.bpk=4.000000000000001",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, ok := PolicyFromName(name)
		if !ok {
			return
		}
		if p.Name() != name {
			t.Fatalf("PolicyFromName(%q) returned a policy named %q", name, p.Name())
		}
		q := p.(Policy)
		if !pebblecore.ValidBitsPerKey(q.BitsPerKey()) || q.Version() < 1 || q.Version() > codec.NewestVersion {
			t.Fatalf("PolicyFromName(%q) = %+v", name, q)
		}
		keys := [][]byte{[]byte("a"), []byte(name), {}}
		block := pebbleBuild(p, keys)
		for _, k := range keys {
			if !p.MayContain(pebble.TableFilter, block, k) {
				t.Fatalf("%s: false negative", name)
			}
		}
	})
}

// TestParseFilterPolicy: every name a Policy writes parses back to that
// policy, "none" to pebble.NoFilterPolicy, and any other name (another
// family's, a non-canonical number, a budget out of range) is an error
// that names it.
func TestParseFilterPolicy(t *testing.T) {
	for _, p := range []Policy{NewPolicy(10), NewPolicy(9.5), NewV2Policy(10), NewV2Policy(12.5), NewV1Policy(16),
		NewPolicy(MinBitsPerKey), NewPolicy(MaxBitsPerKey), NewV2Policy(MaxBitsPerKey), NewV1Policy(MinBitsPerKey)} {
		got, err := ParseFilterPolicy(p.Name())
		if err != nil || got != pebble.FilterPolicy(p) {
			t.Errorf("ParseFilterPolicy(%q) = %v, %v; want %v", p.Name(), got, err, p)
		}
	}
	if got, err := ParseFilterPolicy("none"); err != nil || got != pebble.NoFilterPolicy {
		t.Errorf(`ParseFilterPolicy("none") = %v, %v; want pebble.NoFilterPolicy`, got, err)
	}
	for _, name := range []string{"", "rocksdb.BuiltinBloomFilter", "lsmcuckoo.v2.bpk=10.0", "lsmcuckoo.v2.bpk=3",
		"lsmcuckoo.v3.bpk=10.0", "lsmcuckoo.v3.bpk=65", "lsmcuckoo.v5.bpk=10", "None"} {
		got, err := ParseFilterPolicy(name)
		if err == nil || got != nil {
			t.Errorf("ParseFilterPolicy(%q) = %v, %v; want an error", name, got, err)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("ParseFilterPolicy(%q): error %q does not name it", name, err)
		}
		// The error lists the names this package parses, so that a user
		// who mistyped one sees the forms it takes.
		for _, w := range pebblecore.Writers {
			if form := pebblecore.NamePrefix(w.Version, w.Densest) + "<bits>"; !strings.Contains(err.Error(), form) {
				t.Errorf("ParseFilterPolicy(%q): error %q does not list %s", name, err, form)
			}
		}
	}
}
