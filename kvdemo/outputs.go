package kvdemo

import (
	"slices"
	"sync"
)

// pendingOutputs are the file numbers given to flush and compaction
// outputs that no manifest names yet: tables (and their filters) being
// built, or built and waiting for their edit.
//
// A flush and a compaction run at once, each with its own number. The
// edit that finishes first records a next_file above both; if the process
// dies before the other edit, that output is left below next_file, named
// by no manifest, and by its number alone it looks like a table some
// manifest once named, which Open keeps in lost/ as evidence. So every
// edit also records the outputs still in flight (manifest.Pending), and a
// file with such a number that the manifest does not name is known to be
// the leftover of an unfinished flush or compaction: Open removes it.
//
// The lock is a leaf: allocation and the snapshot an edit records happen
// under it, so every number below the next_file of a snapshot that was
// allocated for an output and is not yet done is in its Pending.
type pendingOutputs struct {
	mu  sync.Mutex
	ids map[uint64]bool
}

// allocOutput allocates the number of a flush or compaction output; the
// caller calls outputDone once an edit named it or its files are gone.
func (db *DB) allocOutput() uint64 {
	p := &db.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	id := db.allocFile()
	if p.ids == nil {
		p.ids = map[uint64]bool{}
	}
	p.ids[id] = true
	return id
}

// outputDone: output id was named by an edit, or abandoned (its files
// removed, or never written).
func (db *DB) outputDone(id uint64) {
	p := &db.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ids, id)
}

// outputsInFlight returns the next file number and the outputs allocated
// below it that are not done, leaving out those in named (already listed
// by the manifest being written).
func (db *DB) outputsInFlight(named []uint64) (next uint64, pending []uint64) {
	p := &db.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	next = db.nextFile.Load()
	for id := range p.ids {
		if id < next && !slices.Contains(named, id) {
			pending = append(pending, id)
		}
	}
	slices.Sort(pending)
	return next, pending
}

// unfinishedOutput says whether a table or filter numbered id that man
// does not name is the leftover of a flush or compaction that did not
// finish (or a table man retired): nothing man needs, safe to remove.
// Any other unnamed file may be a table some manifest named: evidence.
func unfinishedOutput(man manifest, id uint64) bool {
	return id >= man.NextFile || slices.Contains(man.Retired, id) || slices.Contains(man.Pending, id)
}
