#include "master/directory/master_options.h"

#include <cstdio>

#include "common/base/mooncake_compat.h"
#include "common/base/text.h"
#include "master/directory/tenant_usage.h"

namespace mooncake {

void RegisterMasterFlags(FlagSet* f, MasterOptions* o) {
  f->AddString("rpc_address", &o->rpc_address,
               "address the Thrift server listens on (\"\": this host's own, what its name "
               "resolves to; 0.0.0.0: every interface)");
  f->AddInt("rpc_port", &o->rpc_port, "Thrift port (0: pick a free one and log it)");
  f->AddString("cluster_key_file", &o->cluster_key_file,
               "file (mode 0600) of the key every master and daemon of the cluster shares; "
               "peers prove it at connect (\"\": none, loopback peers only)");
  f->AddString("tenant_quota", &o->tenant_quota,
               "memory a tenant's objects may take over all their replicas, e.g. "
               "alice=1GB,bob=512MB; a put past it answers -1402 (\"\": no quotas)");
  f->AddInt("metrics_port", &o->metrics_port,
            "admin HTTP port: /metrics, /health, /get_all_segments, ... (0: pick a free one "
            "and log it; -1: no admin HTTP)");
  f->AddString("metrics_host", &o->metrics_host,
               "address the admin HTTP server listens on: this host only by default; give an "
               "address of this host (or 0.0.0.0) for a Prometheus elsewhere (/metrics and "
               "/health stay open, the rest needs the admin token)");
  f->AddString("admin_token_file", &o->admin_token_file,
               "key file (mode 0600, the cluster key file's format) whose admin token the "
               "admin HTTP also accepts, besides the cluster key's: lets an operator read "
               "the port without being a member (\"\": none)");
  f->AddBool("enable_metric_reporting", &o->enable_metric_reporting,
             "log a one-line summary (keys, memory, segments, daemons, calls) every "
             "--metrics_report_interval");
  f->AddDuration("metrics_report_interval", &o->metrics_report_interval_ms, 1000,
                 "how often --enable_metric_reporting logs its summary");
  f->AddInt("rpc_thread_num", &o->rpc_thread_num,
            "Thrift I/O threads, which run the handlers (0: one per core, at least 8)");
  f->AddInt("spin_us", &o->spin_us,
            "how long an I/O thread polls for the next call after one before it sleeps, "
            "microseconds (adaptive; 0: never; at most 10000)");
  f->AddInt("rpc_max_connections", &o->rpc_max_connections,
            "Thrift connections at once, a quarter (at most 256, 32 per address) kept for "
            "those still in their handshake; past it the oldest of those, or the admitted "
            "one idle the longest, is closed (0: as many as the descriptor limit allows)");
  f->AddDuration("rpc_idle_timeout_sec", &o->rpc_idle_timeout_ms, 1000,
                 "an admitted Thrift connection silent this long is closed; daemons open "
                 "another when they need one (0: never)");
  f->AddDuration("rpc_handshake_timeout_sec", &o->rpc_handshake_timeout_ms, 1000,
                 "a Thrift connection not admitted this long after its accept (the cluster "
                 "key's handshake not done, or a peer refused) is closed");
  f->AddDuration("default_kv_lease_ttl", &o->default_kv_lease_ttl_ms, 1,
                 "read lease granted by every replica list (a read); an existence check "
                 "takes none");
  f->AddDuration("default_kv_soft_pin_ttl", &o->default_kv_soft_pin_ttl_ms, 1,
                 "soft-pin lifetime from publication when a put names no TTL (a fixed "
                 "deadline: reads do not extend it)");
  f->AddDuration("max_kv_soft_pin_ttl", &o->max_kv_soft_pin_ttl_ms, 1,
                 "upper bound on a soft-pin TTL a put asks for");
  f->AddDuration("exist_lease_ttl", &o->exist_lease_ttl_ms, 1,
                 "an existence hit (once per access) also keeps eviction off the object this "
                 "long (at most the read lease; 0: no such lease, the hit only counts as a "
                 "use)");
  f->AddDouble("eviction_high_watermark_ratio", &o->eviction_high_watermark_ratio,
               "usage the pool is kept at or under: a put that would pass it evicts first, "
               "and so does the upkeep");
  f->AddDouble("eviction_ratio", &o->eviction_ratio,
               "fraction of the pool freed by one eviction round (down to the high watermark "
               "minus this)");
  f->AddBool("allow_evict_soft_pinned_objects", &o->allow_evict_soft_pinned_objects,
             "evict soft-pinned objects, oldest first, once no other candidate is left");
  f->AddDuration("client_live_ttl_sec", &o->client_live_ttl_ms, 1000,
                 "a daemon silent this long (counted only while the master itself runs) has "
                 "its segments detached: its objects answer -703 until it comes back");
  f->AddDuration("daemon_grace_period_sec", &o->daemon_grace_ms, 1000,
                 "a daemon detached for silence that has not come back within this (at least "
                 "one read lease) is declared dead and its objects dropped");
  f->AddDuration("put_start_discard_timeout_sec", &o->put_start_discard_timeout_ms, 1000,
                 "a put unfinished after this long may be taken over by a new writer");
  f->AddDuration("put_start_release_timeout_sec", &o->put_start_release_timeout_ms, 1000,
                 "space of an abandoned put is freed this long after it started");
  f->AddInt("max_cache_holders", &o->max_cache_holders,
            "records of which daemon may cache which object, kept to tell writers whose read "
            "caches to invalidate; past it, a change of an object read meanwhile tells every "
            "daemon");
  f->AddChoice("allocation_strategy", &o->allocation_strategy, {"random", "free_ratio_first", "local_first"},
               "how replicas are spread over segments: at random, the emptiest first, or "
               "the writing daemon's own segments first (then at random)");
  f->AddInt("placement_seed", &o->placement_seed,
            "seed of the random placement order (allocation_strategy random and local_first): "
            "the same seed, daemons and sequence of puts place every replica alike; 0: a random "
            "seed");
  f->AddChoice("memory_allocator", &o->memory_allocator, {"offset"},
               "allocator of each segment's space: an offset allocator (Mooncake's "
               "\"offset\"; no cachelib)");
  f->AddLogLevel(&o->log_level);

  f->AddBool("enable_offload", &o->enable_offload,
             "offload every put's value to its daemon's SSD tier at PutEnd (a put's config may "
             "say otherwise)");
  f->AddBool("offload_on_evict", &o->offload_on_evict,
             "before eviction frees an object's memory, write it to its daemon's SSD tier; the "
             "object stays readable from there");
  f->AddBool("promotion_on_hit", &o->promotion_on_hit,
             "a read served from an SSD re-creates a memory replica in the background");
  f->AddBool("allow_evict_without_offload", &o->allow_evict_without_offload,
             "with --offload_on_evict: free an object whose offload failed or cannot proceed "
             "(false: it stays in memory)");

  f->AddInt("max_total_finished_tasks", &o->max_total_finished_tasks,
            "finished copy and move tasks kept for query_task; the oldest are forgotten");
  f->AddInt("max_total_pending_tasks", &o->max_total_pending_tasks,
            "copy and move tasks waiting for their daemon at once; past it, creating one "
            "answers -1300");
  f->AddInt("max_total_processing_tasks", &o->max_total_processing_tasks,
            "copy and move tasks running at once; the rest wait");
  f->AddDuration("pending_task_timeout_sec", &o->pending_task_timeout_ms, 1000,
                 "a copy or move task not started within this fails (0: never)");
  f->AddDuration("processing_task_timeout_sec", &o->processing_task_timeout_ms, 1000,
                 "a copy or move task running longer than this fails (0: never)");
  f->AddInt("max_retry_attempts", &o->max_retry_attempts,
            "how often a copy or move task whose targets had no room is tried again before "
            "it fails");

  f->AddBool("enable_snapshot", &o->enable_snapshot,
             "take periodic fork+copy-on-write snapshots of the directory and keep the "
             "operation log, both in --snapshot_dir");
  f->AddString("snapshot_dir", &o->snapshot_dir,
               "where snapshots and the operation log live, a directory that must exist: "
               "snapshots/, latest, oplog/ "
               "(required with --enable_snapshot)");
  f->AddDuration("snapshot_interval_seconds", &o->snapshot_interval_ms, 1000,
                 "time between periodic snapshots");
  f->AddInt("snapshot_retention_count", &o->snapshot_retention_count,
            "published snapshots kept; older ones (and the log before them) are deleted");
  f->AddDuration("snapshot_child_timeout_seconds", &o->snapshot_child_timeout_ms, 1000,
                 "a snapshot child running longer is killed and its directory removed");
  f->AddBool("enable_snapshot_restore", &o->enable_snapshot_restore,
             "at start, load the newest valid snapshot and replay the operation log (needs "
             "--enable_snapshot)");
  f->AddChoice("oplog_mode", &o->oplog_mode, {"disabled", "relaxed", "strict"},
               "operation log: disabled (snapshots only), relaxed (flushed in the background: "
               "a crash loses at most --oplog_flush_interval), strict (a change is "
               "acknowledged once its record is fdatasync'ed)");
  f->AddDuration("oplog_flush_interval", &o->oplog_flush_interval_ms, 1,
                 "relaxed oplog: longest a record waits before it is written and synced");
  f->AddDuration("reattach_grace_period_sec", &o->reattach_grace_ms, 1000,
                 "after a restore, a segment whose daemon has not mounted it again within "
                 "this is dropped with its replicas");
  f->AddDuration("parked_segment_ttl_sec", &o->parked_segment_ttl_ms, 1000,
                 "a memory segment dropped because its daemon did not come back in time "
                 "keeps its objects aside this long (not readable), for that daemon to "
                 "re-offer them if it returns with its memory intact; 0: drop them at once");
  f->AddBool("enable_ha", &o->enable_ha,
             "campaign for leadership through etcd: the leader serves, standbys follow its "
             "operation log, answer -1600 and take over when it goes; needs "
             "--etcd_endpoints, --enable_snapshot, an --oplog_mode and a fixed --rpc_port");
  f->AddString("etcd_endpoints", &o->etcd_endpoints,
               "etcd's client endpoints, [http://]host:port[,host:port...] (';' separates "
               "too, as Mooncake's; no https) (with --enable_ha)");
  f->AddChoice("ha_backend_type", &o->ha_backend_type, {"etcd"},
               "what the masters campaign through (Mooncake's; etcd only)");
  f->AddBool("enable_oplog", &o->enable_oplog,
             "Mooncake's switch of HA log replication: ours always replicates through the "
             "log with --enable_ha, so this only needs --enable_ha (as Mooncake's)");
  f->AddString("cluster_id", &o->cluster_id,
               "the cluster whose leadership this master campaigns for (etcd keys under "
               "/mooncake/<cluster_id>/); daemons name the same");
  f->AddDuration("ha_lease_ttl", &o->ha_lease_ttl_ms, 1,
                 "the leader's etcd lease, whole seconds: a leader that cannot renew it "
                 "within this stops serving, and a standby takes over once it ends");
  f->AddDuration("ha_sync_timeout", &o->ha_sync_timeout_ms, 1,
                 "strict mode: how long an acknowledgement waits for a standby of the sync "
                 "set before the leader drops it from the set");

  AddMooncakeSettings(f, MooncakeMasterSettings());
}

bool ValidateMasterOptions(const MasterOptions& o, std::string* error) {
  if (o.rpc_port < 0 || o.rpc_port > 65535) {
    *error = "--rpc_port must be in 0..65535";
  } else if (o.metrics_port < -1 || o.metrics_port > 65535) {
    *error = "--metrics_port must be in -1..65535";
  } else if (o.metrics_report_interval_ms <= 0) {
    *error = "--metrics_report_interval must be positive";
  } else if (o.rpc_thread_num < 0 || o.rpc_thread_num > 1024) {
    *error = "--rpc_thread_num must be in 0..1024";
  } else if (o.spin_us < 0 || o.spin_us > kMaxSpinMicros) {
    *error = "--spin_us must be in 0..10000";
  } else if (o.rpc_max_connections != 0 &&
             (o.rpc_max_connections < 8 || o.rpc_max_connections > 100000000)) {
    *error = "--rpc_max_connections must be 0 (from the descriptor limit) or in 8..100000000";
  } else if (o.rpc_idle_timeout_ms < 0) {
    *error = "--rpc_idle_timeout_sec must not be negative (0: never)";
  } else if (o.rpc_handshake_timeout_ms <= 0 || o.rpc_handshake_timeout_ms > 600000) {
    *error = "--rpc_handshake_timeout_sec must be in (0, 600 s]";
  } else if (o.default_kv_lease_ttl_ms <= 0) {
    *error = "--default_kv_lease_ttl must be positive";
  } else if (o.default_kv_soft_pin_ttl_ms <= 0 || o.max_kv_soft_pin_ttl_ms <= 0) {
    *error = "--default_kv_soft_pin_ttl and --max_kv_soft_pin_ttl must be positive";
  } else if (o.exist_lease_ttl_ms < 0) {
    *error = "--exist_lease_ttl must not be negative";
  } else if (!(o.eviction_high_watermark_ratio > 0.0 && o.eviction_high_watermark_ratio <= 1.0)) {
    *error = "--eviction_high_watermark_ratio must be in (0, 1]";
  } else if (!(o.eviction_ratio > 0.0 && o.eviction_ratio <= 1.0)) {
    *error = "--eviction_ratio must be in (0, 1]";
  } else if (o.client_live_ttl_ms <= 0) {
    *error = "--client_live_ttl_sec must be positive";
  } else if (o.daemon_grace_ms < 0) {
    *error = "--daemon_grace_period_sec must not be negative";
  } else if (o.put_start_discard_timeout_ms <= 0 ||
             o.put_start_release_timeout_ms < o.put_start_discard_timeout_ms) {
    *error = "--put_start_release_timeout_sec must be >= --put_start_discard_timeout_sec > 0";
  } else if (o.max_cache_holders < 0) {
    *error = "--max_cache_holders must be >= 0";
  } else if (o.enable_snapshot && o.snapshot_dir.empty()) {
    *error = "--enable_snapshot needs --snapshot_dir";
  } else if (o.enable_snapshot_restore && !o.enable_snapshot) {
    // A restored master that logged nothing would, at the next restart, bring back a state
    // whose space has been reused since.
    *error = "--enable_snapshot_restore needs --enable_snapshot";
  } else if (o.snapshot_interval_ms <= 0 || o.snapshot_child_timeout_ms <= 0) {
    *error = "--snapshot_interval_seconds and --snapshot_child_timeout_seconds must be positive";
  } else if (o.snapshot_retention_count < 1 || o.snapshot_retention_count > 1000) {
    *error = "--snapshot_retention_count must be in 1..1000";
  } else if (o.enable_ha && (o.etcd_endpoints.empty() || !o.enable_snapshot ||
                             o.oplog_mode == "disabled")) {
    // The standbys follow the operation log: without one there is nothing to follow.
    *error = "--enable_ha needs --etcd_endpoints, --enable_snapshot and an --oplog_mode";
  } else if (o.ha_lease_ttl_ms < 1000 || o.ha_lease_ttl_ms > 60000 ||
             o.ha_lease_ttl_ms % 1000 != 0 || o.ha_sync_timeout_ms <= 0) {
    *error = "--ha_lease_ttl must be whole seconds in 1..60 s, --ha_sync_timeout positive";
  } else if (o.etcd_endpoints.find("https://") != std::string::npos) {
    *error = "--etcd_endpoints: https:// is not supported (the master speaks plain HTTP to "
             "etcd's gateway); name http://host:port or host:port";
  } else if (o.enable_oplog && !o.enable_ha) {
    *error = "--enable_oplog needs --enable_ha (as Mooncake's)";
  } else if (!ValidName(o.cluster_id)) {
    *error = "--cluster_id must be 1..64 characters of [A-Za-z0-9_.-]";
  } else if (o.oplog_flush_interval_ms <= 0 || o.oplog_flush_interval_ms > 60000) {
    *error = "--oplog_flush_interval must be in (0, 60 s]";
  } else if (o.reattach_grace_ms <= 0) {
    *error = "--reattach_grace_period_sec must be positive";
  } else if (o.parked_segment_ttl_ms < 0) {
    *error = "--parked_segment_ttl_sec must not be negative";
  } else if (o.max_total_finished_tasks < 0 || o.max_total_pending_tasks < 0 ||
             o.max_total_processing_tasks < 0 || o.pending_task_timeout_ms < 0 ||
             o.processing_task_timeout_ms < 0 || o.max_retry_attempts < 0 ||
             o.max_retry_attempts > 1000000) {
    *error = "--max_total_*_tasks, --*_task_timeout_sec and --max_retry_attempts must not be "
             "negative (--max_retry_attempts at most 1000000)";
  } else if (TenantUsage::Quotas quotas;
             !TenantUsage::ParseQuotas(o.tenant_quota, &quotas, error)) {
    *error = "--tenant_quota: " + *error;
  } else {
    return true;
  }
  return false;
}

std::string DescribeMasterOptions(const MasterOptions& o) {
  char line[1024];
  std::snprintf(
      line, sizeof(line),
      "rpc_address=%s rpc_port=%lld rpc_thread_num=%lld spin_us=%lld metrics_port=%lld "
      "cluster_id=%s "
      "default_kv_lease_ttl=%lldms default_kv_soft_pin_ttl=%lldms client_live_ttl_sec=%lld "
      "eviction_high_watermark_ratio=%g eviction_ratio=%g allocation_strategy=%s "
      "enable_offload=%d enable_snapshot=%d oplog_mode=%s enable_ha=%d cluster_key=%s",
      o.rpc_address.empty() ? "(this host's)" : o.rpc_address.c_str(),
      static_cast<long long>(o.rpc_port), static_cast<long long>(o.rpc_thread_num),
      static_cast<long long>(o.spin_us), static_cast<long long>(o.metrics_port), o.cluster_id.c_str(),
      static_cast<long long>(o.default_kv_lease_ttl_ms),
      static_cast<long long>(o.default_kv_soft_pin_ttl_ms),
      static_cast<long long>(o.client_live_ttl_ms / 1000), o.eviction_high_watermark_ratio,
      o.eviction_ratio, o.allocation_strategy.c_str(), o.enable_offload, o.enable_snapshot,
      o.enable_snapshot ? o.oplog_mode.c_str() : "off", o.enable_ha,
      o.cluster_key_file.empty() ? "none" : "file");
  return line;
}

}  // namespace mooncake
