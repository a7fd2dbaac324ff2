package filterbench

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/turn"
)

// Options control a measurement.
type Options struct {
	Lookups int // lookups per timing
	ColdMiB int // memory the cold copies of each filter spread over (0: no cold timings)
	Reps    int // repetitions; medians are reported
	// Unaligned also times every lookup on filters starting 1..63 bytes
	// past a 64-byte boundary.
	Unaligned bool
	// Baseline names the family every other is divided by (Result.Ratios):
	// each repetition's ratio, then their median, which a shared
	// machine's drift between repetitions moves less than a ratio of two
	// medians. Empty: no ratios.
	Baseline string
}

// Measure builds every family over keys and probes it with absent, keys
// none of them holds, interleaving the families within a repetition so
// machine noise hits them alike, and returns each family's medians in the
// order given. Each repetition starts one family later, so no family
// always runs first, on a freshly collected heap and an idle
// processor, or always right after the same neighbour's cold copies.
// progress, if not nil, is told each family as its turn starts.
func Measure(fams []Family, keys, absent [][]byte, opts Options, progress func(family string)) []Result {
	reps := make([][]Result, len(fams))
	for r := 0; r < max(1, opts.Reps); r++ {
		for _, i := range turn.Order(r, len(fams)) {
			if progress != nil {
				progress(fams[i].Name)
			}
			reps[i] = append(reps[i], measure(fams[i], keys, absent, opts))
			runtime.GC()
		}
	}
	base := slices.IndexFunc(fams, func(f Family) bool { return f.Name == opts.Baseline })
	out := make([]Result, 0, len(fams))
	for _, rs := range reps {
		m := median(rs)
		if base >= 0 {
			m.Ratios = repRatios(rs, reps[base])
		}
		out = append(out, m)
	}
	return out
}

func measure(fam Family, keys, absent [][]byte, opts Options) Result {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	f, buildNs := buildTimed(fam, keys)
	runtime.ReadMemStats(&ms)
	res := Result{
		Family:      fam.Name,
		Kind:        fam.Kind,
		Param:       fam.Param,
		Keys:        len(keys),
		Bytes:       f.Bytes(),
		BitsPerKey:  float64(f.Bytes()*8) / float64(max(1, len(keys))),
		FPR:         falsePositiveRate(f, absent),
		Probes:      len(absent),
		BuildNsKey:  buildNs,
		BuildAllocs: float64(ms.Mallocs - mallocs),
	}
	for _, k := range keys {
		if !f.MayContain(k) {
			if res.FalseNegatives == 0 {
				res.FalseNegative = k
			}
			res.FalseNegatives++
		}
	}
	if len(absent) == 0 {
		return res
	}
	f = f.Copy(0)                                       // on a 64-byte boundary, as the unaligned runs are not
	lookupNs(f, absent, min(len(absent), opts.Lookups)) // warm
	res.HotNs = lookupNs(f, absent, opts.Lookups)
	if opts.Unaligned {
		res.HotUnalignedNs = unalignedLookupNs(f, absent, opts.Lookups)
	}
	if opts.ColdMiB > 0 {
		cs := newColdSet(f, opts.ColdMiB<<20, opts.Lookups, 7, false)
		cs.lookupNs(absent) // fault the pages in
		res.ColdNs = cs.lookupNs(absent)
		res.ColdLatNs = cs.latencyNs(absent)
		res.ColdMiB = cs.mib()
		if opts.Unaligned {
			cs = nil
			runtime.GC()
			cs = newColdSet(f, opts.ColdMiB<<20, opts.Lookups, 7, true)
			cs.lookupNs(absent)
			res.ColdUnalignedNs = cs.lookupNs(absent)
		}
	}
	return res
}

