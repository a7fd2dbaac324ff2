package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// resealV1 rewrites a version-1 block's header check and CRC after an
// edit, so that only Decode's structural checks stand between the damage
// and acceptance.
func resealV1(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[28:], blockv1.HeaderCheck(b))
	n := len(b)
	binary.LittleEndian.PutUint32(b[n-4:], frame.Checksum(b[:n-4]))
	return b
}

// buildV1Blocks builds a version-1 block of many small blocks, so that its
// offset table has room to be made inconsistent.
func buildV1Blocks(t *testing.T, keys [][]byte) ([]byte, blockv1.Header) {
	t.Helper()
	b := NewBuilder(Options{Version: 1, BitsPerKey: 10, Seed: 17})
	b.blockKeys = 8
	for _, k := range keys {
		b.Add(k)
	}
	block := b.Finish(nil)
	var h blockv1.Header
	if blockv1.ReadHeader(block, &h) != blockv1.HeaderOK || h.Blocks < 3 || h.DeltaW == 0 {
		t.Fatalf("want a version-1 block of several blocks with an offset table, got %+v", h)
	}
	return block, h
}

// setOffset writes the raw offset-table field of block i.
func setOffset(block []byte, h *blockv1.Header, i uint32, raw uint64) {
	bitpack.Write(block, h.OffStart*8+uint64(i)*uint64(h.DeltaW), uint(h.DeltaW), raw)
}

func offset(block []byte, h *blockv1.Header, i uint32) uint64 {
	return bitpack.Read(block, h.OffStart*8+uint64(i)*uint64(h.DeltaW), uint(h.DeltaW))
}

// TestDecodeRejectsSealedInconsistencies makes blocks whose header check,
// trailer copies and CRC all match but whose contents contradict
// themselves, as a buggy writer or a deliberate forger would: each must be
// rejected by Decode with ErrCorrupt. The checksum cannot catch them, so
// every structural check of Decode is on its own here.
func TestDecodeRejectsSealedInconsistencies(t *testing.T) {
	keys := testkeys.Random(2000, 16, 71)
	v1, h := buildV1Blocks(t, keys)
	v2 := Build(keys, Options{BitsPerKey: 10, Seed: 72})
	b := NewBuilder(Options{})
	b.rejectSeeds = frame.Attempts
	b.Add([]byte("k"))
	alwaysMaybe := b.Finish(nil)

	type damaged struct {
		name  string
		block []byte
	}
	var cases []damaged
	edit1 := func(name string, edit func(b []byte) bool) {
		bad := bytes.Clone(v1)
		if !edit(bad) {
			t.Fatalf("%s: this block offers no place for the damage", name)
		}
		cases = append(cases, damaged{name, resealV1(bad)})
	}
	// A block that starts before the one before it.
	edit1("v1 offsets going backwards", func(b []byte) bool {
		top := uint64(1)<<h.DeltaW - 1
		for i := uint32(1); i < h.Blocks; i++ {
			setOffset(b, &h, i, top)
			setOffset(b, &h, i+1, 0)
			if h.BlockStart(b, i+1) < h.BlockStart(b, i) && h.BlockStart(b, i+1) >= 0 {
				return true
			}
			setOffset(b, &h, i, offset(v1, &h, i))
			setOffset(b, &h, i+1, offset(v1, &h, i+1))
		}
		return false
	})
	// The last block ending before the bucket array does.
	edit1("v1 blocks ending short of the buckets", func(b []byte) bool {
		raw := offset(b, &h, h.Blocks)
		if raw == 0 {
			return false
		}
		setOffset(b, &h, h.Blocks, raw-1)
		return true
	})
	edit1("v1 header counting one key more", func(b []byte) bool {
		binary.LittleEndian.PutUint32(b[8:], h.Keys+1)
		return true
	})
	edit1("v1 hash kind 2", func(b []byte) bool {
		b[7] = 2
		return true
	})
	// Two slots of one bucket with equal nibbles, their low bits swapped:
	// the same set of fingerprints, but not in the canonical order the
	// writer produces (equal contents must give equal bytes).
	edit1("v1 bucket out of canonical order", func(b []byte) bool {
		f := uint(h.FPBits)
		low := f - 4
		bb := uint64(h.BucketBits())
		for i := uint64(0); i < uint64(h.Buckets); i++ {
			off := h.BktStart*8 + i*bb
			w := bitpack.Read(b, off, uint(bb))
			fps, _ := semisort.Decode(w, f)
			for j := 0; j+1 < bucket.Slots; j++ {
				if fps[j] != 0 && fps[j]>>low == fps[j+1]>>low && fps[j] != fps[j+1] {
					lo1 := uint64(fps[j]) & (1<<low - 1)
					lo2 := uint64(fps[j+1]) & (1<<low - 1)
					bitpack.Write(b, off+12+uint64(j)*uint64(low), low, lo2)
					bitpack.Write(b, off+12+uint64(j+1)*uint64(low), low, lo1)
					return true
				}
			}
		}
		return false
	})
	v2keys := bytes.Clone(v2)
	n := len(v2keys)
	binary.LittleEndian.PutUint32(v2keys[n-40:], binary.LittleEndian.Uint32(v2keys[n-40:])+1)
	cases = append(cases, damaged{"v2 trailer counting one key more", resealV2(v2keys, func([]byte) {})})
	am := bytes.Clone(alwaysMaybe)
	binary.LittleEndian.PutUint32(am, 1)
	cases = append(cases, damaged{"v2 always-maybe block recording a key", resealV2(am, func([]byte) {})})

	for _, c := range cases {
		if _, err := Decode(c.block); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", c.name, err)
		}
	}

	// A version-2 trailer damaged in one copy is corruption, not a block
	// of a newer version: a reader must not tell its user to upgrade.
	// (Damage that makes the version byte itself read higher is reported
	// as that version: the reader cannot tell the two apart.)
	for bit := 0; bit < 8*32; bit++ {
		if bit/8 == 4 {
			continue
		}
		bad := bytes.Clone(v2)
		bad[n-36+bit/8] ^= 1 << (bit % 8)
		if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
			t.Fatalf("trailer bit %d flipped: Decode = %v, want ErrCorrupt only", bit, err)
		}
	}
}

