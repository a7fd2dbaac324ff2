// Command kvdemo drives a kvdemo store: single operations, bulk loads, a
// point-lookup workload, a RESP2 server for redis-cli and redis-benchmark,
// and the end-to-end filter demo.
//
//	kvdemo put    -dir DIR KEY VALUE
//	kvdemo get    -dir DIR KEY
//	kvdemo del    -dir DIR KEY
//	kvdemo load   -dir DIR -n N [-value-size 64]
//	kvdemo lookup -dir DIR -n N [-miss 0.9] [-gets 100000]
//	kvdemo stats  -dir DIR
//	kvdemo check  DIR
//	kvdemo serve  -dir DIR [-addr 127.0.0.1:6380] [-requirepass-file FILE] [-protected-mode=true]
//	kvdemo demo   [-n 1000000] [-gets 100000] [-miss 0.9]
//
// Flags may come before or after the arguments; "--" ends the flags, for
// a key or value that starts with "-". put, load and serve create a store
// in a directory that holds none; get, del, lookup and stats refuse one.
//
// Exit status: 0 on success, 1 on failure (and for get of an absent key),
// 2 on misuse.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/server"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/workload"
)

const usage = `usage: kvdemo <command> [flags] [args]

commands:
  put    -dir DIR KEY VALUE      store VALUE under KEY (durable on return)
  get    -dir DIR KEY            print KEY's value (exit 1 if absent)
  del    -dir DIR KEY            delete KEY
  load   -dir DIR -n N           write N generated keys (batched sync), then flush
  lookup -dir DIR -n N           point-lookup workload over a store loaded with load -n N;
                                 prints throughput and the filter counters
  stats  -dir DIR                print the store's shape and counters
  check  DIR                     verify every file of the store, change nothing
                                 (exit 1 if anything is damaged)
  serve  -dir DIR                RESP2 server for redis-cli / redis-benchmark
                                 (-addr, default 127.0.0.1:6380; -requirepass-file FILE
                                 for AUTH; SIGTERM closes cleanly)
  demo                           1M keys into cuckoo, global, bloom and none stores; lookups;
                                 side-by-side table (temporary directory unless -dir)

Flags may also follow the arguments; "--" ends them (for a key that starts
with "-"). get, del, lookup and stats never create a store.
Run 'kvdemo <command> -h' for a command's flags.
`

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }

// errUsage marks misuse: the caller prints usage and exits 2.
var errUsage = errors.New("usage")

type command struct {
	fs   *flag.FlagSet
	args string // positional arguments, for the usage line
	run  func(ctx context.Context, c *command, out io.Writer) error

	dir       string
	filter    string
	memtable  int64
	maxTables int
	n, gets   int
	valueSize int
	miss      float64
	seed      uint64
	addr      string
	maxConns  int
	memKeys   int
	pass      string // -requirepass
	passFile  string // -requirepass-file
	protected bool   // -protected-mode
	timeouts  struct{ idle, auth, write, request, evictIdle time.Duration }
	reqBudget int64 // MiB
	guessing  struct {
		burst                             int
		interval, failDelay, failInterval time.Duration
	}
	mustExist   bool // the command reads or deletes: never create a store
	bits        float64
	blockCache  int64 // MiB
	stderr      io.Writer
	walRecovery string
	positional  []string
}

