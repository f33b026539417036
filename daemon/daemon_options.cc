#include "daemon/server/daemon_options.h"

#include <cstdlib>

#include "common/base/mooncake_compat.h"
#include "common/base/text.h"

namespace mooncake {

void RegisterDaemonFlags(FlagSet* f, DaemonOptions* o) {
  f->AddString("master", &o->master,
               "the master's host:port (\"\": this host's own address, what its name "
               "resolves to, port 50051: where a master listens by default), or "
               "etcd://host:port[,host:port...]: the leader etcd names, followed when it "
               "changes");
  f->AddString("cluster_id", &o->cluster_id,
               "with --master etcd://: the cluster whose leader key "
               "(/mooncake/<cluster_id>/leader) names the master, as the masters' own "
               "--cluster_id");
  f->AddDuration("master_failover_wait", &o->master_failover_wait_ms, 1,
                 "with --master etcd://: how long a master call that failed because of the "
                 "master (down, not the leader) waits for a leader to run it again");
  f->AddString("socket", &o->socket,
               "Unix socket applications connect to; its directory must exist (only "
               "/run/mooncake, the default's, is made when missing)");
  f->AddString("hostname", &o->hostname, "advertised host name (\"\": this machine's)");
  f->AddInt("port", &o->port, "transfer-engine TCP port (0: first free one in 12300..14300)");
  f->AddString("transfer_bind_address", &o->transfer_bind_address,
               "address the transfer port listens on (\"\": the one --hostname, or this "
               "machine's name, resolves to; 0.0.0.0: every interface)");
  f->AddInt("metrics_port", &o->metrics_port,
            "admin HTTP port: /metrics, /health (0: pick a free one and log it; -1: none)");
  f->AddString("metrics_host", &o->metrics_host,
               "address the admin HTTP server listens on: this host only by default; give an "
               "address of this host (or 0.0.0.0) for a Prometheus elsewhere (/metrics and "
               "/health stay open, POST /log_level needs the admin token)");
  f->AddString("admin_token_file", &o->admin_token_file,
               "key file (mode 0600, the cluster key file's format) whose admin token the "
               "admin HTTP also accepts, besides the cluster key's (\"\": none)");
  f->AddSize("global_segment_size", &o->global_segment_size,
             "memory lent to the cluster pool (0: none); more than this host can back "
             "stops the start");
  f->AddSize("client_segment_budget", &o->client_segment_budget,
             "cap on the memory all clients together may have mounted (setup's "
             "global_segment_size, MOUNT_SEGMENT); 0: no cap, any mount this host can back "
             "(MemAvailable less a reserve, or free huge pages: docs/daemon.md)");
  f->AddSize("client_segment_budget_per_client", &o->client_segment_budget_per_client,
             "cap on the memory one client connection may have mounted; 0: no cap");
  f->AddString("socket_mode", &o->socket_mode, "permissions of the socket file, octal");
  f->AddString("allowed_uids", &o->allowed_uids,
               "users (numbers or names, comma-separated) admitted on the socket besides "
               "root, the daemon's uid and --allowed_gids; others get -1401");
  f->AddString("allowed_gids", &o->allowed_gids,
               "groups (numbers or names, comma-separated) whose members are admitted on the "
               "socket (\"\": the socket file's group)");
  f->AddDuration("heartbeat_interval", &o->heartbeat_interval_ms, 1,
                 "time between heartbeats to the master");
  f->AddDuration("rpc_timeout", &o->rpc_timeout_ms, 1,
                 "send/receive bound on one master RPC");
  f->AddDuration("connect_timeout", &o->connect_timeout_ms, 1,
                 "TCP connect bound to the master");
  f->AddInt("max_master_connections", &o->max_master_connections,
            "cap of the master connection pool (0: worker_threads + 4)");
  f->AddInt("worker_threads", &o->worker_threads, "request workers (0: max(4, 2 x cores))");
  f->AddSize("copy_helper_min", &o->copy_helper_min,
             "local copies of one request at least this big are shared with a helper "
             "thread (0: none; e.g. 256KiB on hosts with idle cores)");
  f->AddDuration("shutdown_timeout", &o->shutdown_timeout_ms, 1,
                 "on SIGTERM, how long running requests may take to finish");
  f->AddDuration("hello_timeout", &o->hello_timeout_ms, 1,
                 "a client connection that has not sent HELLO this long after connecting is "
                 "closed");
  f->AddInt("spin_us", &o->spin_us,
            "how long a thread waiting for a request, a job or a master reply polls before "
            "it sleeps, microseconds (adaptive; 0: never; at most 10000)");
  f->AddBool("read_cache", &o->read_cache,
             "remember where read objects live for 90% of their read lease, so repeated "
             "reads skip the master");
  f->AddChoice("protocol", &o->protocol, {"auto", "tcp", "rdma"},
               "transport to other daemons: rdma when a device exists (auto), or forced");
  f->AddString("rdma_devices", &o->rdma_devices,
               "comma-separated RDMA devices to use (\"\": every one found)");
  f->AddInt("transfer_streams", &o->transfer_streams,
            "TCP connections one large transfer is striped over");
  f->AddDuration("transfer_timeout", &o->transfer_timeout_ms, 1,
                 "a transfer to another daemon that makes no progress this long fails");
  f->AddInt("transfer_connections", &o->transfer_connections,
            "pooled TCP connections to one peer daemon, at most; also how many one peer may "
            "hold to this daemon's transfer port");
  f->AddInt("transfer_max_connections", &o->transfer_max_connections,
            "connections to this daemon's transfer port, all peers together (idle ones make "
            "room for new peers)");
  f->AddBool("checksum", &o->checksum,
             "store a CRC32C of every value put through this daemon; gets verify it (-801) "
             "and report a replica that fails it, which the master then drops: the only "
             "thing that tells a range freed and reused after a restore from the value "
             "once there (false: such a read may answer another key's bytes)");
  f->AddBool("drain_on_shutdown", &o->drain_on_shutdown,
             "at SIGTERM, move the global segment's objects to other daemons with room before "
             "leaving (up to 60 s, serving meanwhile), so that a restart loses none");
  f->AddString("cluster_key_file", &o->cluster_key_file,
               "file (mode 0600) of the key every master and daemon of the cluster shares; "
               "peers prove it at connect (\"\": none, loopback peers only)");
  f->AddDuration("put_no_space_wait", &o->put_no_space_wait_ms, 1,
                 "a put (or batch entry) the master has no space for asks again while "
                 "eviction makes room, for this long before it answers -200 (0: at once)");
  f->AddInt("group_commit_max", &o->group_commit_max,
            "concurrent single-key puts' and gets' master calls sent together as one batch "
            "RPC, at most this many (0: each its own RPC)");
  f->AddString("tenant_uids", &o->tenant_uids,
               "tenants only these uids may claim, e.g. \"alice=1000:1001,bob=1002\"; a "
               "uid listed here may claim only the tenants listing it, and naming none gets "
               "the first (\"\": none listed; any tenant may be claimed by anyone)");
  f->AddString("tenant_roaming_uids", &o->tenant_roaming_uids,
               "users (numbers or names, comma-separated) listed in --tenant_uids that may "
               "also claim tenants it does not list (\"\": none)");
  f->AddString("ssd_path", &o->ssd.path,
               "directory of the SSD tier's bucket files, which must exist (\"\": no SSD "
               "tier)");
  f->AddSize("ssd_capacity", &o->ssd.capacity,
             "bytes the SSD tier's bucket files may take, at least two buckets (required "
             "with --ssd_path)");
  f->AddSize("ssd_bucket_size", &o->ssd.bucket_size,
             "size at which a bucket file is sealed and the next one opened; buckets are "
             "evicted whole");
  f->AddDouble("ssd_high_watermark", &o->ssd.high_watermark,
               "fraction of --ssd_capacity past which whole buckets are evicted");
  f->AddChoice("ssd_eviction_policy", &o->ssd_eviction_policy, {"fifo", "lru"},
               "which bucket goes first: the oldest (fifo) or the least recently read (lru)");
  f->AddChoice("ssd_persist_mode", &o->ssd_persist_mode, {"disabled", "relaxed", "strict"},
               "what survives a restart: nothing (disabled, the directory is wiped), all but "
               "the last second of offloads (relaxed), every offload the master was told of "
               "(strict: fsynced first)");
  f->AddLogLevel(&o->log_level);

  AddMooncakeSettings(f, MooncakeClientSettings());
}

bool ValidateDaemonOptions(DaemonOptions* o, std::string* error) {
  // "" is this host's address, which main resolves (a parser of flags asks no resolver).
  MasterAddress master;
  std::string master_error;
  bool master_ok = o->master.empty() || ParseMasterAddress(o->master, &master, &master_error);
  if (o->master.empty()) master.port = 50051;
  char* end = nullptr;
  long mode = std::strtol(o->socket_mode.c_str(), &end, 8);
  bool mode_ok = !o->socket_mode.empty() && *end == '\0' && mode >= 0 && mode <= 0777;
  if (!master_ok) {
    *error = "--master " + master_error;
  } else if (!ValidName(o->cluster_id)) {
    *error = "--cluster_id must be 1..64 characters of [A-Za-z0-9_.-]";
  } else if (o->master_failover_wait_ms < 0 || o->master_failover_wait_ms > 600 * 1000) {
    *error = "--master_failover_wait must be in 0..600 s";
  } else if (o->socket.empty() || o->socket.size() >= 108) {
    *error = "--socket must be a path shorter than 108 bytes";
  } else if (o->port < 0 || o->port > 65535) {
    *error = "--port must be in 0..65535";
  } else if (o->metrics_port < -1 || o->metrics_port > 65535) {
    *error = "--metrics_port must be in -1..65535";
  } else if (!mode_ok) {
    *error = "--socket_mode must be octal permissions such as 0660";
  } else if (o->heartbeat_interval_ms <= 0 || o->rpc_timeout_ms <= 0 ||
             o->connect_timeout_ms <= 0 || o->hello_timeout_ms <= 0) {
    *error = "--heartbeat_interval, --rpc_timeout, --connect_timeout and --hello_timeout must "
             "be positive";
  } else if (o->worker_threads < 0 || o->worker_threads > 1024 ||
             o->max_master_connections < 0 || o->max_master_connections > 4096) {
    *error = "--worker_threads must be in 0..1024 and --max_master_connections in 0..4096";
  } else if (o->spin_us < 0 || o->spin_us > kMaxSpinMicros) {
    *error = "--spin_us must be in 0..10000";
  } else if (o->transfer_streams < 1 || o->transfer_streams > 64 ||
             o->transfer_connections < 1 || o->transfer_connections > 4096 ||
             o->transfer_timeout_ms <= 0 || o->transfer_timeout_ms > 3600 * 1000) {
    *error = "--transfer_streams must be in 1..64, --transfer_connections in 1..4096, and "
             "--transfer_timeout in 1 ms..1 h";
  } else if (o->transfer_max_connections < 1 || o->transfer_max_connections > 65536) {
    *error = "--transfer_max_connections must be in 1..65536";
  } else if (!ResolveLocalAccessRules(o->allowed_uids, o->allowed_gids, &o->local_access,
                                      error)) {
    // *error names the flag
  } else if (o->put_no_space_wait_ms < 0 || o->put_no_space_wait_ms > 60 * 1000) {
    *error = "--put_no_space_wait must be in 0..60 s";
  } else if (o->group_commit_max < 0 || o->group_commit_max > 1024) {
    *error = "--group_commit_max must be in 0..1024";
  } else if (std::vector<uid_t> roaming;
             !ResolveUids("tenant_roaming_uids", o->tenant_roaming_uids, &roaming, error)) {
    // *error names the flag
  } else if (!TenantPolicy::Parse(o->tenant_uids, std::move(roaming), &o->tenant_policy,
                                  error)) {
    // *error names the flag
  } else if (!ParseSsdEvictionPolicy(o->ssd_eviction_policy, &o->ssd.eviction_policy) ||
             !ParseSsdPersistMode(o->ssd_persist_mode, &o->ssd.persist_mode)) {
    *error = "--ssd_eviction_policy must be fifo or lru, --ssd_persist_mode disabled, relaxed "
             "or strict";
  } else if (!ValidateSsdOptions(o->ssd, error)) {
    // *error names the flag
  } else {
    o->master_host = master.host;  // "" when master is, or with etcd://
    o->master_port = master.port;
    o->etcd_endpoints = master.etcd_endpoints;
    o->socket_mode_bits = static_cast<unsigned>(mode);
    return true;
  }
  return false;
}

}  // namespace mooncake
