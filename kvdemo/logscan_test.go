package kvdemo

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// testChunk is the read chunk of logs the tests scan from memory: small,
// so that records straddle the window's edges and every refill path runs.
const testChunk = 64

// scanLog scans a log held in memory through the same windowed reader
// Open uses on files.
func scanLog(data []byte, skip bool, fn func(walRecord) error) (logScan, error) {
	r := &logReader{f: bytes.NewReader(data), size: int64(len(data)), chunk: testChunk}
	return r.scan(skip, fn)
}

// parseRecord decodes the record at off of a log held in memory.
func parseRecord(data []byte, off int64, minSeq uint64) (walRecord, int64, bool) {
	r := &logReader{f: bytes.NewReader(data), size: int64(len(data)), chunk: testChunk}
	rec, n, ok, err := r.parse(off, minSeq)
	return rec, n, ok && err == nil
}

// referenceScan is the whole-log scan, written over a byte slice the
// plain way: the oracle the windowed scan must agree with.
func referenceScan(data []byte, skip bool) (sc logScan, seqs []uint64) {
	parse := func(off int64, minSeq uint64) (uint64, int64, bool) {
		if int64(len(data))-off < walHeader+walFixed {
			return 0, 0, false
		}
		hdr := data[off : off+walHeader]
		l := binary.LittleEndian.Uint32(hdr[4:])
		if l < walFixed || l > walMaxRec || int64(l) > int64(len(data))-off-walHeader {
			return 0, 0, false
		}
		body := data[off+walHeader : off+walHeader+int64(l)]
		kind := recordKind(body[8])
		keyLen := binary.LittleEndian.Uint32(body[9:])
		seq := binary.LittleEndian.Uint64(body)
		if (kind != kindPut && kind != kindDel) || uint64(keyLen) > uint64(l-walFixed) || (minSeq != 0 && seq <= minSeq) {
			return 0, 0, false
		}
		if crc32.Update(crc32.Checksum(hdr[4:], crcTable), crcTable, body) != binary.LittleEndian.Uint32(hdr) {
			return 0, 0, false
		}
		return seq, walHeader + int64(l), true
	}
	find := func(off int64, minSeq uint64) int64 {
		budget := 64*int64(len(data)) + 1<<20
		for ; off+walHeader+walFixed <= int64(len(data)); off++ {
			l := int64(binary.LittleEndian.Uint32(data[off+4:]))
			if l < walFixed || l > walMaxRec || l > int64(len(data))-off-walHeader {
				continue
			}
			if budget -= l; budget < 0 {
				return -2
			}
			if _, _, ok := parse(off, minSeq); ok {
				return off
			}
		}
		return -1
	}
	sc = logScan{size: int64(len(data)), damageAt: -1, nextValid: -1}
	for off := int64(0); off < sc.size; {
		if seq, n, ok := parse(off, 0); ok {
			seqs = append(seqs, seq)
			sc.lastSeq = seq
			off += n
			continue
		}
		next := find(off+1, sc.lastSeq)
		if sc.damageAt < 0 {
			sc.damageAt, sc.nextValid, sc.reach = off, next, sc.lastSeq
		}
		if !skip || next < 0 {
			break
		}
		off = next
	}
	if sc.damageAt < 0 {
		sc.reach = sc.lastSeq
	}
	return sc, seqs
}

// damagedLog is a log of random records, then damaged at random: bits
// flipped, bytes zeroed, a stretch of garbage or zeros spliced in, cut.
func damagedLog(rng *rand.Rand) []byte {
	var recs []walRecord
	for i := range 1 + rng.IntN(40) {
		r := walRecord{seq: uint64(10 + i), kind: kindPut, key: []byte{byte('a' + rng.IntN(26)), byte(i)}}
		r.value = bytes.Repeat([]byte{byte(rng.IntN(3))}, rng.IntN(300))
		if rng.IntN(5) == 0 {
			r.kind, r.value = kindDel, nil
		}
		recs = append(recs, r)
	}
	b := encodeRecords(recs...)
	for range rng.IntN(4) {
		if len(b) == 0 {
			break
		}
		at := rng.IntN(len(b))
		switch rng.IntN(4) {
		case 0:
			b[at] ^= 1 << rng.IntN(8)
		case 1:
			clear(b[at:min(len(b), at+1+rng.IntN(40))])
		case 2:
			splice := make([]byte, rng.IntN(200))
			if rng.IntN(2) == 0 {
				for i := range splice {
					splice[i] = byte(rng.Uint32())
				}
			}
			b = append(b[:at:at], append(splice, b[at:]...)...)
		default:
			b = b[:at]
		}
	}
	return b
}

// TestLogScanMatchesWholeLogScan: the windowed scan, with read chunks
// from smaller than a record header to larger than the log, finds the
// same records, damage, next intact record and reach as a scan of the
// whole log in memory, on thousands of randomly damaged logs.
func TestLogScanMatchesWholeLogScan(t *testing.T) {
	race.SkipLong(t)
	rng := rand.New(rand.NewPCG(7, 27))
	for n := range 3000 {
		data := damagedLog(rng)
		for _, skip := range []bool{false, true} {
			want, wantSeqs := referenceScan(data, skip)
			for _, chunk := range []int{1, 21, 64, 1000, logChunk} {
				r := &logReader{f: bytes.NewReader(data), size: int64(len(data)), chunk: chunk}
				var seqs []uint64
				got, err := r.scan(skip, func(rec walRecord) error { seqs = append(seqs, rec.seq); return nil })
				if err != nil {
					t.Fatal(err)
				}
				if got != want || !slicesEqual(seqs, wantSeqs) {
					t.Fatalf("log %d (%d bytes), skip %v, chunk %d: scan %+v records %v; whole-log scan %+v records %v",
						n, len(data), skip, chunk, got, seqs, want, wantSeqs)
				}
			}
		}
	}
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
