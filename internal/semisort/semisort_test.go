package semisort

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

func TestCodesRankBack(t *testing.T) {
	seen := map[uint16]bool{}
	for code := 0; code < Codes; code++ {
		n := NibblesOfCode[code]
		if seen[n] {
			t.Fatalf("code %d decodes to a repeated nibble set %#x", code, n)
		}
		seen[n] = true
		a, b, c, d := int(n&0xf), int(n>>4&0xf), int(n>>8&0xf), int(n>>12)
		if !(a <= b && b <= c && c <= d) || Rank(a, b, c, d) != uint16(code) {
			t.Fatalf("code %d: nibbles %x %x %x %x do not rank back", code, a, b, c, d)
		}
	}
	if len(seen) != Codes {
		t.Fatalf("%d nibble multisets, want %d", len(seen), Codes)
	}
	for code := Codes; code < len(NibblesOfCode); code++ {
		if NibblesOfCode[code] != 0 {
			t.Fatalf("invalid code %d maps to %#x, want 0", code, NibblesOfCode[code])
		}
		if _, ok := Decode(uint64(code), 10); ok {
			t.Fatalf("invalid code %d decoded", code)
		}
	}
}

func TestPackRoundTrip(t *testing.T) {
	for f := uint(5); f <= 16; f++ {
		for trial := 0; trial < 2000; trial++ {
			x := keyhash.Mix(uint64(trial), uint32(f))
			var in [4]uint32
			for j := range in {
				if x>>(j*8)&3 != 0 { // leave some slots empty
					in[j] = keyhash.Fingerprint(keyhash.Mix(x, uint32(j)), f)
				}
			}
			if trial%7 == 0 {
				in[1] = in[0] // repeats sort and pack like any value
			}
			want := in
			Sort4(&want)
			if !(want[0] <= want[1] && want[1] <= want[2] && want[2] <= want[3]) {
				t.Fatalf("Sort4(%v) = %v", in, want)
			}
			w := Pack(want[0], want[1], want[2], want[3], f)
			if w>>(4*f-4) != 0 {
				t.Fatalf("f=%d: bucket word %#x wider than %d bits", f, w, 4*f-4)
			}
			got, ok := Decode(w, f)
			if !ok || got != want {
				t.Fatalf("f=%d: %v encoded to %#x decoded to %v", f, want, w, got)
			}
		}
	}
}
