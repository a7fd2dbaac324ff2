package dbbench

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/turn"
)

// TestTurnOrderRotates checks that the interleaved measurement gives no
// policy a fixed place in the round: every round is a permutation of the
// stores, and over the measurement's Rounds each store probes first, and
// in every other position, as often as any other (within one).
func TestTurnOrderRotates(t *testing.T) {
	for _, n := range []int{1, 2, 6, 7, Rounds} {
		count := make([][]int, n) // count[store][position]
		for i := range count {
			count[i] = make([]int, n)
		}
		for r := range Rounds {
			order := turn.Order(r, n)
			seen := make([]bool, n)
			for pos, i := range order {
				if i < 0 || i >= n || seen[i] {
					t.Fatalf("n=%d round %d: %v is not a permutation", n, r, order)
				}
				seen[i] = true
				count[i][pos]++
			}
		}
		for i := range count {
			for pos, c := range count[i] {
				if c < Rounds/n || c > Rounds/n+1 {
					t.Errorf("n=%d: store %d held position %d in %d of %d rounds, want %d or %d",
						n, i, pos, c, Rounds, Rounds/n, Rounds/n+1)
				}
			}
		}
	}
}
