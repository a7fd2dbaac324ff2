package kvdemo

import (
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// What describe (Stats) and checkStored (Check) read, per kind.

func (noFilter) unfiltered(*sstable) bool { return false } // none by choice
func (noFilter) checkStored(*sstable) (string, string, error) {
	return "", "", nil
}

func (f bloomFilter) unfiltered(st *sstable) bool { return f.memoryBytes(st) == 0 }

// checkStored: the bloom filter is inside the table, checked with it.
func (bloomFilter) checkStored(*sstable) (string, string, error) { return "", "", nil }

func (*cuckooFilter) unfiltered(st *sstable) bool { return st.cf.Load() == nil }

func (c *cuckooFilter) checkStored(st *sstable) (string, string, error) {
	name := fmt.Sprintf("%06d.%s", st.id, extFilter)
	raw, err := vfs.ReadFile(c.db.fs, fileName(c.db.dir, st.id, extFilter))
	if err != nil {
		return name, "", unreadableFilter{err}
	}
	block, err := checkFilterBinding(raw, st)
	if err == nil {
		_, err = codec.Decode(block)
	}
	if err != nil {
		return name, "", err
	}
	return name, fmt.Sprintf("bound to its table, %d bytes", len(block)), nil
}

// unreadableFilter: a filter file that could not be read at all (missing,
// no permission, a failing disk). Open rebuilds it in its place: with
// nothing read there is nothing to keep in lost/, unlike a file whose
// bytes were read and found damaged or bound to another table
// (cuckooFilter.attach).
type unreadableFilter struct{ err error }

func (u unreadableFilter) Error() string { return u.err.Error() }
func (u unreadableFilter) Unwrap() error { return u.err }
