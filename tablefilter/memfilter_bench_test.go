package tablefilter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// plainCuckoo is the unsynchronised baseline: the same bucket layout, the
// same hashing and alternate-bucket map as MemFilter's segment, with plain
// loads and stores and classic random-walk relocation. Wrapped in a
// sync.Mutex or sync.RWMutex it is what a user would otherwise write.
type plainCuckoo struct {
	buckets []uint64
	seg     memSegment // for primary/alt only
	kick    uint32
}

func newPlainCuckoo(capacity int) *plainCuckoo {
	n := max(2, uint64(float64(capacity)/(memSlots*memLoad))+1)
	return &plainCuckoo{buckets: make([]uint64, n), seg: memSegment{n: uint32(n)}}
}

func (c *plainCuckoo) contains(key []byte) bool {
	fp, hi := memKey(key)
	i1 := c.seg.primary(hi)
	return has(c.buckets[i1], fp) || has(c.buckets[c.seg.alt(i1, fp)], fp)
}

func (c *plainCuckoo) add(key []byte) bool {
	fp, hi := memKey(key)
	i := c.seg.primary(hi)
	j := c.seg.alt(i, fp)
	if has(c.buckets[i], fp) || has(c.buckets[j], fp) {
		return true
	}
	for n := 0; n < 500; n++ {
		for _, b := range [2]uint32{i, j} {
			if s := emptySlot(c.buckets[b]); s >= 0 {
				c.buckets[b] |= uint64(fp) << (s * memFPBits)
				return true
			}
		}
		// Swap with a victim and carry it on to its other bucket.
		c.kick = c.kick*1664525 + 1013904223
		s := int(c.kick>>30) % memSlots
		victim := slotFP(c.buckets[i], s)
		c.buckets[i] = c.buckets[i]&^(uint64(memFPMask)<<(s*memFPBits)) | uint64(fp)<<(s*memFPBits)
		fp = victim
		i = c.seg.alt(i, fp)
		j = i
	}
	return false // the baseline is sized so that this never happens
}

type memImpl struct {
	name     string
	add      func([]byte)
	contains func([]byte) bool
}

func memImpls(capacity int) []memImpl {
	lockFree := NewMemFilter(capacity)
	mu, muC := sync.Mutex{}, newPlainCuckoo(capacity)
	rw, rwC := sync.RWMutex{}, newPlainCuckoo(capacity)
	plain := newPlainCuckoo(capacity)
	return []memImpl{
		{"memfilter", lockFree.Add, lockFree.MayContain},
		{"mutex", func(k []byte) { mu.Lock(); muC.add(k); mu.Unlock() },
			func(k []byte) bool { mu.Lock(); defer mu.Unlock(); return muC.contains(k) }},
		{"rwmutex", func(k []byte) { rw.Lock(); rwC.add(k); rw.Unlock() },
			func(k []byte) bool { rw.RLock(); defer rw.RUnlock(); return rwC.contains(k) }},
		{"unsync", func(k []byte) { plain.add(k) }, plain.contains},
	}
}

var memBenchKeys = sync.OnceValue(func() [][]byte { return testkeys.Random(1<<20, 16, 51) })

// runGoroutines splits b.N operations over exactly g goroutines, each a
// fixed share, so no shared counter (a contended cache line) distorts the
// comparison.
func runGoroutines(b *testing.B, g int, op func(i int)) {
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(from, to int) {
			defer wg.Done()
			for i := from; i < to; i++ {
				op(i)
			}
		}(w*b.N/g, (w+1)*b.N/g)
	}
	wg.Wait()
}

// BenchmarkMemFilterLookup: lookups of present keys by 1, 2 and 4
// goroutines. The unsynchronised baseline runs single-threaded only (it is
// not safe otherwise).
func BenchmarkMemFilterLookup(b *testing.B) {
	keys := memBenchKeys()
	for _, impl := range memImpls(len(keys)) {
		for _, k := range keys {
			impl.add(k)
		}
		for _, g := range []int{1, 2, 4} {
			if impl.name == "unsync" && g > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/goroutines=%d", impl.name, g), func(b *testing.B) {
				runGoroutines(b, g, func(i int) {
					if !impl.contains(keys[i&(len(keys)-1)]) {
						b.Error("false negative")
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
			})
		}
	}
}

// BenchmarkMemFilterAdd: adds of distinct keys by 1, 2 and 4 goroutines
// into a filter sized for them.
func BenchmarkMemFilterAdd(b *testing.B) {
	keys := memBenchKeys()
	for _, name := range []string{"memfilter", "mutex", "rwmutex", "unsync"} {
		for _, g := range []int{1, 2, 4} {
			if name == "unsync" && g > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, g), func(b *testing.B) {
				var impl memImpl
				for _, m := range memImpls(len(keys)) {
					if m.name == name {
						impl = m
					}
				}
				runGoroutines(b, g, func(i int) { impl.add(keys[i&(len(keys)-1)]) })
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
			})
		}
	}
}

// BenchmarkMemFilterMixed: one writer adds keys nonstop while N readers
// look up keys already added, as a memtable's filter is used. ns/op is per
// read; the writer's rate is reported beside it.
func BenchmarkMemFilterMixed(b *testing.B) {
	keys := memBenchKeys()
	half := len(keys) / 2
	for _, name := range []string{"memfilter", "mutex", "rwmutex"} {
		for _, readers := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/readers=%d", name, readers), func(b *testing.B) {
				var impl memImpl
				for _, m := range memImpls(len(keys)) {
					if m.name == name {
						impl = m
					}
				}
				for _, k := range keys[:half] {
					impl.add(k)
				}
				var stop atomic.Bool
				var writes atomic.Int64
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := half; !stop.Load(); i++ {
						impl.add(keys[i&(len(keys)-1)])
						writes.Add(1)
					}
				}()
				runGoroutines(b, readers, func(i int) {
					if !impl.contains(keys[i%half]) {
						b.Error("false negative")
					}
				})
				stop.Store(true)
				<-done
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "read-Mops/s")
				b.ReportMetric(float64(writes.Load())/b.Elapsed().Seconds()/1e6, "write-Mops/s")
			})
		}
	}
}
