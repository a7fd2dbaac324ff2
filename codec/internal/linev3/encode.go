package linev3

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// placer is the placement state of a version-3 build: every line's keys
// and entries at once, since keys that overflow their primary line are
// placed after every line has had its primary keys.
type placer struct {
	Shape       Shape
	Lines       uint32
	m           uint64 // the seed's multiplier
	SeededLines bool
	crowded     bool     // the last attempt found lines crowded under the fixed line hash
	repeats     int      // repeats dropped, over every attempt of a Finish
	tmp         []uint64 // the buffer a group's keys are sorted into
	pq          []uint32 // a group's keys' quotient<<16 | remainder, sorted
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
	// idx holds a group's keys' (line, quotient) index<<32 | entry
	// (quotient<<16 | remainder), unsorted: one word a key to store and
	// load, not two.
	idx   []uint64
	sec   []uint32 // a line's secondary entries, while they merge
	secAt []int    // where in the line's primary entries each goes
	// groups holds each group of lines' keys, in arrival order until
	// placeGroup leaves them in line and quotient order, each line's
	// distinct keys first (counts has where each line starts). Each is
	// carved from region with room for a little more than its share of
	// the keys, so that a build after the pools were emptied allocates
	// one buffer, not one per group; a group that outgrows its room
	// (keys crowding its lines) moves to a buffer of its own.
	groups [][]uint64
	region []uint64
	moves  int
}

// AlwaysMaybe appends the version-3 block that answers "maybe" for every
// key: a trailer with the always-maybe flag and no lines.
func AlwaysMaybe(dst []byte, kind uint8, seed uint32) []byte {
	out, blk := frame.GrowBytes(dst, frame.TrailerSize)
	h := Header{Kind: kind, AlwaysMaybe: true, Seed: seed}
	h.Put(blk, 0)
	frame.Seal(blk)
	return out
}

// Encoder is the memory a version-3 build needs, kept across builds.
type Encoder struct {
	p      placer
	counts []uint32
}

// Stats describes the block Encode appended.
type Stats struct {
	Keys            int
	Lines           int
	RemainderBits   int
	Quotients       int
	LineCapacity    int
	Load            float64
	PrimaryOverflow int
	Overflowed      int
	OverflowLines   int
	SecondLineShare float64
	SeededLines     bool
	Bytes           int
}

// Start readies the encoder for a build: no repeats seen yet.
func (e *Encoder) Start() { e.p.repeats = 0 }

// Repeats is the number of repeated key hashes placement dropped since
// Start, over every attempt: repeats that did not arrive one after another.
func (e *Encoder) Repeats() int { return e.p.repeats }

// Crowded reports whether the last Encode found lines crowded under the
// fixed line hash (CrowdedShare): only keys chosen against that hash do
// that, and the next attempt should take seeded lines.
func (e *Encoder) Crowded() bool { return e.p.crowded }

// Encode places the n key hashes of pages under one seed, line hash,
// shape and line count and appends the block; ok is false when placement
// failed (the caller reseeds, grows, or seeds the lines). The pages are
// left as they were.
func (e *Encoder) Encode(dst []byte, pages [][]uint64, n int, kind uint8, seed uint32, seededLines bool, s Shape, lines uint32) ([]byte, Stats, bool) {
	p := &e.p
	p.Shape, p.Lines, p.SeededLines = s, lines, seededLines
	p.m = frame.Multiplier(seed)
	sh, groups := p.group(pages, n)
	counts := slices.Grow(e.counts[:0], int(lines)+1)[:lines+1]
	e.counts = counts
	p.slots = frame.Resize(p.slots, int(lines)*int(s.K))
	p.kept = frame.Resize(p.kept, int(lines))
	p.nsec = frame.Resize(p.nsec, int(lines))
	p.thr = frame.Resize(p.thr, int(lines))
	p.queue = slices.Grow(p.queue[:0], n/16+64)
	p.moves = 0
	p.crowded = false

	// Primary placement, a group at a time: sort its keys by line and
	// quotient (a counting sort; a key's repeats end up in its run), then
	// in each line drop repeats, keep the first K keys and send the rest,
	// those of the highest quotients, to their secondary lines: the
	// threshold T is the first quotient sent.
	for g := range groups {
		p.placeGroup(uint32(g)<<sh, min(uint32(g+1)<<sh, lines), p.groups[g], counts)
	}
	if !seededLines && len(p.queue) > int(CrowdedShare*float64(n))+64 {
		// Far more keys overflow than lines filled at random send: keys
		// chosen against the fixed line hash. Their lines would read a
		// second line on most lookups; the seeded lines spread them.
		p.crowded = true
		return nil, Stats{}, false
	}

	if !p.placeSecondary(n, sh, groups, counts) {
		return nil, Stats{}, false
	}
	return p.write(dst, kind, seed)
}

