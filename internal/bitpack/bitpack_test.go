package bitpack

import (
	"math/rand/v2"
	"testing"
)

// TestWriteReadRoundTrip writes random fields at random offsets, including
// the last bytes of the buffer where Load64 and Write take their byte-wise
// paths, and checks every field reads back and no neighbour was disturbed.
func TestWriteReadRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		w := uint(1 + r.IntN(57))
		n := 1 + r.IntN(40)
		buf := make([]byte, Bytes(uint64(n)*uint64(w)))
		want := make([]uint64, n)
		for i := range want {
			want[i] = r.Uint64() & (1<<w - 1)
		}
		for _, i := range r.Perm(n) { // any order
			Write(buf, uint64(i)*uint64(w), w, want[i])
		}
		for i, v := range want {
			if got := Read(buf, uint64(i)*uint64(w), w); got != v {
				t.Fatalf("w=%d n=%d field %d: got %#x want %#x", w, n, i, got, v)
			}
		}
	}
}

func TestLoad64Tail(t *testing.T) {
	buf := []byte{1, 2, 3}
	if got := Load64(buf, 1); got != 0x0302 {
		t.Fatalf("Load64 tail = %#x", got)
	}
	if got := Load64(buf, 3); got != 0 {
		t.Fatalf("Load64 past end = %#x", got)
	}
}
