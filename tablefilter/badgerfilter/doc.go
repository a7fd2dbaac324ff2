// Package badgerfilter is lsmcuckoo's per-table filter for stores built on
// Badger's table format: a drop-in for Badger's y.Filter, built from the
// same 32-bit key hashes Badger's table builder collects, and answering
// MayContain(hash) and MayContainKey(key) exactly where y.Filter does.
// Badger v4 has no hook to replace its bloom filter, so this is for a store
// that embeds Badger's table format and decides where filters are built
// and probed:
//
//	f := badgerfilter.New(hashes, 10) // hashes: y.Hash(y.ParseKey(k)) per entry added
//	if !f.MayContainKey(userKey) {
//		// absent: skip the table
//	}
//
// It imports Badger (for y.Hash) and package codec, and nothing of Pebble;
// the Pebble policy is package tablefilter. The bytes are a codec block of
// hash kind codec.HashHost32: a store that wants no Badger import at all
// builds the same bytes with codec (Options.Hash = codec.HashHost32,
// Builder.AddHash32, codec.MayContainHash32).
//
// Readers answer "maybe" for anything they cannot trust: a truncated or
// malformed block, a damaged trailer, a block of another format version or
// hash kind. They never allocate, never retain the block, and are safe for
// concurrent use. A bit flipped inside a block's buckets is not visible to
// a lookup (it would take a checksum pass over the block per probe) and can
// turn a present key absent: keep the filter where Badger keeps its bloom
// filter, in the checksummed table index, or verify each block once with
// codec.Decode, which checks the block's own CRC-32C.
package badgerfilter
