// Package dynamic holds lsmcuckoo's mutable, concurrent cuckoo filters:
// the ones that change while they are read, as opposed to package codec's
// static blocks, built once per table and then only queried. It imports
// neither Pebble nor Badger, so a store that wants only a memtable filter
// or a store-wide index takes only this package and the module's internal
// hashing.
//
// MemFilter sits in front of a memtable: goroutines Add keys as they are
// written and ask MayContain before searching, with no lock on any path.
// It grows rather than lose a key, has no Delete, and bounds its memory by
// the number of distinct keys whatever the keys (see its documentation).
//
// Index is one filter for a whole store: a cuckoo table of (fingerprint,
// table code) entries, after Dayan & Twitto's Chucky (SIGMOD 2021), so a
// Get probes one filter and reads only the tables it names instead of
// probing a filter per table. Lookups take no lock and never wait (seqlock
// reads, tried a few times, then every table named);
// under a writer mutex, flushes add tables' entries and compactions
// rewrite their inputs' entries in place to name the merged table. Its
// documentation argues why a concurrent Get never misses a key, including
// in the middle of a compaction.
//
// Both draw a secret seed per filter from crypto/rand and mix it into every
// key hash (the index, also into the hash that places a tag's second
// bucket), so that nobody outside the process can compute which keys
// collide; growth is tied to load, and what cannot be placed goes to a
// small exact stash or, past that, to a correct "maybe".
package dynamic
