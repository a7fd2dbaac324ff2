package kvdemo

// The damage sweep: the fault sweep (sweep_test.go) breaks filesystem
// operations while the store runs; this one damages files at rest. One
// store per filter kind is built (a small memtable, puts, overwrites and
// deletes, several tables, records left in the log), closed, and its
// acknowledged state recorded. Then, on a fresh copy each time, one file
// gets one damage in one region: a bit flipped, 4 KiB zeroed, the file
// cut at that offset; or garbage appended, the file replaced by another
// of its kind from the same store, the file removed; or a stray file is
// put beside them (strayCases). The regions follow
// each kind's layout: a table's blocks, their checksum trailers, its
// index, index length, checksum and checksum length (Badger's format); a
// filter file's binding header and the codec block's lines and trailer; a
// log's records; the MANIFEST's JSON and checksum line; the first and last
// bytes of each; random interior offsets.
//
// Each damaged copy is checked (Check changes nothing), opened, every key
// read, compacted, written to, closed and opened again. What must hold:
// no panic; every Get returns the acknowledged value or an error (a key
// silently absent, or an older value served with no error, fails, except
// a log's tail lost that the store reported as cut: TornWALTails, a log
// line, the tail kept in lost/); nothing that was there is deleted or
// rewritten in place except by a documented move; whatever lands in
// lost/ was reported by name; and a damage that makes Open refuse or a
// Get fail is one that Check reports.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

var (
	damageAll = flag.Bool("damage-all", false,
		"damage sweep: damage every file of the store (default: one file of each kind: a middle table, its filter, the newest log, the MANIFEST)")
	damageRandom = flag.Int("damage-random", 1,
		"damage sweep: random interior offsets damaged per file, beside the fixed regions of its layout")
	damageOnly = flag.String("damage-only", "",
		"damage sweep: run only the cases whose name contains this, e.g. cuckoo/000012.sst/zero4k@index")
)

// damageStore is a closed store to damage copies of, and what it owes.
type damageStore struct {
	kind FilterKind
	dir  string
	// acked: each key's acknowledged value (absentValue once deleted);
	// history: every value each key ever had, absentValue included (an
	// older one served is a wrong answer, not garbage, and is named so).
	acked   map[string]string
	history map[string]map[string]bool
	man     manifest
}

// buildDamageStore writes a store that has, at Close, several tables
// (some compacted), their filters, a log holding acknowledged records
// not in any table, overwrites and deletes in both.
func buildDamageStore(t *testing.T, kind FilterKind) *damageStore {
	t.Helper()
	s := &damageStore{kind: kind, dir: t.TempDir(), acked: map[string]string{}, history: map[string]map[string]bool{}}
	db := open(t, s.dir, Options{Filter: kind, MemtableBytes: 4 << 10, MaxTables: 6, noIdleRebuild: true})
	rng := rand.New(rand.NewPCG(10, uint64(len(kind))))
	const keys, steps = 160, 900
	for i := 0; i < keys; i++ {
		s.history[sweepKey(i)] = map[string]bool{absentValue: true}
	}
	for step := 0; step < steps; step++ {
		k := sweepKey(rng.IntN(keys))
		if rng.IntN(6) == 0 {
			if err := db.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			}
			s.acked[k] = absentValue
		} else {
			v := fmt.Sprintf("%s@%d:%s", k, step, strings.Repeat("x", rng.IntN(120)))
			mustPut(t, db, []byte(k), []byte(v))
			s.acked[k] = v
			s.history[k][v] = true
		}
	}
	// The last writes stay in the log only: Close fsyncs it, flushes
	// nothing.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < keys; i++ {
		if _, ok := s.acked[sweepKey(i)]; !ok {
			s.acked[sweepKey(i)] = absentValue
		}
	}
	var err error
	if s.man, err = readManifestFS(vfs.Default, s.dir); err != nil {
		t.Fatal(err)
	}
	if len(s.man.Tables) < 3 || len(filesWithExt(t, s.dir, extLog)) == 0 {
		t.Fatalf("%s: the store to damage has %d tables and logs %v: the workload no longer builds what the sweep needs",
			kind, len(s.man.Tables), filesWithExt(t, s.dir, extLog))
	}
	if kind == FilterCuckoo && len(filesWithExt(t, s.dir, extFilter)) != len(s.man.Tables) {
		t.Fatalf("cuckoo store: %d filter files for %d tables", len(filesWithExt(t, s.dir, extFilter)), len(s.man.Tables))
	}
	return s
}