// TestOtherHashKindAnswersMaybe queries blocks of both versions and both
// hash kinds through the other kind's lookup: the block's positions were
// derived from hashes the lookup does not have, so it can only answer
// "maybe", never "absent".
func TestOtherHashKindAnswersMaybe(t *testing.T) {
	keys := testkeys.Random(3000, 16, 73)
	absent := testkeys.Absent(2000, 74)
	for _, v := range []int{1, 2, 3} {
		key64 := Build(keys, Options{Version: v, BitsPerKey: 10})
		b := NewBuilder(Options{Version: v, Hash: HashHost32, BitsPerKey: 10})
		for _, k := range keys {
			b.AddHash32(uint32(keyhash.Hash(k)))
		}
		host32 := b.Finish(nil)
		for _, k := range absent {
			if !MayContain(host32, k) {
				t.Fatalf("v%d: a key lookup in a host-hash block answered absent", v)
			}
			if !MayContainHash32(key64, uint32(keyhash.Hash(k))) {
				t.Fatalf("v%d: a host-hash lookup in a key-hash block answered absent", v)
			}
		}
	}
}

// TestV1OffsetOutsideBucketsAnswersMaybe damages a version-1 offset table
// so that a block seems to start before the bucket array (the first block)
// or to end past it (the last block): lookups in that block must answer
// "maybe" (they check the range on every call), not read outside the
// buckets and answer from whatever lies there.
func TestV1OffsetOutsideBucketsAnswersMaybe(t *testing.T) {
	keys := testkeys.Random(2000, 16, 75)
	block, h := buildV1Blocks(t, keys)
	probes := append(testkeys.Absent(20_000, 76), keys...)
	for _, c := range []struct {
		name    string
		entry   uint32 // offset-table field damaged
		raw     uint64
		blk     uint32 // the block whose range it breaks
		outside func(start int64) bool
	}{
		{"first block starting before the buckets", 0, 0, 0, func(s int64) bool { return s < 0 }},
		{"last block ending past the buckets", h.Blocks, uint64(1)<<h.DeltaW - 1, h.Blocks - 1, func(e int64) bool { return e > int64(h.Buckets) }},
	} {
		bad := bytes.Clone(block)
		setOffset(bad, &h, c.entry, c.raw)
		if !c.outside(h.BlockStart(bad, c.entry)) {
			t.Fatalf("%s: the damage does not reach outside the buckets", c.name)
		}
		reached := 0
		for _, k := range probes {
			x := blockv1.Position(keyhash.Hash(k), frame.HashKey64, h.Seed)
			if blk, _ := keyhash.Reduce(keyhash.Hi(x), h.Blocks); blk != c.blk {
				continue
			}
			reached++
			if !MayContain(bad, k) {
				t.Fatalf("%s: key %q of the damaged block answered absent", c.name, k)
			}
		}
		if reached < 20 {
			t.Fatalf("%s: only %d probes reached the damaged block", c.name, reached)
		}
	}
}
