package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
)

// ErrVanished marks a table the manifest listed that was gone when read:
// the store's owner compacted it away meanwhile. Sampling again reads the
// new version.
var ErrVanished = errors.New("a table vanished while it was read (the store's owner compacted it)")

// Sample describes the filter keys of a store's tables.
type Sample struct {
	// TableKeys holds, per level, the filter keys of each table read.
	TableKeys [NumLevels][]int
	Comparer  string
	// Prefixes says the filters hold key prefixes, and the keys handed
	// out are those; SplitHow says how the prefixes were found.
	Prefixes bool
	SplitHow string
	// SplitKnown is false when the filters hold neither the whole keys
	// nor prefixes this package could find: the keys are handed whole.
	SplitKnown bool
}

// SampleKeys reads the point keys of every live table of the store in dir,
// without writing into it, and hands add each table's filter keys: what the
// table's filter holds, the keys' Split prefixes under a comparer with a
// Split, else the whole keys. add must copy a key it keeps. Unlike Open it
// reads data blocks: the keys are what a filter is built from.
//
// The Split of Pebble's default comparer (none) and CockroachDB's are
// known. Another comparer's is the application's code; it is found from
// the filters themselves: a filter built from prefixes rejects most whole
// keys and accepts every true prefix.
func SampleKeys(dir string, add func(key []byte)) (*Sample, error) {
	paths, r, cmp, def, err := liveTables(dir)
	if err != nil {
		return nil, err
	}
	s := &Sample{Comparer: cmp.Name, SplitKnown: true}
	var split func([]byte) int
	switch {
	case def:
	case cmp == &cockroachkvs.Comparer:
		split, s.Prefixes, s.SplitHow = cockroachkvs.Split, true, "CockroachDB's Split"
	default:
		split, s.SplitHow, s.SplitKnown = InferSplit(paths, r)
		s.Prefixes = split != nil
	}
	return s, SampleTables(paths, split, r, s, add)
}

// CheckFilterKeys reports a table of the store in dir whose filter does not
// hold whole keys (ForeignSplit), reading it without writing into the store.
func CheckFilterKeys(dir string) (table, how string, err error) {
	paths, r, _, _, err := liveTables(dir)
	if err != nil {
		return "", "", err
	}
	table, how = ForeignSplit(paths, r)
	return table, how, nil
}

// liveTables lists the paths of the live tables of the store in dir, level
// by level, with a reader for them, the store's comparer and whether it is
// Pebble's default.
func liveTables(dir string) (paths [NumLevels][]string, r tables, cmp *pebble.Comparer, def bool, err error) {
	comparer, merger := Names(dir)
	db, err := openReadOnly(dir, comparer, merger)
	if err != nil {
		return paths, r, nil, false, fmt.Errorf("open %s read-only: %w", dir, oneLine(err))
	}
	defer db.Close()
	v := db.DebugCurrentVersion()
	cmp, def = Comparer(comparer)
	if comparer == cockroachkvs.Comparer.Name {
		cmp = &cockroachkvs.Comparer
	}
	schema := colblk.DefaultKeySchema(cmp, 16)
	schemas := sstable.MakeKeySchemas(&schema)
	if cmp == &cockroachkvs.Comparer {
		schemas = sstable.MakeKeySchemas(&schema, &cockroachkvs.KeySchema)
	}
	r = tables{sstable.ReaderOptions{Comparer: cmp, Merger: Merger(merger), KeySchemas: schemas}}
	for l := range v.Levels {
		it := v.Levels[l].Iter()
		for f := it.First(); f != nil; f = it.Next() {
			paths[l] = append(paths[l], TablePath(dir, uint64(f.TableBacking.DiskFileNum)))
		}
	}
	return paths, r, cmp, def, nil
}

// SampleTables hands add the filter keys of every table in paths, each cut
// to split(key) if split is set, and records each table's count in s.
func SampleTables(paths [NumLevels][]string, split func([]byte) int, r TableReader, s *Sample, add func([]byte)) error {
	for l := range paths {
		for _, path := range paths[l] {
			n, err := r.ReadKeys(path, split, add)
			if errors.Is(err, ErrVanished) {
				return err
			}
			if err != nil {
				return fmt.Errorf("L%d %s: %w", l, filepath.Base(path), oneLine(err))
			}
			s.TableKeys[l] = append(s.TableKeys[l], n)
		}
		sort.Ints(s.TableKeys[l])
	}
	return nil
}

