package pebble1store

import (
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// SampleKeys reads the point keys of every live table of the Pebble v1
// store in dir, without writing into it, and hands add each table's filter
// keys (pebblestore.SampleKeys). Pebble v1's default comparer has no Split,
// so its filters hold whole keys; another comparer's Split is found from
// the store's own filters.
func SampleKeys(dir string, add func(key []byte)) (*pebblestore.Sample, error) {
	comparer, merger := pebblestore.Names(dir)
	db, comparer, err := openReadOnly(dir, comparer, merger)
	if err != nil {
		return nil, fmt.Errorf("open %s read-only with Pebble v1: %w", dir, pebblestore.OneLine(err))
	}
	infos, err := db.SSTables()
	db.Close()
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", dir, pebblestore.OneLine(err))
	}
	var paths [pebblestore.NumLevels][]string
	for l, level := range infos {
		for _, t := range level {
			paths[l] = append(paths[l], pebblestore.TablePath(dir, uint64(t.BackingSSTNum)))
		}
	}
	cmp, def := Comparer(comparer)
	r := tables{cmp: cmp, merger: Merger(merger).Name}
	s := &pebblestore.Sample{Comparer: cmp.Name, SplitKnown: true}
	var split func([]byte) int
	if !def {
		split, s.SplitHow, s.SplitKnown = pebblestore.InferSplit(paths, r)
		s.Prefixes = split != nil
	}
	return s, pebblestore.SampleTables(paths, split, r, s, add)
}
