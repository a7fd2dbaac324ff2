package kvdemo

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// holeLog makes a log with zero runs (some block-sized, as holes) spliced
// in before and between records, records of many sizes, and damage.
func holeLog(rng *rand.Rand) []byte {
	var b []byte
	seq := uint64(5)
	for range 1 + rng.IntN(12) {
		if rng.IntN(3) == 0 {
			b = append(b, make([]byte, rng.IntN(10000))...)
		}
		r := walRecord{seq: seq, kind: kindPut, key: []byte{byte(rng.IntN(256)), 0, 0}}
		seq += uint64(1 + rng.IntN(3))
		switch rng.IntN(4) {
		case 0:
			r.value = make([]byte, rng.IntN(5000)) // zeros inside the record
		case 1:
			r.value = bytes.Repeat([]byte{1}, rng.IntN(9000))
		default:
			r.value = []byte{byte(rng.IntN(3))}
		}
		b = append(b, encodeRecords(r)...)
	}
	for range rng.IntN(3) {
		at := rng.IntN(len(b))
		switch rng.IntN(3) {
		case 0:
			b[at] ^= 1 << rng.IntN(8)
		case 1:
			clear(b[at:min(len(b), at+1+rng.IntN(6000))])
		default:
			b = b[:at]
		}
		if len(b) == 0 {
			break
		}
	}
	return b
}

// zeroBlocks reports the first offset at or after off in a block (of
// size blk) holding a nonzero byte: a filesystem with holes where data's
// zero blocks are.
func zeroBlocks(data []byte, blk int64) func(int64) (int64, bool) {
	return func(off int64) (int64, bool) {
		for b := off / blk * blk; b < int64(len(data)); b += blk {
			if firstNonZero(data[b:min(int64(len(data)), b+blk)]) >= 0 {
				return max(b, off), true
			}
		}
		return 0, false
	}
}

// TestLogScanSkippingHolesMatchesWholeLogScan: the search for an intact
// record after damage, skipping what the file reports as holes (here
// every all-zero block, at block sizes from one byte to a page), finds the
// same records, damage and next intact record as the whole-log scan, on
// logs with zero runs before, between and inside records.
func TestLogScanSkippingHolesMatchesWholeLogScan(t *testing.T) {
	race.SkipLong(t)
	rng := rand.New(rand.NewPCG(11, 29))
	for n := range 500 {
		data := holeLog(rng)
		for _, skip := range []bool{false, true} {
			want, wantSeqs := referenceScan(data, skip)
			for _, chunk := range []int{1, 21, 100, 4096, logChunk} {
				for _, blk := range []int64{0, 1, 8, 512, 4096} {
					r := &logReader{f: bytes.NewReader(data), size: int64(len(data)), chunk: chunk}
					if blk > 0 {
						r.nextData = zeroBlocks(data, blk)
					}
					var seqs []uint64
					got, err := r.scan(skip, func(rec walRecord) error { seqs = append(seqs, rec.seq); return nil })
					if err != nil {
						t.Fatal(err)
					}
					if got != want || !slicesEqual(seqs, wantSeqs) {
						t.Fatalf("log %d (%d bytes), skip %v, chunk %d, blk %d: scan %+v records %v; whole-log scan %+v records %v",
							n, len(data), skip, chunk, blk, got, seqs, want, wantSeqs)
					}
				}
			}
		}
	}
}

// TestIntactRecordAfterHoleRefuses: damage, then a 64 MiB hole, then an
// intact later record at offsets around a block's edges: check reports
// it and Open refuses (the damage is in the middle of the history); the
// hole skipping must not make the log look like a torn tail to cut.
func TestIntactRecordAfterHoleRefuses(t *testing.T) {
	for _, garbage := range []int{0, 5000} {
		for _, skew := range []int64{0, 3, 4092} {
			dir, log, size := storeWithAckedLog(t)
			f, err := os.OpenFile(log, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			g := bytes.Repeat([]byte{0xA5}, garbage)
			f.WriteAt(g, size)
			at := (size+int64(garbage)+(64<<20))/4096*4096 + skew
			rec := encodeRecords(walRecord{seq: 1 << 40, kind: kindPut, key: []byte("late"), value: []byte("v")})
			if _, err := f.WriteAt(rec, at); err != nil {
				t.Fatal(err)
			}
			f.Close()
			var out bytes.Buffer
			res, err := Check(dir, &out, nil)
			if err != nil || res.Problems == 0 {
				t.Errorf("garbage %d skew %d: check %+v %v\n%s", garbage, skew, res, err, out.String())
			}
			db, err := Open(dir, &Options{Logger: quiet()})
			if err == nil {
				db.Close()
				t.Fatalf("garbage %d skew %d: Open accepted a log with an intact record after damage", garbage, skew)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("an intact record follows at offset %d", at)) {
				t.Errorf("garbage %d skew %d: %v", garbage, skew, err)
			}
		}
	}
}

// TestKeptTailEqualsLogTail: a torn tail mixing garbage, written
// zeros at unaligned offsets, a hole and zeros at its very end is kept
// in lost/ equal byte for byte to what the log held.
func TestKeptTailEqualsLogTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for round := range 6 {
		dir, log, size := storeWithAckedLog(t)
		f, err := os.OpenFile(log, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := size
		for range 2 + rng.IntN(6) {
			n := 1 + rng.IntN(20000)
			b := make([]byte, n)
			switch rng.IntN(3) {
			case 0:
				for i := range b {
					b[i] = byte(rng.Uint32() | 0x80) // never a plausible small length... mostly
				}
			case 1: // written zeros
			default:
				off += int64(rng.IntN(3 << 20)) // a hole
				continue
			}
			f.WriteAt(b, off)
			off += int64(n)
		}
		if rng.IntN(2) == 0 {
			off += int64(rng.IntN(9000))
			f.Truncate(off) // ends in a hole
		}
		f.Close()
		orig, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir, &Options{Logger: quiet()})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		db.Close()
		kept, err := os.ReadFile(keptTail(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(kept, orig[size:]) {
			t.Fatalf("round %d: kept tail of %d bytes differs from the log's %d-byte tail", round, len(kept), len(orig)-int(size))
		}
	}
}
