package kvdemo

import (
	"fmt"
	"slices"
)

// WALRecoveryMode says what Open does with a damaged log record. The names
// and meanings follow RocksDB's WALRecoveryMode.
//
// Damage is told apart from a torn tail by what follows it. A crash can
// only tear the end of the newest log: records are appended in order, and
// a log is made durable before any record goes to the next one. So a bad
// record followed by an intact one, or by a later log, is damage in the
// middle of the history, and replaying around it would leave a hole.
type WALRecoveryMode string

const (
	// TolerateCorruptedTailRecords (the default): a torn tail of the
	// newest log is cut off (those bytes were never acknowledged; they are
	// kept in lost/ first). Damage in the middle refuses to open, with an
	// error naming the log and the offset.
	TolerateCorruptedTailRecords WALRecoveryMode = "tolerate-tail"
	// AbsoluteConsistency: any bad record, torn tail included, refuses to
	// open.
	AbsoluteConsistency WALRecoveryMode = "absolute"
	// PointInTimeRecovery: replay stops at the first bad record; the store
	// opens with everything before it, nothing after (a consistent prefix
	// of the history). The damaged log and every later one are moved to
	// lost/.
	PointInTimeRecovery WALRecoveryMode = "point-in-time"
	// SkipAnyCorruptedRecords: every intact record is replayed, bad ones
	// skipped (the history may have holes). Damaged logs are moved to
	// lost/.
	SkipAnyCorruptedRecords WALRecoveryMode = "skip-any"
)

func (m WALRecoveryMode) valid() bool {
	switch m {
	case "", TolerateCorruptedTailRecords, AbsoluteConsistency, PointInTimeRecovery, SkipAnyCorruptedRecords:
		return true
	}
	return false
}

// damagedLogError is the refusal to open over a damaged log.
func damagedLogError(path string, sc logScan, laterLogs bool, mode WALRecoveryMode) error {
	var what string
	switch {
	case sc.nextValid >= 0:
		what = fmt.Sprintf("an intact record follows at offset %d", sc.nextValid)
	case sc.nextValid == -2:
		what = "an intact record may follow"
	case laterLogs:
		what = "a later log follows"
	default:
		what = "it is the torn tail of the newest log"
	}
	return fmt.Errorf("%w: log %s is damaged at offset %d of %d (%s); refusing to open under WAL recovery mode %q. The store was not changed. To open anyway, choose a recovery mode: %q keeps the history up to the damage, %q keeps every intact record",
		ErrCorrupt, path, sc.damageAt, sc.size, what, mode, PointInTimeRecovery, SkipAnyCorruptedRecords)
}

// checkLogs refuses, before Open changes anything, a store whose logs
// the recovery mode will not replay: it scans the logs the manifest needs
// as replayLogs will, and returns the refusal replayLogs would reach only
// after flushing what came before the damage.
func (db *DB) checkLogs(logs []uint64) error {
	mode := db.opts.WALRecovery
	if mode == "" {
		mode = TolerateCorruptedTailRecords
	}
	if db.man.Log != 0 && !slices.Contains(logs, db.man.Log) {
		return errorf("%w: log %06d, named by the MANIFEST as holding records not yet in a table, is missing", ErrCorrupt, db.man.Log)
	}
	if mode == PointInTimeRecovery || mode == SkipAnyCorruptedRecords {
		return nil // they replay around any damage
	}
	var replay []uint64
	for _, id := range logs {
		if id >= db.man.Log {
			replay = append(replay, id)
		}
	}
	reach := db.man.Seq // the last write the tables and intact records hold
	for i, id := range replay {
		path := fileName(db.dir, id, extLog)
		sc, err := scanLogFile(db.fs, path, false, func(walRecord) error { return nil })
		if err != nil {
			return errorf("reading log %06d: %w", id, err)
		}
		reach = max(reach, sc.lastSeq)
		if sc.damageAt < 0 {
			continue
		}
		newest := i == len(replay)-1
		if mode == TolerateCorruptedTailRecords && newest && sc.nextValid == -1 {
			continue // a torn tail: cut (once kept)
		}
		return damagedLogError(path, sc, !newest, mode)
	}
	if db.man.ClosedSeq > reach {
		return closedSeqError(db.man, reach, replay, mode)
	}
	return nil
}

