package linev4

import (
	"math/bits"
)

// basis is a system of equations over GF(2) in echelon form: the row of
// pivot b has its lowest set bit at b, and rhs[b] is its right-hand side
// (one bit per column). A key's equation joins it by Gaussian
// elimination against the rows of its set bits.
type basis struct {
	row  [MaxHeight]uint64
	rhs  [MaxHeight]uint32
	have uint64 // pivots held
}

// add adds the equation c·S = f. It returns the pivot it took, or -1 when
// the equation follows from the rows already held (c reduced to zero), and
// ok false when it contradicts them: then nothing changed.
func (b *basis) add(c, f uint64) (pivot int, ok bool) {
	for c != 0 {
		p := bits.TrailingZeros64(c)
		if b.have>>p&1 == 0 {
			b.row[p], b.rhs[p] = c, uint32(f)
			b.have |= 1 << p
			return p, true
		}
		c ^= b.row[p]
		f ^= uint64(b.rhs[p])
	}
	return -1, f == 0
}

// drop removes the row of pivot p, which add returned last.
func (b *basis) drop(p int) {
	if p >= 0 {
		b.have &^= 1 << p
	}
}

// solve writes a solution into cols (column j holds bit j of every
// unknown): back-substitution from the highest pivot down, the unknowns
// of no pivot zero. A row's bits above its pivot are unknowns already
// solved, so bit j of its pivot's unknown is rhs bit j XOR the parity of
// the row AND column j.
func (b *basis) solve(cols []uint64) {
	clear(cols)
	for h := b.have; h != 0; {
		p := 63 - bits.LeadingZeros64(h)
		h &^= 1 << p
		c, v := b.row[p], uint64(b.rhs[p])
		for j := range cols {
			bit := (v>>j ^ uint64(bits.OnesCount64(c&cols[j]))) & 1
			cols[j] |= bit << p
		}
	}
}
