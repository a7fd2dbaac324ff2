// Package advice turns a snapshot of a Pebble store's table filters into the
// figures inspect prints: per level, what the filters cost and how often they
// fail to exclude an absent key; per read path, the tables an absent key reads
// in vain; and what lsmcuckoo budgets, uniform or fitted per level, would give
// at the same memory or save at the same reads.
package advice

import (
	"math/rand/v2"
	"sort"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// Paths a recommendation is fitted to.
const (
	PathGet  = "get"  // DB.Get: L0 sublevels and L1-L5
	PathSeek = "seek" // SeekPrefixGE with IterOptions.UseL6Filters: L0 to L6
)

// Level is one level's figures.
type Level struct {
	Level      int            `json:"level"`
	Tables     int            `json:"tables"`
	Keys       uint64         `json:"keys"`
	TableBytes uint64         `json:"table_bytes"`
	Families   map[string]int `json:"families"`
	// FilterBytes is the filter blocks' size; BitsPerKey divides it by the
	// keys of the tables that have a filter.
	FilterBytes uint64  `json:"filter_bytes"`
	BitsPerKey  float64 `json:"bits_per_key"`
	// FPR is the level's rate for an absent key: the key-weighted mean over
	// its tables of each table's measured rate, a table that has no filter
	// this tool can read counting 1 (it is read whenever the key falls in
	// its range). FilterFPR is the same over the probed tables only.
	FPR            float64 `json:"fpr"`
	FilterFPR      float64 `json:"filter_fpr"`
	Probes         int     `json:"probes"`
	FalsePositives int     `json:"false_positives"`
	Unprobed       int     `json:"unprobed_tables"`
	Damaged        int     `json:"damaged_tables"`
	// Sublevels is L0's sublevel count (0 on other levels).
	Sublevels int `json:"sublevels,omitempty"`
}

// Damage is one table that could not be read.
type Damage struct {
	Level   int    `json:"level"`
	FileNum uint64 `json:"file_num"`
	Error   string `json:"error"`
}

// Report is everything inspect prints, and its -json object.
type Report struct {
	Format        string `json:"format"`
	Dir           string `json:"dir"`
	Comparer      string `json:"comparer"`
	FormatVersion uint64 `json:"format_major_version"`
	// PebbleModule is the Pebble module the store was read with, and whose
	// API the Go lines use; PebbleModuleWhy says how it was chosen.
	PebbleModule    string   `json:"pebble_module,omitempty"`
	PebbleModuleWhy string   `json:"pebble_module_reason,omitempty"`
	ProbesPerTable  int      `json:"probes_per_table"`
	Levels          []Level  `json:"levels"`
	Damaged         []Damage `json:"damaged,omitempty"`
	FilterBytes     uint64   `json:"filter_bytes"`
	Keys            uint64   `json:"keys"`
	ReadsGet        float64  `json:"reads_per_absent_get"`
	ReadsSeek       float64  `json:"reads_per_absent_seek"`
	Path            string   `json:"path"`
	// Recommendation spends the store's current filter memory; Saving
	// matches its current false-positive reads on Path with less.
	Recommendation Option `json:"recommendation"`
	Saving         Option `json:"saving"`
	// Names are the filter names the store's tables carry, which the
	// application must register so that no table is read unfiltered.
	Names []string `json:"filter_names"`
	Notes []string `json:"notes,omitempty"`
	// Unflushed is what a Pebble store's live write-ahead logs hold, in
	// no table and counted nowhere above (nil when they hold nothing).
	Unflushed *pebblestore.Unflushed `json:"unflushed,omitempty"`
	// GoLines is the code to set on every open.
	GoLines []string `json:"go_lines"`

	getSkipsLast bool    // the engine's point lookup never consults the last level's filters
	getFitAvg    float64 // the whole tree's average the same-memory Get-path fit spends (LevelBudgets with SkipL6 1); 0 if another fit
}

// Build measures the snapshot's filters, probesPerTable random absent keys
// per table, and fits the recommendations to path. fallbackBits is the
// average budget used for the same-memory recommendation when the store's
// filters take less than the smallest lsmcuckoo filter would (none at all,
// say).
func Build(s *pebblestore.Snapshot, probesPerTable int, seed uint64, path string, fallbackBits float64) *Report {
	r := &Report{
		Format:          s.Format,
		getSkipsLast:    s.GetSkipsLast,
		Dir:             s.Dir,
		Comparer:        s.Comparer,
		FormatVersion:   s.FormatVersion,
		PebbleModule:    s.Module,
		PebbleModuleWhy: s.ModuleWhy,
		ProbesPerTable:  probesPerTable,
		Path:            path,
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := map[string]bool{}
	for l := range s.Levels {
		lv := measureLevel(l, s.Levels[l], probesPerTable, rng, names)
		if l == 0 {
			lv.Sublevels = s.Sublevels
			if lv.Tables > 0 && lv.Sublevels < 1 {
				lv.Sublevels = 1
			}
		}
		for _, t := range s.Levels[l] {
			if t.Damaged != "" {
				r.Damaged = append(r.Damaged, Damage{Level: l, FileNum: t.FileNum, Error: t.Damaged})
			}
		}
		r.Levels = append(r.Levels, lv)
		r.FilterBytes += lv.FilterBytes
		r.Keys += lv.Keys
	}
	for n := range names {
		r.Names = append(r.Names, n)
	}
	sort.Strings(r.Names)
	r.ReadsGet, r.ReadsSeek = readsOf(r.Levels, r.getSkipsLast, func(l int) float64 { return r.Levels[l].FPR })
	switch {
	case s.Format == "kvdemo":
		r.Notes = append(r.Notes, "kvdemo has no levels: a Get consults every table, all shown on L0; reads_per_absent_seek repeats the Get figure")
	case s.Format != "pebble":
		r.Notes = append(r.Notes, "a "+s.Format+" lookup consults every L0 table and one table on each other level, the last included; reads_per_absent_seek repeats the Get figure")
	case s.Comparer != "leveldb.BytewiseComparator":
		r.Notes = append(r.Notes, "the store's comparer "+s.Comparer+" may have a Split: its filters hold key prefixes, and the random probe keys stand for absent prefixes")
	}
	if s.Retries > 0 {
		r.Notes = append(r.Notes, "the store changed while it was read (a compaction removed a table); the snapshot was taken again")
	}
	r.recommend(fallbackBits)
	r.GoLines = goLines(r)
	return r
}

func measureLevel(l int, tables []pebblestore.Table, probes int, rng *rand.Rand, names map[string]bool) Level {
	lv := Level{Level: l, Families: map[string]int{}}
	var weighted, weightedFiltered float64
	var keys, filteredKeys, probedKeys uint64
	for i := range tables {
		t := &tables[i]
		lv.Tables++
		lv.TableBytes += t.Size
		if t.Damaged != "" {
			lv.Damaged++
			lv.Families["damaged"]++
			continue
		}
		lv.Families[t.FamilyName()]++
		if t.FilterName != "" {
			names[t.FilterName] = true
		}
		lv.Keys += t.NumEntries
		keys += t.NumEntries
		if t.Filter != nil {
			lv.FilterBytes += uint64(len(t.Filter))
			filteredKeys += t.NumEntries
		}
		fp, ok := t.Probe(probes, rng)
		if !ok {
			lv.Unprobed++
			weighted += float64(t.NumEntries)
			continue
		}
		lv.Probes += probes
		lv.FalsePositives += fp
		rate := float64(fp) / float64(probes)
		weighted += rate * float64(t.NumEntries)
		weightedFiltered += rate * float64(t.NumEntries)
		probedKeys += t.NumEntries
	}
	switch {
	case keys > 0:
		lv.FPR = weighted / float64(keys)
	case lv.Damaged > 0:
		lv.FPR = 1 // only damaged tables: every lookup in range reads them
	}
	// Otherwise the level's tables hold no point key (range keys only): a
	// lookup's point iteration skips them, and the rate stays 0.
	if probedKeys > 0 {
		lv.FilterFPR = weightedFiltered / float64(probedKeys)
	}
	if filteredKeys > 0 {
		lv.BitsPerKey = float64(lv.FilterBytes) * 8 / float64(filteredKeys)
	}
	return lv
}

// readsOf is the read-path model: the false-positive table reads of one
// lookup for an absent key. Pebble's DB.Get consults one table per L0
// sublevel and one per populated level L1..L5 (the table whose range holds
// the key) and never L6's filter (getSkipsLast); SeekPrefixGE with
// UseL6Filters consults L6 too. Each table consulted is read in vain with
// its level's rate fpr(l). (Badger: Sublevels counts L0's tables, and the
// last level is consulted.)
func readsOf(levels []Level, getSkipsLast bool, fpr func(l int) float64) (get, seek float64) {
	for _, lv := range levels {
		if lv.Tables == 0 {
			continue
		}
		runs := 1.0
		if lv.Level == 0 {
			runs = float64(max(lv.Sublevels, 1))
		}
		c := runs * fpr(lv.Level)
		if !getSkipsLast || lv.Level < pebblestore.NumLevels-1 {
			get += c
		}
		seek += c
	}
	return get, seek
}
