package pebblev1

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

func TestNameRoundTrip(t *testing.T) {
	for _, b := range []float64{4, 6, 9.5, 10, 10.6, 16, 1.0 / 3 * 30, 64} {
		for _, p := range []Policy{NewPolicy(b), NewDensestPolicy(b), NewV4Policy(b)} {
			q, ok := PolicyFromName(p.Name())
			if !ok || q != pebble.FilterPolicy(p) || q.Name() != p.Name() {
				t.Errorf("PolicyFromName(%q) = %v, %v; want %v", p.Name(), q, ok, p)
			}
		}
	}
	for p, want := range map[Policy]string{
		NewPolicy(10): "lsmcuckoo.v3.bpk=10", NewPolicy(9.5): "lsmcuckoo.v3.bpk=9.5",
		NewDensestPolicy(10): "lsmcuckoo.v3.densest.bpk=10", {}: "lsmcuckoo.v3.bpk=10",
		NewV4Policy(10): "lsmcuckoo.v4.bpk=10", NewV4Policy(9.5): "lsmcuckoo.v4.bpk=9.5",
	} {
		if p.Name() != want || p.String() != want {
			t.Errorf("%#v is named %q, want %q", p, p.Name(), want)
		}
	}
	// Tables a Pebble v2 store wrote with tablefilter's older writers keep
	// their filters here.
	for _, name := range []string{"lsmcuckoo.v1.bpk=10", "lsmcuckoo.v2.bpk=12.5"} {
		if p, ok := PolicyFromName(name); !ok || p.Name() != name {
			t.Errorf("PolicyFromName(%q) = %v, %v", name, p, ok)
		}
	}
	for _, bad := range []string{"", "lsmcuckoo.v3.bpk=10.0", "lsmcuckoo.v3.bpk=3", "lsmcuckoo.v5.bpk=10",
		"lsmcuckoo.v2.densest.bpk=10", "lsmcuckoo.v4.densest.bpk=10", "lsmcuckoo.v4.bpk=10.0", "rocksdb.BuiltinBloomFilter", "none"} {
		if p, ok := PolicyFromName(bad); ok {
			t.Errorf("PolicyFromName(%q) = %v, want rejection", bad, p)
		}
	}
}

func TestNewPolicyPanicsOnInvalid(t *testing.T) {
	for _, b := range []float64{0, -1, 3.99, 64.01, math.NaN(), math.Inf(1)} {
		for name, f := range map[string]func(float64) Policy{"NewPolicy": NewPolicy, "NewDensestPolicy": NewDensestPolicy, "NewV4Policy": NewV4Policy} {
			func() {
				defer func() {
					if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "pebblev1: ") {
						t.Errorf("%s(%v) recovered %v, want a pebblev1 panic", name, b, r)
					}
				}()
				f(b)
			}()
		}
	}
}

// TestParseFilterPolicy: our names parse back to their policies; "none",
// which Pebble v1 writes for a level without a policy, is a nil policy
// without error; any other name is an error that names it.
func TestParseFilterPolicy(t *testing.T) {
	for _, p := range []Policy{NewPolicy(10), NewPolicy(MinBitsPerKey), NewDensestPolicy(MaxBitsPerKey), NewV4Policy(10), NewV4Policy(MinBitsPerKey)} {
		if got, err := ParseFilterPolicy(p.Name()); err != nil || got != pebble.FilterPolicy(p) {
			t.Errorf("ParseFilterPolicy(%q) = %v, %v", p.Name(), got, err)
		}
	}
	if got, err := ParseFilterPolicy("none"); got != nil || err != nil {
		t.Errorf(`ParseFilterPolicy("none") = %v, %v; want nil, nil`, got, err)
	}
	for _, name := range []string{"", "None", "rocksdb.BuiltinBloomFilter", "lsmcuckoo.v3.bpk=65"} {
		got, err := ParseFilterPolicy(name)
		if err == nil || got != nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("ParseFilterPolicy(%q) = %v, %v; want an error naming it", name, got, err)
		}
	}
}

func TestRegisterPolicies(t *testing.T) {
	old := map[string]pebble.FilterPolicy{"other": nil}
	o := &pebble.Options{Filters: old}
	RegisterPolicies(o, 10, 12)
	want := []string{"lsmcuckoo.v1.bpk=10", "lsmcuckoo.v1.bpk=12", "lsmcuckoo.v2.bpk=10", "lsmcuckoo.v2.bpk=12",
		"lsmcuckoo.v3.bpk=10", "lsmcuckoo.v3.bpk=12", "lsmcuckoo.v3.densest.bpk=10", "lsmcuckoo.v3.densest.bpk=12",
		"lsmcuckoo.v4.bpk=10", "lsmcuckoo.v4.bpk=12", "other"}
	got := slices.Sorted(func(yield func(string) bool) {
		for name := range o.Filters {
			if !yield(name) {
				return
			}
		}
	})
	if !slices.Equal(got, want) {
		t.Errorf("registered %q, want %q", got, want)
	}
	if len(old) != 1 {
		t.Error("RegisterPolicies wrote into the map the options held")
	}
	func() {
		defer func() { _ = recover() }()
		RegisterPolicies(o, 3)
		t.Error("RegisterPolicies(3) did not panic")
	}()
}

