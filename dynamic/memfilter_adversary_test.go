package dynamic

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// hiFor returns a 32-bit value that keyhash.Reduce maps to bucket i of n.
func hiFor(i, n uint32) uint32 {
	hi := uint32((uint64(i)<<32 + uint64(n) - 1) / uint64(n))
	if r, _ := keyhash.Reduce(hi, n); r != i {
		panic("hiFor")
	}
	return hi
}

// low16For returns 16 bits that keyhash.Fingerprint turns into fp (f bits).
func low16For(fp uint32, f uint) uint64 {
	max := uint64(1)<<f - 1
	v := ((uint64(fp)-1)<<16 + max - 1) / max
	if keyhash.Fingerprint(v, f) != fp {
		panic("low16For")
	}
	return v
}

// craftMemCluster plays an adversary who knows the filter's seed and can
// produce any key hash (stronger than a real one, who would have to search
// for keys): it returns hashes of keys whose two buckets both lie in the
// window of k buckets starting at first, one per distinct (fingerprint,
// bucket pair). When there are more than 4k of them, at least one cannot
// be placed in the segment, whatever the relocations.
func craftMemCluster(s *memSegment, seed uint32, first, k uint32) []uint64 {
	type entry struct{ fp, lo, hi uint32 }
	seen := map[entry]bool{}
	var out []uint64
	for a := first; a < first+k; a++ {
		for fp := uint32(1); fp <= memFPMask; fp++ {
			b := s.alt(a, fp)
			if b < first || b >= first+k {
				continue
			}
			e := entry{fp, min(a, b), max(a, b)}
			if seen[e] {
				continue
			}
			seen[e] = true
			x := uint64(hiFor(a, s.n))<<32 | low16For(fp, memFPBits)
			out = append(out, keyhash.Unmix(x, seed))
		}
	}
	return out
}

// TestMemFilterCraftedClusters: an adversary with the seed fills window
// after window of buckets with more fingerprints than they have slots.
// Before the seed and the load rule, each such cluster forced a growth
// (twice the memory). Now memory stays bounded, no added key is ever
// missed, and every Add returns after bounded work.
func TestMemFilterCraftedClusters(t *testing.T) {
	const seed = 0x5eed
	const hint = 10_000
	f := newMemFilterSeeded(hint*100/(memSlots*95)+2, seed)
	first := (*f.segments.Load())[0]
	var added []uint64
	crafted, overflow := 0, 0
	var slowest time.Duration
	for w, k := uint32(0), uint32(6); w+k <= first.n && crafted < 4*hint; w, k = w+k, 16 {
		cluster := craftMemCluster(first, seed, w, k)
		if len(cluster) > int(4*k) {
			overflow += len(cluster) - int(4*k)
		}
		for _, h := range cluster {
			start := time.Now()
			f.addHash(h)
			slowest = max(slowest, time.Since(start))
		}
		added = append(added, cluster...)
		crafted += len(cluster)
		if w == 0 {
			// One window's overflow fits in the stash: the filter still
			// rejects absent keys.
			st := f.Stats()
			if st.Saturated || st.Stashed == 0 || st.Segments != 1 {
				t.Fatalf("after one crafted window: %+v", st)
			}
			fp := 0
			for _, k := range testkeys.Absent(10_000, 79) {
				if f.MayContain(k) {
					fp++
				}
			}
			if fp > 100 {
				t.Errorf("after one crafted window: %d of 10000 absent keys pass", fp)
			}
		}
	}
	if overflow == 0 {
		t.Fatal("the crafted windows hold no more fingerprints than slots: the attack is not exercised")
	}
	st := f.Stats()
	t.Logf("%d crafted keys (%d beyond their windows' slots): %+v; slowest Add %v", crafted, overflow, st, slowest)
	if st.Segments != 1 {
		t.Errorf("crafted clusters grew the filter to %d segments", st.Segments)
	}
	// The stated bound: about 11 bytes per distinct key beyond the first
	// segment and the stash.
	firstBytes := len(first.buckets) * 8
	if bound := firstBytes + memStashSize*8 + 11*len(added); st.Bytes > bound {
		t.Errorf("%d bytes for %d keys, bound %d", st.Bytes, len(added), bound)
	}
	for _, h := range added {
		x, fp, hi := f.mixed(h)
		if !f.contains(x, fp, hi) {
			t.Fatalf("false negative for crafted hash %#x", h)
		}
	}
	// Random keys after the attack still go in, and growth still happens
	// when the load is real.
	keys := testkeys.Random(4*hint, 16, 77)
	for _, k := range keys {
		f.Add(k)
	}
	for _, k := range keys {
		if !f.MayContain(k) {
			t.Fatalf("false negative for %x after the attack", k)
		}
	}
	st = f.Stats()
	if !st.Saturated && st.Segments < 2 {
		t.Errorf("5x the hint in keys did not grow the filter: %+v", st)
	}
	if bound := firstBytes + memStashSize*8 + 11*(len(added)+len(keys)); st.Bytes > bound {
		t.Errorf("%d bytes for %d keys, bound %d", st.Bytes, len(added)+len(keys), bound)
	}
}

