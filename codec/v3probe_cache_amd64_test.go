package codec

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// withTrailerWords is block resealed (resealV3) with trailer id words w0
// and w1, so that only the checks of the words themselves can reject it.
func withTrailerWords(block []byte, w0, w1 uint64) []byte {
	return resealV3(block, func(id []byte) {
		binary.LittleEndian.PutUint64(id[0:], w0)
		binary.LittleEndian.PutUint64(id[8:], w1)
	})
}

// TestV3CheckedW0 holds every slot of the probe's remembered id words to
// the Go trailer checks: a remembered word skips them, so it must be one
// they accept.
func TestV3CheckedW0(t *testing.T) {
	block := make([]byte, frame.LineBytes+frame.TrailerSize)
	for i, w := range linev3.CheckedW0 {
		var h linev3.Header
		if !linev3.Read(withTrailerWords(block, w, 1), &h) {
			t.Errorf("slot %d holds %#x, which linev3.Read rejects", i, w)
		}
	}
}

// TestV3ProbeBMI2ForgedTrailers gives the probe blocks whose trailer copies
// agree but whose id word is anything: every field out of range in turn,
// random words, and words that share a slot of linev3.CheckedW0 with a valid
// one, each tried right after a lookup in a valid block has filled the
// slots. Wherever the probe answers, it answers as linev3.Lookup does.
func TestV3ProbeBMI2ForgedTrailers(t *testing.T) {
	race.SkipLong(t)
	if !linev3.UseBMI2 {
		t.Skip("this processor does not run the assembly probe (POPCNT, BMI1, BMI2 and a fast PDEP needed)")
	}
	r := rand.New(rand.NewPCG(5, 6))
	absent := testkeys.Absent(200, 17)
	var valid [][]byte
	for _, bpk := range []float64{6, 8, 10, 12, 16, 24} {
		valid = append(valid, buildExactV3(testkeys.Random(2000, 16, uint64(bpk)), Options{BitsPerKey: bpk, Seed: 9}))
	}
	slot := func(w uint64) uint64 { return w * 0x9e3779b97f4a7c15 >> 59 }
	forged := 0
	for _, block := range valid {
		w0 := binary.LittleEndian.Uint64(block[len(block)-36:])
		w1 := binary.LittleEndian.Uint64(block[len(block)-28:])
		var words []uint64
		for bit := range 64 {
			words = append(words, w0^1<<bit)
		}
		for field := 40; field < 64; field += 8 {
			for v := range uint64(256) {
				words = append(words, w0&^(0xff<<field)|v<<field)
			}
		}
		for range 2000 {
			words = append(words, r.Uint64(), w0^r.Uint64()&(0xffffff<<40))
		}
		for len(words) < 12000 {
			if w := w0 ^ r.Uint64()&(0xffffff<<40); slot(w) == slot(w0) {
				words = append(words, w)
			}
		}
		for _, w := range words {
			d := withTrailerWords(block, w, w1)
			for _, k := range absent {
				MayContain(block, k) // fills w0's slot
				if msg, ok := v3ProbeAgrees(d, k); !ok {
					t.Fatalf("id word %#x (valid %#x): %s", w, w0, msg)
				}
			}
			forged++
		}
	}
	t.Logf("%d forged id words", forged)
}

// TestV3ProbeBMI2ConcurrentShapes runs lookups of present keys in blocks
// of many shapes from several goroutines at once, so that linev3.CheckedW0's
// slots are read while others overwrite them: no present key is missed.
func TestV3ProbeBMI2ConcurrentShapes(t *testing.T) {
	var blocks [][]byte
	var keySets [][][]byte
	for i, bpk := range []float64{5, 6, 7, 8, 9, 9.6, 10, 11, 12, 14, 15.9, 16, 20, 24, 32} {
		keys := testkeys.Random(3000, 16, uint64(i))
		blocks, keySets = append(blocks, Build(keys, Options{BitsPerKey: bpk})), append(keySets, keys)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200_000 {
				i := r.IntN(len(blocks))
				k := keySets[i][r.IntN(len(keySets[i]))]
				if !MayContain(blocks[i], k) {
					t.Errorf("block %d misses present key %q", i, k)
					return
				}
			}
		}()
	}
	wg.Wait()
}
