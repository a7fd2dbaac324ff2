package seed

import "testing"

// A seed of 0 means "unset" to every caller: New must never return it, and
// successive seeds must differ (a constant seed would hand an adversary the
// hash).
func TestNewIsNonZeroAndVaries(t *testing.T) {
	seen := make(map[uint32]bool)
	for i := 0; i < 1000; i++ {
		s := New()
		if s == 0 {
			t.Fatal("New returned 0")
		}
		seen[s] = true
	}
	if len(seen) < 990 {
		t.Fatalf("1000 seeds gave only %d distinct values", len(seen))
	}
}
