package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

func hashesOf(keys [][]byte) []uint64 {
	out := make([]uint64, len(keys))
	for i, k := range keys {
		out[i] = KeyHash(k)
	}
	return out
}

// holds reports whether ids names table want.
func holds(ids []uint64, want uint64) bool { return slices.Contains(ids, want) }

func TestIndexVersionsNewestFirst(t *testing.T) {
	x := NewIndex(1000, 12)
	// Key "k" has a version in tables 7, 3 and 9, added in that order.
	for _, id := range []uint64{7, 3, 9} {
		keys := append(testkeys.Sequential(fmt.Sprintf("t%d-", id), 0, 100), []byte("k"))
		if err := x.AddTable(id, hashesOf(keys)); err != nil {
			t.Fatal(err)
		}
	}
	got := x.Lookup([]byte("k"), nil)
	if !slices.Equal(got, []uint64{9, 3, 7}) {
		t.Fatalf("versions of k: %v, want [9 3 7] (newest first)", got)
	}
	if err := x.AddTable(3, nil); err == nil {
		t.Fatal("a table ID added twice was accepted")
	}
	if err := x.RemoveTable(3); err != nil {
		t.Fatal(err)
	}
	if err := x.RemoveTable(3); err == nil {
		t.Fatal("a table removed twice was accepted")
	}
	if got := x.Lookup([]byte("k"), nil); !slices.Equal(got, []uint64{9, 7}) {
		t.Fatalf("after removing 3: %v, want [9 7]", got)
	}
	// A merge of 9 and 7 takes 9's place, before the newer table 11.
	if err := x.AddTable(11, hashesOf([][]byte{[]byte("k")})); err != nil {
		t.Fatal(err)
	}
	if err := x.Replace([]uint64{9, 7}, 20, hashesOf([][]byte{[]byte("k")}), nil); err != nil {
		t.Fatal(err)
	}
	if got := x.Lookup([]byte("k"), nil); !slices.Equal(got, []uint64{11, 20}) {
		t.Fatalf("after the merge: %v, want [11 20]", got)
	}
	if x.Tables() != 2 {
		t.Fatalf("%d tables, want 2", x.Tables())
	}
}

// TestIndexAllKeysFound: tables of many sizes and key shapes, every key
// names its table, at several budgets; absent keys name few tables.
func TestIndexAllKeysFound(t *testing.T) {
	race.SkipLong(t)
	for _, bits := range []float64{9, 10, 14, 18} {
		x := NewIndex(60_000, bits)
		tables := map[uint64][][]byte{}
		id := uint64(0)
		for _, n := range []int{1, 10, 500, 3000, 20_000} {
			for _, set := range testkeys.Shapes(n) {
				id++
				tables[id] = set.Keys
				if err := x.AddTable(id, hashesOf(set.Keys)); err != nil {
					t.Fatal(err)
				}
			}
		}
		var buf []uint64
		for id, keys := range tables {
			for _, k := range keys {
				buf = x.Lookup(k, buf[:0])
				if !holds(buf, id) {
					t.Fatalf("bits %v: key %q of table %d not found (got %v)", bits, k, id, buf)
				}
			}
		}
		absent := testkeys.Absent(100_000, 5)
		false_ := 0
		for _, k := range absent {
			false_ += len(x.Lookup(k, buf[:0]))
		}
		st := x.Stats()
		t.Logf("bits %v: %d tables, %+v; false candidates per absent key %.4f", bits, len(tables), st, float64(false_)/float64(len(absent)))
		// Tables beyond the code tree's 2^d−1 codes are named by every
		// lookup; none other may be.
		codes := 1<<x.d - 1
		if st.Always != max(0, len(tables)-codes) {
			t.Errorf("bits %v: %d tables without code or with unplaced keys, %d codes for %d tables", bits, st.Always, codes, len(tables))
		}
	}
}

