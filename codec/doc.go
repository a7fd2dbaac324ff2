// Package codec is lsmcuckoo's static filter: a compact cuckoo filter built
// once from all keys of a table, serialized into the table, and queried
// straight from its bytes.
//
// Build a block with a Builder (or Build), store the bytes, and test keys
// with MayContain, which reads the block in place without copying or
// allocating. Decode verifies a block completely (trailer or header,
// layout, checksum, every bucket) and returns a descriptive error; use it
// where a block is loaded, MayContain where it is probed.
//
// # Design (format version 2, the default)
//
//   - One cache line per lookup. The filter is a run of 64-byte lines; a
//     key's line and both of its candidate buckets come from its hash, so a
//     negative lookup reads one line, as a blocked bloom filter does. Lines
//     receive uneven numbers of keys: a key that does not fit its line goes
//     to two buckets of a secondary line chosen by its hash and sets one of
//     its line's overflow bits; a negative lookup reads the second line
//     only when its bit is set (the overflow idea of Breslow and Jayasena,
//     "Morton Filters: Faster, Space-Efficient Cuckoo Filters via Biasing,
//     Compression, and Decoupled Logical Sparsity").
//   - Any size: the line count is whatever the budget buys, never rounded
//     to a power of two.
//   - Semi-sorted buckets: four fingerprints of f bits in 4f-4 bits (Fan,
//     Andersen, Kaminsky and Mitzenmacher, "Cuckoo Filter: Practically
//     Better Than Bloom").
//   - Offline placement: the builder knows every key, partitions them by
//     line, and places each line while it is in cache (greedy, then a
//     breadth-first search for a chain of moves), choosing which keys
//     overflow so that few overflow bits are set.
//   - Repeats (the versions of an MVCC key) take one slot.
//   - Keys chosen by an adversary: every block draws a secret seed from
//     crypto/rand, and the position hash is universal in it, so keys cannot
//     be aimed at one line without knowing the seed; a placement that
//     fails anyway is retried under a new seed and in more lines, a bounded
//     number of times, and past that the block answers "maybe" for every
//     key (BuildStats.Fallback). Keys with equal 64-bit hashes cannot be
//     separated by any seed; they share a slot, which costs false
//     positives, never a false negative.
//   - Fail open: a block that is truncated, damaged, of an unknown version
//     or of another hash kind answers "maybe", never "absent", and never
//     panics.
//
// Format version 1 (Options.Version = 1) is the denser layout with an
// offset table and variable-size blocks; its lookups read two dependent
// cache lines. Both versions are read forever. The byte formats are
// specified in FORMAT.md beside this file, with the compatibility promise;
// measured sizes, rates and speeds are in the repository's README.
package codec
