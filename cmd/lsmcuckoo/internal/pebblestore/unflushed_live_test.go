package pebblestore

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// An owner in this process writes batches of exactly 10 new keys, with a
// small memtable (automatic flushes, recycled logs) and a manual flush
// now and then; ReadUnflushed runs against it meanwhile. Every answer must
// be whole batches, no error, and tables + unflushed never more than the
// keys committed by the time the read ended (nothing counted twice).
func TestUnflushedLiveOwner(t *testing.T) {
	dir := t.TempDir()
	db := openV2(t, dir, &pebble.Options{MemTableSize: 256 << 10, MemTableStopWritesThreshold: 4, L0StopWritesThreshold: 1000})
	var committed atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			b := db.NewBatch()
			for i := 0; i < 10; i++ {
				b.Set([]byte(fmt.Sprintf("key%010d", n*10+i)), val(100), nil)
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				panic(err)
			}
			committed.Add(10)
			if n%2000 == 1999 {
				db.Flush()
			}
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	reads, bad := 0, 0
	for time.Now().Before(deadline) {
		s, err := Open(dir)
		if err != nil {
			continue
		}
		var inTables uint64
		for l := range s.Levels {
			for _, tb := range s.Levels[l] {
				inTables += tb.NumEntries
			}
		}
		u, err := ReadUnflushed(dir)
		after := committed.Load()
		reads++
		if err != nil {
			t.Errorf("ReadUnflushed: %v", err)
			continue
		}
		var w int64
		if u != nil {
			w = u.Writes
		}
		// One batch may be in the log before its Commit returns and is counted.
		if w%10 != 0 || int64(inTables)+w > after+10 {
			bad++
			if bad < 10 {
				t.Errorf("tables %d + unflushed %d (%+v) > %d committed", inTables, w, u, after)
			}
		}
	}
	close(stop)
	<-done
	db.Close()
	t.Logf("%d reads, %d bad, %d keys committed", reads, bad, committed.Load())
}
