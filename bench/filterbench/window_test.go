package filterbench

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkColdWindow shows what sets the cost of a loop of cold lookups
// (ColdSet.LookupNs: 256 MiB of filter copies, a random copy per lookup):
// not the cache misses alone but how many lookups' misses the processor
// keeps in flight, which is how many lookups fit in its window of
// instructions not yet retired. The probe "window+N" does what a
// one-line filter does first (hash the key, load the trailer and a line
// chosen from the hash and the block's length, both missing the caches)
// and then N rounds of work that does not wait for either load: its cost
// grows with N though no round touches memory. Pebble's bloom filter and
// both line formats run in the same loop, on the same keys and copies.
//
//	go test ./bench/filterbench -run X -bench ColdWindow -benchtime 3x
//
// Instructions per lookup of each probe (the README's figures) can be
// counted with valgrind's callgrind, the loop alone collected:
//
//	go test -c -o fb.test ./bench/filterbench
//	valgrind --tool=callgrind --toggle-collect='*coldSet*LookupNs' \
//	    ./fb.test -test.run X -test.bench ColdWindow -test.benchtime 1x
//
// gives the instructions of every LookupNs call of the run; callgrind's
// per-function breakdown (callgrind_annotate) splits them by probe.
func BenchmarkColdWindow(b *testing.B) {
	absent := testkeys.Absent(1<<20, 200)
	keys := testkeys.Random(100_000, 16, 100)
	v3 := Cuckoo(10).newFilter(keys)
	filters := []struct {
		name string
		f    filter
	}{
		{"pebble-bloom", PebbleBloom(10).newFilter(keys)},
		{"lsmcuckoo", v3},
		{"lsmcuckoo-v2", cuckooV2(10).newFilter(keys)},
	}
	for _, rounds := range []int{0, 10, 20, 40, 80} {
		filters = append(filters, struct {
			name string
			f    filter
		}{fmt.Sprintf("window+%d", rounds), windowProbe{v3.(pebbleFilter).data, rounds}})
	}
	// Every probe's loop runs once per round, the probes interleaved, so
	// that a shared machine's drift falls on all of them alike.
	sets := make([]*coldSet, len(filters))
	for i, f := range filters {
		sets[i] = newColdSet(f.f, 256<<20, len(absent), 7, false)
		sets[i].lookupNs(absent) // fault the pages in
	}
	ns := make([]float64, len(filters))
	for b.Loop() {
		for i, cs := range sets {
			ns[i] += cs.lookupNs(absent)
		}
	}
	for i, f := range filters {
		b.ReportMetric(ns[i]/float64(b.N), f.name+"-ns/lookup")
	}
}

// windowProbe loads what a one-line lookup loads, then spends rounds
// rounds of arithmetic on the key's hash alone (each round a multiply, a
// shift and an xor, and the loop's own increment, compare and branch).
// Its answer depends on both loads and on the rounds, so none is dropped.
type windowProbe struct {
	data   []byte
	rounds int
}

func (p windowProbe) MayContain(key []byte) bool {
	h := keyhash.MulHash(key)
	n := uint64(len(p.data))
	line := (h >> 32) * ((n - 40) / 64) >> 32 * 64
	w := binary.LittleEndian.Uint64(p.data[line:]) ^ binary.LittleEndian.Uint64(p.data[n-36:])
	y := h
	for range p.rounds {
		y = y*0x9e37_79b9_7f4a_7c15 ^ y>>29
	}
	return (w^y)&1 == 0
}

func (p windowProbe) Bytes() int { return len(p.data) }
func (p windowProbe) Copy(skew int) filter {
	return windowProbe{skewed(p.data, skew), p.rounds}
}
