package advice

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Option is one recommendation: a uniform lsmcuckoo budget and per-level
// budgets, each with its predicted filter memory and reads per absent key.
// A level budget of 0 means no filter on that level.
type Option struct {
	UniformBits float64                        `json:"uniform_bits"`
	LevelBits   [pebblestore.NumLevels]float64 `json:"level_bits"`
	// FilterBytes and the reads are those of LevelBits.
	FilterBytes uint64  `json:"filter_bytes"`
	ReadsGet    float64 `json:"reads_per_absent_get"`
	ReadsSeek   float64 `json:"reads_per_absent_seek"`
	Uniform     Figures `json:"uniform"`
	Note        string  `json:"note,omitempty"`
}

// Figures are the predicted memory and reads of one set of budgets.
type Figures struct {
	FilterBytes uint64  `json:"filter_bytes"`
	ReadsGet    float64 `json:"reads_per_absent_get"`
	ReadsSeek   float64 `json:"reads_per_absent_seek"`
}

// gridStep is the half-bit grid LevelBudgets returns and every budget here
// is chosen from, so the names SetLevelBudgets registers cover them all.
const gridStep = 0.5

// predict returns the figures of lsmcuckoo filters at the given budgets on
// the measured tree: each level's rate is the codec's planned rate for a
// filter of the level's mean keys per table (codec.PlannedFPR), its memory
// its keys times the budget.
func (r *Report) predict(bits [pebblestore.NumLevels]float64) Figures {
	levels := r.Levels
	var bytes float64
	fpr := func(l int) float64 {
		b := bits[l]
		if b <= 0 {
			return 1
		}
		lv := levels[l]
		perTable := 1
		if lv.Tables > 0 && lv.Keys > uint64(lv.Tables) {
			perTable = int(lv.Keys / uint64(lv.Tables))
		}
		return codec.PlannedFPR(codec.Options{BitsPerKey: b}, perTable)
	}
	for l, lv := range levels {
		bytes += float64(lv.Keys) * bits[l] / 8
	}
	g, s := readsOf(levels, r.getSkipsLast, fpr)
	return Figures{FilterBytes: uint64(math.Round(bytes)), ReadsGet: g, ReadsSeek: s}
}

func uniform(b float64) (u [pebblestore.NumLevels]float64) {
	for l := range u {
		u[l] = b
	}
	return u
}

// perLevel returns the budgets LevelBudgets fits to the measured shape at
// average avg, for path: for DB.Get, which never consults L6's filter,
// L6 gets none and avg is the average over L0..L5 alone. A level that
// holds no keys yet gets empty: the fitted value for it is only the
// average's leftover (up to the largest budget once the path's few keys
// sit on L0), and would cost that much per key once the level fills.
func perLevel(levels []Level, path string, avg, empty float64) [pebblestore.NumLevels]float64 {
	var shape tablefilter.LevelShape
	for _, lv := range levels {
		shape.Keys[lv.Level] = float64(lv.Keys)
		if lv.Level == 0 {
			shape.L0Runs = float64(lv.Sublevels)
		}
	}
	if path == PathGet {
		shape.Keys[pebblestore.NumLevels-1] = 0
	}
	b := tablefilter.LevelBudgets(shape, clamp(avg))
	for l := range b {
		if shape.Keys[l] == 0 {
			b[l] = clamp(floorGrid(empty))
		}
	}
	if path == PathGet {
		b[pebblestore.NumLevels-1] = 0
	}
	return b
}

// getLevels returns the budgets LevelBudgets fits to the measured shape,
// every level's keys, with SkipL6 1 (every absent lookup a DB.Get), at
// the whole tree's average avg: L6 gets no filter, and its share of the
// bytes goes to L0..L5, up to the grid's top each. A level that holds no
// keys yet gets empty, as in perLevel.
func getLevels(levels []Level, avg, empty float64) [pebblestore.NumLevels]float64 {
	shape := tablefilter.LevelShape{SkipL6: 1}
	for _, lv := range levels {
		shape.Keys[lv.Level] = float64(lv.Keys)
		if lv.Level == 0 {
			shape.L0Runs = float64(lv.Sublevels)
		}
	}
	b := tablefilter.LevelBudgets(shape, clamp(avg))
	for l := range pebblestore.NumLevels - 1 {
		if shape.Keys[l] == 0 {
			b[l] = clamp(floorGrid(empty))
		}
	}
	b[pebblestore.NumLevels-1] = tablefilter.NoFilter
	return b
}

