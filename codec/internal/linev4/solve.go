package linev4

import (
	"math/bits"
)

// basis is a system of equations over GF(2) in echelon form: the row of
// pivot b has its lowest set bit at b, and rhs[b] is its right-hand side
// (one bit per column). A key's equation joins it by Gaussian
// elimination against the rows of its set bits.
type basis struct {
	row  [64]uint64
	rhs  [64]uint32
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
// solved. Unless it has about as many columns as rows up to its highest
// pivot, the system is solved column by column (solveColumns), whose
// steps, a fixed number per row, the branch predictor foresees; with that
// many columns, unknown
// by unknown (solveUnknowns), which takes a step per bit of a row and per
// bit of its unknown, each row's steps ending on a mispredicted branch.
func (b *basis) solve(cols []uint64) {
	if 4*len(cols) < 3*bits.Len64(b.have) {
		b.solveColumns(cols)
	} else {
		b.solveUnknowns(cols)
	}
}

// solveColumns is solve column by column: bit j of a pivot's unknown is
// rhs bit j XOR the parity of the row AND column j. The columns are built
// from the top down, each shifted left one row a step, so that the row,
// shifted down to its pivot, meets the rows above the pivot without a
// shift by a variable count per column.
func (b *basis) solveColumns(cols []uint64) {
	var acc [MaxColumns + 1]uint64
	a := acc[:len(cols)]
	if b.have != 0 {
		for p := 63 - bits.LeadingZeros64(b.have); p >= 0; p-- {
			if b.have>>p&1 == 0 {
				for j := range a {
					a[j] <<= 1
				}
				continue
			}
			c, v := b.row[p]>>p, uint64(b.rhs[p])
			for j := range a {
				w := a[j] << 1
				a[j] = w | (v^uint64(bits.OnesCount64(c&w)))&1
				v >>= 1
			}
		}
	}
	copy(cols, a)
}

// solveUnknowns is solve unknown by unknown: a pivot's unknown (its bit
// for every column at once) is its rhs XOR the unknowns of the row's bits
// above the pivot; the unknowns are then turned into columns. At most 32
// columns.
func (b *basis) solveUnknowns(cols []uint64) {
	var x [64]uint32 // x[q]: unknown q, bit j for column j
	for h := b.have; h != 0; {
		p := 63 - bits.LeadingZeros64(h)
		h &^= 1 << p
		v := b.rhs[p]
		for c := b.row[p] &^ (2<<p - 1); c != 0; c &= c - 1 {
			v ^= x[bits.TrailingZeros64(c)]
		}
		x[p] = v
	}
	var out [32]uint64
	m := uint32(1)<<len(cols) - 1
	for h := b.have; h != 0; h &= h - 1 {
		p := bits.TrailingZeros64(h)
		for v := x[p&63] & m; v != 0; v &= v - 1 {
			out[bits.TrailingZeros32(v)&31] |= 1 << p
		}
	}
	copy(cols, out[:len(cols)])
}

// wideBasis is basis for columns of more than 64 rows: a row is two
// words, the pivot the lowest set bit of both.
type wideBasis struct {
	row  [MaxHeight][2]uint64
	rhs  [MaxHeight]uint32
	have [2]uint64
}

// add is basis.add for coefficients c (rows 0..63) and c1 (64..127).
func (b *wideBasis) add(c, c1, f uint64) (pivot int, ok bool) {
	for c|c1 != 0 {
		p := bits.TrailingZeros64(c)
		if c == 0 {
			p = 64 + bits.TrailingZeros64(c1)
		}
		if b.have[p>>6]>>(p&63)&1 == 0 {
			b.row[p], b.rhs[p] = [2]uint64{c, c1}, uint32(f)
			b.have[p>>6] |= 1 << (p & 63)
			return p, true
		}
		c ^= b.row[p][0]
		c1 ^= b.row[p][1]
		f ^= uint64(b.rhs[p])
	}
	return -1, f == 0
}

// drop removes the row of pivot p, which add returned last.
func (b *wideBasis) drop(p int) {
	if p >= 0 {
		b.have[p>>6] &^= 1 << (p & 63)
	}
}

// solve is basis.solve: cols[j] and hi[j] are column j's rows 0..63 and
// 64..127.
func (b *wideBasis) solve(cols, hi []uint64) {
	clear(cols)
	clear(hi)
	for w := 1; w >= 0; w-- {
		for h := b.have[w]; h != 0; {
			q := 63 - bits.LeadingZeros64(h)
			h &^= 1 << q
			p := w*64 + q
			r, v := b.row[p], uint64(b.rhs[p])
			for j := range cols {
				bit := (v>>j ^ uint64(bits.OnesCount64(r[0]&cols[j])+bits.OnesCount64(r[1]&hi[j]))) & 1
				if w == 0 {
					cols[j] |= bit << q
				} else {
					hi[j] |= bit << q
				}
			}
		}
	}
}
