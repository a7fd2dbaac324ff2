package dynamic

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

func TestMemFilterKeyShapes(t *testing.T) {
	race.SkipLong(t)
	for _, n := range []int{0, 1, 10, 1000, 50_000} {
		for _, set := range testkeys.Shapes(max(n, 1)) {
			// A hint far below the real count forces constant growth.
			for _, hint := range []int{1, n} {
				f := NewMemFilter(hint)
				for _, k := range set.Keys {
					f.Add(k)
				}
				for _, k := range set.Keys {
					if !f.MayContain(k) {
						t.Fatalf("n=%d %s hint=%d: false negative for %q", n, set.Name, hint, k)
					}
				}
			}
		}
	}
}

func TestMemFilterMillion(t *testing.T) {
	race.SkipLong(t)
	if testing.Short() {
		t.Skip("1M keys: skipped with -short")
	}
	keys := testkeys.Random(1_000_000, 16, 41)
	f := NewMemFilter(len(keys))
	for _, k := range keys {
		f.Add(k)
	}
	for _, k := range keys {
		if !f.MayContain(k) {
			t.Fatalf("false negative for %x", k)
		}
	}
	st := f.Stats()
	if st.Segments != 1 {
		t.Errorf("1M keys with a 1M hint grew to %d segments", st.Segments)
	}
	t.Logf("1M keys: %+v", st)
}

// TestMemFilterRepeatsTakeNoSlot adds one key many times: with eight slots
// in its bucket pair, a filter that stored repeats would overflow them.
func TestMemFilterRepeatsTakeNoSlot(t *testing.T) {
	f := NewMemFilter(100)
	others := testkeys.Sequential("r", 0, 90)
	for i := 0; i < 1000; i++ {
		f.Add([]byte("overwritten"))
		f.Add(others[i%len(others)])
	}
	if st := f.Stats(); st.Keys > len(others)+1 || st.Segments != 1 {
		t.Fatalf("repeats took space: %+v", st)
	}
	for _, k := range append(others, []byte("overwritten")) {
		if !f.MayContain(k) {
			t.Fatalf("false negative for %q", k)
		}
	}
}

// TestMemFilterFullSpaceAndFPR fills a filter to its capacity hint and
// checks the space and false-positive figures the doc promises.
func TestMemFilterFullSpaceAndFPR(t *testing.T) {
	n := 200_000
	f := NewMemFilter(n)
	for _, k := range testkeys.Random(n, 16, 43) {
		f.Add(k)
	}
	st := f.Stats()
	absent := testkeys.Absent(200_000, 44)
	fp := 0
	for _, k := range absent {
		if f.MayContain(k) {
			fp++
		}
	}
	fpr := float64(fp) / float64(len(absent))
	theory := 1 - math.Pow(1-1.0/4095, 8*st.Load)
	sigma := math.Sqrt(theory / float64(len(absent)))
	t.Logf("%d keys: %.1f bits/key, load %.3f, %d segment(s), FPR %.3f%% (theory %.3f%%)", n, st.BitsPerKey, st.Load, st.Segments, 100*fpr, 100*theory)
	if st.Segments != 1 || st.BitsPerKey > 18 {
		t.Errorf("full filter: %+v, want one segment and <= 18 bits/key", st)
	}
	if fpr > 0.0025 || fpr > theory*1.2+4*sigma {
		t.Errorf("FPR %.4f%%, want <= 0.25%% and near theory %.4f%%", 100*fpr, 100*theory)
	}
}

