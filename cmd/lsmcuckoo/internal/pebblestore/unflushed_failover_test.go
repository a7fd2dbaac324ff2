package pebblestore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

var stallPrimary atomic.Bool

type stallFS struct {
	vfs.FS
	primary string
}

type stallFile struct {
	vfs.File
}

func (f stallFile) Write(p []byte) (int, error) {
	if stallPrimary.Load() {
		time.Sleep(300 * time.Millisecond)
	}
	return f.File.Write(p)
}

func (f stallFile) Sync() error {
	if stallPrimary.Load() {
		time.Sleep(300 * time.Millisecond)
	}
	return f.File.Sync()
}

func (f stallFile) SyncData() error { return f.Sync() }

func (fs stallFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || filepath.Dir(name) != fs.primary {
		return f, err
	}
	return stallFile{f}, nil
}

func (fs stallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs stallFS) ReuseForWrite(old, new string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, new, c)
	return fs.wrap(new, f, err)
}

func failoverOptions(primary, secondary string) *pebble.Options {
	return &pebble.Options{
		FS:                 stallFS{vfs.Default, primary},
		FormatMajorVersion: pebble.FormatNewest,
		WALFailover: &pebble.WALFailoverOptions{
			Secondary: wal.Dir{FS: vfs.Default, Dirname: secondary},
			FailoverOptions: wal.FailoverOptions{
				PrimaryDirProbeInterval:      10 * time.Millisecond,
				HealthyProbeLatencyThreshold: 50 * time.Millisecond,
				HealthyInterval:              100 * time.Millisecond,
				UnhealthySamplingInterval:    5 * time.Millisecond,
				UnhealthyOperationLatencyThreshold: func() (time.Duration, bool) {
					return 20 * time.Millisecond, true
				},
			},
		},
	}
}

// TestUnflushedWALFailover: Pebble v2 with WAL failover writes one log in
// segments: NNNNNN.log in the primary dir, NNNNNN-001.log in the secondary,
// NNNNNN-002.log back in the primary after failing back. The segments are
// not read (Pebble merges them by sequence number); ReadUnflushed counts
// the segment files it sees, so that inspect can say its figure is short.
func TestUnflushedWALFailover(t *testing.T) {
	root := t.TempDir()
	primary, secondary := filepath.Join(root, "db"), filepath.Join(root, "wal2")
	os.MkdirAll(primary, 0o755)
	os.MkdirAll(secondary, 0o755)
	o := failoverOptions(primary, secondary)
	o.Logger = &capLogger{}
	db, err := pebble.Open(primary, o)
	if err != nil {
		t.Fatal(err)
	}
	put := func(from, to int) {
		for i := from; i < to; i++ {
			if err := db.Set([]byte(fmt.Sprintf("key%08d", i)), []byte("v"), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 100)
	stallPrimary.Store(true)
	put(100, 200)
	stallPrimary.Store(false)
	time.Sleep(1 * time.Second)
	put(200, 300)
	m := db.Metrics()
	t.Logf("WAL failover metrics: %+v", m.WAL.Failover)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ls := func(d string) string {
		ents, _ := os.ReadDir(d)
		var s []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				st, _ := os.Stat(filepath.Join(d, e.Name()))
				s = append(s, fmt.Sprintf("%s(%d)", e.Name(), st.Size()))
			}
		}
		return strings.Join(s, " ")
	}
	t.Logf("primary: %s", ls(primary))
	t.Logf("secondary: %s", ls(secondary))
	if !strings.Contains(ls(primary)+ls(secondary), "-0") {
		t.Skip("the primary directory's stall did not make Pebble fail over on this machine: no log segments")
	}
	u, err := ReadUnflushed(primary)
	t.Logf("inspect: %+v %v", u, err)

	// Pebble's replay of a copy of both dirs.
	cpP, cpS := primary, secondary // opened last: nothing reads them after
	lg := &capLogger{}
	o2 := &pebble.Options{Logger: lg, FormatMajorVersion: pebble.FormatNewest,
		WALFailover: &pebble.WALFailoverOptions{Secondary: wal.Dir{FS: vfs.Default, Dirname: cpS}}}
	db2, err := pebble.Open(cpP, o2)
	if err != nil {
		t.Fatal(err)
	}
	db2.Close()
	var keys int64
	for _, l := range lg.lines {
		if m := replayRe.FindStringSubmatch(l); m != nil {
			t.Logf("replay: %s", l)
			var k int64
			fmt.Sscan(m[2], &k)
			keys += k
		}
	}
	var w int64
	if u != nil {
		w = u.Writes
	}
	// Segments are not read: the count is a lower bound, and says so.
	if u == nil || w > keys || strings.Contains(ls(primary), "-0") && u.FailoverSegments == 0 {
		t.Errorf("inspect counts %+v, Pebble replays %d keys", u, keys)
	}
}
