// Package seed draws the per-filter random seeds that keep an adversary from
// choosing keys that collide: a seed unknown to the key's author makes its
// buckets and fingerprints unpredictable.
package seed

import (
	"crypto/rand"
	"encoding/binary"
)

// New returns a random seed that is never 0. Callers use 0 to mean "no seed
// chosen yet", so a drawn seed must never be mistaken for one.
func New() uint32 {
	var b [4]byte
	for {
		// crypto/rand.Read is documented never to return an error and to
		// fill the whole buffer.
		_, _ = rand.Read(b[:])
		if s := binary.LittleEndian.Uint32(b[:]); s != 0 {
			return s
		}
	}
}
