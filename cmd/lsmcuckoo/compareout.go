package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// compareReport is what compare prints, and writes as results.json.
type compareReport struct {
	Processor string         `json:"processor"`
	GoArch    string         `json:"goarch"`
	Keys      keySource      `json:"keys"`
	Absent    []absentInfo   `json:"absent"`
	Budgets   []int          `json:"budgets"`
	TableKeys []int          `json:"table_keys"`
	Options   compareOptions `json:"options"`
	Notes     []string       `json:"notes,omitempty"`
	Rows      []compareRow   `json:"results"`
	// TablesRead holds, with -from, each level's tables' filter key counts.
	TablesRead [pebblestore.NumLevels][]int `json:"-"`
}

type keySource struct {
	Source   string `json:"source"`
	Encoding string `json:"encoding"`        // text, hex, base64, or store
	Lines    int    `json:"lines,omitempty"` // keys in the key file
	// Read counts the distinct keys offered to the sample (a key evicted
	// from it and met again counts twice).
	Read     uint64 `json:"read"`
	Sampled  int    `json:"sampled"`
	Comparer string `json:"comparer,omitempty"`
	Prefixes bool   `json:"prefixes,omitempty"`
	// Format names the store's format with -from: Pebble v2, Badger v4
	// or kvdemo.
	Format string `json:"format,omitempty"`
}

type absentInfo struct {
	Name  string `json:"name"`
	How   string `json:"how"`
	Count int    `json:"count"`
}

type compareOptions struct {
	Reps    int    `json:"reps"`
	Lookups int    `json:"lookups"`
	ColdMiB int    `json:"cold_mib"`
	Probes  int    `json:"probes"`
	Seed    uint64 `json:"seed"`
}

// compareRow is one family at one budget and table size.
type compareRow struct {
	TableKeys  int     `json:"table_keys"`
	Budget     int     `json:"budget"` // the bits/key of the Pebble bloom it is compared with
	Role       string  `json:"role"`   // "budget" or "fuse-width"
	Family     string  `json:"family"`
	Kind       string  `json:"kind"`
	Param      float64 `json:"param"`
	Bytes      int     `json:"bytes"`
	BitsPerKey float64 `json:"bits_per_key"`
	FPR        []rate  `json:"fpr"` // one per absent set
	BuildNsKey float64 `json:"build_ns_per_key"`
	HotNs      float64 `json:"hot_lookup_ns"`
	ColdNs     float64 `json:"cold_lookup_ns"`
	ColdLatNs  float64 `json:"cold_latency_ns"`
	// FalseNegatives counts present keys rejected (any is a bug).
	FalseNegatives int     `json:"false_negatives"`
	FalseNegative  []byte  `json:"false_negative,omitempty"`
	Ratio          ratioTo `json:"ratio_to_pebble_bloom"`

	result filterbench.Result // the first absent set's, for the plots
}

type rate struct {
	Absent string  `json:"absent"`
	FPR    float64 `json:"fpr"`
	Lo     float64 `json:"lo95"`
	Hi     float64 `json:"hi95"`
	Probes int     `json:"probes"`
}

// ratioTo holds a row's figures divided by those of Pebble's bloom at the
// same budget; timings are medians of per-repetition ratios. 0 where the
// bloom's figure is 0.
type ratioTo struct {
	BitsPerKey float64   `json:"bits_per_key"`
	FPR        []float64 `json:"fpr"`
	Build      float64   `json:"build"`
	Hot        float64   `json:"hot"`
	Cold       float64   `json:"cold"`
	ColdLat    float64   `json:"cold_latency"`
}

