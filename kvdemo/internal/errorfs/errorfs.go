// Package errorfs is a fault-injecting vfs.FS for kvdemo's tests, modelled
// on Pebble's vfs/errorfs and its crash-testing filesystem. It wraps a real
// filesystem and can:
//
//   - fail the Nth write, fsync, create, rename or directory fsync of
//     matching files with an error of the test's choice (ENOSPC, EIO);
//   - make a failing write short: part of the buffer reaches the file;
//   - limit the space writes may use (a full disk: writes beyond the limit
//     write what fits and fail with ENOSPC), and give space back later;
//   - crash: drop everything not yet made durable (file data past the last
//     fsync; creations of files and directories, and renames, past the last
//     fsync of their directory; with DeferRemoves removals too; truncations
//     not followed by an fsync of the file), or tear it (Rule.Torn), after
//     which every operation fails;
//   - flip a bit in what reads return, or fail a read;
//   - crash at the Nth operation of a kind (a sweep's crash points), and
//     tell the test what was durable at the moment a rule fired.
//
// It tracks durability per path, which is exact for how kvdemo writes:
// whole files written once, and logs that are only appended to.
package errorfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// Op is a kind of filesystem operation a Rule can fail.
type Op uint8

const (
	OpWrite Op = iota + 1
	OpSync
	OpCreate
	OpRename
	OpSyncDir
	OpRemove
	OpRead
	OpTruncate
	OpOpen // opening an existing file for reading or appending
)

func (o Op) String() string {
	return [...]string{"", "write", "fsync", "create", "rename", "syncdir", "remove", "read", "truncate", "open"}[o]
}

// ENOSPC and EIO are the errors a full or failing disk returns.
var (
	ENOSPC = syscall.ENOSPC
	EIO    = syscall.EIO
)

// ErrCrashed is returned by every operation after Crash.
var ErrCrashed = errors.New("errorfs: filesystem crashed")

// Rule fails operations: the matching operations after the first Skip
// ones, Times of them (0: all); with Every, only every Every-th of those.
type Rule struct {
	Op    Op
	Match func(path string) bool // nil matches every path
	Skip  int
	Times int
	Every int
	Err   error // default EIO
	// Short: a failing write first writes half its buffer.
	Short bool
	// FlipAt (OpRead): unless Err or Crash is set, reads of matching
	// files do not fail but return the byte at this file offset with its
	// lowest bit flipped. With Err or Crash, OpRead rules fail reads like
	// any other operation.
	FlipAt int64
	// Crash: instead of failing the operation, crash the filesystem just
	// before it (see FS.Crash): it and everything after fail ErrCrashed.
	Crash bool
	// Torn (with Crash): the power loss tears writes in flight instead
	// of dropping them: each file keeps the first half of what it held
	// past its last fsync (a torn tail), as a disk may that wrote some of
	// the pages of an unsynced write.
	Torn bool
	// OnFire, if set, is called after the rule fires, once the operation
	// it failed has returned (having made nothing durable) and while no
	// other operation is in flight, before any crash it causes, with what
	// a crash at that moment would leave: durable(path) is the length of
	// path that would survive, and false if the file would not. It runs
	// under the FS's locks: it must not call the FS (reading files with
	// package os is fine).
	OnFire func(durable func(path string) (int64, bool))

	seen, fired int
}

// FS is the fault-injecting filesystem.
type FS struct {
	inner vfs.FS

	// opMu is held shared by every operation in flight and exclusively
	// by the power loss (see begin).
	opMu sync.RWMutex

	mu           sync.Mutex
	rules        []*Rule
	space        int64 // bytes writes may still add; < 0: unlimited
	crashed      bool
	torn         bool                                       // the crash keeps half of each unsynced tail
	deferRemoves bool                                       // see DeferRemoves
	fires        []func(durable func(string) (int64, bool)) // OnFire calls due at end()
	lost         bool                                       // the crash's power loss has been applied
	lossErr      error                                      // what applying it met
	synced       map[string]int64                           // durable length of files written through us
	// cut: a file's content before a truncation that no fsync of it has
	// made durable yet. A crash brings it back (and then cuts or tears
	// what of it was never synced, as for any file): until the fsync, the
	// disk may still hold the old length and the bytes written before.
	cut     map[string][]byte
	pending []dirOp // creations and renames not yet made durable
	counts  map[Op]int
}

type dirOp struct {
	create   string // a file created, or with dir a directory
	dir      bool
	from, to string // a rename
	oldTo    []byte // the rename's target content before it was replaced
	hadTo    bool
	// removed: a file removed (DeferRemoves), with its content and the
	// length of it that was durable.
	removed        string
	content        []byte
	durableContent int64
}

