package kvdemo

import (
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
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
	block, err := c.db.readFilterFile(st)
	if err == nil {
		_, err = codec.Decode(block)
	}
	if err != nil {
		return name, "", err
	}
	return name, fmt.Sprintf("bound to its table, %d bytes", len(block)), nil
}
