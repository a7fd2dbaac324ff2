package pebblecore

import (
	"strings"
	"testing"
)

// TestFamilyNames: a budget's family holds one policy per writer, each
// named with that writer's prefix, and FromName gives each back exactly.
func TestFamilyNames(t *testing.T) {
	for _, b := range []float64{MinBitsPerKey, 9.5, 10, 1.0 / 3 * 30, MaxBitsPerKey} {
		family := Family("test", b)
		for i, p := range family {
			w := Writers[i]
			if p.Version() != w.Version || p.Densest() != w.Densest || p.BitsPerKey() != b {
				t.Errorf("Family(%v)[%d] = %+v, want writer %+v", b, i, p, w)
			}
			if !strings.HasPrefix(p.Name(), NamePrefix(w.Version, w.Densest)) {
				t.Errorf("%q lacks its writer's prefix", p.Name())
			}
			if q, ok := FromName(p.Name()); !ok || q != p {
				t.Errorf("FromName(%q) = %+v, %v; want %+v", p.Name(), q, ok, p)
			}
		}
	}
}

func TestCheckBitsPerKeyNamesTheAdapter(t *testing.T) {
	defer func() {
		if r, _ := recover().(string); !strings.HasPrefix(r, "someadapter: bits per key 3 outside [4, 64]") {
			t.Errorf("panic %q", r)
		}
	}()
	CheckBitsPerKey("someadapter", 3)
}
