//go:build race

package dynamic

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = true
