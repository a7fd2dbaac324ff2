package kvdemo

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// dirSnapshot is the content of a store's tables, filters, logs, MANIFEST
// and lost/ files, by path relative to the store directory.
type dirSnapshot map[string][]byte

func snapshotDir(t testing.TB, dir string) dirSnapshot {
	t.Helper()
	snap := dirSnapshot{}
	for _, name := range evidenceFiles(dir) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		snap[name] = b
	}
	return snap
}

// evidenceFiles lists the files a fault must not destroy: the MANIFEST,
// tables, filters and logs, and everything in lost/, by path relative to
// dir.
func evidenceFiles(dir string) []string {
	var names []string
	for _, sub := range []string{"", lostDir} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			_, ext, ok := parseFileName(e.Name())
			keep := sub == lostDir || e.Name() == manifestName || (ok && (ext == extTable || ext == extFilter || ext == extLog))
			if keep && e.Type().IsRegular() {
				names = append(names, filepath.Join(sub, e.Name()))
			}
		}
	}
	return names
}

// filesKept holds what a fault test may allow beyond "unchanged".
type filesKept struct {
	// filtersRebuilt: filter files may have been rewritten.
	filtersRebuilt bool
	// manifestChanged: the MANIFEST may have been replaced.
	manifestChanged bool
	// unfinishedOutputs: a table (and its filter) that the MANIFEST of
	// before does not name was the output of a flush or compaction not
	// yet applied: if the edit then failed, or a crash lost it, the store
	// may remove it, and after a crash reuse its number.
	unfinishedOutputs bool
}

// checkNothingDestroyed asserts that every file of before is still in dir
// (or moved to lost/ whole) with the same content, except what the store
// documents: a log may have grown (appends), a log's torn tail may have
// been cut off once kept in lost/, a log below the manifest's
// oldest needed log has been removed (flushed: its records are in
// tables), a table the manifest no longer names has been removed (a
// compaction replaced it) with its filter, a filter may be rebuilt and the
// MANIFEST replaced when the caller allows it; a file kept whole in lost/
// may be written anew under its name. Files in lost/ never
// vanish or change.
func checkNothingDestroyed(t testing.TB, dir string, before dirSnapshot, allow filesKept) {
	t.Helper()
	after := snapshotDir(t, dir)
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatalf("manifest after the fault: %v", err)
	}
	var named []uint64 // tables the MANIFEST of before names
	if b, ok := before[manifestName]; ok && allow.unfinishedOutputs {
		m, err := parseManifest(b, dir)
		if err != nil {
			t.Fatalf("manifest before the fault: %v", err)
		}
		named = m.Tables
	}
	movedWhole := func(b []byte) bool {
		for name, a := range after {
			if strings.HasPrefix(name, lostDir+string(filepath.Separator)) && bytes.Equal(a, b) {
				return true
			}
		}
		return false
	}
	// tailKept: log b became a, a log cut back to a prefix of b (and maybe
	// appended to since) whose cut-off tail is a file in lost/.
	tailKept := func(b, a []byte) bool {
		for name, l := range after {
			if strings.HasPrefix(name, lostDir+string(filepath.Separator)) && len(l) > 0 && bytes.HasSuffix(b, l) &&
				bytes.HasPrefix(a, b[:len(b)-len(l)]) {
				return true
			}
		}
		return false
	}
	for name, b := range before {
		a, present := after[name]
		id, ext, numbered := parseFileName(filepath.Base(name))
		inLost := strings.HasPrefix(name, lostDir+string(filepath.Separator))
		switch {
		case present && bytes.Equal(a, b):
		case inLost:
			t.Errorf("%s in lost/ vanished or changed", name)
		case name == manifestName:
			if !allow.manifestChanged {
				t.Errorf("MANIFEST changed")
			}
		case present && numbered && ext == extLog && bytes.HasPrefix(a, b):
			// appended to
		case present && numbered && ext == extLog && tailKept(b, a):
			// a torn tail cut off, after it was kept whole in lost/
		case present && numbered && ext == extFilter && allow.filtersRebuilt:
		case numbered && (ext == extTable || ext == extFilter) && allow.unfinishedOutputs && !slices.Contains(named, id):
			// an unfinished edit's output: removed, or its number reused
		case present && !inLost && movedWhole(b):
			// kept whole in lost/, then written anew (a damaged filter
			// moved aside before its rebuild)
		case present:
			t.Errorf("%s changed (%d bytes, was %d)", name, len(a), len(b))
		case movedWhole(b):
		case numbered && ext == extLog && id < man.Log:
			// flushed: documented removal
		case numbered && (ext == extTable || ext == extFilter) && !slices.Contains(man.Tables, id):
			// replaced by a compaction: documented removal
		default:
			t.Errorf("%s vanished (not moved to lost/, not a flushed log, not a compacted table)", name)
		}
	}
}