// New wraps inner.
func New(inner vfs.FS) *FS {
	return &FS{inner: inner, space: -1, synced: map[string]int64{}, cut: map[string][]byte{}, counts: map[Op]int{}}
}

// Add installs a rule.
func (fs *FS) Add(r *Rule) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.rules = append(fs.rules, r)
}

// Clear removes every rule.
func (fs *FS) Clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.rules = nil
}

// SetSpace limits the bytes writes may still add (< 0: unlimited).
func (fs *FS) SetSpace(n int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.space = n
}

// Count says how many operations of a kind were attempted.
func (fs *FS) Count(op Op) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.counts[op]
}

// check counts an operation on path and returns the error a rule makes it
// fail with, if any.
func (fs *FS) check(op Op, path string) (*Rule, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.checkLocked(op, path)
}

func (fs *FS) checkLocked(op Op, path string) (*Rule, error) {
	if fs.crashed {
		return nil, ErrCrashed
	}
	fs.counts[op]++
	for _, r := range fs.rules {
		if r.Op != op || (r.Match != nil && !r.Match(path)) || r.flips() {
			continue
		}
		r.seen++
		if r.seen <= r.Skip || (r.Times > 0 && r.fired >= r.Times) || (r.Every > 1 && (r.seen-r.Skip)%r.Every != 0) {
			continue
		}
		r.fired++
		if r.OnFire != nil {
			fs.fires = append(fs.fires, r.OnFire)
		}
		if r.Crash {
			fs.crashed, fs.torn = true, r.Torn // the power loss itself comes at end()
			return nil, ErrCrashed
		}
		err := r.Err
		if err == nil {
			err = EIO
		}
		return r, &os.PathError{Op: op.String(), Path: path, Err: err}
	}
	return nil, nil
}

// flips: an OpRead rule that flips a bit instead of failing.
func (r *Rule) flips() bool { return r.Op == OpRead && r.Err == nil && !r.Crash }

// durableLocked says what of path a crash now would leave: nothing if its
// creation or the rename that made it is not yet durable, else its length
// at its last fsync (or, for a file this FS never wrote, its length).
func (fs *FS) durableLocked(path string) (int64, bool) {
	for _, op := range fs.pending {
		if op.create == path || op.to == path || (op.dir && strings.HasPrefix(path, op.create+string(filepath.Separator))) {
			return 0, false
		}
	}
	if n, ok := fs.synced[path]; ok {
		return n, true
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return st.Size(), true
}

// Crashed says whether the filesystem has crashed (by Crash or a rule).
func (fs *FS) Crashed() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.crashed
}

func (fs *FS) Create(name string) (vfs.File, error) {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := fs.inner.Create(name)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	fs.synced[name] = 0
	fs.pending = append(fs.pending, dirOp{create: name})
	fs.mu.Unlock()
	return &file{fs: fs, f: f, path: name}, nil
}

func (fs *FS) Open(name string) (vfs.File, error) {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := fs.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &file{fs: fs, f: f, path: name}, nil
}

func (fs *FS) OpenAppend(name string) (vfs.File, error) {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := fs.inner.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil {
		fs.mu.Lock()
		if _, ok := fs.synced[name]; !ok {
			fs.synced[name] = st.Size()
		}
		fs.mu.Unlock()
	}
	return &file{fs: fs, f: f, path: name}, nil
}

func (fs *FS) Remove(name string) error {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpRemove, name); err != nil {
		return err
	}
	fs.mu.Lock()
	// A file whose creation is itself not durable needs no undoing: the
	// crash undoes the creation.
	n, durable := fs.durableLocked(name)
	keep := fs.deferRemoves && durable
	fs.mu.Unlock()
	op := dirOp{removed: name}
	if keep {
		b, err := vfs.ReadFile(fs.inner, name)
		op.content, op.durableContent = b, min(n, int64(len(b)))
		keep = err == nil
	}
	err := fs.inner.Remove(name)
	if err == nil {
		fs.mu.Lock()
		if keep {
			fs.pending = append(fs.pending, op)
		}
		delete(fs.synced, name)
		delete(fs.cut, name) // its durable content is the removal's record
		fs.mu.Unlock()
	}
	return err
}

// DeferRemoves makes removals like creations and renames: not durable
// until their directory is fsynced, so a crash before that brings the
// file back (with what of it was durable), as POSIX allows.
func (fs *FS) DeferRemoves() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.deferRemoves = true
}

