package tablefilter_test

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Per-level budgets for a store whose absent lookups are Gets, which
// never read L6's filters: with SkipL6 1 the fit gives L6 NoFilter, and
// SetLevelBudgets writes no filters there, spending the bits on the levels
// Gets consult.
func ExampleLevelShape_skipL6() {
	opts := &pebble.Options{}
	shape := tablefilter.ModelLevelShape(opts)
	fmt.Println("prefix seeks with L6 filters:", tablefilter.LevelBudgets(shape, 10))
	shape.SkipL6 = 1
	budgets := tablefilter.LevelBudgets(shape, 10)
	fmt.Println("Gets:", budgets)
	tablefilter.SetLevelBudgets(opts, budgets)
	fmt.Println("L6 policy:", opts.Levels[6].FilterPolicy.Name())
	// Output:
	// prefix seeks with L6 filters: [32 32 27 23 18.5 14 9.5]
	// Gets: [32 32 32 32 32 32 0]
	// L6 policy: none
}

// The self-tuning setup for a store whose absent lookups are Gets: L6 gets
// no filter, and the budgets of L0-L5 follow the live tree once the handle
// is attached to the open store.
func ExampleSkipL6() {
	opts := &pebble.Options{}
	tuned := tablefilter.SetAdaptiveBudgets(opts, 10, tablefilter.SkipL6(1))
	// Then, on the store: db, err := pebble.Open(dir, opts); tuned.Attach(db);
	// and tuned.Detach() before db.Close().
	fmt.Println("L6 policy:", opts.Levels[6].FilterPolicy.Name())
	fmt.Println("budgets until Attach:", tuned.Budgets())
	// Output:
	// L6 policy: none
	// budgets until Attach: [32 32 32 32 32 32 0]
}
