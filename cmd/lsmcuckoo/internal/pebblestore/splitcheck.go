package pebblestore

import (
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// splitCheckKeys is how many of a table's keys ForeignSplit asks its filter
// about: a filter of prefixes accepts almost none of them whole.
const splitCheckKeys = 256

// ForeignSplit checks that the filters of a store under Pebble's default
// comparer name hold whole keys. Pebble matches comparers by name only, so
// an application may open the store with a comparer of that name and a
// Split of its own; its filters then hold prefixes, its reads probe them
// with prefixes, and a rewrite under a whole-key Split would hide every key
// from them. A filter has no false negatives, so one whole key of a table
// its filter rejects proves the filter was built from something else.
// The first table of each filter name on each level is read (the owner's
// tables and those of an earlier migration may differ). It returns the
// first such table's file name and how its filter's keys split, "" if every
// filter read holds whole keys.
func ForeignSplit(paths [NumLevels][]string, r TableReader) (table, how string) {
	type levelName struct {
		level int
		name  string
	}
	seen := map[levelName]bool{}
	for l := range paths {
		for _, path := range paths[l] {
			var t Table
			if err := r.ReadTable(path, &t); err != nil || t.Filter == nil {
				continue
			}
			p, ok := policy(t.FilterName)
			seenKey := levelName{l, t.FilterName}
			if !ok || seen[seenKey] {
				continue
			}
			var keys [][]byte
			if _, err := r.ReadKeys(path, nil, func(k []byte) {
				if len(keys) < splitCheckKeys {
					keys = append(keys, append([]byte(nil), k...))
				}
			}); err != nil || len(keys) == 0 {
				continue
			}
			seen[seenKey] = true
			accepts := func(split func([]byte) int) bool {
				for _, k := range keys {
					if !p.MayContain(pebble.TableFilter, t.Filter, k[:split(k)]) {
						return false
					}
				}
				return true
			}
			if accepts(func(k []byte) int { return len(k) }) {
				continue
			}
			how = "a Split this command does not know"
			for _, c := range splitCandidates(keys) {
				if accepts(c.split) {
					how = c.how
					break
				}
			}
			return filepath.Base(path), how
		}
	}
	return "", ""
}