func (fs *FS) RemoveAll(name string) error {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpRemove, name); err != nil {
		return err
	}
	return fs.inner.RemoveAll(name)
}

func (fs *FS) Rename(oldname, newname string) error {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpRename, newname); err != nil {
		return err
	}
	op := dirOp{from: oldname, to: newname}
	if b, err := vfs.ReadFile(fs.inner, newname); err == nil {
		op.oldTo, op.hadTo = b, true
	}
	if err := fs.inner.Rename(oldname, newname); err != nil {
		return err
	}
	fs.mu.Lock()
	if n, ok := fs.synced[oldname]; ok {
		fs.synced[newname] = n
		delete(fs.synced, oldname)
	}
	if b, ok := fs.cut[oldname]; ok {
		fs.cut[newname] = b
		delete(fs.cut, oldname)
	}
	fs.pending = append(fs.pending, op)
	fs.mu.Unlock()
	return nil
}

func (fs *FS) MkdirAll(dir string, perm os.FileMode) error {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(0, dir); err != nil {
		return err
	}
	// The directories this creates (not those that were there) are, like
	// files, durable only once their parent is fsynced.
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		created = append(created, d)
	}
	if err := fs.inner.MkdirAll(dir, perm); err != nil {
		return err
	}
	fs.mu.Lock()
	for i := len(created) - 1; i >= 0; i-- {
		fs.pending = append(fs.pending, dirOp{create: created[i], dir: true})
	}
	fs.mu.Unlock()
	return nil
}

func (fs *FS) ReadDir(dir string) ([]os.DirEntry, error) {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(0, dir); err != nil {
		return nil, err
	}
	return fs.inner.ReadDir(dir)
}

func (fs *FS) Stat(name string) (os.FileInfo, error) {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(0, name); err != nil {
		return nil, err
	}
	return fs.inner.Stat(name)
}

// SyncDir makes durable the creations and renames of entries in dir.
func (fs *FS) SyncDir(dir string) error {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(OpSyncDir, dir); err != nil {
		return err
	}
	if err := fs.inner.SyncDir(dir); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	kept := fs.pending[:0]
	for _, op := range fs.pending {
		p := op.create
		if p == "" {
			p = op.to
		}
		if op.removed != "" {
			p = op.removed
		}
		if filepath.Dir(p) != filepath.Clean(dir) {
			kept = append(kept, op)
		}
	}
	fs.pending = kept
	return nil
}

func (fs *FS) Lock(name string) (io.Closer, error) {
	fs.begin()
	defer fs.end()
	if _, err := fs.check(0, name); err != nil {
		return nil, err
	}
	return fs.inner.Lock(name)
}

// Crash simulates losing power now: renames and creations not made
// durable by a directory fsync are undone, truncations not followed by an
// fsync are undone, files are cut back to what their last fsync made
// durable, and every later operation fails with ErrCrashed. (The test
// then opens the store again through a new FS.)
func (fs *FS) Crash() error {
	fs.mu.Lock()
	fs.crashed = true
	fs.mu.Unlock()
	return fs.powerLoss()
}

// CrashTorn is Crash, tearing unsynced data instead of dropping it (as a
// Rule with Crash and Torn does): each file keeps the first half of what
// it held past its last fsync.
func (fs *FS) CrashTorn() error {
	fs.mu.Lock()
	fs.crashed, fs.torn = true, true
	fs.mu.Unlock()
	return fs.powerLoss()
}

// begin and end bracket every operation. A crash is one point in time:
// operations that passed their check before it complete whole (their data
// and their bookkeeping) before the power loss undoes what they did not
// make durable, and operations after it fail. Without this, an fsync in
// flight when another goroutine crashed the FS could return success for
// data the crash had just cut off.
func (fs *FS) begin() { fs.opMu.RLock() }

func (fs *FS) end() {
	fs.opMu.RUnlock()
	fs.mu.Lock()
	fire := len(fs.fires) > 0
	due := fs.crashed && !fs.lost
	fs.mu.Unlock()
	if fire {
		fs.opMu.Lock()
		fs.mu.Lock()
		fires := fs.fires
		fs.fires = nil
		for _, f := range fires {
			f(fs.durableLocked)
		}
		fs.mu.Unlock()
		fs.opMu.Unlock()
	}
	if due {
		fs.powerLoss()
	}
}

// powerLoss undoes, once no operation is in flight, what a crash loses.
func (fs *FS) powerLoss() error {
	fs.opMu.Lock()
	defer fs.opMu.Unlock()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.lost {
		return fs.lossErr
	}
	fs.lost = true
	fs.lossErr = fs.undoLocked()
	return fs.lossErr
}

