package dynamic

import (
	"math"
	"unsafe"
)

// IndexStats describes an Index.
type IndexStats struct {
	Tables      int
	Entries     int64   // (key, table) entries stored
	Segments    int     // segments probed per lookup
	Bytes       int64   // buckets, counters, codebook and stash
	Load        float64 // entries / slots
	BitsPerKey  float64 // Bytes*8/Entries
	SlotBits    int     // bits per slot: tag + code + fingerprint
	CodeBits    float64 // table-code bits per entry, averaged over entries
	SizeEntropy float64 // entropy of the tables' shares of entries, bits
	Stashed     int     // entries kept exactly in the stash
	Always      int     // tables every lookup names (no code, or unplaceable keys)
	// Contended counts lookups that met writers in their buckets on every
	// read and named every table instead of waiting.
	Contended int64
}

// Stats reads the index's size. Safe for concurrent use; it takes the
// writers' mutex (it waits for a writer call in progress, a long Replace
// say) and visits every segment's counters and the codebook, so call it
// for reporting, not on a Get's path.
func (x *Index) Stats() IndexStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	var st IndexStats
	book := x.book.Load()
	slots := int64(0)
	for _, s := range *x.segs.Load() {
		st.Segments++
		st.Entries += s.entries.Load()
		st.Bytes += int64(len(s.words))*8 + int64(len(s.ctr))*4
		slots += int64(s.n) * idxSlots
	}
	st.Bytes += int64(len(book.decode))*2 + int64(cap(book.tables))*int64(unsafe.Sizeof(tableInfo{})) + int64(len(book.stash))*int64(unsafe.Sizeof(stashEntry{})) + int64(len(x.altHash))*4
	st.Stashed = len(book.stash)
	st.Contended = x.contended.Load()
	st.Entries += int64(st.Stashed)
	st.SlotBits = int(x.w)
	if slots > 0 {
		st.Load = float64(st.Entries-int64(st.Stashed)) / float64(slots)
	}
	var total float64
	for _, ti := range book.tables {
		if ti.live {
			st.Tables++
			total += float64(ti.entries)
			if ti.always {
				st.Always++
			}
		}
	}
	for _, ti := range book.tables {
		if ti.live && ti.entries > 0 && total > 0 {
			p := float64(ti.entries) / total
			st.CodeBits += p * float64(ti.length)
			st.SizeEntropy -= p * math.Log2(p)
		}
	}
	if st.Entries > 0 {
		st.BitsPerKey = float64(st.Bytes*8) / float64(st.Entries)
	}
	return st
}
