package pebblestore

import (
	"os"
	"path/filepath"
	"testing"
)

// Module tells a store's Pebble from its format marker and, where both
// Pebbles open the format, from its newest OPTIONS file.
func TestModule(t *testing.T) {
	v1Options := "[Options]\n  max_writer_concurrency=0\n  table_property_collectors=[]\n"
	v2Options := "[Options]\n  concurrent_compactions=1\n  key_schema=DefaultKeySchema(leveldb.BytewiseComparator,16)\n"
	for _, c := range []struct {
		name   string
		files  map[string]string
		module string
		format uint64
	}{
		{"no marker: FormatMostCompatible", map[string]string{"CURRENT": "MANIFEST-000001\n", "MANIFEST-000001": ""}, ModuleV1, 1},
		{"v1-only format", map[string]string{"marker.format-version.000005.008": "", "OPTIONS-000003": v2Options}, ModuleV1, 8},
		{"shared format, v1 OPTIONS", map[string]string{"marker.format-version.000012.013": "", "OPTIONS-000003": v1Options}, ModuleV1, 13},
		{"shared format, newest OPTIONS v2", map[string]string{"marker.format-version.000012.016": "", "OPTIONS-000003": v1Options, "OPTIONS-000010": v2Options}, ModuleV2, 16},
		{"shared format, no OPTIONS", map[string]string{"marker.format-version.000012.013": ""}, ModuleV2, 13},
		{"v2-only format", map[string]string{"marker.format-version.000002.017": "", "OPTIONS-000003": v1Options}, ModuleV2, 17},
		{"highest iteration prevails", map[string]string{"marker.format-version.000002.008": "", "marker.format-version.000010.020": ""}, ModuleV2, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			module, format, why, err := Module(dir)
			if err != nil || module != c.module || format != c.format || why == "" {
				t.Fatalf("Module: %q, format %d, %q, %v; want %q, %d", module, format, why, err, c.module, c.format)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker.format-version.000001.x13"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Module(dir); err == nil {
		t.Fatal("an unreadable marker is accepted")
	}
}