func newCommand(name string, stderr io.Writer) *command {
	c := &command{fs: flag.NewFlagSet(name, flag.ContinueOnError), stderr: stderr}
	c.fs.SetOutput(stderr)
	store := func(dirRequired bool) {
		help := "the store's directory (required)"
		if !dirRequired {
			help = "parent directory for the demo's stores (default: a temporary directory, removed afterwards)"
		}
		c.fs.StringVar(&c.dir, "dir", "", help)
		c.fs.Int64Var(&c.blockCache, "block-cache", 64, "MiB of decoded table blocks kept in memory (0: none)")
		if dirRequired {
			c.fs.StringVar(&c.filter, "filter", "", "table filter for a new store: cuckoo, bloom, global (one store-wide index) or none (default cuckoo; an existing store keeps its own)")
			c.fs.Int64Var(&c.memtable, "memtable", 0, "memtable flush threshold in bytes (default 8 MiB)")
			c.fs.IntVar(&c.maxTables, "max-tables", 0, "compact when there are more tables than this (default 24; -1 never)")
			c.fs.StringVar(&c.walRecovery, "wal-recovery", "", "what opening does with a damaged log: tolerate-tail (default), absolute, point-in-time or skip-any")
		}
	}
	switch name {
	case "put":
		store(true)
		c.args, c.run = "KEY VALUE", runPut
	case "get":
		store(true)
		c.args, c.run, c.mustExist = "KEY", runGet, true
	case "del":
		store(true)
		c.args, c.run, c.mustExist = "KEY", runDel, true
	case "load":
		store(true)
		c.fs.Float64Var(&c.bits, "bits", 0, "filter budget in bits/key for a new store, whatever its kind (global: table codes included; default 10)")
		c.fs.IntVar(&c.n, "n", 0, "number of generated keys (required)")
		c.fs.IntVar(&c.valueSize, "value-size", 64, "bytes per value")
		c.run = runLoad
	case "lookup":
		store(true)
		c.fs.IntVar(&c.n, "n", 0, "the -n the store was loaded with (required)")
		c.fs.IntVar(&c.gets, "gets", 100_000, "number of Gets")
		c.fs.Float64Var(&c.miss, "miss", 0.9, "share of Gets for absent keys, 0..1")
		c.fs.Uint64Var(&c.seed, "seed", 1, "seed of the key choice")
		c.run, c.mustExist = runLookup, true
	case "stats":
		store(true)
		c.run, c.mustExist = runStats, true
	case "check":
		c.args, c.run = "DIR", runCheck
	case "serve":
		store(true)
		c.fs.Float64Var(&c.bits, "bits", 0, "filter budget in bits/key for a new store, whatever its kind (global: table codes included; default 10)")
		c.fs.StringVar(&c.addr, "addr", "127.0.0.1:6380", "listen address (loopback unless told otherwise; port 0 picks a free one)")
		c.fs.IntVar(&c.maxConns, "max-conns", 1024, "simultaneous connections")
		c.fs.StringVar(&c.passFile, "requirepass-file", "", "file holding the password clients must give with AUTH (its first line; safer than -requirepass, which ps shows)")
		c.fs.StringVar(&c.pass, "requirepass", "", "password clients must give with AUTH (visible to other users in ps: prefer -requirepass-file)")
		c.fs.BoolVar(&c.protected, "protected-mode", true, "while no password is set, refuse clients that are not on the loopback interface, telling them why")
		c.fs.DurationVar(&c.timeouts.idle, "idle-timeout", 0, "close a connection whose next command has not arrived in full after this long (0: never)")
		c.fs.DurationVar(&c.timeouts.auth, "auth-timeout", 10*time.Second, "with a password set, close a connection that has not authenticated this long after connecting (0: never)")
		c.fs.DurationVar(&c.timeouts.write, "write-timeout", 30*time.Second, "close a connection that accepts none of its replies for this long (0: never)")
		c.fs.DurationVar(&c.timeouts.request, "request-timeout", 30*time.Second, "close a connection whose command has begun to arrive and is not complete this long after its first byte (0: never)")
		c.fs.Int64Var(&c.reqBudget, "request-budget", 64, "MiB that the commands of all connections may hold while they arrive, beyond 64 KiB each; a command that cannot get its share waits for it within -request-timeout, or is refused with an error (0: no bound; else at least 3)")
		c.fs.DurationVar(&c.timeouts.evictIdle, "evict-idle", time.Second, "when every -max-conns slot is taken, a new client takes the slot of the connection that has gone longest without authenticating or, when every connection has authenticated, has waited longest for its next command, once that is this long (0: never; the new client is refused)")
		c.fs.IntVar(&c.guessing.burst, "auth-burst", 10, "AUTHs a source address (an IPv4 address, an IPv6 /64) may try at once; after them its tries, right or wrong, wait -auth-interval each")
		c.fs.DurationVar(&c.guessing.interval, "auth-interval", 200*time.Millisecond, "a source address that has used its -auth-burst tries once per this interval (0: no per-address limit)")
		c.fs.DurationVar(&c.guessing.failDelay, "auth-fail-delay", 100*time.Millisecond, "the least a failed AUTH waits for its answer, which bounds one connection's tries (0: none)")
		c.fs.DurationVar(&c.guessing.failInterval, "auth-fail-interval", 20*time.Millisecond, "answers to failed AUTHs across the server are at least this far apart; a right password never waits for them (0: no spacing)")
		c.run = runServe
	case "demo":
		store(false)
		c.fs.Float64Var(&c.bits, "bits", 0, "filter budget in bits/key for every store, whatever its kind (global: table codes included; default 10)")
		c.fs.IntVar(&c.n, "n", 1_000_000, "keys per store")
		c.fs.IntVar(&c.gets, "gets", 100_000, "Gets per store")
		c.fs.Float64Var(&c.miss, "miss", 0.9, "share of Gets for absent keys, 0..1")
		c.fs.IntVar(&c.memKeys, "memtable-keys", 65_536, "keys per memtable (tables = n / this)")
		c.fs.IntVar(&c.valueSize, "value-size", 64, "bytes per value")
		c.run = runDemo
	default:
		return nil
	}
	c.fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n", strings.TrimSpace("usage: kvdemo "+name+" [flags] "+c.args))
		c.fs.PrintDefaults()
	}
	return c
}