// group gives each group of lines the key hashes of pages whose primary
// line it holds, and returns the shift from a line to its group and the
// number of groups.
func (p *placer) group(pages [][]uint64, n int) (sh, groups int) {
	lines := p.Lines
	L := uint64(lines)
	// The hashes go to groups of lines by their primary line:
	// at most groupLines groups, each a few tens of kilobytes of keys,
	// so that every later pass over a group stays in the cache.
	sh = max(0, bits.Len32(lines-1)-bits.Len32(groupLines-1))
	groups = int((lines-1)>>sh) + 1
	// Each group's keys go to a buffer of its own as they are mixed: one
	// pass over the pages, appending to at most groupLines streams.
	if len(p.groups) < groups {
		p.groups = append(p.groups, make([][]uint64, groups-len(p.groups))...)
	}
	gb := p.groups[:groups]
	per := n/groups + n/groups/8 + 16
	p.region = frame.Resize(p.region, groups*per)
	for g := range gb {
		gb[g] = p.region[g*per : g*per : (g+1)*per]
	}
	lm := p.lineMultiplier()
	for _, pg := range pages {
		for _, h := range pg {
			g := Line(h*lm, L) >> sh
			gb[g] = append(gb[g], h)
		}
	}
	return sh, groups
}

// placeSecondary places the queued keys: a key goes to its secondary line
// if that has room, or else takes the place of the line's primary key of
// the highest quotient, which leaves for its own secondary line and lowers
// the line's threshold to its quotient. It runs in rounds, the keys of a
// round (those that overflowed, then those they moved) taken in the order
// of their secondary lines' groups, so that the lines and keys each one
// reads are in the cache, not anywhere in the filter. (The order changes
// no byte: a line full when a key arrives gives up its highest primary key
// whichever key arrives.) It reports false when a line holds only
// secondary keys, or the moves pass their cap (frame.EvictionsPerKey of
// the n keys).
func (p *placer) placeSecondary(n, sh, groups int, counts []uint32) bool {
	s := p.Shape
	k := s.K
	L := uint64(p.Lines)
	limit := int(frame.EvictionsPerKey*float64(n)) + 64
	for from := 0; from < len(p.queue); {
		to := len(p.queue)
		for _, x2 := range p.bySecondaryGroup(p.queue[from:to], sh, groups) {
			ln := Line(x2, L)
			q, r := QR(x2, &s)
			base := int(ln) * int(k)
			if uint32(p.kept[ln])+uint32(p.nsec[ln]) >= k {
				if p.kept[ln] == 0 || p.moves >= limit {
					return false // the line holds only secondary keys, or too many moves
				}
				p.moves++
				last := int(p.kept[ln]) - 1
				p.kept[ln]--
				v := p.groups[ln>>sh][int(counts[ln])+last]
				vq, _ := QR(frame.Position(v, p.m), &s)
				p.thr[ln] = min(p.thr[ln], uint16(vq))
				p.queue = append(p.queue, v)
			}
			p.nsec[ln]++
			p.slots[base+int(k)-int(p.nsec[ln])] = uint32(q<<16 | r)
		}
		from = to
	}
	return true
}

