package pebblecore

import (
	"sync"
	"time"
)

// RefitInterval is the least time between two refits of a RefitLoop.
// Reading a store's table properties walks every live table, so refits
// follow the tree's changes at a pace that keeps them cheap rather than
// after every flush.
const RefitInterval = time.Second

// Measure reads a live store: its shape and its tables' filters.
type Measure func() (LevelShape, []LiveTable, error)

// RefitLoop runs a tuner's refits on a goroutine of its own. A Pebble
// event listener is called with the store's mutex held, from the flush or
// compaction that raised the event, so it must neither call back into the
// store nor wait: Notify only marks a refit as due, and the loop measures
// the store and refits later, outside the event.
type RefitLoop struct {
	tuner    *Tuner
	interval time.Duration
	due      chan struct{}

	mu   sync.Mutex // serialises Start and Stop
	stop chan struct{}
	done chan struct{}

	errMu sync.Mutex
	err   error
}

// NewRefitLoop returns a stopped loop for tuner; interval is the least
// time between refits (RefitInterval when not positive).
func NewRefitLoop(tuner *Tuner, interval time.Duration) *RefitLoop {
	if interval <= 0 {
		interval = RefitInterval
	}
	return &RefitLoop{tuner: tuner, interval: interval, due: make(chan struct{}, 1)}
}

// Notify marks a refit as due. It never blocks, and a loop that is not
// running ignores it.
func (r *RefitLoop) Notify() {
	select {
	case r.due <- struct{}{}:
	default:
	}
}

// Start refits once from measure, then runs the loop, which refits at
// most once per interval while refits are due, until Stop. A running loop
// is stopped first.
func (r *RefitLoop) Start(measure Measure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
	select { // a notice from before this store was measured is stale
	case <-r.due:
	default:
	}
	r.refit(measure)
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.run(measure, r.stop, r.done)
}

// Stop ends the loop and waits for a refit under way to end. After it
// returns the loop calls measure no more; it is a no-op on a stopped loop.
func (r *RefitLoop) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *RefitLoop) stopLocked() {
	if r.stop == nil {
		return
	}
	close(r.stop)
	<-r.done
	r.stop, r.done = nil, nil
}

func (r *RefitLoop) run(measure Measure, stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-r.due:
		}
		r.refit(measure)
		select {
		case <-stop:
			return
		case <-time.After(r.interval):
		}
	}
}

// Refit measures the store and refits now, on the caller's goroutine.
func (r *RefitLoop) refit(measure Measure) error {
	shape, tables, err := measure()
	if err == nil {
		r.tuner.Refit(shape, tables)
	}
	r.errMu.Lock()
	r.err = err
	r.errMu.Unlock()
	return err
}

// Refit measures the store with measure and refits now, on the caller's
// goroutine; it returns measure's error, and the budgets stay as they were
// on an error.
func (r *RefitLoop) Refit(measure Measure) error { return r.refit(measure) }

// Err returns the error of the last refit, nil if it succeeded.
func (r *RefitLoop) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}
