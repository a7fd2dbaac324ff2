package membench

import (
	"fmt"
	"sync"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

var benchKeys = sync.OnceValue(func() [][]byte { return testkeys.Random(1<<20, 16, 51) })

// BenchmarkLookup: lookups of present keys by 1, 2 and 4 goroutines.
func BenchmarkLookup(b *testing.B) {
	keys := benchKeys()
	for _, im := range Impls(len(keys)) {
		for _, k := range keys {
			im.Add(k)
		}
		for _, g := range []int{1, 2, 4} {
			if !im.Concurrent && g > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/goroutines=%d", im.Name, g), func(b *testing.B) {
				b.ResetTimer()
				el := Split(g, b.N, func(i int) {
					if !im.Contains(keys[i&(len(keys)-1)]) {
						b.Error("false negative")
					}
				})
				b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mops/s")
			})
		}
	}
}

// BenchmarkAdd: adds of distinct keys by 1, 2 and 4 goroutines into a
// filter sized for them.
func BenchmarkAdd(b *testing.B) {
	keys := benchKeys()
	for _, name := range []string{"memfilter", "mutex", "rwmutex"} {
		for _, g := range []int{1, 2, 4} {
			im := ImplNamed(name, len(keys))
			if !im.Concurrent && g > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, g), func(b *testing.B) {
				im := ImplNamed(name, len(keys))
				b.ResetTimer()
				el := Split(g, b.N, func(i int) { im.Add(keys[i&(len(keys)-1)]) })
				b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mops/s")
			})
		}
	}
}

// BenchmarkMixed: one writer adds nonstop while N readers look up keys
// already added, as a memtable's filter is used. ns/op is per read.
func BenchmarkMixed(b *testing.B) {
	keys := benchKeys()
	for _, name := range []string{"memfilter", "mutex", "rwmutex"} {
		for _, readers := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/readers=%d", name, readers), func(b *testing.B) {
				im := ImplNamed(name, len(keys))
				b.ResetTimer()
				el, writes, misses := Mixed(im, keys, readers, b.N)
				if misses > 0 {
					b.Fatalf("%d false negatives", misses)
				}
				b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "read-Mops/s")
				b.ReportMetric(float64(writes)/el.Seconds()/1e6, "write-Mops/s")
			})
		}
	}
}

// TestRunTiny runs the report's measurement on a small key set: every
// implementation must find every added key, under -race too.
func TestRunTiny(t *testing.T) {
	keys := testkeys.Random(4096, 16, 52)
	res, err := Run(keys, 20_000, 2)
	if err != nil {
		t.Fatal(err)
	}
	// memfilter/mutex/rwmutex: 3 add + 3 lookup + 3 mixed.
	if len(res) != 3*9 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.Mops <= 0 {
			t.Errorf("%+v: no throughput", r)
		}
	}
}
