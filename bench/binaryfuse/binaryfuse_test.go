package binaryfuse

import (
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

func build(p Policy, keys [][]byte) []byte {
	w := p.NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return w.Finish(nil)
}

// tableSizes are the key counts the false-negative test builds: every
// count up to 100, where the construction's small-set parameters change
// most, then a spread up to a million.
func tableSizes() []int {
	var sizes []int
	for n := 1; n <= 100; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, 127, 128, 129, 1000, 4095)
	if race.Enabled { // nothing here for the race detector: make test runs the rest without it
		return sizes
	}
	return append(sizes, 10_000, 30_000, 100_000, 1_000_000)
}

// TestNoFalseNegatives builds a filter of every width over table sizes from
// 1 to a million keys and checks that it holds every key, read from a copy
// at every misalignment Pebble may hand it.
func TestNoFalseNegatives(t *testing.T) {
	for _, n := range tableSizes() {
		keys := testkeys.Random(n, 16, uint64(n))
		for _, w := range Widths {
			p := NewPolicy(w)
			block := build(p, keys)
			if _, _, _, _, ok := layout(block); !ok {
				t.Fatalf("w=%d n=%d: the block does not parse (%d bytes)", w, n, len(block))
			}
			for _, skew := range []int{0, 1, 3, 7} {
				if n > 10_000 && skew > 0 {
					break
				}
				copied := make([]byte, skew+len(block))[skew:]
				copy(copied, block)
				for i, k := range keys {
					if !p.MayContain(pebble.TableFilter, copied, k) {
						t.Fatalf("w=%d n=%d skew=%d: false negative for key %d (%x)", w, n, skew, i, k)
					}
				}
			}
		}
	}
}

// TestKeyShapes builds over the key shapes that have broken filters in
// the field (testkeys.Shapes: sequential, long shared prefixes, the empty
// key, a hot key repeated in runs and scattered, no key, one key) and over
// 8-byte big-endian counters.
func TestKeyShapes(t *testing.T) {
	sets := testkeys.Shapes(20_000)
	var counters [][]byte
	for i := range 50_000 {
		counters = append(counters, binary.BigEndian.AppendUint64(nil, uint64(i)))
	}
	sets = append(sets, testkeys.Set{Name: "counters", Keys: counters, Distinct: len(counters)})
	for _, set := range sets {
		for _, w := range Widths {
			p := NewPolicy(w)
			block := build(p, set.Keys)
			for _, k := range set.Keys {
				if !p.MayContain(pebble.TableFilter, block, k) {
					t.Fatalf("%s, w=%d: false negative for %x", set.Name, w, k)
				}
			}
		}
	}
}

// TestDuplicateKeys: Pebble hands a writer every version of a key, one
// after another, and the filter is then as small as over the distinct keys;
// a key that comes back after others (which a table's sorted keys never
// do) costs space but never a false negative.
func TestDuplicateKeys(t *testing.T) {
	distinct := testkeys.Random(20_000, 16, 9)
	var versions [][]byte
	for i, k := range distinct {
		for range 1 + i%4 {
			versions = append(versions, k)
		}
	}
	scattered := append(append([][]byte(nil), distinct...), distinct[:5000]...)
	for _, w := range Widths {
		p := NewPolicy(w)
		block := build(p, versions)
		if len(block) != len(build(p, distinct)) {
			t.Errorf("w=%d: %d bytes with versions, %d without", w, len(block), len(build(p, distinct)))
		}
		far := build(p, scattered)
		for _, k := range distinct {
			if !p.MayContain(pebble.TableFilter, block, k) || !p.MayContain(pebble.TableFilter, far, k) {
				t.Fatalf("w=%d: false negative for %x", w, k)
			}
		}
	}
	// One key, many times: a filter of one key.
	same := make([][]byte, 1000)
	for i := range same {
		same[i] = []byte("only")
	}
	for _, w := range Widths {
		p := NewPolicy(w)
		if block := build(p, same); !p.MayContain(pebble.TableFilter, block, []byte("only")) {
			t.Errorf("w=%d: a key written 1000 times is missing", w)
		}
	}
}

