package linev4

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// CrowdedShare is the share of keys overflowing their primary lines past
// which an attempt under the fixed line hash is abandoned for seeded
// lines: several times what keys spread at random send, so only keys
// chosen against that hash reach it.
const CrowdedShare = 0.15

// Encoder is the memory a version-4 build needs, kept across builds.
type Encoder struct {
	shape   Shape
	k       uint32 // line capacity
	lines   uint32
	seeded  bool
	seed    uint32
	repeats int // repeats dropped since Start, over every attempt
	crowded bool
	// keys holds every line's primary keys, line after line (start[ln] is
	// where line ln's begin), each as its position hash rotated by 32 bits
	// so that sorting orders a line's keys by priority and puts a key's
	// repeats next to it. A line's first kept[ln] keys are stored in it;
	// the rest went on to their secondary lines.
	keys  []uint64
	start []uint32
	tmp   []uint64 // sortKeys' buffer
	kept  []uint16
	// sec holds, k per line, the position hashes of the keys a line must
	// hold whatever its threshold: keys placed there from their secondary
	// line, and (pinned) keys returned to their primary line because their
	// equation contradicted their secondary line's. nsec counts them.
	sec    []uint64
	pinned []bool
	nsec   []uint16
	// secX and secC hold, for the line being solved, each key it must
	// hold: the position hash that places the key in this line (its
	// secondary position hash, or its own when pinned) and that hash's
	// coefficients, mixed ahead of the elimination.
	secX, secC []uint64
	thr        []uint8
	queue      []uint64 // position hashes of keys bound for their secondary lines
	returns    []uint64 // position hashes of keys bound back to their primary lines
	mInv       uint64   // the inverse of the seed's multiplier: a key hash from its position hash
	dirty      []uint32 // lines to solve again
	mark       []bool
	moves      int
	// rankFailures counts keys whose equation contradicted their line's.
	rankFailures int
	blk          []byte
	wide         wideBasis // solveLine's system for columns of over 64 rows
	saved        savedSystems
	// plain solves every line from scratch each time: the reference
	// tests check the saved systems against.
	plain bool
}

// Stats describes the block Encode appended.
type Stats struct {
	Keys            int
	Lines           int
	Columns         int // r
	Height          int // M
	ExtraShare      int // U
	LineCapacity    int
	Load            float64 // keys over the lines' rows
	PrimaryOverflow int
	Overflowed      int
	RankFailures    int
	OverflowLines   int
	SecondLineShare float64
	SeededLines     bool
	Bytes           int
}

// Start readies the encoder for a build: no repeats seen yet.
func (e *Encoder) Start() { e.repeats = 0 }

// Repeats is the number of repeated key hashes placement dropped since
// Start, over every attempt.
func (e *Encoder) Repeats() int { return e.repeats }

// Crowded reports whether the last Encode found lines crowded under the
// fixed line hash: the next attempt should take seeded lines.
func (e *Encoder) Crowded() bool { return e.crowded }

// AlwaysMaybe appends the version-4 block that answers "maybe" for every
// key: a trailer with the always-maybe flag and no lines.
func AlwaysMaybe(dst []byte, kind uint8, seed uint32) []byte {
	out, blk := frame.GrowBytes(dst, frame.TrailerSize)
	h := Header{Kind: kind, AlwaysMaybe: true, Seed: seed}
	h.Put(blk, 0)
	frame.Seal(blk)
	return out
}

