package codec

import (
	"fmt"
	"testing"
)

// TestBuilderReuseKeepsFirstKey reuses one Builder for consecutive tables,
// as a compaction writing tables one after another may, where the next
// table's first key equals the previous table's last (a key whose versions
// straddle the cut). Add drops a hash equal to the one before it as a
// repeat; across Finish (or Reset) there is no "before", and dropping it
// would lose the key from the second filter.
func TestBuilderReuseKeepsFirstKey(t *testing.T) {
	for _, v := range []int{1, 2, 3} {
		for _, kind := range []HashKind{HashKey64, HashHost32} {
			for _, reset := range []bool{false, true} {
				name := fmt.Sprintf("v%d kind %d reset=%v", v, kind, reset)
				b := NewBuilder(Options{Version: v, Hash: kind, BitsPerKey: 10})
				add := func(i int) {
					if kind == HashHost32 {
						b.AddHash32(uint32(i) * 0x9e3779b1)
					} else {
						b.Add(fmt.Appendf(nil, "key%06d", i))
					}
				}
				has := func(block []byte, i int) bool {
					if kind == HashHost32 {
						return MayContainHash32(block, uint32(i)*0x9e3779b1)
					}
					return MayContain(block, fmt.Appendf(nil, "key%06d", i))
				}
				for i := range 100 {
					add(i)
				}
				if reset {
					b.Reset()
				} else {
					b.Finish(nil)
				}
				for i := 99; i < 200; i++ {
					add(i)
				}
				block := b.Finish(nil)
				for i := 99; i < 200; i++ {
					if !has(block, i) {
						t.Fatalf("%s: key %d of the second table answered absent", name, i)
					}
				}
			}
		}
	}
}
