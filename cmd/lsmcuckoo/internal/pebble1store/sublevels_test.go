package pebble1store

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble"
)

// Sublevels stacks overlapping L0 tables in sequence number order and
// puts disjoint ones side by side; a range deletion's exclusive end does
// not overlap a table starting at that key.
func TestSublevels(t *testing.T) {
	table := func(num int, seq uint64, smallest, largest string, exclusiveEnd bool) pebble.SSTableInfo {
		var info pebble.SSTableInfo
		info.FileNum = pebble.FileNum(num)
		info.SmallestSeqNum, info.LargestSeqNum = seq, seq
		info.Smallest = pebble.InternalKey{UserKey: []byte(smallest), Trailer: seq<<8 | uint64(pebble.InternalKeyKindSet)}
		info.Largest = pebble.InternalKey{UserKey: []byte(largest), Trailer: seq<<8 | uint64(pebble.InternalKeyKindSet)}
		if exclusiveEnd {
			info.Largest = pebble.InternalKey{UserKey: []byte(largest), Trailer: pebble.InternalKeyRangeDeleteSentinel}
		}
		return info
	}
	for _, c := range []struct {
		name   string
		tables []pebble.SSTableInfo
		want   int
	}{
		{"none", nil, 0},
		{"disjoint", []pebble.SSTableInfo{table(1, 1, "a", "c", false), table(2, 2, "d", "f", false)}, 1},
		{"stacked", []pebble.SSTableInfo{table(3, 3, "a", "z", false), table(1, 1, "b", "c", false), table(2, 2, "c", "d", false)}, 3},
		{"touching inclusive", []pebble.SSTableInfo{table(1, 1, "a", "c", false), table(2, 2, "c", "f", false)}, 2},
		{"touching exclusive", []pebble.SSTableInfo{table(1, 1, "a", "c", true), table(2, 2, "c", "f", false)}, 1},
		{"newer beside, older below", []pebble.SSTableInfo{table(1, 1, "a", "m", false), table(2, 2, "n", "z", false), table(3, 3, "k", "p", false)}, 2},
	} {
		if got := Sublevels(c.tables, bytes.Compare); got != c.want {
			t.Errorf("%s: %d sublevels, want %d", c.name, got, c.want)
		}
	}
}