// Encode places the n key hashes of pages under one seed, line hash, plan
// and line count and appends the block; ok is false when placement failed
// (the caller reseeds, grows, or seeds the lines). The pages are left as
// they were.
func (e *Encoder) Encode(dst []byte, pages [][]uint64, n int, kind uint8, seed uint32, seededLines bool, p Plan, lines uint32) ([]byte, Stats, bool) {
	e.shape, e.k, e.lines, e.seeded, e.seed = p.Shape, max(p.K, 1), lines, seededLines, seed
	e.crowded, e.moves, e.rankFailures = false, 0, 0
	m := frame.Multiplier(seed)
	size := int(lines)*frame.LineBytes + frame.TrailerSize
	out, blk := frame.GrowBytes(dst, size)
	// The block is the caller's: the encoder, kept across builds, must
	// not keep it alive.
	e.blk = blk
	defer func() { e.blk = nil }()
	e.sortByLine(pages, n, m)
	e.kept = frame.Resize(e.kept, int(lines))
	e.nsec = frame.Resize(e.nsec, int(lines))
	e.thr = frame.Resize(e.thr, int(lines))
	e.sec = frame.Resize(e.sec, int(lines)*int(e.k))
	e.pinned = frame.Resize(e.pinned, int(lines)*int(e.k))
	e.secX = frame.Resize(e.secX, int(e.k))
	e.secC = frame.Resize(e.secC, int(e.k))
	e.mInv = keyhash.ModInverse(m)
	e.mark = frame.Resize(e.mark, int(lines))
	clear(e.nsec)
	clear(e.mark)
	e.saved.reset(p.Shape, lines, e.k, !e.plain)
	e.queue, e.returns, e.dirty = e.queue[:0], e.returns[:0], e.dirty[:0]
	for ln := range lines {
		e.primary(ln)
	}
	primaryOverflow := len(e.queue)
	if !seededLines && primaryOverflow > int(CrowdedShare*float64(n))+64 {
		e.crowded = true
		return nil, Stats{}, false
	}
	// The keys sent on take their places by count first, as in version
	// 3, so that most lines are solved once; a key whose equation then
	// contradicts its line's is sent on, and the lines that change are
	// solved again.
	limit := int(frame.EvictionsPerKey*float64(n)) + 64
	overflowed := len(e.queue)
	for len(e.queue) > 0 {
		if !e.placeQueue(limit) {
			return nil, Stats{}, false
		}
		overflowed += len(e.queue)
	}
	for _, ln := range e.dirty {
		e.mark[ln] = false
	}
	e.dirty = e.dirty[:0]
	for ln := range lines {
		if !e.solveLine(ln) {
			return nil, Stats{}, false
		}
	}
	for len(e.queue)+len(e.returns) > 0 {
		overflowed += len(e.queue)
		if !e.placeQueue(limit) || !e.placeReturns(limit) {
			return nil, Stats{}, false
		}
		dirty := e.dirty
		e.dirty = nil
		for _, ln := range dirty {
			e.mark[ln] = false
		}
		for _, ln := range dirty {
			if !e.solveLine(ln) {
				return nil, Stats{}, false
			}
		}
		e.dirty = dirty[:0]
	}
	e.writeSaved()
	return out, e.seal(kind, seed, primaryOverflow, overflowed), true
}

// sortByLine fills keys and start: the n hashes of pages by primary line
// (a counting sort), each as its rotated position hash.
func (e *Encoder) sortByLine(pages [][]uint64, n int, m uint64) {
	L := uint64(e.lines)
	lm := uint64(LineMultiplier)
	if e.seeded {
		lm = m
	}
	start := frame.Resize(e.start, int(L)+1)
	e.start = start
	clear(start)
	for _, pg := range pages {
		for _, h := range pg {
			start[Line(h*lm, L)+1]++
		}
	}
	for i := 1; i <= int(L); i++ {
		start[i] += start[i-1]
	}
	keys := frame.Resize(e.keys, n)
	e.keys = keys
	for _, pg := range pages {
		for _, h := range pg {
			ln := Line(h*lm, L)
			keys[start[ln]] = bits.RotateLeft64(frame.Position(h, m), 32)
			start[ln]++
		}
	}
	copy(start[1:], start[:L])
	start[0] = 0
}

// primary places line ln's own keys: sorted by priority, repeats dropped
// (the line's segment shrinks; the slots past its end are unused), the
// first k kept and the rest queued for their secondary lines, the
// threshold the priority of the first key sent.
func (e *Encoder) primary(ln uint32) {
	seg := e.keys[e.start[ln]:e.start[ln+1]]
	e.sortKeys(seg)
	nd := 0
	for i, v := range seg {
		if i > 0 && v == seg[nd-1] {
			e.repeats++
			continue
		}
		seg[nd] = v
		nd++
	}
	for i := nd; i < len(seg); i++ {
		seg[i] = seg[nd-1] // repeats of the last key: never read past kept
	}
	e.thr[ln] = NoThreshold
	if nd <= int(e.k) {
		e.kept[ln] = uint16(nd)
		return
	}
	e.kept[ln] = uint16(e.k)
	e.thr[ln] = uint8(Priority(bits.RotateLeft64(seg[e.k], -32)))
	for _, v := range seg[e.k:nd] {
		e.queue = append(e.queue, bits.RotateLeft64(v, -32))
	}
}

