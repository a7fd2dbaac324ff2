package codec

import (
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
)

// MayContain reports whether key may be among the keys block was built
// from (a block of hash kind HashKey64, the default: built with Add). It
// reads the block in place: no copy, no allocation, any alignment, safe
// for concurrent use. It answers false only when the block
// is well formed and proves the key absent; for a block that is truncated,
// malformed, of an unknown version or of another hash kind it answers true.
//
// MayContain checks the block's header (trailer, in versions 2 and 3) and exact
// length on every call, and the bucket codes it reads, but not the
// checksum (that would cost a pass over the whole block per lookup): a bit
// flipped inside a bucket or a line (or, in version 1, inside the offset table, which
// can make a block look empty) is caught by Decode, and by the block
// checksums Pebble and Badger verify when they read a block from disk.
//
// On amd64 it is one call into assembly (reader_amd64.s), which jumps,
// by the trailer's version byte, to linev4.MayContainKey64 for version 4
// and to linev3.MayContainKey64 for everything else. Each answers its
// version's common case (the key hash and the probe of its lines) itself
// and hands everything else to mayContainGo. In a loop of cold lookups
// every instruction between the caller and the probe costs throughput.
//
//go:noescape
func MayContain(block, key []byte) bool

// Set during package initialisation, before any other package can call
// MayContain.
var _ = func() bool {
	linev3.OtherLookup = mayContainGo
	linev4.OtherLookup = mayContainGo
	return true
}()