// run is main without the exit, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	c := newCommand(args[0], stderr)
	if c == nil {
		fmt.Fprintf(stderr, "kvdemo: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	positional, err := parseInterspersed(c.fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package printed the error and the usage
	}
	c.positional = positional
	err = c.check()
	if err == nil {
		err = c.run(ctx, c, stdout)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "kvdemo %s: %s\n", args[0], strings.TrimSuffix(err.Error(), ": usage"))
		c.fs.Usage()
		return 2
	default:
		fmt.Fprintf(stderr, "kvdemo %s: %s\n", args[0], withoutInnerPrefixes(err.Error(), args[0]))
		return 1
	}
}

func misuse(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errUsage)...)
}

// check validates flags and positional arguments before anything runs.
func (c *command) check() error {
	name := c.fs.Name()
	if want := len(strings.Fields(c.args)); len(c.positional) != want {
		if want == 0 {
			return misuse("unexpected arguments %q", c.positional)
		}
		return misuse("want %d argument(s) (%s), got %d", want, c.args, len(c.positional))
	}
	if name != "demo" && name != "check" && c.dir == "" {
		return misuse("-dir is required")
	}
	switch c.filter {
	case "", "cuckoo", "bloom", "global", "none":
	default:
		return misuse("-filter %q: want cuckoo, bloom, global or none", c.filter)
	}
	if c.bits != 0 && (c.bits < 4 || c.bits > 32) {
		return misuse("-bits %g: want 4..32", c.bits)
	}
	switch kvdemo.WALRecoveryMode(c.walRecovery) {
	case "", kvdemo.TolerateCorruptedTailRecords, kvdemo.AbsoluteConsistency, kvdemo.PointInTimeRecovery, kvdemo.SkipAnyCorruptedRecords:
	default:
		return misuse("-wal-recovery %q: want tolerate-tail, absolute, point-in-time or skip-any", c.walRecovery)
	}
	switch {
	case c.memtable < 0:
		return misuse("-memtable must be positive")
	case c.blockCache < 0 || c.blockCache > 1<<20:
		return misuse("-block-cache must be within 0..1048576 (MiB)")
	case (name == "load" || name == "lookup") && c.n <= 0:
		return misuse("-n N (a positive number of keys) is required")
	case name == "demo" && (c.n <= 0 || c.memKeys <= 0):
		return misuse("-n and -memtable-keys must be positive")
	case (name == "lookup" || name == "demo") && (c.gets <= 0 || c.miss < 0 || c.miss > 1):
		return misuse("-gets must be positive and -miss within 0..1")
	case (name == "load" || name == "demo") && (c.valueSize < 0 || c.valueSize > 1<<20):
		return misuse("-value-size must be within 0..1048576")
	case name == "serve" && c.maxConns <= 0:
		return misuse("-max-conns must be positive")
	case c.timeouts.idle < 0 || c.timeouts.auth < 0 || c.timeouts.write < 0 || c.timeouts.request < 0 || c.timeouts.evictIdle < 0:
		return misuse("timeouts must not be negative")
	case c.reqBudget < 0 || c.reqBudget > 0 && c.reqBudget < 3 || c.reqBudget > 1<<20:
		return misuse("-request-budget must be 0 (no bound) or within 3..1048576 (MiB): the largest command needs over 2 MiB")
	case name == "serve" && c.guessing.burst <= 0:
		return misuse("-auth-burst must be positive")
	case c.guessing.interval < 0 || c.guessing.failDelay < 0 || c.guessing.failInterval < 0:
		return misuse("AUTH intervals must not be negative")
	case c.pass != "" && c.passFile != "":
		return misuse("-requirepass and -requirepass-file: give one")
	case len(c.pass) > server.MaxPasswordLen:
		return misuse("-requirepass: longer than %d bytes", server.MaxPasswordLen)
	}
	return nil
}

