package main

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// writerLoop is the child process that owns a store: it opens it, says
// READY, and writes and flushes until it is killed.
func writerLoop(dir string) {
	o := testOptions()
	bloomPolicy(o)
	o.Filters = map[string]pebble.FilterPolicy{"rocksdb.BuiltinBloomFilter": bloom.FilterPolicy(10)}
	db, err := pebble.Open(dir, o)
	if err != nil {
		panic(err)
	}
	println("READY")
	for i := 0; ; i++ {
		_ = db.Set(key(1_000_000+i), value(i, 48), pebble.NoSync)
		if i%5000 == 4999 {
			_ = db.Flush()
		}
	}
}

func TestInspectShow(t *testing.T) {
	dir := t.TempDir()
	buildStore(t, dir, storeSpec{keys: 60000, policy: bloomPolicy})
	var out, errb bytes.Buffer
	code := run([]string{"inspect", dir}, &out, &errb)
	t.Logf("exit %d\n%s\n%s", code, out.String(), errb.String())
}
