package kvdemo

import (
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4/skl"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

const metaDelete = 1 << 0 // ValueStruct.Meta bit of a tombstone

// nodeOverhead estimates the skiplist arena bytes of one entry besides its
// key, 8-byte version and encoded value: a node with the expected tower
// height (1.5 levels of 4 bytes over a 16-byte base) plus alignment
// padding. The flush threshold counts entries with this estimate rather
// than the arena's actual use, which depends on random tower heights, so
// that stores fed the same writes cut their tables at the same keys.
const nodeOverhead = 16 + 6 + 7

// memtable is Badger's lock-free skiplist of versioned keys, fronted by a
// lock-free MemFilter that answers "absent" for most keys not in it
// without a skiplist search.
type memtable struct {
	sl     *skl.Skiplist
	filter *dynamic.MemFilter
	// log is the lowest-numbered log holding this memtable's records (a
	// memtable rebuilt at Open may span several logs), wal the one it
	// appends to. Once it is a table, every log below the next memtable's
	// log can go.
	log  uint64
	wlog atomic.Pointer[wal] // replaced (under the DB's write lock) when a write to it fails cleanly

	// applied counts entries inserted: writes that happened, for Stats
	// (entries also counts reservations of writes that may yet fail).
	applied atomic.Int64

	// Accounting for the arena, under the DB's write lock. estimate
	// drives the flush threshold; worst counts every entry at its largest
	// possible size, so that an entry is only accepted if the arena
	// certainly has room for it (Badger's arena panics when full).
	estimate, worst, limit int64
	entries                int

	// writers counts writes appended to the log but not yet inserted;
	// a flush waits for them, or it would miss records its log holds.
	writers sync.WaitGroup
}

func entryEstimate(key, value []byte) int64 {
	return int64(len(key)+8+len(value)+3) + nodeOverhead
}

func entryWorst(key, value []byte) int64 {
	return int64(len(key)+8+len(value)+3+skl.MaxNodeSize) + 8
}

// newMemtable sizes the arena for a memtable flushed at threshold bytes
// (by estimate): entries are at most (worst/estimate) < 3 times their
// estimate, plus one entry of the largest allowed size.
func newMemtable(threshold int64, maxEntry int64, keysHint int, log uint64, w *wal) *memtable {
	limit := 3*threshold + maxEntry + 1<<10
	m := &memtable{
		sl:     skl.NewSkiplist(limit),
		filter: dynamic.NewMemFilter(keysHint),
		log:    log,
		limit:  limit,
	}
	if w != nil {
		m.wlog.Store(w)
	}
	return m
}

func (m *memtable) wal() *wal { return m.wlog.Load() }

// fits says whether one more entry may go into this memtable: always into
// an empty one (the arena has room for one entry of the largest size),
// else while under the flush threshold and certainly inside the arena.
func (m *memtable) fits(threshold, est, worst int64) bool {
	if m.entries == 0 {
		return true
	}
	return m.estimate+est <= threshold && m.worst+worst <= m.limit
}

func (m *memtable) reserve(est, worst int64) {
	m.estimate += est
	m.worst += worst
	m.entries++
}

// apply inserts a record. Safe for concurrent use: the skiplist and the
// filter are lock-free. The filter learns the key before the skiplist
// does, so a reader that finds the entry also passes the filter.
func (m *memtable) apply(r walRecord) {
	m.filter.Add(r.key)
	vs := y.ValueStruct{Value: r.value}
	if r.kind == kindDel {
		vs = y.ValueStruct{Meta: metaDelete}
	}
	m.sl.Put(y.KeyWithTs(r.key, r.seq), vs)
	m.applied.Add(1)
}

// get looks key up; found says whether any version was there (a tombstone
// included). seek is y.KeyWithTs(key, math.MaxUint64).
func (m *memtable) get(seek []byte) (vs y.ValueStruct, found bool) {
	// Sequence numbers start at 1, so a found entry has Version >= 1.
	vs = m.sl.Get(seek)
	return vs, vs.Version != 0
}