// TestMemFilterBounceCaught forces the case the relocation counters exist
// for: between a lookup's read of its first bucket and its read of the
// second, the key's fingerprint moves from the second bucket into the first
// (and, in the bounce variant, back and forth). A single-pass lookup misses
// it; MayContain must not.
func TestMemFilterBounceCaught(t *testing.T) {
	for _, moves := range [][]int{{2, 1}, {2, 1, 2, 1}, {2, 1, 2, 1, 2, 1}} {
		f := NewMemFilter(64)
		// A key with two distinct buckets under this filter's seed.
		var key []byte
		var fp, i1, i2 uint32
		s := (*f.segments.Load())[0]
		for n := 0; ; n++ {
			key = fmt.Appendf(nil, "bouncing key %d", n)
			var hi uint32
			_, fp, hi = f.memKey(key)
			i1 = s.primary(hi)
			if i2 = s.alt(i1, fp); i1 != i2 {
				break
			}
		}
		bucket := map[int]uint32{1: i1, 2: i2}
		if !s.putEmpty(i2, fp) { // the key lives in its second bucket
			t.Fatal("setup")
		}
		// Move along the listed buckets: {2,1} is one move i2 -> i1.
		bounce := func() {
			for k := 1; k < len(moves); k++ {
				if !s.relocate(bucket[moves[k-1]], bucket[moves[k]], fp) {
					t.Fatalf("relocate %v failed", moves[k-1:k+1])
				}
			}
		}
		// A single pass, with the same moves in the same window, misses.
		w1 := s.buckets[i1].Load()
		bounce()
		w2 := s.buckets[i2].Load()
		if has(w1, fp) || has(w2, fp) {
			t.Fatalf("moves %v: the injected moves did not hide the fingerprint from one pass", moves)
		}
		// Put it back in i2 and let MayContain run into the same moves.
		if !s.relocate(i1, i2, fp) {
			t.Fatal("reset failed")
		}
		calls := 0
		s.afterFirstRead = func(seg *memSegment) {
			if seg == s && calls == 0 {
				calls++
				bounce()
			}
		}
		got := f.MayContain(key)
		s.afterFirstRead = nil
		if calls != 1 {
			t.Fatalf("moves %v: the hook ran %d times", moves, calls)
		}
		if !got {
			t.Fatalf("moves %v: MayContain missed a fingerprint relocated during the lookup", moves)
		}
	}
}

// TestMemFilterConcurrent: writers add disjoint key ranges into a filter
// that starts tiny, so relocations and growth happen all the time, while
// readers keep checking keys whose Add has returned. Every such check must
// be true. Run it with -race.
func TestMemFilterConcurrent(t *testing.T) {
	dur := 3 * time.Second
	if testing.Short() {
		dur = 500 * time.Millisecond
	}
	const writers, readers = 3, 3
	f := NewMemFilter(16)
	var done [writers]atomic.Int64 // keys of writer w with index < done[w] are added
	var stop atomic.Bool
	var wg sync.WaitGroup
	var failures atomic.Int64
	var added atomic.Int64
	key := func(w, i int) []byte { return fmt.Appendf(nil, "w%d-%09d", w, i) }
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				f.Add(key(w, i))
				if i%3 == 0 {
					f.Add(key(w, i/2)) // repeats, concurrent with relocations
				}
				done[w].Store(int64(i + 1))
				added.Add(1)
			}
		}(w)
	}
	var checks atomic.Int64
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				w := n % writers
				hi := done[w].Load()
				if hi == 0 {
					continue
				}
				// Recent keys are the ones being relocated right now.
				// In 64 bits: n*7919 overflows a 32-bit int within a
				// second, and a negative offset names keys not yet added.
				i := int(hi - 1 - int64(n)*7919%min(hi, 5000))
				if !f.MayContain(key(w, i)) {
					failures.Add(1)
				}
				checks.Add(1)
			}
		}(r)
	}
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	st := f.Stats()
	t.Logf("%d adds, %d checks, %+v", added.Load(), checks.Load(), st)
	if failures.Load() != 0 {
		t.Fatalf("%d false negatives among %d checks of added keys", failures.Load(), checks.Load())
	}
	if st.Segments < 3 {
		t.Errorf("the filter grew only to %d segments: growth was not exercised", st.Segments)
	}
	// Afterwards, every key of every writer must be there.
	for w := 0; w < writers; w++ {
		for i := 0; i < int(done[w].Load()); i++ {
			if !f.MayContain(key(w, i)) {
				t.Fatalf("after the run: false negative for %s", key(w, i))
			}
		}
	}
}

