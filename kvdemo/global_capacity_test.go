package kvdemo

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// TestIndexCapacityWithinBudget: the index kvdemo builds at once holds
// every table's keys with at least 1% room for the next flushes, and the
// headroom it adds on top never takes it past the bits-per-key budget
// (where 10-bit slots alone do not already exceed it).
func TestIndexCapacityWithinBudget(t *testing.T) {
	for _, entries := range []int{0, 1000, 200_000, 1_000_000, 50_000_000} {
		for bits := 8.0; bits <= 18; bits += 0.5 {
			c := indexCapacity(entries, bits)
			if c < entries+entries/100 || c < entries+1024 {
				t.Errorf("%d entries at %v bits/key: capacity %d leaves too little room", entries, bits, c)
			}
			eb := dynamic.IndexEntryBits(bits)
			if spent := float64(c) * eb; entries >= 200_000 && eb*1.01 <= bits && spent > bits*float64(entries) {
				t.Errorf("%d entries at %v bits/key: capacity %d costs %.3f bits/key", entries, bits, c, spent/float64(entries))
			}
		}
	}
}
