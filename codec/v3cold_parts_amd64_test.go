package codec

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkV3ColdParts splits a cold version-3 lookup (100k keys, 10
// bits/key, the default layout, 256 MiB of copies, a random copy per
// lookup) into steps that each do part of what MayContain does, beside
// Pebble's bloom filter and steps of its lookup, all in one process and
// interleaved round by round (each round starts one probe later). Each is
// timed as a loop of independent lookups (cold) and one lookup at a time
// (latency); it reports each probe's median per-round ratio to the bloom
// filter through its Pebble policy, and its median ns. "policy" is
// tablefilter's Pebble policy over MayContain; the "via-ProbeBMI2" probes
// put a Go function around the assembly probe instead.
//
//	go test ./codec -run X -bench V3ColdParts -benchtime 5x
func BenchmarkV3ColdParts(b *testing.B) {
	if !linev3.UseBMI2 {
		b.Skip("this processor does not run the assembly probe")
	}
	const lookups = 1 << 19
	absent := testkeys.Absent(lookups, 12)
	keys := testkeys.Random(100_000, 16, 11)
	bw := bloom.FilterPolicy(10).NewWriter(pebble.TableFilter)
	for _, k := range keys {
		bw.AddKey(k)
	}
	var bp pebble.FilterPolicy = bloom.FilterPolicy(10)
	var cp pebble.FilterPolicy = partsPolicy{}
	var cpProbe pebble.FilterPolicy = partsPolicy{viaProbe: true}
	probes := []struct {
		name  string
		bloom bool
		probe func(block, key []byte) bool
	}{
		{"bloom", true, func(f, k []byte) bool { return bp.MayContain(pebble.TableFilter, f, k) }},
		{"bloom-trailer+line", true, bloomTrailerLine},
		{"policy", false, func(f, k []byte) bool { return cp.MayContain(pebble.TableFilter, f, k) }},
		{"policy-via-ProbeBMI2", false, func(f, k []byte) bool { return cpProbe.MayContain(pebble.TableFilter, f, k) }},
		{"MayContain", false, MayContain},
		{"via-ProbeBMI2", false, mayContainViaProbe},
		{"ProbeBMI2", false, func(f, k []byte) bool { o, _ := linev3.ProbeBMI2(f, k); return o != linev3.Absent }},
		{"hash+line", false, v3HashLine},
		{"hash+trailer+line", false, v3HashTrailerLine},
		{"hash+trailer+seed+line", false, v3HashTrailerSeedLine},
	}
	v3 := Build(keys, Options{BitsPerKey: 10, Seed: 7})
	v3Copies, _ := coldCopies(v3, lookups)
	bloomCopies, _ := coldCopies(bw.Finish(nil), lookups)
	// Each probe its own draws of copies, so that no probe finds lines
	// another just brought in: orders[i][0] is timed, orders[i][1] run
	// before it.
	orders := make([][2][]uint32, len(probes))
	for i, p := range probes {
		n := len(v3Copies)
		if p.bloom {
			n = len(bloomCopies)
		}
		r := rand.New(rand.NewPCG(uint64(i), 9))
		for k := range orders[i] {
			orders[i][k] = make([]uint32, lookups)
			for j := range orders[i][k] {
				orders[i][k][j] = uint32(r.IntN(n))
			}
		}
	}
	// Each probe's turn is a loop over all its lookups, then the timed
	// loop in chunks short enough that most run without the scheduler
	// taking the processor away (on a shared machine): the median over
	// chunks is what a lookup costs unpreempted. In the "again" regimes the
	// loop before repeats the timed lookups, as the filter level's does
	// (its lines may then be in a large last-level cache); otherwise it
	// draws other copies, and only the trailers are warm.
	const chunk = 1 << 10
	for _, mode := range []string{"cold", "latency", "cold-again", "latency-again"} {
		b.Run(mode, func(b *testing.B) {
			again := strings.HasSuffix(mode, "-again")
			timed := strings.TrimSuffix(mode, "-again")
			ns := make([][]float64, len(probes))
			ratio := make([][]float64, len(probes))
			round := 0
			for b.Loop() {
				t := make([]float64, len(probes))
				for i := range probes {
					j := (i + round) % len(probes)
					p := probes[j]
					copies := v3Copies
					if p.bloom {
						copies = bloomCopies
					}
					before := orders[j][1]
					if again {
						before = orders[j][0]
					}
					probeLoopNs(p.probe, copies, before, absent, "cold")
					var c []float64
					for k := 0; k < lookups; k += chunk {
						c = append(c, probeLoopNs(p.probe, copies, orders[j][0][k:k+chunk], absent[k:k+chunk], timed))
					}
					t[j] = medianRatio(c)
				}
				for i := range probes {
					ns[i] = append(ns[i], t[i])
					ratio[i] = append(ratio[i], t[i]/t[0])
				}
				round++
			}
			for i, p := range probes {
				b.ReportMetric(medianRatio(ratio[i]), p.name+"×bloom")
				b.ReportMetric(medianRatio(ns[i]), p.name+"-ns")
			}
		})
	}
}

// warmTrailers loads every copy's last byte, as a long run of lookups
// over the copies keeps their trailers cached (the filter level's regime).
func warmTrailers(copies [][]byte) {
	s := byte(0)
	for _, c := range copies {
		s += c[len(c)-1]
	}
	probeSink += int(s)
}

// partsPolicy is tablefilter's Pebble policy as far as a lookup goes,
// with MayContain or (viaProbe) mayContainViaProbe under it.
type partsPolicy struct{ viaProbe bool }

func (partsPolicy) Name() string { return "parts" }
func (p partsPolicy) MayContain(ftype pebble.FilterType, f, k []byte) bool {
	if ftype != pebble.TableFilter {
		return true
	}
	if p.viaProbe {
		return mayContainViaProbe(f, k)
	}
	return MayContain(f, k)
}

// mayContainViaProbe is MayContain as a Go function around
// linev3.ProbeBMI2: the frame, and the arguments kept across the call for
// the Go lookups, that linev3.MayContainKey64 saves.
func mayContainViaProbe(block, key []byte) bool {
	if o, _ := linev3.ProbeBMI2(block, key); o <= linev3.Maybe {
		return o == linev3.Maybe
	}
	return mayContainGo(block, key)
}
func (partsPolicy) NewWriter(pebble.FilterType) pebble.FilterWriter { return nil }

// bloomTrailerLine is Pebble's bloom lookup up to its first probe's load:
// the line count from the trailer, the key's hash and line, one byte of it.
func bloomTrailerLine(f, key []byte) bool {
	n := len(f) - 5
	nLines := binary.LittleEndian.Uint32(f[n+1:])
	h := keyhash.MulHash(key)
	line := (uint64(uint32(h>>32)) * uint64(nLines)) >> 32
	return f[line*64+uint64(h&63)]&1 != 0
}

// v3HashLine hashes the key and loads its primary line, from the block's
// length alone: no trailer.
func v3HashLine(block, key []byte) bool {
	h := keyhash.MulHash(key)
	n := len(block)
	l := block[linev3.Line(frame.Position(h, linev3.LineMultiplier), uint64(n-frame.TrailerSize)/frame.LineBytes)*frame.LineBytes:]
	return l[h>>40&63]&1 != 0
}

// v3HashTrailerLine adds the trailer's first word, combined with the line's.
func v3HashTrailerLine(block, key []byte) bool {
	h := keyhash.MulHash(key)
	n := len(block)
	l := block[linev3.Line(frame.Position(h, linev3.LineMultiplier), uint64(n-frame.TrailerSize)/frame.LineBytes)*frame.LineBytes:]
	w0 := binary.LittleEndian.Uint64(block[n-36:])
	return (uint64(l[h>>40&63])^w0)&1 != 0
}

// v3HashTrailerSeedLine reads the line at a byte the seeded hash picks:
// the line's bytes wait for the trailer's.
func v3HashTrailerSeedLine(block, key []byte) bool {
	h := keyhash.MulHash(key)
	n := len(block)
	l := block[linev3.Line(frame.Position(h, linev3.LineMultiplier), uint64(n-frame.TrailerSize)/frame.LineBytes)*frame.LineBytes:]
	w1 := binary.LittleEndian.Uint64(block[n-28:])
	x := frame.Position(h, frame.Multiplier(uint32(w1>>32)))
	return l[x>>40&63]&1 != 0
}
