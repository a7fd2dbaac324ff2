package kvdemo

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// CheckResult is what Check found.
type CheckResult struct {
	Files    int // files examined
	Problems int // files damaged, missing or not where they belong
}

// Check verifies every file of the store in dir without changing
// anything, and writes one line per file to w: the MANIFEST (checksum,
// sense), every table it names (opens, Badger's block checksums), their
// filters (bound to the table, codec checksum), the logs still needed
// (every record intact, or where the damage is and whether it is a torn
// tail), and files no manifest names. It takes the store's lock, so it
// refuses a store another process has open.
func Check(dir string, w io.Writer, opts *Options) (CheckResult, error) {
	if opts == nil {
		opts = &Options{}
	}
	o, err := opts.withDefaults()
	if err != nil {
		return CheckResult{}, err
	}
	o.Logger = log.New(io.Discard, "", 0)
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	if _, err := fs.Stat(filepath.Join(dir, manifestName)); err != nil {
		return CheckResult{}, fmt.Errorf("kvdemo: %s holds no store: %w", dir, err)
	}
	lock, err := lockStore(fs, dir, true)
	if err != nil {
		return CheckResult{}, err
	}
	defer lock.Close()
	c := &checker{db: &DB{dir: dir, opts: o, fs: fs, noWrites: true}, w: w}

	man, err := c.db.readManifest()
	if err != nil {
		c.report(false, manifestName, "%v", err)
		return c.res, nil
	}
	c.db.man = man
	c.db.opts.Filter, c.db.opts.Compression = man.Filter, man.Compression
	c.report(true, manifestName, "version %d, filter %s, compression %s, %d tables, log %06d, seq %d",
		man.Version, man.Filter, man.Compression, len(man.Tables), man.Log, man.Seq)
	if err := c.db.configure(); err != nil {
		return c.res, err
	}
	files, err := storeFiles(fs, dir)
	if err != nil {
		return c.res, err
	}
	c.checkTables()
	c.checkLogs(files[extLog])
	c.checkUnlisted(files)
	if lost, err := fs.ReadDir(filepath.Join(dir, lostDir)); err == nil && len(lost) > 0 {
		fmt.Fprintf(w, "note %d files in %s kept as evidence by earlier recoveries\n", len(lost), filepath.Join(dir, lostDir))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c.res, err
	}
	return c.res, nil
}

// checker is one run of Check: the store opened read-only, where its
// report goes, and the count so far.
type checker struct {
	db  *DB // opened without writes; db.man is the MANIFEST once read
	w   io.Writer
	res CheckResult
}

// report writes one file's line, "ok" or "BAD", and counts it.
func (c *checker) report(ok bool, name, format string, args ...any) {
	c.res.Files++
	tag := "ok  "
	if !ok {
		tag = "BAD "
		c.res.Problems++
	}
	fmt.Fprintf(c.w, "%s %-22s %s\n", tag, name, fmt.Sprintf(format, args...))
}

// storeFiles lists the store's table, filter and log files by extension,
// each list of file numbers in ascending order. Other names are ignored.
func storeFiles(fs vfs.FS, dir string) (map[string][]uint64, error) {
	entries, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]uint64{}
	for _, e := range entries {
		if id, ext, ok := parseFileName(e.Name()); ok && e.Type().IsRegular() {
			files[ext] = append(files[ext], id)
		}
	}
	for _, ids := range files {
		slices.Sort(ids)
	}
	return files, nil
}