// TestIndexFullLoadAndBudget fills one segment to its hint: it must not
// grow, and bits per entry must stay near the budget. The seed is fixed:
// with the 5-bit tags of a 10-bit budget, a segment's first failed insert
// comes a little above the load it is sized to for most seeds, and a
// little below it for a few (a growth, which this test would report).
func TestIndexFullLoadAndBudget(t *testing.T) {
	race.SkipLong(t)
	const n = 200_000
	for _, bits := range []float64{10, 14} {
		x := newIndexSeeded(n, bits, 1)
		keys := testkeys.Random(n, 16, 9)
		// Size-tiered-like shares: halves, quarters, ...
		from := 0
		for id := uint64(1); from < n; id++ {
			size := max((n-from)/2, 1000)
			to := min(from+size, n)
			if err := x.AddTable(id, hashesOf(keys[from:to])); err != nil {
				t.Fatal(err)
			}
			from = to
		}
		st := x.Stats()
		absent := testkeys.Absent(200_000, 10)
		cands := 0
		for _, k := range absent {
			cands += len(x.Lookup(k, nil))
		}
		t.Logf("bits %v: %+v, false candidates per absent key %.4f", bits, st, float64(cands)/float64(len(absent)))
		if st.Segments != 1 || st.Stashed != 0 || st.Always != 0 {
			t.Errorf("bits %v: a full index grew or stashed: %+v", bits, st)
		}
		if st.BitsPerKey > max(bits, 10.2)*1.02 { // 10-bit slots at least
			t.Errorf("bits %v: %.2f bits per entry", bits, st.BitsPerKey)
		}
		for _, k := range keys {
			if len(x.Lookup(k, nil)) == 0 {
				t.Fatalf("bits %v: false negative", bits)
			}
		}
	}
}

// TestIndexGrowthAndShrink: a tiny hint, tables added until the index
// grows several times, then removed: every remaining key is found at
// every step and emptied segments are dropped.
func TestIndexGrowthAndShrink(t *testing.T) {
	race.SkipLong(t)
	x := NewIndex(100, 10)
	tables := map[uint64][][]byte{}
	for id := uint64(1); id <= 20; id++ {
		tables[id] = testkeys.Random(2000, 12, id)
		if err := x.AddTable(id, hashesOf(tables[id])); err != nil {
			t.Fatal(err)
		}
	}
	grown := x.Stats()
	if grown.Segments < 3 {
		t.Fatalf("20 tables of 2000 keys in an index sized for 100: %+v", grown)
	}
	check := func() {
		for id, keys := range tables {
			for _, k := range keys {
				if !holds(x.Lookup(k, nil), id) {
					t.Fatalf("table %d lost key %x; %+v", id, k, x.Stats())
				}
			}
		}
	}
	check()
	checkCanonical(t, x)
	for id := uint64(1); id <= 18; id += 3 {
		// One alone, then two in one pass.
		if err := x.RemoveTable(id); err != nil {
			t.Fatal(err)
		}
		delete(tables, id)
		check()
		if err := x.RemoveTables(id+1, id+2); err != nil {
			t.Fatal(err)
		}
		delete(tables, id+1)
		delete(tables, id+2)
		check()
	}
	if err := x.RemoveTables(19, 99); err == nil || x.Tables() != 2 {
		t.Fatalf("RemoveTables with an unknown ID: %v, %d tables left", err, x.Tables())
	}
	st := x.Stats()
	t.Logf("grown: %+v; after removing 18 of 20 tables: %+v", grown, st)
	// Two keys of one table that agree on bucket and fingerprint share an
	// entry, so entries can be a little under the key count.
	if st.Segments >= grown.Segments || st.Entries > 4000 || st.Entries < 3800 {
		t.Errorf("after removals: %+v (grown %+v)", st, grown)
	}
	checkCanonical(t, x)
}

// pinnedEntryHash returns a key hash whose mixed value under seed has the
// given primary bucket (of n), tag and low bits: an adversary who knows
// the seed and can make any hash.
func pinnedEntryHash(seed uint32, primary, n uint32, lo uint32) uint64 {
	return keyhash.Unmix(uint64(hiFor(primary, n))<<32|uint64(lo), seed)
}

