package codec

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	freshseed "github.com/lsmcuckoo/lsmcuckoo/internal/seed"
)

// v3MaxLoad is the lowest load a line's capacity K is planned at for a
// densest filter (Options.Densest): the capacity for the keys per line at
// this load is where the planner starts, and v3DenserShape then takes a
// smaller capacity, down to v3HardLoad, when the rate model (second-line
// reads included) prefers it, which at most budgets it does (go test
// ./codec -run TestV3LoadSweep -sweep -v).
var v3MaxLoad = 0.95

// v3SecondLineCap is the most of a filter's negative lookups that the
// default plan lets read a second line (v3SecondLineShare): a lookup that
// reads one waits for a second, dependent cache miss, which a blocked
// bloom filter never pays; README.md ("Which layout to run") has what
// the cap costs in rate and buys in lookup time. Densest filters fill
// their lines further, for a lower rate.
const v3SecondLineCap = 0.03

// v3BalancedMinBudget is the smallest budget, in bits per key, planned
// under v3SecondLineCap. Below it a line's remainders are four bits or
// fewer, and the cap would cost a large part of the rate and make the
// planned rate rise with the budget where version 2 takes over
// (TestSmallBudgetsWriteVersion2): smaller budgets keep the densest plan.
const v3BalancedMinBudget = 7

// v3CrowdedShare is the share of keys overflowing their primary lines
// past which an attempt under the fixed line hash is abandoned for seeded
// lines: several times what keys spread at random send at v3MaxLoad, so
// only keys chosen against that hash reach it.
const v3CrowdedShare = 0.15

// v3HardLoad is the highest load a small filter's lines may be planned at,
// to keep the rate of a large filter within a budget whose whole lines
// and trailer it cannot quite buy.
const v3HardLoad = 0.97

// v3Plan is a version-3 filter's shape and line count.
type v3Plan struct {
	shape v3Shape
	lines uint32
}

// v3BestShape is the shape of lowest modelled false-positive rate for lam
// keys per line and capacity k, over every remainder width (or only r
// when it is not 0): for each width, the most quotients that fit.
func v3BestShape(lam float64, k, r uint32) v3Shape {
	best, bestFPR := v3Shape{}, math.Inf(1)
	overflow := v3Overflow(lam, k)
	for w := uint32(1); w <= 16; w++ {
		if r != 0 && w != r {
			continue
		}
		s := v3Shape{r: w, k: k}
		free := int(lineBits) - int(k) - int(k*w)
		q := min(free, v3HeaderMax-int(k))
		for q > 0 && q+int(v3Shape{q: uint32(q)}.tBits()) > free {
			q--
		}
		if q < 1 || q > 255 || uint32(q)*v3MaxPerQuotient < k {
			continue
		}
		s.q = uint32(q)
		if f := v3ExpectedFPRWith(s, lam, overflow); f < bestFPR {
			best, bestFPR = s, f
		}
	}
	return best
}

// v3DenserShape is s, or a shape of smaller capacity, down to lam keys
// at v3HardLoad, whose modelled rate is lower: a fuller line leaves more
// bits to quotients and remainders, and the model counts the second-line
// reads it adds.
func v3DenserShape(s v3Shape, lam float64, r uint32) v3Shape {
	best := v3ExpectedFPR(s, lam)
	for k := uint32(math.Ceil(lam / v3HardLoad)); k < s.k; k++ {
		if c := v3BestShape(lam, k, r); c.q > 0 {
			if f := v3ExpectedFPR(c, lam); f < best {
				s, best = c, f
			}
		}
	}
	return s
}

// v3MaxPerQuotient bounds the keys per quotient a shape may be planned
// for (K/Q): a quotient's run is about Poisson with mean lam/Q, and must
// stay far below v3MaxRun for keys at random (P(run > 56) is about 1e-13
// at mean 16), or placement would fail under every seed.
const v3MaxPerQuotient = 16