func newRow(g group, r filterbench.Result, absent string) compareRow {
	row := compareRow{
		TableKeys: r.Keys, Budget: g.Budget, Role: g.Role, Family: r.Family, Kind: r.Kind, Param: r.Param,
		Bytes: r.Bytes, BitsPerKey: r.BitsPerKey, BuildNsKey: r.BuildNsKey,
		HotNs: r.HotNs, ColdNs: r.ColdNs, ColdLatNs: r.ColdLatNs,
		Ratio:  ratioTo{Build: r.Ratios.Build, Hot: r.Ratios.Hot, Cold: r.Ratios.Cold, ColdLat: r.Ratios.ColdLat},
		result: r,
	}
	row.addRate(absent, r)
	return row
}

func (row *compareRow) addRate(absent string, r filterbench.Result) {
	lo, hi := r.FPRInterval()
	row.FPR = append(row.FPR, rate{Absent: absent, FPR: r.FPR, Lo: lo, Hi: hi, Probes: r.Probes})
	if r.FalseNegatives > 0 && row.FalseNegatives == 0 {
		row.FalseNegative = r.FalseNegative
	}
	row.FalseNegatives = max(row.FalseNegatives, r.FalseNegatives)
}

func (row *compareRow) ratios(bloom compareRow) {
	row.Ratio.BitsPerKey = div(row.BitsPerKey, bloom.BitsPerKey)
	row.Ratio.FPR = make([]float64, len(row.FPR))
	for i := range row.FPR {
		row.Ratio.FPR[i] = div(row.FPR[i].FPR, bloom.FPR[i].FPR)
	}
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (r *compareReport) firstFalseNegative() *compareRow {
	for i := range r.Rows {
		if r.Rows[i].FalseNegatives > 0 {
			return &r.Rows[i]
		}
	}
	return nil
}

// writeCompare prints the comparison as text tables, one per table size.
func writeCompare(w io.Writer, r *compareReport) {
	writeHeader(w, r, "")
	for _, n := range r.TableKeys {
		fmt.Fprintf(w, "\nTables of %d keys; (×) is the ratio to Pebble's bloom at the same bits/key budget:\n", n)
		writeTable(w, r, n, false)
	}
}

func writeHeader(w io.Writer, r *compareReport, bullet string) {
	k := r.Keys
	what := "keys"
	if k.Prefixes {
		what = "key prefixes (what the filter sees)"
	}
	if k.Encoding == "store" {
		fmt.Fprintf(w, "%sKeys: %d %s sampled of %d distinct in the tables of the %s store %s (comparer %s)\n", bullet, k.Sampled, what, k.Read, k.Format, k.Source, k.Comparer)
	} else {
		fmt.Fprintf(w, "%sKeys: %d %s sampled of %d distinct read from %s (%s)\n", bullet, k.Sampled, what, k.Read, k.Source, k.Encoding)
	}
	for _, a := range r.Absent {
		fmt.Fprintf(w, "%sAbsent keys %q: %d, %s\n", bullet, a.Name, a.Count, a.How)
	}
	o := r.Options
	reps := fmt.Sprintf("medians of %d repetitions", o.Reps)
	if o.Reps == 1 {
		reps = "one repetition"
	}
	fmt.Fprintf(w, "%sProcessor: %s; %s, %d lookups per timing, cold copies over %d MiB\n", bullet, r.Processor, reps, o.Lookups, o.ColdMiB)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "%sNote: %s\n", bullet, n)
	}
}

