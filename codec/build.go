package codec

import (
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/seed"
)

// A writer is one format version's encoder as the build driver runs it.
// The driver owns what every version does alike: the seeds, the bounded
// attempts, the second placement of the distinct keys when repeats that
// Add could not drop inflated the plan, and the fallback to a block that
// answers "maybe"; the writer owns its plan, geometry and bytes.
type writer interface {
	// start readies the writer for a build of b's raw hashes; seeded is
	// whether the first attempt's seed is drawn (false: Options.Seed as
	// given, 0 included).
	start(b *Builder) (seeded bool)
	// plan sizes the block for n hashes (round 0), or for the n distinct
	// ones (round 1), and returns its size in lines (0 when the writer
	// sizes as it places).
	plan(n int, round int) uint32
	// encode places every hash under seed in attempt's geometry of the
	// current plan and appends the block to dst; ok is false when
	// placement failed. It sets b.stats.
	encode(dst []byte, attempt int, seed uint32) (out []byte, ok bool)
	// nextSeed is the seed of the attempt after attempt under a pinned
	// Options.Seed (an unpinned build draws one).
	nextSeed(seed uint32, attempt int) uint32
	// repeats reports whether the first round's placement found repeated
	// hashes that Add did not drop (ok: whether it succeeded).
	repeats(ok bool) bool
	// salvage is the block of the first round, when every attempt of the
	// second failed: first as it was, or re-encoded.
	salvage(dst, first []byte, firstStats BuildStats) ([]byte, bool)
	// alwaysMaybe appends the block that answers "maybe" for every key and
	// sets b.stats, after round's attempts all failed.
	alwaysMaybe(dst []byte, seed uint32, round int) []byte
}

// finish encodes the builder's hashes (raw, as added) with w and appends
// the block to dst. A placement that fails (only key sets crafted against
// a known seed, or astronomically unlucky ones) is retried under a fresh
// seed, then (versions 2 and 3) in more lines, frame.Attempts times in
// all; past that the block answers "maybe" for every key. When placement
// met repeats that were not consecutive (keys added out of order), the
// plan had counted them: the repeats are removed (a sort of the hashes) and
// the distinct keys placed again in their own plan, unless that plan is
// not 3% smaller, so that the budget is per distinct key in any key order.
func (b *Builder) finish(dst []byte, w writer) []byte {
	pinned := b.opts.Seed != 0
	s := b.opts.Seed
	b.stats = BuildStats{}
	if w.start(b) && !pinned {
		s = seed.New()
	}
	size := w.plan(b.n, 0)
	out, s, next, ok := b.attempts(dst, w, s, pinned)
	if !w.repeats(ok) {
		if !ok {
			return w.alwaysMaybe(dst, next, 0)
		}
		return out
	}
	first, firstOK := b.stats, ok
	b.dropRepeats()
	if distinct := w.plan(b.n, 1); ok && b.stats.Keys == b.n && float64(distinct) >= 0.97*float64(size) {
		return out
	}
	again, _, next, ok := b.attempts(dst[:len(dst):len(dst)], w, s, pinned)
	if ok {
		b.stats.Reseeds += first.Reseeds
		return again
	}
	if firstOK {
		if out, ok := w.salvage(dst, out, first); ok {
			return out
		}
	}
	return w.alwaysMaybe(dst, next, 1)
}

// attempts makes up to frame.Attempts placements by the writer's current
// plan, the first under seed s, each next one under a fresh seed (or, for
// a pinned Options.Seed, the writer's next). It returns the block, the seed
// of its last attempt and the seed an attempt after it would take; ok is
// false when every attempt failed.
func (b *Builder) attempts(dst []byte, w writer, s uint32, pinned bool) (out []byte, last, next uint32, ok bool) {
	for attempt := 0; attempt < frame.Attempts; attempt++ {
		if b.rejectSeeds <= 0 {
			if out, ok = w.encode(dst, attempt, s); ok {
				b.stats.Reseeds = attempt
				b.stats.Seed = s
				return out, s, s, true
			}
		}
		b.rejectSeeds--
		last = s
		if pinned {
			s = w.nextSeed(s, attempt)
		} else {
			s = seed.New()
		}
	}
	return nil, last, s, false
}