// TestWriterBytes: the writer's block finds every key it was given, is
// exactly what codec builds for those keys under the block's own seed (the
// adapter adds nothing to the bytes), and MayContain answers "maybe" for a
// filter type it does not know and for a damaged block.
func TestWriterBytes(t *testing.T) {
	keys := testkeys.Sequential("user", 0, 5000)
	for _, p := range []Policy{NewPolicy(10), NewDensestPolicy(14), NewV4Policy(10)} {
		w := p.NewWriter(pebble.TableFilter)
		for _, k := range keys {
			w.AddKey(k)
			w.AddKey(k) // an MVCC version's repeat
		}
		block := w.Finish(nil)
		for _, k := range keys {
			if !p.MayContain(pebble.TableFilter, block, k) {
				t.Fatalf("%s: false negative for %q", p, k)
			}
		}
		f, err := codec.Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		b := codec.NewBuilder(codec.Options{BitsPerKey: p.BitsPerKey(), Hash: codec.HashKey64,
			Version: p.Version(), Densest: p == NewDensestPolicy(14), Seed: f.Info().Seed})
		for _, k := range keys {
			b.Add(k)
		}
		if want := b.Finish(nil); !bytes.Equal(block, want) {
			t.Errorf("%s: the block differs from codec's under seed %#x", p, f.Info().Seed)
		}
		if !p.MayContain(pebble.FilterType(7), block, []byte("absent")) || !p.MayContain(pebble.TableFilter, block[:len(block)-1], []byte("absent")) {
			t.Errorf("%s: not \"maybe\" for an unknown filter type or a truncated block", p)
		}
	}
}

// TestLevelsThroughL6 checks the extension of Options.Levels against
// Pebble v1's own Options.Level, which is what the store would have used.
func TestLevelsThroughL6(t *testing.T) {
	for name, levels := range map[string][]pebble.LevelOptions{
		"nil":   nil,
		"one":   {{FilterPolicy: NewPolicy(10), BlockSize: 8 << 10}},
		"three": {{TargetFileSize: 1 << 20}, {TargetFileSize: 3 << 20, Compression: pebble.ZstdCompression}, {}},
		"geth":  gethLevels(),
		"eight": slices.Repeat([]pebble.LevelOptions{{TargetFileSize: 5 << 20}}, 8),
	} {
		o := &pebble.Options{Levels: slices.Clone(levels), FS: vfs.NewMem()}
		o.EnsureDefaults()
		got := levelsThroughL6(levels)
		if len(got) != max(len(levels), NumLevels) {
			t.Errorf("%s: %d levels", name, len(got))
		}
		if len(levels) > 0 && &got[0] == &levels[0] {
			t.Errorf("%s: the slice the options held was reused", name)
		}
		ext := &pebble.Options{Levels: got, FS: vfs.NewMem()}
		ext.EnsureDefaults()
		for l := 0; l < NumLevels; l++ {
			if a, b := o.Level(l), ext.Level(l); a != b {
				t.Errorf("%s: L%d is %+v, Pebble would use %+v", name, l, b, a)
			}
		}
	}
}

// gethLevels is go-ethereum's Pebble v1 level layout: bloom(10) filters on
// L0 to L5, none on L6, target file sizes doubling from 2 MiB.
func gethLevels() []pebble.LevelOptions {
	levels := make([]pebble.LevelOptions, NumLevels)
	for l := range levels {
		levels[l].TargetFileSize = 2 << 20 << l
		if l < NumLevels-1 {
			levels[l].FilterPolicy = bloomPolicy
		}
	}
	return levels
}

func TestSetLevelBudgets(t *testing.T) {
	held := gethLevels()
	o := &pebble.Options{Levels: held}
	budgets := [NumLevels]float64{24, 20, 16, 14, 12, 10, 9.5}
	SetLevelBudgets(o, budgets)
	for l := range NumLevels {
		if p := o.Levels[l].FilterPolicy; p != pebble.FilterPolicy(NewPolicy(budgets[l])) {
			t.Errorf("L%d: %v", l, p)
		}
		if o.Levels[l].TargetFileSize != held[l].TargetFileSize {
			t.Errorf("L%d: target file size changed", l)
		}
		if held[l].FilterPolicy != nil && held[l].FilterPolicy != bloomPolicy || l == NumLevels-1 && held[l].FilterPolicy != nil {
			t.Errorf("L%d: the slice the options held was written", l)
		}
	}
	for _, b := range pebblecore.RegisteredBudgets() {
		if _, ok := o.Filters[NewPolicy(b).Name()]; !ok {
			t.Errorf("budget %v not registered", b)
		}
	}
	// An invalid budget panics before anything is written.
	before := slices.Clone(o.Levels)
	func() {
		defer func() { _ = recover() }()
		SetLevelBudgets(o, [NumLevels]float64{10, 10, 10, 10, 10, 10, 3})
		t.Error("SetLevelBudgets with a budget of 3 did not panic")
	}()
	if !slices.Equal(before, o.Levels) {
		t.Error("a panicking SetLevelBudgets changed the levels")
	}
}

