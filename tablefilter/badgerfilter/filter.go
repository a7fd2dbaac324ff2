package badgerfilter

import (
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// Filter is a per-table filter with the shape of Badger's y.Filter: a
// byte slice built from the same 32-bit key hashes Badger's table builder
// collects, answering the same two questions. Badger (v4) has no hook to
// replace its bloom filter, so "compatible" means a store that embeds
// Badger's table format can swap one for the other where it builds and
// probes filters, with no change to what it hashes.
//
// The bytes are an lsmcuckoo block of hash kind codec.HashHost32; they are
// self-describing and need no parameters to read.
type Filter []byte

// New builds a filter from keys, the values
// y.Hash(y.ParseKey(internalKey)) in the order Badger's table builder
// collects them (one per entry added, so every version of a key repeats
// its hash). Repeats are removed: the budget is bitsPerKey bits per
// distinct hash, where y.NewFilter spends its bits on every entry,
// versions included. A bitsPerKey of 0 or less uses codec.DefaultBitsPerKey;
// the codec decides what a budget too small to filter well builds
// (codec.PlannedFPR gives the rate it plans for each budget).
//
// Only a 32-bit hash reaches Badger's read path, so the line, the quotient
// and the remainder are all derived from it. That puts a floor under the
// false-positive rate: a probe whose 32-bit hash equals a stored key's hash
// always answers true, which happens with probability about n/2^32 for n
// distinct keys, added to the filter's own rate (what codec.Decode(f).Info
// reports as ExpectedFPR). y.Filter has the same floor for the same reason.
//
// The filter is a codec block of format version 3, built with a fresh
// random seed: the same keys give filters of the same size and rate but
// different bytes. Filters written by earlier releases (format versions 2
// and 1) stay readable by MayContain and MayContainKey; a store that must
// keep writing blocks an earlier release reads builds them with
// codec.NewBuilder (Options.Hash = codec.HashHost32, Options.Version), and
// one that wants version 3's densest layout (a lower rate, more lookups
// reading a second line) with Options.Densest. The benchmark
// go test ./tablefilter/badgerfilter -run XXX -bench Filter compares it
// with the bloom filter Badger stores in the same table, through Badger's
// read path. At Badger's default of about 7 bits per key a cuckoo filter
// is no better than a bloom filter, because its fixed cost per key (the
// line header, the slack that keeps placement from failing) is a larger
// share of a small budget: for the 1% Badger's default asks for, use
// NewFPR.
func New(keys []uint32, bitsPerKey int) Filter {
	o := codec.Options{Hash: codec.HashHost32}
	if bitsPerKey > 0 {
		o.BitsPerKey = float64(bitsPerKey)
	}
	return build(keys, o)
}

// NewFPR builds the smallest filter whose expected
// false-positive rate is at most fpr (plus the n/2^32 floor described at
// New), the counterpart of Badger's
// Options.BloomFalsePositive. Badger's own sizing for a rate p,
// y.BloomBitsPerKey, spends ceil(log2(1/p)) bits per entry: 7 bits and 4
// probes for its default 0.01, whose rate (1-e^(-4/7))^4 is far above the
// rate asked for. An fpr that is not a rate strictly between 0 and 1
// (0, negative, 1 or more, NaN) asks for nothing meaningful: it builds the
// filter of New(keys, 0), codec.DefaultBitsPerKey bits per key.
func NewFPR(keys []uint32, fpr float64) Filter {
	if !(fpr > 0 && fpr < 1) {
		return New(keys, 0)
	}
	return build(keys, codec.Options{Hash: codec.HashHost32, FalsePositiveRate: fpr})
}

func build(keys []uint32, o codec.Options) Filter {
	b := codec.NewBuilder(o)
	for _, h := range keys {
		b.AddHash32(h)
	}
	return Filter(b.Finish(nil))
}

// MayContain reports whether a key whose Badger hash is h may be in the
// table, like y.Filter.MayContain. It is safe for concurrent use and does
// not allocate. It answers true for a malformed block; unlike y.Filter,
// which reports an empty or one-byte slice as "absent", an empty
// Filter is malformed and answers true (a filter built from no keys
// is a valid block and answers false).
func (f Filter) MayContain(h uint32) bool {
	return codec.MayContainHash32(f, h)
}

// MayContainKey reports whether key may be in the table, hashing it as
// Badger's read path does. key is the user key without Badger's 8-byte
// version suffix: Badger's levelHandler.get hashes y.ParseKey(internalKey)
// and its prefix iterator hashes the user key, and y.Filter.MayContainKey
// takes the same. Pass y.ParseKey(k) for a key made with y.KeyWithTs.
func (f Filter) MayContainKey(key []byte) bool {
	return f.MayContain(Hash(key))
}

// Hash is Badger's key hash, y.Hash: the one hash both Badger's table
// builder and its read path apply to user keys, so the filter sees exactly
// what Badger's own bloom filter sees.
func Hash(b []byte) uint32 { return y.Hash(b) }
