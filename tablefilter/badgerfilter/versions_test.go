package badgerfilter

import (
	"testing"

	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// TestFilterReadsOlderVersions: a store built on Badger's table format
// keeps the filters its tables got from earlier releases, whose New wrote
// codec format version 2 (and before it version 1). Those blocks, built
// from the hashes Badger's builder collects for a real table with several
// versions per key, must be read by this release's Filter with no false
// negative over every entry the table returns, reject absent keys at the
// rate their own trailer promises, and answer exactly as the codec's
// reader does; the filter New writes today is version 3.
func TestFilterReadsOlderVersions(t *testing.T) {
	const n = 40000 // 20k present keys (even indexes), 1 to 3 versions each
	tbl, hashes := badgerTable(t, n, func(i int) int { return 1 + (i/2)%3 }, 0)
	if got := mustInfo(t, New(hashes, 10)).Version; got != 3 {
		t.Fatalf("New writes format version %d, want 3", got)
	}
	for _, version := range []int{2, 1} {
		// What an earlier release's New(hashes, 10) wrote: the same
		// options, that release's default version.
		b := codec.NewBuilder(codec.Options{Hash: codec.HashHost32, BitsPerKey: 10, Version: version})
		for _, h := range hashes {
			b.AddHash32(h)
		}
		old := Filter(b.Finish(nil))
		info := mustInfo(t, old)
		if info.Version != version || info.Hash != codec.HashHost32 || info.Keys != n/2 {
			t.Fatalf("v%d: block is version %d, hash kind %d, %d keys; want %d, HashHost32, %d", version, info.Version, info.Hash, info.Keys, version, n/2)
		}
		it := tbl.NewIterator(0)
		entries := 0
		for it.Rewind(); it.Valid(); it.Next() {
			user := y.ParseKey(it.Key())
			if !old.MayContainKey(user) || !old.MayContain(y.Hash(user)) {
				t.Fatalf("v%d block: false negative for %q", version, user)
			}
			entries++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if entries != len(hashes) {
			t.Fatalf("iterated %d entries, the builder saw %d", entries, len(hashes))
		}
		const probes = 200000
		fp := 0
		for i := 1; i < 2*probes; i += 2 {
			k := badgerUserKey(i)
			got := old.MayContainKey(k)
			if got != codec.MayContainHash32(old, y.Hash(k)) {
				t.Fatalf("v%d block: Filter and codec.MayContainHash32 disagree on %q", version, k)
			}
			if got {
				fp++
			}
		}
		rate := float64(fp) / probes
		t.Logf("v%d block: %d bytes (%.2f bits/key), expected FPR %.3f%%, measured %.3f%%",
			version, len(old), info.BitsPerKey, 100*info.ExpectedFPR, 100*rate)
		if info.ExpectedFPR <= 0 || rate > 1.5*info.ExpectedFPR+0.001 {
			t.Errorf("v%d block: measured FPR %.3f%%, its trailer plans %.3f%%: the block is not filtering", version, 100*rate, 100*info.ExpectedFPR)
		}
	}
}

func mustInfo(t *testing.T, f Filter) codec.Info {
	t.Helper()
	d, err := codec.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return d.Info()
}
