package kvdemo

import (
	"errors"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
)

// flushLoop writes immutable memtables out as tables, retrying with
// backoff while that fails (a full disk, say): the memtable's records stay
// in its log meanwhile, so nothing acknowledged is at risk, and writers
// that fill the next memtable get the error instead of waiting forever.
func (db *DB) flushLoop() {
	defer db.bg.Done()
	for {
		select {
		case <-db.stop:
			return
		case <-db.flushCh:
		}
		backoff := 50 * time.Millisecond
		for {
			err := db.flushImm()
			if err == nil {
				break
			}
			db.opts.Logger.Printf("flush failed, retrying in %v: %v", backoff, err)
			db.wmu.Lock()
			db.flushErr = err
			db.wcond.Broadcast()
			db.wmu.Unlock()
			select {
			case <-db.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// flushImm turns the immutable memtable into a table (see applyEdit for
// the order of the steps), then retires the memtable's logs.
func (db *DB) flushImm() error {
	db.mu.RLock()
	imm, mem := db.cur.imm, db.cur.mem
	db.mu.RUnlock()
	if imm == nil {
		return nil
	}
	// Writes that took a place in imm's log before the switch may still
	// be inserting; the table must hold every record the log holds.
	imm.writers.Wait()
	id := db.allocFile()
	it := imm.sl.NewIterator()
	st, ts, err := db.buildTable(id, sklSource{it}, false, nil)
	it.Close()
	if err != nil {
		return err
	}
	// No memtable switch can happen while imm is pending, so mem's log is
	// the oldest one still needed.
	if err := db.applyEdit(tableEdit{add: st, flushed: imm, seq: ts.maxSeq, log: mem.log}); err != nil {
		if !errorsIsRenamed(err) {
			return err
		}
		// Applied in memory, but the store turned read-only: the logs
		// stay, they may be all that holds these records after a crash.
		db.flushDone()
		return err
	}
	db.flushDone()
	db.stats.flushes.Add(1)
	imm.wal().close()
	db.removeLogsBelow(mem.log)
	signal(db.compactCh)
	return nil
}

func (db *DB) flushDone() {
	db.wmu.Lock()
	db.flushing, db.flushErr = false, nil
	db.wcond.Broadcast()
	db.wmu.Unlock()
}

// flushAtOpen writes a memtable rebuilt by replay as a table and records
// it, and the sequence numbers it covers, in the manifest. Its logs stay
// until a later flush retires them: the manifest's Seq makes replay skip
// what is in tables.
func (db *DB) flushAtOpen(m *memtable) error {
	id := db.allocFile()
	it := m.sl.NewIterator()
	st, ts, err := db.buildTable(id, sklSource{it}, false, nil)
	it.Close()
	if err != nil {
		return err
	}
	if err := db.applyEdit(tableEdit{add: st, seq: ts.maxSeq}); err != nil {
		return err
	}
	db.stats.flushes.Add(1)
	return nil
}

func (db *DB) compactLoop() {
	defer db.bg.Done()
	for {
		select {
		case <-db.stop:
			return
		case <-db.compactCh:
		}
		for {
			did, err := db.compactOnce()
			if errors.Is(err, errAborted) {
				return
			}
			if err != nil {
				db.opts.Logger.Printf("compaction failed (will retry after the next flush): %v", err)
				break
			}
			if !did {
				break
			}
		}
	}
}

var errAborted = errors.New("kvdemo: compaction abandoned: store closing")

// pickRun chooses which adjacent tables to merge: the run of
// compactionWidth tables (newest first) with the fewest bytes, preferring
// newer runs on ties. Merging small neighbours first makes tables grow
// geometrically (size-tiered), so a key is rewritten O(log n) times.
// Only adjacent tables may merge: the merged table takes their place in
// the age order, so every table older than it is older than all of them.
func pickRun(tables []*sstable, maxTables int) (start, width int, ok bool) {
	if maxTables < 0 || len(tables) <= maxTables || len(tables) < 2 {
		return 0, 0, false
	}
	width = min(compactionWidth, len(tables))
	best := int64(-1)
runs:
	for i := 0; i+width <= len(tables); i++ {
		var sum int64
		for _, st := range tables[i : i+width] {
			if st.damaged != nil {
				continue runs // unreadable: it stays as it is, for check and repair
			}
			sum += st.size
		}
		if best < 0 || sum < best {
			best, start = sum, i
		}
	}
	return start, width, best >= 0
}

// compactOnce merges one run of tables if there are too many. Readers keep
// using the tables they started with (their view holds references); the
// merged table replaces the run in one manifest write, and the run's files
// are removed when the last view holding them is released.
func (db *DB) compactOnce() (bool, error) {
	v, err := db.acquire()
	if err != nil {
		return false, errAborted
	}
	defer v.release()
	start, width, ok := pickRun(v.tables, db.opts.MaxTables)
	if !ok {
		return false, nil
	}
	run := v.tables[start : start+width]
	// Tombstones can go only if nothing older than the run exists: the
	// run ends at the oldest table.
	dropTombstones := start+width == len(v.tables)
	iters := make([]y.Iterator, len(run))
	for i, st := range run {
		iters[i] = st.t.NewIterator(table.NOCACHE)
	}
	merged := table.NewMergeIterator(iters, false)
	id := db.allocFile()
	st, _, err := db.buildTable(id, merged, dropTombstones, db.stop)
	merged.Close()
	if err != nil {
		return false, err
	}
	if err := db.applyEdit(tableEdit{add: st, replace: slices.Clone(run)}); err != nil {
		return false, err
	}
	db.stats.compactions.Add(1)
	return true, nil
}

// rebuildFilters rebuilds, in the background, the filters of tables opened
// without a usable one, and attaches each as it is done. Until then Gets
// probe those tables: slower, never wrong. A table a compaction retires
// first is skipped (its replacement has its own filter).
func (db *DB) rebuildFilters(tables []*sstable) {
	defer db.bg.Done()
	for _, st := range tables {
		select {
		case <-db.stop:
			return
		default:
		}
		v, err := db.acquire()
		if err != nil {
			return
		}
		if slices.Contains(v.tables, st) {
			if err := db.filter.rebuild(st); err != nil {
				db.opts.Logger.Printf("table %06d: saving rebuilt filter: %v (using it from memory)", st.id, err)
			}
			db.stats.rebuiltFilters.Add(1)
		}
		v.release()
	}
}