// TestEmptyTable: a table without keys gets a block that answers "maybe",
// and the writer builds the next table's filter from that table's keys
// alone.
func TestEmptyTable(t *testing.T) {
	p := NewPolicy(8)
	w := p.NewWriter(pebble.TableFilter)
	empty := w.Finish(nil)
	if _, _, _, _, ok := layout(empty); ok {
		t.Fatalf("an empty table's block parses as a filter")
	}
	for _, k := range testkeys.Random(100, 16, 3) {
		if !p.MayContain(pebble.TableFilter, empty, k) {
			t.Fatalf("an empty table's block rejected %x", k)
		}
	}
	first := testkeys.Random(1000, 16, 4)
	for _, k := range first {
		w.AddKey(k)
	}
	a := w.Finish([]byte("prefix"))
	if string(a[:6]) != "prefix" {
		t.Fatalf("Finish did not append to dst")
	}
	second := testkeys.Random(1000, 16, 5)
	for _, k := range second {
		w.AddKey(k)
	}
	b := w.Finish(nil)
	fp := 0
	for _, k := range first {
		if p.MayContain(pebble.TableFilter, b, k) {
			fp++
		}
	}
	if fp > 30 { // 2^-8 of 1000 is about 4
		t.Errorf("the second table's filter accepts %d of the first table's keys: Finish did not start afresh", fp)
	}
	for _, k := range second {
		if !p.MayContain(pebble.TableFilter, b, k) {
			t.Fatalf("second table: false negative for %x", k)
		}
	}
}

// TestFalsePositiveRate checks each width's rate on absent keys against
// 2^-w, and its size against the construction's overhead: a check that
// the low w bits of each slot are what is stored and compared.
func TestFalsePositiveRate(t *testing.T) {
	race.SkipLong(t)
	keys := testkeys.Random(100_000, 16, 21)
	absent := testkeys.Absent(400_000, 22)
	for _, w := range Widths {
		p := NewPolicy(w)
		block := build(p, keys)
		fp := 0
		for _, k := range absent {
			if p.MayContain(pebble.TableFilter, block, k) {
				fp++
			}
		}
		want := float64(len(absent)) / float64(uint64(1)<<w)
		if w <= 12 && (float64(fp) < 0.7*want || float64(fp) > 1.3*want) {
			t.Errorf("w=%d: %d false positives of %d, expected about %.0f", w, fp, len(absent), want)
		}
		if w == 16 && fp > 30 {
			t.Errorf("w=16: %d false positives of %d, expected about %.0f", fp, len(absent), want)
		}
		if bpk := float64(8*len(block)) / float64(len(keys)); bpk < 1.1*float64(w) || bpk > 1.3*float64(w) {
			t.Errorf("w=%d: %.2f bits/key", w, bpk)
		}
	}
}

// TestMalformedBlocksAnswerMaybe: every truncation of a real block, and
// blocks whose trailer lies about the layout, answer "maybe" without
// panicking.
func TestMalformedBlocksAnswerMaybe(t *testing.T) {
	keys := testkeys.Random(3000, 16, 31)
	probe := testkeys.Absent(200, 32)
	for _, w := range Widths {
		p := NewPolicy(w)
		block := build(p, keys)
		for n := 0; n < len(block); n++ {
			for _, k := range probe[:20] {
				if !p.MayContain(pebble.TableFilter, block[:n], k) {
					t.Fatalf("w=%d: a block cut to %d of %d bytes rejected a key", w, n, len(block))
				}
			}
		}
		at := len(block) - trailerLen
		for name, damage := range map[string]func(b []byte){
			"width 0":          func(b []byte) { b[at+widthAt] = 0 },
			"width 9":          func(b []byte) { b[at+widthAt] = 9 },
			"other width":      func(b []byte) { b[at+widthAt] ^= 4 },
			"segment count 0":  func(b []byte) { binary.LittleEndian.PutUint32(b[at+segCountAt:], 0) },
			"segment count +1": func(b []byte) { b[at+segCountAt]++ },
			"huge segments":    func(b []byte) { b[at+segShiftAt] = 200 },
			"shift +1":         func(b []byte) { b[at+segShiftAt]++ },
		} {
			bad := append([]byte(nil), block...)
			damage(bad)
			for _, k := range probe {
				if !p.MayContain(pebble.TableFilter, bad, k) {
					t.Fatalf("w=%d, %s: a block whose trailer does not match its length rejected a key", w, name)
				}
			}
		}
	}
}

