// Package testkeys generates the key sets every filter in lsmcuckoo is
// tested against: the shapes that have broken filters in the field
// (structured keys, long shared prefixes, the empty key, heavy repeats) and
// disjoint absent keys for measuring false positives.
package testkeys

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

// Set is a named list of keys. Keys may repeat; Distinct says how many
// distinct keys it holds.
type Set struct {
	Name     string
	Keys     [][]byte
	Distinct int
}

// Random returns n distinct random keys of the given length (length >= 8),
// drawn from seed. The first 8 bytes encode the index, so sets drawn with
// different seeds or tags never overlap when tag differs.
func Random(n, length int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 0x6c736d63))
	keys := make([][]byte, n)
	buf := make([]byte, n*length)
	for i := range keys {
		k := buf[i*length : (i+1)*length : (i+1)*length]
		for j := range k {
			k[j] = byte(r.Uint32())
		}
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		k[4] = byte(seed) // disjoint across seeds for seeds < 256
		keys[i] = k
	}
	return keys
}

// Sequential returns "<prefix>%010d" keys for i in [from, from+n): the
// shape of auto-increment IDs, the worst case for weak hashes.
func Sequential(prefix string, from, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "%s%010d", prefix, from+i)
	}
	return keys
}

// Shapes returns the standard key sets of size about n.
func Shapes(n int) []Set {
	prefix := bytes.Repeat([]byte("p"), 100)
	shared := make([][]byte, n)
	for i := range shared {
		shared[i] = fmt.Appendf(append([]byte(nil), prefix...), "%d", i)
	}
	// One key repeated 1000 times amid others, in runs and scattered.
	hot := []byte("hot-key")
	others := Sequential("o", 0, n)
	repeated := make([][]byte, 0, n+1000)
	for i, k := range others {
		repeated = append(repeated, k)
		if i%max(1, n/500) == 0 && len(repeated) < n+500 {
			repeated = append(repeated, hot)
		}
	}
	for len(repeated) < n+1000 {
		repeated = append(repeated, hot)
	}
	return []Set{
		{"random16", Random(n, 16, 1), n},
		{"sequential", Sequential("key", 0, n), n},
		{"prefix100", shared, n},
		{"with-empty-key", append(Sequential("e", 0, n-1), []byte{}), n},
		{"repeated-hot-key", repeated, n + 1},
		{"zero", nil, 0},
		{"one", [][]byte{[]byte("only")}, 1},
		{"one-empty", [][]byte{{}}, 1},
	}
}

// Absent returns n keys disjoint from every set Shapes and Random (with
// seeds 0..255) produce: they have a length no generated key has.
func Absent(n int, seed uint64) [][]byte {
	return Random(n, 15, seed)
}
