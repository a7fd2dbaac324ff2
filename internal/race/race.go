// Package race tells tests whether the race detector is built in. Some
// long tests run a single goroutine of this module's code (model histories,
// whole Pebble trees built to check a report): the detector has nothing to
// find in them and slows them tenfold or more, so they skip themselves
// under it, and `make test` runs their packages a second time without it.
package race

import "testing"

// SkipLong skips t when the race detector is built in, saying where the
// test runs instead.
func SkipLong(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("long, and nothing in it for the race detector: make test runs it in its run without -race")
	}
}