// v3ShapeFor is the shape for lam keys per line: capacity for them at
// v3MaxLoad (one line holds every key of a one-line filter), and the
// best widths for that capacity. ok is false when no shape holds that
// many keys (a budget too small for any line).
func v3ShapeFor(lam float64, lines uint32, r uint32) (v3Shape, bool) {
	k := uint32(math.Ceil(lam / v3MaxLoad))
	if lines == 1 {
		k = uint32(math.Ceil(lam))
	}
	k = max(k, 1)
	if k > v3HeaderMax-1 {
		return v3Shape{}, false
	}
	s := v3BestShape(lam, k, r)
	return s, s.q > 0
}

// v3BalancedShape is the shape of lowest modelled rate for lam keys per
// line among those whose modelled share of negative lookups reading a
// second line is at most v3SecondLineCap, or the densest plan's
// (v3DenserShape from s) when none is.
func v3BalancedShape(s v3Shape, lam float64, r uint32) v3Shape {
	best, bestFPR, first := s, math.Inf(1), uint32(0)
	for k := uint32(math.Ceil(lam / v3HardLoad)); k < v3HeaderMax; k++ {
		if first != 0 && k > first+2 {
			break // a wider line only leaves fewer bits to the keys
		}
		c := v3BestShape(lam, k, r)
		if c.q == 0 || !v3SecondLineWithin(c, lam, v3SecondLineCap) {
			continue
		}
		if first == 0 {
			first = k
		}
		if f := v3ExpectedFPR(c, lam); f < bestFPR {
			best, bestFPR = c, f
		}
	}
	if first == 0 {
		return v3DenserShape(s, lam, r)
	}
	return best
}

// v3LineShape is the shape for lam keys per line in a filter of several
// lines, starting from s (v3ShapeFor's): the densest or the balanced one.
func v3LineShape(s v3Shape, lam float64, r uint32, densest bool) v3Shape {
	if densest {
		return v3DenserShape(s, lam, r)
	}
	return v3BalancedShape(s, lam, r)
}

// v3LargeMemo is the last large-filter shape v3LargeShape searched for:
// writers build table after table at one budget, and the search costs
// about as much as placing a thousand keys.
type v3LargeMemo struct {
	perLine float64
	r       uint32
	shape   v3Shape
}

// v3LargeLast holds the last search of each layout (index 1: densest),
// so that writers of both, and the version choice (which plans the
// densest), do not search again for each other.
var v3LargeLast [2]atomic.Pointer[v3LargeMemo]

// v3LargeShape is v3LineShape(s, perLine, r, densest) for the shape s that
// v3ShapeFor gives a large filter, remembered for the last budget asked.
func v3LargeShape(s v3Shape, perLine float64, r uint32, densest bool) v3Shape {
	last := &v3LargeLast[0]
	if densest {
		last = &v3LargeLast[1]
	}
	if m := last.Load(); m != nil && m.perLine == perLine && m.r == r {
		return m.shape
	}
	d := v3LineShape(s, perLine, r, densest)
	last.Store(&v3LargeMemo{perLine, r, d})
	return d
}

// v3SmallBudgetV2 reports whether a version-3 request is served by a
// version-2 block instead: at a budget of a few bits per key a line's
// header leaves version 3's remainders one or two bits, and version 2's
// buckets give the lower modelled rate (at 3 bits per key or less no
// version-3 shape filters at all). With a target rate the smaller block
// that meets it wins. The choice is made for a large filter, so that a
// table of any size at one setting gets one version, and against version
// 3's densest plan, so that the layout (Options.Densest) never changes
// the version: version 2 fills its lines as densely. Every reader of
// version 3 reads version 2. A forced remainder width keeps version 3.
func v3SmallBudgetV2(o *Options) bool {
	if o.Version != FormatVersion || o.FingerprintBits != 0 {
		return false
	}
	if m := v3ChoiceLast.Load(); m != nil && m.bpk == o.BitsPerKey && m.rate == o.FalsePositiveRate {
		return m.v2
	}
	const n = 1 << 20
	o3 := *o
	o3.Densest = true // the choice between formats does not follow the layout
	p3 := planV3(&o3, n)
	f3 := v3ExpectedFPR(p3.shape, float64(n)/float64(p3.lines))
	o2 := *o
	o2.Version = 2
	f2 := plannedFPRV2(o2, n)
	v2 := f2 < f3
	if t := o.FalsePositiveRate; t > 0 && !math.IsNaN(t) {
		meets2, meets3 := f2 <= t, f3 <= t
		switch {
		case meets2 && meets3:
			v2 = planV2(&o2, n).lines < p3.lines
		case meets2 != meets3:
			v2 = meets2
		}
	}
	v3ChoiceLast.Store(&v3Choice{o.BitsPerKey, o.FalsePositiveRate, v2})
	return v2
}