// TestMemFilterHintFits: capacityHint distinct keys fit without growing,
// small hints included (where a bucket or two of bad luck is a large
// fraction of the table).
func TestMemFilterHintFits(t *testing.T) {
	for _, hint := range []int{1, 3, 8, 50, 300, 3000, 50_000} {
		for seed := uint64(0); seed < 20; seed++ {
			f := NewMemFilter(hint)
			for _, k := range testkeys.Random(hint, 16, 200+seed) {
				f.Add(k)
			}
			if st := f.Stats(); st.Segments != 1 {
				t.Fatalf("hint %d, key set %d: grew to %d segments", hint, seed, st.Segments)
			}
		}
	}
}

// TestMemFilterHintBelowOne: a capacity hint of zero or less (a memtable
// that does not know its size) gives the smallest filter, which grows and
// finds every key added.
func TestMemFilterHintBelowOne(t *testing.T) {
	for _, hint := range []int{0, -1, -1 << 40} {
		f := NewMemFilter(hint)
		keys := testkeys.Random(20_000, 16, 300)
		for _, k := range keys {
			f.Add(k)
		}
		for _, k := range keys {
			if !f.MayContain(k) {
				t.Fatalf("hint %d: false negative", hint)
			}
		}
		if st := f.Stats(); st.Segments < 2 || st.Saturated {
			t.Fatalf("hint %d: %+v, want a grown, unsaturated filter", hint, st)
		}
	}
}

// TestMemFilterMayContainNoAlloc: MayContain is documented allocation-free,
// on a grown filter and with keys in the stash too.
func TestMemFilterMayContainNoAlloc(t *testing.T) {
	f := NewMemFilter(1000)
	keys := testkeys.Random(5000, 16, 71) // five times the hint: the filter grows
	for _, k := range keys {
		f.Add(k)
	}
	x, _, _ := f.mixed(0x1234)
	f.addToStash(x) // a stashed hash: lookups scan the stash
	if st := f.Stats(); st.Segments < 2 || st.Stashed == 0 {
		t.Fatalf("want a grown filter with a stash: %+v", st)
	}
	absent := testkeys.Absent(100, 72)
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		f.MayContain(keys[i%len(keys)])
		f.MayContain(absent[i%len(absent)])
		i++
	}); a != 0 {
		t.Errorf("MayContain allocates %v times per call pair", a)
	}
}

// TestMemFilterHintCapped: a capacity hint past MaxCapacityHint (a byte
// count passed for a key count, say) sizes the filter as MaxCapacityHint
// does, at once, instead of allocating gigabytes, and the filter takes
// keys as any other.
func TestMemFilterHintCapped(t *testing.T) {
	want := len((*NewMemFilter(MaxCapacityHint).segments.Load())[0].buckets)
	if maxBytes := MaxCapacityHint * 8 / (memSlots * 0.85); float64(want)*8 > maxBytes {
		t.Fatalf("a filter for MaxCapacityHint keys takes %d bytes, more than %.0f", want*8, maxBytes)
	}
	for _, hint := range []int{MaxCapacityHint + 1, 1 << 40, math.MaxInt} {
		start := time.Now()
		f := NewMemFilter(hint)
		segs := *f.segments.Load()
		if len(segs) != 1 || len(segs[0].buckets) != want {
			t.Fatalf("hint %d: %d segments, the first of %d buckets; want one of %d", hint, len(segs), len(segs[0].buckets), want)
		}
		keys := testkeys.Random(1000, 16, uint64(hint%1000))
		for _, k := range keys {
			f.Add(k)
		}
		for _, k := range keys {
			if !f.MayContain(k) {
				t.Fatalf("hint %d: an added key is missing", hint)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("hint %d: NewMemFilter and 1000 keys took %v", hint, d)
		}
	}
}
