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
	paths, r, def, err := liveTables(dir)
	if err != nil {
		return nil, err
	}
	s := &pebblestore.Sample{Comparer: r.cmp.Name, SplitKnown: true}
	var split func([]byte) int
	if !def {
		split, s.SplitHow, s.SplitKnown = pebblestore.InferSplit(paths, r)
		s.Prefixes = split != nil
	}
	return s, pebblestore.SampleTables(paths, split, r, s, add)
}

// CheckFilterKeys reports a table of the Pebble v1 store in dir whose
// filter does not hold whole keys (pebblestore.ForeignSplit), reading it
// without writing into the store.
func CheckFilterKeys(dir string) (table, how string, err error) {
	paths, r, _, err := liveTables(dir)
	if err != nil {
		return "", "", err
	}
	table, how = pebblestore.ForeignSplit(paths, r)
	return table, how, nil
}

// liveTables lists the paths of the live tables of the Pebble v1 store in
// dir, level by level, with a reader for them, and whether its comparer is
// Pebble's default.
func liveTables(dir string) (paths [pebblestore.NumLevels][]string, r tables, def bool, err error) {
	comparer, merger := pebblestore.Names(dir)
	db, comparer, err := openReadOnly(dir, comparer, merger)
	if err != nil {
		return paths, r, false, fmt.Errorf("open %s read-only with Pebble v1: %w", dir, pebblestore.OneLine(err))
	}
	infos, err := db.SSTables()
	db.Close()
	if err != nil {
		return paths, r, false, fmt.Errorf("list the tables of %s: %w", dir, pebblestore.OneLine(err))
	}
	for l, level := range infos {
		for _, t := range level {
			paths[l] = append(paths[l], pebblestore.TablePath(dir, uint64(t.BackingSSTNum)))
		}
	}
	cmp, def := Comparer(comparer)
	return paths, tables{cmp: cmp, merger: Merger(merger).Name}, def, nil
}
