package linev3

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// mergedLine is a line's header and remainders by the definition: the
// primary entries (in quotient order, remainders in arrival order) merged
// with the sorted secondary ones one entry at a time, a primary entry
// first unless it is above the next secondary one; the i-th entry sets
// header bit q+i and holds remainder slot i.
func mergedLine(s Shape, prim, sec []uint32) (w [frame.LineBytes / 8]uint64) {
	var all []uint32
	a, c := 0, 0
	for a < len(prim) || c < len(sec) {
		next := uint32(math.MaxUint32)
		if c < len(sec) {
			next = sec[c]
		}
		if a < len(prim) && prim[a] <= next {
			all = append(all, prim[a])
			a++
		} else {
			all = append(all, next)
			c++
		}
	}
	for i, v := range all {
		hb := int(v>>16) + i
		w[hb>>6] |= 1 << (hb & 63)
		for b := range int(s.R) {
			if v>>b&1 == 1 {
				at := int(s.RemOff()) + i*int(s.R) + b
				w[at>>6] |= 1 << (at & 63)
			}
		}
	}
	return w
}

// TestEncodeLineMerges: encodeLine writes every line as mergedLine does,
// for lines of few and many quotients, primary runs whose remainders are
// in no order and repeat, secondary entries on the same quotients and
// remainders as primary ones, none, one, or filling the line.
func TestEncodeLineMerges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []Shape{{R: 6, K: 57, Q: 106}, {R: 14, K: 30, Q: 56}, {R: 1, K: 100, Q: 90}, {R: 16, K: 20, Q: 4}, {R: 3, K: 8, Q: 1}} {
		if !s.Valid() {
			t.Fatalf("shape %+v is not valid", s)
		}
		for trial := range 3000 {
			k := int(s.K)
			kept := r.IntN(k + 1)
			ns := 0
			if kept < k {
				ns = r.IntN(k - kept + 1)
			}
			if trial%4 == 0 {
				ns = min(k-kept, r.IntN(3))
			}
			// Few remainder values, so that ties are common.
			entry := func() uint32 {
				return uint32(r.IntN(int(s.Q)))<<16 | uint32(r.IntN(min(4, 1<<s.R)))
			}
			prim := make([]uint32, kept)
			for i := range prim {
				prim[i] = entry()
			}
			slices.SortStableFunc(prim, func(a, b uint32) int { return int(a>>16) - int(b>>16) })
			sec := make([]uint32, ns)
			for i := range sec {
				sec[i] = entry()
			}
			p := &placer{Shape: s, slots: make([]uint32, k), kept: []uint16{uint16(kept)}, nsec: []uint16{uint16(ns)}}
			copy(p.slots, prim)
			copy(p.slots[k-ns:], sec)
			sortedSec := slices.Clone(sec)
			slices.Sort(sortedSec)
			got, entries := p.encodeLine(0)
			if want := mergedLine(s, prim, sortedSec); got != want || entries != kept+ns {
				t.Fatalf("shape %+v, primary %x, secondary %x: line %x (%d entries), want %x (%d)", s, prim, sec, got, entries, want, kept+ns)
			}
		}
	}
}
