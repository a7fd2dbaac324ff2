package dbbench

import (
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// LatencyFS models a storage device under Pebble: every ReadAt on an
// sstable (which Pebble issues only for blocks missing from its block
// cache, and when it opens a table) takes the set delay more, whatever the
// operating system's page cache holds. The delay is a busy wait on the
// reading thread's clock (threadTime), the clock the benchmark measures
// with: Go's timers on this kind of host wake about a millisecond late, far
// coarser than a device read, and a wait on the wall clock would come out
// short whenever another process took the core.
type LatencyFS struct {
	vfs.FS
	delay atomic.Int64 // nanoseconds; 0 turns the model off
	reads atomic.Int64
	waits atomic.Int64 // nanoseconds actually spent waiting
}

// NewLatencyFS wraps fs with the delay off.
func NewLatencyFS(fs vfs.FS) *LatencyFS { return &LatencyFS{FS: fs} }

// SetDelay sets the modelled latency per read; 0 turns it off.
func (fs *LatencyFS) SetDelay(d time.Duration) { fs.delay.Store(int64(d)) }

// Reads returns the sstable reads so far and the time spent waiting on the
// modelled device.
func (fs *LatencyFS) Reads() (n int64, waited time.Duration) {
	return fs.reads.Load(), time.Duration(fs.waits.Load())
}

// Unwrap returns the wrapped file system.
func (fs *LatencyFS) Unwrap() vfs.FS { return fs.FS }

// Open wraps sstables; other files pass through.
func (fs *LatencyFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &latencyFile{File: f, fs: fs}, nil
}

type latencyFile struct {
	vfs.File
	fs *LatencyFS
}

func (f *latencyFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.reads.Add(1)
	if d := time.Duration(f.fs.delay.Load()); d > 0 {
		// threadTime is the current thread's clock: a goroutine moved to
		// another thread mid-wait would subtract one thread's clock from
		// another's (seconds off, seen under the race detector). Locking
		// nests, so a prober already locked to its thread stays locked.
		runtime.LockOSThread()
		start := threadTime()
		waited := time.Duration(0)
		for waited < d {
			waited = threadTime() - start
		}
		runtime.UnlockOSThread()
		f.fs.waits.Add(int64(waited))
	}
	return f.File.ReadAt(p, off)
}