// v3Choice is the last answer of v3SmallBudgetV2, for the setting asked.
type v3Choice struct {
	bpk, rate float64
	v2        bool
}

var v3ChoiceLast atomic.Pointer[v3Choice]

// planV3 sizes a version-3 filter for d keys. With a budget it spends all
// of it: the lines the budget buys, and the shape of lowest modelled rate
// for their keys per line. With a target rate it takes the smallest
// budget whose plan meets it.
func planV3(o *Options, d int) v3Plan {
	n := float64(max(d, 1))
	r := uint32(0)
	if o.FingerprintBits != 0 {
		r = uint32(o.FingerprintBits)
	}
	// forBudget spends a budget: the shape planned for the keys per line
	// of a large filter, 512/bpk, in as many lines as the keys need at
	// that rate, if that costs at most 5% over the budget, so that a small
	// filter keeps a large one's shape and rate; otherwise the lines the
	// budget buys, shaped for their keys per line. A tiny filter, whose
	// 40-byte trailer is over 5% of its budget, may exceed the budget by
	// the trailer. ok is false when no shape holds the keys per line.
	forBudget := func(bpk float64) (v3Plan, bool) {
		densest := o.Densest || bpk < v3BalancedMinBudget
		trailer := float64(v2TrailerSize * 8)
		if trailer > 0.05*bpk*n {
			trailer = 0
		}
		perLine := lineBits / bpk
		need := max(1, math.Ceil(n/perLine))
		if need > 1 && need*lineBits+trailer <= 1.05*bpk*n {
			if s, ok := v3ShapeFor(perLine, 2, r); ok {
				return v3Plan{v3LargeShape(s, perLine, r, densest), uint32(need)}, true
			}
		}
		// Fewer lines than a large filter's rate needs: as many as 5%
		// over the budget buys, filled up to v3HardLoad if that keeps the
		// rate lower (the model counts the second-line reads it adds).
		lines := uint32(max(1, min(need, math.Floor((1.05*bpk*n-trailer)/lineBits))))
		if float64(lines)*lineBits+trailer > 1.05*bpk*n || lines == 1 {
			lines = uint32(max(1, math.Floor((bpk*n-trailer)/lineBits)))
		}
		lam := n / float64(lines)
		s, ok := v3ShapeFor(lam, lines, r)
		if ok && lines > 1 {
			s = v3LineShape(s, lam, r, densest)
		}
		return v3Plan{s, lines}, ok
	}
	// The fewest lines a shape holds the keys in.
	fewestLines := func() v3Plan {
		if s, ok := v3ShapeFor(n, 1, r); ok {
			return v3Plan{s, 1}
		}
		perLine := float64(v3HeaderMax)
		for ; perLine > 1; perLine-- {
			if _, ok := v3ShapeFor(perLine, 2, r); ok {
				break
			}
		}
		lines := uint32(max(2, math.Ceil(n/perLine)))
		for {
			if s, ok := v3ShapeFor(n/float64(lines), lines, r); ok {
				return v3Plan{s, lines}
			}
			lines++
		}
	}
	// The sparsest plan worth having: a budget past what 16-bit remainders
	// at a low load fill buys almost nothing more, so none exceeds it (a
	// mistyped 1e6 does not become a block of that size).
	const maxBudget = 48
	if o.FalsePositiveRate > 0 && !math.IsNaN(o.FalsePositiveRate) {
		lo, hi := 1.0, float64(maxBudget)
		if p, ok := forBudget(hi); !ok || v3ExpectedFPR(p.shape, n/float64(p.lines)) > o.FalsePositiveRate {
			if ok {
				return p
			}
			return fewestLines()
		}
		for range 40 {
			mid := (lo + hi) / 2
			if p, ok := forBudget(mid); ok && v3ExpectedFPR(p.shape, n/float64(p.lines)) <= o.FalsePositiveRate {
				hi = mid
			} else {
				lo = mid
			}
		}
		p, _ := forBudget(hi)
		return p
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = DefaultBitsPerKey
	}
	if p, ok := forBudget(min(budget, maxBudget)); ok {
		return p
	}
	return fewestLines()
}

