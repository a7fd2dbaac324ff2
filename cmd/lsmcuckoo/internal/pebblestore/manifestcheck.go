package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/record"
)

// CurrentManifest names the store's current manifest: the one its manifest
// marker names (the highest iteration prevailing), else the one CURRENT
// names, as Pebble finds it.
func CurrentManifest(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	best, name := -1, ""
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "marker.manifest.")
		if !ok {
			continue
		}
		iter, val, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(iter)
		if ok && err == nil && n > best {
			best, name = n, val
		}
	}
	if name != "" {
		return name, nil
	}
	b, err := ReadFileAtMost(filepath.Join(dir, "CURRENT"), 4096)
	if err != nil {
		return "", fmt.Errorf("no manifest marker and no CURRENT: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// CheckManifest refuses a store whose manifest ends in a damaged record
// while table files it does not list lie in the directory. Pebble reads a
// manifest up to its first damaged record and takes the rest for a write
// a crash cut short: the tables the lost records list are then obsolete to
// it, and the first read-write open deletes them. A crash leaves at most
// the tail of the last record damaged, and the outputs of compactions it
// interrupted unlisted; the check cannot tell those apart from a manifest
// damaged in the middle, so it refuses both, and leaves the choice to the
// store's owner, whose own open deletes what Pebble takes for obsolete.
func CheckManifest(dir string, s *Snapshot) error {
	name, err := CurrentManifest(dir)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	records := 0
	for {
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			listed := map[uint64]bool{}
			for l := range s.Levels {
				for _, t := range s.Levels[l] {
					listed[t.FileNum] = true
				}
			}
			unlisted, bytes := unlistedTables(dir, listed)
			if unlisted == 0 {
				return nil
			}
			return fmt.Errorf("%s is damaged after its record %d (%v), and %d table files (%d bytes) it does not list lie in %s: "+
				"Pebble would take them for obsolete and delete them on opening the store; restore the manifest from a backup, "+
				"or, if the tables are the outputs of an interrupted compaction, open the store once with the application",
				name, records, err, unlisted, bytes, dir)
		}
		records++
	}
}

// unlistedTables counts the table files in dir whose numbers are not in
// listed, and their bytes.
func unlistedTables(dir string, listed map[uint64]bool) (n int, bytes int64) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		num, ok := strings.CutSuffix(e.Name(), ".sst")
		if !ok {
			continue
		}
		fn, err := strconv.ParseUint(num, 10, 64)
		if err != nil || listed[fn] {
			continue
		}
		n++
		if info, err := e.Info(); err == nil {
			bytes += info.Size()
		}
	}
	return n, bytes
}