// sortKeys sorts a line's keys: dealt by their top bits into buckets
// (about one key each), then put in order by an insertion sort, which
// finds them nearly in order, a step or two per key, against the
// comparison sort's mispredicted branches at every level. Keys that
// crowd a bucket (not hashes at random) are left to the comparison sort.
func (e *Encoder) sortKeys(seg []uint64) {
	n := len(seg)
	if n < 2 || n >= 1<<sortBucketBits {
		slices.Sort(seg)
		return
	}
	sh := 64 - uint(bits.Len(uint(n)))
	var at [1<<sortBucketBits + 1]uint32
	for _, v := range seg {
		at[v>>sh+1]++
	}
	crowd := uint32(0)
	for i := 1; i <= 1<<(64-sh); i++ {
		crowd = max(crowd, at[i])
		at[i] += at[i-1]
	}
	if crowd > sortCrowd {
		slices.Sort(seg)
		return
	}
	if cap(e.tmp) < n {
		e.tmp = make([]uint64, n, 2*n)
	}
	tmp := e.tmp[:n]
	for _, v := range seg {
		tmp[at[v>>sh]] = v
		at[v>>sh]++
	}
	for i, v := range tmp {
		j := i
		for ; j > 0 && seg[j-1] > v; j-- {
			seg[j] = seg[j-1]
		}
		seg[j] = v
	}
}

// sortBucketBits bounds sortKeys' buckets: lines of more keys are left
// to the comparison sort. sortCrowd is the most keys a bucket may take.
const (
	sortBucketBits = 8
	sortCrowd      = 12
)

// placeQueue places the queued keys in their secondary lines: a key takes
// a free place, or the place of the line's stored primary key of the
// highest priority, which is queued for its own secondary line and lowers
// the line's threshold to its priority. Every line that changes is marked
// to be solved again. It reports false when a full line holds only
// secondary keys, or the moves pass limit.
func (e *Encoder) placeQueue(limit int) bool {
	L := uint64(e.lines)
	q := e.queue
	e.queue = nil
	var next []uint64
	for _, x := range q {
		if !e.hold(uint32(Line(Secondary(x), L)), x, false, limit, &next) {
			e.queue = q[:0]
			return false
		}
	}
	e.queue = append(q[:0], next...)
	return true
}

// placeReturns places the keys whose equations contradicted their
// secondary lines' back in their primary lines, pinned there: such a key's
// priority is at or past its primary line's threshold, so a lookup reads
// both lines, and a pinned key is never sent on again. A full line makes
// room as for a key sent on. It reports false as placeQueue does.
func (e *Encoder) placeReturns(limit int) bool {
	L := uint64(e.lines)
	lm := uint64(LineMultiplier)
	if e.seeded {
		lm = frame.Multiplier(e.seed)
	}
	for _, x := range e.returns {
		h := frame.Unposition(x, e.mInv)
		if !e.hold(uint32(Line(h*lm, L)), x, true, limit, &e.queue) {
			return false
		}
	}
	e.returns = e.returns[:0]
	return true
}

// hold makes line ln hold the key of position hash x (pinned: in its
// primary line, else in its secondary line): in a free place, or in the
// place of the line's stored primary key of the highest priority, which
// is appended to next and lowers the line's threshold to its priority.
// The line is marked to be solved again. It reports false when the line
// is full of keys it must hold, or the moves pass limit.
func (e *Encoder) hold(ln uint32, x uint64, pinned bool, limit int, next *[]uint64) bool {
	k := uint32(e.k)
	if uint32(e.kept[ln])+uint32(e.nsec[ln]) >= k {
		if e.kept[ln] == 0 || e.moves >= limit {
			return false
		}
		e.moves++
		e.kept[ln]--
		v := bits.RotateLeft64(e.keys[e.start[ln]+uint32(e.kept[ln])], -32)
		e.thr[ln] = min(e.thr[ln], uint8(Priority(v)))
		*next = append(*next, v)
	}
	e.sec[ln*k+uint32(e.nsec[ln])] = x
	e.pinned[ln*k+uint32(e.nsec[ln])] = pinned
	e.nsec[ln]++
	if !e.mark[ln] {
		e.mark[ln] = true
		e.dirty = append(e.dirty, ln)
	}
	return true
}

