package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
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

// TestBucketArithmeticToTheCap: a key's two buckets are computed in 32-bit
// arithmetic. For every slot and tag width the index can choose (tags of 5
// to 9 bits, so every tag has its own entry of the 512-entry tag-offset
// table), every tag, and segment sizes up to the cap of 2^31 buckets
// (where (offset + n − i) comes within one of 2^32), the second bucket
// must lie in the segment and map back to the first; likewise for the
// MemFilter's fingerprints, and a key's primary bucket for any hash. No
// segment is allocated: the arithmetic needs only the size.
func TestBucketArithmeticToTheCap(t *testing.T) {
	if idxMaxBuckets != 1<<31 || memMaxBuckets != 1<<31 {
		t.Fatalf("caps %d and %d: this test checks 2^31", idxMaxBuckets, memMaxBuckets)
	}
	sizes := []uint32{2, 3, 255, 256, 257, 1<<31 - 1, 1 << 31}
	shapes := map[[2]uint]bool{}
	for bits := 0.0; bits <= 24; bits += 0.125 {
		w, m, _ := indexShape(bits)
		if 1<<m > idxMaxTags || m < 4 || w-m < idxMinDepth || w > 16 {
			t.Fatalf("bits %v: w=%d m=%d: tags wider than the tag-offset table, or no nibble to compare", bits, w, m)
		}
		shapes[[2]uint{w, m}] = true
	}
	// Every combination the table must serve, chosen by a budget or not.
	for w := uint(idxMinSlot); w <= 16; w++ {
		for m := uint(idxTag); m <= 9 && w-m >= idxMinDepth; m++ {
			shapes[[2]uint{w, m}] = true
		}
	}
	for shape := range shapes {
		w, m := shape[0], shape[1]
		x := newIndexSeeded(1, 10, uint32(w*31+m))
		x.w, x.m, x.d = w, m, w-m
		for _, n := range sizes {
			s := &idxSegment{n: n}
			for tag := uint32(0); tag < 1<<m; tag++ {
				h, _ := keyhash.Reduce(x.altHash[tag], n)
				for _, i := range []uint32{0, 1, n / 2, n - 2, n - 1, h, (h + 1) % n, (h + n - 1) % n} {
					j := x.alt(s, i, tag)
					if j >= n || x.alt(s, j, tag) != i {
						t.Fatalf("w=%d m=%d n=%d tag %d: alt(%d) = %d, back %d", w, m, n, tag, i, j, x.alt(s, j, tag))
					}
				}
			}
			// The tag a stored entry gives the search, and a probe's.
			for _, v := range []uint32{1, 1<<w - 1, 1 << (w - 1)} {
				if tag := v >> (w - m); tag >= 1<<m || x.alt(s, 0, tag) >= n {
					t.Fatalf("w=%d m=%d n=%d: entry %#x gives tag %d", w, m, n, v, tag)
				}
			}
			for _, hv := range []uint64{0, 1, 1<<64 - 1, 1 << 63, 0xffff_ffff, 0xffff_ffff_0000_0000} {
				p := x.probeOf(hv)
				if i := s.primary(p.hi); i >= n || p.tag >= 1<<m || x.alt(s, i, p.tag) >= n {
					t.Fatalf("w=%d m=%d n=%d: hash %#x: primary %d, tag %d", w, m, n, hv, i, p.tag)
				}
			}
		}
	}
	for _, n := range sizes {
		s := &memSegment{n: n}
		for fp := uint32(1); fp <= memFPMask; fp++ {
			h, _ := keyhash.Reduce(keyhash.FingerprintHash(fp), n)
			for _, i := range []uint32{0, n - 1, h, (h + 1) % n, (h + n - 1) % n} {
				if j := s.alt(i, fp); j >= n || s.alt(j, fp) != i {
					t.Fatalf("MemFilter n=%d fp %d: alt(%d) = %d, back %d", n, fp, i, j, s.alt(j, fp))
				}
			}
		}
		if i := s.primary(1<<32 - 1); i >= n {
			t.Fatalf("MemFilter n=%d: primary %d", n, i)
		}
	}
}
