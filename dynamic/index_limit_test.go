package dynamic

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// limitKeys are table id's keys: two hashes of its own, so that a lookup
// names the table only through its own entries (or as a table every
// lookup names).
func limitKeys(id uint64) []uint64 {
	return []uint64{keyhash.Mix(id<<1, 0x71b1e), keyhash.Mix(id<<1|1, 0x71b1e)}
}

// checkNamed looks up the keys of the tables in live and fails on a table
// its key does not name: all of them when every is 1, else every every-th
// table's first key and the newest tables' (where a table slot past the
// limit would be).
func checkNamed(t *testing.T, x *Index, live []uint64, every int, what string) {
	t.Helper()
	var buf []uint64
	for i, id := range live {
		keys := limitKeys(id)
		switch {
		case every == 1:
		case i%every == 0 || i >= len(live)-64:
			keys = keys[:1]
		default:
			continue
		}
		for _, h := range keys {
			if buf = x.LookupHash(h, buf[:0]); !holds(buf, id) {
				t.Fatalf("%s: a key of table %d names %d tables, not its own (false negative)", what, id, len(buf))
			}
		}
	}
}

// TestIndexTableLimit adds tables one at a time up to the limit and far
// past it, past every count where a 16-bit table slot would overflow
// (32,767, 32,768, 32,769, 65,536 and beyond): each table past the limit
// is refused with ErrTooManyTables and changes nothing, and every table
// held stays named by its keys, through Replace at the limit, removals of
// ranges, and refills with IDs past those counts.
func TestIndexTableLimit(t *testing.T) {
	race.SkipLong(t) // thousands of lookups that each name thousands of tables: no goroutines to check
	x := newIndexSeeded(1<<14, 12, 3)
	var live []uint64
	for id := uint64(1); id <= 65_600; id++ {
		err := x.AddTable(id, limitKeys(id))
		switch {
		case len(live) < IndexMaxTables && err != nil:
			t.Fatalf("table %d of %d refused: %v", id, len(live)+1, err)
		case len(live) >= IndexMaxTables && !errors.Is(err, ErrTooManyTables):
			t.Fatalf("table %d past the limit of %d: %v, want ErrTooManyTables", id, IndexMaxTables, err)
		}
		if err == nil {
			live = append(live, id)
		}
		if len(live) == IndexMaxTables-1 && err == nil {
			checkNamed(t, x, live, 16, "one table below the limit")
		}
	}
	if n := x.Tables(); n != IndexMaxTables || len(live) != IndexMaxTables {
		t.Fatalf("%d tables held, %d accepted; want %d", n, len(live), IndexMaxTables)
	}
	for _, id := range []uint64{IndexMaxTables + 1, 32_767, 32_768, 32_769, 65_536, 65_600} {
		if x.HasTable(id) {
			t.Fatalf("refused table %d is in the index", id)
		}
	}
	checkNamed(t, x, live, 1, "at the limit, after 61,504 refusals")

	// Refused calls change nothing.
	before := x.Stats()
	if err := x.AddTables([]uint64{70_001}, [][]uint64{limitKeys(70_001)}); !errors.Is(err, ErrTooManyTables) {
		t.Fatalf("AddTables at the limit: %v", err)
	}
	if err := x.Replace(nil, 70_002, limitKeys(70_002), nil); !errors.Is(err, ErrTooManyTables) {
		t.Fatalf("Replace with no inputs at the limit: %v", err)
	}
	if after := x.Stats(); after != before || x.HasTable(70_001) || x.HasTable(70_002) {
		t.Fatalf("refused calls changed the index: %+v, then %+v", before, after)
	}

	// At the limit a compaction still goes through: two tables into one,
	// which frees room for exactly one more.
	in := []uint64{live[100], live[4000]}
	merged := append(limitKeys(in[0]), limitKeys(in[1])...)
	if err := x.Replace(in, 80_000, merged, nil); err != nil {
		t.Fatalf("Replace of two inputs at the limit: %v", err)
	}
	live = append(slices.DeleteFunc(live, func(id uint64) bool { return id == in[0] || id == in[1] }), 80_000)
	for _, h := range merged {
		if !holds(x.LookupHash(h, nil), 80_000) {
			t.Fatalf("a key of the merged table is not named by it")
		}
	}
	if err := x.AddTable(80_001, limitKeys(80_001)); err != nil {
		t.Fatalf("AddTable with room for one: %v", err)
	}
	live = append(live, 80_001)
	if err := x.AddTable(80_002, limitKeys(80_002)); !errors.Is(err, ErrTooManyTables) {
		t.Fatalf("AddTable past the limit again: %v", err)
	}
	checkNamed(t, x, live, 16, "after a Replace at the limit")

	// Removals of ranges (the oldest quarter, then a run from the middle),
	// then every remaining table's keys.
	gone := slices.Clone(live[:len(live)/4])
	gone = append(gone, live[len(live)/2:len(live)/2+len(live)/8]...)
	if err := x.RemoveTables(gone...); err != nil {
		t.Fatal(err)
	}
	live = slices.DeleteFunc(live, func(id uint64) bool { return slices.Contains(gone, id) })
	checkNamed(t, x, live, 1, "after RemoveTables of two ranges")

	// Refill with IDs past 16 bits: a batch one larger than the room is
	// refused whole, a batch of exactly the room is taken.
	room := IndexMaxTables - len(live)
	var ids []uint64
	var sets [][]uint64
	for i := range room + 1 {
		id := uint64(1<<16 + 7*i)
		ids, sets = append(ids, id), append(sets, limitKeys(id))
	}
	if err := x.AddTables(ids, sets); !errors.Is(err, ErrTooManyTables) || x.Tables() != len(live) {
		t.Fatalf("AddTables of %d with room for %d: %v, %d tables held", room+1, room, err, x.Tables())
	}
	if err := x.AddTables(ids[:room], sets[:room]); err != nil {
		t.Fatalf("AddTables of exactly the room: %v", err)
	}
	live = append(live, ids[:room]...)
	// Replace across the refill: the newest refilled table and an old one.
	in = []uint64{live[0], live[len(live)-1]}
	merged = append(limitKeys(in[0]), limitKeys(in[1])...)
	if err := x.Replace(in, 1<<20, merged, nil); err != nil {
		t.Fatal(err)
	}
	if got := x.LookupHash(merged[3], nil); !holds(got, 1<<20) {
		t.Fatalf("the merged table of a refilled one is not named")
	}
	live = append(live[1:len(live)-1], 1<<20)
	checkNamed(t, x, live[:len(live)-1], 1, "after the refill and a Replace")
	checkCanonical(t, x)
}