// TestIndexSharedFingerprintDeletes is the deletion trap: many keys share
// bucket and fingerprint, within one table and across tables. Removing a
// table must never lose another table's key.
func TestIndexSharedFingerprintDeletes(t *testing.T) {
	const seed = 0xfeed
	x := newIndexSeeded(1000, 10, seed)
	n := (*x.segs.Load())[0].n
	// Keys of three kinds, all in bucket 5 with the same 32 low bits, so
	// the same tag and fingerprint for every table: distinct keys that the
	// index cannot tell apart.
	var same []uint64
	for i := 0; i < 6; i++ {
		h := pinnedEntryHash(seed, 5, n, 0xdeadbeef)
		same = append(same, h+uint64(i)*0) // identical mixed hash: the worst case
	}
	other := hashesOf(testkeys.Random(300, 16, 3))
	for id := uint64(1); id <= 12; id++ {
		hs := append(append([]uint64(nil), same...), other[id*20:id*20+20]...)
		if err := x.AddTable(id, hs); err != nil {
			t.Fatal(err)
		}
	}
	// Twelve entries for one bucket pair's eight slots: four go to the
	// stash, none is lost.
	st := x.Stats()
	t.Logf("12 tables sharing one key position: %+v", st)
	if st.Always != 0 || st.Stashed > 4 {
		t.Fatalf("12 tables sharing one key position: %+v", st)
	}
	live := map[uint64]bool{}
	for id := uint64(1); id <= 12; id++ {
		live[id] = true
	}
	order := []uint64{5, 1, 12, 7, 2, 11, 3, 9}
	for _, rm := range order {
		if err := x.RemoveTable(rm); err != nil {
			t.Fatal(err)
		}
		delete(live, rm)
		got := x.LookupHash(same[0], nil)
		for id := range live {
			if !holds(got, id) {
				t.Fatalf("after removing %d: shared key lost table %d (got %v)", rm, id, got)
			}
			for _, h := range other[id*20 : id*20+20] {
				if !holds(x.LookupHash(h, nil), id) {
					t.Fatalf("after removing %d: table %d lost a key", rm, id)
				}
			}
		}
		if holds(got, rm) {
			t.Fatalf("removed table %d still named", rm)
		}
	}
}

// craftIdxCluster returns 16 hashes that, under a known seed, share
// primary bucket a and tag (so both buckets) and differ in the fingerprint
// bits after the tag: 16 distinct entries for the 8 slots of one bucket
// pair.
func craftIdxCluster(x *Index, s *idxSegment, a uint32) []uint64 {
	var out []uint64
	tag := a % (1 << x.m)
	for extra := uint32(0); extra < 16; extra++ {
		lo := tag<<(32-x.m) | extra<<(32-x.m-4)
		out = append(out, pinnedEntryHash(x.seed, a, s.n, lo))
	}
	return out
}

// TestIndexCraftedClusters: an adversary with the seed sends tables whose
// keys crowd a few buckets. The index must not grow for them, must stay
// within its memory bound, and must never miss a key.
func TestIndexCraftedClusters(t *testing.T) {
	const seed = 0xabc
	x := newIndexSeeded(20_000, 10, seed)
	first := (*x.segs.Load())[0]
	before := x.Stats().Bytes
	tables := map[uint64][]uint64{}
	total := 0
	slowest := time.Duration(0)
	for id := uint64(1); id <= 30; id++ {
		hs := craftIdxCluster(x, first, uint32(id)*40)
		tables[id] = hs
		total += len(hs)
		start := time.Now()
		if err := x.AddTable(id, hs); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
	}
	st := x.Stats()
	t.Logf("%d crafted entries in 30 tables: %+v; slowest AddTable %v", total, st, slowest)
	if st.Segments != 1 {
		t.Errorf("crafted clusters grew the index: %+v", st)
	}
	if st.Bytes > before+int64(st.Stashed*16)+30*40*2 { // stash + codebook rows
		t.Errorf("bytes %d, before the attack %d", st.Bytes, before)
	}
	if st.Stashed == 0 && st.Always == 0 {
		t.Error("the clusters all fit: the attack is not exercised")
	}
	for id, hs := range tables {
		for _, h := range hs {
			if !holds(x.LookupHash(h, nil), id) {
				t.Fatalf("table %d: crafted key not found", id)
			}
		}
	}
	// A compaction of crafted tables (some of whose keys sit in the stash,
	// or whose table every lookup names) recodes what it can in place:
	// still no growth, no miss.
	inputs := []uint64{3, 4, 5, 6, 7, 8}
	var merged []uint64
	for _, id := range inputs {
		merged = append(merged, tables[id]...)
		delete(tables, id)
	}
	if err := x.Replace(inputs, 100, merged, nil); err != nil {
		t.Fatal(err)
	}
	checkCanonical(t, x)
	tables[100] = merged
	if st := x.Stats(); st.Segments != 1 || st.Tables != 25 {
		t.Errorf("after a crafted compaction: %+v", st)
	}
	for id, hs := range tables {
		for _, h := range hs {
			if !holds(x.LookupHash(h, nil), id) {
				t.Fatalf("table %d: crafted key not found after the compaction", id)
			}
		}
	}
	// Removing the crafted tables gives everything back.
	for id := range tables {
		if err := x.RemoveTable(id); err != nil {
			t.Fatal(err)
		}
	}
	if st := x.Stats(); st.Entries != 0 || st.Always != 0 || st.Stashed != 0 {
		t.Errorf("after removing all: %+v", st)
	}
}