// TestMemFilterCraftedAfterGrowth attacks the newest segment each time the
// filter grows (an adversary who knows the seed recomputes its clusters
// for the new size): growth must still follow the number of keys, not the
// number of clusters.
func TestMemFilterCraftedAfterGrowth(t *testing.T) {
	const seed = 0xbad
	f := newMemFilterSeeded(300, seed)
	random := testkeys.Random(20_000, 16, 78)
	var crafted []uint64
	next := 0
	for round := 0; round < 6; round++ {
		// Legitimate load: a slice of random keys.
		for _, k := range random[next : next+3000] {
			f.Add(k)
		}
		next += 3000
		segs := *f.segments.Load()
		newest := segs[len(segs)-1]
		for w := uint32(0); w+16 <= newest.n && w < 16*8; w += 16 {
			c := craftMemCluster(newest, seed, w, 16)
			for _, h := range c {
				f.addHash(h)
			}
			crafted = append(crafted, c...)
		}
	}
	st := f.Stats()
	distinct := next + len(crafted)
	t.Logf("%d random + %d crafted keys: %+v", next, len(crafted), st)
	if bound := 300*8 + memStashSize*8 + 11*distinct; st.Bytes > bound {
		t.Errorf("%d bytes for %d distinct keys, bound %d", st.Bytes, distinct, bound)
	}
	for _, k := range random[:next] {
		if !f.MayContain(k) {
			t.Fatalf("false negative for random key %x", k)
		}
	}
	for _, h := range crafted {
		x, fp, hi := f.mixed(h)
		if !f.contains(x, fp, hi) {
			t.Fatalf("false negative for crafted hash %#x", h)
		}
	}
}

// TestMemFilterSeedsDiffer: two filters hash the same key differently.
func TestMemFilterSeedsDiffer(t *testing.T) {
	a, b := NewMemFilter(100), NewMemFilter(100)
	if a.seed == b.seed {
		t.Fatalf("two filters drew the same seed %#x", a.seed)
	}
}

// TestMemFilterCraftedConcurrent: writers add, at the same time, keys an
// adversary with the seed crafted into windows of buckets that hold fewer
// slots than the keys (so their Adds race to relocate within one crowded
// window and fill the stash, or saturate the filter), keys every writer
// repeats, and random keys (in some rounds enough to grow the filter under
// the crafted ones); readers check keys whose Add has returned. Run it
// with -race.
func TestMemFilterCraftedConcurrent(t *testing.T) {
	const writers = 4
	stashed, saturated, grown := 0, 0, 0
	for round := range 12 {
		seed := uint32(round + 1)
		f := newMemFilterSeeded(3000, seed)
		first := (*f.segments.Load())[0]
		rng := rand.New(rand.NewPCG(uint64(round), 5))
		var all []uint64
		for w := range uint32([4]int{1, 3, 6, 14}[round%4]) {
			all = append(all, craftMemCluster(first, seed, 16*w, 6)...)
		}
		for range 7000 + round/4%2*7000 {
			all = append(all, rng.Uint64(), uint64(rng.IntN(50)))
		}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		var hashes [writers][]uint64
		for i, h := range all {
			hashes[i%writers] = append(hashes[i%writers], h)
		}
		var done [writers]atomic.Int64 // hashes[w][:done[w]] are added
		var stop atomic.Bool
		var failures atomic.Int64
		var readers sync.WaitGroup
		for r := range 2 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				for !stop.Load() {
					w := rng.IntN(writers)
					if n := done[w].Load(); n > 0 && !f.MayContainHash(hashes[w][rng.Int64N(n)]) {
						failures.Add(1)
					}
				}
			}()
		}
		var adders sync.WaitGroup
		for w := range writers {
			adders.Add(1)
			go func() {
				defer adders.Done()
				for i, h := range hashes[w] {
					f.addHash(h)
					done[w].Store(int64(i + 1))
				}
			}()
		}
		adders.Wait()
		stop.Store(true)
		readers.Wait()
		if n := failures.Load(); n > 0 {
			t.Fatalf("round %d: %d false negatives while adding", round, n)
		}
		for _, h := range all {
			if !f.MayContainHash(h) {
				t.Fatalf("round %d: false negative for hash %x after adding", round, h)
			}
		}
		st := f.Stats()
		if st.Stashed > 0 {
			stashed++
		}
		if st.Saturated {
			saturated++
		}
		if st.Segments > 1 {
			grown++
		}
	}
	if stashed == 0 || saturated == 0 || grown == 0 {
		t.Fatalf("%d rounds stashed, %d saturated, %d grew: not every regime was exercised", stashed, saturated, grown)
	}
}
