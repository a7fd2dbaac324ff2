package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/advice"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Environment variables under which the test binary, re-executed, plays
// another process: a writer that holds a store open, or the command itself.
const (
	envChild = "LSMCUCKOO_TEST_CHILD"
	envDir   = "LSMCUCKOO_TEST_DIR"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envChild) {
	case "writer":
		writerLoop(os.Getenv(envDir))
		return
	case "writer1":
		writerLoopV1(os.Getenv(envDir))
		return
	case "fatal":
		quietLogger{}.Fatalf("MANIFEST %s: %s\ndetails", "000001", "no space left on device")
	case "migrate-stall":
		// Migrate, and stop dead at the first table the rewrite creates,
		// for the parent to kill this process mid-compaction.
		tableCreatedHook = func() {
			fmt.Fprintln(os.Stderr, "STALLED")
			time.Sleep(time.Minute)
		}
		os.Exit(run(os.Args[len(os.Args)-3:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// storeSpec describes a test store: the policy of each level (nil: none).
type storeSpec struct {
	keys    int
	policy  func(o *pebble.Options)
	seed    uint64
	valSize int
}

func testOptions() *pebble.Options {
	o := &pebble.Options{
		MemTableSize:          256 << 10,
		L0CompactionThreshold: 3,
		LBaseMaxBytes:         512 << 10,
		Logger:                quietLogger{},
	}
	o.TargetFileSizes[0] = 64 << 10
	for i := 1; i < len(o.TargetFileSizes); i++ {
		o.TargetFileSizes[i] = o.TargetFileSizes[i-1] * 2
	}
	return o
}

func bloomPolicy(o *pebble.Options) {
	for l := range o.Levels {
		o.Levels[l].FilterPolicy = bloom.FilterPolicy(10)
	}
}

func noPolicy(o *pebble.Options) {
	for l := range o.Levels {
		o.Levels[l].FilterPolicy = pebble.NoFilterPolicy
	}
}

func uniformPolicy(bits float64) func(*pebble.Options) {
	return func(o *pebble.Options) {
		for l := range o.Levels {
			o.Levels[l].FilterPolicy = tablefilter.NewPolicy(bits)
		}
		tablefilter.RegisterPolicies(o, bits)
	}
}

func levelPolicy(o *pebble.Options) {
	tablefilter.SetLevelPolicies(o, 10)
}

// key is the i-th key of a test store.
func key(i int) []byte { return []byte(fmt.Sprintf("user%09d", i)) }

func value(i, size int) []byte {
	v := bytes.Repeat([]byte{byte(i)}, size)
	copy(v, strconv.Itoa(i))
	return v
}

// buildStore writes spec.keys keys in a shuffled order, with some deletes,
// a range deletion and a range key, so that tables land on several levels;
// the last tenth is written with automatic compactions off, so that L0 holds
// tables whatever the background compactions did before.
func buildStore(t testing.TB, dir string, spec storeSpec) {
	t.Helper()
	split := spec.keys - spec.keys/10
	for i, r := range [][2]int{{0, split}, {split, spec.keys}} {
		o := testOptions()
		spec.policy(o)
		o.DisableAutomaticCompactions = i == 1
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		writeKeys(t, db, spec, r[0], r[1])
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func writeKeys(t testing.TB, db *pebble.DB, spec storeSpec, from, to int) {
	t.Helper()
	if spec.valSize == 0 {
		spec.valSize = 48
	}
	rng := rand.New(rand.NewPCG(spec.seed, 7))
	order := rng.Perm(to - from)
	b := db.NewBatch()
	for n, p := range order {
		i := from + p
		if err := b.Set(key(i), value(i, spec.valSize), nil); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			_ = b.Delete(key(i), nil)
		}
		if n%1000 == 999 {
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			b = db.NewBatch()
		}
	}
	// A range deletion over keys written before it, and a range key.
	_ = b.DeleteRange(key(from+10), key(from+20), nil)
	_ = b.RangeKeySet(key(from+30), key(from+40), nil, []byte("rk"), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
}

// inspectJSON runs inspect -json on dir and decodes the report.
func inspectJSON(t testing.TB, dir string, extra ...string) *advice.Report {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"inspect", "-json", "-probes", "4000"}, extra...)
	if code := run(append(args, dir), &out, &errb); code != 0 {
		t.Fatalf("inspect exit %d: %s", code, errb.String())
	}
	var r advice.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("inspect -json: %v\n%s", err, out.String())
	}
	return &r
}

// hashDir hashes every file of dir, name and contents.
func hashDir(t testing.TB, dir string) map[string]string {
	t.Helper()
	h := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			h[p] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		h[p] = fmt.Sprintf("%x %v", sha256.Sum256(b), st.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// contents reads every visible point key and value and every range key of
// the store, and checks the keys a range deletion covers stay deleted.
func contents(t testing.TB, dir string, o *pebble.Options) []string {
	t.Helper()
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{KeyTypes: pebble.IterKeyTypePointsAndRanges})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for valid := it.First(); valid; valid = it.Next() {
		hasPoint, hasRange := it.HasPointAndRange()
		if hasPoint {
			out = append(out, fmt.Sprintf("P %q=%x", it.Key(), sha256.Sum256(it.Value())))
		}
		if hasRange && it.RangeKeyChanged() {
			s, e := it.RangeBounds()
			for _, rk := range it.RangeKeys() {
				out = append(out, fmt.Sprintf("R [%q,%q) %q=%q", s, e, rk.Suffix, rk.Value))
			}
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