// v3AttemptLines is the line count of placement attempt 0, 1, ...: the
// plan twice (under two seeds), then geometrically more, as version 2.
func v3AttemptLines(planned uint32, attempt int) uint32 { return v2AttemptLines(planned, attempt) }

// v3Placer is the placement state of a version-3 build: every line's keys
// and entries at once, since keys that overflow their primary line are
// placed after every line has had its primary keys.
type v3Placer struct {
	shape       v3Shape
	lines       uint32
	m           uint64 // the seed's multiplier
	seededLines bool
	crowded     bool     // the last attempt found lines crowded under the fixed line hash
	repeats     int      // repeats dropped, over every attempt of a Finish
	tmp         []uint64 // the buffer a group's keys are sorted into
	pq          []uint32 // a group's keys' quotient<<16 | remainder, unsorted then sorted
	// slots holds K entries per line (quotient<<16 | remainder): the
	// line's primary keys from the front, in quotient order, and keys
	// placed there from their secondary line from the back.
	slots  []uint32
	kept   []uint16 // primary keys of each line still in it
	nsec   []uint16 // secondary keys placed in each line
	thr    []uint16 // each line's threshold T
	queue  []uint64
	x2     []uint64 // a round's secondary position hashes, unsorted then by group
	gcount []uint32 // a round's keys per group of lines
	cq     []uint32 // a group's counts per (line, quotient)
	idx    []uint32 // a group's keys' (line, quotient) index
	// groups holds each group of lines' keys, in arrival order until
	// placeGroup leaves them in line and quotient order, each line's
	// distinct keys first (counts has where each line starts).
	groups     [][]uint64
	groupShift uint // from a line to its group
	moves      int
}

// finishV3 encodes the builder's hashes (raw, not yet mixed) as a
// version-3 block appended to dst. It retries, grows and falls back as
// finishV2 does, and places the distinct keys again when repeats that
// did not arrive one after another inflated the plan.
func (b *Builder) finishV3(dst []byte) []byte {
	if !b.exactVersion && v3SmallBudgetV2(&b.opts) {
		return b.finishV2(dst)
	}
	pinned := b.opts.Seed != 0
	seed := b.opts.Seed
	if !pinned {
		seed = freshseed.New()
	}
	plan := planV3(&b.opts, b.n)
	b.stats = BuildStats{}
	b.s.v3.repeats = 0
	out, seed, next, ok := b.placeV3(dst, plan, seed, pinned)
	if b.s.v3.repeats == 0 {
		if !ok {
			// Past every cap: a block that honestly answers "maybe".
			return b.alwaysMaybeV3(dst, next, v2Attempts)
		}
		return out
	}
	// Repeats that did not arrive one after another (keys added out of
	// order, as from a log). Placement drops a repeat that follows its
	// twin in their line and quotient's run, and counts it; one separated
	// from its twin by another key of that run keeps a slot of its own.
	// The plan counted every hash, and enough repeats of one key could
	// fill a run past v3MaxRun under any seed. So once any repeat is seen
	// the repeats are removed (a sort of the hashes), and the distinct
	// keys placed again, in their own plan, unless the first block holds
	// exactly them in lines that plan would not cut by 3%: the budget is
	// per distinct key in any key order.
	first, firstOK := b.stats, ok
	b.dropRepeats()
	p := planV3(&b.opts, b.n)
	if ok && b.stats.Keys == b.n && float64(p.lines) >= 0.97*float64(plan.lines) {
		return out
	}
	again, _, next, ok := b.placeV3(dst[:len(dst):len(dst)], p, seed, pinned)
	if ok {
		b.stats.Reseeds += first.Reseeds
		return again
	}
	if firstOK {
		b.stats = first
		return out
	}
	return b.alwaysMaybeV3(dst, next, 2*v2Attempts)
}

