package filterbench

import (
	"runtime"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// Config controls a filter-level run.
type Config struct {
	Sizes    []int    // key counts
	Families []Family // filters to compare
	Probes   int      // absent keys for the FPR
	Lookups  int      // lookups per timing
	ColdMiB  int      // memory spread for cold lookups (0: skip)
	Reps     int      // repetitions; medians are reported
	// Unaligned also times every lookup on filters starting 1..63 bytes
	// past a 64-byte boundary.
	Unaligned bool
	// Baseline names the family every other is divided by (Result.Ratios):
	// each repetition's ratio, then their median, which a shared
	// machine's drift between repetitions moves less than a ratio of two
	// medians. Empty: no ratios.
	Baseline string
}

// Run measures every family on every size, interleaving families within a
// repetition so machine noise hits them alike, and returns the medians.
// Each repetition starts one family later (TurnOrder), so no family always
// runs first, on a freshly collected heap and an idle processor, or always
// right after the same neighbour's 256 MiB of cold copies.
func Run(cfg Config, progress func(string)) []Result {
	absent := testkeys.Absent(cfg.Probes, 200)
	var out []Result
	for _, n := range cfg.Sizes {
		keys := testkeys.Random(n, 16, 100)
		reps := make([][]Result, len(cfg.Families))
		for r := 0; r < max(1, cfg.Reps); r++ {
			for _, i := range TurnOrder(r, len(cfg.Families)) {
				fam := cfg.Families[i]
				if progress != nil {
					progress(fam.Name)
				}
				reps[i] = append(reps[i], measure(fam, keys, absent, cfg))
				runtime.GC()
			}
		}
		base := slices.IndexFunc(cfg.Families, func(f Family) bool { return f.Name == cfg.Baseline })
		for _, rs := range reps {
			m := median(rs)
			if base >= 0 {
				m.Ratios = repRatios(rs, reps[base])
			}
			out = append(out, m)
		}
	}
	return out
}

func measure(fam Family, keys, absent [][]byte, cfg Config) Result {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	f, buildNs := BuildTimed(fam, keys)
	runtime.ReadMemStats(&ms)
	res := Result{
		Family:      fam.Name,
		Kind:        fam.Kind,
		Param:       fam.Param,
		Keys:        len(keys),
		Bytes:       f.Bytes(),
		BitsPerKey:  float64(f.Bytes()*8) / float64(max(1, len(keys))),
		FPR:         FPR(f, absent),
		Probes:      len(absent),
		BuildNsKey:  buildNs,
		BuildAllocs: float64(ms.Mallocs - mallocs),
	}
	if fn := FalseNegatives(f, keys); fn != 0 {
		panic(fam.Name + ": false negatives; the comparison would be meaningless")
	}
	f = f.Copy(0)                                      // on a 64-byte boundary, as the unaligned runs are not
	LookupNs(f, absent, min(len(absent), cfg.Lookups)) // warm
	res.HotNs = LookupNs(f, absent, cfg.Lookups)
	if cfg.Unaligned {
		res.HotUnalignedNs = UnalignedLookupNs(f, absent, cfg.Lookups)
	}
	if cfg.ColdMiB > 0 {
		cs := NewColdSet(f, cfg.ColdMiB<<20, cfg.Lookups, 7)
		cs.LookupNs(absent) // fault the pages in
		res.ColdNs = cs.LookupNs(absent)
		res.ColdLatNs = cs.LatencyNs(absent)
		res.ColdMiB = cs.MiB()
		if cfg.Unaligned {
			cs = nil
			runtime.GC()
			cs = NewUnalignedColdSet(f, cfg.ColdMiB<<20, cfg.Lookups, 7)
			cs.LookupNs(absent)
			res.ColdUnalignedNs = cs.LookupNs(absent)
		}
	}
	return res
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

// TurnOrder is the order in which n compared subjects take their turns in
// round r: the listed order rotated by r, so over n rounds each subject
// holds every position once, and a position's luck (first after a garbage
// collection, right after the heaviest neighbour) is shared.
func TurnOrder(r, n int) []int {
	order := make([]int, n)
	for j := range order {
		order[j] = (j + r) % n
	}
	return order
}
