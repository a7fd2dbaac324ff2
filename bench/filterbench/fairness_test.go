package filterbench

import (
	"hash/fnv"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// probeLog records what a family was given: the keys it was built from and
// every key it was asked about, in order.
type probeLog struct {
	built   uint64 // digest of the build keys
	probes  uint64 // digest of the probe sequence
	nProbes int
}

// exactFilter is a filter that answers exactly (so the run's false-negative
// guard passes) and logs every probe.
type exactFilter struct {
	set   map[string]bool
	bytes int
	log   *probeLog
}

func (f exactFilter) MayContain(key []byte) bool {
	h := fnv.New64a()
	var prev [8]byte
	for i := range prev {
		prev[i] = byte(f.log.probes >> (8 * i))
	}
	h.Write(prev[:])
	h.Write(key)
	f.log.probes = h.Sum64()
	f.log.nProbes++
	return f.set[string(key)]
}
func (f exactFilter) Bytes() int      { return f.bytes }
func (f exactFilter) Copy(int) filter { return f }

func loggingFamily(name string, bytes int, log *probeLog) Family {
	return Family{Name: name, Kind: "test", build: func(keys [][]byte) filter {
		h := fnv.New64a()
		set := map[string]bool{}
		for _, k := range keys {
			h.Write(k)
			h.Write([]byte{0})
			set[string(k)] = true
		}
		log.built = h.Sum64()
		return exactFilter{set: set, bytes: bytes, log: log}
	}}
}

// TestMeasureGivesEveryFamilyTheSameKeys checks the side-by-side itself: two
// families of different sizes (so their cold sets hold different numbers
// of copies) are built from the same keys and asked about the same keys in
// the same order, in the FPR, hot, unaligned and cold timings alike.
func TestMeasureGivesEveryFamilyTheSameKeys(t *testing.T) {
	var small, large probeLog
	fams := []Family{loggingFamily("small", 640, &small), loggingFamily("large", 64<<10, &large)}
	opts := Options{Lookups: 3000, ColdMiB: 1, Reps: 1, Unaligned: true}
	res := Measure(fams, testkeys.Random(500, 16, 100), testkeys.Absent(2000, 200), opts, nil)
	if small.built != large.built {
		t.Errorf("families were built from different keys")
	}
	if small.nProbes == 0 || small.nProbes != large.nProbes || small.probes != large.probes {
		t.Errorf("families were probed differently: %d probes (digest %x) against %d (%x)",
			small.nProbes, small.probes, large.nProbes, large.probes)
	}
	for _, r := range res {
		if r.FPR != 0 {
			t.Errorf("%s: FPR %v on an exact filter: a probe key was present", r.Family, r.FPR)
		}
	}
}

// TestMeasureRotatesFamilies checks that no family always takes the first turn
// of a repetition, and that rotating the turns keeps each family's results
// its own.
func TestMeasureRotatesFamilies(t *testing.T) {
	var a, b, c probeLog
	fams := []Family{loggingFamily("a", 64, &a), loggingFamily("b", 64, &b), loggingFamily("c", 64, &c)}
	var turns []string
	res := Measure(fams, testkeys.Random(100, 16, 100), testkeys.Absent(100, 200), Options{Lookups: 100, Reps: 3},
		func(name string) { turns = append(turns, name) })
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}
	if !slices.Equal(turns, want) {
		t.Errorf("turns %v, want %v", turns, want)
	}
	// The results stay in the listed order, each under its own name.
	for i, name := range []string{"a", "b", "c"} {
		if res[i].Family != name {
			t.Errorf("result %d is %s, want %s", i, res[i].Family, name)
		}
	}
}
