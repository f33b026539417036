// The master's tunables. Names and defaults follow Mooncake's mooncake_master flags.
#ifndef MOONCAKE_MASTER_MASTER_OPTIONS_H_
#define MOONCAKE_MASTER_MASTER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "common/base/flags.h"
#include "common/base/spin_wait.h"

namespace mooncake {

struct MasterOptions {
  // "" = this host's address (ThisHostAddress: what its name resolves to); "0.0.0.0" =
  // every interface, only when asked.
  std::string rpc_address;
  int64_t rpc_port = 50051;
  int64_t rpc_thread_num = 0;  // 0: one per core, at least 8
  // How long an RPC I/O thread polls for the next call before it sleeps (adaptive,
  // master/server/rpc_server.h); 0: never. The daemon's default (docs/master.md, "Serving calls").
  int64_t spin_us = kDefaultSpinMicros;
  // Thrift connections at once, admitted or in their handshake (master/server/rpc_connections.h
  // splits them); 0: what the descriptor limit leaves room for. Past it the oldest
  // connection still in its handshake, or the admitted one idle the longest, is closed.
  int64_t rpc_max_connections = 0;
  // An admitted connection silent this long is closed (0: never). Well above a daemon's
  // heartbeat, so the connection it uses most stays open; one its pool rarely reuses is
  // closed, and the pool opens another when it needs one.
  int64_t rpc_idle_timeout_ms = 300000;
  // A connection not admitted this long after its accept is closed: the cluster key's
  // handshake is two round trips, and a peer refused for good has nothing to wait for.
  int64_t rpc_handshake_timeout_ms = 5000;
  int64_t default_kv_lease_ttl_ms = 10000;
  int64_t default_kv_soft_pin_ttl_ms = 1800000;
  int64_t max_kv_soft_pin_ttl_ms = 86400000;
  // Beyond counting as a use, an existence hit may keep eviction off the object for this
  // long (at most the read lease), once per access (master/directory/exist_leases.h). 0, the
  // default: no such lease -- one lets a writer that fills the pool within it evict its
  // newest, unchecked objects instead (docs/master.md, "Existence checks").
  int64_t exist_lease_ttl_ms = 0;
  double eviction_high_watermark_ratio = 0.9;
  double eviction_ratio = 0.05;
  // Soft-pinned objects are evicted (after every plain candidate) only with this set.
  bool allow_evict_soft_pinned_objects = true;
  int64_t client_live_ttl_ms = 10000;
  // A daemon silent for client_live_ttl has its segments detached (its objects unreadable
  // there, nothing new placed there) for this long, at least one read lease, before it is
  // declared dead: one that comes back meanwhile re-attaches them with its objects intact.
  int64_t daemon_grace_ms = 60000;
  int64_t put_start_discard_timeout_ms = 30000;
  int64_t put_start_release_timeout_ms = 600000;
  // Records of which daemons may hold which objects in their read caches
  // (master/directory/cache_holders.h), master-wide; past it, a cached read makes the object
  // "untracked": a change to it then names every daemon.
  int64_t max_cache_holders = 1 << 20;
  // The admin HTTP server (docs/operations.md): /metrics, /health, introspection. Port
  // 9003 as Mooncake's; 0: a free one, logged; -1: none. Loopback unless asked: most of it
  // answers admin callers only (common/admin/admin_http.h), and Prometheus elsewhere needs an
  // address given. "" host: 127.0.0.1 too.
  int64_t metrics_port = 9003;
  std::string metrics_host = "127.0.0.1";
  // A key file whose admin token the admin HTTP accepts besides the cluster key's: an
  // operator's (or a monitoring system's) access without the cluster key. "": none.
  std::string admin_token_file;
  // Logs a one-line summary of the metrics every metrics_report_interval.
  bool enable_metric_reporting = true;
  int64_t metrics_report_interval_ms = 60000;
  std::string allocation_strategy = "random";
  // Seeds the random order of allocation_strategy random and local_first
  // (master/directory/segment_registry.h): 0, a random seed; otherwise the same seed, daemons and
  // sequence of puts place every replica alike (for tests and for reproducing a placement).
  int64_t placement_seed = 0;
  // Mooncake's choice of segment allocator; ours is an offset allocator, the only value.
  std::string memory_allocator = "offset";
  std::string log_level = "info";
  std::string cluster_key_file;  // "" = no key: loopback peers only (docs/security.md)
  // Memory each listed tenant's objects may take, over all their memory replicas
  // (master/directory/tenant_usage.h): "alice=1GB,bob=512MB"; "" = no quota for anyone.
  std::string tenant_quota;

