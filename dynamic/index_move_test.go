package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
)

// TestIndexMoveIntoFullBucketKeepsEntry: a relocation writes the entry
// into its other bucket and only then clears it where it was. If the
// destination has no free slot (a search path that met the same bucket
// twice, or a bucket filled since the search looked), the move must
// write nothing: clearing the entry after a copy that did not happen
// would lose it, a false negative for every key it stands for.
func TestIndexMoveIntoFullBucketKeepsEntry(t *testing.T) {
	for bits := 8; bits <= 17; bits += 3 {
		x := newIndexSeeded(1000, float64(bits), uint32(bits))
		s := (*x.segs.Load())[0]
		from, to := uint32(3), uint32(s.n-2)
		v := uint32(1)<<(x.w-1) | 5 // any non-zero entry
		if !x.swap(s, from, 0, v) {
			t.Fatal("setup: no room in an empty bucket")
		}
		full := [idxSlots]uint32{1, 2, 3, 4}
		x.store(s, to, full)
		if x.hasRoom(s, to) {
			t.Fatal("setup: a bucket of four entries has room")
		}
		if x.move(s, relocate.Step{From: from, To: to, Item: v}) {
			t.Errorf("w=%d: a move into a full bucket reported success", x.w)
		}
		if !x.bucketHas(s, from, v) {
			t.Fatalf("w=%d: a move into a full bucket lost the entry", x.w)
		}
		if got := x.entries(s, to); got != full {
			t.Errorf("w=%d: the full bucket changed to %v", x.w, got)
		}
	}
}
