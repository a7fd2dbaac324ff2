// Package pebble1store reads what a Pebble v1.1 store's table filters are,
// level by level, without writing into the store, as package pebblestore
// does for Pebble v2: the live tables come from the manifest through a
// read-only pebble.Open of Pebble v1 over a file system that refuses every
// write, and each table is read only as far as its footer, metaindex,
// index, properties and filter block. The snapshot is pebblestore's, so
// the report, the probes and the recommendations are shared.
package pebble1store

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// Comparer returns Pebble v1's default comparer under the given name, and
// whether the name is the default's (pebblestore.Comparer).
func Comparer(name string) (*pebble.Comparer, bool) {
	return pebblestore.Renamed(pebble.DefaultComparer, pebble.DefaultComparer.Name, name, func(c *pebble.Comparer, n string) { c.Name = n })
}

// Merger returns Pebble v1's default merger under the given name.
func Merger(name string) *pebble.Merger {
	m, _ := pebblestore.Renamed(pebble.DefaultMerger, pebble.DefaultMerger.Name, name, func(m *pebble.Merger, n string) { m.Name = n })
	return m
}

// ReadFilters registers in o a policy under every filter name this package
// can read: Pebble's bloom and lsmcuckoo's names at every half bit.
func ReadFilters(o *pebble.Options) {
	pebblev1.RegisterPolicies(o, pebblestore.HalfBitBudgets()...)
	o.Filters[pebblestore.BloomName] = bloom.FilterPolicy(10)
}

var (
	comparerMismatch = regexp.MustCompile(`comparer name from file "([^"]*)"`)
	// Pebble v1.1's consistency check names each table it finds missing
	// or of another size than the manifest records, a line each.
	inconsistent = regexp.MustCompile(`(?m)^L\d+: (\d+): (.*)$`)
	sizeMismatch = regexp.MustCompile(`\(disk\) != (\d+) \(MANIFEST\)`)
)

// openReadOnly opens the store read-only over a readOnlyFS, and returns
// the comparer name it opened under: the manifest's name prevails over the
// OPTIONS file's. A table the manifest lists that is missing or truncated
// gets a stand-in of the recorded size (the failed open names the size
// once the table is listed), so that the open succeeds and the table
// reader reports the damage.
func openReadOnly(dir, comparer, merger string) (*pebble.DB, string, error) {
	fsys := newReadOnlyFS()
	for attempt := 0; ; attempt++ {
		cmp, _ := Comparer(comparer)
		o := &pebble.Options{
			FS:               fsys,
			ReadOnly:         true,
			Comparer:         cmp,
			Merger:           Merger(merger),
			ErrorIfNotExists: true,
			Logger:           pebblestore.QuietLogger{},
		}
		ReadFilters(o)
		db, err := pebble.Open(dir, o)
		if err == nil {
			return db, comparer, nil
		}
		if attempt >= 4 {
			return nil, "", err
		}
		msg := err.Error()
		if m := comparerMismatch.FindStringSubmatch(msg); m != nil && m[1] != comparer {
			comparer = m[1]
			continue
		}
		lines := inconsistent.FindAllStringSubmatch(msg, -1)
		if len(lines) == 0 {
			return nil, "", err
		}
		for _, l := range lines {
			n, _ := strconv.ParseUint(l[1], 10, 64)
			size := int64(0)
			if m := sizeMismatch.FindStringSubmatch(l[2]); m != nil {
				size, _ = strconv.ParseInt(m[1], 10, 64)
			}
			fsys.stand[pebblestore.TablePath(dir, n)] = size
		}
	}
}

// Open takes a snapshot of the Pebble v1 store in dir without writing into
// it, as pebblestore.Open does for Pebble v2.
func Open(dir string) (*pebblestore.Snapshot, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if !pebblestore.IsStore(dir) {
		return nil, fmt.Errorf("%s: %w (no MANIFEST)", dir, pebblestore.ErrNotStore)
	}
	comparer, merger := pebblestore.Names(dir)
	return pebblestore.Retry(func() (*pebblestore.Snapshot, error) { return take(dir, comparer, merger) })
}

func take(dir, comparer, merger string) (*pebblestore.Snapshot, error) {
	db, comparer, err := openReadOnly(dir, comparer, merger)
	if err != nil {
		wrapped := fmt.Errorf("open %s read-only with Pebble v1: %w", dir, pebblestore.OneLine(err))
		if errors.Is(err, os.ErrNotExist) {
			// A manifest the owner removed while rotating it.
			return nil, pebblestore.Vanished(wrapped)
		}
		return nil, wrapped
	}
	defer db.Close()
	infos, err := db.SSTables()
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", dir, pebblestore.OneLine(err))
	}
	cmp, _ := Comparer(comparer)
	s := &pebblestore.Snapshot{
		Format:        "pebble",
		Module:        pebblestore.ModuleV1,
		GetSkipsLast:  true,
		Dir:           dir,
		Comparer:      cmp.Name,
		Merger:        Merger(merger).Name,
		FormatVersion: uint64(db.FormatMajorVersion()),
	}
	var files []pebblestore.TableFile
	for l, level := range infos {
		for _, t := range level {
			files = append(files, pebblestore.TableFile{Level: l, FileNum: uint64(t.BackingSSTNum), Size: t.Size, Virtual: t.Virtual})
		}
	}
	if len(infos) > 0 {
		// Pebble v1's Metrics counts L0's sublevels only after a version
		// change in this process, which a read-only open never makes.
		s.Sublevels = Sublevels(infos[0], cmp.Compare)
	}
	s.Levels = pebblestore.ReadTables(dir, files, tables{cmp: cmp, merger: Merger(merger).Name})
	return s, nil
}

// Sublevels counts the L0 sublevels of the tables l0, as Pebble's
// L0Sublevels assigns them: taken in sequence number order, each table goes
// one sublevel above the highest older table whose key range it overlaps
// (a range deletion's exclusive end overlaps nothing at that key).
func Sublevels(l0 []pebble.SSTableInfo, cmp func(a, b []byte) int) int {
	t := slices.Clone(l0)
	slices.SortStableFunc(t, func(a, b pebble.SSTableInfo) int {
		if a.LargestSeqNum != b.LargestSeqNum {
			return cmpUint(a.LargestSeqNum, b.LargestSeqNum)
		}
		if a.SmallestSeqNum != b.SmallestSeqNum {
			return cmpUint(a.SmallestSeqNum, b.SmallestSeqNum)
		}
		return cmpUint(uint64(a.FileNum), uint64(b.FileNum))
	})
	before := func(x, y pebble.SSTableInfo) bool {
		c := cmp(x.Largest.UserKey, y.Smallest.UserKey)
		return c < 0 || c == 0 && x.Largest.IsExclusiveSentinel()
	}
	sub := make([]int, len(t))
	n := 0
	for i := range t {
		for j := 0; j < i; j++ {
			if !before(t[i], t[j]) && !before(t[j], t[i]) && sub[j]+1 > sub[i] {
				sub[i] = sub[j] + 1
			}
		}
		n = max(n, sub[i]+1)
	}
	return n
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