// TestIndexBounceCaught: between a lookup's reads of its two buckets, the
// key's entry moves from the second bucket into the first. A single pass
// misses it; Lookup must not.
func TestIndexBounceCaught(t *testing.T) {
	x := newIndexSeeded(1000, 12, 1)
	h := KeyHash([]byte("bouncing"))
	if err := x.AddTable(1, nil); err != nil {
		t.Fatal(err)
	}
	s := (*x.segs.Load())[0]
	p := x.probeOf(h)
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	if i1 == i2 {
		t.Fatal("pick another key")
	}
	ti := x.book.Load().tables[0]
	v := x.slotValue(p, ti.code, uint(ti.length))
	x.swap(s, i2, 0, v)
	calls := 0
	x.hooks.afterFirstRead = func(seg *idxSegment) {
		if seg == s && calls == 0 {
			calls++
			x.move(s, relocate.Step{From: i2, To: i1, Item: v})
		}
	}
	got := x.LookupHash(h, nil)
	x.hooks.afterFirstRead = nil
	if calls != 1 || !holds(got, 1) || x.Stats().Contended != 0 {
		t.Fatalf("hook ran %d times; lookup returned %v, %d named every table", calls, got, x.Stats().Contended)
	}
}

// TestIndexLookupNeverWaits: a writer stopped in the middle of a bucket
// write (its group's counter left odd), or codebooks published under
// every read, must not hold a lookup: it names every live table, newest
// first, and counts it; once the writer is gone, lookups are exact again.
func TestIndexLookupNeverWaits(t *testing.T) {
	x := newIndexSeeded(4000, 12, 3)
	tables := [][]uint64{}
	for id := uint64(1); id <= 5; id++ {
		hs := hashesOf(testkeys.Random(500, 16, id))
		tables = append(tables, hs)
		if err := x.AddTable(id, hs); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.RemoveTable(2); err != nil {
		t.Fatal(err)
	}
	every := []uint64{5, 4, 3, 1}
	k := tables[2][7] // a key of table 3
	if got := x.LookupHash(k, nil); !holds(got, 3) || len(got) >= len(every) || x.Stats().Contended != 0 {
		t.Fatalf("undisturbed lookup: %v, %d contended", got, x.Stats().Contended)
	}

	s := (*x.segs.Load())[0]
	g := &s.ctr[s.primary(x.probeOf(k).hi)>>idxGroupShift]
	g.Add(1) // a writer descheduled mid-write
	done := make(chan []uint64)
	go func() { done <- x.LookupHash(k, nil) }()
	select {
	case got := <-done:
		if !slices.Equal(got, every) || x.Stats().Contended != 1 {
			t.Fatalf("lookup beside a stopped writer: %v, %d contended; want %v, 1", got, x.Stats().Contended, every)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lookup waited for a writer stopped mid-write")
	}
	g.Add(1)
	if got := x.LookupHash(k, nil); !holds(got, 3) || len(got) >= len(every) || x.Stats().Contended != 1 {
		t.Fatalf("writer gone: %v, %d contended", got, x.Stats().Contended)
	}

	x.hooks.afterFirstRead = func(*idxSegment) { x.publish(func(*codebook) {}) }
	got := x.LookupHash(k, nil)
	x.hooks.afterFirstRead = nil
	if !slices.Equal(got, every) || x.Stats().Contended != 2 {
		t.Fatalf("codebooks published under every read: %v, %d contended; want %v, 2", got, x.Stats().Contended, every)
	}
}

// TestIndexConcurrentCompactions: a writer flushes tables and replaces
// runs of them by their merge, as a size-tiered LSM does, while readers
// look up keys of tables whose AddTable had returned. Every lookup must
// name some table that holds the key. Run with -race.
func TestIndexConcurrentCompactions(t *testing.T) {
	dur := 3 * time.Second
	if testing.Short() {
		dur = 700 * time.Millisecond
	}
	x := NewIndex(500, 10) // small: growth happens too
	lt := newLiveTables()
	lt.read(t, x, 2, 9, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(dur)
	flushes, merges := 0, 0
	for time.Now().Before(deadline) || merges < 12 || lt.fewChecks() {
		cur := lt.tables()
		if len(cur) >= 14 {
			// Merge a run of 2..4 adjacent tables (cur is newest first).
			k := 2 + rng.IntN(3)
			at := rng.IntN(len(cur) - k + 1)
			inputs, hs, _ := mergeOf(cur[at:at+k], nil)
			m := lt.register(hs)
			if err := x.Replace(inputs, m.id, hs, nil); err != nil {
				t.Fatal(err)
			}
			lt.merged(at, k, m)
			merges++
			continue
		}
		// Flush: fresh keys plus overwrites of keys of live tables.
		hs := hashesOf(testkeys.Random(300+rng.IntN(300), 16, rng.Uint64()))
		for _, tb := range cur {
			hs = append(hs, tb.keys[rng.IntN(len(tb.keys))])
		}
		tb := lt.register(hs)
		if err := x.AddTable(tb.id, hs); err != nil {
			t.Fatal(err)
		}
		lt.flushed(tb)
		flushes++
	}
	checks := lt.finish(t)
	st := x.Stats()
	t.Logf("%d flushes, %d merges, %d checks: %+v", flushes, merges, checks, st)
	if merges == 0 || checks == 0 {
		t.Fatal("nothing exercised")
	}
	if st.Tables != len(lt.tables()) {
		t.Errorf("index has %d tables, store %d", st.Tables, len(lt.tables()))
	}
	checkCanonical(t, x)
}

// TestIndexReplaceSharedEntries merges tables whose keys were crafted to
// share entries: keys of one input, and of several inputs, that agree on
// bucket, tag and more fingerprint bits than the inputs' entries keep, but
// differ in the bits the merged table's shorter code leaves them. Recoding
// one key's shared entry must not hide the others: after every key the
// Replace handles, every key of the merge must name the merge or an input
// holding it, and every key of the other tables its table. Some keys are
// dropped by the merge (a tombstone at the oldest end).
func TestIndexReplaceSharedEntries(t *testing.T) {
	race.SkipLong(t)
	for _, bits := range []float64{10, 14} {
		for seed := uint32(1); seed <= 3; seed++ {
			testReplaceShared(t, bits, seed, 3000)
			// Sized for a sixth of the keys: several segments, so that a
			// key's entries of two inputs may sit in different segments.
			testReplaceShared(t, bits, seed, 500)
		}
	}
}

func testReplaceShared(t *testing.T, bits float64, seed uint32, capacity int) {
	x := newIndexSeeded(capacity, bits, seed)
	s := (*x.segs.Load())[0]
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(bits)))
	// craft returns keys (as KeyHash values) that agree on primary bucket
	// and on the top 16 bits after the tag: one cell of the index.
	craft := func(n int) []uint64 {
		bucket := uint32(rng.Uint64N(uint64(s.n)))
		top := uint32(rng.Uint32()) & 0xffff_f000
		var out []uint64
		for len(out) < n {
			v := uint64(rng.Uint32())<<32 | uint64(top|uint32(rng.Uint32())&0xfff)
			if s.primary(uint32(v>>32)) == bucket {
				out = append(out, keyhash.Unmix(v, seed))
			}
		}
		return out
	}
	// Older tables, large, so the inputs get long codes and their merge a
	// shorter one.
	tables := map[uint64][]uint64{}
	for id := uint64(1); id <= 3; id++ {
		tables[id] = hashesOf(testkeys.Random(600, 16, uint64(id)*7+uint64(seed)))
	}
	inputs := []uint64{4, 5, 6, 7, 8, 9}
	for _, id := range inputs {
		tables[id] = hashesOf(testkeys.Random(60, 16, uint64(id)*13+uint64(seed)))
	}
	// Shared cells: within one input, across inputs, and with an older
	// table that is not merged.
	for c := 0; c < 12; c++ {
		cell := craft(6)
		for i, h := range cell {
			id := inputs[(c+i*(c%3))%len(inputs)]
			tables[id] = append(tables[id], h)
		}
		if c%4 == 0 {
			tables[1] = append(tables[1], cell[0])
		}
	}
	for id := uint64(1); id <= 9; id++ {
		if err := x.AddTable(id, tables[id]); err != nil {
			t.Fatal(err)
		}
	}
	var merged, dropped []uint64
	seen := map[uint64]bool{}
	holder := map[uint64][]uint64{} // key -> inputs holding it
	for _, id := range inputs {
		for _, h := range tables[id] {
			holder[h] = append(holder[h], id)
			if seen[h] {
				continue
			}
			seen[h] = true
			if rng.IntN(10) == 0 {
				dropped = append(dropped, h)
			} else {
				merged = append(merged, h)
			}
		}
	}
	const m = 20
	var buf []uint64
	checks := 0
	check := func(when string, after bool) {
		for _, h := range merged {
			buf = x.LookupHash(h, buf[:0])
			ok := holds(buf, m)
			for _, id := range holder[h] {
				ok = ok || !after && holds(buf, id)
			}
			if !ok {
				t.Fatalf("bits %v seed %d %s: key %#x of the merge (inputs %v) names %v", bits, seed, when, h, holder[h], buf)
			}
		}
		for id := uint64(1); id <= 3; id++ {
			for _, h := range tables[id] {
				if buf = x.LookupHash(h, buf[:0]); !holds(buf, id) {
					t.Fatalf("bits %v seed %d %s: key %#x of table %d names %v", bits, seed, when, h, id, buf)
				}
			}
		}
		checks++
	}
	x.hooks.recoded = func() { check("during Replace", false) }
	err := x.Replace(inputs, m, merged, dropped)
	x.hooks.recoded = nil
	if err != nil {
		t.Fatal(err)
	}
	check("after Replace", true)
	st := x.Stats()
	t.Logf("bits %v seed %d capacity %d: %+v", bits, seed, capacity, st)
	var slots int64
	for _, s := range *x.segs.Load() {
		slots += s.entries.Load()
	}
	var counted int64
	for _, c := range x.count {
		counted += c
	}
	if st.Tables != 4 || counted != slots {
		t.Fatalf("bits %v seed %d: %d tables (want 4); %d entries counted by table, %d in the segments", bits, seed, st.Tables, counted, slots)
	}
	if checks < len(merged) {
		t.Fatalf("only %d checks for %d keys", checks, len(merged))
	}
	checkCanonical(t, x)
}

// TestIndexAddTables: adding a store's tables in one call finds every key,
// orders versions newest first as AddTable in the same order would, and
// spends fewer code bits than adding them one by one, within a bit of the
// table-size entropy's bound.
func TestIndexAddTables(t *testing.T) {
	for _, bits := range []float64{10, 14} {
		var ids []uint64
		var sets [][]uint64
		total := 0
		for i := 0; i < 22; i++ {
			n := 3000 + 97*i
			keys := append(testkeys.Random(n, 16, uint64(i)+100), []byte("shared"))
			ids = append(ids, uint64(i+1))
			sets = append(sets, hashesOf(keys))
			total += len(keys)
		}
		one := NewIndex(total, bits)
		for i, id := range ids {
			if err := one.AddTable(id, sets[i]); err != nil {
				t.Fatal(err)
			}
		}
		all := NewIndex(total, bits)
		if err := all.AddTables(ids, sets); err != nil {
			t.Fatal(err)
		}
		if err := all.AddTables([]uint64{99, 99}, [][]uint64{nil, nil}); err == nil {
			t.Fatal("a repeated ID was accepted")
		}
		for i, id := range ids {
			for _, h := range sets[i] {
				if !holds(all.LookupHash(h, nil), id) {
					t.Fatalf("bits %v: key of table %d not found", bits, id)
				}
			}
		}
		want := slices.Clone(ids)
		slices.Reverse(want)
		if got := all.Lookup([]byte("shared"), nil); !slices.Equal(got, want) {
			t.Fatalf("bits %v: versions %v, want %v", bits, got, want)
		}
		s1, s2 := one.Stats(), all.Stats()
		t.Logf("bits %v: one by one %.2f code bits, together %.2f, entropy %.2f", bits, s1.CodeBits, s2.CodeBits, s2.SizeEntropy)
		if s2.CodeBits > s1.CodeBits+1e-9 || s2.CodeBits > s2.SizeEntropy+1 {
			t.Errorf("bits %v: together %.2f code bits per entry (one by one %.2f, entropy %.2f)", bits, s2.CodeBits, s1.CodeBits, s2.SizeEntropy)
		}
	}
}
