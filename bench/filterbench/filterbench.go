// Package filterbench measures filters side by side on the same keys: this
// project's codec beside Pebble's bloom filter, Badger's y.Filter and
// FastFilter's binary fuse filters. The testing.B benchmarks and the report
// command both call it, so there is one copy of every measurement.
package filterbench

import (
	"fmt"
	"math/rand/v2"
	"time"
	"unsafe"

	"github.com/FastFilter/xorfilter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Filter is a built filter as a store would query it: from the key's bytes,
// hashing included.
type Filter interface {
	MayContain(key []byte) bool
	// Bytes is the filter's serialized (or, for in-memory structures,
	// payload) size.
	Bytes() int
	// Copy returns an equal filter in freshly allocated memory whose first
	// byte lies skew bytes past a 64-byte boundary: skew = 64·k spreads
	// copies over cache sets (identical large allocations are
	// page-aligned), skew mod 64 is the copy's misalignment.
	Copy(skew int) Filter
}

// Family builds one kind of filter at one setting.
type Family struct {
	Name  string // e.g. "lsmcuckoo/9.6", "pebble-bloom/10"
	Kind  string // "lsmcuckoo", "lsmcuckoo-densest", "lsmcuckoo-v2", "lsmcuckoo-v1", "pebble-bloom", "badger-bloom", "binary-fuse"
	Param float64
	Build func(keys [][]byte) Filter
}

// Cuckoo is this project's filter at a bits/key budget, built and probed
// through the Pebble policy a user adopts (tablefilter.NewPolicy: codec
// format version 3).
func Cuckoo(bitsPerKey float64) Family {
	return Family{fmt.Sprintf("lsmcuckoo/%g", bitsPerKey), "lsmcuckoo", bitsPerKey, func(keys [][]byte) Filter {
		return policyFilter(tablefilter.NewPolicy(bitsPerKey), keys)
	}}
}

// CuckooDensest is Cuckoo with version 3's densest layout
// (tablefilter.NewDensestPolicy): fuller lines, a lower false-positive
// rate, more negative lookups reading a second line.
func CuckooDensest(bitsPerKey float64) Family {
	return Family{fmt.Sprintf("lsmcuckoo-densest/%g", bitsPerKey), "lsmcuckoo-densest", bitsPerKey, func(keys [][]byte) Filter {
		return policyFilter(tablefilter.NewDensestPolicy(bitsPerKey), keys)
	}}
}

// CuckooV2 is Cuckoo in codec format version 2 (tablefilter.NewV2Policy):
// one line per lookup like version 3, with lines of four-slot buckets.
func CuckooV2(bitsPerKey float64) Family {
	return Family{fmt.Sprintf("lsmcuckoo-v2/%g", bitsPerKey), "lsmcuckoo-v2", bitsPerKey, func(keys [][]byte) Filter {
		return policyFilter(tablefilter.NewV2Policy(bitsPerKey), keys)
	}}
}

// CuckooV1 is Cuckoo in codec format version 1 (tablefilter.NewV1Policy):
// the denser layout whose lookups read an offset table, then the buckets.
func CuckooV1(bitsPerKey float64) Family {
	return Family{fmt.Sprintf("lsmcuckoo-v1/%g", bitsPerKey), "lsmcuckoo-v1", bitsPerKey, func(keys [][]byte) Filter {
		return policyFilter(tablefilter.NewV1Policy(bitsPerKey), keys)
	}}
}

func policyFilter(p pebble.FilterPolicy, keys [][]byte) Filter {
	w := p.NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return pebbleFilter{p, w.Finish(nil)}
}

// PebbleBloom is Pebble's table bloom filter (github.com/cockroachdb/pebble/v2/bloom).
func PebbleBloom(bitsPerKey int) Family {
	return Family{fmt.Sprintf("pebble-bloom/%d", bitsPerKey), "pebble-bloom", float64(bitsPerKey), func(keys [][]byte) Filter {
		return policyFilter(bloom.FilterPolicy(bitsPerKey), keys)
	}}
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
func (f pebbleFilter) Copy(skew int) Filter { return pebbleFilter{f.p, skewed(f.data, skew)} }

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
	return Family{name, "badger-bloom", float64(bitsPerKey), func(keys [][]byte) Filter {
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
func (f badgerFilter) Copy(skew int) Filter       { return badgerFilter(skewed(f, skew)) }

// BinaryFuse8 and BinaryFuse16 are FastFilter's binary fuse filters over the
// keys' xxhash64, the same key hash this project uses.
func BinaryFuse8() Family {
	return Family{"binary-fuse8", "binary-fuse", 8, func(keys [][]byte) Filter {
		return fuseFilter[uint8]{mustFuse[uint8](keys)}
	}}
}

// BinaryFuse16 is BinaryFuse8 with 16-bit fingerprints.
func BinaryFuse16() Family {
	return Family{"binary-fuse16", "binary-fuse", 16, func(keys [][]byte) Filter {
		return fuseFilter[uint16]{mustFuse[uint16](keys)}
	}}
}

func mustFuse[T xorfilter.Unsigned](keys [][]byte) *xorfilter.BinaryFuse[T] {
	hashes := make([]uint64, len(keys))
	for i, k := range keys {
		hashes[i] = keyhash.Hash(k)
	}
	f, err := xorfilter.NewBinaryFuse[T](hashes)
	if err != nil {
		// Only an empty key set fails; an empty filter rejects everything.
		return &xorfilter.BinaryFuse[T]{}
	}
	return f
}

type fuseFilter[T xorfilter.Unsigned] struct{ f *xorfilter.BinaryFuse[T] }

func (f fuseFilter[T]) MayContain(key []byte) bool {
	if len(f.f.Fingerprints) == 0 {
		return false
	}
	return f.f.Contains(keyhash.Hash(key))
}
func (f fuseFilter[T]) Bytes() int {
	var zero T
	return len(f.f.Fingerprints)*sizeOf(zero) + 28
}
func (f fuseFilter[T]) Copy(skew int) Filter {
	c := *f.f
	var zero T
	buf := make([]T, len(f.f.Fingerprints)+skew/sizeOf(zero))
	c.Fingerprints = buf[skew/sizeOf(zero):]
	copy(c.Fingerprints, f.f.Fingerprints)
	return fuseFilter[T]{&c}
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

func sizeOf[T xorfilter.Unsigned](v T) int {
	switch any(v).(type) {
	case uint8:
		return 1
	case uint16:
		return 2
	default:
		return 4
	}
}

// Families is the standard line-up.
func Families() []Family {
	return []Family{
		Cuckoo(10), CuckooDensest(10), CuckooV2(10), CuckooV1(10), PebbleBloom(10),
		Cuckoo(16), CuckooDensest(16), CuckooV2(16), CuckooV1(16), PebbleBloom(16),
		Cuckoo(9.6), Cuckoo(10.6), Cuckoo(12), Cuckoo(15.9),
		CuckooDensest(9.6), CuckooDensest(10.6), CuckooDensest(12), CuckooDensest(15.9),
		CuckooV2(9.6), CuckooV2(10.6), CuckooV2(12), CuckooV2(15.9),
		CuckooV1(9.6), CuckooV1(10.6), CuckooV1(15.9),
		PebbleBloom(6),
		BadgerBloom(0), BadgerBloom(10), BadgerBloom(16),
		BinaryFuse8(), BinaryFuse16(),
	}
}

// CoreFamilies is the side-by-side of the format versions: lsmcuckoo
// version 3 (the default, and its densest layout), version 2 and version 1
// beside Pebble's bloom filter at each budget (every whole budget from 8
// to 16 bits per key when none is given).
func CoreFamilies(bitsPerKey ...int) []Family {
	if len(bitsPerKey) == 0 {
		bitsPerKey = []int{8, 9, 10, 11, 12, 13, 14, 15, 16}
	}
	var fams []Family
	for _, bpk := range bitsPerKey {
		fams = append(fams, Cuckoo(float64(bpk)), CuckooDensest(float64(bpk)), CuckooV2(float64(bpk)), CuckooV1(float64(bpk)), PebbleBloom(bpk))
	}
	return fams
}

// PlotFamilies is the line-up with enough settings per family to draw the
// FPR-vs-space curves of the full report.
func PlotFamilies() []Family {
	return []Family{
		Cuckoo(7), Cuckoo(8), Cuckoo(9), Cuckoo(9.6), Cuckoo(10), Cuckoo(10.6), Cuckoo(11), Cuckoo(12), Cuckoo(13), Cuckoo(14), Cuckoo(15), Cuckoo(15.9), Cuckoo(16), Cuckoo(18),
		CuckooDensest(8), CuckooDensest(9), CuckooDensest(9.6), CuckooDensest(10), CuckooDensest(10.6), CuckooDensest(11), CuckooDensest(12), CuckooDensest(13), CuckooDensest(14), CuckooDensest(15.9), CuckooDensest(16),
		CuckooV2(8), CuckooV2(9), CuckooV2(9.6), CuckooV2(10), CuckooV2(10.6), CuckooV2(11), CuckooV2(12), CuckooV2(14), CuckooV2(15.9), CuckooV2(16),
		CuckooV1(8), CuckooV1(9.6), CuckooV1(10), CuckooV1(10.6), CuckooV1(12), CuckooV1(14), CuckooV1(15.9), CuckooV1(16),
		PebbleBloom(6), PebbleBloom(8), PebbleBloom(9), PebbleBloom(10), PebbleBloom(11), PebbleBloom(12), PebbleBloom(13), PebbleBloom(14), PebbleBloom(15), PebbleBloom(16), PebbleBloom(20),
		BadgerBloom(0), BadgerBloom(10), BadgerBloom(16),
		BinaryFuse8(), BinaryFuse16(),
	}
}

// Result is one family's figures on one key set.
type Result struct {
	Family      string  `json:"family"`
	Kind        string  `json:"kind"`
	Param       float64 `json:"param"`
	Keys        int     `json:"keys"`
	Bytes       int     `json:"bytes"`
	BitsPerKey  float64 `json:"bits_per_key"`
	FPR         float64 `json:"fpr"`
	Probes      int     `json:"probes"`
	BuildNsKey  float64 `json:"build_ns_per_key"`
	HotNs       float64 `json:"hot_lookup_ns"`
	ColdNs      float64 `json:"cold_lookup_ns"`
	ColdLatNs   float64 `json:"cold_latency_ns"`
	ColdMiB     float64 `json:"cold_mib"`
	BuildAllocs float64 `json:"build_allocs"`
	// The same lookups on filters that start 1..63 bytes past a 64-byte
	// boundary (Pebble hands filters at any alignment); 0 when not measured.
	HotUnalignedNs  float64 `json:"hot_unaligned_ns,omitempty"`
	ColdUnalignedNs float64 `json:"cold_unaligned_ns,omitempty"`
	// Ratios to the run's baseline family (Config.Baseline): for each
	// timing, the median over repetitions of that repetition's ratio; 0
	// when the run had no baseline.
	Ratios Ratios `json:"ratios,omitzero"`
}

// Ratios are a family's timings divided by the baseline's.
type Ratios struct {
	Build   float64 `json:"build"`
	Hot     float64 `json:"hot"`
	Cold    float64 `json:"cold"`
	ColdLat float64 `json:"cold_latency"`
}

// BuildTimed builds fam's filter and returns it with the time per key.
func BuildTimed(fam Family, keys [][]byte) (Filter, float64) {
	start := time.Now()
	f := fam.Build(keys)
	el := time.Since(start)
	return f, float64(el.Nanoseconds()) / float64(max(1, len(keys)))
}

// FalseNegatives counts present keys the filter rejects; any is a bug.
func FalseNegatives(f Filter, keys [][]byte) int {
	n := 0
	for _, k := range keys {
		if !f.MayContain(k) {
			n++
		}
	}
	return n
}

// FPR is the share of absent keys the filter accepts.
func FPR(f Filter, absent [][]byte) float64 {
	n := 0
	for _, k := range absent {
		if f.MayContain(k) {
			n++
		}
	}
	return float64(n) / float64(max(1, len(absent)))
}

// LookupNs times negative lookups of absent keys against one filter (hot:
// after the first pass the filter sits in cache when it fits).
func LookupNs(f Filter, absent [][]byte, lookups int) float64 {
	sink := 0
	start := time.Now()
	for i := 0; i < lookups; i++ {
		if f.MayContain(absent[i%len(absent)]) {
			sink++
		}
	}
	el := time.Since(start)
	sinkHole += sink
	return float64(el.Nanoseconds()) / float64(lookups)
}

var sinkHole int

// UnalignedLookupNs is LookupNs averaged over copies of f starting 1..63
// bytes past a 64-byte boundary.
func UnalignedLookupNs(f Filter, absent [][]byte, lookups int) float64 {
	total := 0.0
	per := max(1, lookups/63)
	for off := 1; off < 64; off++ {
		g := f.Copy(off)
		LookupNs(g, absent, min(per, len(absent))) // warm
		total += LookupNs(g, absent, per)
	}
	return total / 63
}

// ColdSet is many copies of one filter spread over at least minBytes of
// memory; lookups go to a random copy so nearly every probe misses the CPU
// caches, as lookups into the block cache of a large store do.
type ColdSet struct {
	Copies []Filter
	Order  []uint32 // copy index per lookup, fixed so every family does the same
}

// NewColdSet copies f until the copies hold minBytes, each copy starting
// on a 64-byte boundary.
func NewColdSet(f Filter, minBytes int, lookups int, seed uint64) *ColdSet {
	return newColdSet(f, minBytes, lookups, seed, false)
}

// NewUnalignedColdSet is NewColdSet with every copy starting 1..63 bytes
// past a 64-byte boundary.
func NewUnalignedColdSet(f Filter, minBytes int, lookups int, seed uint64) *ColdSet {
	return newColdSet(f, minBytes, lookups, seed, true)
}

func newColdSet(f Filter, minBytes int, lookups int, seed uint64, unaligned bool) *ColdSet {
	n := max(1, (minBytes+f.Bytes()-1)/max(1, f.Bytes()))
	cs := &ColdSet{Copies: make([]Filter, n), Order: make([]uint32, lookups)}
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range cs.Copies {
		skew := 64 * r.IntN(64)
		if unaligned {
			skew += 1 + r.IntN(63)
		}
		cs.Copies[i] = f.Copy(skew)
	}
	for i := range cs.Order {
		cs.Order[i] = uint32(r.IntN(n))
	}
	return cs
}

// MiB is the memory the copies occupy.
func (cs *ColdSet) MiB() float64 {
	return float64(len(cs.Copies)*cs.Copies[0].Bytes()) / (1 << 20)
}

// LatencyNs times the same lookups one at a time, as a Get that must have
// a table's answer before it goes on pays for them: a clock read after each
// lookup, then the clock's own cost, timed alone in the same call,
// subtracted. On linux/amd64 the clock is an ordered TSC read in the vDSO
// (LFENCE;RDTSC or RDTSCP), which does not start before every earlier
// instruction, the lookup's cache misses included, has finished, so no two
// lookups are ever in flight together. (A chain that feeds each answer into
// the next lookup's address does not do that: the processor predicts the
// answer, which for absent keys is nearly always "no", and runs ahead.)
// LookupNs, where the processor overlaps independent lookups, is the
// throughput of a tight loop.
func (cs *ColdSet) LatencyNs(absent [][]byte) float64 {
	clock := clockReadNs(len(cs.Order))
	sink := 0
	start := time.Now()
	var end time.Time
	for i, c := range cs.Order {
		if cs.Copies[c].MayContain(absent[i%len(absent)]) {
			sink++
		}
		end = time.Now()
	}
	sinkHole += sink
	return max(0, float64(end.Sub(start).Nanoseconds())/float64(len(cs.Order))-clock)
}

// clockReadNs is the cost of one clock read in a loop of n.
func clockReadNs(n int) float64 {
	start := time.Now()
	end := start
	for range n {
		end = time.Now()
	}
	return float64(end.Sub(start).Nanoseconds()) / float64(max(1, n))
}

// LookupNs times negative lookups, each into a random copy.
func (cs *ColdSet) LookupNs(absent [][]byte) float64 {
	sink := 0
	start := time.Now()
	for i, c := range cs.Order {
		if cs.Copies[c].MayContain(absent[i%len(absent)]) {
			sink++
		}
	}
	el := time.Since(start)
	sinkHole += sink
	return float64(el.Nanoseconds()) / float64(len(cs.Order))
}