// closedSeqError is the refusal to open a store closed cleanly whose logs
// no longer reach its last acknowledged write.
func closedSeqError(man manifest, reach uint64, logs []uint64, mode WALRecoveryMode) error {
	where := "no log is left"
	if len(logs) > 0 {
		where = fmt.Sprintf("log %06d.%s, the newest, was cut short or damaged at rest", logs[len(logs)-1], extLog)
	}
	return errorf("%w: the store was closed cleanly after write %d, but its tables and logs end at write %d: acknowledged writes are missing (%s); refusing to open under WAL recovery mode %q. The store was not changed. To open anyway with what is left, choose %q",
		ErrCorrupt, man.ClosedSeq, reach, where, mode, PointInTimeRecovery)
}

// replayLogs rebuilds the memtable from the logs the manifest needs
// (numbered Log or higher), in order; records at or below the manifest's
// Seq are in tables already. Logs below Log were flushed: removed. A log
// the manifest names that is missing is an error.
func (db *DB) replayLogs(logs []uint64) (*memtable, error) {
	o := &db.opts
	mode := o.WALRecovery
	if mode == "" {
		mode = TolerateCorruptedTailRecords
	}
	if db.man.Log != 0 && !slices.Contains(logs, db.man.Log) {
		return nil, fmt.Errorf("%w: log %06d, named by the MANIFEST as holding records not yet in a table, is missing", ErrCorrupt, db.man.Log)
	}
	db.seq = db.man.Seq
	var replay []uint64
	for _, id := range logs {
		if id < db.man.Log {
			db.removeFile(id, extLog)
		} else {
			replay = append(replay, id)
		}
	}
	memLog := db.man.Log
	if len(replay) > 0 {
		memLog = replay[0]
	}
	mem := db.newMemtable(memLog, nil)
	apply := func(r walRecord) error {
		if r.seq <= db.man.Seq {
			return nil
		}
		if len(r.key) > db.keyCap || len(r.value) > db.valueCap {
			// The memtable's arena is sized by these caps; a record
			// written under larger ones must not be dropped or
			// overflow it.
			return fmt.Errorf("record %d has a %d-byte key and a %d-byte value, over MaxKeySize %d or MaxValueSize %d: reopen with the limits it was written under",
				r.seq, len(r.key), len(r.value), db.keyCap, db.valueCap)
		}
		est, worst := entryEstimate(r.key, r.value), entryWorst(r.key, r.value)
		if !mem.fits(o.MemtableBytes, est, worst) {
			// More than a memtable's worth was waiting (the crash came
			// while a full memtable was being flushed): write it out now.
			if err := db.flushAtOpen(mem); err != nil {
				return err
			}
			mem = db.newMemtable(memLog, nil)
		}
		mem.reserve(est, worst)
		mem.apply(r)
		db.seq = max(db.seq, r.seq)
		return nil
	}
	var aside []uint64 // damaged logs (and, point in time, the ones after)
	for i, id := range replay {
		path := fileName(db.dir, id, extLog)
		sc, err := scanLogFile(db.fs, path, mode == SkipAnyCorruptedRecords, apply)
		if err != nil {
			return nil, errorf("replaying log %06d: %w", id, err)
		}
		if err := db.syncLogFile(id); err != nil {
			return nil, errorf("making log %06d durable before serving what it holds: %w", id, err)
		}
		if sc.damageAt < 0 {
			continue
		}
		newest := i == len(replay)-1
		torn := newest && sc.nextValid == -1
		switch {
		case mode == PointInTimeRecovery:
			aside = append(aside, replay[i:]...)
		case mode == SkipAnyCorruptedRecords:
			aside = append(aside, id)
			continue
		case mode == TolerateCorruptedTailRecords && torn:
			if err := db.cutTornTail(id, sc.damageAt); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, damagedLogError(path, sc, !newest, mode)
		}
		break
	}
	if db.man.ClosedSeq > db.seq {
		// A mode that replays around damage (checkLogs refused the
		// others): the loss is accepted, and said. The mark is dropped
		// from the MANIFEST (by recoverPast's edit, or here), or the next
		// Open would refuse again over the same loss.
		db.opts.Logger.Printf("the store was closed cleanly after write %d, its tables and logs end at write %d: the writes between are lost (recovered under %q)",
			db.man.ClosedSeq, db.seq, mode)
		db.man.ClosedSeq = 0
		if len(aside) == 0 {
			if err := db.writeManifest(db.man); err != nil {
				return nil, err
			}
		}
	}
	if len(aside) > 0 {
		return db.recoverPast(mem, aside)
	}
	return mem, nil
}

