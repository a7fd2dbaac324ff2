package kvdemo

import (
	"errors"
	"fmt"
	"os"
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

// flushImm turns the immutable memtable into a table. Order matters for
// crash safety: the table and its filter are durable (and the directory
// synced) before the manifest names them, and the manifest has moved past
// the memtable's logs before they are removed.
func (db *DB) flushImm() error {
	db.mu.RLock()
	imm := db.cur.imm
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
	if err := syncDir(db.dir); err != nil {
		db.discard(st)
		return err
	}

	db.manMu.Lock()
	db.mu.RLock()
	mem, tables := db.cur.mem, db.cur.tables
	db.mu.RUnlock()
	if st != nil {
		tables = append([]*sstable{st}, tables...)
	}
	man := db.man
	man.Tables = tableIDsOldestFirst(tables)
	man.Log = mem.log // no memtable switch can happen while imm is pending
	man.Seq = max(man.Seq, ts.maxSeq)
	man.NextFile = db.nextFile.Load()
	if err := writeManifest(db.dir, man); err != nil {
		db.manMu.Unlock()
		db.discard(st)
		return err
	}
	db.man = man
	db.mu.Lock()
	db.installLocked(db.cur.mem, nil, tables)
	db.mu.Unlock()
	db.manMu.Unlock()

	imm.wal.close()
	db.removeLogsBelow(man.Log)
	db.stats.flushes.Add(1)
	db.wmu.Lock()
	db.flushing, db.flushErr = false, nil
	db.wcond.Broadcast()
	db.wmu.Unlock()
	signal(db.compactCh)
	return nil
}

// flushAtOpen writes a memtable rebuilt by replay as a table, records it
// and the sequence numbers it covers in the manifest, and returns it.
func (db *DB) flushAtOpen(m *memtable) (*sstable, error) {
	id := db.allocFile()
	it := m.sl.NewIterator()
	st, ts, err := db.buildTable(id, sklSource{it}, false, nil)
	it.Close()
	if err != nil {
		return nil, err
	}
	if err := syncDir(db.dir); err != nil {
		db.discard(st)
		return nil, err
	}
	man := db.man
	man.Tables = append(slices.Clone(man.Tables), id)
	man.Seq = max(man.Seq, ts.maxSeq)
	man.NextFile = db.nextFile.Load()
	if err := writeManifest(db.dir, man); err != nil {
		db.discard(st)
		return nil, err
	}
	db.man = man
	db.stats.flushes.Add(1)
	return st, nil
}

// discard closes and removes a table that never made it into a manifest.
func (db *DB) discard(st *sstable) {
	if st == nil {
		return
	}
	st.t.Close(-1)
	os.Remove(fileName(db.dir, st.id, extTable))
	os.Remove(fileName(db.dir, st.id, extFilter))
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
	for i := 0; i+width <= len(tables); i++ {
		var sum int64
		for _, st := range tables[i : i+width] {
			sum += st.size
		}
		if best < 0 || sum < best {
			best, start = sum, i
		}
	}
	return start, width, true
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
	if err := syncDir(db.dir); err != nil {
		db.discard(st)
		return false, err
	}

	db.manMu.Lock()
	defer db.manMu.Unlock()
	db.mu.RLock()
	cur := db.cur.tables
	db.mu.RUnlock()
	// Flushes only add tables at the newest end, so the run is still
	// contiguous; find where it is now.
	at := slices.Index(cur, run[0])
	if at < 0 || at+width > len(cur) || !slices.Equal(cur[at:at+width], run) {
		db.discard(st)
		return false, fmt.Errorf("kvdemo: tables changed under a compaction")
	}
	next := slices.Clone(cur[:at])
	if st != nil {
		next = append(next, st)
	}
	next = append(next, cur[at+width:]...)
	man := db.man
	man.Tables = tableIDsOldestFirst(next)
	man.NextFile = db.nextFile.Load()
	if err := writeManifest(db.dir, man); err != nil {
		db.discard(st)
		return false, err
	}
	db.man = man
	for _, old := range run {
		old.obsolete.Store(true)
	}
	db.mu.Lock()
	db.installLocked(db.cur.mem, db.cur.imm, next)
	db.mu.Unlock()
	db.stats.compactions.Add(1)
	return true, nil
}