// checkTables opens every table the MANIFEST names and, for filter kinds
// that keep a file beside the table, checks that file too; it says what
// Open would do with a filter it cannot use.
func (c *checker) checkTables() {
	for _, id := range c.db.man.Tables {
		name := fmt.Sprintf("%06d.%s", id, extTable)
		st, err := c.db.openListedTable(id)
		if err != nil {
			c.report(false, name, "%s", quote(err))
			continue
		}
		c.report(true, name, "%d keys, %d bytes", st.keys, st.size)
		switch fname, detail, err := c.db.filter.checkStored(st); {
		case fname == "": // the kind keeps nothing beside the table
		case errors.As(err, new(unreadableFilter)):
			c.report(false, fname, "unreadable: Open reads the table without it, then rebuilds it in its place: %s", quote(err))
		case err != nil:
			c.report(false, fname, "unusable: Open reads the table without it, then moves it to lost/ and rebuilds it: %s", quote(err))
		default:
			c.report(true, fname, "%s", detail)
		}
		st.close()
	}
}

// checkLogs reports the logs present (ascending file numbers): the
// flushed ones Open removes, and every record of those still needed,
// judged as Open's replay would judge it. It ends with whether the logs
// reach the sequence number the store was closed at.
func (c *checker) checkLogs(logs []uint64) {
	man := c.db.man
	if man.Log != 0 && !slices.Contains(logs, man.Log) {
		c.report(false, fmt.Sprintf("%06d.%s", man.Log, extLog), "named by the MANIFEST and missing: acknowledged writes may be lost")
	}
	var needed []uint64
	for _, id := range logs {
		if id >= man.Log {
			needed = append(needed, id)
		} else {
			c.report(true, fmt.Sprintf("%06d.%s", id, extLog), "flushed; Open removes it")
		}
	}
	reach := man.Seq // as Open's checkLogs counts it
	// Sequence numbers rise through the logs, one log after another: a
	// record at or below one before it was written by a second process
	// that had the store open at the same time.
	var prevSeq uint64
	for i, id := range needed {
		name := fmt.Sprintf("%06d.%s", id, extLog)
		records, backAt := 0, 0
		var backSeq, backPrev uint64
		sc, err := scanLogFile(c.db.fs, fileName(c.db.dir, id, extLog), true, func(r walRecord) error {
			records++
			if r.seq <= prevSeq && backAt == 0 {
				backAt, backSeq, backPrev = records, r.seq, prevSeq
			}
			prevSeq = max(prevSeq, r.seq)
			return nil
		})
		if err != nil {
			c.report(false, name, "%s", quote(err))
			continue
		}
		// Replay (the default mode) stops at the first damage.
		reach = max(reach, sc.reach)
		switch {
		case backAt != 0:
			c.report(false, name, "record %d has sequence number %d, not above the %d before it: two processes wrote the store at the same time (its lock was bypassed), and writes acknowledged to one may have been overwritten by the other's",
				backAt, backSeq, backPrev)
		case sc.damageAt < 0:
			c.report(true, name, "%d records intact, %d bytes", records, sc.size)
		case i == len(needed)-1 && sc.nextValid == -1:
			c.report(true, name, "%d records intact; torn tail of %d bytes at offset %d (never acknowledged; Open cuts it off)", records, sc.size-sc.damageAt, sc.damageAt)
		default:
			c.report(false, name, "%v", damagedLogError(name, sc, i < len(needed)-1, TolerateCorruptedTailRecords))
		}
	}
	if man.ClosedSeq > reach {
		c.report(false, "logs", "%s", quote(closedSeqError(man, reach, needed, TolerateCorruptedTailRecords)))
	}
}

// checkUnlisted reports the tables and filters the MANIFEST does not
// name: outputs of an unfinished flush or compaction, which Open removes,
// and strays, which it keeps in lost/ as evidence.
func (c *checker) checkUnlisted(files map[string][]uint64) {
	live := map[uint64]bool{}
	for _, id := range c.db.man.Tables {
		live[id] = true
	}
	for _, ext := range []string{extTable, extFilter} {
		for _, id := range files[ext] {
			name := fmt.Sprintf("%06d.%s", id, ext)
			switch {
			case live[id]:
			case unfinishedOutput(c.db.man, id):
				c.report(true, name, "left by an unfinished flush or compaction; Open removes it")
			default:
				c.report(false, name, "not named by the MANIFEST; Open moves it to lost/")
			}
		}
	}
}
