package dynamic

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexReplaceVersionsInOlderSegments: Replace stops searching a key's
// segments (newest first) at the first that holds its merged entry or an
// input entry of it, so the key's other versions, in older segments, are
// left to the inputs' removal. Here every key of K has a version in table
// 1, whose entries fill the first segment, and one in table 3, added after
// the index grew, and sometimes a third, in table 5, after a second
// growth. Merging 1, 3 and 5 must leave each key of K named by the merged
// table alone, with exactly one entry, while every key of the other tables
// keeps its own; at every step of the Replace each key of K must be named
// by a table holding it; and no entry of an input may stay behind.
func TestIndexReplaceVersionsInOlderSegments(t *testing.T) {
	for _, bits := range []float64{10, 12, 14, 16} {
		for seed := uint32(1); seed <= 4; seed++ {
			testReplaceVersionsInOlderSegments(t, bits, seed)
		}
	}
}

func testReplaceVersionsInOlderSegments(t *testing.T, bits float64, seed uint32) {
	const n = 400
	x := newIndexSeeded(n, bits, seed)
	keys := hashesOf(testkeys.Random(n, 16, uint64(seed)))
	fresh := hashesOf(testkeys.Random(3*n, 16, uint64(seed)+100))
	third := keys[:n/2]
	steps := []struct {
		id     uint64
		hashes []uint64
	}{
		{1, keys},           // fills the first segment
		{2, fresh[:n]},      // grows the index
		{3, keys},           // versions, mostly in the second segment
		{4, fresh[n : 3*n]}, // grows it again
		{5, third},          // versions in the third segment
	}
	for _, s := range steps {
		if err := x.AddTable(s.id, s.hashes); err != nil {
			t.Fatal(err)
		}
	}
	segs := *x.segs.Load()
	if len(segs) < 3 {
		t.Fatalf("bits %v seed %d: %d segments, want 3 or more: not exercised", bits, seed, len(segs))
	}
	t1, t3 := x.byID[1], x.byID[3]
	if segs[0].byTable[t1] == 0 || len(segs[1].byTable) <= t3 || segs[1].byTable[t3] == 0 {
		t.Fatalf("bits %v seed %d: table 1 not in the first segment or table 3 not in the second: not exercised", bits, seed)
	}
	check := func(when string, inputsLive bool) {
		for i, h := range keys {
			got := x.LookupHash(h, nil)
			ok := holds(got, 6)
			if inputsLive {
				ok = ok || holds(got, 1) || holds(got, 3)
			}
			if !ok {
				t.Fatalf("bits %v seed %d %s: key %d named %v", bits, seed, when, i, got)
			}
		}
	}
	steps2 := 0
	idxTestHookRecoded = func() {
		if steps2++; steps2%37 == 0 {
			check("during the Replace", true)
		}
	}
	defer func() { idxTestHookRecoded = nil }()
	if err := x.Replace([]uint64{1, 3, 5}, 6, keys, nil); err != nil {
		t.Fatal(err)
	}
	idxTestHookRecoded = nil
	check("after the Replace", false)
	for i, h := range keys {
		got := x.LookupHash(h, nil)
		n6 := 0
		for _, id := range got {
			if id == 1 || id == 3 || id == 5 {
				t.Fatalf("bits %v seed %d: key %d names removed table %d: %v", bits, seed, i, id, got)
			}
			if id == 6 {
				n6++
			}
		}
		if n6 != 1 {
			t.Fatalf("bits %v seed %d: key %d names the merge %d times: %v", bits, seed, i, n6, got)
		}
	}
	for _, s := range []struct {
		id     uint64
		hashes []uint64
	}{{2, fresh[:n]}, {4, fresh[n : 3*n]}} {
		for i, h := range s.hashes {
			if !holds(x.LookupHash(h, nil), s.id) {
				t.Fatalf("bits %v seed %d: key %d of table %d lost", bits, seed, i, s.id)
			}
		}
	}
	checkCanonical(t, x)
	t6 := x.byID[6]
	if c := x.count[t6]; c > int64(len(keys)) {
		t.Fatalf("bits %v seed %d: the merge holds %d entries for %d keys: versions left behind", bits, seed, c, len(keys))
	}
	for _, t0 := range []int{t1, t3} {
		if x.book.Load().tables[t0].live && x.book.Load().tables[t0].id != 6 {
			t.Fatalf("bits %v seed %d: input slot %d still live", bits, seed, t0)
		}
	}
}