// write appends the placed lines and the trailer; ok is false when a line
// holds a run longer than MaxRun (only possible where a line holds more
// keys than that), which the lookup could not measure.
func (p *placer) write(dst []byte, kind uint8, seed uint32) ([]byte, Stats, bool) {
	s, lines := p.Shape, p.Lines
	k := s.K
	size := int(lines)*frame.LineBytes + frame.TrailerSize
	out, blk := frame.GrowBytes(dst, size)
	stored, ovLines, p2 := 0, 0, 0.0
	tShift := 64 - s.TBits()
	for ln := 0; ln < int(lines); ln++ {
		w, e := p.encodeLine(ln)
		// A run is the entries of one quotient: only a line of more
		// than MaxRun entries can hold one too long.
		if e > MaxRun && RunTooLong(&w, int(s.Q+k)) {
			return nil, Stats{}, false
		}
		stored += e
		t := p.thr[ln]
		w[frame.LineBytes/8-1] |= uint64(t) << tShift
		if uint32(t) < s.Q {
			ovLines++
			p2 += float64(s.Q-uint32(t)) / float64(s.Q)
		}
		line := blk[ln*frame.LineBytes:]
		for j, v := range w[:frame.LineBytes/8] {
			binary.LittleEndian.PutUint64(line[j*8:], v)
		}
	}
	h := Header{Shape: s, Kind: kind, SeededLines: p.SeededLines, Lines: lines, Seed: seed}
	h.Put(blk[size-frame.TrailerSize:], uint32(stored))
	frame.Seal(blk)
	return out, Stats{
		Keys:            stored,
		Lines:           int(lines),
		RemainderBits:   int(s.R),
		Quotients:       int(s.Q),
		LineCapacity:    int(k),
		Load:            float64(stored) / (float64(lines) * float64(k)),
		PrimaryOverflow: len(p.queue) - p.moves,
		Overflowed:      len(p.queue),
		OverflowLines:   ovLines,
		SecondLineShare: p2 / float64(lines),
		SeededLines:     p.SeededLines,
		Bytes:           size,
	}, true
}