// Result is one family's figures on one key set.
type Result struct {
	Family      string  `json:"family"`
	Kind        string  `json:"kind"`
	Param       float64 `json:"param"`
	Keys        int     `json:"keys"`
	Bytes       int     `json:"bytes"`
	BitsPerKey  float64 `json:"bits_per_key"`
	FPR         float64 `json:"fpr"`
	Probes      int     `json:"probes"`
	BuildNsKey  float64 `json:"build_ns_per_key"`
	HotNs       float64 `json:"hot_lookup_ns"`
	ColdNs      float64 `json:"cold_lookup_ns"`
	ColdLatNs   float64 `json:"cold_latency_ns"`
	ColdMiB     float64 `json:"cold_mib"`
	BuildAllocs float64 `json:"build_allocs"`
	// The same lookups on filters that start 1..63 bytes past a 64-byte
	// boundary (Pebble hands filters at any alignment); 0 when not measured.
	HotUnalignedNs  float64 `json:"hot_unaligned_ns,omitempty"`
	ColdUnalignedNs float64 `json:"cold_unaligned_ns,omitempty"`
	// FalseNegatives counts present keys the filter rejected, and
	// FalseNegative is the first of them: any is a bug.
	FalseNegatives int    `json:"false_negatives,omitempty"`
	FalseNegative  []byte `json:"false_negative,omitempty"`
	// Ratios to the run's baseline family (Options.Baseline): for each
	// timing, the median over repetitions of that repetition's ratio; 0
	// when the run had no baseline.
	Ratios Ratios `json:"ratios,omitzero"`
}

// Ratios are a family's timings divided by the baseline's.
type Ratios struct {
	Build   float64 `json:"build"`
	Hot     float64 `json:"hot"`
	Cold    float64 `json:"cold"`
	ColdLat float64 `json:"cold_latency"`
}

// FPRInterval is the 95% confidence interval of the false-positive rate:
// Wilson's score interval for the false positives counted among Probes
// absent keys, which stays inside [0, 1] and is honest when few or none
// were seen.
func (r Result) FPRInterval() (lo, hi float64) {
	if r.Probes <= 0 {
		return 0, 1
	}
	const z = 1.959964 // the normal distribution's 97.5th percentile
	n := float64(r.Probes)
	fp := math.Round(r.FPR * n)
	p := fp / n
	centre := (p + z*z/(2*n)) / (1 + z*z/n)
	half := z / (1 + z*z/n) * math.Sqrt(p*(1-p)/n+z*z/(4*n*n))
	lo, hi = max(0, centre-half), min(1, centre+half)
	if fp == 0 { // exact: rounding leaves a bound a hair off the rate
		lo = 0
	}
	if fp == n {
		hi = 1
	}
	return lo, hi
}

