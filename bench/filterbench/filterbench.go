// Package filterbench measures table filters side by side on the same
// keys: lsmcuckoo's Pebble policies beside Pebble's bloom filter, Badger's
// y.Filter and binary fuse filters. A Family names one filter at one
// setting; Measure builds every family on the caller's keys and probes it
// with the caller's absent keys (false-positive rate, build time, hot and
// cold lookups, false negatives); PlotFPR and PlotFrontier draw the
// results. The bench report and the testing.B benchmarks call this same
// code, so there is one copy of every measurement.
package filterbench

import (
	"fmt"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/bench/binaryfuse"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// filter is a built filter as a store would query it: from the key's bytes,
// hashing included.
type filter interface {
	MayContain(key []byte) bool
	// Bytes is the filter's serialized (or, for in-memory structures,
	// payload) size.
	Bytes() int
	// Copy returns an equal filter in freshly allocated memory whose first
	// byte lies skew bytes past a 64-byte boundary: skew = 64·k spreads
	// copies over cache sets (identical large allocations are
	// page-aligned), skew mod 64 is the copy's misalignment.
	Copy(skew int) filter
}

// Family is one kind of filter at one setting. A family with a Policy is
// built and probed through that Pebble policy, as Pebble builds and probes
// a table's filter: any pebble.FilterPolicy can be measured by naming it
// in a Family literal.
type Family struct {
	Name   string  // e.g. "lsmcuckoo/9.6", "pebble-bloom/10"
	Kind   string  // the curve it is drawn on, e.g. "lsmcuckoo", "lsmcuckoo-densest", "lsmcuckoo-v4", "pebble-bloom", "badger-bloom", "binary-fuse"
	Param  float64 // its setting: bits per key, or a fingerprint width
	Policy pebble.FilterPolicy
	// build builds the filters that have no Pebble policy.
	build func(keys [][]byte) filter
}

// newFilter builds the family's filter over keys.
func (f Family) newFilter(keys [][]byte) filter {
	if f.build != nil {
		return f.build(keys)
	}
	return policyFilter(f.Policy, keys)
}

// Cuckoo is lsmcuckoo at a bits/key budget through the Pebble policy a
// user adopts (tablefilter.NewPolicy).
func Cuckoo(bitsPerKey float64) Family {
	return Family{Name: fmt.Sprintf("lsmcuckoo/%g", bitsPerKey), Kind: "lsmcuckoo", Param: bitsPerKey,
		Policy: tablefilter.NewPolicy(bitsPerKey)}
}

// CuckooDensest is Cuckoo with version 3's densest layout
// (tablefilter.NewDensestPolicy): fuller lines, a lower false-positive
// rate, more negative lookups reading a second line.
func CuckooDensest(bitsPerKey float64) Family {
	return Family{Name: fmt.Sprintf("lsmcuckoo-densest/%g", bitsPerKey), Kind: "lsmcuckoo-densest", Param: bitsPerKey,
		Policy: tablefilter.NewDensestPolicy(bitsPerKey)}
}

// CuckooV4 is lsmcuckoo in codec format version 4
// (tablefilter.NewV4Policy): full lines holding their keys as the solution
// of a linear system, the lowest false-positive rate lsmcuckoo writes for
// a budget, with a good share of negative lookups reading a second line.
// Its own family, apart from CuckooDensest, so that each printed name is
// the policy a user would set.
func CuckooV4(bitsPerKey float64) Family {
	return Family{Name: fmt.Sprintf("lsmcuckoo-v4/%g", bitsPerKey), Kind: "lsmcuckoo-v4", Param: bitsPerKey,
		Policy: tablefilter.NewV4Policy(bitsPerKey)}
}

// PebbleBloom is Pebble's table bloom filter (github.com/cockroachdb/pebble/v2/bloom).
func PebbleBloom(bitsPerKey int) Family {
	return Family{Name: fmt.Sprintf("pebble-bloom/%d", bitsPerKey), Kind: "pebble-bloom", Param: float64(bitsPerKey),
		Policy: bloom.FilterPolicy(bitsPerKey)}
}

func policyFilter(p pebble.FilterPolicy, keys [][]byte) filter {
	w := p.NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return pebbleFilter{p, w.Finish(nil)}
}

// pebbleFilter is a table filter probed through its Pebble policy.
type pebbleFilter struct {
	p    pebble.FilterPolicy
	data []byte
}

func (f pebbleFilter) MayContain(key []byte) bool {
	return f.p.MayContain(pebble.TableFilter, f.data, key)
}
func (f pebbleFilter) Bytes() int           { return len(f.data) }
func (f pebbleFilter) Copy(skew int) filter { return pebbleFilter{f.p, skewed(f.data, skew)} }

// BadgerBloom is Badger's y.Filter built as Badger's table builder does: from
// y.Hash of every key. bitsPerKey 0 means Badger's default sizing,
// y.BloomBitsPerKey(n, 0.01), which comes out at 7. Its lookups hash the
// key (MayContainKey), like every filter here; Badger's own reader hashes
// once per Get and reuses the hash for every table it checks, and reads the
// filter out of the table's flatbuffer index first.
func BadgerBloom(bitsPerKey int) Family {
	name := fmt.Sprintf("badger-bloom/%d", bitsPerKey)
	if bitsPerKey == 0 {
		name = "badger-bloom/default"
	}
	return Family{Name: name, Kind: "badger-bloom", Param: float64(bitsPerKey), build: func(keys [][]byte) filter {
		hashes := make([]uint32, len(keys))
		for i, k := range keys {
			hashes[i] = y.Hash(k)
		}
		bpk := bitsPerKey
		if bpk == 0 {
			bpk = y.BloomBitsPerKey(len(keys), 0.01)
		}
		return badgerFilter(y.NewFilter(hashes, bpk))
	}}
}

type badgerFilter y.Filter

func (f badgerFilter) MayContain(key []byte) bool { return y.Filter(f).MayContainKey(key) }
func (f badgerFilter) Bytes() int                 { return len(f) }
func (f badgerFilter) Copy(skew int) filter       { return badgerFilter(skewed(f, skew)) }

// BinaryFuse is a binary fuse filter of w-bit fingerprints
// (binaryfuse.NewPolicy; w one of binaryfuse.Widths): the structure of
// Pebble master's binary fuse table filters, through the Pebble policy.
func BinaryFuse(w int) Family {
	return Family{Name: fmt.Sprintf("binary-fuse/%d", w), Kind: "binary-fuse", Param: float64(w),
		Policy: binaryfuse.NewPolicy(w)}
}

// skewed copies b into a new allocation, starting skew bytes past a
// 64-byte boundary.
func skewed(b []byte, skew int) []byte {
	buf := make([]byte, len(b)+skew+64)
	start := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%64)) % 64
	out := buf[start+skew : start+skew+len(b) : start+skew+len(b)]
	copy(out, b)
	return out
}