// TestSetLevelBudgetsV4: every level writes version 4 at its budget, the
// slice the options held is neither reused nor written, every writer's
// name of every grid budget is registered (so the version-3 setters' tables
// keep their filters), and an invalid budget panics before anything is
// written.
func TestSetLevelBudgetsV4(t *testing.T) {
	held := gethLevels()
	o := &pebble.Options{Levels: held}
	budgets := LevelBudgetsV4(ModelLevelShape(o), 10)
	SetLevelBudgetsV4(o, budgets)
	for l := range NumLevels {
		p, ok := o.Levels[l].FilterPolicy.(Policy)
		if !ok || p != NewV4Policy(budgets[l]) || p.Version() != codec.NewestVersion || o.Filters[p.Name()] == nil {
			t.Errorf("L%d: %v for budget %v", l, o.Levels[l].FilterPolicy, budgets[l])
		}
		if o.Levels[l].TargetFileSize != held[l].TargetFileSize {
			t.Errorf("L%d: target file size changed", l)
		}
		if l < NumLevels-1 && held[l].FilterPolicy != bloomPolicy {
			t.Errorf("L%d: the slice the options held was written", l)
		}
	}
	for _, b := range pebblecore.RegisteredBudgets() {
		for _, p := range []Policy{NewPolicy(b), NewDensestPolicy(b), NewV4Policy(b)} {
			if _, ok := o.Filters[p.Name()]; !ok {
				t.Errorf("%s not registered", p.Name())
			}
		}
	}
	before := slices.Clone(o.Levels)
	func() {
		defer func() { _ = recover() }()
		SetLevelBudgetsV4(o, [NumLevels]float64{10, 10, 10, 10, 10, 10, 3})
		t.Error("SetLevelBudgetsV4 with a budget of 3 did not panic")
	}()
	if !slices.Equal(before, o.Levels) {
		t.Error("a panicking SetLevelBudgetsV4 changed the levels")
	}
	// The per-level and adaptive setters' averages: version 4 and the
	// average's own names, and nothing written on an invalid average.
	for name, set := range map[string]func(*pebble.Options, float64){
		"SetLevelPoliciesV4":   SetLevelPoliciesV4,
		"SetAdaptiveBudgetsV4": func(o *pebble.Options, avg float64) { SetAdaptiveBudgetsV4(o, avg) },
	} {
		o := &pebble.Options{}
		set(o, 10.3)
		if p, ok := o.Levels[NumLevels-1].FilterPolicy.(Policy); ok && p.Version() != codec.NewestVersion || o.Filters[NewV4Policy(10.3).Name()] == nil {
			t.Errorf("%s: L6 writes %v; %s registered: %v", name, o.Levels[NumLevels-1].FilterPolicy, NewV4Policy(10.3).Name(), o.Filters[NewV4Policy(10.3).Name()] != nil)
		}
		if got := o.Levels[NumLevels-1].FilterPolicy.Name(); !strings.HasPrefix(got, "lsmcuckoo.v4.bpk=") {
			t.Errorf("%s: L6 named %s", name, got)
		}
		o = &pebble.Options{}
		func() {
			defer func() { _ = recover() }()
			set(o, 3)
			t.Errorf("%s(3) did not panic", name)
		}()
		if o.Levels != nil || o.Filters != nil || o.EventListener != nil {
			t.Errorf("a panicking %s wrote into the options", name)
		}
	}
}

func TestModelLevelShapeLeavesOptions(t *testing.T) {
	o := &pebble.Options{Levels: []pebble.LevelOptions{{}}}
	s := ModelLevelShape(o)
	if o.FS != nil || o.Levels[0].TargetFileSize != 0 || o.EventListener != nil || o.MemTableSize != 0 {
		t.Errorf("ModelLevelShape wrote into the options: %+v", o)
	}
	if s.Keys[NumLevels-1] != 1 || !(s.Keys[1] < s.Keys[2]) || s.L0Runs < 1 {
		t.Errorf("shape %+v", s)
	}
}

// bloomPolicy is Pebble's bloom filter at go-ethereum's setting.
var bloomPolicy pebble.FilterPolicy = bloom.FilterPolicy(10)
