package codec

import (
	"math"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
)

// NewestVersion is the newest format version this package reads and
// writes on request (Options.Version); FormatVersion is the one it
// writes by default.
const NewestVersion = linev4.Version

// v4Serves reports whether a version-4 request is served by a version-4
// block: where version 4's modelled rate for a large filter is lower than
// version 3's densest plan's (or, with FalsePositiveRate, its block
// smaller), and than version 2's. Below about 4.2 bits per key no
// version-4 line holds its keys at the budget; there version 3's densest
// layout (or version 2, as version 3 chooses) is written, which every version-4 reader reads. The
// choice is made for a large filter, so that a table of any size at one
// setting gets one version.
func v4Serves(o *Options) bool {
	if m := lastV4Choice.Load(); m != nil && m.bpk == o.BitsPerKey && m.rate == o.FalsePositiveRate && m.fp == o.FingerprintBits {
		return m.v4
	}
	const n = 1 << 20
	sz := frame.Sizing{BitsPerKey: o.BitsPerKey, FalsePositiveRate: o.FalsePositiveRate, FingerprintBits: o.FingerprintBits, Densest: true}
	p4, ok := linev4.PlanFor(&sz, n)
	p3 := linev3.PlanFor(&sz, n)
	f4 := linev4.ExpectedFPR(p4.Shape, float64(n)/float64(p4.Lines), p4.K)
	f3 := min(linev3.ExpectedFPR(p3.Shape, float64(n)/float64(p3.Lines)), linev2.PlannedFPR(&sz, n))
	v4 := ok && f4 < f3
	if t := o.FalsePositiveRate; ok && t > 0 && !math.IsNaN(t) {
		meets4, meets3 := f4 <= t, f3 <= t
		switch {
		case meets4 && meets3:
			v4 = p4.Lines < p3.Lines
		case meets4 != meets3:
			v4 = meets4
		}
	}
	lastV4Choice.Store(&v4Choice{o.BitsPerKey, o.FalsePositiveRate, o.FingerprintBits, v4})
	return v4
}

// v4Choice is the last answer of v4Serves, for the setting asked.
type v4Choice struct {
	bpk, rate float64
	fp        int
	v4        bool
}

var lastV4Choice atomic.Pointer[v4Choice]

// v4Writer writes version 4: the plan's lines under two seeds, then with
// seeded lines in geometrically more lines, as version 3 does (only keys
// chosen against the fixed line hash crowd lines whatever the seed).
type v4Writer struct {
	b       *Builder
	enc     *linev4.Encoder
	kind    uint8
	planned linev4.Plan
	seeded  bool
}

func (w *v4Writer) start(b *Builder) bool {
	*w = v4Writer{b: b, enc: &b.s.v4, kind: uint8(b.opts.Hash)}
	w.enc.Start()
	return true
}

// plan takes the plan of the fewest lines that hold the keys when the
// budget holds none (a Builder told to write version 4 exactly).
func (w *v4Writer) plan(n int, _ int) uint32 {
	w.planned, _ = linev4.PlanFor(w.b.sizing(), n)
	w.seeded = false
	return w.planned.Lines
}

func (w *v4Writer) encode(dst []byte, attempt int, s uint32) ([]byte, bool) {
	w.seeded = w.seeded || attempt >= 2
	out, st, ok := w.enc.Encode(dst, w.b.pages, w.b.n, w.kind, s, w.seeded, w.planned, frame.AttemptLines(w.planned.Lines, attempt))
	w.seeded = w.seeded || w.enc.Crowded()
	if ok {
		w.b.stats = BuildStats{Version: 4, Keys: st.Keys, Bytes: st.Bytes, V4: v4Stats(st)}
	}
	return out, ok
}

func (w *v4Writer) nextSeed(s uint32, attempt int) uint32 { return mixedSeed(s, attempt) }

// repeats: placement drops every repeat of a line's keys, and counts
// them; the plan had counted them as keys.
func (w *v4Writer) repeats(bool) bool { return w.enc.Repeats() > 0 }

// salvage keeps the first block: the second round appended after it.
func (w *v4Writer) salvage(_, first []byte, st BuildStats) ([]byte, bool) {
	w.b.stats = st
	return first, true
}

func (w *v4Writer) alwaysMaybe(dst []byte, s uint32, round int) []byte {
	w.b.stats = BuildStats{Version: 4, Reseeds: (round + 1) * frame.Attempts, Fallback: true, Bytes: frame.TrailerSize, Seed: s}
	return linev4.AlwaysMaybe(dst, w.kind, s)
}

// V4Info is the layout of a version-4 block.
type V4Info struct {
	Lines       int     // 64-byte lines
	Columns     int     // r, fingerprint bits every key is checked on
	Height      int     // M, rows of each column
	ExtraShare  int     // U: keys whose share byte is below it are checked on the extra column too
	SeededLines bool    // lines chosen by the seeded hash (keys crowded lines under the fixed one)
	Load        float64 // keys / (M·Lines)
}

// V4Stats is what a version-4 build did.
type V4Stats struct {
	V4Info
	LineCapacity    int // keys a line was planned to hold
	PrimaryOverflow int // keys that did not fit their primary line
	Overflowed      int // keys placed in their secondary line (evictions and contradictions included)
	// RankFailures counts keys whose equation contradicted their primary
	// line's (they went to their secondary line).
	RankFailures  int
	OverflowLines int // lines whose threshold is below its top
	// SecondLineShare is the expected share of negative lookups that read
	// a second line: each line's priorities at or past its threshold,
	// averaged.
	SecondLineShare float64
}

func v4Stats(st linev4.Stats) V4Stats {
	return V4Stats{V4Info: V4Info{Lines: st.Lines, Columns: st.Columns, Height: st.Height, ExtraShare: st.ExtraShare,
		SeededLines: st.SeededLines, Load: st.Load},
		LineCapacity: st.LineCapacity, PrimaryOverflow: st.PrimaryOverflow, Overflowed: st.Overflowed, RankFailures: st.RankFailures,
		OverflowLines: st.OverflowLines, SecondLineShare: st.SecondLineShare}
}

func v4Info(in linev4.Info) V4Info {
	return V4Info{Lines: in.Lines, Columns: int(in.Shape.R), Height: int(in.Shape.M), ExtraShare: int(in.Shape.U),
		SeededLines: in.SeededLines, Load: in.Load}
}
