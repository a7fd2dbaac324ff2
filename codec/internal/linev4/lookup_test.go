package linev4

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// TestLookupMatchesAnyShape holds Lookup's word-wise path to
// lookupAnyShape, the column-by-column reference, on blocks of random
// line bytes under every trailer shape the fast path takes and the ones
// next to its edges (64 and 65 rows, 31 columns, the extra column's
// widths, a full line), both hash kinds and line hashes, and trailers
// that must answer maybe. A random line passes a column half the time,
// so every branch of both lookups runs: columns failing in each group of
// four, the extra column, thresholds, secondary lines.
func TestLookupMatchesAnyShape(t *testing.T) {
	race.SkipLong(t)
	rng := rand.New(rand.NewPCG(1, 2))
	probes, absent := 0, 0
	shapes := testShapes()
	for _, s := range shapes {
		for _, block := range randomBlocks(rng, s) {
			for kind := uint8(0); kind < 2; kind++ {
				for range 300 {
					h := rng.Uint64()
					got, gotV4 := Lookup(block, h, kind)
					want, wantV4 := lookupAnyShape(block, h, kind)
					if got != want || gotV4 != wantV4 {
						t.Fatalf("shape %+v, %d bytes, kind %d, hash %#x: Lookup %v %v, reference %v %v", s, len(block), kind, h, got, gotV4, want, wantV4)
					}
					probes++
					if !got {
						absent++
					}
				}
			}
		}
	}
	if absent < probes/10 || absent > probes*9/10 {
		t.Fatalf("%d of %d probes answered absent: the random lines do not exercise both answers", absent, probes)
	}
	t.Logf("%d shapes, %d probes, %d absent", len(shapes), probes, absent)
	// Trailers the fast path must leave: always maybe, a length one byte
	// off, a damaged copy.
	block := AlwaysMaybe(nil, 0, 7)
	if maybe, ok := Lookup(block, 1, 0); !maybe || !ok {
		t.Fatalf("always-maybe block: %v %v", maybe, ok)
	}
	good := make([]byte, 2*frame.LineBytes+frame.TrailerSize)
	(&Header{Shape: Shape{R: 9, M: 53, U: 130}, Lines: 2, Seed: 3}).Put(good[len(good)-frame.TrailerSize:], 10)
	frame.Seal(good)
	for _, bad := range [][]byte{append([]byte{0}, good...), good[1:], good[:len(good)-1]} {
		for range 100 {
			h := rng.Uint64()
			got, gotV4 := Lookup(bad, h, 0)
			want, wantV4 := lookupAnyShape(bad, h, 0)
			if got != want || gotV4 != wantV4 || !got {
				t.Fatalf("a block of %d bytes: Lookup %v %v, reference %v %v; want maybe", len(bad), got, gotV4, want, wantV4)
			}
		}
	}
}

// testShapes are every shape Lookup's word-wise path takes and the ones
// next to its edges: 64 and 65 rows, 31 columns, the extra column's
// widths, a full line, and shapes no block may have.
func testShapes() []Shape {
	var shapes []Shape
	for r := uint32(1); r <= MaxColumns; r++ {
		for _, m := range []uint32{1, 2, 7, 8, 9, 31, 53, 56, 57, 58, 63, 64, 65, 100, 128} {
			if r*m > ColumnBits {
				continue
			}
			shapes = append(shapes, Shape{R: r, M: m})
			if r*m < ColumnBits {
				shapes = append(shapes, Shape{R: r, M: m, U: 1}, Shape{R: r, M: m, U: 128}, Shape{R: r, M: m, U: 255})
			}
		}
	}
	return append(shapes, Shape{R: 22, M: 23}, Shape{R: 2, M: 253}, Shape{R: 0, M: 10}, Shape{R: 5, M: 0}, Shape{R: 23, M: 22, U: 9})
}

// randomBlocks are blocks of shape s whose lines are random bytes (a
// random line passes a column half the time, so every branch of a lookup
// runs: columns failing in each group of four, the extra column,
// thresholds, secondary lines), of 1 to 17 lines, both hash kinds, with
// and without seeded lines.
func randomBlocks(rng *rand.Rand, s Shape) [][]byte {
	var blocks [][]byte
	for _, lines := range []uint32{1, 2, 3, 17} {
		for variant := 0; variant < 4; variant++ {
			hd := Header{Shape: s, Kind: uint8(variant & 1), SeededLines: variant&2 != 0, Lines: lines, Seed: rng.Uint32()}
			block := make([]byte, int(lines)*frame.LineBytes+frame.TrailerSize)
			for i := range block[:len(block)-frame.TrailerSize] {
				block[i] = byte(rng.Uint32())
			}
			hd.Put(block[len(block)-frame.TrailerSize:], 1000)
			frame.Seal(block)
			blocks = append(blocks, block)
		}
	}
	return blocks
}
