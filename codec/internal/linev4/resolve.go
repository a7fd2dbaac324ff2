package linev4

import (
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// savedSystems keeps every line's system as its last solve left it, for
// columns of at most 64 rows, so that a line solved again takes only its
// changes: a line is solved about twice per build (keys that contradicted
// their lines, and the keys those evict, land in other lines), and
// solving it from scratch adds all its keys' equations again.
//
// The saved system is in echelon form, whose rows never change once
// added: the rows added last can be dropped again (their pivots cleared),
// leaving the system the earlier rows make. A full solve adds the line's
// stored primary keys last, in priority order, and a solve from the
// saved system adds the keys the line must hold above them; the keys a
// line gives up to make room (the stored primary key of the highest
// priority first) are dropped from the top, after the keys above them,
// which are then added again.
type savedSystems struct {
	on          bool
	m, x        uint32 // rows of the full columns and of the extra column
	k           uint32 // line capacity
	rows, xrows []uint64
	rhs, xrhs   []uint32
	have, xhave []uint64
	secFull     []uint16  // keys the line must hold at its last full solve
	keptAt      []uint16  // stored primary keys at the last solve
	secAt       []uint16  // keys the line must hold at the last solve
	pivots      [][2]int8 // per stored primary key, k per line: its pivots in the full and extra columns, -1 for none
	secPivots   [][2]int8 // per key the line must hold past secFull, k per line: its pivots
	solved      []bool    // the line has a saved system
}

// writeSaved writes every line's columns from its saved system, the one
// its last solve left: a line is solved about twice, and only the last
// solution is kept.
func (e *Encoder) writeSaved() {
	v := &e.saved
	if !v.on {
		return
	}
	var main, extra basis
	for ln := range e.lines {
		v.load(ln, &main, &extra)
		e.writeLine(ln, &main, &extra, nil)
	}
}

// load copies line ln's saved system into main and extra.
func (v *savedSystems) load(ln uint32, main, extra *basis) {
	m, x := v.m, v.x
	copy(main.row[:m], v.rows[ln*m:(ln+1)*m])
	copy(main.rhs[:m], v.rhs[ln*m:(ln+1)*m])
	copy(extra.row[:x], v.xrows[ln*x:(ln+1)*x])
	copy(extra.rhs[:x], v.xrhs[ln*x:(ln+1)*x])
	main.have, extra.have = v.have[ln], v.xhave[ln]
}

// reset readies the saved systems for a build of the given shape: none
// saved yet, and none kept when on is false.
func (v *savedSystems) reset(s Shape, lines, k uint32, on bool) {
	v.on = on && s.M <= 64
	if !v.on {
		return
	}
	v.m, v.x, v.k = s.M, s.Extra(), k
	n := int(lines)
	v.rows = frame.Resize(v.rows, n*int(v.m))
	v.rhs = frame.Resize(v.rhs, n*int(v.m))
	v.xrows = frame.Resize(v.xrows, n*int(v.x))
	v.xrhs = frame.Resize(v.xrhs, n*int(v.x))
	v.have = frame.Resize(v.have, n)
	v.xhave = frame.Resize(v.xhave, n)
	v.secFull = frame.Resize(v.secFull, n)
	v.keptAt = frame.Resize(v.keptAt, n)
	v.secAt = frame.Resize(v.secAt, n)
	v.pivots = frame.Resize(v.pivots, n*int(k))
	v.secPivots = frame.Resize(v.secPivots, n*int(k))
	v.solved = frame.Resize(v.solved, n)
	clear(v.solved)
}

// save keeps line ln's system after a full solve that stored kept
// primary keys and holds nsec keys for other lines.
func (v *savedSystems) save(ln uint32, main, extra *basis, kept, nsec uint16) {
	v.store(ln, main, extra)
	v.secFull[ln], v.keptAt[ln], v.secAt[ln], v.solved[ln] = nsec, kept, nsec, true
}

// store copies main and extra into line ln's saved system.
func (v *savedSystems) store(ln uint32, main, extra *basis) {
	m, x := v.m, v.x
	copy(v.rows[ln*m:(ln+1)*m], main.row[:m])
	copy(v.rhs[ln*m:(ln+1)*m], main.rhs[:m])
	copy(v.xrows[ln*x:(ln+1)*x], extra.row[:x])
	copy(v.xrhs[ln*x:(ln+1)*x], extra.rhs[:x])
	v.have[ln], v.xhave[ln] = main.have, extra.have
}

// resolve solves line ln again from its saved system when only keys it
// must hold were added since (on the line's secondary keys' side) and
// its highest-priority stored keys given up, and every added equation
// agrees with the system: then the line's whole set of equations is
// consistent, a solve from scratch would keep every key in any order,
// and its solution, the one whose unknowns of no pivot are zero, depends
// only on the equations' span, which is the same. main and extra are
// left holding the system. It reports false, and changes nothing that a
// full solve reads, when that does not hold: the line must be solved
// from scratch.
func (e *Encoder) resolve(ln uint32, main, extra *basis) bool {
	v := &e.saved
	if !v.solved[ln] {
		return false
	}
	kept, keptAt := e.kept[ln], v.keptAt[ln]
	if kept > keptAt {
		return false
	}
	v.load(ln, main, extra)
	base := ln * v.k
	from := uint32(v.secAt[ln]) // the first key it must hold to add
	if kept < keptAt {
		// The keys added since the full solve are above the primary
		// keys given up: drop them too, and add them again after.
		from = uint32(v.secFull[ln])
		for j := uint32(v.secAt[ln]); j > from; j-- {
			p := v.secPivots[base+j-1]
			main.drop(int(p[0]))
			extra.drop(int(p[1]))
		}
		for i := uint32(keptAt); i > uint32(kept); i-- {
			p := v.pivots[base+i-1]
			main.drop(int(p[0]))
			extra.drop(int(p[1]))
		}
	}
	s := &e.shape
	mm, em := mask(s.M), mask(s.Extra())
	rm := uint64(1)<<s.R - 1
	for j := from; j < uint32(e.nsec[ln]); j++ {
		x, pinned := e.sec[base+j], e.pinned[base+j]
		pv := [2]int8{-1, -1}
		if !pinned {
			k := PartsOf(Secondary(x))
			p, ok := main.add(k.C&mm, k.F&rm)
			if !ok {
				return false
			}
			pv[0] = int8(p)
		} else {
			k := PartsOf(x)
			p, ok := main.add(k.C&mm, k.F&rm)
			if !ok {
				return false
			}
			pv[0] = int8(p)
			if k.U < uint64(s.U) {
				if p, ok = extra.add(k.C&em, k.F>>s.R&1); !ok {
					return false
				}
				pv[1] = int8(p)
			}
		}
		v.secPivots[base+j] = pv
	}
	v.store(ln, main, extra)
	v.keptAt[ln], v.secAt[ln] = kept, e.nsec[ln]
	return true
}
