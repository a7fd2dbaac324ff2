package filterbench

import (
	"fmt"
	"testing"
	"time"
)

func TestXABHot(t *testing.T) {
	abs := absent()
	for _, n := range []int{100_000} {
		keys := keysFor(n)
		fams := []Family{Cuckoo(10), CuckooV1(10), PebbleBloom(10)}
		fs := make([]Filter, len(fams))
		for i, f := range fams {
			fs[i] = f.Build(keys)
		}
		best := make([]float64, len(fs))
		for r := 0; r < 30; r++ {
			for i, f := range fs {
				start := time.Now()
				c := 0
				for j := 0; j < 200_000; j++ {
					if f.MayContain(abs[(j+r*7919)&(1<<19-1)]) {
						c++
					}
				}
				ns := float64(time.Since(start).Nanoseconds()) / 200_000
				if r == 0 || ns < best[i] {
					best[i] = ns
				}
			}
		}
		for i := range fs {
			fmt.Printf("n=%d %-18s min %.1f ns  ratio %.2f\n", n, fams[i].Name, best[i], best[i]/best[len(fs)-1])
		}
	}
}

func TestXABBuild(t *testing.T) {
	for _, n := range []int{100_000, 1_000_000} {
		keys := keysFor(n)
		fams := []Family{Cuckoo(10), CuckooV1(10), PebbleBloom(10)}
		best := make([]float64, len(fams))
		for r := 0; r < 5; r++ {
			for i, f := range fams {
				_, ns := BuildTimed(f, keys)
				if r == 0 || ns < best[i] {
					best[i] = ns
				}
			}
		}
		for i := range fams {
			fmt.Printf("build n=%d %-18s min %.1f ns/key  ratio %.2f\n", n, fams[i].Name, best[i], best[i]/best[len(fams)-1])
		}
	}
}