// placeV3 places the builder's key hashes by plan: under seed, then
// under a fresh seed in the plan's lines, then with seeded lines in
// geometrically more lines, up to v2Attempts attempts. Only keys chosen
// against the fixed line hash crowd lines whatever the seed, so the
// attempts past the second, and every attempt after one that found the
// lines crowded (v3CrowdedShare), take their lines from the seeded hash,
// which nobody can aim at. It returns the block appended to dst, the seed of
// the block and the seed an attempt after it would take; ok is false when
// every attempt failed.
func (b *Builder) placeV3(dst []byte, plan v3Plan, seed uint32, pinned bool) (out []byte, last, next uint32, ok bool) {
	seeded := false
	for attempt := 0; attempt < v2Attempts; attempt++ {
		lines := v3AttemptLines(plan.lines, attempt)
		if b.rejectSeeds <= 0 {
			// More lines keep the plan's shape: fewer keys per line.
			seeded = seeded || attempt >= 2
			out, ok = b.encodeV3(dst, seed, seeded, plan.shape, lines)
			seeded = seeded || b.s.v3.crowded
			if ok {
				b.stats.Reseeds = attempt
				return out, seed, seed, true
			}
		}
		b.rejectSeeds--
		last = seed
		if pinned {
			seed = uint32(keyhash.Mix(uint64(seed), uint32(attempt+1))) | 1
		} else {
			seed = freshseed.New()
		}
	}
	return nil, last, seed, false
}

// alwaysMaybeV3 appends the version-3 block that answers "maybe" for
// every key.
func (b *Builder) alwaysMaybeV3(dst []byte, seed uint32, attempts int) []byte {
	out, blk := growBytes(dst, v2TrailerSize)
	h := v3Header{kind: b.opts.Hash, alwaysMaybe: true, seed: seed}
	h.put(blk, 0)
	binary.LittleEndian.PutUint32(blk[v2TrailerSize-4:], checksum(blk[:v2TrailerSize-4]))
	b.stats = BuildStats{Version: FormatVersion, Reseeds: attempts, Fallback: true, Bytes: v2TrailerSize, Seed: seed}
	return out
}

