package codec

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkColdAnatomy shows where a cold negative lookup's time goes, in
// steps that each do part of what MayContain does, on 256 MiB of copies of
// a 100k-key version-2 filter at 10 bits/key (a random copy per lookup, as
// bench/filterbench's cold set):
//
//   - buckets: the trailer's line count and seed (no checks), the key's
//     line and buckets, and the loads of both bucket words and the
//     overflow word, then nothing tested;
//   - nibbles: the same, and the semi-sorted nibble compare of both
//     buckets;
//   - one-line: MayContain itself on copies whose overflow bits are all
//     clear, so no lookup reads a second line;
//   - full: MayContain.
//
// Each step is timed as a loop of independent lookups, which the processor
// overlaps (ns/lookup), and one lookup at a time, each ordered by a clock
// read whose own cost is subtracted (latency-ns/lookup). The README quotes
// the steps against the full lookup; bench's filter level puts the full
// lookup beside Pebble's bloom filter.
//
//	go test ./codec -run X -bench ColdAnatomy -benchtime 1x
func BenchmarkColdAnatomy(b *testing.B) {
	const lookups = 1 << 20
	keys := testkeys.Random(100_000, 16, 11)
	absent := testkeys.Absent(lookups, 3)
	block := Build(keys, Options{BitsPerKey: 10, Seed: 7, Version: 2})
	steps := []struct {
		name  string
		block []byte
		probe func(block, key []byte) bool
	}{
		{"buckets", block, anatomyBuckets},
		{"nibbles", block, anatomyNibbles},
		{"one-line", withoutOverflowBits(b, block), MayContain},
		{"full", block, MayContain},
	}
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			copies := anatomyCopies(st.block, 256<<20)
			rng := rand.New(rand.NewPCG(5, 6))
			order := make([]uint32, lookups)
			for i := range order {
				order[i] = uint32(rng.IntN(len(copies)))
			}
			sink := 0
			for i, c := range order { // fault the pages in
				if st.probe(copies[c], absent[i]) {
					sink++
				}
			}
			var loop, serial, clock time.Duration
			maybes := 0
			for b.Loop() {
				start := time.Now()
				for i, c := range order {
					if st.probe(copies[c], absent[i]) {
						maybes++
					}
				}
				loop += time.Since(start)
				start = time.Now()
				end := start
				for i, c := range order {
					if st.probe(copies[c], absent[i]) {
						sink++
					}
					end = time.Now()
				}
				serial += end.Sub(start)
				start = time.Now()
				end = start
				for range order {
					end = time.Now()
				}
				clock += end.Sub(start)
			}
			per := float64(b.N * lookups)
			b.ReportMetric(float64(loop.Nanoseconds())/per, "ns/lookup")
			b.ReportMetric(float64((serial-clock).Nanoseconds())/per, "latency-ns/lookup")
			b.ReportMetric(float64(maybes)/per, "maybe/lookup")
			runtime.KeepAlive(copies)
			runtime.KeepAlive(sink)
		})
	}
}

// anatomyCopies copies block until the copies hold total bytes, each
// starting on a 64-byte boundary at a random offset into its allocation.
func anatomyCopies(block []byte, total int) [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([][]byte, max(1, total/len(block)))
	for i := range out {
		skew := 64 * rng.IntN(64)
		buf := make([]byte, skew+len(block)) // large: page-aligned
		out[i] = buf[skew:]
		copy(out[i], block)
	}
	return out
}

// withoutOverflowBits returns a copy of a version-2 block with every line's
// overflow bits clear: no lookup in it reads a second line. (Keys stored
// in their secondary line are lost from it: only for timing absent keys.)
func withoutOverflowBits(b *testing.B, block []byte) []byte {
	var h linev2.Header
	if !linev2.Read(block, &h) {
		b.Fatal("not a version-2 block")
	}
	out := append([]byte(nil), block...)
	g := h.Geom()
	for ln := range g.Lines {
		last := out[int(ln)*frame.LineBytes+frame.LineBytes-8:]
		w := binary.LittleEndian.Uint64(last)
		binary.LittleEndian.PutUint64(last, w&(1<<g.Shape(ln).OvShift-1))
	}
	return out
}

// anatomyLine is the part of linev2.Lookup that finds the key's line and loads
// its two bucket words and overflow word, without the trailer's checks.
func anatomyLine(block, key []byte) (bw1, bw2, ov uint64, fp uint32, s *linev2.ProbeShape) {
	n := len(block)
	w0 := binary.LittleEndian.Uint64(block[n-36:])
	w1 := binary.LittleEndian.Uint64(block[n-28:])
	f := uint(w0>>40) & 0xff
	lines := uint64(uint32(w1))
	wide := lines * (w0 >> 56 >> linev2.WideShift) >> 7
	x := frame.Position(keyhash.MulHash(key), frame.Multiplier(uint32(w1>>32)))
	p := (x >> 32) * lines
	line := p >> 32
	s = &linev2.ProbeShapes[(f<<1|uint((line-wide)>>63))&63]
	bb, nb := uint64(s.BktBits), uint64(s.Buckets)
	i1 := (uint64(uint32(p)) * nb) >> 32
	q := (x >> 16 & 0xffff) * (nb - 1)
	i2 := i1 + 1 + q>>16
	i2 -= nb & uint64(int64(nb-1-i2)>>63)
	l := (*[frame.LineBytes + 8]byte)(block[line*frame.LineBytes:])
	o1, o2 := i1*bb, i2*bb
	bw1 = binary.LittleEndian.Uint64(l[o1>>3&(frame.LineBytes-1):]) >> (o1 & 7)
	bw2 = binary.LittleEndian.Uint64(l[o2>>3&(frame.LineBytes-1):]) >> (o2 & 7)
	ov = binary.LittleEndian.Uint64(l[frame.LineBytes-8:]) >> (s.OvShift & 63)
	return bw1, bw2, ov, 1 + uint32((x&0xffff)*uint64(s.FPMax)>>16), s
}

// anatomyBuckets loads what a lookup loads and tests nothing: its answer
// depends on the loaded words (so the loads are not skipped) and is
// nearly always false.
func anatomyBuckets(block, key []byte) bool {
	bw1, bw2, ov, fp, _ := anatomyLine(block, key)
	return uint32(bw1^bw2^ov)&0xffff == fp
}

// anatomyNibbles adds the semi-sorted nibble compare of both buckets.
func anatomyNibbles(block, key []byte) bool {
	bw1, bw2, _, fp, s := anatomyLine(block, key)
	fpn := (fp >> (uint(s.Low) & 31)) * 0x1111
	x1 := uint32(semisort.NibblesOfCode[bw1&0xfff%bucket.NibbleCodes]) ^ fpn
	x2 := uint32(semisort.NibblesOfCode[bw2&0xfff%bucket.NibbleCodes]) ^ fpn
	eq1 := ^((x1&0x7777 + 0x7777) | x1) & 0x8888
	eq2 := ^((x2&0x7777 + 0x7777) | x2) & 0x8888
	return eq1&eq2 == 0x8888
}
