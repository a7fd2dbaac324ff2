package dynamic

import "testing"

// skipUnderRace skips a long single-goroutine test under the race
// detector, which has nothing to find in it and slows it twentyfold or
// more (the model histories spend most of their time in the index's
// atomics). `make test` runs this package a second time without -race,
// where these tests run; the index's concurrent tests run under -race.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("single goroutine, long under -race: make test runs it in its run without -race")
	}
}