// encodeLine returns line ln's header and remainders, without its
// threshold, and the number of its entries: its primary entries (in
// quotient order) merged with its secondary ones, a header bit set at
// q_i + i for the i-th entry (so quotient q's run starts after the q-th
// zero), and the remainders in the same order.
func (p *placer) encodeLine(ln int) (w [frame.LineBytes / 8]uint64, entries int) {
	s := &p.Shape
	k := int(s.K)
	remOff := int(s.RemOff())
	slot := p.slots[ln*k : (ln+1)*k]
	kept, ns := int(p.kept[ln]), int(p.nsec[ln])
	if ns > 0 {
		// Merge the secondary entries into the primary ones in place.
		// A secondary entry goes before the first primary entry above
		// it, counting from where the one before it went: the primary
		// entries are in quotient order, their remainders in arrival
		// order, so that is the first of its quotient's run above it,
		// or the run's end (found by a scan: to the run, then in it).
		// The scan passes each primary entry at most once in all; a
		// binary search per secondary entry mispredicts about half of
		// its branches. Then, the largest first, each goes
		// to its place plus the secondary entries before it, and the
		// primary entries after it move up past it.
		sec := slot[k-ns:]
		if ns > 1 {
			slices.Sort(sec)
		}
		sec = append(p.sec[:0], sec...) // the moves may overwrite them
		p.sec = sec
		pos := frame.Resize(p.secAt, ns)
		p.secAt = pos
		prim := slot[:kept]
		at := 0
		for c, v := range sec {
			for q := v &^ 0xffff; at < kept && prim[at] < q; {
				at++ // to the run of v's quotient
			}
			for at < kept && prim[at] <= v {
				at++
			}
			pos[c] = at
		}
		a := kept
		for c := ns; c > 0; c-- {
			at := pos[c-1]
			copy(slot[at+c:a+c], slot[at:a])
			slot[at+c-1] = sec[c-1]
			a = at
		}
	}
	// The i-th entry (in quotient order) sets header bit q+i and holds
	// remainder slot i.
	// The remainders gather in acc, n of its bits taken, until it is
	// full and goes to word wi: a register, where OR-ing each one into
	// the line in memory would make every entry wait on the store of
	// the one before. (The header's bits go to memory: an
	// accumulator there costs a branch that mispredicts once or twice
	// a line, and measured slower.)
	wi, acc, n, r := remOff>>6, uint64(0), uint(remOff&63), uint(s.R)
	for i, v := range slot[:kept+ns] {
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
	return w, kept + ns
}

// groupLines is the most groups of lines Encode spreads keys over
// first: few enough write streams for the caches to follow.
const groupLines = 256

// RunTooLong reports whether the first n bits of w (a line's header,
// n ≤ HeaderMax, whose runs of ones are the keys of one quotient each)
// hold a run longer than MaxRun: ANDed with itself shifted by 1, 2, 4,
// 8 and 16 bits a word keeps the bits that start a run of 32 or more,
// and shifted by 25 more, those that start one of 57.
func RunTooLong(w *[frame.LineBytes / 8]uint64, n int) bool {
	a, b, c := w[0], w[1], w[2]
	switch {
	case n < 64:
		a, b, c = a&(1<<n-1), 0, 0
	case n < 128:
		b, c = b&(1<<(n-64)-1), 0
	default:
		c &= 1<<(n-128) - 1
	}
	for _, sh := range [...]uint{1, 2, 4, 8, 16, MaxRun + 1 - 32} {
		a &= a>>sh | b<<(64-sh)
		b &= b>>sh | c<<(64-sh)
		c &= c >> sh
	}
	return a|b|c != 0
}

// dropRepeats removes from a line's keys seg (and their entries lq) each
// that repeats the key before it, from index i, the first repeat, on, and
// returns how many are left. Those before i stay as they are.
func (p *placer) dropRepeats(seg []uint64, lq []uint32, i int) int {
	n := i
	prevV, prevX := lq[i-1], seg[i-1]
	for j := i; j < len(seg); j++ {
		x, v := seg[j], lq[j]
		if v == prevV && x == prevX {
			p.repeats++
			continue
		}
		prevV, prevX = v, x
		seg[n], lq[n] = x, v
		n++
	}
	return n
}

// bySecondaryGroup returns the secondary position hashes of keys in the
// order of the groups of lines they fall in (a counting sort, stable
// within a group; sh is the shift from a line to its group).
func (p *placer) bySecondaryGroup(keys []uint64, sh, groups int) []uint64 {
	L := uint64(p.Lines)
	x2s := frame.Resize(p.x2, 2*len(keys))
	p.x2 = x2s
	unsorted, sorted := x2s[:len(keys)], x2s[len(keys):]
	at := frame.Resize(p.gcount, groups+1)
	p.gcount = at
	clear(at)
	for i, h := range keys {
		x2 := keyhash.Mix(frame.Position(h, p.m), frame.SecondarySalt)
		unsorted[i] = x2
		at[Line(x2, L)>>sh+1]++
	}
	for g := 1; g <= groups; g++ {
		at[g] += at[g-1]
	}
	for _, x2 := range unsorted {
		g := Line(x2, L) >> sh
		sorted[at[g]] = x2
		at[g]++
	}
	return sorted
}

// lineMultiplier is the multiplier of the position hash that chooses a
// key's primary line: the fixed one, or the seed's under seeded lines.
// Only the high half of the position hash picks the line, which the
// xorshift leaves as it is, so the line of key hash h is
// Line(h·lineMultiplier, lines).
func (p *placer) lineMultiplier() uint64 {
	if p.SeededLines {
		return p.m
	}
	return LineMultiplier
}

// placeGroup places the primary keys of lines [first, end), keys: it
// sorts them by line and quotient (a counting sort over both at once,
// from a copy in p.tmp back into keys), records where in keys each line
// starts in counts, and for each line drops repeats, writes its first K
// entries to its slots, queues the rest for their secondary lines and
// sets its threshold.
func (p *placer) placeGroup(first, end uint32, keys []uint64, counts []uint32) {
	s := &p.Shape
	L := uint64(p.Lines)
	nq := int(s.Q)
	cq := frame.Resize(p.cq, int(end-first)*nq)
	p.cq = cq
	clear(cq)
	p.pq = frame.Resize(p.pq, len(keys))
	spq := p.pq[:len(keys)]
	p.idx = frame.Resize(p.idx, len(keys))
	p.tmp = frame.Resize(p.tmp, len(keys))
	idx, unsorted := p.idx[:len(keys)], p.tmp[:len(keys)]
	lm, m, rMask, first64 := p.lineMultiplier(), p.m, uint64(1)<<s.R-1, uint64(first)
	copy(unsorted, keys)
	for i, h := range keys {
		ln := Line(h*lm, L)
		x := frame.Position(h, m)
		q := (x >> 16 & 0xffff) * uint64(nq) >> 16 // QR
		c := uint32(ln-first64)*uint32(nq) + uint32(q)
		idx[i] = uint64(c)<<32 | q<<16 | x&rMask
		cq[c]++
	}
	// Each (line, quotient)'s first position: a running sum kept in a
	// register (a sum carried through memory waits on the store before
	// it), four counts a step, there being about two per key; a line
	// starts where its first quotient does.
	sum, i := uint32(0), 0
	for ; i+4 <= len(cq); i += 4 {
		c4 := cq[i : i+4 : i+4]
		c0, c1, c2, c3 := c4[0], c4[1], c4[2], c4[3]
		c4[0], c4[1], c4[2], c4[3] = sum, sum+c0, sum+c0+c1, sum+c0+c1+c2
		sum += c0 + c1 + c2 + c3
	}
	for ; i < len(cq); i++ {
		cq[i], sum = sum, sum+cq[i]
	}
	for ln := first; ln < end; ln++ {
		counts[ln] = cq[int(ln-first)*nq]
	}
	idx = idx[:len(unsorted)]
	// A repeat lands right after its twin, written before it (the sort
	// is stable): a key equal to the one before its place, entry and
	// hash, marks the group as holding one. (Before its place may be a
	// key not yet written, still that of the unsorted order; that costs
	// only the scan below.)
	rep := false
	for i, x := range unsorted {
		e := idx[i]
		c := e >> 32
		at := cq[c]
		cq[c] = at + 1
		if j := max(at, 1) - 1; keys[j] == x && spq[j] == uint32(e) {
			rep = true
		}
		keys[at] = x
		spq[at] = uint32(e)
	}
	k := int(s.K)
	for ln := first; ln < end; ln++ {
		lf, lt := counts[ln], uint32(len(keys))
		if ln+1 < end {
			lt = counts[ln+1]
		}
		// The line's keys, in quotient order: repeats dropped in place,
		// the first K entries into its slots.
		seg, lq := keys[lf:lt], spq[lf:lt]
		slot := p.slots[int(ln)*k : int(ln+1)*k]
		// A repeat follows its twin in the run of their quotient (the
		// sort is stable), unless another key of that line and quotient
		// arrived between them: then it keeps a slot of its own, which
		// costs a slot, never a false negative. Up to the first repeat
		// the entries stay where they are (a scan that only compares).
		n := len(seg)
		if rep {
			n = 1
			for n < len(seg) && (lq[n] != lq[n-1] || seg[n] != seg[n-1]) {
				n++
			}
		}
		if n < len(seg) {
			n = p.dropRepeats(seg, lq, n)
		} else {
			n = len(seg)
		}
		copy(slot, lq[:n])
		p.thr[ln], p.nsec[ln] = uint16(s.Q), 0
		if n <= k {
			p.kept[ln] = uint16(n)
			continue
		}
		p.kept[ln] = uint16(k)
		p.thr[ln] = uint16(lq[k] >> 16)
		p.queue = append(p.queue, seg[k:n]...)
	}
}
