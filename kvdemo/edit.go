package kvdemo

import (
	"fmt"
	"slices"
)

// tableEdit is one change to the table list: a flush adds a table at the
// newest end, a compaction puts one in the place of an adjacent run, a
// flush during replay adds one before any view exists.
type tableEdit struct {
	add     *sstable   // the new table; nil when its source left nothing to write
	replace []*sstable // compaction: the run add takes the place of
	flushed *memtable  // flush: the immutable memtable add was built from
	seq     uint64     // highest sequence number in add's source
	log     uint64     // if not 0, the oldest log still needed afterwards
}

// applyEdit makes an edit durable, then visible, in the one order that a
// crash at any point leaves safe:
//
//  1. add and its filter are already durable files (buildTable); the
//     directory is fsynced, so no manifest can name a file a crash loses;
//  2. the manifest naming the new table list is written (atomically);
//  3. the new view is installed: Gets see add, and stop seeing the run it
//     replaced and the memtable it was flushed from;
//  4. the caller retires what the edit made unneeded (logs, and the
//     replaced tables at their last reader's release).
//
// If it fails before the manifest is replaced, add's files are removed
// and nothing else has changed, so the caller may retry. If the manifest
// was renamed into place but the directory fsync failed, nobody knows
// which manifest a crash would leave: the edit is applied in memory, the
// store turns read-only, and the error says to reopen. Then nothing is
// removed: the replaced tables stay on disk (the old manifest, if it is
// the one a crash leaves, names them; if the new one survives, it lists
// them as Retired and the next Open removes them), and no further edit
// is made until the store is reopened.
func (db *DB) applyEdit(e tableEdit) error {
	if err := db.readOnlyErr(); err != nil {
		// The durable manifest is unknown: an edit on top of it could
		// retire files the surviving one still names.
		db.removeTable(e.add)
		return err
	}
	if e.add != nil {
		if err := db.syncDir(); err != nil {
			db.removeTable(e.add)
			return err
		}
	}
	db.manMu.Lock()
	defer db.manMu.Unlock()
	db.mu.RLock()
	tables := db.cur.tables // changes only under manMu, which we hold
	db.mu.RUnlock()
	next, err := editTables(tables, e)
	if err != nil {
		db.removeTable(e.add)
		return err
	}
	man := db.man
	man.Tables = tableIDsOldestFirst(next)
	man.TableFiles = db.tableFilesFor(next)
	man.Seq = max(man.Seq, e.seq)
	if e.log != 0 {
		man.Log = e.log
	}
	man.NextFile, man.Pending = db.outputsInFlight(man.Tables)
	man.Retired = db.retiredWith(e.replace)
	var unsynced error
	if err := db.writeManifest(man); err != nil {
		if !errorsIsRenamed(err) {
			db.removeTable(e.add)
			return err
		}
		db.setReadOnly(err)
		unsynced = err
	}
	db.man = man
	if unsynced == nil {
		db.noteRetired(e.replace)
		for _, old := range e.replace {
			old.obsolete.Store(true)
		}
	}
	db.mu.Lock()
	imm := db.cur.imm
	if e.flushed != nil && imm == e.flushed {
		imm = nil
	}
	db.installLocked(db.cur.mem, imm, next)
	db.mu.Unlock()
	return unsynced
}

// tableFilesFor is the table_files of a manifest listing tables. A table
// Open found damaged keeps the identity the last manifest recorded for it
// (its bytes no longer hash as they did, and recording what is there now
// would bless a file put in its place); one with none recorded gets none.
func (db *DB) tableFilesFor(tables []*sstable) map[uint64]tableFile {
	files := make(map[uint64]tableFile, len(tables))
	for _, st := range tables {
		if st.damaged == nil {
			files[st.id] = newTableFile(st.size, st.sum)
		} else if f, ok := db.man.TableFiles[st.id]; ok {
			files[st.id] = f
		}
	}
	return files
}

// editTables is the table list (newest first) after e.
func editTables(cur []*sstable, e tableEdit) ([]*sstable, error) {
	if len(e.replace) == 0 {
		if e.add == nil {
			return cur, nil
		}
		return append([]*sstable{e.add}, cur...), nil
	}
	// Flushes only add tables at the newest end, so the run is still
	// contiguous; find where it is now.
	at := slices.Index(cur, e.replace[0])
	if at < 0 || at+len(e.replace) > len(cur) || !slices.Equal(cur[at:at+len(e.replace)], e.replace) {
		return nil, fmt.Errorf("kvdemo: tables changed under a compaction")
	}
	next := slices.Clone(cur[:at])
	if e.add != nil {
		next = append(next, e.add)
	}
	return append(next, cur[at+len(e.replace):]...), nil
}

// tableIDsOldestFirst lists tables (newest first) as the manifest does.
func tableIDsOldestFirst(tables []*sstable) []uint64 {
	ids := make([]uint64, len(tables))
	for i, st := range tables {
		ids[len(tables)-1-i] = st.id
	}
	return ids
}

// retiredWith is the manifest's Retired list: tables replaced earlier
// whose files are not removed yet, plus run.
func (db *DB) retiredWith(run []*sstable) []uint64 {
	db.retMu.Lock()
	defer db.retMu.Unlock()
	var ids []uint64
	for id := range db.retired {
		ids = append(ids, id)
	}
	for _, st := range run {
		ids = append(ids, st.id)
	}
	slices.Sort(ids)
	return ids
}

func (db *DB) noteRetired(run []*sstable) {
	db.retMu.Lock()
	defer db.retMu.Unlock()
	for _, st := range run {
		db.retired[st.id] = true
	}
}

func (db *DB) forgetRetired(id uint64) {
	db.retMu.Lock()
	defer db.retMu.Unlock()
	delete(db.retired, id)
}