// solveLine solves line ln's equations, those of the keys it must hold
// first and then its stored primary keys' in priority order, and writes
// its columns into the block. A primary key whose equation contradicts the
// line's leaves it: it is queued for its secondary line and lowers the
// threshold. A secondary key whose equation contradicts those before it
// (keys of this line's secondaries only: they are few, but with few rows
// their equations meet) is queued to return to its primary line. It
// reports false when a pinned key's equation contradicts the line's (its
// key has no other place).
func (e *Encoder) solveLine(ln uint32) bool {
	s := &e.shape
	var main, extra basis
	if e.saved.on {
		if e.resolve(ln, &main, &extra) {
			return true // written by writeSaved
		}
		main, extra = basis{}, basis{}
	}
	var wide *wideBasis // the full columns' system when they have over 64 rows
	if s.M > 64 {
		wide = &e.wide
		*wide = wideBasis{}
	}
	mm, em, hm := mask(s.M), mask(s.Extra()), mask(s.M-min(s.M, 64))
	rm := uint64(1)<<s.R - 1
	addParts := func(k Parts, primary bool) bool {
		var p int
		var ok bool
		if wide != nil {
			p, ok = wide.add(k.C, keyhash.Mix(k.X, CoefficientSalt2)&hm, k.F&rm)
		} else {
			p, ok = main.add(k.C&mm, k.F&rm)
		}
		if ok && primary && k.U < uint64(s.U) {
			if _, ok = extra.add(k.C&em, k.F>>s.R&1); !ok {
				if wide != nil {
					wide.drop(p)
				} else {
					main.drop(p)
				}
			}
		}
		return ok
	}
	add := func(x uint64, primary bool) bool { return addParts(PartsOf(x), primary) }
	// The keys it must hold: their equations' position hashes and
	// coefficients are mixed first, in a loop of independent multiplies,
	// not each in the way of its elimination.
	base := ln * e.k
	sx, sc := e.secX[:e.nsec[ln]], e.secC[:e.nsec[ln]]
	for j := range sx {
		x := e.sec[base+uint32(j)]
		if !e.pinned[base+uint32(j)] {
			x = Secondary(x)
		}
		sx[j], sc[j] = x, keyhash.Mix(x, CoefficientSalt)
	}
	for j := uint32(0); j < uint32(e.nsec[ln]); {
		x, c := sx[j], sc[j]
		k := partsMixed(x, c)
		pinned := e.pinned[base+j]
		if pinned && !addParts(k, true) {
			return false
		}
		if pinned || addParts(k, false) {
			j++
			continue
		}
		n := uint32(e.nsec[ln]) - 1
		e.returns = append(e.returns, e.sec[base+j])
		e.sec[base+j], e.pinned[base+j] = e.sec[base+n], e.pinned[base+n]
		sx[j], sc[j] = sx[n], sc[n]
		e.nsec[ln]--
	}
	seg := e.keys[e.start[ln]:e.start[ln+1]]
	if wide == nil {
		e.addPrimaries(ln, seg, &main, &extra)
	}
	for i := 0; wide != nil && i < int(e.kept[ln]); {
		x := bits.RotateLeft64(seg[i], -32)
		if add(x, true) {
			i++
			continue
		}
		e.contradicted(ln, seg, i, x)
	}
	if e.saved.on {
		e.saved.save(ln, &main, &extra, e.kept[ln], e.nsec[ln])
		return true // written by writeSaved
	}
	e.writeLine(ln, &main, &extra, wide)
	return true
}

