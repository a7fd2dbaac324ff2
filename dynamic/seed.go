package dynamic

import (
	"crypto/rand"
	"encoding/binary"
)

// randomSeed draws a filter's secret hash seed. crypto/rand never fails on
// the platforms Go supports (it panics inside the runtime if the kernel's
// generator is unavailable), so there is no error to return.
func randomSeed() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}