// syncLogFile fsyncs a log that replay read. What replay read is what the
// OS holds, not necessarily what is on disk: the last process may have
// written records it never fsynced (NoSyncEachWrite, or it died between a
// write and its fsync), or its fsync failed. The store is about to serve
// those records and, appending to the newest log, to count its bytes as
// durable; without this fsync a later Sync or Close would return nil
// without one, and a power loss would take back what Gets had returned.
func (db *DB) syncLogFile(id uint64) error {
	if db.noWrites {
		return nil // nothing appended or counted durable
	}
	f, err := db.fs.OpenAppend(fileName(db.dir, id, extLog))
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cutTornTail keeps the torn tail of the newest log in lost/ (under a
// name no earlier file there has, made durable) and only then cuts it off
// the log, so that new records follow the last intact one. The copy
// leaves runs of zeros as holes (copyFileSparse): a sparse or zero-filled
// tail of any length is kept byte for byte without taking its length in
// disk space. If the tail cannot be kept (a full disk, say), the log is
// not touched and Open refuses, naming the log: a tail is never
// destroyed, even one that was never acknowledged. A read-only store
// leaves the tail where it is.
func (db *DB) cutTornTail(id uint64, at int64) error {
	if db.noWrites {
		db.opts.Logger.Printf("WAL %06d.log: torn tail at offset %d (never acknowledged) left in place: the store is open read-only", id, at)
		return nil
	}
	name := fmt.Sprintf("%06d.%s.tail-at-%d", id, extLog, at)
	path := fileName(db.dir, id, extLog)
	dst, err := db.lostPath(name)
	var n int64
	if err == nil {
		n, err = copyFileSparse(db.fs, path, at, dst)
	}
	if err == nil {
		err = db.syncLost()
	}
	if err != nil {
		return errorf("log %s has a torn tail of %d bytes at offset %d (never acknowledged) that could not be kept in lost/ before cutting it off, so the log was left as it is: %w. Free space (or move the store to where there is some) and open again",
			path, n, at, err)
	}
	f, err := db.fs.OpenAppend(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(at); err != nil {
		return errorf("cutting the torn tail of log %06d: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	db.stats.tornWAL.Add(1)
	db.opts.Logger.Printf("WAL %06d.log: cut %d bytes of torn tail at offset %d (never acknowledged; kept as %s)", id, n, at, dst)
	return nil
}

// recoverPast finishes a recovery that skipped damage: the damaged logs
// are first copied to lost/ (evidence, never deleted) and made durable
// there; then what replay rebuilt is written as a table and the manifest
// moves to a new log, so that no old log is needed any more; then the old
// logs are removed. A crash before the manifest change leaves the logs in
// place (and maybe a copy in lost/); after it, the copies in lost/.
func (db *DB) recoverPast(mem *memtable, aside []uint64) (*memtable, error) {
	kept := make([]string, len(aside))
	for i, lid := range aside {
		dst, err := db.keepCopy(fmt.Sprintf("%06d.%s", lid, extLog))
		if err != nil {
			return nil, errorf("recovering past damaged logs: %w", err)
		}
		kept[i] = dst
	}
	id := db.allocFile()
	w, err := createWAL(db.fs, db.dir, id)
	if err != nil {
		return nil, err
	}
	w.syncs = &db.stats.walSyncs
	tid := db.allocOutput()
	defer db.outputDone(tid)
	it := mem.sl.NewIterator()
	st, ts, err := db.buildTable(tid, sklSource{it}, false, false, nil)
	it.Close()
	if err == nil {
		err = db.applyEdit(tableEdit{add: st, seq: ts.maxSeq, log: id})
	}
	if err != nil {
		w.close()
		db.removeFile(id, extLog)
		return nil, errorf("recovering past damaged logs: %w", err)
	}
	for i, lid := range aside {
		db.opts.Logger.Printf("%06d.%s: damaged log, recovered under %q; moved to %s", lid, extLog, db.opts.WALRecovery, kept[i])
		db.stats.movedAside.Add(1)
	}
	db.removeLogsBelow(id)
	if err := db.syncDir(); err != nil {
		return nil, err
	}
	next := db.newMemtable(id, w)
	return next, nil
}