func (fs *FS) undoLocked() error {
	var first error
	note := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrNotExist) {
			first = err
		}
	}
	for i := len(fs.pending) - 1; i >= 0; i-- {
		op := fs.pending[i]
		switch {
		case op.removed != "":
			note(writeWhole(op.removed, op.content[:op.durableContent]))
			fs.synced[op.removed] = op.durableContent
		case op.create != "" && op.dir:
			note(fs.inner.RemoveAll(op.create))
			for path := range fs.synced {
				if strings.HasPrefix(path, op.create+string(filepath.Separator)) {
					delete(fs.synced, path)
					delete(fs.cut, path)
				}
			}
		case op.create != "":
			note(fs.inner.Remove(op.create))
			delete(fs.synced, op.create)
		default:
			note(fs.inner.Rename(op.to, op.from))
			if n, ok := fs.synced[op.to]; ok {
				fs.synced[op.from] = n
				delete(fs.synced, op.to)
			}
			if op.hadTo {
				note(writeWhole(op.to, op.oldTo))
				fs.synced[op.to] = int64(len(op.oldTo))
			}
		}
	}
	for path, old := range fs.cut {
		if _, err := os.Stat(path); err == nil {
			note(writeWhole(path, old))
		}
	}
	for path, n := range fs.synced {
		if st, err := os.Stat(path); err == nil && st.Size() > n {
			if fs.torn {
				n += (st.Size() - n) / 2
			}
			note(os.Truncate(path, n))
		}
	}
	return first
}

func writeWhole(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

// file wraps an open file.
type file struct {
	fs   *FS
	f    vfs.File
	path string
	off  int64 // for Read
}

func (f *file) Write(p []byte) (int, error) {
	f.fs.begin()
	defer f.fs.end()
	fs := f.fs
	fs.mu.Lock()
	r, err := fs.checkLocked(OpWrite, f.path)
	allowed := len(p)
	if err == nil && fs.space >= 0 && int64(len(p)) > fs.space {
		allowed = int(fs.space)
		err = &os.PathError{Op: "write", Path: f.path, Err: ENOSPC}
	} else if err != nil && !errors.Is(err, ErrCrashed) {
		allowed = 0
		if r != nil && r.Short {
			allowed = len(p) / 2
		}
	}
	if errors.Is(err, ErrCrashed) {
		allowed = 0
	}
	if fs.space >= 0 {
		fs.space -= int64(allowed)
	}
	fs.mu.Unlock()
	n, werr := f.f.Write(p[:allowed])
	if werr != nil {
		return n, werr
	}
	if err != nil {
		return n, err
	}
	return n, nil
}

func (f *file) Sync() error {
	f.fs.begin()
	defer f.fs.end()
	if _, err := f.fs.check(OpSync, f.path); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	st, err := f.f.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	if _, ok := f.fs.synced[f.path]; ok {
		f.fs.synced[f.path] = st.Size()
	}
	delete(f.fs.cut, f.path)
	f.fs.mu.Unlock()
	return nil
}

func (f *file) Truncate(size int64) error {
	f.fs.begin()
	defer f.fs.end()
	if _, err := f.fs.check(OpTruncate, f.path); err != nil {
		return err
	}
	f.fs.mu.Lock()
	_, noted := f.fs.cut[f.path]
	f.fs.mu.Unlock()
	var old []byte
	if !noted {
		var err error
		if old, err = os.ReadFile(f.path); err != nil {
			return err
		}
	}
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	if !noted {
		f.fs.mu.Lock()
		f.fs.cut[f.path] = old
		f.fs.mu.Unlock()
	}
	return nil
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.begin()
	defer f.fs.end()
	f.fs.mu.Lock()
	if _, err := f.fs.checkLocked(OpRead, f.path); err != nil {
		f.fs.mu.Unlock()
		return 0, err
	}
	var flips []int64
	for _, r := range f.fs.rules {
		if r.flips() && (r.Match == nil || r.Match(f.path)) {
			flips = append(flips, r.FlipAt)
		}
	}
	f.fs.mu.Unlock()
	n, err := f.f.ReadAt(p, off)
	for _, at := range flips {
		if at >= off && at < off+int64(n) {
			p[at-off] ^= 1
		}
	}
	return n, err
}

func (f *file) Close() error               { return f.f.Close() }
func (f *file) Stat() (os.FileInfo, error) { return f.f.Stat() }
func (f *file) String() string             { return fmt.Sprintf("errorfs file %s", f.path) }

var _ vfs.FS = (*FS)(nil)
