package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestSegmentsCappedAtMaxBuckets: bucket indexes are 32-bit, so a segment
// never exceeds the cap however large the hint or the growth asks; filters
// that outgrow it add segments of the cap's size and lose no key. The cap
// is lowered here so that the test can reach it.
func TestSegmentsCappedAtMaxBuckets(t *testing.T) {
	defer func(i, m uint64) { idxMaxBuckets, memMaxBuckets = i, m }(idxMaxBuckets, memMaxBuckets)
	idxMaxBuckets, memMaxBuckets = 64, 64

	x := NewIndex(1_000_000, 10)
	var tables [][]uint64
	for id := uint64(1); id <= 6; id++ {
		h := hashesOf(testkeys.Random(400, 16, 900+id))
		if err := x.AddTable(id, h); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, h)
	}
	merged := append(append([]uint64(nil), tables[0]...), tables[1]...)
	if err := x.Replace([]uint64{1, 2}, 7, merged, nil); err != nil {
		t.Fatal(err)
	}
	segs := *x.segs.Load()
	if len(segs) < 4 {
		t.Fatalf("%d segments: the cap was not reached", len(segs))
	}
	for k, s := range segs {
		if uint64(s.n) > idxMaxBuckets {
			t.Fatalf("segment %d: %d buckets, cap %d", k, s.n, idxMaxBuckets)
		}
	}
	for i, h := range merged {
		if !holds(x.LookupHash(h, nil), 7) {
			t.Fatalf("merged key %d lost", i)
		}
	}
	for id := 3; id <= 6; id++ {
		for i, h := range tables[id-1] {
			if !holds(x.LookupHash(h, nil), uint64(id)) {
				t.Fatalf("key %d of table %d lost", i, id)
			}
		}
	}
	checkCanonical(t, x)

	f := NewMemFilter(1_000_000)
	keys := testkeys.Random(3000, 16, 77)
	for _, k := range keys {
		f.Add(k)
	}
	msegs := *f.segments.Load()
	if len(msegs) < 4 {
		t.Fatalf("MemFilter: %d segments: the cap was not reached", len(msegs))
	}
	for k, s := range msegs {
		if uint64(s.n) > memMaxBuckets || uint64(len(s.buckets)) != uint64(s.n) {
			t.Fatalf("MemFilter segment %d: n %d, %d buckets, cap %d", k, s.n, len(s.buckets), memMaxBuckets)
		}
	}
	for i, k := range keys {
		if !f.MayContain(k) {
			t.Fatalf("MemFilter key %d lost", i)
		}
	}
}