  // The SSD tier (docs/ssd.md): offload every put's value at PutEnd (a put's
  // ReplicateConfig.offload overrides it); offload an object to its daemon's SSD before an
  // eviction frees its memory; have a read served from disk re-create a memory replica;
  // let an eviction round free an object whose offload failed or cannot proceed.
  bool enable_offload = false;
  bool offload_on_evict = false;
  bool promotion_on_hit = false;
  bool allow_evict_without_offload = false;

  // Copy and move tasks (master/directory/replica_tasks.h), Mooncake's task-manager flags: finished
  // tasks kept for queries, tasks waiting and running at once, how long a task may wait
  // for its daemon and run (0: no limit), and how often a task whose targets had no room
  // is tried again.
  int64_t max_total_finished_tasks = 10000;
  int64_t max_total_pending_tasks = 10000;
  int64_t max_total_processing_tasks = 10000;
  int64_t pending_task_timeout_ms = 300000;
  int64_t processing_task_timeout_ms = 300000;
  int64_t max_retry_attempts = 10;

  // Durability (docs/durability.md). The log lives in <snapshot_dir>/oplog and needs
  // snapshots, which bound it.
  bool enable_snapshot = false;
  std::string snapshot_dir;
  int64_t snapshot_interval_ms = 600000;
  int64_t snapshot_retention_count = 2;
  int64_t snapshot_child_timeout_ms = 300000;
  bool enable_snapshot_restore = false;
  std::string oplog_mode = "relaxed";  // disabled | relaxed | strict
  int64_t oplog_flush_interval_ms = 100;
  // After a restore: how long a restored segment's daemon has to mount it again.
  int64_t reattach_grace_ms = 30000;
  // A memory segment dropped because its daemon did not come back in time keeps its
  // objects aside ("parked") this long, for that daemon to re-offer them if it returns
  // with its memory intact (docs/durability.md, "A daemon that returns late").
  int64_t parked_segment_ttl_ms = 300000;

  // High availability (docs/ha.md): masters of one cluster_id campaign through etcd; the
  // leader serves, the standbys follow its operation log and take over when it goes.
  bool enable_ha = false;
  std::string etcd_endpoints;           // "[http://]host:port[,;host:port...]"
  std::string ha_backend_type = "etcd";  // Mooncake's; etcd is the only one
  // Mooncake's switch of log replication under HA; ours always replicates through the log,
  // so it only has to agree with enable_ha.
  bool enable_oplog = false;
  std::string cluster_id = "mooncake";  // names the election: [A-Za-z0-9_.-], 1..64
  int64_t ha_lease_ttl_ms = 2000;       // the leader's etcd lease; whole seconds, 1..60 s
  // Strict mode: how long an acknowledgement waits for a standby of the sync set before the
  // leader drops that standby from it (docs/ha.md, "What an acknowledgement means").
  int64_t ha_sync_timeout_ms = 1000;
  // Payload bytes of the newest log records a leader keeps in memory for its standbys
  // (master/log/log_tail.h); a standby further behind bootstraps from a snapshot. No flag:
  // tests make it small.
  uint64_t ha_tail_bytes = 64ull << 20;

  // How often the server runs MasterService::Tick. A gap between two rounds longer than
  // twice this plus kStallMarginMs is taken for a stall of the master itself (master/
  // master_service.h, "Liveness"). Not a flag: the server's loop and that rule share it.
  int64_t upkeep_interval_ms = 100;
  static constexpr int64_t kStallMarginMs = 500;

  // Milliseconds on a monotonic clock. Tests replace it to move time by hand.
  std::function<int64_t()> now_ms;
  // Milliseconds since the Unix epoch: only to write and read deadlines that outlive the
  // process (a soft pin's, in the snapshot and the log). Tests replace it too.
  std::function<int64_t()> unix_ms;
};

// Declares every master flag on flags, bound to the fields of options.
void RegisterMasterFlags(FlagSet* flags, MasterOptions* options);

// Checks ranges the flag parser cannot (ratios in (0, 1], positive TTLs, ...); false with
// *error naming the flag.
bool ValidateMasterOptions(const MasterOptions& options, std::string* error);


// The settings an operator checks first, as "name=value ..." on one line: the start line
// of the master's log.
std::string DescribeMasterOptions(const MasterOptions& options);

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_MASTER_OPTIONS_H_