// encodeV3 places every key hash of the builder's pages under one seed,
// line hash, shape and line count and appends the block; ok is false when
// placement failed (the caller reseeds, grows, or seeds the lines).
func (b *Builder) encodeV3(dst []byte, seed uint32, seededLines bool, s v3Shape, lines uint32) ([]byte, bool) {
	p := &b.s.v3
	p.shape, p.lines, p.seededLines = s, lines, seededLines
	L := uint64(lines)
	k := s.k

	// Mix the hashes under the seed and count them per group of lines:
	// at most v3GroupLines groups, each a few tens of kilobytes of keys,
	// so that every later pass over a group stays in the cache.
	sh := max(0, bits.Len32(lines-1)-bits.Len32(v3GroupLines-1))
	p.groupShift = uint(sh)
	groups := int((lines-1)>>sh) + 1
	// Each group's keys go to a buffer of its own as they are mixed: one
	// pass over the pages, appending to at most v3GroupLines streams.
	if len(p.groups) < groups {
		p.groups = append(p.groups, make([][]uint64, groups-len(p.groups))...)
	}
	gb := p.groups[:groups]
	per := b.n/groups + b.n/groups/8 + 16
	for g := range gb {
		gb[g] = slices.Grow(gb[g][:0], per)
	}
	p.m = v2Multiplier(seed)
	lm := p.lineMultiplier()
	for _, pg := range b.pages {
		for _, h := range pg {
			g := v3Line(h*lm, L) >> sh
			gb[g] = append(gb[g], h)
		}
	}
	counts := slices.Grow(b.s.counts[:0], int(lines)+1)[:lines+1]
	b.s.counts = counts
	p.slots = resize(p.slots, int(lines)*int(k))
	p.kept = resize(p.kept, int(lines))
	p.nsec = resize(p.nsec, int(lines))
	p.thr = resize(p.thr, int(lines))
	p.queue = p.queue[:0]
	p.moves = 0
	p.crowded = false

	// Primary placement, a group at a time: sort its keys by line and
	// quotient (a counting sort; a key's repeats end up in its run), then
	// in each line drop repeats, keep the first K keys and send the rest,
	// those of the highest quotients, to their secondary lines: the
	// threshold T is the first quotient sent.
	for g := range groups {
		p.placeGroup(uint32(g)<<sh, min(uint32(g+1)<<sh, lines), gb[g], counts)
	}
	if !seededLines && len(p.queue) > int(v3CrowdedShare*float64(b.n))+64 {
		// Far more keys overflow than lines filled at random send: keys
		// chosen against the fixed line hash. Their lines would read a
		// second line on most lookups; the seeded lines spread them.
		p.crowded = true
		return nil, false
	}

	// Secondary placement: a key goes to its secondary line if that has
	// room, or else takes the place of the line's primary key of the
	// highest quotient, which leaves for its own secondary line and lowers
	// the line's threshold to its quotient. It runs in rounds, the keys of
	// a round (those that overflowed, then those they moved) taken in the
	// order of their secondary lines' groups, so that the lines and keys
	// each one reads are in the cache, not anywhere in the filter. (The
	// order changes no byte: a line full when a key arrives gives up its
	// highest primary key whichever key arrives.)
	limit := int(v2EvictionsPerKey*float64(b.n)) + 64
	for from := 0; from < len(p.queue); {
		to := len(p.queue)
		for _, x2 := range p.bySecondaryGroup(p.queue[from:to], sh, groups) {
			ln := v3Line(x2, L)
			q, r := v3QR(x2, &s)
			base := int(ln) * int(k)
			if uint32(p.kept[ln])+uint32(p.nsec[ln]) >= k {
				if p.kept[ln] == 0 || p.moves >= limit {
					return nil, false // the line holds only secondary keys, or too many moves
				}
				p.moves++
				last := int(p.kept[ln]) - 1
				p.kept[ln]--
				v := p.groups[ln>>sh][int(counts[ln])+last]
				vq, _ := v3QR(v2Position(v, p.m), &s)
				p.thr[ln] = min(p.thr[ln], uint16(vq))
				p.queue = append(p.queue, v)
			}
			p.nsec[ln]++
			p.slots[base+int(k)-int(p.nsec[ln])] = uint32(q<<16 | r)
		}
		from = to
	}

	// Encode each line: its primary entries (in quotient order) merged
	// with its secondary ones, a header bit set at q_i + i for the i-th
	// entry (so quotient q's run starts after the q-th zero), and the
	// remainders in the same order.
	size := int(lines)*lineBytes + v2TrailerSize
	out, blk := growBytes(dst, size)
	stored, ovLines, p2 := 0, 0, 0.0
	remOff := int(s.remOff())
	tShift := 64 - s.tBits()
	for ln := 0; ln < int(lines); ln++ {
		slot := p.slots[ln*int(k) : (ln+1)*int(k)]
		prim := slot[:p.kept[ln]]
		var sec []uint32
		if ns := int(p.nsec[ln]); ns > 0 {
			sec = slot[int(k)-ns:]
			if ns > 1 {
				slices.Sort(sec)
			}
		}
		var w [lineBytes / 8]uint64
		// The i-th entry of the merge of prim and sec (both in quotient
		// order) sets header bit q+i and holds remainder slot i. next is
		// the first secondary entry not yet merged, or a value above any
		// entry once none is left, so each step compares one primary
		// entry with it and nothing else.
		// The remainders gather in acc, n of its bits taken, until it is
		// full and goes to word wi: a register, where OR-ing each one into
		// the line in memory would make every entry wait on the store of
		// the one before. (The header's bits go to memory: an
		// accumulator there costs a branch that mispredicts once or twice
		// a line, and measured slower.)
		wi, acc, n, r := remOff>>6, uint64(0), uint(remOff&63), uint(s.r)
		a, c, next := 0, 0, uint32(math.MaxUint32)
		if len(sec) > 0 {
			next = sec[0]
		}
		for i := range len(prim) + len(sec) {
			v := next
			if a < len(prim) && prim[a] <= next {
				v = prim[a]
				a++
			} else {
				c++
				next = math.MaxUint32
				if c < len(sec) {
					next = sec[c]
				}
			}
			hb := int(v>>16) + i
			w[hb>>6&7] |= 1 << (hb & 63)
			rv := uint64(v & 0xffff)
			acc |= rv << (n & 63)
			n += r
			if n >= 64 {
				w[wi&7] |= acc
				wi++
				n -= 64
				acc = rv >> ((r - n) & 63) // the remainder's bits past the full word
			}
		}
		w[wi&7] |= acc
		// A run longer than v3MaxRun (only possible where a line holds
		// more keys than that): the lookup could not measure it.
		if k > v3MaxRun && v3RunTooLong(&w, int(s.q+k)) {
			return nil, false
		}
		e := len(prim) + len(sec)
		stored += e
		t := p.thr[ln]
		w[lineBytes/8-1] |= uint64(t) << tShift
		if uint32(t) < s.q {
			ovLines++
			p2 += float64(s.q-uint32(t)) / float64(s.q)
		}
		line := blk[ln*lineBytes:]
		for j, v := range w[:lineBytes/8] {
			binary.LittleEndian.PutUint64(line[j*8:], v)
		}
	}
	h := v3Header{shape: s, kind: b.opts.Hash, seededLines: seededLines, lines: lines, seed: seed}
	h.put(blk[size-v2TrailerSize:], uint32(stored))
	binary.LittleEndian.PutUint32(blk[size-4:], checksum(blk[:size-4]))
	b.stats = BuildStats{
		Version:         FormatVersion,
		Keys:            stored,
		Lines:           int(lines),
		FingerprintBits: int(s.r),
		Quotients:       int(s.q),
		LineCapacity:    int(k),
		Load:            float64(stored) / (float64(lines) * float64(k)),
		PrimaryOverflow: len(p.queue) - p.moves,
		Overflowed:      len(p.queue),
		OverflowLines:   ovLines,
		SecondLineShare: p2 / float64(lines),
		SeededLines:     seededLines,
		Seed:            seed,
		Bytes:           size,
	}
	return out, true
}