func filesWithExt(t testing.TB, dir, ext string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, x, ok := parseFileName(e.Name()); ok && x == ext && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names
}

// region is a place in a file worth damaging, named after what is there.
type region struct {
	name string
	off  int
}

// damageCase is one damage to one file.
type damageCase struct {
	file  string // name in the store directory
	name  string // kind of damage and where
	apply func(t testing.TB, dir string)
	// movedAside: Open must move the file to lost/ (a stray file it
	// cannot prove to be its own leftover).
	movedAside bool
}

// regionsOf lists the places of file b (named name) worth damaging: the
// structure of its kind, the first and last bytes, random offsets.
func regionsOf(t testing.TB, name string, b []byte, rng *rand.Rand) []region {
	rs := []region{{"first", 0}, {"last", len(b) - 1}}
	_, ext, _ := parseFileName(name)
	switch {
	case name == manifestName:
		if i := bytes.LastIndex(b, []byte("\n"+manifestSumPrefix)); i >= 0 {
			rs = append(rs, region{"crc-line", i + 1}, region{"crc-hex", i + 1 + len(manifestSumPrefix)})
		}
		if i := bytes.Index(b, []byte(`"tables"`)); i >= 0 {
			rs = append(rs, region{"tables", i})
		}
	case ext == extTable:
		rs = append(rs, tableRegions(t, b)...)
	case ext == extFilter:
		n := len(b)
		rs = append(rs, region{"kvcf-version", 4}, region{"kvcf-table-number", 8}, region{"kvcf-table-size", 16},
			region{"kvcf-table-hash", 24}, region{"kvcf-crc", 32}, region{"codec-first-line", filterHeader},
			region{"codec-trailer-keys", n - 40}, region{"codec-trailer-lines", n - 28}, region{"codec-trailer-seed", n - 24},
			region{"codec-trailer-copy", n - 20}, region{"codec-crc", n - 4})
	case ext == extLog:
		var starts []int
		for off := int64(0); ; {
			_, n, ok := parseRecord(b, off, 0)
			if !ok {
				break
			}
			starts = append(starts, int(off))
			off += n
		}
		if len(starts) == 0 {
			t.Fatalf("%s holds no intact record", name)
		}
		last := starts[len(starts)-1]
		rs = append(rs, region{"record-middle", starts[len(starts)/2]}, region{"record-last", last},
			region{"record-last-length", last + 4}, region{"record-last-body", last + walHeader + 1})
	}
	for i := 0; i < *damageRandom; i++ {
		rs = append(rs, region{fmt.Sprintf("random%d", i), rng.IntN(len(b))})
	}
	// One case per offset.
	seen := map[int]bool{}
	out := rs[:0]
	for _, r := range rs {
		if r.off >= 0 && r.off < len(b) && !seen[r.off] {
			seen[r.off] = true
			out = append(out, r)
		}
	}
	return out
}

// tableRegions follows Badger's table layout: blocks (each ending in its
// entry offsets, their count, a checksum and the checksum's length), the
// index (a flatbuffer naming every block), the index length, the index's
// checksum and that checksum's length (big-endian u32s).
func tableRegions(t testing.TB, b []byte) []region {
	n := len(b)
	if n < 8 {
		t.Fatalf("a table of %d bytes", n)
	}
	cl := int(y.BytesToU32(b[n-4:]))
	indexLenAt := n - 4 - cl - 4
	indexLen := int(y.BytesToU32(b[indexLenAt:]))
	indexStart := indexLenAt - indexLen
	rs := []region{{"checksum-length", n - 4}, {"index-checksum", n - 4 - cl}, {"index-length", indexLenAt}, {"index", indexStart}, {"index-middle", indexStart + indexLen/2}}
	idx := fb.GetRootAsTableIndex(b[indexStart:indexLenAt], 0)
	var bo fb.BlockOffset
	blocks := idx.OffsetsLength()
	pick := []int{0, blocks / 2, blocks - 1}
	if *damageAll {
		pick = pick[:0]
		for i := range blocks {
			pick = append(pick, i)
		}
	}
	for _, i := range pick {
		if !idx.Offsets(&bo, i) {
			t.Fatalf("block %d of %d not in the index", i, blocks)
		}
		start, end := int(bo.Offset()), int(bo.Offset()+bo.Len())
		rs = append(rs, region{fmt.Sprintf("block%d", i), start}, region{fmt.Sprintf("block%d-middle", i), (start + end) / 2},
			region{fmt.Sprintf("block%d-checksum", i), end - 8}, region{fmt.Sprintf("block%d-checksum-length", i), end - 4})
	}
	return rs
}

