package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
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
	idle := time.NewTimer(idleRebuildAfter)
	defer idle.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-idle.C:
			if !db.opts.noIdleRebuild {
				db.idle()
			}
			continue
		case done := <-db.settleCh:
			db.idle()
			close(done)
			continue
		case <-db.flushCh:
		}
		backoff := 50 * time.Millisecond
		for {
			err := db.flushImm()
			if err == nil {
				break
			}
			db.wmu.Lock()
			db.flushErr = err
			db.wcond.Broadcast()
			db.wmu.Unlock()
			if errors.Is(err, ErrReadOnly) {
				// No edit is made until the store is reopened; the
				// memtable's records stay in its logs, which Open
				// replays.
				break
			}
			db.opts.Logger.Printf("flush failed, retrying in %v: %s", backoff, quote(err))
			if !db.awaitRetry(backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
		}
		idle.Reset(idleRebuildAfter)
	}
}

// awaitRetry waits backoff before a failed flush is retried, false if the
// store is closing. A Settle meanwhile is answered at once, with nothing
// done: the memtable whose flush failed still waits for its table, and a
// disk that stays full must not hold Settle (which reports the flush's
// error) until the store is closed.
func (db *DB) awaitRetry(backoff time.Duration) bool {
	wait := time.NewTimer(backoff)
	defer wait.Stop()
	for {
		select {
		case <-db.stop:
			return false
		case done := <-db.settleCh:
			close(done)
		case <-wait.C:
			return true
		}
	}
}

// idle is what the flush goroutine does between flushes once the store is
// quiet: the filter's upkeep, when no flushed table waits for its edit.
func (db *DB) idle() {
	db.mu.RLock()
	settled := db.cur.imm == nil
	db.mu.RUnlock()
	if settled && db.readOnlyErr() == nil {
		db.filter.upkeep(true)
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
	if err := db.readOnlyErr(); err != nil {
		return err
	}
	// Writes that took a place in imm's log before the switch may still
	// be inserting; the table must hold every record the log holds.
	imm.writers.Wait()
	id := db.allocOutput()
	defer db.outputDone(id)
	it := imm.sl.NewIterator()
	st, ts, err := db.buildTable(id, sklSource{it}, false, false, nil)
	it.Close()
	if err != nil {
		return err
	}
	db.pauseAt(pauseFlushBuilt)
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
	db.filter.upkeep(false) // here no flushed table waits for its edit
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
	if db.noWrites {
		return errorf("%w: the logs hold more than a read-only store keeps in memory (%d bytes of entries); open it writable once, so that they are flushed to tables", ErrReadOnly, db.opts.MemtableBytes)
	}
	id := db.allocOutput()
	defer db.outputDone(id)
	it := m.sl.NewIterator()
	st, ts, err := db.buildTable(id, sklSource{it}, false, false, nil)
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
				db.opts.Logger.Printf("compaction failed (will retry after the next flush): %s", quote(err))
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
	if db.readOnlyErr() != nil {
		return false, nil // no edits until the store is reopened
	}
	start, width, ok := pickRun(v.tables, db.opts.MaxTables)
	if !ok {
		return false, nil
	}
	if err := db.compactRun(v, start, width); err != nil {
		return false, err
	}
	return true, nil
}

// compactRun merges v.tables[start:start+width] into one table that takes
// their place. A table that cannot be read to its end (a block that fails
// to load or its checksum) abandons the compaction with ErrCorrupt naming
// it: the run stays as it is, nothing is lost.
func (db *DB) compactRun(v *view, start, width int) error {
	run := v.tables[start : start+width]
	// Tombstones can go only if nothing older than the run exists: the
	// run ends at the oldest table.
	dropTombstones := start+width == len(v.tables)
	iters := make([]y.Iterator, len(run))
	counted := make([]*countingIter, len(run))
	for i, st := range run {
		counted[i] = &countingIter{Iterator: st.t.NewIterator(table.NOCACHE)}
		iters[i] = counted[i]
	}
	merged := table.NewMergeIterator(iters, false)
	id := db.allocOutput()
	defer db.outputDone(id)
	st, _, err := db.buildTable(id, merged, dropTombstones, true, db.stop)
	merged.Close()
	if err == nil {
		// Badger's table iterator reports a failed block load only as
		// the end of the table: check each input was read to its end.
		for i, in := range run {
			c := counted[i]
			if c.n != int(in.t.KeyCount()) || !bytes.Equal(c.last, in.t.Biggest()) {
				err = fmt.Errorf("%w: table %06d: compaction read %d of its %d entries (a block could not be read or failed its checksum); compaction abandoned, the table is kept",
					ErrCorrupt, in.id, c.n, in.t.KeyCount())
				break
			}
		}
		if err != nil {
			db.removeTable(st)
		}
	}
	if err != nil {
		return err
	}
	err = db.applyEdit(tableEdit{add: st, replace: slices.Clone(run)})
	if st != nil && !st.closed.Load() {
		db.pauseAt(pauseMergeListed)
		// The table list holds st in the run's place (an edit that fails
		// before that removes and closes st). The run stays referenced
		// (v) until this returns, so no input leaves before merged is done.
		db.filter.merged(st, run)
	}
	if err != nil {
		return err
	}
	db.stats.compactions.Add(1)
	return nil
}

// countingIter counts the entries a table iterator yields and keeps the
// last key, so that a merge can tell a table read to its end from one cut
// short by an unreadable block.
type countingIter struct {
	*table.Iterator
	n    int
	last []byte
}

func (c *countingIter) note() {
	if c.Iterator.Valid() {
		c.n++
		c.last = append(c.last[:0], c.Iterator.Key()...)
	}
}

func (c *countingIter) Rewind() {
	c.Iterator.Rewind()
	c.n = 0
	c.note()
}

func (c *countingIter) Next() {
	c.Iterator.Next()
	c.note()
}

func (c *countingIter) Seek(key []byte) {
	c.Iterator.Seek(key)
	c.n = -1 // counts from a seek say nothing about the whole table
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
				db.opts.Logger.Printf("table %06d: saving rebuilt filter: %s (using it from memory)", st.id, quote(err))
			}
			db.stats.rebuiltFilters.Add(1)
		}
		v.release()
	}
}