// v3GroupLines is the most groups of lines encodeV3 spreads keys over
// first: few enough write streams for the caches to follow.
const v3GroupLines = 256

// v3RunTooLong reports whether the first n bits of w (a line's header,
// n ≤ v3HeaderMax, whose runs of ones are the keys of one quotient each)
// hold a run longer than v3MaxRun: ANDed with itself shifted by 1, 2, 4,
// 8 and 16 bits a word keeps the bits that start a run of 32 or more,
// and shifted by 25 more, those that start one of 57.
func v3RunTooLong(w *[lineBytes / 8]uint64, n int) bool {
	a, b, c := w[0], w[1], w[2]
	switch {
	case n < 64:
		a, b, c = a&(1<<n-1), 0, 0
	case n < 128:
		b, c = b&(1<<(n-64)-1), 0
	default:
		c &= 1<<(n-128) - 1
	}
	for _, sh := range [...]uint{1, 2, 4, 8, 16, v3MaxRun + 1 - 32} {
		a &= a>>sh | b<<(64-sh)
		b &= b>>sh | c<<(64-sh)
		c &= c >> sh
	}
	return a|b|c != 0
}

// bySecondaryGroup returns the secondary position hashes of keys in the
// order of the groups of lines they fall in (a counting sort, stable
// within a group; sh is the shift from a line to its group).
func (p *v3Placer) bySecondaryGroup(keys []uint64, sh, groups int) []uint64 {
	L := uint64(p.lines)
	x2s := resize(p.x2, 2*len(keys))
	p.x2 = x2s
	unsorted, sorted := x2s[:len(keys)], x2s[len(keys):]
	at := resize(p.gcount, groups+1)
	p.gcount = at
	clear(at)
	for i, h := range keys {
		x2 := keyhash.Mix(v2Position(h, p.m), secondarySalt)
		unsorted[i] = x2
		at[v3Line(x2, L)>>sh+1]++
	}
	for g := 1; g <= groups; g++ {
		at[g] += at[g-1]
	}
	for _, x2 := range unsorted {
		g := v3Line(x2, L) >> sh
		sorted[at[g]] = x2
		at[g]++
	}
	return sorted
}

