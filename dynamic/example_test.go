package dynamic_test

import (
	"fmt"
	"sync"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// A MemFilter in front of a memtable: writers Add as they insert, readers
// skip the memtable search when MayContain says no. Any number of
// goroutines may do both at once.
func ExampleMemFilter() {
	f := dynamic.NewMemFilter(1 << 16) // the memtable's expected key count
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				f.Add(fmt.Appendf(nil, "user/%d/%d", w, i))
			}
		}(w)
	}
	wg.Wait()
	fmt.Println(f.MayContain([]byte("user/3/999")))
	fmt.Println(f.Stats().Segments)
	// Output:
	// true
	// 1
}
