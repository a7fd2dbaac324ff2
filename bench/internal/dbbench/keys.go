package dbbench

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// The data set is MVCC-shaped, as CockroachDB's is: every stored key is a
// 16-byte user key (the prefix) followed by an 8-byte version. Filters hold
// prefixes, so a lookup by prefix (an MVCC point read's SeekPrefixGE) and a
// Get of the exact versioned key consult the same filters.
const (
	prefixLen  = 16
	versionLen = 8
)

// Comparer orders keys bytewise and splits off the first 16 bytes as the
// prefix. Bytewise order is consistent with ordering by prefix then
// version because every prefix of a full key has the same length; a
// shorter key (a separator Pebble derives) is all prefix. Its Name is
// stored in the database, so it must not change.
var Comparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Name = "lsmcuckoo.bench.prefix16"
	c.Split = func(k []byte) int { return min(len(k), prefixLen) }
	return &c
}()

// userKey i of the data set; absent keys use odd numbers, present even, so
// the absent ones interleave with the present ones inside every table's
// range.
func userKey(i uint64) []byte {
	k := make([]byte, prefixLen, prefixLen+versionLen)
	copy(k, "user")
	binary.BigEndian.PutUint64(k[4:], i*0x9e3779b97f4a7c15) // scatter, keep unique
	binary.BigEndian.PutUint32(k[12:], uint32(i))
	return k
}

// version is the one version every key is written at.
const version = 0x0000_0187_0000_0001

func versioned(prefix []byte) []byte {
	return binary.BigEndian.AppendUint64(prefix, version)
}

func presentPrefix(i int) []byte { return userKey(uint64(2 * i)) }
func absentPrefix(i int) []byte  { return userKey(uint64(2*i + 1)) }
