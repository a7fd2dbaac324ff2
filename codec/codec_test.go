package codec

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// mustNotMiss checks every key of a set against a block both ways: through
// the raw-bytes reader and through Decode.
func mustNotMiss(t *testing.T, name string, block []byte, keys [][]byte) {
	t.Helper()
	flt, err := Decode(block)
	if err != nil {
		t.Fatalf("%s: Decode of a freshly built block: %v", name, err)
	}
	for _, k := range keys {
		if !MayContain(block, k) || !flt.MayContain(k) {
			t.Fatalf("%s: false negative for key %q", name, k)
		}
	}
}

func TestNoFalseNegativesKeyShapes(t *testing.T) {
	race.SkipLong(t)
	sizes := []int{1, 2, 3, 7, 100, 1000, 10_000, 100_000}
	for _, n := range sizes {
		for _, set := range testkeys.Shapes(n) {
			for _, o := range []Options{{BitsPerKey: 9.6}, {BitsPerKey: 16}, {FingerprintBits: 5, BitsPerKey: 4}, {FalsePositiveRate: 0.01},
				{BitsPerKey: 9.6, Version: 1}, {BitsPerKey: 16, Version: 1}, {FingerprintBits: 5, BitsPerKey: 4, Version: 1}, {FalsePositiveRate: 0.01, Version: 1}} {
				name := fmt.Sprintf("n=%d/%s/%+v", n, set.Name, o)
				block := Build(set.Keys, o)
				mustNotMiss(t, name, block, set.Keys)
				info := mustInfo(t, block)
				if info.Keys != set.Distinct {
					t.Fatalf("%s: %d distinct keys recorded, want %d", name, info.Keys, set.Distinct)
				}
			}
		}
	}
}

func TestNoFalseNegativesMillion(t *testing.T) {
	race.SkipLong(t)
	if testing.Short() {
		t.Skip("1M keys: skipped with -short")
	}
	keys := testkeys.Random(1_000_000, 16, 7)
	for _, o := range []Options{{BitsPerKey: 8}, {BitsPerKey: 9.6}, {BitsPerKey: 10}, {BitsPerKey: 12}, {BitsPerKey: 15.9}, {BitsPerKey: 9.6, Version: 1}} {
		block := Build(keys, o)
		mustNotMiss(t, fmt.Sprintf("1M@%+v", o), block, keys)
	}
}

func TestDuplicatesAnyOrder(t *testing.T) {
	// The same key 1000 times in a row, then interleaved, then at the end:
	// a cuckoo pair has only eight slots, so any repeat that survives would
	// break placement, and must not cost a slot either.
	b := NewBuilder(Options{BitsPerKey: 10})
	others := testkeys.Sequential("k", 0, 5000)
	for i := 0; i < 1000; i++ {
		b.Add([]byte("dup"))
	}
	for i, k := range others {
		b.Add(k)
		b.Add([]byte("dup"))
		if i%3 == 0 {
			b.Add(others[i/2])
		}
	}
	block := b.Finish(nil)
	mustNotMiss(t, "dups", block, append(others, []byte("dup")))
	if info := mustInfo(t, block); info.Keys != len(others)+1 {
		t.Fatalf("stored %d keys, want %d distinct", info.Keys, len(others)+1)
	}
}

func TestBuilderReuse(t *testing.T) {
	b := NewBuilder(Options{BitsPerKey: 12})
	for round := 0; round < 3; round++ {
		keys := testkeys.Random(3000+round*1000, 16, uint64(10+round))
		for _, k := range keys {
			b.Add(k)
		}
		block := b.Finish(nil)
		mustNotMiss(t, fmt.Sprintf("round %d", round), block, keys)
		if got := mustInfo(t, block).Keys; got != len(keys) {
			t.Fatalf("round %d: %d keys, want %d (state leaked across Finish)", round, got, len(keys))
		}
	}
}