// InferSplit finds what the filters of a store under an unknown comparer
// hold, from the first table whose filter this package reads: nil if they
// hold whole keys, else the split whose prefixes the filter accepts, with
// how it splits. known is false if no table's filter can be read or none of
// the splits tried is accepted.
func InferSplit(paths [NumLevels][]string, r TableReader) (split func([]byte) int, how string, known bool) {
	for l := range paths {
		for _, path := range paths[l] {
			var t Table
			if err := r.ReadTable(path, &t); err != nil || t.Filter == nil {
				continue
			}
			p, ok := policy(t.FilterName)
			if !ok {
				continue
			}
			var keys [][]byte
			_, err := r.ReadKeys(path, nil, func(k []byte) {
				if len(keys) < 256 {
					keys = append(keys, append([]byte(nil), k...))
				}
			})
			if err != nil || len(keys) == 0 {
				continue
			}
			accepts := func(split func([]byte) int) bool {
				yes := 0
				for _, k := range keys {
					if p.MayContain(pebble.TableFilter, t.Filter, k[:split(k)]) {
						yes++
					}
				}
				return yes == len(keys)
			}
			if accepts(func(k []byte) int { return len(k) }) {
				return nil, "", true
			}
			for _, c := range splitCandidates(keys) {
				if accepts(c.split) {
					return c.split, c.how, true
				}
			}
			return nil, "", false
		}
	}
	return nil, "", false
}

type splitCandidate struct {
	split func([]byte) int
	how   string
}

// splitCandidates are the splits tried on a comparer whose Split is not
// known: before the last occurrence of each separator byte the keys hold
// (a version after '@', '/', ':', '#', a NUL...), then a fixed-length suffix
// of 1 to 16 bytes.
func splitCandidates(keys [][]byte) []splitCandidate {
	var seen [256]bool
	for _, k := range keys {
		for _, c := range k {
			seen[c] = true
		}
	}
	var out []splitCandidate
	for c := 0; c < 256; c++ {
		if !seen[c] || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		sep := byte(c)
		out = append(out, splitCandidate{func(k []byte) int {
			if i := bytes.LastIndexByte(k, sep); i >= 0 {
				return i
			}
			return len(k)
		}, fmt.Sprintf("the key before its last %q", sep)})
	}
	for n := 1; n <= 16; n++ {
		out = append(out, splitCandidate{func(k []byte) int { return max(0, len(k)-n) }, fmt.Sprintf("the key without its last %d bytes", n)})
	}
	return out
}

// ReadKeys hands add the filter keys of one table (TableReader.ReadKeys).
func (r tables) ReadKeys(path string, split func([]byte) int, add func([]byte)) (int, error) {
	f, err := openTable(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%w: %s", ErrVanished, filepath.Base(path))
		}
		return 0, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return 0, err
	}
	rd, err := sstable.NewReader(context.Background(), readable, r.ro)
	if err != nil {
		readable.Close()
		return 0, err
	}
	defer rd.Close()
	iter, err := rd.NewIter(sstable.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
	if err != nil {
		return 0, err
	}
	defer iter.Close()
	keys := DistinctKeys(split, add)
	for kv := iter.First(); kv != nil; kv = iter.Next() {
		keys.Add(kv.K.UserKey)
	}
	return keys.N, iter.Error()
}

// DistinctKeys counts and hands on the filter keys of one table, read in
// order: consecutive equal keys (the versions of one key, or the keys of
// one prefix under a Split) are one filter key, as Pebble's filter writer
// adds them.
func DistinctKeys(split func([]byte) int, add func([]byte)) *KeyCounter {
	return &KeyCounter{split: split, add: add}
}

// KeyCounter is DistinctKeys' state.
type KeyCounter struct {
	N     int
	split func([]byte) int
	add   func([]byte)
	prev  []byte
	any   bool
}

// Add takes the table's next user key.
func (c *KeyCounter) Add(k []byte) {
	if c.split != nil {
		k = k[:c.split(k)]
	}
	if c.any && string(c.prev) == string(k) {
		return
	}
	c.prev, c.any = append(c.prev[:0], k...), true
	c.N++
	c.add(k)
}
