package dynamic

import (
	"math"
)

// codebook maps codes to tables. It is replaced, never changed, so a
// lookup reads a consistent one with a single load.
type codebook struct {
	tables []tableInfo // by table slot; id==0 && !live means free
	decode []int16     // code tree leaf -> table slot, -1 none
	always []int16     // table slots every lookup names
	stash  []stashEntry
}

type tableInfo struct {
	id     uint64
	rank   uint64
	code   uint32
	length uint8
	// While the table's code is being lengthened, entries in the old
	// format (prevCode, prevLength) still match.
	prevCode   uint32
	prevLength uint8
	// While a Replace recodes its inputs' entries to this table's code,
	// lookups compare its entries only above bit relax (package doc, step 5).
	relax   uint8
	live    bool
	always  bool
	entries int64 // slots holding the code (writer's count, copied at publish)
	keys    int   // keys given
}

type stashEntry struct {
	x     uint64
	table int16
}

// publish copies the codebook with change applied and publishes it.
func (x *Index) publish(change func(b *codebook)) {
	old := x.book.Load()
	b := &codebook{
		tables: append([]tableInfo(nil), old.tables...),
		decode: append([]int16(nil), old.decode...),
		stash:  append([]stashEntry(nil), old.stash...),
	}
	change(b)
	b.always = b.always[:0]
	for t := range b.tables {
		if t < len(x.count) && b.tables[t].live {
			b.tables[t].entries = x.count[t]
		}
		if b.tables[t].live && b.tables[t].always {
			b.always = append(b.always, int16(t))
		}
	}
	x.book.Store(b)
}

// codeLength is the square-root rule of the package doc, over the
// live tables not leaving.
func (x *Index) codeLength(keys int, leaving []int) uint {
	book := x.book.Load()
	sum := math.Sqrt(float64(max(keys, 1))) + x.pendingSqrt
	for t, ti := range book.tables {
		if !ti.live || contains(leaving, t) {
			continue
		}
		sum += math.Sqrt(float64(max(ti.keys, 1)))
	}
	l := math.Ceil(math.Log2(sum / math.Sqrt(float64(max(keys, 1)))))
	return uint(min(max(l, 1), float64(x.d)))
}

// allocCode takes a free node of the code tree at depth want, or failing
// that the shallowest free node deeper down. It prefers nodes whose
// sibling is taken, so large free subtrees stay whole for large tables.
func (x *Index) allocCode(want uint) (code uint32, length uint, ok bool) {
	for l := want; l <= x.d; l++ {
		size := 1 << (x.d - l)
		best, bestScore := -1, -1
		for start := size; start < len(x.leafUsed); start += size { // node 0 holds leaf 0
			if !x.allFree(start, size) {
				continue
			}
			score := 0
			if l > 0 {
				sib := start ^ size
				if !x.allFree(sib, size) {
					score = 1
				}
			}
			if score > bestScore {
				best, bestScore = start, score
			}
		}
		if best >= 0 {
			for i := best; i < best+size; i++ {
				x.leafUsed[i] = true
			}
			return uint32(best >> (x.d - l)), l, true
		}
	}
	return 0, 0, false
}

func (x *Index) allFree(start, size int) bool {
	if start == 0 {
		return false // the all-zero leaf is reserved
	}
	for i := start; i < start+size; i++ {
		if x.leafUsed[i] {
			return false
		}
	}
	return true
}