func clamp(b float64) float64 {
	return math.Min(math.Max(b, tablefilter.MinBitsPerKey), tablefilter.MaxBitsPerKey)
}

func floorGrid(b float64) float64 { return math.Floor(b/gridStep) * gridStep }

// fitPath is the path the per-level budgets are fitted to: an engine whose
// point lookups consult the last level has one path, all levels.
func (r *Report) fitPath() string {
	if !r.getSkipsLast {
		return PathSeek
	}
	return r.Path
}

func (r *Report) pathKeys() uint64 {
	if r.fitPath() == PathSeek {
		return r.Keys
	}
	var k uint64
	for _, lv := range r.Levels[:pebblestore.NumLevels-1] {
		k += lv.Keys
	}
	return k
}

func (r *Report) pathReads(f Figures) float64 {
	if r.Path == PathSeek {
		return f.ReadsSeek
	}
	return f.ReadsGet
}

func (r *Report) recommend(fallbackBits float64) {
	if r.Keys == 0 {
		r.Notes = append(r.Notes, "the store's tables hold no keys: there is nothing to fit budgets to")
		r.Recommendation = r.option(uniform(fallbackBits), uniform(fallbackBits))
		r.Saving = r.Recommendation
		return
	}
	// Same memory.
	avg := float64(r.FilterBytes) * 8 / float64(r.Keys)
	rec := ""
	if avg < tablefilter.MinBitsPerKey+gridStep {
		rec = fmt.Sprintf("the store's filters take %.2f bits per key, less than the smallest lsmcuckoo filter: this recommendation spends %g bits per key instead (-bits)", avg, fallbackBits)
		avg = fallbackBits
	}
	u := uniform(clamp(floorGrid(avg)))
	pk := r.pathKeys()
	var lv [pebblestore.NumLevels]float64
	if pk == 0 {
		lv = u
		lv[pebblestore.NumLevels-1] = 0
		rec = joinNote(rec, "no table is on the DB.Get path (all keys are on L6): L0..L5 get the uniform budget for the tables to come")
	} else if r.fitPath() == PathGet {
		lv = getLevels(r.Levels, avg, u[0])
		r.getFitAvg = clamp(avg)
	} else {
		lv = perLevel(r.Levels, r.fitPath(), avg, u[0])
	}
	r.Recommendation = r.option(u, lv)
	r.Recommendation.Note = rec

	// Same reads on the chosen path: the least memory whose predicted
	// reads are at most the measured ones.
	target := r.ReadsGet
	if r.Path == PathSeek {
		target = r.ReadsSeek
	}
	var note string
	ub, okU := r.leastBits(target, func(b float64) [pebblestore.NumLevels]float64 { return uniform(b) })
	lb, okL := r.leastBits(target, func(b float64) [pebblestore.NumLevels]float64 {
		if pk == 0 {
			x := uniform(b)
			x[pebblestore.NumLevels-1] = 0
			return x
		}
		return perLevel(r.Levels, r.fitPath(), b, b)
	})
	if !okU || !okL {
		note = fmt.Sprintf("no lsmcuckoo budget up to %d bits per key predicts as few reads as the %.3g measured; the figures are the largest budget's", tablefilter.MaxBitsPerKey, target)
	}
	r.Saving = r.option(ub, lb)
	r.Saving.Note = note
}

// leastBits walks the half-bit grid upwards and returns the first budgets
// whose predicted reads on the path are at most target.
func (r *Report) leastBits(target float64, budgets func(float64) [pebblestore.NumLevels]float64) ([pebblestore.NumLevels]float64, bool) {
	var b [pebblestore.NumLevels]float64
	for avg := tablefilter.MinBitsPerKey + gridStep; avg <= tablefilter.MaxBitsPerKey; avg += gridStep {
		b = budgets(avg)
		if r.pathReads(r.predict(b)) <= target {
			return b, true
		}
	}
	return b, false
}

