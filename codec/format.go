package codec

import "github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"

// The internal packages number the hash kinds and take the default budget
// as codec does: a compile-time check that the numbers agree.
var _ = [1]struct{}{}[HashKey64^frame.HashKey64|HashHost32^frame.HashHost32|(DefaultBitsPerKey^frame.DefaultBitsPerKey)]

// FormatVersion is the version this package writes by default. Readers
// read every version below and answer "maybe" for any other; FORMAT.md
// has the bytes and the compatibility promise. What each version adds:
//
//   - 1: cuckoo buckets of four semi-sorted fingerprints in blocks of
//     about 1024 keys, each block as many buckets as its keys need, and an
//     offset table saying where each block starts (dense; a lookup reads
//     the header, the offset table and then its buckets).
//   - 2: the same buckets in 64-byte lines, a key's two buckets in one
//     line, overflow bits sending a full line's keys to a secondary line,
//     and a 40-byte trailer frame checked on every lookup (one cache line
//     per negative lookup; a secret seed per block).
//   - 3: each line a small quotient filter (a unary header of quotient
//     runs, then remainders) with one overflow threshold, in the same
//     trailer frame, the primary line computable before the trailer is
//     read (denser than version 2 at 7 bits per key and more).
//   - 4: each line the solution of its keys' linear equations over GF(2)
//     (r columns of M bits and a partial column), with version 3's
//     threshold and trailer frame: a rate of about 2^-r for r bits per
//     key plus the lines' slack; written on request (Options.Version 4,
//     NewestVersion).
//
// The default writer writes version 2 where version 3 would filter worse
// (a budget of a few bits per key); Options.Version asks for 1 or 2.
const FormatVersion = 3

// HashKind records which hash a block's keys were reduced to. A block must be
// queried with the same kind it was built from: a lookup with the other kind
// answers "maybe" rather than guess.
type HashKind uint8

const (
	// HashKey64 blocks hold 64-bit hashes of the keys themselves: xxhash64
	// in version 1, MulHash in versions 2 and 3 (FORMAT.md).
	HashKey64 HashKind = 0
	// HashHost32 blocks hold 32-bit hashes computed by a host store (Badger's
	// y.Hash). Only 32 bits reach the filter, which puts a floor of about
	// keys/2^32 under the false-positive rate.
	HashHost32 HashKind = 1
)

// Errors returned by Decode, wrapped with a description of what is wrong.
var (
	// ErrCorrupt: the bytes are not a well-formed filter block.
	ErrCorrupt = frame.ErrCorrupt
	// ErrVersion: a filter block of a format version this package does not
	// read (a newer writer's).
	ErrVersion = frame.ErrVersion
)