// dropRepeats removes repeated hashes from the builder's pages, which
// then hold the distinct hashes, in ascending order, and sets b.n to their
// count. Pages left empty stay in b.pages, so that Reset returns them to
// the pool.
func (b *Builder) dropRepeats() {
	all := slices.Grow(b.s.sorted[:0], b.n)
	for _, pg := range b.pages {
		all = append(all, pg...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	b.s.sorted = all
	at := 0
	for i, pg := range b.pages {
		n := copy(pg[:cap(pg)], all[at:])
		b.pages[i] = pg[:n]
		at += n
	}
	b.n = len(all)
}

// mixedSeed is the seed after seed for a pinned build of version 2 or 3: a
// mix, so that a key set crafted for one pinned seed does not also fail
// the next; odd, so never 0.
func mixedSeed(s uint32, attempt int) uint32 {
	return uint32(keyhash.Mix(uint64(s), uint32(attempt+1))) | 1
}

func (b *Builder) sizing() *frame.Sizing { return sizingOf(&b.opts) }

// v1Writer writes version 1. Its first attempt is under Options.Seed as
// given (0 by default, which keeps version 1's lookups a mix shorter).
// Whoever knows that seed can aim keys at one block, so a retry is under a
// seed they cannot know: an unpinned builder draws it from crypto/rand,
// a pinned one takes Seed+1, Seed+2, ... Blocks de-duplicate their keys
// as they are placed, so there is no second round.
type v1Writer struct {
	b       *Builder
	enc     *blockv1.Encoder
	params  blockv1.Params
	mixed   uint32
	started bool // the pages hold position hashes under mixed
}

func (w *v1Writer) start(b *Builder) bool {
	*w = v1Writer{b: b, enc: &b.s.v1,
		params: blockv1.Params{Sizing: *b.sizing(), Kind: uint8(b.opts.Hash), BlockKeys: b.blockKeys, MaxLoad: b.maxLoad}}
	w.enc.Placements, b.placements = 0, 0
	return false
}

func (w *v1Writer) plan(int, int) uint32 { return 0 }

func (w *v1Writer) encode(dst []byte, _ int, s uint32) ([]byte, bool) {
	b := w.b
	if !w.started {
		blockv1.Mix(b.pages, w.params.Kind, s)
	} else if w.mixed != s {
		blockv1.Remix(b.pages, w.params.Kind, w.mixed, s)
	}
	w.mixed, w.started = s, true
	out, st, ok := w.enc.Encode(dst, b.pages, b.n, s, &w.params)
	b.placements = w.enc.Placements
	if ok {
		b.stats = BuildStats{Version: 1, Keys: st.Keys, Bytes: st.Bytes, V1: v1Stats(st)}
	}
	return out, ok
}

func (w *v1Writer) nextSeed(s uint32, _ int) uint32                  { return s + 1 }
func (w *v1Writer) repeats(bool) bool                                { return false }
func (w *v1Writer) salvage(_, _ []byte, _ BuildStats) ([]byte, bool) { return nil, false }

// alwaysMaybe writes version 2's always-maybe block: a version-1 header
// has no such flag, and every reader answers "maybe" for this block.
func (w *v1Writer) alwaysMaybe(dst []byte, s uint32, _ int) []byte {
	w.b.stats = BuildStats{Version: 2, Reseeds: frame.Attempts, Fallback: true, Bytes: frame.TrailerSize, Seed: s,
		V2: V2Stats{V2Info: V2Info{FingerprintBits: bucket.MinFPBits}}}
	return linev2.AlwaysMaybe(dst, w.params.Kind, 0, s)
}

// v2Writer writes version 2: the plan's lines twice under two seeds, then
// geometrically more lines.
type v2Writer struct {
	b     *Builder
	enc   *linev2.Encoder
	kind  uint8
	plans [2]linev2.Plan
	round int
}

func (w *v2Writer) start(b *Builder) bool {
	*w = v2Writer{b: b, enc: &b.s.v2, kind: uint8(b.opts.Hash)}
	w.enc.Start()
	return true
}

func (w *v2Writer) plan(n int, round int) uint32 {
	w.plans[round], w.round = linev2.PlanFor(w.b.sizing(), n), round
	return w.plans[round].Lines
}

func (w *v2Writer) geom(p linev2.Plan, attempt int) linev2.Geom {
	lines := frame.AttemptLines(p.Lines, attempt)
	return linev2.Geom{F: p.F, Lines: lines, Wide: linev2.WideLines(lines, p.Wide)}
}

func (w *v2Writer) encode(dst []byte, attempt int, s uint32) ([]byte, bool) {
	p := w.plans[w.round]
	return w.encodeIn(dst, w.geom(p, attempt), p.Wide, s)
}

func (w *v2Writer) encodeIn(dst []byte, g linev2.Geom, wide uint8, s uint32) ([]byte, bool) {
	out, st, ok := w.enc.Encode(dst, w.b.pages, w.b.n, w.kind, s, g, wide)
	if ok {
		w.b.stats = BuildStats{Version: 2, Keys: st.Keys, Bytes: st.Bytes, V2: v2Stats(st)}
	}
	return out, ok
}

func (w *v2Writer) nextSeed(s uint32, attempt int) uint32 { return mixedSeed(s, attempt) }

// repeats: every distinct hash takes exactly one slot, so a block that
// stores fewer keys than were added met repeats.
func (w *v2Writer) repeats(ok bool) bool { return ok && w.b.stats.Keys < w.b.n }

// salvage re-encodes the distinct keys in the first block's geometry,
// where they placed with their repeats. (Placing the repeats again would
// not do: placement recognises a repeat only in the buckets it is looking
// at, and a repeat whose first copy was pushed to its secondary line is
// placed a second time.)
func (w *v2Writer) salvage(dst, _ []byte, first BuildStats) ([]byte, bool) {
	p := w.plans[0]
	out, ok := w.encodeIn(dst, w.geom(p, first.Reseeds), p.Wide, first.Seed)
	if ok {
		w.b.stats.Reseeds, w.b.stats.Seed = first.Reseeds, first.Seed
	}
	return out, ok
}

func (w *v2Writer) alwaysMaybe(dst []byte, s uint32, _ int) []byte {
	f := w.plans[0].F
	w.b.stats = BuildStats{Version: 2, Reseeds: frame.Attempts, Fallback: true, Bytes: frame.TrailerSize, Seed: s,
		V2: V2Stats{V2Info: V2Info{FingerprintBits: int(max(f, bucket.MinFPBits))}}}
	return linev2.AlwaysMaybe(dst, w.kind, f, s)
}

// v3Writer writes version 3: the plan's lines under two seeds, then with
// seeded lines in geometrically more lines. Only keys chosen against the
// fixed line hash crowd lines whatever the seed, so the attempts past the
// second, and every attempt after one that found the lines crowded
// (linev3.CrowdedShare), take their lines from the seeded hash, which
// nobody can aim at.
type v3Writer struct {
	b       *Builder
	enc     *linev3.Encoder
	kind    uint8
	planned linev3.Plan
	seeded  bool
}

func (w *v3Writer) start(b *Builder) bool {
	*w = v3Writer{b: b, enc: &b.s.v3, kind: uint8(b.opts.Hash)}
	w.enc.Start()
	return true
}

func (w *v3Writer) plan(n int, _ int) uint32 {
	w.planned, w.seeded = linev3.PlanFor(w.b.sizing(), n), false
	return w.planned.Lines
}

func (w *v3Writer) encode(dst []byte, attempt int, s uint32) ([]byte, bool) {
	// More lines keep the plan's shape: fewer keys per line.
	w.seeded = w.seeded || attempt >= 2
	out, st, ok := w.enc.Encode(dst, w.b.pages, w.b.n, w.kind, s, w.seeded, w.planned.Shape, frame.AttemptLines(w.planned.Lines, attempt))
	w.seeded = w.seeded || w.enc.Crowded()
	if ok {
		w.b.stats = BuildStats{Version: 3, Keys: st.Keys, Bytes: st.Bytes, V3: v3Stats(st)}
	}
	return out, ok
}

func (w *v3Writer) nextSeed(s uint32, attempt int) uint32 { return mixedSeed(s, attempt) }

// repeats: placement drops a repeat that follows its twin in their line
// and quotient's run, and counts it; one separated from its twin by
// another key of that run keeps a slot of its own, and enough repeats of
// one key could fill a run past linev3.MaxRun under any seed. So any
// repeat seen sends the build to the second round, failed or not.
func (w *v3Writer) repeats(bool) bool { return w.enc.Repeats() > 0 }

// salvage keeps the first block: the second round appended after it.
func (w *v3Writer) salvage(_, first []byte, st BuildStats) ([]byte, bool) {
	w.b.stats = st
	return first, true
}

func (w *v3Writer) alwaysMaybe(dst []byte, s uint32, round int) []byte {
	w.b.stats = BuildStats{Version: 3, Reseeds: (round + 1) * frame.Attempts, Fallback: true, Bytes: frame.TrailerSize, Seed: s}
	return linev3.AlwaysMaybe(dst, w.kind, s)
}

// sizingOf is what a version's planner reads of o.
func sizingOf(o *Options) *frame.Sizing {
	return &frame.Sizing{BitsPerKey: o.BitsPerKey, FalsePositiveRate: o.FalsePositiveRate,
		FingerprintBits: o.FingerprintBits, Densest: o.Densest}
}