func (r *Report) option(u, lv [pebblestore.NumLevels]float64) Option {
	pu, pl := r.predict(u), r.predict(lv)
	return Option{
		UniformBits: u[0], LevelBits: lv,
		FilterBytes: pl.FilterBytes, ReadsGet: pl.ReadsGet, ReadsSeek: pl.ReadsSeek,
		Uniform: pu,
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func fmtBits(b float64) string { return strconv.FormatFloat(b, 'f', -1, 64) }

// goLines is the code an application sets on every open to run the
// same-memory per-level recommendation (the uniform one as a comment) and to
// keep reading the store's existing tables with their filters.
func goLines(r *Report) []string {
	if r.Format == "kvdemo" {
		return []string{fmt.Sprintf("// A new kvdemo store with this budget (an existing store keeps the kind and budget it was created with):"),
			fmt.Sprintf("opts := &kvdemo.Options{Filter: kvdemo.FilterCuckoo, BitsPerKey: %s}", fmtBits(r.Recommendation.UniformBits))}
	}
	if r.Format != "pebble" {
		return []string{"// A " + r.Format + " store builds its own filters and takes no filter policy: the budgets above are",
			"// what lsmcuckoo's filter would give on this tree, in a store built on the same table format",
			"// (package tablefilter/badgerfilter; kvdemo is such a store)."}
	}
	api := apiV2
	if r.PebbleModule == pebblestore.ModuleV1 {
		api = apiV1
	}
	o := r.Recommendation
	var lines []string
	lines = append(lines, fmt.Sprintf("// Per level, fitted to %s (or uniform: %s):", pathTitle(r.Path), fmt.Sprintf(api.uniform, fmtBits(o.UniformBits))))
	if r.getFitAvg > 0 {
		avg := fmtBits(math.Round(r.getFitAvg*100) / 100)
		lines = append(lines,
			fmt.Sprintf("// the budgets of %s.LevelBudgets(shape, %s) with shape.SkipL6 = 1: DB.Get never reads L6's filters,", api.pkg, avg),
			fmt.Sprintf("// so L6 gets %s.NoFilter and its bytes go to L0-L5, at most 32 bits/key each; or self-tuning:", api.pkg),
			fmt.Sprintf("// tuned := %s.SetAdaptiveBudgets(opts, %s, %s.SkipL6(1)), then tuned.Attach(db) after Open", api.pkg, avg, api.pkg))
	}
	parts := make([]string, len(o.LevelBits))
	for l, x := range o.LevelBits {
		switch {
		case l == pebblestore.NumLevels-1 && x == 0:
			parts[l] = api.pkg + ".NoFilter" // DB.Get never reads L6's filters
		case x == 0:
			parts[l] = fmtBits(o.UniformBits)
		default:
			parts[l] = fmtBits(x)
		}
	}
	lines = append(lines, fmt.Sprintf("%s.SetLevelBudgets(opts, [7]float64{%s})", api.pkg, strings.Join(parts, ", ")))
	var budgets []string
	bloom, unknown := false, []string{}
	for _, n := range r.Names {
		switch pebblestore.Kind(n) {
		case pebblestore.KindLsmcuckoo:
			if x, ok := pebblestore.LsmcuckooBudget(n); ok {
				s := fmtBits(x)
				if !contains(budgets, s) {
					budgets = append(budgets, s)
				}
			}
		case pebblestore.KindBloom:
			bloom = true
		case pebblestore.KindUnknown:
			unknown = append(unknown, n)
		}
	}
	if len(budgets) > 0 || bloom || len(unknown) > 0 {
		lines = append(lines, "// The filters the store's tables carry now, until compactions rewrite them:")
	}
	if len(budgets) > 0 {
		lines = append(lines, fmt.Sprintf("%s.RegisterPolicies(opts, %s)", api.pkg, strings.Join(budgets, ", ")))
	}
	if bloom {
		lines = append(lines, fmt.Sprintf("opts.Filters[%q] = bloom.FilterPolicy(10) // any bits per key reads every bloom block", pebblestore.BloomName))
	}
	for _, n := range unknown {
		lines = append(lines, fmt.Sprintf("// opts.Filters[%q] = ... // a filter this tool does not know: register your own policy of this name", n))
	}
	return lines
}

// goAPI is how the Go lines set filters in one Pebble module's options.
type goAPI struct {
	pkg     string // the lsmcuckoo adapter's package name
	uniform string // one budget on every level, %s the budget
}

var (
	apiV2 = goAPI{
		pkg:     "tablefilter",
		uniform: "opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(%s)",
	}
	// Pebble v1's Options.Levels is a slice whose missing entries copy
	// the last; SetLevelBudgets extends it to seven entries, and gives a
	// level of budget NoFilter a nil policy, Pebble v1's "no filter".
	apiV1 = goAPI{
		pkg:     "pebblev1",
		uniform: "opts.Levels = []pebble.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(%s)}}, every level copying it; or set FilterPolicy on each entry you list",
	}
)

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func pathTitle(p string) string {
	if p == PathSeek {
		return "SeekPrefixGE with UseL6Filters"
	}
	return "DB.Get"
}
