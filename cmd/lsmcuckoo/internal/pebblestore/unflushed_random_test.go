package pebblestore

import (
	"fmt"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"math/rand/v2"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/v2"
)

// Random workloads (batch sizes, value sizes, flushes, reopens, empty and
// LogData-carrying batches, range deletions), compared with Pebble's replay.
func TestUnflushedRandomV2(t *testing.T) {
	race.SkipLong(t)
	for seed := uint64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			dir := t.TempDir()
			k := 0
			for open := 0; open < 1+rng.IntN(3); open++ {
				db := openV2(t, dir, &pebble.Options{MemTableSize: uint64(256<<10) << rng.IntN(3), MemTableStopWritesThreshold: 2 + rng.IntN(6), L0StopWritesThreshold: 1000})
				for step := 0; step < 50+rng.IntN(200); step++ {
					b := db.NewBatch()
					n := rng.IntN(1 << rng.IntN(11))
					vl := rng.IntN(1 << rng.IntN(13))
					for i := 0; i < n; i++ {
						b.Set([]byte(fmt.Sprintf("key%09d", k)), val(vl), nil)
						k++
					}
					if rng.IntN(10) == 0 {
						b.DeleteRange([]byte("key0"), []byte("key00001"), nil)
					}
					if rng.IntN(20) == 0 && n > 0 {
						b.LogData([]byte("x"), nil)
					}
					if !b.Empty() {
						if err := b.Commit(pebble.NoSync); err != nil {
							t.Fatal(err)
						}
					}
					if rng.IntN(60) == 0 {
						db.Flush()
					}
				}
				db.Close()
			}
			checkAgainstReplay(t, dir, false)
		})
	}
}

func TestUnflushedRandomV1(t *testing.T) {
	race.SkipLong(t)
	for seed := uint64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			dir := t.TempDir()
			k := 0
			for open := 0; open < 1+rng.IntN(3); open++ {
				db := openV1(t, dir, &pebble1.Options{FormatMajorVersion: pebble1.FormatMajorVersion(1 + rng.IntN(int(pebble1.FormatNewest))), MemTableSize: uint64(256<<10) << rng.IntN(3), MemTableStopWritesThreshold: 2 + rng.IntN(6), L0StopWritesThreshold: 1000})
				for step := 0; step < 50+rng.IntN(200); step++ {
					b := db.NewBatch()
					n := rng.IntN(1 << rng.IntN(11))
					vl := rng.IntN(1 << rng.IntN(13))
					for i := 0; i < n; i++ {
						b.Set([]byte(fmt.Sprintf("key%09d", k)), val(vl), nil)
						k++
					}
					if rng.IntN(10) == 0 {
						b.DeleteRange([]byte("key0"), []byte("key00001"), nil)
					}
					if !b.Empty() {
						if err := b.Commit(pebble1.NoSync); err != nil {
							t.Fatal(err)
						}
					}
					if rng.IntN(60) == 0 {
						db.Flush()
					}
				}
				db.Close()
			}
			checkAgainstReplay(t, dir, true)
		})
	}
}

// Pebble's own live/obsolete view (Metrics().WAL) against inspect's, on
// an open store with several memtables queued.
func TestUnflushedMetricsWAL(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		dir := t.TempDir()
		db := openV2(t, dir, &pebble.Options{MemTableSize: 256 << 10, MemTableStopWritesThreshold: 6, L0StopWritesThreshold: 1000})
		setN(t, db, 0, 2000+rng.IntN(30000), 1+rng.IntN(50), 100)
		m := db.Metrics()
		u, err := ReadUnflushed(dir)
		var logs int
		if u != nil {
			logs = len(u.Logs)
		}
		t.Logf("seed %d: Pebble WAL files %d (obsolete %d), size %d; inspect %d logs %+v %v; disk %s", seed, m.WAL.Files, m.WAL.ObsoleteFiles, m.WAL.Size, logs, u, err, logsIn(dir))
		if int64(logs) > m.WAL.Files {
			t.Errorf("inspect counts %d live logs, Pebble has %d", logs, m.WAL.Files)
		}
		db.Close()
	}
}