// TestWarmScratchReleasedAtGC checks that the scratch a Finish keeps warm
// for the next one goes back to the pool at a garbage collection, so that
// an idle process does not hold it.
func TestWarmScratchReleasedAtGC(t *testing.T) {
	b := NewBuilder(Options{BitsPerKey: 10})
	for _, k := range testkeys.Random(1000, 16, 4) {
		b.Add(k)
	}
	b.Finish(nil)
	if warmScratch.Load() == nil {
		t.Fatal("Finish kept no warm scratch")
	}
	// Cleanups run on their own goroutine after the collection.
	deadline := time.Now().Add(5 * time.Second)
	for warmScratch.Load() != nil {
		if time.Now().After(deadline) {
			t.Fatal("warm scratch still held after garbage collections")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// TestConcurrentBuilders runs builders on several goroutines at once: they
// share the pooled and warm scratch, which must never be handed to two
// Finish calls at the same time (go test -race).
func TestConcurrentBuilders(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			b := NewBuilder(Options{BitsPerKey: 10})
			for r := range 10 {
				keys := testkeys.Random(2000+r*100, 16, uint64(g*100+r))
				for _, k := range keys {
					b.Add(k)
				}
				block := b.Finish(nil)
				for _, k := range keys {
					if !MayContain(block, k) {
						t.Errorf("goroutine %d round %d: false negative", g, r)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestFinishAppends(t *testing.T) {
	keys := testkeys.Sequential("a", 0, 500)
	prefix := []byte("existing-bytes")
	out := Build(keys, Options{Seed: 5})
	b := NewBuilder(Options{Seed: 5})
	for _, k := range keys {
		b.Add(k)
	}
	got := b.Finish(append([]byte(nil), prefix...))
	if string(got[:len(prefix)]) != string(prefix) || string(got[len(prefix):]) != string(out) {
		t.Fatal("Finish must append the block after dst's bytes")
	}
}

func TestHost32(t *testing.T) {
	keys := testkeys.Random(50_000, 16, 3)
	b := NewBuilder(Options{BitsPerKey: 10, Hash: HashHost32})
	hashes := make([]uint32, len(keys))
	for i, k := range keys {
		hashes[i] = uint32(keyhash.Hash(k) >> 17) // any 32-bit host hash
		b.AddHash32(hashes[i])
	}
	block := b.Finish(nil)
	for _, h := range hashes {
		if !MayContainHash32(block, h) {
			t.Fatalf("false negative for host hash %#x", h)
		}
	}
	// A lookup of the wrong kind cannot be answered: it must say maybe.
	if !MayContain(block, []byte("anything")) {
		t.Fatal("HashKey64 lookup on a HashHost32 block must answer true")
	}
	key64 := Build(keys, Options{})
	if !MayContainHash32(key64, 12345) {
		t.Fatal("HashHost32 lookup on a HashKey64 block must answer true")
	}
}

// TestDecodedFilterHost32 checks the decoded Filter's methods against the
// package-level lookups for both hash kinds: a store that Decodes its
// Badger-style blocks once on load must be able to probe the Filter by the
// host hash, and a lookup of the wrong kind must say maybe.
func TestDecodedFilterHost32(t *testing.T) {
	keys := testkeys.Random(20_000, 16, 5)
	b := NewBuilder(Options{Hash: HashHost32})
	hashes := make([]uint32, len(keys))
	for i, k := range keys {
		hashes[i] = uint32(keyhash.Hash(k))
		b.AddHash32(hashes[i])
	}
	f, err := Decode(b.Finish(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		if !f.MayContainHash32(h) {
			t.Fatalf("decoded HashHost32 filter: false negative for %#x", h)
		}
	}
	rejected := 0
	for i := range 20_000 {
		h := uint32(keyhash.Hash([]byte{byte(i), byte(i >> 8), 'x'}))
		if f.MayContainHash32(h) != MayContainHash32(f.block, h) {
			t.Fatal("Filter.MayContainHash32 disagrees with MayContainHash32")
		}
		if !f.MayContainHash32(h) {
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatal("a decoded HashHost32 filter rejected no absent hash")
	}
	if !f.MayContain([]byte("anything")) {
		t.Fatal("Filter.MayContain on a HashHost32 block must answer true")
	}
	g, err := Decode(Build(keys, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if !g.MayContainHash32(12345) {
		t.Fatal("Filter.MayContainHash32 on a HashKey64 block must answer true")
	}
}

// TestBuilderWrongHashKindPanicsClearly: Add on a builder whose
// Options.Hash is not HashKey64 (HashHost32 or a value that is neither) and
// AddHash32 on one whose Options.Hash is not HashHost32 are programming
// errors; the panic must name the option to fix.
func TestBuilderWrongHashKindPanicsClearly(t *testing.T) {
	try := func(name string, call func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if msg, _ := r.(string); !strings.Contains(msg, "Options.Hash") {
				t.Errorf("%s: panic %v, want one naming Options.Hash", name, r)
			}
		}()
		call()
	}
	try("Add on HashHost32", func() { NewBuilder(Options{Hash: HashHost32}).Add([]byte("k")) })
	try("Add on an unknown kind", func() { NewBuilder(Options{Hash: 7}).Add([]byte("k")) })
	try("AddHash32 on HashKey64", func() { NewBuilder(Options{}).AddHash32(1) })
	try("AddHash32 on an unknown kind", func() { NewBuilder(Options{Hash: 7}).AddHash32(1) })
}

// TestUnknownVersionOptionBuildsDefault: Options.Version names no format
// this package writes (5, -1): the builder writes FormatVersion, as
// documented, and the block holds every key.
func TestUnknownVersionOptionBuildsDefault(t *testing.T) {
	keys := testkeys.Random(2_000, 16, 6)
	for _, v := range []int{-1, NewestVersion + 1, 99} {
		block := Build(keys, Options{Version: v})
		if info := mustInfo(t, block); info.Version != FormatVersion {
			t.Errorf("Options.Version %d built version %d, want %d", v, info.Version, FormatVersion)
		}
		for _, k := range keys {
			if !MayContain(block, k) {
				t.Fatalf("Options.Version %d: false negative", v)
			}
		}
	}
}

func mustInfo(t *testing.T, block []byte) Info {
	t.Helper()
	f, err := Decode(block)
	if err != nil {
		t.Fatal(err)
	}
	return f.Info()
}

// measureFPR probes absent keys and returns the observed rate.
func measureFPR(block []byte, absent [][]byte) float64 {
	fp := 0
	for _, k := range absent {
		if MayContain(block, k) {
			fp++
		}
	}
	return float64(fp) / float64(len(absent))
}

func TestFalsePositiveRate(t *testing.T) {
	absent := testkeys.Absent(200_000, 99)
	for _, n := range []int{1000, 10_000, 100_000} {
		keys := testkeys.Random(n, 16, 5)
		for _, bpk := range []float64{9.6, 10.6, 12, 15.9} {
			block := Build(keys, Options{BitsPerKey: bpk})
			info := mustInfo(t, block)
			got := measureFPR(block, absent)
			want := info.ExpectedFPR
			// Binomial noise over 200k probes plus 15% for the variation
			// of per-block load around its mean.
			sigma := math.Sqrt(want * (1 - want) / float64(len(absent)))
			if got > want*1.15+4*sigma || got < want*0.85-4*sigma {
				t.Errorf("n=%d bpk=%v: FPR %.4f%%, theory %.4f%% (r=%d load=%.3f)", n, bpk, 100*got, 100*want, info.V3.RemainderBits, info.V3.Load)
			}
			if info.BitsPerKey > bpk*1.05 {
				t.Errorf("n=%d: %.2f bits/key spent for a budget of %v", n, info.BitsPerKey, bpk)
			}
		}
	}
}
