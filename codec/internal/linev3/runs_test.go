package linev3

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// TestV3RunTooLong checks the builder's word-parallel test for a run of
// more than MaxRun keys of one quotient against a count bit by bit: runs
// of every length near the limit at every start near the header's word
// boundaries and its end, and random headers, with bits past the header
// (remainders) set, which must not count.
func TestV3RunTooLong(t *testing.T) {
	longest := func(w *[frame.LineBytes / 8]uint64, n int) int {
		best, run := 0, 0
		for i := range n {
			if w[i>>6]>>(i&63)&1 == 1 {
				run++
				best = max(best, run)
			} else {
				run = 0
			}
		}
		return best
	}
	check := func(w *[frame.LineBytes / 8]uint64, n int, what string) {
		t.Helper()
		if got, want := RunTooLong(w, n), longest(w, n) > MaxRun; got != want {
			t.Fatalf("%s: header of %d bits, longest run %d: got %v", what, n, longest(w, n), got)
		}
	}
	set := func(w *[frame.LineBytes / 8]uint64, from, to int) {
		for i := from; i < to && i < frame.LineBits; i++ {
			w[i>>6] |= 1 << (i & 63)
		}
	}
	for _, n := range []int{1, 56, 57, 63, 64, 65, 100, 127, 128, 129, 150, 191, HeaderMax} {
		for start := range n {
			if start > 8 && start < n-70 && (start-60)%64 > 8 {
				continue // away from word boundaries and the end
			}
			for l := MaxRun - 2; l <= MaxRun+2; l++ {
				var w [frame.LineBytes / 8]uint64
				set(&w, start, start+l)
				check(&w, n, "one run")
				set(&w, n, frame.LineBits) // remainders after the header
				if start+l <= n {
					w[n>>6] &^= 1 << (n & 63) // a zero ends the header's last run
				}
				check(&w, n, "one run, remainders set")
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		var w [frame.LineBytes / 8]uint64
		n := 1 + r.IntN(HeaderMax)
		for pos := 0; pos < frame.LineBits; {
			l := r.IntN(4)
			if r.IntN(3) == 0 {
				l = MaxRun - 10 + r.IntN(20)
			}
			set(&w, pos, pos+l)
			pos += l + 1 + r.IntN(3)
		}
		check(&w, n, "random")
	}
}
