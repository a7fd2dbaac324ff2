package pebblestore

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The two Pebble modules a store may be written by.
const (
	ModuleV1 = "github.com/cockroachdb/pebble"    // v1.1.x
	ModuleV2 = "github.com/cockroachdb/pebble/v2" // v2.x
)

// Format major versions that tell the two modules' stores apart: both
// number them alike, Pebble v2 opens a store only from
// FormatFlushableIngest on, and Pebble v1.1 knows none past
// FormatVirtualSSTables.
const (
	V2OldestFormat = 13 // FormatFlushableIngest
	V1NewestFormat = 16 // FormatVirtualSSTables
	// v1MostCompatible is the format of a store without a format marker:
	// one written before the marker existed, or by Pebble v1 at its
	// default, FormatMostCompatible, which keeps only the CURRENT file.
	v1MostCompatible = 1
)

// FormatMajorVersion reads the store's format major version from the name
// of its format marker file (marker.format-version.NNNNNN.VVV, the highest
// iteration NNNNNN prevailing, as Pebble reads it), without opening the
// store. A store without the marker is at FormatMostCompatible.
func FormatMajorVersion(dir string) (uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	best, vers := -1, uint64(v1MostCompatible)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "marker.format-version.")
		if !ok {
			continue
		}
		iter, val, ok := strings.Cut(rest, ".")
		n, err1 := strconv.Atoi(iter)
		v, err2 := strconv.ParseUint(val, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return 0, fmt.Errorf("%s: unreadable format marker %s", dir, e.Name())
		}
		if n > best {
			best, vers = n, v
		}
	}
	return vers, nil
}

// optionsWriter names the module that wrote the store's newest OPTIONS
// file, the one its last read-write open wrote, from the options only one
// of the two writes; "" if there is no OPTIONS file or it names neither.
func optionsWriter(dir string) string {
	module := ""
	newestOptions(dir, func(line string) bool {
		key, _, _ := strings.Cut(line, "=")
		switch key {
		case "max_writer_concurrency", "force_writer_parallelism", "table_property_collectors":
			module = ModuleV1
		case "key_schema", "concurrent_compactions", "enable_columnar_blocks":
			module = ModuleV2
		}
		return module == ""
	})
	return module
}

// Module decides which Pebble module reads the store in dir: the only one
// that can open its format major version, and where both can (from
// FormatFlushableIngest to FormatVirtualSSTables), the one that wrote its
// newest OPTIONS file, Pebble v2 if that says neither. why says how it was
// decided, for the report.
func Module(dir string) (module string, format uint64, why string, err error) {
	format, err = FormatMajorVersion(dir)
	if err != nil {
		return "", 0, "", err
	}
	switch {
	case format < V2OldestFormat:
		return ModuleV1, format, fmt.Sprintf("format major version %d, older than any Pebble v2 opens", format), nil
	case format > V1NewestFormat:
		return ModuleV2, format, fmt.Sprintf("format major version %d, newer than any Pebble v1 writes", format), nil
	}
	switch optionsWriter(dir) {
	case ModuleV1:
		return ModuleV1, format, "its newest OPTIONS file was written by Pebble v1", nil
	case ModuleV2:
		return ModuleV2, format, "its newest OPTIONS file was written by Pebble v2", nil
	}
	return ModuleV2, format, fmt.Sprintf("format major version %d opens in both Pebble v1 and v2, and no OPTIONS file says which wrote it", format), nil
}
