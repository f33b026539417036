// mooncaked's tunables: flags, or the same keys in a --config YAML/JSON file.
#ifndef MOONCAKE_DAEMON_DAEMON_OPTIONS_H_
#define MOONCAKE_DAEMON_DAEMON_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/base/flags.h"
#include "common/base/master_address.h"
#include "common/base/spin_wait.h"
#include "daemon/base/local_access.h"
#include "daemon/ssd_store/ssd_options.h"
#include "daemon/base/tenant_policy.h"

namespace mooncake {

struct DaemonOptions {
  // The master's host:port; "" = this host's address (ThisHostAddress, where a master
  // listens by default) and port 50051, filled in by main. Or etcd://host:port[,...]: the
  // leader of --cluster_id, as etcd's leader key names it (docs/ha.md, "Daemons").
  std::string master;
  std::string cluster_id = "mooncake";  // with etcd://: whose leader key is read
  // With etcd://: how long a master call that failed because of the master waits for a
  // leader (a failover) to run it again.
  int64_t master_failover_wait_ms = 5000;
  std::string socket = "/run/mooncake/mooncaked.sock";  // where applications connect
  std::string hostname;                                 // advertised; "" = gethostname()
  int64_t port = 0;  // transfer-engine port; 0 = first free one in 12300..14300
  // What the transfer port binds: "" = the address hostname resolves to (the one peers are
  // told); "0.0.0.0" or "::" = every interface, only when asked.
  std::string transfer_bind_address;
  uint64_t global_segment_size = 1ull << 30;            // lent to the pool; 0 = none
  // Caps on what clients may have mounted with MOUNT_SEGMENT (daemon/memory/segment_budget.h), in
  // all and per connection; 0 = no cap: any mount this host can back (daemon/memory/host_memory.h).
  uint64_t client_segment_budget = 0;
  uint64_t client_segment_budget_per_client = 0;
  std::string socket_mode = "0660";                     // octal permissions of the socket
  // Who may use the socket besides root and the daemon's uid (daemon/base/local_access.h):
  // comma-separated numbers or names; "" = none, and the socket file's group.
  std::string allowed_uids;
  std::string allowed_gids;
  int64_t heartbeat_interval_ms = 1000;
  int64_t rpc_timeout_ms = 10000;        // send/receive bound on one master RPC
  int64_t connect_timeout_ms = 2000;     // TCP connect bound to the master
  int64_t max_master_connections = 0;    // 0 = worker_threads + 4
  int64_t worker_threads = 0;            // 0 = max(4, 2 x cores)
  // The local copies of one request (a value, a batch) of at least this many bytes are
  // shared with the copy helper thread (daemon/base/parallel_copy.h); 0: no helper. Off by
  // default: on a 2-vCPU VM the helper seldom found a free CPU and cost more than it saved.
  uint64_t copy_helper_min = 0;
  int64_t shutdown_timeout_ms = 5000;    // how long SIGTERM waits for running requests
  int64_t hello_timeout_ms = 5000;       // a connection silent this long after connect is closed
  bool read_cache = true;                // serve repeated reads within their lease locally
  // How long a thread waiting for a client's frame (the socket loop), a job (a worker) or
  // a master reply polls before it blocks, microseconds; 0 = never spin. Adaptive and
  // bounded (common/base/spin_wait.h).
  int64_t spin_us = kDefaultSpinMicros;
  // Transfer engine (daemon to daemon).
  std::string protocol = "auto";         // auto | tcp | rdma
  std::string rdma_devices;              // comma-separated; "" = every device found
  int64_t transfer_streams = 2;          // TCP connections one large transfer is striped over
  int64_t transfer_timeout_ms = 5000;    // a transfer making no progress this long fails
  int64_t transfer_connections = 64;     // TCP connections per peer, at most (each way)
  int64_t transfer_max_connections = 1024;  // connections to this daemon's transfer port
  bool checksum = true;                  // CRC32C at put, verified at get
  // At SIGTERM, move the objects of the global segment to other segments with room before
  // unmounting it (daemon/replicas/segment_drainer.h), so a restart loses nothing: at most
  // SegmentDrainer::kBudget, while the daemon still serves.
  bool drain_on_shutdown = false;
  std::string cluster_key_file;          // "" = no key: loopback peers only (docs/security.md)
  // How long a put the master has no space for keeps asking while eviction makes room.
  int64_t put_no_space_wait_ms = 1000;
  // Concurrent single-key PutStart / PutEnd / GetReplicaList calls share one batch RPC, up
  // to this many (daemon/cluster/master_batcher.h); 0 = each its own RPC.
  int64_t group_commit_max = 64;
  // Tenants only these uids may claim, and each uid's default (daemon/base/tenant_policy.h):
  // "alice=1000:1001,bob=1002"; "" = none.
  std::string tenant_uids;
  // uids listed there that may still claim tenants the flag does not list (numbers or
  // names, comma-separated, as allowed_uids); "" = none.
  std::string tenant_roaming_uids;
  // The SSD tier (docs/ssd.md): ssd.path "" = none. The policy and mode as flags spell them.
  SsdOptions ssd;
  std::string ssd_eviction_policy = "fifo";
  std::string ssd_persist_mode = "relaxed";
  std::string log_level = "info";
  // The admin HTTP server (docs/operations.md): /metrics and /health. Port 9300 as
  // Mooncake's client HTTP port; 0: a free one, logged; -1: none. Loopback unless asked
  // ("" host: 127.0.0.1 too).
  int64_t metrics_port = 9300;
  std::string metrics_host = "127.0.0.1";
  // A key file whose admin token the admin HTTP accepts besides the cluster key's. "": none.
  std::string admin_token_file;

  // Filled by ValidateDaemonOptions from the strings above (master_host "" when master
  // is: main resolves it; etcd_endpoints set instead with etcd://).
  std::string master_host;
  int master_port = 0;
  std::string etcd_endpoints;
  unsigned socket_mode_bits = 0660;
  LocalAccessRules local_access;  // allowed_uids and allowed_gids resolved
  TenantPolicy tenant_policy;  // from tenant_uids and tenant_roaming_uids
};

void RegisterDaemonFlags(FlagSet* flags, DaemonOptions* options);

// Checks ranges and fills the derived fields; false with *error naming the flag.
bool ValidateDaemonOptions(DaemonOptions* options, std::string* error);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_DAEMON_OPTIONS_H_