// damageCases lists the damages the sweep applies to s.
func damageCases(t testing.TB, s *damageStore) []damageCase {
	rng := rand.New(rand.NewPCG(20, uint64(len(s.kind))))
	byExt := map[string][]string{}
	for _, ext := range []string{extTable, extFilter, extLog} {
		byExt[ext] = filesWithExt(t, s.dir, ext)
	}
	var targets []string
	if *damageAll {
		for _, ext := range []string{extTable, extFilter, extLog} {
			targets = append(targets, byExt[ext]...)
		}
	} else {
		// A table in the middle of the age order (older and newer ones
		// exist), its filter, the newest log.
		mid := fmt.Sprintf("%06d.%s", s.man.Tables[len(s.man.Tables)/2], extTable)
		targets = append(targets, mid)
		if f := strings.TrimSuffix(mid, extTable) + extFilter; slices.Contains(byExt[extFilter], f) {
			targets = append(targets, f)
		}
		targets = append(targets, byExt[extLog][len(byExt[extLog])-1])
	}
	targets = append(targets, manifestName)

	var cases []damageCase
	for _, name := range targets {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		rewrite := func(dir string, fn func([]byte) []byte) {
			p := filepath.Join(dir, name)
			c, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, fn(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range regionsOf(t, name, b, rng) {
			bit := byte(1) << rng.IntN(8)
			cases = append(cases,
				damageCase{file: name, name: fmt.Sprintf("flip@%s", r.name), apply: func(_ testing.TB, dir string) {
					rewrite(dir, func(c []byte) []byte { c[r.off] ^= bit; return c })
				}},
				damageCase{file: name, name: fmt.Sprintf("zero4k@%s", r.name), apply: func(_ testing.TB, dir string) {
					rewrite(dir, func(c []byte) []byte { clear(c[r.off:min(len(c), r.off+4096)]); return c })
				}},
				damageCase{file: name, name: fmt.Sprintf("truncate@%s", r.name), apply: func(_ testing.TB, dir string) {
					rewrite(dir, func(c []byte) []byte { return c[:r.off] })
				}})
		}
		garbage := make([]byte, 100)
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		cases = append(cases,
			damageCase{file: name, name: "append-garbage", apply: func(_ testing.TB, dir string) {
				rewrite(dir, func(c []byte) []byte { return append(c, garbage...) })
			}},
			damageCase{file: name, name: "removed", apply: func(t testing.TB, dir string) {
				if err := os.Remove(filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}})
		_, ext, _ := parseFileName(name)
		if others := byExt[ext]; len(others) > 1 {
			// The file of the same kind numbered next after it (or the
			// one before the last).
			i := slices.Index(others, name)
			other := others[(i+1)%len(others)]
			cases = append(cases, damageCase{file: name, name: "replaced-by-" + other, apply: func(t testing.TB, dir string) {
				c, err := os.ReadFile(filepath.Join(dir, other))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), c, 0o644); err != nil {
					t.Fatal(err)
				}
			}})
		}
	}
	return append(cases, strayCases(t, s, byExt)...)
}

// strayCases put a file the MANIFEST does not name beside the store's: a
// copy of one of its tables (and filter) under a number below next_file
// that no file has (Open must move it to lost/ and say so), the same
// numbered at next_file (provably an unfinished flush's output: Open
// removes it), a copy of the newest log under a higher number (replayed:
// its records are the store's own), a file that is not the store's.
func strayCases(t testing.TB, s *damageStore, byExt map[string][]string) []damageCase {
	used := map[uint64]bool{}
	for _, names := range byExt {
		for _, n := range names {
			id, _, _ := parseFileName(n)
			used[id] = true
		}
	}
	free := uint64(1)
	for used[free] || free == s.man.Log {
		free++
	}
	if free >= s.man.NextFile {
		t.Fatalf("no free number below next_file %d", s.man.NextFile)
	}
	src := s.man.Tables[len(s.man.Tables)/2]
	copyAs := func(from, to string) func(testing.TB, string) {
		return func(t testing.TB, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var cases []damageCase
	for _, id := range []uint64{free, s.man.NextFile} {
		for _, ext := range []string{extTable, extFilter} {
			from := fmt.Sprintf("%06d.%s", src, ext)
			if !slices.Contains(byExt[ext], from) {
				continue
			}
			to := fmt.Sprintf("%06d.%s", id, ext)
			cases = append(cases, damageCase{to, "stray-copy-of-" + from, copyAs(from, to), id < s.man.NextFile})
		}
	}
	newest := byExt[extLog][len(byExt[extLog])-1]
	id, _, _ := parseFileName(newest)
	to := fmt.Sprintf("%06d.%s", max(id, s.man.NextFile)+1, extLog)
	cases = append(cases, damageCase{to, "stray-copy-of-" + newest, copyAs(newest, to), false},
		damageCase{"notes.txt", "stray-foreign-file", func(t testing.TB, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not the store's"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false})
	return cases
}

// copyStore copies the store's files (not LOCK, tmp/) into a new directory.
func copyStore(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// damageOutcome is what one damaged copy did, for the sweep's summary.
type damageOutcome int

const (
	outcomeServed   damageOutcome = iota // opened, every key read back
	outcomeCorrupt                       // opened, some Gets said ErrCorrupt
	outcomeTornTail                      // opened, a log tail cut and reported, keys in it lost
	outcomeRefused                       // Open refused with an error
)

func (o damageOutcome) String() string {
	return [...]string{"served every key", "some Gets ErrCorrupt", "log tail cut (reported)", "Open refused"}[o]
}

// TestDamageSweep damages every kind of file of a store of each filter
// kind, region by region (see the file comment). -damage-all widens it to
// every file and every block, -damage-random N adds random offsets,
// -damage-only NAME reruns one case.
func TestDamageSweep(t *testing.T) {
	race.SkipLong(t)
	for _, kind := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone, FilterGlobal} {
		t.Run(string(kind), func(t *testing.T) {
			s := buildDamageStore(t, kind)
			counts := map[damageOutcome]int{} // subtests run one at a time
			for _, c := range damageCases(t, s) {
				name := c.file + "/" + c.name
				if *damageOnly != "" && !strings.Contains(string(kind)+"/"+name, *damageOnly) {
					continue
				}
				t.Run(name, func(t *testing.T) { counts[runDamageCase(t, s, c)]++ })
			}
			t.Logf("%s: %v", kind, counts)
		})
	}
}

// runDamageCase damages a fresh copy of s and checks the store's answers.
func runDamageCase(t *testing.T, s *damageStore, c damageCase) damageOutcome {
	dir := copyStore(t, s.dir)
	c.apply(t, dir)
	damaged := snapshotDir(t, dir)

	// Check: read-only, changes nothing, says whether anything is bad.
	var report bytes.Buffer
	res, checkErr := Check(dir, &report, nil)
	checkSaw := checkErr != nil || res.Problems > 0
	if after := snapshotDir(t, dir); !maps.EqualFunc(damaged, after, bytes.Equal) {
		t.Errorf("Check changed the store's files")
	}

	var logs logBuffer
	o := Options{Filter: s.kind, MemtableBytes: 4 << 10, MaxTables: -1, noIdleRebuild: true, Logger: log.New(&logs, "", 0)}
	db, err := Open(dir, &o)
	if err != nil {
		// A refusal must be clear, change nothing that was there, and
		// be something Check finds.
		if !checkSaw {
			t.Errorf("Open refused (%v), yet Check found nothing wrong:\n%s", err, report.String())
		}
		if !strings.HasPrefix(err.Error(), errPrefix) {
			t.Errorf("Open's error does not say where it comes from: %v", err)
		}
		if after := snapshotDir(t, dir); !maps.EqualFunc(damaged, after, bytes.Equal) {
			t.Errorf("Open refused (%v) and changed the store's files", err)
		}
		return outcomeRefused
	}

	// The tail of a log cut off is the one loss the store may own up to
	// instead of failing the Get: a torn tail and a tail lost at rest
	// look alike. It must be counted, logged and kept in lost/.
	tornTail := db.Stats().TornWALTails > 0
	if tornTail {
		if _, ext, _ := parseFileName(c.file); ext != extLog {
			t.Errorf("damage to %s made Open cut a log's tail", c.file)
		}
		if !strings.Contains(logs.String(), "tail") {
			t.Errorf("a log tail was cut without a word in the log: %q", logs.String())
		}
		if kept, _ := filepath.Glob(filepath.Join(dir, lostDir, "*.tail-at-*")); len(kept) == 0 {
			t.Error("a log tail was cut and not kept in lost/")
		}
	}
	excused := map[string]bool{}
	sawCorrupt := false
	getAll := func(db *DB, when string, mayExcuse bool) {
		for k, want := range s.acked {
			got, err := db.Get([]byte(k))
			have := string(got)
			if errors.Is(err, ErrNotFound) {
				have = absentValue
			} else if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s: Get(%s): an error that is neither not-found nor corruption: %v", when, k, err)
				}
				sawCorrupt = true
				continue
			}
			if have == want {
				continue
			}
			older := s.history[k][have]
			switch {
			case !older:
				t.Errorf("%s: Get(%s) = %q, a value never written (acknowledged %q)", when, k, have, want)
			case excused[k]:
			case mayExcuse && tornTail:
				excused[k] = true
			default:
				t.Errorf("%s: Get(%s) = %q with no error; acknowledged %q (damage unreported)", when, k, have, want)
			}
		}
	}
	getAll(db, "opened", true)
	if sawCorrupt && !checkSaw {
		t.Errorf("Gets report corruption, yet Check found nothing wrong:\n%s", report.String())
	}
	// What the rebuild of unusable filters did to the files, before a
	// compaction retires the tables (and filters) it rebuilt for.
	waitFor(t, "filters rebuilt", func() bool { st := db.Stats(); return int64(st.UnfilteredTables) <= st.DamagedTables })
	checkNothingDestroyed(t, dir, damaged, filesKept{manifestChanged: true})
	if err := compactDamaged(db); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Errorf("compaction: %v", err)
	}
	getAll(db, "compacted", false)
	// The store still takes writes and flushes them.
	if err := db.Put([]byte("after-damage"), []byte("v")); err != nil {
		t.Errorf("Put after the damage: %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Errorf("Flush after the damage: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// Not filtersRebuilt: a filter the store cannot use is moved to lost/
	// before its rebuild takes its name.
	checkNothingDestroyed(t, dir, damaged, filesKept{manifestChanged: true})
	checkLostReported(t, dir, logs.String())
	if c.movedAside {
		if _, err := os.Stat(filepath.Join(dir, lostDir, c.file)); err != nil {
			t.Errorf("the stray %s was not moved to lost/: %v", c.file, err)
		}
	}

	db, err = Open(dir, &o)
	if err != nil {
		t.Fatalf("reopening after the first open served: %v", err)
	}
	getAll(db, "reopened", false)
	if got, err := db.Get([]byte("after-damage")); err != nil || string(got) != "v" {
		t.Errorf("the write made after the damage: %q, %v", got, err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := Check(dir, &report, nil); err != nil {
		t.Errorf("Check after the reopen: %v", err)
	}
	switch {
	case sawCorrupt:
		return outcomeCorrupt
	case tornTail:
		if len(excused) > 0 {
			t.Logf("log tail cut: %d keys back to an older value, told by Stats.TornWALTails, the log (%q) and lost/", len(excused), strings.TrimSpace(logs.String()))
		}
		return outcomeTornTail
	}
	return outcomeServed
}

// compactDamaged merges runs of tables as a store over its table limit
// would (MaxTables 1), until none is left to merge or one fails.
func compactDamaged(db *DB) error {
	for range 4 {
		v, err := db.acquire()
		if err != nil {
			return err
		}
		start, width, ok := pickRun(v.tables, 1)
		if ok {
			err = db.compactRun(v, start, width)
		}
		v.release()
		if !ok || err != nil {
			return err
		}
	}
	return nil
}

// checkLostReported: every file in lost/ was named in the store's log.
func checkLostReported(t testing.TB, dir, said string) {
	t.Helper()
	lost, _ := os.ReadDir(filepath.Join(dir, lostDir))
	for _, e := range lost {
		if !strings.Contains(said, e.Name()) {
			t.Errorf("lost/%s was never reported; the store said:\n%s", e.Name(), said)
		}
	}
}
