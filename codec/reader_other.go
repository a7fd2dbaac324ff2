//go:build !amd64

package codec

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
func MayContain(block, key []byte) bool { return mayContainGo(block, key) }
