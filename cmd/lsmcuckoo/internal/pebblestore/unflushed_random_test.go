package pebblestore

import (
	"fmt"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"math/rand/v2"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/v2"
)

// Random workloads (batch sizes, value sizes, flushes, reopens, range
// deletions, and on Pebble v2 LogData beside writes), compared with
// Pebble's own replay, for each module. open opens the store in dir with
// the draw's memtable settings and returns a writer and the store's Close.
// (With LogData in its batches too, the first Pebble v1 draw stalled in
// makeRoomForWrite and never resumed; v1 draws carry none.)
func randomWorkloads(t *testing.T, stream uint64, v1 bool, open func(dir string, rng *rand.Rand) (writer, func() error)) {
	for seed := uint64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, stream))
			dir := t.TempDir()
			k := 0
			for range 1 + rng.IntN(3) {
				w, closeDB := open(dir, rng)
				for range 50 + rng.IntN(200) {
					b, empty := w.batch(), true
					n := rng.IntN(1 << rng.IntN(11))
					vl := rng.IntN(1 << rng.IntN(13))
					for range n {
						if err := b.set([]byte(fmt.Sprintf("key%09d", k)), val(vl)); err != nil {
							t.Fatal(err)
						}
						k, empty = k+1, false
					}
					if rng.IntN(10) == 0 {
						if err := b.deleteRange([]byte("key0"), []byte("key00001")); err != nil {
							t.Fatal(err)
						}
						empty = false
					}
					if rng.IntN(20) == 0 && n > 0 && !v1 {
						if err := b.logData([]byte("x")); err != nil {
							t.Fatal(err)
						}
					}
					if !empty {
						if err := b.commit(); err != nil {
							t.Fatal(err)
						}
					}
					if rng.IntN(60) == 0 {
						if err := w.flush(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := closeDB(); err != nil {
					t.Fatal(err)
				}
			}
			checkAgainstReplay(t, dir, v1)
		})
	}
}

func TestUnflushedRandomV2(t *testing.T) {
	race.SkipLong(t)
	randomWorkloads(t, 7, false, func(dir string, rng *rand.Rand) (writer, func() error) {
		db := openV2(t, dir, &pebble.Options{MemTableSize: uint64(256<<10) << rng.IntN(3), MemTableStopWritesThreshold: 2 + rng.IntN(6), L0StopWritesThreshold: 1000})
		return writerV2(db), db.Close
	})
}

func TestUnflushedRandomV1(t *testing.T) {
	race.SkipLong(t)
	randomWorkloads(t, 9, true, func(dir string, rng *rand.Rand) (writer, func() error) {
		db := openV1(t, dir, &pebble1.Options{FormatMajorVersion: pebble1.FormatMajorVersion(1 + rng.IntN(int(pebble1.FormatNewest))), MemTableSize: uint64(256<<10) << rng.IntN(3), MemTableStopWritesThreshold: 2 + rng.IntN(6), L0StopWritesThreshold: 1000})
		return writerV1(db), db.Close
	})
}

// Pebble's own live/obsolete view (Metrics().WAL) against inspect's, on
// an open store with several memtables queued.
func TestUnflushedMetricsWAL(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		dir := t.TempDir()
		db := openV2(t, dir, &pebble.Options{MemTableSize: 256 << 10, MemTableStopWritesThreshold: 6, L0StopWritesThreshold: 1000})
		setN(t, writerV2(db), 0, 2000+rng.IntN(30000), 1+rng.IntN(50), 100)
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