// median takes each timing's median across repetitions. Size and FPR are
// the first repetition's build: identical across repetitions for the
// deterministic filters, one draw of the seed for the randomly seeded ones
// (lsmcuckoo versions 2 and 3, binary fuse), whose rates vary from build
// to build by about their sampling error.
func median(rs []Result) Result {
	m := rs[0]
	pick := func(get func(Result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.BuildNsKey = pick(func(r Result) float64 { return r.BuildNsKey })
	m.HotNs = pick(func(r Result) float64 { return r.HotNs })
	m.ColdNs = pick(func(r Result) float64 { return r.ColdNs })
	m.ColdLatNs = pick(func(r Result) float64 { return r.ColdLatNs })
	m.HotUnalignedNs = pick(func(r Result) float64 { return r.HotUnalignedNs })
	m.ColdUnalignedNs = pick(func(r Result) float64 { return r.ColdUnalignedNs })
	return m
}

// repRatios divides each repetition's timings by the baseline's in the
// same repetition and takes each ratio's median.
func repRatios(rs, base []Result) Ratios {
	ratio := func(get func(Result) float64) float64 {
		var v []float64
		for i := range min(len(rs), len(base)) {
			if b := get(base[i]); b > 0 {
				v = append(v, get(rs[i])/b)
			}
		}
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return Ratios{
		Build:   ratio(func(r Result) float64 { return r.BuildNsKey }),
		Hot:     ratio(func(r Result) float64 { return r.HotNs }),
		Cold:    ratio(func(r Result) float64 { return r.ColdNs }),
		ColdLat: ratio(func(r Result) float64 { return r.ColdLatNs }),
	}
}

// buildTimed builds fam's filter and returns it with the time per key.
func buildTimed(fam Family, keys [][]byte) (filter, float64) {
	start := time.Now()
	f := fam.newFilter(keys)
	el := time.Since(start)
	return f, float64(el.Nanoseconds()) / float64(max(1, len(keys)))
}

// falseNegatives counts present keys the filter rejects; any is a bug.
func falseNegatives(f filter, keys [][]byte) int {
	n := 0
	for _, k := range keys {
		if !f.MayContain(k) {
			n++
		}
	}
	return n
}

// falsePositiveRate is the share of absent keys the filter accepts.
func falsePositiveRate(f filter, absent [][]byte) float64 {
	n := 0
	for _, k := range absent {
		if f.MayContain(k) {
			n++
		}
	}
	return float64(n) / float64(max(1, len(absent)))
}

// lookupNs times negative lookups of absent keys against one filter (hot:
// after the first pass the filter sits in cache when it fits).
func lookupNs(f filter, absent [][]byte, lookups int) float64 {
	sink := 0
	start := time.Now()
	for i := 0; i < lookups; i++ {
		if f.MayContain(absent[i%len(absent)]) {
			sink++
		}
	}
	el := time.Since(start)
	sinkHole += sink
	return float64(el.Nanoseconds()) / float64(lookups)
}

var sinkHole int

// unalignedLookupNs is lookupNs averaged over copies of f starting 1..63
// bytes past a 64-byte boundary.
func unalignedLookupNs(f filter, absent [][]byte, lookups int) float64 {
	total := 0.0
	per := max(1, lookups/63)
	for off := 1; off < 64; off++ {
		g := f.Copy(off)
		lookupNs(g, absent, min(per, len(absent))) // warm
		total += lookupNs(g, absent, per)
	}
	return total / 63
}

// coldSet is many copies of one filter spread over at least minBytes of
// memory; lookups go to a random copy so nearly every probe misses the CPU
// caches, as lookups into the block cache of a large store do.
type coldSet struct {
	copies []filter
	order  []uint32 // copy index per lookup, fixed so every family does the same
}

// newColdSet copies f until the copies hold minBytes, each copy starting
// on a 64-byte boundary, or, unaligned, 1..63 bytes past one.
func newColdSet(f filter, minBytes int, lookups int, seed uint64, unaligned bool) *coldSet {
	n := max(1, (minBytes+f.Bytes()-1)/max(1, f.Bytes()))
	cs := &coldSet{copies: make([]filter, n), order: make([]uint32, lookups)}
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range cs.copies {
		skew := 64 * r.IntN(64)
		if unaligned {
			skew += 1 + r.IntN(63)
		}
		cs.copies[i] = f.Copy(skew)
	}
	for i := range cs.order {
		cs.order[i] = uint32(r.IntN(n))
	}
	return cs
}

// mib is the memory the copies occupy.
func (cs *coldSet) mib() float64 {
	return float64(len(cs.copies)*cs.copies[0].Bytes()) / (1 << 20)
}

// latencyNs times the same lookups one at a time, as a Get that must have
// a table's answer before it goes on pays for them: a clock read after each
// lookup, then the clock's own cost, timed alone in the same call,
// subtracted. On linux/amd64 the clock is an ordered TSC read in the vDSO
// (LFENCE;RDTSC or RDTSCP), which does not start before every earlier
// instruction, the lookup's cache misses included, has finished, so no two
// lookups are ever in flight together. (A chain that feeds each answer into
// the next lookup's address does not do that: the processor predicts the
// answer, which for absent keys is nearly always "no", and runs ahead.)
// lookupNs, where the processor overlaps independent lookups, is the
// throughput of a tight loop.
func (cs *coldSet) latencyNs(absent [][]byte) float64 {
	clock := clockReadNs(len(cs.order))
	sink := 0
	start := time.Now()
	var end time.Time
	for i, c := range cs.order {
		if cs.copies[c].MayContain(absent[i%len(absent)]) {
			sink++
		}
		end = time.Now()
	}
	sinkHole += sink
	return max(0, float64(end.Sub(start).Nanoseconds())/float64(len(cs.order))-clock)
}

// clockReadNs is the cost of one clock read in a loop of n.
func clockReadNs(n int) float64 {
	start := time.Now()
	end := start
	for range n {
		end = time.Now()
	}
	return float64(end.Sub(start).Nanoseconds()) / float64(max(1, n))
}

// lookupNs times negative lookups, each into a random copy.
func (cs *coldSet) lookupNs(absent [][]byte) float64 {
	sink := 0
	start := time.Now()
	for i, c := range cs.order {
		if cs.copies[c].MayContain(absent[i%len(absent)]) {
			sink++
		}
	}
	el := time.Since(start)
	sinkHole += sink
	return float64(el.Nanoseconds()) / float64(len(cs.order))
}
