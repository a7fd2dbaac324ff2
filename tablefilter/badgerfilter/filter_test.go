package badgerfilter

import (
	"fmt"
	"math"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// badgerUserKey is the user key of index i. Present keys have even i,
// absent probes odd i: the same shape, interleaved.
func badgerUserKey(i int) []byte { return fmt.Appendf(nil, "key%010d", i) }

// badgerTable writes a real Badger SST with Badger's own table builder:
// the user keys of keys[i] for i < n even, each with versions(i) versions,
// in Badger's order (key ascending, newest version first). It returns the
// opened table and the hashes the builder collected for its bloom filter,
// computed the way Builder.addHelper does: y.Hash(y.ParseKey(internalKey))
// for every entry added. fp is Options.BloomFalsePositive (0: no bloom).
func badgerTable(tb testing.TB, n int, versions func(i int) int, fp float64) (*table.Table, []uint32) {
	tb.Helper()
	opts := table.Options{
		BlockSize:          4 << 10,
		BloomFalsePositive: fp,
		TableSize:          256 << 20,
		Compression:        options.None,
	}
	b := table.NewTableBuilder(opts)
	defer b.Close()
	var hashes []uint32
	for i := 0; i < n; i += 2 {
		for v := versions(i); v >= 1; v-- {
			k := y.KeyWithTs(badgerUserKey(i), uint64(v))
			hashes = append(hashes, y.Hash(y.ParseKey(k)))
			b.Add(k, y.ValueStruct{Value: fmt.Appendf(nil, "v%d", v), Meta: 0}, 0)
		}
	}
	tbl, err := table.CreateTable(table.NewFilename(1, tb.TempDir()), b)
	if err != nil {
		tb.Fatal(err)
	}
	// Close unmaps and closes the file without deleting it (DecrRef to zero
	// would delete it); TempDir removes it afterwards.
	tb.Cleanup(func() {
		if err := tbl.Close(-1); err != nil {
			tb.Error(err)
		}
	})
	return tbl, hashes
}

// TestFilterRealTable builds a Filter from the hashes Badger's
// builder collects for a real table with several versions per key, reads
// every key back through the table's iterator, and compares with the bloom
// filter Badger stores in an otherwise identical table.
func TestFilterRealTable(t *testing.T) {
	const n = 40000 // 20k present keys with 1-3 versions: ~40k entries
	versions := func(i int) int { return 1 + (i/2)%3 }
	ours, hashes := badgerTable(t, n, versions, 0)
	if ours.BloomFilterSize() != 0 {
		t.Fatalf("BloomFalsePositive 0 still stored a %d-byte bloom filter", ours.BloomFilterSize())
	}
	f := New(hashes, 10)

	info, err := codec.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Info(); got.Keys != n/2 || got.Hash != codec.HashHost32 {
		t.Fatalf("filter holds %d keys of hash kind %d, want %d distinct of kind HashHost32 (from %d hashes)", got.Keys, got.Hash, n/2, len(hashes))
	}

	// Every entry of the table, as the table itself returns it, passes.
	it := ours.NewIterator(0)
	entries := 0
	for it.Rewind(); it.Valid(); it.Next() {
		user := y.ParseKey(it.Key())
		if Hash(user) != y.Hash(user) {
			t.Fatalf("hash mismatch for %q", user)
		}
		if !f.MayContainKey(user) || !f.MayContain(y.Hash(user)) {
			t.Fatalf("false negative for %q (internal key %x)", user, it.Key())
		}
		entries++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if entries != len(hashes) {
		t.Fatalf("iterated %d entries, builder saw %d", entries, len(hashes))
	}

	// Badger's own filter for the same entries, read through the real
	// read path (Table.DoesNotHave). BloomFalsePositive 0.001 makes Badger
	// spend y.BloomBitsPerKey = 10 bits per entry, versions included.
	theirs, theirHashes := badgerTable(t, n, versions, 0.001)
	if y.BloomBitsPerKey(len(theirHashes), 0.001) != 10 {
		t.Fatalf("BloomFalsePositive 0.001 does not mean 10 bits per entry")
	}
	const probes = 400000
	fpOurs, fpTheirs := 0, 0
	for i := 1; i < 2*probes; i += 2 {
		k := badgerUserKey(i)
		if f.MayContainKey(k) {
			fpOurs++
		}
		if !theirs.DoesNotHave(y.Hash(k)) {
			fpTheirs++
		}
	}
	distinct := float64(n / 2)
	t.Logf("%d entries, %d distinct keys, %d absent probes", len(hashes), n/2, probes)
	t.Logf("Badger bloom, 10 bits/entry: %d bytes (%.1f bits/distinct key), FPR %.3f%%",
		theirs.BloomFilterSize(), float64(theirs.BloomFilterSize())*8/distinct, 100*float64(fpTheirs)/float64(probes))
	t.Logf("Filter(10):            %d bytes (%.1f bits/distinct key), FPR %.3f%%",
		len(f), float64(len(f))*8/distinct, 100*float64(fpOurs)/float64(probes))
	// Badger spends its budget on every version; ours on distinct keys.
	if len(f) > theirs.BloomFilterSize()*6/10 {
		t.Errorf("Filter(10) is %d bytes, Badger's 10 bits/entry bloom %d: want well under its size with ~2 versions per key", len(f), theirs.BloomFilterSize())
	}

	// At the bytes Badger spent, our filter must reject more.
	sameBytes := New(hashes, int(float64(theirs.BloomFilterSize())*8/distinct))
	fpSame := 0
	for i := 1; i < 2*probes; i += 2 {
		if sameBytes.MayContainKey(badgerUserKey(i)) {
			fpSame++
		}
	}
	t.Logf("Filter at Badger's bytes: %d bytes, FPR %.3f%%", len(sameBytes), 100*float64(fpSame)/float64(probes))
	if len(sameBytes) > theirs.BloomFilterSize()+codecRounding || fpSame > fpTheirs {
		t.Errorf("at <= Badger's bytes (%d vs %d), false positives %d vs Badger's %d", len(sameBytes), theirs.BloomFilterSize(), fpSame, fpTheirs)
	}
}

func TestFilterEdges(t *testing.T) {
	empty := New(nil, 10)
	for i := 0; i < 1000; i++ {
		if empty.MayContainKey(badgerUserKey(i)) {
			t.Fatal("filter of no keys answered maybe")
		}
	}
	var malformed Filter
	if !malformed.MayContain(1) || !Filter([]byte("LSMC")).MayContain(1) {
		t.Error("malformed filter answered no")
	}
	// A block of the other hash kind: the Badger reader must not trust it.
	pebbleBlock := codec.Build([][]byte{[]byte("a")}, codec.Options{})
	if !Filter(pebbleBlock).MayContainKey([]byte("zzz")) {
		t.Error("a HashKey64 block answered no to a Badger probe")
	}

	// All versions of one key, and a table with nothing but repeats.
	hashes := make([]uint32, 100000)
	for i := range hashes {
		hashes[i] = Hash([]byte("hot"))
	}
	f := New(hashes, 10)
	if info, err := codec.Decode(f); err != nil || info.Info().Keys != 1 {
		t.Fatalf("100000 repeats of one hash: %v, %+v", err, info)
	}
	if !f.MayContainKey([]byte("hot")) {
		t.Fatal("false negative")
	}

	// Budgets: 0 means the default, larger budgets give larger filters.
	keys := make([]uint32, 50000)
	for i := range keys {
		keys[i] = Hash(badgerUserKey(2 * i))
	}
	def, ten := New(keys, 0), New(keys, codec.DefaultBitsPerKey)
	if len(def) != len(ten) { // equal sizes; the bytes differ by their random seeds
		t.Error("bitsPerKey 0 is not the default budget")
	}
	prev := 0
	for _, bpk := range []int{6, 8, 10, 12, 16} {
		f := New(keys, bpk)
		bits := float64(len(f)) * 8 / float64(len(keys))
		if bits > float64(bpk)*1.05 || len(f) <= prev { // the codec's tolerance: codec.Options.BitsPerKey
			t.Errorf("bitsPerKey %d: %.2f bits/key (previous size %d, now %d)", bpk, bits, prev, len(f))
		}
		prev = len(f)
	}
}

func TestFilterFPR(t *testing.T) {
	keys := make([]uint32, 50000)
	for i := range keys {
		keys[i] = Hash(badgerUserKey(2 * i))
	}
	f := NewFPR(keys, 0.01)
	info, err := codec.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	fp, probes := 0, 200000
	for i := 1; i < 2*probes; i += 2 {
		if f.MayContainKey(badgerUserKey(i)) {
			fp++
		}
	}
	rate := float64(fp) / float64(probes)
	t.Logf("target 1%%: %.2f bits/key, expected %.3f%%, measured %.3f%%", info.Info().BitsPerKey, 100*info.Info().ExpectedFPR, 100*rate)
	if rate > 0.0125 || info.Info().ExpectedFPR > 0.01 {
		t.Errorf("target 1%%: measured %.3f%%, expected %.3f%%", 100*rate, 100*info.Info().ExpectedFPR)
	}
	// An invalid rate falls back to the default budget.
	for _, bad := range []float64{0, -1, 1, math.NaN()} {
		if len(NewFPR(keys, bad)) != len(New(keys, 0)) {
			t.Errorf("NewFPR(%v) is not the default filter", bad)
		}
	}
}

func TestFilterAllocs(t *testing.T) {
	keys := make([]uint32, 10000)
	for i := range keys {
		keys[i] = Hash(badgerUserKey(2 * i))
	}
	f := New(keys, 10)
	probe := badgerUserKey(7)
	if a := testing.AllocsPerRun(1000, func() { f.MayContainKey(probe); f.MayContain(12345) }); a != 0 {
		t.Errorf("lookups allocate %.1f times", a)
	}
}

// codecRounding is how far a filter of a large table may exceed the
// bytes its budget names: the codec spends whole 64-byte lines and keeps a
// large filter's keys per line, so it rounds the line count up (one line),
// and adds its 40-byte trailer (codec.Options.BitsPerKey allows up to 5%).
// A same-budget comparison with Badger's bloom filter, which rounds to a
// byte, allows that much.
const codecRounding = 64 + 40

// badgerSettings are the comparisons of BenchmarkFilter and
// TestFilterTargets. bloomFP is Badger's Options.BloomFalsePositive,
// for which Badger spends y.BloomBitsPerKey = ceil(log2(1/p)) bits per key:
// 0.001 → 10, 1.6e-5 → 16, 0.01 (its default) → 7.
var badgerSettings = []struct {
	name    string
	bloomFP float64
	bits    int // what Badger spends for bloomFP
	ours    func(hashes []uint32) Filter
}{
	{"bpk=10", 0.001, 10, func(h []uint32) Filter { return New(h, 10) }},
	{"bpk=16", 1.6e-5, 16, func(h []uint32) Filter { return New(h, 16) }},
	{"default-0.01/ours-bpk=7", 0.01, 7, func(h []uint32) Filter { return New(h, 7) }},
	{"default-0.01/ours-target-1%", 0.01, 7, func(h []uint32) Filter { return NewFPR(h, 0.01) }},
}

// badgerAbsent returns the hashes of probes absent keys of the table
// badgerTable writes: the odd indexes, same shape as the present keys.
func badgerAbsent(probes int) []uint32 {
	absent := make([]uint32, probes)
	for i := range absent {
		absent[i] = Hash(badgerUserKey(2*i + 1))
	}
	return absent
}

// badgerRates measures Badger's stored bloom filter (through
// Table.DoesNotHave) and f on the absent hashes.
func badgerRates(tbl *table.Table, f Filter, absent []uint32) (bloomFPR, oursFPR float64) {
	fpB, fpO := 0, 0
	for _, h := range absent {
		if !tbl.DoesNotHave(h) {
			fpB++
		}
		if f.MayContain(h) {
			fpO++
		}
	}
	return float64(fpB) / float64(len(absent)), float64(fpO) / float64(len(absent))
}

// TestFilterTargets checks the targets on 100k-key Badger tables: at
// 10 and 16 bits per key a Filter is no larger than the bloom filter
// Badger stores (up to codecRounding) and has a lower false-positive rate;
// at 16, at most half.
func TestFilterTargets(t *testing.T) {
	const n, probes = 200000, 1000000
	absent := badgerAbsent(probes)
	for _, c := range badgerSettings[:2] {
		tbl, hashes := badgerTable(t, n, func(int) int { return 1 }, c.bloomFP)
		if y.BloomBitsPerKey(len(hashes), c.bloomFP) != c.bits {
			t.Fatalf("%s: Badger spends %d bits per key, not %d", c.name, y.BloomBitsPerKey(len(hashes), c.bloomFP), c.bits)
		}
		f := c.ours(hashes)
		bloomFPR, oursFPR := badgerRates(tbl, f, absent)
		t.Logf("%s: Badger bloom %d bytes, FPR %.4f%%; Filter %d bytes, FPR %.4f%%",
			c.name, tbl.BloomFilterSize(), 100*bloomFPR, len(f), 100*oursFPR)
		if len(f) > tbl.BloomFilterSize()+codecRounding {
			t.Errorf("%s: %d bytes, more than Badger's %d (+%d)", c.name, len(f), tbl.BloomFilterSize(), codecRounding)
		}
		limit := bloomFPR
		if c.bits == 16 {
			limit = bloomFPR / 2
		}
		if oursFPR > limit {
			t.Errorf("%s: FPR %.4f%%, want <= %.4f%% (Badger's %.4f%%)", c.name, 100*oursFPR, 100*limit, 100*bloomFPR)
		}
	}
}

// BenchmarkFilter compares, on real Badger tables of 100k keys (one
// version each), the bloom filter Badger stores (probed through
// Table.DoesNotHave, its read path) with a Filter built from the same
// hashes. Each setting reports both filters' bits per key and
// false-positive rate over 4M absent keys of the same shape; the timed loop
// is one probe per iteration.
//
//	go test ./tablefilter/badgerfilter -run XXX -bench Filter
func BenchmarkFilter(b *testing.B) {
	const n = 200000 // indexes; the even half are the 100k keys
	const probes = 4000000
	absent := badgerAbsent(probes)
	for _, c := range badgerSettings {
		tbl, hashes := badgerTable(b, n, func(int) int { return 1 }, c.bloomFP)
		f := c.ours(hashes)
		keys := float64(len(hashes))
		bloomFPR, oursFPR := badgerRates(tbl, f, absent)
		b.Run(c.name+"/badger-bloom", func(b *testing.B) {
			i := 0
			for b.Loop() {
				tbl.DoesNotHave(absent[i%probes])
				i++
			}
			b.ReportMetric(float64(tbl.BloomFilterSize())*8/keys, "bits/key")
			b.ReportMetric(100*bloomFPR, "FPR%")
		})
		b.Run(c.name+"/lsmcuckoo", func(b *testing.B) {
			i := 0
			for b.Loop() {
				f.MayContain(absent[i%probes])
				i++
			}
			b.ReportMetric(float64(len(f))*8/keys, "bits/key")
			b.ReportMetric(100*oursFPR, "FPR%")
		})
	}
}

// TestFilterHugeBudget: New takes any int; one far past
// anything useful (say a byte count passed as bits per key) must not
// become a block of that size. Before the codec capped budgets, 100000
// bits per key built a block of 100000 bits per key, and 1<<40 an
// unbounded allocation.
func TestFilterHugeBudget(t *testing.T) {
	keys := make([]uint32, 1000)
	for i := range keys {
		keys[i] = Hash(badgerUserKey(2 * i))
	}
	capped := New(keys, 64)
	for _, bpk := range []int{1000, 100_000} {
		f := New(keys, bpk)
		if len(f) > 2*len(capped) {
			t.Errorf("bitsPerKey %d: %d bytes for %d keys (%d at 64 bits/key)", bpk, len(f), len(keys), len(capped))
		}
		for _, h := range keys {
			if !f.MayContain(h) {
				t.Fatalf("bitsPerKey %d: false negative", bpk)
			}
		}
	}
	if !t.Failed() {
		if f := New(keys, 1<<40); len(f) > 2*len(capped) {
			t.Errorf("bitsPerKey 1<<40: %d bytes", len(f))
		}
	}
}

// TestFilterFPROutsideRange: a target that is not a rate in (0, 1)
// builds the default-budget filter, as documented, and loses no key.
func TestFilterFPROutsideRange(t *testing.T) {
	hashes := make([]uint32, 20_000)
	for i := range hashes {
		hashes[i] = Hash(badgerUserKey(2 * i))
	}
	def := len(New(hashes, 0))
	for _, fpr := range []float64{0, -0.5, 1, 2, math.NaN(), math.Inf(1)} {
		f := NewFPR(hashes, fpr)
		if len(f) != def {
			t.Errorf("fpr %v: %d bytes, the default filter takes %d", fpr, len(f), def)
		}
		for _, h := range hashes {
			if !f.MayContain(h) {
				t.Fatalf("fpr %v: false negative", fpr)
			}
		}
	}
	if tight := NewFPR(hashes, 0.001); len(tight) <= def {
		t.Errorf("fpr 0.001: %d bytes, not above the default filter's %d", len(tight), def)
	}
}

// TestFilterFromCodecBuilder: a store that builds its filters with package
// codec alone (HashHost32, AddHash32) writes blocks that Filter reads, of
// the size New gives, and that codec.MayContainHash32 answers as Filter
// does: a Filter is exactly such a block.
func TestFilterFromCodecBuilder(t *testing.T) {
	tbl, hashes := badgerTable(t, 20_000, func(i int) int { return 1 + i%3 }, 0)
	b := codec.NewBuilder(codec.Options{Hash: codec.HashHost32, BitsPerKey: 10})
	for _, h := range hashes {
		b.AddHash32(h)
	}
	block := b.Finish(nil)
	f := Filter(block)
	if want := len(New(hashes, 10)); len(block) != want {
		t.Errorf("codec-built block of %d bytes, New %d", len(block), want)
	}
	it := tbl.NewIterator(0)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		user := y.ParseKey(it.Key())
		if !f.MayContainKey(user) || !codec.MayContainHash32(block, y.Hash(user)) {
			t.Fatalf("codec-built block: false negative for %q", user)
		}
	}
	for i := 1; i < 20_000; i += 2 {
		h := y.Hash(badgerUserKey(i))
		if f.MayContain(h) != codec.MayContainHash32(block, h) {
			t.Fatalf("Filter and codec.MayContainHash32 disagree on %q", badgerUserKey(i))
		}
	}
}