// lineMultiplier is the multiplier of the position hash that chooses a
// key's primary line: the fixed one, or the seed's under seeded lines.
// Only the high half of the position hash picks the line, which the
// xorshift leaves as it is, so the line of key hash h is
// v3Line(h·lineMultiplier, lines).
func (p *v3Placer) lineMultiplier() uint64 {
	if p.seededLines {
		return p.m
	}
	return v3LineMultiplier
}

// placeGroup places the primary keys of lines [first, end), keys: it
// sorts them by line and quotient (a counting sort over both at once,
// through p.tmp and back into keys), records where in keys each line
// starts in counts, and
// for each line drops repeats, writes its first K entries to its slots,
// queues the rest for their secondary lines and sets its threshold.
func (p *v3Placer) placeGroup(first, end uint32, keys []uint64, counts []uint32) {
	s := &p.shape
	L := uint64(p.lines)
	nq := int(s.q)
	cq := resize(p.cq, int(end-first)*nq)
	p.cq = cq
	clear(cq)
	p.pq = resize(p.pq, 2*len(keys))
	pq, spq := p.pq[:len(keys)], p.pq[len(keys):]
	p.idx = resize(p.idx, len(keys))
	idx := p.idx
	lm, m, rMask, first64 := p.lineMultiplier(), p.m, uint64(1)<<s.r-1, uint64(first)
	for i, h := range keys {
		ln := v3Line(h*lm, L)
		x := v2Position(h, m)
		q := (x >> 16 & 0xffff) * uint64(nq) >> 16 // v3QR
		pq[i] = uint32(q<<16 | x&rMask)
		c := uint32(ln-first64)*uint32(nq) + uint32(q)
		idx[i] = c
		cq[c]++
	}
	// Each (line, quotient)'s first position: a running sum kept in a
	// register (a sum carried through memory waits on the store before
	// it), noting where each line starts.
	sum := uint32(0)
	for ln := first; ln < end; ln++ {
		counts[ln] = sum
		row := cq[int(ln-first)*nq : int(ln-first+1)*nq]
		for i, c := range row {
			row[i] = sum
			sum += c
		}
	}
	sorted := resize(p.tmp, len(keys))
	for i, x := range keys {
		c := idx[i]
		at := cq[c]
		cq[c] = at + 1
		sorted[at] = x
		spq[at] = pq[i]
	}
	// The sorted keys become the group's; its unsorted buffer is the
	// next group's to sort into.
	p.groups[first>>p.groupShift], p.tmp = sorted, keys
	keys = sorted
	k := int(s.k)
	for ln := first; ln < end; ln++ {
		from, to := counts[ln], uint32(len(keys))
		if ln+1 < end {
			to = counts[ln+1]
		}
		// The line's keys, in quotient order: repeats dropped in place,
		// the first K entries into its slots.
		seg, lq := keys[from:to], spq[from:to]
		slot := p.slots[int(ln)*k : int(ln+1)*k]
		// A repeat follows its twin in the run of their quotient (the
		// sort is stable), unless another key of that line and quotient
		// arrived between them: then it keeps a slot of its own, which
		// costs a slot, never a false negative.
		n := 0
		prevV, prevX := uint32(0), uint64(0)
		for i, x := range seg {
			v := lq[i]
			if v == prevV && x == prevX && n > 0 {
				p.repeats++
				continue
			}
			prevV, prevX = v, x
			if n != i {
				seg[n], lq[n] = x, v
			}
			if n < k {
				slot[n] = v
			}
			n++
		}
		p.thr[ln], p.nsec[ln] = uint16(s.q), 0
		if n <= k {
			p.kept[ln] = uint16(n)
			continue
		}
		p.kept[ln] = uint16(k)
		p.thr[ln] = uint16(lq[k] >> 16)
		p.queue = append(p.queue, seg[k:n]...)
	}
}
