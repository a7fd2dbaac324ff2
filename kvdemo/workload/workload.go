// Package workload is the benchmark harness of kvdemo stores: generated
// keys, a bulk load, a point-lookup workload, and a side-by-side run of one
// store per filter kind. The kvdemo command's load, lookup and demo
// commands and the bench report use it; it is not part of the store.
package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// Key is key i of the generated data set (16 bytes). Loaded keys
// are even i, so odd i are absent keys that fall inside every table's key
// range: only a filter, not a key-range check, can skip a table for them.
func Key(i int) []byte { return fmt.Appendf(nil, "user%012d", i) }

// Load writes n generated keys (values of valueSize bytes) in a random
// order, so that every table spans the key space, then flushes and syncs,
// so that the data lives in tables. It uses the store's own durability
// setting; open the store with NoSyncEachWrite for a bulk load.
func Load(db *kvdemo.DB, n, valueSize int) error {
	r := rand.New(rand.NewPCG(uint64(n), 3))
	value := make([]byte, valueSize)
	for _, i := range r.Perm(n) {
		k := Key(2 * i)
		copy(value, k) // a value derived from its key, checkable by eye
		if err := db.Put(k, value); err != nil {
			return err
		}
	}
	if err := db.Flush(); err != nil {
		return err
	}
	return db.Sync()
}

// LookupResult is one point-lookup run.
type LookupResult struct {
	Filter       kvdemo.FilterKind `json:"filter"`
	Gets         int               `json:"gets"`
	Miss         float64           `json:"miss"` // share of Gets for absent keys
	GetsPerSec   float64           `json:"gets_per_sec"`
	ProbedPerGet float64           `json:"tables_probed_per_get"`
	FPR          float64           `json:"fpr"` // filter said maybe for a table without the key
	FilterBytes  int64             `json:"filter_bytes"`
	Tables       int               `json:"tables"`
}

// Lookups runs gets point lookups over a store loaded with Load(n): a miss
// share of them for absent keys, the rest for present ones, which must all
// be found (an error otherwise: a filter must never hide a key).
func Lookups(db *kvdemo.DB, n, gets int, miss float64, seed uint64) (LookupResult, error) {
	r := rand.New(rand.NewPCG(seed, 5))
	keys := make([][]byte, gets)
	present := make([]bool, gets)
	for i := range keys {
		j := r.IntN(n)
		if r.Float64() < miss {
			keys[i] = Key(2*j + 1)
		} else {
			keys[i], present[i] = Key(2*j), true
		}
	}
	before := db.Stats()
	start := time.Now()
	for i, k := range keys {
		_, err := db.Get(k)
		switch {
		case present[i] && err != nil:
			return LookupResult{}, fmt.Errorf("workload: present key %s: %v", k, err)
		case !present[i] && !errors.Is(err, kvdemo.ErrNotFound):
			return LookupResult{}, fmt.Errorf("workload: absent key %s: %v", k, err)
		}
	}
	el := time.Since(start)
	after := db.Stats()
	res := LookupResult{
		Filter:       after.Filter,
		Gets:         gets,
		Miss:         miss,
		GetsPerSec:   float64(gets) / el.Seconds(),
		ProbedPerGet: float64(after.TablesProbed-before.TablesProbed) / float64(gets),
		FilterBytes:  after.FilterBytes,
		Tables:       after.Tables,
	}
	fp := after.FilterFalsePositives - before.FilterFalsePositives
	neg := after.TableFilterNegatives - before.TableFilterNegatives
	if fp+neg > 0 {
		res.FPR = float64(fp) / float64(fp+neg)
	}
	return res, nil
}
