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
// reads, tried a few times, then every table named); under a writer mutex,
// flushes add tables' entries and compactions rewrite their inputs'
// entries in place to name the merged table. The sections below argue why
// a concurrent Get never misses a key, including in the middle of a
// compaction.
//
// Both draw a secret seed per filter from crypto/rand and mix it into
// every key hash (the index, also into the hash that places a tag's second
// bucket), so that nobody outside the process can compute which keys
// collide; growth is tied to load, and what cannot be placed goes to a
// small exact stash or, past that, to a correct "maybe".
//
// # Index entries
//
// A slot holds w bits: a tag of m bits, then a prefix-free table code of ℓ
// bits, then w−m−ℓ more fingerprint bits. The tag and the extra bits
// together are the key's fingerprint for that table, so a table with a
// short code keeps a long fingerprint. The tag alone places the key's
// second bucket (alt = (h(tag) − i) mod n, an involution for any n, h a
// strong hash under the index's seed), which lets the writer relocate an
// entry without its key and without knowing its table. One entry is stored
// per (key, table): a key with versions in three tables has three entries,
// each naming its table, and two keys of one table that agree on bucket
// pair and fingerprint share one entry (which is removed only with the
// table, so sharing loses nothing).
//
// # Index table codes
//
// Codes are nodes of a binary code tree of depth D (the node holding the
// all-zero leaf is never used, so no entry is all zeros, the empty slot).
// A table of s keys gets a code of length ℓ = ⌈log2(Σ√s_i / √s)⌉ over the
// tables live at that moment: a false candidate costs the same whichever
// table it names, and the expected number of false candidates per absent
// key, proportional to Σ p_t·2^ℓ_t (p_t the share of entries of table t),
// is smallest under Kraft's inequality when 2^−ℓ_t ∝ √p_t. Huffman codes
// (ℓ_t = −log2 p_t) minimise the code bits per entry instead and give Σ
// p_t·2^ℓ_t = T, the same as fixed-width IDs of log2 T bits; the
// square-root rule gives (Σ√p_t)², which is smaller whenever table sizes
// differ. Stats reports the code bits per entry beside the entropy of the
// table sizes. A table that finds no free code, or some of whose keys
// could not be placed (below), is named by every lookup instead: a correct
// "maybe". The tree has at most 255 codes, so an index of thousands of
// tables would name most of them for every key; it holds at most
// IndexMaxTables, and refuses more (ErrTooManyTables).
//
// Each table's number of entries is counted exactly, in total and per
// segment (insertions, rewrites and clears), so removing a table whose
// entries are all gone costs no pass over the index, and Replace, removals
// and code lengthening visit only the segments holding their tables'
// entries.
//
// # Index layout
//
// A segment is n buckets of four w-bit slots, each bucket stored
// semi-sorted in 4w−4 bits (Fan et al., "Cuckoo Filter: Practically Better
// Than Bloom", §5.2; the encoding of the per-table filters,
// codec/FORMAT.md "Bucket encoding"): the four entries, the empty one
// being 0, are kept in ascending order, so their top nibbles (the top of
// the tag) form a sorted multiset stored as a 12-bit code, followed by the
// entries' low w−4 bits in the same order. Buckets are packed into 64-bit
// words (a bucket may straddle two), with one 32-bit seqlock counter per
// 256 buckets. A lookup compares the tag's nibble with the four decoded
// from the code at once and decodes only the entries whose nibble matches.
// Every change to a bucket rewrites it whole (decode, change one entry,
// sort, encode), so an entry's position in its bucket changes when another
// entry comes or goes: writers name an entry by its bucket and value,
// never by its position. The words a bucket shares with its neighbours are
// rewritten with their neighbours' bits unchanged (only the writer
// writes). The index grows by adding segments, which lookups probe in
// turn; a segment that its tables' removals have emptied is dropped.
// Inserts go to the newest segment (relocating while it is not nearly
// full, then into a free slot of an older one), and Replace moves a key
// whose entries sit only in older segments into the newest when it has
// room, so compactions drain older segments; entries of tables no
// compaction touches stay where they are (an entry does not carry enough
// of its hash to be placed in another segment).
//
// # Why a concurrent Index lookup never misses
//
// Say table T's entries were all added (AddTable or Replace returned)
// before Lookup(k) began, and T has not been removed since. Its entry e
// for k sits in one of k's two buckets i1, i2 of some segment.
//
//  1. The writer moves an entry copy-then-remove: it writes e into the new
//     bucket, then clears it in the old one. At every instant e is in i1
//     or i2 (or both).
//  2. Every bucket write happens inside the bucket group's seqlock: the
//     group's counter is incremented before the write (odd: writing) and
//     after (even). Lookup reads i1's counter, i1, i2's counter, i2, then
//     both counters again, and reads again unless both were even and
//     unchanged. If e is in neither read, then e was in i1 when i2 was
//     read (1) but not when i1 was read, so the copy into i1 wrote after
//     the first counter read and finished before the clear of i2 that
//     hid e, which came before the second reads: i1's counter changed,
//     and Lookup reads again. A bucket spread over two words and read
//     half-written is caught the same way. A bucket write changes one
//     entry (a copy, a clear, or a rewrite of an entry to its new value),
//     or, in a pass over the index, several changes each of which would
//     be safe alone (clears of removed tables' entries, rewrites to a
//     lengthened code); the other entries may move within the bucket but
//     keep their values, and a lookup compares all four.
//  3. A lookup decodes entries with the codebook it loaded first, and
//     reads the codebook again at the end: if another was published in
//     between (a table's code lengthened, its entries rewritten), it reads
//     again. So every entry it matched was written in a format its
//     codebook knows. Where (2) or (3) would read again for the eighth
//     time, the lookup answers every table live in the codebook it loads
//     then instead. T is live in every codebook published from before its
//     entries were written until its removal (4), so T is named.
//  4. Segments are published before entries are put in them, and a
//     segment is dropped only when it holds no entries; the codebook
//     (codes → tables) is published before a table's entries are written
//     and changed only after all of a removed table's entries are cleared.
//     A Lookup that starts after AddTable returned therefore sees T's code,
//     T's segment and T's entry.
//  5. Replace (inputs I merged into M) rewrites entries in place: for each
//     key k of M, in the newest segment holding k's M entry or an input
//     entry of k, it rewrites one of k's input entries to M's value for k
//     in a single bucket write (step 2 makes that write atomic to a
//     lookup), then clears k's other input entries there; a key with no
//     input entry gets a new one. Input entries of k in older segments
//     (other versions of k) are not searched for then: they are cleared
//     after every key of M has its own entry, by k's hash or by the
//     removal of I. The trap is an entry that k shares with another key
//     k' of an input (same buckets and fingerprint): when M's code is
//     shorter than the input's, M's value keeps more fingerprint bits,
//     which differ for k and k', so the rewritten entry is k's, no
//     longer that of k'. Hence, while Replace runs, lookups match M's
//     entries only on the tag, the code and the fingerprint bits that
//     every input's entries keep (the codebook's relax, published before
//     the first rewrite, removed after the last). k' agrees with k on
//     those bits, on the buckets and on the segment, so at every
//     instant k' is named by its own input entry, by
//     M through a relaxed match, or by its own M entry once Replace
//     reaches it. Entries of keys M drops, and input entries of a key in
//     a segment other than the one where it got its M entry, are cleared
//     only after every key of M has its own entry, so no key of M relies
//     on them, and only after a codebook is published: a lookup reads
//     segments one at a time, so it may have read the segment of a key's
//     M entry before that entry was written there (or not have that
//     segment in its list at all) and read the key's cleared input entry
//     after; by (3) it reads again. The inputs' codes are freed last (4).
//
// # Compactions
//
// A store keeps Gets correct across a compaction (inputs I merged into
// table M) in one of two ways. Either AddTable(M), then switch its table
// list from I to M, then RemoveTable for each input once no Get still
// reading the old list can ask for it: simple, but the index holds I's and
// M's entries at once, and each removal is a pass over the index. Or
// switch the table list to M, then Replace(I, M): no extra room and no
// pass, but a Get must treat M named as "each of I may hold the key" (a
// Get still reading the old list reads I, and after Replace only M is
// named), and any input named as "each of I may hold the key" (a key M
// drops has its inputs' entries cleared one at a time), and M as
// unfiltered until Replace returns, and by any Get whose lookup began
// before Replace returned (its keys may be named under I, which that
// Get's list no longer holds). Candidates are returned newest
// first (tables added later are newer; a merged table takes the place of
// its newest input).
//
// # Keys chosen by an adversary
//
// Each Index draws a secret seed from crypto/rand and mixes it into every
// key hash and into h, so bucket pairs cannot be computed from outside. A
// key that still cannot be placed while the newest segment is less than
// 3/4 full, or whose own entries for other tables (its versions) take half
// of its two buckets, goes to a stash of up to 1024 exact entries (full
// 64-bit hashes, sorted, searched only when not empty); beyond that its
// table becomes one that every lookup names. A segment is added only when
// the newest is at least 3/4 full, and is twice the newest (half of it
// when it is the only one, filled by AddTables), so memory stays within
// about 4/(3/4)·(4w−4)/4 bits per entry ever held by live segments,
// whatever the keys.
package dynamic
