package codec

import (
	"encoding/binary"
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// mayContainGo is MayContain in Go: on amd64 where the assembly
// (linev3.MayContainKey64, linev4.MayContainKey64) leaves the lookup,
// elsewhere MayContain itself.
func mayContainGo(block, key []byte) bool {
	h := keyhash.MulHash(key)
	// linedLookup, written out: a call level less under the lookup
	// speeds a loop of cold version-3 lookups.
	var maybe, ok bool
	if frame.TrailerSays(block, linev2.Version) {
		maybe, ok = linev2.Lookup(block, h, frame.HashKey64)
	} else if frame.TrailerSays(block, linev4.Version) {
		maybe, ok = linev4.Lookup(block, h, frame.HashKey64)
	} else {
		maybe, ok = linev3.Lookup(block, h, frame.HashKey64)
	}
	if ok {
		return maybe
	}
	return blockv1.MayContain(block, keyhash.Hash(key), frame.HashKey64)
}

// linedLookup is the lookup in a version-3 or version-2 block; ok is false
// for a block that is neither. The version byte of their common trailer
// frame picks the one lookup to run: in a loop of lookups over cold
// blocks, a lookup of the other version tried first, failing on the
// trailer, made the right one cost half as much again (FORMAT.md: a block
// is version 3 or 2 only if that byte says so).
func linedLookup(block []byte, h uint64, kind HashKind) (maybe, ok bool) {
	if frame.TrailerSays(block, linev2.Version) {
		return linev2.Lookup(block, h, uint8(kind))
	}
	if frame.TrailerSays(block, linev4.Version) {
		return linev4.Lookup(block, h, uint8(kind))
	}
	return linev3.Lookup(block, h, uint8(kind))
}

// MayContainHash32 is MayContain for a HashHost32 block (built with
// AddHash32) and the host's 32-bit hash of the key. Like MayContain it reads
// the block in place, allocates nothing, is safe for concurrent use, and
// answers true for a block it cannot trust or of the other hash kind.
func MayContainHash32(block []byte, h uint32) bool {
	if maybe, ok := linedLookup(block, uint64(h), HashHost32); ok {
		return maybe
	}
	return blockv1.MayContain(block, uint64(h), frame.HashHost32)
}

// Filter is a decoded, verified filter block. It references the block's
// bytes (no copy); the caller must keep them unchanged while it is used.
type Filter struct {
	block []byte
	info  Info
}

// Decode verifies a whole filter block: header, exact length, checksum,
// every bucket's encoding, that the stored fingerprints number exactly the
// recorded keys, and (version 1) the offset table. Errors wrap ErrCorrupt,
// or ErrVersion for a block of a version this package does not know, and
// say what is wrong.
func Decode(block []byte) (*Filter, error) {
	var h4 linev4.Header
	if linev4.Read(block, &h4) {
		in, err := linev4.Decode(block, &h4)
		if err != nil {
			return nil, err
		}
		info := commonInfo(4, in.Common)
		info.V4 = v4Info(in)
		return &Filter{block: block, info: info}, nil
	}
	var h3 linev3.Header
	if linev3.Read(block, &h3) {
		in, err := linev3.Decode(block, &h3)
		if err != nil {
			return nil, err
		}
		info := commonInfo(3, in.Common)
		info.V3 = V3Info{Lines: in.Lines, RemainderBits: int(in.Shape.R), Quotients: int(in.Shape.Q),
			LineCapacity: int(in.Shape.K), SeededLines: in.SeededLines, Load: in.Load}
		return &Filter{block: block, info: info}, nil
	}
	var h2 linev2.Header
	if linev2.Read(block, &h2) {
		in, err := linev2.Decode(block, &h2)
		if err != nil {
			return nil, err
		}
		info := commonInfo(2, in.Common)
		info.V2 = V2Info{Lines: in.Lines, WideLines: in.WideLines, Buckets: in.Buckets, FingerprintBits: in.FingerprintBits, Load: in.Load}
		return &Filter{block: block, info: info}, nil
	}
	if n := len(block); n >= frame.TrailerSize && binary.LittleEndian.Uint32(block[n-36:]) == frame.MagicWord && block[n-32] > NewestVersion {
		return nil, fmt.Errorf("%w %d (this reader knows 1 to 4)", ErrVersion, block[n-32])
	}
	in, err := blockv1.Decode(block)
	if err != nil {
		return nil, err
	}
	info := commonInfo(1, in.Common)
	info.V1 = V1Info{Blocks: in.Blocks, Buckets: in.Buckets, FingerprintBits: in.FingerprintBits, Load: in.Load}
	return &Filter{block: block, info: info}, nil
}

// commonInfo is the part of Info every version shares.
func commonInfo(version int, c frame.Common) Info {
	return Info{Version: version, Hash: HashKind(c.Kind), Keys: int(c.Keys), Seed: c.Seed, Bytes: c.Bytes,
		BitsPerKey: c.BitsPerKey, ExpectedFPR: c.ExpectedFPR, AlwaysMaybe: c.AlwaysMaybe}
}

// MayContain is the package-level MayContain on the decoded block: for a
// HashKey64 block (Info().Hash), whether key may be among its keys; a
// HashHost32 block answers true (use MayContainHash32). A Filter is
// read-only: any number of goroutines may query it at once.
func (f *Filter) MayContain(key []byte) bool { return MayContain(f.block, key) }

// MayContainHash32 is the package-level MayContainHash32 on the decoded
// block: for a HashHost32 block, whether a key whose host hash is h may be
// among its keys; a HashKey64 block answers true (use MayContain).
func (f *Filter) MayContainHash32(h uint32) bool { return MayContainHash32(f.block, h) }

// Info describes the filter.
func (f *Filter) Info() Info { return f.info }