// writeTable prints the rows of one table size, as text or as a markdown
// table.
func writeTable(w io.Writer, r *compareReport, n int, md bool) {
	head := []string{"budget", "family", "bits/key"}
	for _, a := range r.Absent {
		head = append(head, "FPR "+a.Name+" [95%]")
	}
	head = append(head, "build ns/key", "hot ns", "cold ns", "FN")
	var lines [][]string
	var base compareRow // the group's Pebble bloom, first in each group
	for _, row := range r.Rows {
		if row.TableKeys != n {
			continue
		}
		if row.Kind == "pebble-bloom" {
			base = row
		}
		budget := fmt.Sprint(row.Budget)
		if row.Role == "fuse-width" {
			budget = fmt.Sprintf("~%d", row.Budget)
		}
		cells := []string{budget, row.Family, withRatio(fmt.Sprintf("%.2f", row.BitsPerKey), taken(row.Ratio.BitsPerKey))}
		for i, f := range row.FPR {
			ratio := row.Ratio.FPR[i]
			if base.FPR[i].FPR == 0 {
				ratio = math.NaN() // no ratio to a rate of 0
			}
			cells = append(cells, withRatio(fmt.Sprintf("%s [%s-%s]", fpr(f.FPR), fpr(f.Lo), fpr(f.Hi)), ratio))
		}
		cells = append(cells,
			withRatio(fmt.Sprintf("%.1f", row.BuildNsKey), taken(row.Ratio.Build)),
			withRatio(fmt.Sprintf("%.1f", row.HotNs), taken(row.Ratio.Hot)),
			cold(row),
			fmt.Sprint(row.FalseNegatives))
		lines = append(lines, cells)
	}
	if md {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
		for _, l := range lines {
			fmt.Fprintf(w, "| %s |\n", strings.Join(l, " | "))
		}
		return
	}
	widths := make([]int, len(head))
	for _, l := range append([][]string{head}, lines...) {
		for i, c := range l {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, l := range append([][]string{head}, lines...) {
		for i, c := range l {
			pad := widths[i] - len([]rune(c))
			if i < 2 {
				fmt.Fprintf(w, "%s%s  ", c, strings.Repeat(" ", pad))
			} else {
				fmt.Fprintf(w, "%s%s  ", strings.Repeat(" ", pad), c)
			}
		}
		fmt.Fprintln(w)
	}
}

// withRatio appends a ratio; NaN shows none.
func withRatio(v string, ratio float64) string {
	if math.IsNaN(ratio) {
		return v + " ×-   "
	}
	return fmt.Sprintf("%s ×%.2f", v, ratio)
}

// cold is the cold lookup cell, "-" when not timed (-cold-mib 0).
func cold(row compareRow) string {
	if row.ColdNs == 0 {
		return "-"
	}
	return withRatio(fmt.Sprintf("%.1f", row.ColdNs), taken(row.Ratio.Cold))
}

// taken is a timing ratio, NaN for a timing not taken (cold with
// -cold-mib 0), which Measure reports as 0.
func taken(ratio float64) float64 {
	if ratio == 0 {
		return math.NaN()
	}
	return ratio
}

// fpr prints a rate in percent with three significant digits, which small
// rates keep.
func fpr(x float64) string {
	if x == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.3g%%", 100*x)
}

// writeCompareFiles writes report.md, results.json and the plots into dir.
func writeCompareFiles(dir string, r *compareReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	// One result a family and size for the plots: the bloom appears in
	// several groups, binary fuse both at a budget and at its own size.
	var results []filterbench.Result
	seen := map[string]bool{}
	for _, row := range r.Rows {
		key := fmt.Sprint(row.TableKeys, row.Family)
		if !seen[key] {
			seen[key] = true
			results = append(results, row.result)
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# lsmcuckoo compare\n\n")
	writeHeader(&md, r, "- ")
	for _, n := range r.TableKeys {
		fmt.Fprintf(&md, "\n## Tables of %d keys\n\n(×) is the ratio to Pebble's bloom at the same bits/key budget; a budget `~b` compares a binary fuse width with the bloom of nearest size. FPR intervals are 95%% Wilson intervals; timings are medians, their ratios medians of per-repetition ratios; \"cold\" lookups hit copies of the filter spread over %d MiB.\n\n", n, r.Options.ColdMiB)
		writeTable(&md, r, n, true)
		name, err := filterbench.PlotFPR(dir, results, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(&md, "\n![false-positive rate against bits/key, absent keys %q](%s)\n", r.Absent[0].Name, name)
		if name, ok, err := filterbench.PlotFrontier(dir, results, n); err != nil {
			return err
		} else if ok {
			fmt.Fprintf(&md, "\n![cold lookup time against false-positive rate](%s)\n", name)
		}
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644)
}
