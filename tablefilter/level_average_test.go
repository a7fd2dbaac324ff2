package tablefilter

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestSetLevelPoliciesRegistersTheAverage: a store that wrote its tables
// under the uniform NewPolicy(avg) (or NewV1Policy(avg)), at an average off
// the half-bit grid of per-level budgets, then switches to
// SetLevelPolicies(opts, avg), must still read those tables with their
// filters. Pebble silently reads a table whose filter name is not
// registered without its filter, so the name of the average itself must be
// registered, not only the budgets the levels get.
func TestSetLevelPoliciesRegistersTheAverage(t *testing.T) {
	for _, avg := range []float64{7.3, 10.3, 12.2, 15.9} {
		o := &pebble.Options{}
		SetLevelPolicies(o, avg)
		for _, p := range []Policy{NewPolicy(avg), NewV1Policy(avg)} {
			if _, ok := o.Filters[p.Name()]; !ok {
				t.Errorf("SetLevelPolicies(%v) does not register %s: tables written under it lose their filter", avg, p.Name())
			}
		}
	}
}