// addPrimaries adds line ln's stored primary keys' equations, in priority
// order, to main and extra (columns of at most 64 rows); a key whose
// equation contradicts the line's leaves it. The next key's coefficients
// are mixed before the key in hand is eliminated, so that the mix, a
// chain of multiplies, runs alongside the elimination and survives its
// mispredicted last branch; the next key to add is seg[i+1] as it stood,
// whether key i stayed (i moves on) or left (the keys after it move
// down).
func (e *Encoder) addPrimaries(ln uint32, seg []uint64, main, extra *basis) {
	s := &e.shape
	mm, em := mask(s.M), mask(s.Extra())
	rm, r, u := uint64(1)<<s.R-1, s.R, uint64(s.U)
	base := ln * e.k
	if e.kept[ln] == 0 {
		return
	}
	last := len(seg) - 1
	x := bits.RotateLeft64(seg[0], -32)
	c := keyhash.Mix(x, CoefficientSalt)
	for i := 0; i < int(e.kept[ln]); {
		xn := bits.RotateLeft64(seg[min(i+1, last)], -32)
		cn := keyhash.Mix(xn, CoefficientSalt)
		f := x&0xffff | c>>48<<16 // partsMixed(x, c).F and .U below, without the struct, which measured slower here
		p, ok := main.add(c&mm, f&rm)
		px := -1
		if ok && x>>16&0xff < u {
			if px, ok = extra.add(c&em, f>>r&1); !ok {
				main.drop(p)
			}
		}
		if ok {
			if e.saved.on {
				e.saved.pivots[base+uint32(i)] = [2]int8{int8(p), int8(px)}
			}
			i++
		} else {
			e.contradicted(ln, seg, i, x)
		}
		x, c = xn, cn
	}
}

// contradicted moves line ln's stored primary key i, of position hash x,
// whose equation contradicted the line's, past its stored keys and sends
// it on to its secondary line; the threshold falls to its priority.
func (e *Encoder) contradicted(ln uint32, seg []uint64, i int, x uint64) {
	e.rankFailures++
	kept := int(e.kept[ln])
	v := seg[i]
	copy(seg[i:kept-1], seg[i+1:kept])
	seg[kept-1] = v
	e.kept[ln]--
	e.thr[ln] = min(e.thr[ln], uint8(Priority(x)))
	e.queue = append(e.queue, x)
}

// writeLine writes into the block line ln's columns, the solution of its
// system (main, or wide when not nil, and extra).
func (e *Encoder) writeLine(ln uint32, main, extra *basis, wide *wideBasis) {
	s := &e.shape
	var cols, hi [MaxColumns + 1]uint64
	if wide != nil {
		wide.solve(cols[:s.R], hi[:s.R])
	} else {
		main.solve(cols[:s.R])
	}
	extra.solve(cols[s.R : s.R+1])
	var w [9]uint64
	for j := uint32(0); j < s.R; j++ {
		put(&w, j*s.M, cols[j])
		if wide != nil {
			put(&w, j*s.M+64, hi[j])
		}
	}
	put(&w, s.R*s.M, cols[s.R])
	l := e.blk[int(ln)*frame.LineBytes:]
	for i := range 8 {
		binary.LittleEndian.PutUint64(l[i*8:], w[i])
	}
}

// put ORs v into the line's words at bit off.
func put(w *[9]uint64, off uint32, v uint64) {
	i, s := off>>6, off&63
	if i > 7 {
		return
	}
	w[i] |= v << s
	if s != 0 {
		w[i+1] |= v >> (64 - s)
	}
}

// seal writes the thresholds and the trailer and returns the block's
// stats.
func (e *Encoder) seal(kind uint8, seed uint32, primaryOverflow, overflowed int) Stats {
	blk := e.blk
	stored, ovLines, p2 := 0, 0, 0.0
	for ln := 0; ln < int(e.lines); ln++ {
		stored += int(e.kept[ln]) + int(e.nsec[ln])
		t := e.thr[ln]
		blk[ln*frame.LineBytes+frame.LineBytes-1] |= t << (8 - ThresholdBits)
		if t < NoThreshold {
			ovLines++
			p2 += float64(NoThreshold-int(t)) / NoThreshold
		}
	}
	size := len(blk)
	h := Header{Shape: e.shape, Kind: kind, SeededLines: e.seeded, Lines: e.lines, Seed: seed}
	h.Put(blk[size-frame.TrailerSize:], uint32(stored))
	frame.Seal(blk)
	return Stats{
		Keys: stored, Lines: int(e.lines), Columns: int(e.shape.R), Height: int(e.shape.M), ExtraShare: int(e.shape.U),
		LineCapacity:    int(e.k),
		Load:            float64(stored) / (float64(e.lines) * float64(e.shape.M)),
		PrimaryOverflow: primaryOverflow, Overflowed: overflowed, RankFailures: e.rankFailures,
		OverflowLines: ovLines, SecondLineShare: p2 / float64(e.lines), SeededLines: e.seeded, Bytes: size,
	}
}
