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
// # Design (format version 3, the default)
//
//   - One cache line per lookup. The filter is a run of 64-byte lines; a
//     key's line comes from its hash, so a negative lookup reads one line,
//     as a blocked bloom filter does. A line is a small quotient filter:
//     a unary header of how many of its keys hold each quotient, then
//     their remainders in quotient order (the pocket dictionary of Even,
//     Even and Morrison, "Prefix Filter: Practically and Theoretically
//     Better Than Bloom").
//   - Lines receive uneven numbers of keys. A full line keeps the keys of
//     its lowest quotients and sends the rest to a secondary line chosen
//     by their hash, recording one threshold: a negative lookup reads the
//     second line only when its quotient is at or past it (the overflow
//     idea of Breslow and Jayasena, "Morton Filters: Faster,
//     Space-Efficient Cuckoo Filters via Biasing, Compression, and
//     Decoupled Logical Sparsity", as a prefix filter records it).
//   - Any size: the line count is whatever the budget buys, never rounded
//     to a power of two; the builder picks the remainder width, quotients
//     and line capacity of lowest modelled false-positive rate among those
//     whose lines leave few negative lookups reading a second line, which
//     is what keeps a cold lookup to about one cache miss (or, with
//     Options.Densest, among all: fuller lines, a lower rate, more second
//     lines).
//   - Offline placement: the builder knows every key, groups them by line
//     and sorts each line's by quotient while it is in cache.
//   - Repeats (the versions of an MVCC key, which arrive one after
//     another) are dropped as they arrive.
//   - Keys chosen by an adversary: every block draws a secret seed from
//     crypto/rand, and the position hash is universal in it, so keys cannot
//     be aimed at one line without knowing the seed; a placement that
//     fails anyway is retried under a new seed and in more lines, a bounded
//     number of times, and past that the block answers "maybe" for every
//     key (BuildStats.Fallback). Keys with equal 64-bit hashes cannot be
//     separated by any seed; they are one key to the filter, which costs
//     false positives, never a false negative.
//   - Fail open: a block that is truncated, damaged, of an unknown version
//     or of another hash kind answers "maybe", never "absent", and never
//     panics.
//
// The default writer writes version 2 instead where version 3 would filter
// worse (a budget of a few bits per key); Options.Version asks for an
// older format, or for version 4, the lowest rate for a budget: each line
// the solution of its keys' linear equations over GF(2), about r bits per
// key for a rate of 2^-r where version 3 spends about two more, at the
// price of more negative lookups reading a second line. Format version 2 cuts each line into buckets of four
// semi-sorted fingerprints (Fan, Andersen, Kaminsky and Mitzenmacher,
// "Cuckoo Filter: Practically Better Than Bloom") with overflow bits, and
// places keys by a breadth-first search for moves inside a line. Format
// version 1 is the denser layout with an offset table and variable-size
// blocks; its lookups read two dependent cache lines. FormatVersion lists
// what each version adds. All four versions are read forever; the byte
// formats are specified in FORMAT.md beside this file, with the
// compatibility promise, and each version's layout, lookup, checks and
// encoder live in an internal package of their own, so that a change to
// one encoding never touches another.
package codec