// claim takes a table slot and a code for a new table of keys entries
// (lengthening other tables' codes if the code tree is full) and
// publishes them, before any entry uses the code (package doc, step 4). ok
// is false when no code could be found: the table is then named by every
// lookup.
func (x *Index) claim(id, rank uint64, keys int, leaving []int) (t int, ok bool) {
	old := x.book.Load()
	t = -1
	for i, ti := range old.tables {
		if !ti.live {
			t = i
			break
		}
	}
	if t < 0 {
		t = len(old.tables)
	}
	for len(x.count) <= t {
		x.count = append(x.count, 0)
	}
	x.count[t] = 0
	want := x.codeLength(keys, leaving)
	var code uint32
	var length uint
	if pc := x.presetCode; pc != nil {
		code, length, ok = pc[0], uint(pc[1]), true
	} else {
		code, length, ok = x.allocCode(want)
	}
	if !ok {
		// Make room: lengthen, one bit at a time, the code of the table
		// holding the largest share of the code tree (each bit frees half
		// of its subtree) until the new table fits; then rewrite all the
		// lengthened tables' entries in one pass over the index.
		plan := map[int]uint{}
		for !ok {
			victim := x.recodeCandidate(old, leaving, plan)
			if victim < 0 {
				break
			}
			ti := old.tables[victim]
			l := uint(ti.length)
			if pl, ok := plan[victim]; ok {
				l = pl
			}
			c := ti.code << (l - uint(ti.length))
			freed := int(c<<1|1) << (x.d - l - 1)
			for i := freed; i < freed+1<<(x.d-l-1); i++ {
				x.leafUsed[i] = false
			}
			plan[victim] = l + 1
			code, length, ok = x.allocCode(want)
		}
		if len(plan) > 0 {
			x.lengthen(plan)
		}
	}
	info := tableInfo{id: id, rank: rank, code: code, length: uint8(length), live: true, always: !ok, keys: keys}
	x.publish(func(b *codebook) {
		if t == len(b.tables) {
			b.tables = append(b.tables, info)
		} else {
			b.tables[t] = info
		}
		if ok {
			first := int(code) << (x.d - length)
			for i := first; i < first+1<<(x.d-length); i++ {
				b.decode[i] = int16(t)
			}
		}
	})
	x.byID[id] = t
	return t, ok
}

// recodeCandidate is the live table with the shortest code (as planned)
// that can still grow, preferring tables that are not leaving; -1 if none.
func (x *Index) recodeCandidate(book *codebook, leaving []int, plan map[int]uint) int {
	best, bestScore := -1, 0
	for t, ti := range book.tables {
		l := uint(ti.length)
		if pl, ok := plan[t]; ok {
			l = pl
		}
		if !ti.live || l == 0 || l >= x.d {
			continue
		}
		score := int(l)
		if contains(leaving, t) {
			score += 100
		}
		if best < 0 || score < bestScore {
			best, bestScore = t, score
		}
	}
	return best
}

// lengthen moves each planned table t to the first descendant of its code
// node at length plan[t], taking that many fingerprint bits from each of
// its entries: the bits after the code are the key's next hash bits, so
// dropping the last ones leaves exactly the entry the longer code would
// have written. Lookups match both formats until every entry is
// rewritten; then the rest of each old subtree is released in the
// codebook (x.leafUsed was updated by the caller).
func (x *Index) lengthen(plan map[int]uint) {
	type change struct {
		oldCode, newCode uint32
		oldLen, newLen   uint
	}
	before := x.book.Load()
	changes := make([]change, len(before.tables)) // by table slot; newLen 0: unchanged
	for t, nl := range plan {
		ti := before.tables[t]
		ol := uint(ti.length)
		changes[t] = change{ti.code, ti.code << (nl - ol), ol, nl}
	}
	x.publish(func(b *codebook) {
		for t, c := range changes {
			if c.newLen == 0 {
				continue
			}
			b.tables[t].code, b.tables[t].length = c.newCode, uint8(c.newLen)
			b.tables[t].prevCode, b.tables[t].prevLength = c.oldCode, uint8(c.oldLen)
		}
	})
	tagShift := x.w - x.m
	planned := make([]int, 0, len(plan))
	for t := range plan {
		planned = append(planned, t)
	}
	x.rewriteEach(before, planned, func(_ *idxSegment, v uint32, t int) uint32 {
		if t < 0 || changes[t].newLen == 0 {
			return v
		}
		c := changes[t]
		kOld := tagShift - c.oldLen
		delta := c.newLen - c.oldLen
		extra := v & (1<<kOld - 1)
		return v>>tagShift<<tagShift | c.newCode<<(kOld-delta) | extra>>delta
	})
	x.publish(func(b *codebook) {
		for t, c := range changes {
			if c.newLen == 0 {
				continue
			}
			b.tables[t].prevCode, b.tables[t].prevLength = 0, 0
			oldStart := int(c.oldCode) << (x.d - c.oldLen)
			newEnd := int(c.newCode)<<(x.d-c.newLen) + 1<<(x.d-c.newLen)
			for i := newEnd; i < oldStart+1<<(x.d-c.oldLen); i++ {
				b.decode[i] = -1
			}
		}
	})
}
