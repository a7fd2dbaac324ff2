package pebblecore

// Adaptive is what the adapters' AdaptiveBudgets handles share: the tuner
// whose budgets the levels' policies write, and the loop that refits it
// from a live store. An adapter measures its Pebble's store into a
// Measure (see MeasureStore) and hands it over; the adapters' handles
// document the refit.
type Adaptive struct {
	// Tuner holds every level's current budget and the keys its writers
	// recorded.
	Tuner *Tuner
	// Loop runs the refits after flushes and compactions; Notify reads it
	// at each call, so it may be replaced before the store opens.
	Loop *RefitLoop
}

// NewAdaptive returns a stopped handle for a tree that spends about
// avgBitsPerKey bits per key, every level writing format version, where
// model.SkipL6 of the absent lookups skip L6's filters (Tuner.SkipL6): its
// levels start at the budgets the tuner fits to model (the adapter's
// ModelLevelShape of the store's options), until a refit measures the live
// tree, and its tuner takes L0 at its fullest to be l0Runs sublevels of
// l0RunBytes each (Tuner.ModelL0). It panics, naming pkg, unless
// avgBitsPerKey is a valid budget and 0 <= model.SkipL6 <= 1.
func NewAdaptive(pkg string, avgBitsPerKey float64, model LevelShape, version int, l0Runs, l0RunBytes float64) *Adaptive {
	budgets := tunedBudgets(pkg, model, avgBitsPerKey, version)
	tuner := NewVersionTuner(pkg, avgBitsPerKey, budgets, version)
	tuner.skipL6 = model.SkipL6
	tuner.ModelL0(l0Runs, l0RunBytes)
	return &Adaptive{Tuner: tuner, Loop: NewRefitLoop(tuner, 0)}
}

// Registered returns the budgets whose names an adapter registers for the
// handle: every budget a refit can choose (RegisteredBudgets), and the
// average asked, off the grid or not, as SetLevelPolicies registers it.
func (a *Adaptive) Registered() []float64 {
	return append(RegisteredBudgets(), a.Tuner.Asked())
}

// Notify marks a refit as due; it never blocks, so an event listener may
// call it with the store's mutex held.
func (a *Adaptive) Notify() { a.Loop.Notify() }

// Attach refits once from measure, then after each Notify, until Detach.
func (a *Adaptive) Attach(measure Measure) { a.Loop.Start(measure) }

// Detach stops the refits and waits for one under way.
func (a *Adaptive) Detach() { a.Loop.Stop() }

// Refit measures the store and refits now, on the caller's goroutine.
func (a *Adaptive) Refit(measure Measure) error { return a.Loop.Refit(measure) }

// Err returns the error of the last refit, nil if it succeeded.
func (a *Adaptive) Err() error { return a.Loop.Err() }

// Unfiltered reports whether level gets no filter under this handle (L6
// when every absent lookup skips its filters): an adapter installs its
// Pebble's "no filter" there instead of a tuned policy.
func (a *Adaptive) Unfiltered(level int) bool { return a.Tuner.Unfiltered(level) }

// Budgets returns every level's current budget.
func (a *Adaptive) Budgets() [NumLevels]float64 { return a.Tuner.Budgets() }

// LiveBitsPerKey returns the bits per key the lsmcuckoo filters of the
// measured store's live tables spend together, counted as a refit counts
// them, and the keys counted.
func (a *Adaptive) LiveBitsPerKey(measure Measure) (float64, uint64, error) {
	_, tables, err := measure()
	if err != nil {
		return 0, 0, err
	}
	bpk, keys := a.Tuner.LiveAverage(tables)
	return bpk, keys, nil
}

// TableProps is what a refit reads of one live table: whether it is
// virtual, whether its properties were read, and the properties it needs.
type TableProps struct {
	Virtual, HasProperties bool
	FilterPolicyName       string
	FilterSize             uint64
	NumEntries             uint64
	NumRangeDeletions      uint64
}

// MeasureStore returns the Measure of a store whose live tables, level by
// level, sstables lists, each read through props, and whose shape is
// shape's.
func MeasureStore[T any](sstables func() ([][]T, error), props func(T) TableProps, shape func() LevelShape) Measure {
	return func() (LevelShape, []LiveTable, error) {
		levels, err := sstables()
		if err != nil {
			return LevelShape{}, nil, err
		}
		var tables []LiveTable
		for l, level := range levels {
			for _, t := range level {
				p := props(t)
				// A virtual table's properties are its backing table's,
				// which other virtual tables share: count no table twice.
				if p.Virtual || !p.HasProperties {
					continue
				}
				policy, ours := FromName(p.FilterPolicyName)
				tables = append(tables, LiveTable{
					Level:       l,
					Budget:      policy.BitsPerKey(),
					FilterBytes: p.FilterSize,
					PointKeys:   p.NumEntries - min(p.NumEntries, p.NumRangeDeletions),
					Ours:        ours,
				})
			}
		}
		return shape(), tables, nil
	}
}
