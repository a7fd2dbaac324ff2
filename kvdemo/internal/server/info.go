package server

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"time"
)

func (s *Server) info() []byte {
	st := s.db.Stats()
	s.mu.Lock()
	clients := len(s.conns)
	s.mu.Unlock()
	var b bytes.Buffer
	line := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	b.WriteString("# Server\r\n")
	line("redis_version", redisVersion)
	line("kvdemo", "lsmcuckoo demo store")
	line("go_version", runtime.Version())
	line("process_id", os.Getpid())
	line("uptime_in_seconds", int64(time.Since(s.started).Seconds()))
	b.WriteString("\r\n# Clients\r\n")
	line("connected_clients", clients)
	line("maxclients", s.cfg.MaxConns)
	line("requirepass_set", yesNo(s.password.set))
	line("protected_mode", yesNo(!s.cfg.DisableProtectedMode))
	if s.budget != nil {
		s.budget.mu.Lock()
		used := s.budget.used
		s.budget.mu.Unlock()
		line("request_budget_bytes", s.budget.limit)
		line("request_budget_used_bytes", used)
	}
	b.WriteString("\r\n# Stats\r\n")
	line("total_connections_received", s.connsTotal.Load())
	line("rejected_connections", s.refused.Load())
	line("total_commands_processed", s.cmds.Load())
	line("protocol_errors", s.protocolErrors.Load())
	line("acl_access_denied_auth", s.authFailures.Load())
	line("protected_mode_denied_connections", s.deniedByProtectedMode.Load())
	line("idle_timeouts", s.idleTimeouts.Load())
	line("auth_timeouts", s.authTimeouts.Load())
	line("write_timeouts", s.writeTimeouts.Load())
	line("request_timeouts", s.requestTimeouts.Load())
	line("request_budget_refusals", s.budgetRefusals.Load())
	line("evicted_clients", s.evictions.Load())
	b.WriteString("\r\n# Store\r\n")
	line("filter", st.Filter)
	line("compression", st.Compression)
	line("gets", st.Gets)
	line("puts", st.Puts)
	line("deletes", st.Deletes)
	line("filter_negatives", st.FilterNegatives)
	line("mem_filter_negatives", st.MemFilterNegatives)
	line("table_filter_negatives", st.TableFilterNegatives)
	line("tables_probed", st.TablesProbed)
	line("filter_false_positives", st.FilterFalsePositives)
	line("filter_bytes", st.FilterBytes)
	line("table_filter_bytes", st.TableFilterBytes)
	line("mem_filter_bytes", st.MemFilterBytes)
	line("block_cache_bytes", st.BlockCacheBytes)
	line("block_cache_used_bytes", st.BlockCacheUsedBytes)
	if st.Filter == "global" {
		line("index_bytes", st.Index.Bytes)
		line("index_entries", st.Index.Entries)
		line("index_segments", st.Index.Segments)
		line("index_code_bits_per_entry", fmt.Sprintf("%.3f", st.Index.CodeBits))
		line("index_table_size_entropy", fmt.Sprintf("%.3f", st.Index.SizeEntropy))
		line("index_always_probed_tables", st.Index.Always)
		line("index_contended_lookups", st.Index.Contended)
		line("index_rebuilding", yesNo(st.IndexRebuilding))
	}
	line("index_update_ns_per_key", fmt.Sprintf("%.1f", st.IndexUpdateNsPerKey))
	line("filter_build_ns_per_key", fmt.Sprintf("%.1f", st.FilterBuildNsPerKey))
	line("tables", st.Tables)
	line("table_keys", st.TableKeys)
	line("table_bytes", st.TableBytes)
	line("memtable_entries", st.MemtableEntries)
	line("flushes", st.Flushes)
	line("compactions", st.Compactions)
	line("rebuilt_filters", st.RebuiltFilters)
	line("unfiltered_tables", st.UnfilteredTables)
	line("torn_wal_tails", st.TornWALTails)
	line("wal_fsyncs", st.WALSyncs)
	line("last_seq", st.Seq)
	return b.Bytes()
}