// FuzzMayContain: no block, however malformed, makes a lookup panic, and
// one that does not parse answers "maybe".
func FuzzMayContain(f *testing.F) {
	for _, w := range Widths {
		f.Add(build(NewPolicy(w), testkeys.Random(40, 8, uint64(w))), []byte("key"))
	}
	f.Add(appendMaybe(nil), []byte{})
	f.Add([]byte{}, []byte("k"))
	f.Fuzz(func(t *testing.T, block, key []byte) {
		got := NewPolicy(8).MayContain(pebble.TableFilter, block, key)
		if _, _, _, _, ok := layout(block); !ok && !got {
			t.Fatalf("a block that does not parse rejected %x", key)
		}
	})
}

// TestNames: each width's name maps back to its policy, names of other
// filters map to none, and an unsupported width is refused.
func TestNames(t *testing.T) {
	for _, w := range Widths {
		p, ok := PolicyFromName(NewPolicy(w).Name())
		if !ok || p.Width() != w {
			t.Errorf("PolicyFromName(%q) = %v, %v", NewPolicy(w).Name(), p, ok)
		}
	}
	for _, name := range []string{"", "binaryfuse(8)", "rocksdb.BuiltinBloomFilter", namePrefix + "(9)", namePrefix + "(8) "} {
		if _, ok := PolicyFromName(name); ok {
			t.Errorf("PolicyFromName(%q) found a policy", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("NewPolicy(9) did not refuse the width")
		}
	}()
	NewPolicy(9)
}

// TestPebbleStore runs the policy in a real Pebble store: present keys are
// found, absent ones are not, and the filters skip tables (Pebble's filter
// metrics), so the tables carry the policy's blocks and Pebble reads them.
func TestPebbleStore(t *testing.T) {
	p := NewPolicy(10)
	o := &pebble.Options{FS: vfs.NewMem(), Filters: map[string]pebble.FilterPolicy{p.Name(): p}, Logger: quietLogger{t}}
	o.Levels[0].FilterPolicy = p
	db, err := pebble.Open("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys := testkeys.Random(20_000, 16, 41)
	for part := range 4 { // four tables
		b := db.NewBatch()
		for _, k := range keys[part*5000 : (part+1)*5000] {
			if err := b.Set(k, k, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		v, closer, err := db.Get(k)
		if err != nil {
			t.Fatalf("present key %x: %v", k, err)
		}
		if string(v) != string(k) {
			t.Fatalf("key %x read back %x", k, v)
		}
		closer.Close()
	}
	for _, k := range testkeys.Absent(5000, 42) {
		if _, _, err := db.Get(k); err != pebble.ErrNotFound {
			t.Fatalf("absent key %x: %v", k, err)
		}
	}
	if m := db.Metrics(); m.Filter.Hits == 0 {
		t.Errorf("no table was skipped by its filter: %+v", m.Filter)
	}
}

// quietLogger keeps Pebble's informational lines out of the test output.
type quietLogger struct{ t *testing.T }

func (quietLogger) Infof(string, ...any)                {}
func (l quietLogger) Errorf(format string, args ...any) { l.t.Errorf(format, args...) }
func (l quietLogger) Fatalf(format string, args ...any) { l.t.Fatalf(format, args...) }