func (c *command) open(batched bool) (*kvdemo.DB, error) {
	if c.mustExist {
		if err := requireStore(c.dir); err != nil {
			return nil, err
		}
	}
	return kvdemo.Open(c.dir, &kvdemo.Options{
		Filter:          kvdemo.FilterKind(c.filter),
		BitsPerKey:      c.bits,
		MemtableBytes:   c.memtable,
		MaxTables:       c.maxTables,
		BlockCacheBytes: cacheBytes(c.blockCache),
		NoSyncEachWrite: batched,
		WALRecovery:     kvdemo.WALRecoveryMode(c.walRecovery),
		Logger:          log.New(logWriter{c.stderr, c.fs.Name()}, programPrefix, 0),
	})
}

// withDB runs fn on the opened store and closes it, reporting the first
// error.
func (c *command) withDB(batched bool, fn func(db *kvdemo.DB) error) error {
	db, err := c.open(batched)
	if err != nil {
		return err
	}
	err = fn(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

func runPut(_ context.Context, c *command, out io.Writer) error {
	return c.withDB(false, func(db *kvdemo.DB) error {
		return db.Put([]byte(c.positional[0]), []byte(c.positional[1]))
	})
}

func runGet(_ context.Context, c *command, out io.Writer) error {
	return c.withDB(false, func(db *kvdemo.DB) error {
		v, err := db.Get([]byte(c.positional[0]))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", v)
		return err
	})
}

func runDel(_ context.Context, c *command, out io.Writer) error {
	return c.withDB(false, func(db *kvdemo.DB) error { return db.Delete([]byte(c.positional[0])) })
}

func runLoad(_ context.Context, c *command, out io.Writer) error {
	return c.withDB(true, func(db *kvdemo.DB) error {
		start := time.Now()
		if err := workload.Load(db, c.n, c.valueSize); err != nil {
			return err
		}
		el := time.Since(start)
		st := db.Stats()
		fmt.Fprintf(out, "loaded %d keys in %.2fs (%.0f puts/s); %d tables, filter %s\n",
			c.n, el.Seconds(), float64(c.n)/el.Seconds(), st.Tables, st.Filter)
		if st.IndexUpdateNsPerKey > 0 || st.FilterBuildNsPerKey > 0 {
			fmt.Fprintf(out, "filter upkeep: index update %.1f ns/key, per-table filter build %.1f ns/key (%.1f with its file written) (keys flushed or compacted)\n",
				st.IndexUpdateNsPerKey, st.FilterBuildNsPerKey, st.FilterWriteNsPerKey)
		}
		return nil
	})
}

func runLookup(_ context.Context, c *command, out io.Writer) error {
	return c.withDB(false, func(db *kvdemo.DB) error {
		r, err := workload.Lookups(db, c.n, c.gets, c.miss, c.seed)
		if err != nil {
			return fmt.Errorf("%w (was the store loaded with load -n %d?)", err, c.n)
		}
		fmt.Fprintf(out, "%d Gets (%.0f%% for absent keys) in %.2fs: %.0f Gets/s, %.2f µs/Get\n",
			r.Gets, 100*r.Miss, float64(r.Gets)/r.GetsPerSec, r.GetsPerSec, 1e6/r.GetsPerSec)
		fmt.Fprintf(out, "filter %s over %d tables: %.3f tables probed per Get, FPR %.3f%%, %d filter bytes in memory\n",
			r.Filter, r.Tables, r.ProbedPerGet, 100*r.FPR, r.FilterBytes)
		printStats(out, db.Stats())
		return nil
	})
}

func runStats(_ context.Context, c *command, out io.Writer) error {
	return c.withDB(false, func(db *kvdemo.DB) error {
		printStats(out, db.Stats())
		return nil
	})
}

func printStats(out io.Writer, st kvdemo.Stats) {
	fmt.Fprintf(out, "filter:                 %s\n", st.Filter)
	fmt.Fprintf(out, "compression:            %s\n", st.Compression)
	fmt.Fprintf(out, "tables:                 %d (%d entries, %d bytes; %d without a filter yet)\n", st.Tables, st.TableKeys, st.TableBytes, st.UnfilteredTables)
	fmt.Fprintf(out, "memtable entries:       %d\n", st.MemtableEntries)
	fmt.Fprintf(out, "filter bytes in memory: %d (tables %d, memtables %d)\n", st.FilterBytes, st.TableFilterBytes, st.MemFilterBytes)
	fmt.Fprintf(out, "block cache:            %d of %d bytes\n", st.BlockCacheUsedBytes, st.BlockCacheBytes)
	if st.Filter == kvdemo.FilterGlobal {
		ix := st.Index
		fmt.Fprintf(out, "global index:           %d entries, %d segment(s), %.2f bits/entry (%d-bit slots), load %.3f, table codes %.2f bits/entry (table-size entropy %.2f), %d stashed, %d tables probed always\n",
			ix.Entries, ix.Segments, ix.BitsPerKey, ix.SlotBits, ix.Load, ix.CodeBits, ix.SizeEntropy, ix.Stashed, ix.Always)
	}
	if st.IndexUpdateNsPerKey > 0 || st.FilterBuildNsPerKey > 0 {
		fmt.Fprintf(out, "filter upkeep:          index update %.1f ns/key, per-table filter build %.1f ns/key (flushes and compactions since open)\n", st.IndexUpdateNsPerKey, st.FilterBuildNsPerKey)
	}
	fmt.Fprintf(out, "last sequence number:   %d\n", st.Seq)
	fmt.Fprintf(out, "since open: gets %d, puts %d, deletes %d\n", st.Gets, st.Puts, st.Deletes)
	fmt.Fprintf(out, "  filter negatives %d (memtable %d, tables %d), tables probed %d, filter false positives %d\n",
		st.FilterNegatives, st.MemFilterNegatives, st.TableFilterNegatives, st.TablesProbed, st.FilterFalsePositives)
	fmt.Fprintf(out, "  flushes %d, compactions %d, rebuilt filters %d, torn WAL tails %d, WAL fsyncs %d\n",
		st.Flushes, st.Compactions, st.RebuiltFilters, st.TornWALTails, st.WALSyncs)
}

func runServe(ctx context.Context, c *command, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pass, err := c.password()
	if err != nil {
		return err
	}
	// The port first: a port in use must not leave a new store behind.
	// Clients that connect while the store opens wait in the backlog.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	// Each SET is fsynced before its reply (concurrent clients share
	// fsyncs): an acknowledged write survives a crash.
	db, err := c.open(false)
	if err != nil {
		ln.Close()
		return err
	}
	srv := server.New(db, server.Config{
		MaxConns: c.maxConns,
		// A SET's value may be as large as the store accepts.
		Limits:               resp.Limits{MaxBulk: 1<<20 + 64<<10},
		Logger:               log.New(logWriter{c.stderr, "serve"}, "kvdemo serve: ", log.LstdFlags),
		RequirePass:          pass,
		DisableProtectedMode: !c.protected,
		IdleTimeout:          c.timeouts.idle,
		AuthTimeout:          orNever(c.timeouts.auth),
		WriteTimeout:         orNever(c.timeouts.write),
		RequestTimeout:       orNever(c.timeouts.request),
		RequestBudget:        requestBudget(c.reqBudget),
		EvictIdleAfter:       orNever(c.timeouts.evictIdle),
		AddrAuthBurst:        c.guessing.burst,
		AddrAuthInterval:     orNever(c.guessing.interval),
		FailedAuthDelay:      orNever(c.guessing.failDelay),
		FailedAuthInterval:   orNever(c.guessing.failInterval),
	})
	c.warnExposure(ln.Addr(), pass != "")
	// Tests and scripts read the address (port 0 picks one) from here.
	fmt.Fprintf(out, "kvdemo: serving %s on %s\n", c.dir, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if cerr := db.Close(); err == nil || errors.Is(err, server.ErrServerClosed) {
		err = cerr
	}
	if err == nil {
		fmt.Fprintf(out, "kvdemo: closed %s cleanly\n", c.dir)
	}
	return err
}

func runDemo(ctx context.Context, c *command, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	miss := c.miss
	if miss == 0 {
		miss = -1 // DemoConfig reads 0 as "the default" and a negative share as 0
	}
	_, err := workload.RunDemo(ctx, out, workload.DemoConfig{
		Dir:             c.dir,
		Keys:            c.n,
		Gets:            c.gets,
		Miss:            miss,
		MemtableKeys:    c.memKeys,
		ValueSize:       c.valueSize,
		BitsPerKey:      c.bits,
		BlockCacheBytes: cacheBytes(c.blockCache),
	})
	return err
}

// cacheBytes turns -block-cache into Options.BlockCacheBytes, where 0
// means the default and a negative size none.
func cacheBytes(mib int64) int64 {
	if mib == 0 {
		return -1
	}
	return mib << 20
}

func runCheck(_ context.Context, c *command, out io.Writer) error {
	res, err := kvdemo.Check(c.positional[0], out, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d files checked, %d problems\n", res.Files, res.Problems)
	if res.Problems > 0 {
		return fmt.Errorf("%d problems in %s", res.Problems, c.positional[0])
	}
	return nil
}