// TestIndexTableLimitConcurrent: at a limit lowered to a few dozen
// tables, lookups run while the writer adds past the limit (refused),
// compacts at it, removes and refills; a table added before the lookups
// began and never removed is named by every one of them, and after each
// writer call every table held is named by its keys. Under the race
// detector this checks that a refused call touches nothing a lookup
// reads.
func TestIndexTableLimitConcurrent(t *testing.T) {
	const limit = 40
	x := newIndexSeeded(2000, 10, 11)
	x.tableLimit = limit
	var stable []uint64 // never removed: every lookup must name them
	for id := uint64(1); id <= 8; id++ {
		if err := x.AddTable(id, limitKeys(id)); err != nil {
			t.Fatal(err)
		}
		stable = append(stable, id)
	}
	var stop atomic.Bool
	var lookups atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []uint64
			for i := r; !stop.Load(); i++ {
				id := stable[i%len(stable)]
				if buf = x.LookupHash(limitKeys(id)[i&1], buf[:0]); !holds(buf, id) {
					errc <- fmt.Errorf("a lookup of table %d's key named %v", id, buf)
					return
				}
				lookups.Add(1)
			}
		}()
	}
	live := slices.Clone(stable)
	keysOf := map[uint64][]uint64{}
	for _, id := range stable {
		keysOf[id] = limitKeys(id)
	}
	check := func(what string) {
		t.Helper()
		for _, id := range live {
			for _, h := range keysOf[id] {
				if got := x.LookupHash(h, nil); !holds(got, id) {
					t.Fatalf("%s: a key of table %d names %v (false negative)", what, id, got)
				}
			}
		}
	}
	for lookups.Load() < 100 {
		runtime.Gosched() // the lookups run beside every writer call below
	}
	next := uint64(100)
	for round := 0; round < 100; round++ {
		// Up to the limit and one past it.
		for {
			err := x.AddTable(next, limitKeys(next))
			if errors.Is(err, ErrTooManyTables) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			live, keysOf[next] = append(live, next), limitKeys(next)
			next++
		}
		if len(live) != limit || x.HasTable(next) {
			t.Fatalf("round %d: refused at %d tables, limit %d", round, len(live), limit)
		}
		if err := x.Replace(nil, next, limitKeys(next), nil); !errors.Is(err, ErrTooManyTables) {
			t.Fatalf("round %d: Replace with no inputs at the limit: %v", round, err)
		}
		check(fmt.Sprintf("round %d, at the limit", round))
		// Compact three tables that are not stable into one, at the limit.
		in := slices.Clone(live[len(stable) : len(stable)+3])
		var merged []uint64
		for _, id := range in {
			merged = append(merged, keysOf[id]...)
			delete(keysOf, id)
		}
		if err := x.Replace(in, next, merged, nil); err != nil {
			t.Fatalf("round %d: Replace at the limit: %v", round, err)
		}
		live = append(slices.DeleteFunc(live, func(id uint64) bool { return slices.Contains(in, id) }), next)
		keysOf[next] = merged
		next++
		check(fmt.Sprintf("round %d, after a Replace", round))
		// Remove a run of tables that are not stable.
		gone := slices.Clone(live[len(stable)+2 : len(stable)+12])
		if err := x.RemoveTables(gone...); err != nil {
			t.Fatal(err)
		}
		live = slices.DeleteFunc(live, func(id uint64) bool { return slices.Contains(gone, id) })
		check(fmt.Sprintf("round %d, after RemoveTables", round))
	}
	during := lookups.Load()
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if during < 200 {
		t.Fatalf("only %d lookups ran beside the writer: not exercised", during)
	}
	checkCanonical(t, x)
}
