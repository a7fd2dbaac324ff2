package main

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// migrationV1 rewrites a Pebble v1.1 store with Pebble v1 and package
// tablefilter/pebblev1.
type migrationV1 struct {
	opts *pebble.Options
}

// refuse refuses a store older than FormatRangeKeys unless -ratchet: the
// rewrite marks the key range with a range-key unset (see rewrite), and
// Pebble v1 writes range keys only from that format on. Ratcheting is the
// user's choice: Pebble releases before v22.2 no longer open the store.
func (m *migrationV1) refuse(s *pebblestore.Snapshot, f *migrateFlags) error {
	if s.FormatVersion < uint64(pebble.FormatRangeKeys) && !f.ratchet {
		return fmt.Errorf("refused: the store is at format major version %d; migrate needs FormatRangeKeys (%d) or newer, as it marks the key range with a range key "+
			"to rewrite every table: run migrate -ratchet to raise the format first (every Pebble v1.1 opens the store then, releases before v22.2 no longer do)",
			s.FormatVersion, pebble.FormatRangeKeys)
	}
	return nil
}

func (m *migrationV1) lock(dir string) (io.Closer, error) {
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, err
	}
	m.opts.Lock = lock
	return lock, nil
}

// configure sets Pebble v1's options (migration.configure). Its
// Options.Levels is a slice whose missing entries copy the last: one entry
// sets every level.
func (m *migrationV1) configure(p plan) string {
	opts := &pebble.Options{Logger: quietLogger{}, Comparer: wholeKeySplit()}
	if p.ratchet && p.format < uint64(pebble.FormatRangeKeys) {
		opts.FormatMajorVersion = pebble.FormatRangeKeys
	}
	m.opts = opts
	line := fmt.Sprintf("pebblev1.SetLevelBudgets(opts, [7]float64{%s})", budgetList(p.budgets))
	if p.levels {
		pebblev1.SetLevelBudgets(opts, p.budgets)
	} else {
		opts.Levels = []pebble.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(p.budgets[0])}}
		pebblev1.RegisterPolicies(opts, p.budgets[0])
		line = fmt.Sprintf("opts.Levels = []pebble.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(%s)}} // levels past the slice's end copy its last entry; with levels listed, set each one's FilterPolicy", fmtBits(p.budgets[0]))
	}
	if len(p.carried) > 0 {
		pebblev1.RegisterPolicies(opts, p.carried...)
	}
	if p.bloom {
		opts.Filters[pebblestore.BloomName] = bloom.FilterPolicy(10)
	}
	return line
}

// wholeKeySplit is Pebble v1's default comparer, under its name, with the
// Split Pebble v2's default comparer has: a key is its own prefix. Pebble v1
// writes range keys only under a comparer with a Split, and the rewrite
// writes one. The tables' contents are the same bytes: without a Split
// Pebble v1 hands the filter, and the value-block decisions, the whole key,
// which this Split returns. Only the tables' informational properties say
// prefix filtering, as Pebble v2's tables do.
func wholeKeySplit() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Split = func(k []byte) int { return len(k) }
	return &c
}

// open opens the store for the rewrite (migration.open). Pebble v1 reports
// a damaged block in the error of the compaction that read it.
func (m *migrationV1) open(dir string, created func()) (migrationDB, error) {
	m.opts.EventListener = &pebble.EventListener{
		TableCreated: func(pebble.TableCreateInfo) { created() },
	}
	db, err := pebble.Open(dir, m.opts)
	if err != nil {
		return nil, err
	}
	return dbV1{db}, nil
}

// dbV1 is a Pebble v1 store open for the rewrite.
type dbV1 struct{ *pebble.DB }

func (db dbV1) pending(want [pebblestore.NumLevels]string) (left int, total, leftBytes uint64, start, end []byte, err error) {
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		return 0, 0, 0, nil, nil, fmt.Errorf("list tables: %v", firstLine(err))
	}
	return sumPending(levels, want, func(t pebble.SSTableInfo) tableFacts {
		return tableFacts{t.Size, t.Properties.FilterPolicyName, t.Smallest.UserKey, t.Largest.UserKey}
	})
}

func (db dbV1) unsetRangeKeys(start, end, suffix []byte) error {
	return db.RangeKeyUnset(start, end, suffix, pebble.Sync)
}

func (db dbV1) compact(start, end []byte) error { return db.Compact(start, end, true) }

func (db dbV1) close() error { return db.Close() }
