package linev4

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// solvePlain is the reference back-substitution: from the highest pivot
// down, bit j of a pivot's unknown is rhs bit j XOR the parity of the row
// AND column j, the unknowns of no pivot zero.
func (b *basis) solvePlain(cols []uint64) {
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

// TestSolveMatchesPlain: both ways of solving give the reference's
// columns, and those satisfy every equation added, on systems of 1 to 64
// rows, 1 to 32 columns, full rank and rank-deficient (coefficients drawn
// from few bits or repeated, so that equations follow from or contradict
// others), with rows dropped again.
func TestSolveMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 43))
	for it := range 20000 {
		m := 1 + rng.IntN(64)
		r := 1 + rng.IntN(32)
		mm := mask(uint32(m))
		if rng.IntN(4) == 0 {
			mm &= rng.Uint64() // a few unknowns no key touches
		}
		var b basis
		type eq struct{ c, f uint64 }
		var kept []eq
		pool := make([]uint64, 1+rng.IntN(2*m))
		for i := range pool {
			pool[i] = rng.Uint64() & mm
		}
		for range rng.IntN(m + 8) {
			c := pool[rng.IntN(len(pool))]
			f := rng.Uint64() & (1<<r - 1)
			p, ok := b.add(c, f)
			if ok && rng.IntN(8) == 0 {
				b.drop(p)
				if p < 0 {
					kept = append(kept, eq{c, f}) // followed from the others: still holds
				}
				continue
			}
			if ok {
				kept = append(kept, eq{c, f})
			}
		}
		want := make([]uint64, r)
		b.solvePlain(want)
		for name, solve := range map[string]func([]uint64){"solve": b.solve, "columns": b.solveColumns, "unknowns": b.solveUnknowns} {
			got := make([]uint64, r)
			for j := range got {
				got[j] = rng.Uint64() // solve overwrites them
			}
			solve(got)
			for j := range r {
				if got[j] != want[j] {
					t.Fatalf("it %d, %d rows, %d columns: %s column %d = %#x, the reference %#x", it, m, r, name, j, got[j], want[j])
				}
			}
		}
		for _, e := range kept {
			for j := range r {
				if uint64(bits.OnesCount64(e.c&want[j]))&1 != e.f>>j&1 {
					t.Fatalf("it %d: equation %#x = %#x fails in column %d", it, e.c, e.f, j)
				}
			}
		}
	}
}
