package linev4

import "github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"

// MayContainKey64 is codec.MayContain for a version-4 block, in
// assembly (probe_amd64.s): the key's keyhash.MulHash, then Lookup's
// word-wise path for a HashKey64 block, its primary line, extra column,
// threshold and secondary line. It answers only where every check
// Lookup makes has passed; for everything else (another version, a
// damaged block, a host-hash or always-maybe block, a processor without
// POPCNT) it jumps to OtherLookup with its
// arguments as they came, so that a caller pays for one call. In Go, a
// loop of lookups spent more time on its calls (the hash, the trailer,
// a function per line) and on GOAMD64=v1's POPCNT checks than on the
// lines (docs/performance.md, "Version 4's assembly lookup", has the
// figures).
//
// codec.MayContain (codec/reader_amd64.s) jumps here for a block whose
// trailer's version byte is 4.
//
//go:noescape
func MayContainKey64(block, key []byte) bool

// OtherLookup is the Go lookup of every version (codec's), which
// MayContainKey64 hands what its assembly does not settle: set once by
// codec before any lookup.
var OtherLookup func(block, key []byte) bool

// mayContainOther is where MayContainKey64's assembly jumps: a Go
// function of its signature, which an assembly jump can reach.
func mayContainOther(block, key []byte) bool { return OtherLookup(block, key) }

// idWord is a version-4 trailer's id (magic and version byte), for the
// assembly.
var idWord = frame.IDWord(Version)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// UsePOPCNT reports whether this processor has POPCNT (CPUID 1, ECX bit
// 23), the one instruction MayContainKey64's assembly needs beyond
// x86-64's base set.
var UsePOPCNT = func() bool {
	if maxLeaf, _, _, _ := cpuid(0, 0); maxLeaf < 1 {
		return false
	}
	_, _, c, _ := cpuid(1, 0)
	return c&(1<<23) != 0
}()
