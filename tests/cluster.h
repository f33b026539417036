/* A real master and N daemons on 127.0.0.1 with free ports, all under one temp dir, for
 * the C ABI suites (which are C, so this is a C interface over tests/process_harness).
 * Daemon i serves the Unix socket <dir>/mooncaked-<i>.sock, the transfer port
 * port_at(i), advertises the name "127.0.0.1:<port>" and logs to <dir>/daemon-<i>.log.
 * Indices are stable: a killed daemon keeps its index, its socket and its port. */
#ifndef MOONCAKE_TESTS_CLUSTER_H_
#define MOONCAKE_TESTS_CLUSTER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_cluster mc_cluster;

typedef struct mc_cluster_options {
  int daemons;           /* how many mooncaked to start (>= 1) */
  uint64_t segment_size; /* each daemon's --global_segment_size */
  int lease_ms;          /* the master's read lease; 0: 1000 (lease tests stay short) */
  /* Extra flags, NULL-terminated (NULL: none): for the master, and for every daemon
   * (including ones started later by restart or add_daemon). "{dir}" in a flag stands for
   * the cluster's directory (e.g. "--snapshot_dir", "{dir}/snapshots"). */
  const char *const *master_flags;
  const char *const *daemon_flags;
} mc_cluster_options;

/* Starts the master, then the daemons one by one, each waited for until it serves its
 * socket. NULL on failure, after printing why and where the logs are. */
mc_cluster *mc_cluster_start_with(const mc_cluster_options *options);

/* One daemon, as the single-daemon suites use it: index 0 of a cluster of one. */
mc_cluster *mc_cluster_start(uint64_t segment_size);
/* The same with the master's read lease set to lease_ms (a benchmark wants it long enough
 * that re-reads within it hit the daemon's read cache). */
mc_cluster *mc_cluster_start_with_lease(uint64_t segment_size, int lease_ms);
const char *mc_cluster_socket(const mc_cluster *c);  /* daemon 0's */
int mc_cluster_daemon_port(const mc_cluster *c);     /* daemon 0's */

int mc_cluster_master_port(const mc_cluster *c);
int mc_cluster_daemon_count(const mc_cluster *c);
const char *mc_cluster_socket_at(const mc_cluster *c, int i);
int mc_cluster_port_at(const mc_cluster *c, int i);
/* "127.0.0.1:<port>": what preferred_segments takes to steer a replica onto daemon i. */
const char *mc_cluster_name_at(const mc_cluster *c, int i);
const char *mc_cluster_log_at(const mc_cluster *c, int i);

/* Sends sig to daemon i and waits (10 s at most, then SIGKILL) for it to exit; returns
 * its waitpid status, or -1 when it was not running or had to be killed. */
int mc_cluster_kill_daemon_at(mc_cluster *c, int i, int sig);
/* SIGSTOP (returning once every thread has stopped) and SIGCONT; 0 on success. */
int mc_cluster_pause_daemon_at(mc_cluster *c, int i);
int mc_cluster_resume_daemon_at(mc_cluster *c, int i);
/* 1 when a connection accepted on daemon i's transfer port holds a request not read yet
 * (the kernel accepts for a stopped daemon too), else 0: for a test that stopped daemon i,
 * the event "a peer has started a transfer from it". */
int mc_cluster_unread_request_at(const mc_cluster *c, int i);
/* Starts daemon i again with the same socket, port and flags; 0 once serving. */
int mc_cluster_restart_daemon_at(mc_cluster *c, int i);
/* Starts daemon i again like mc_cluster_restart_daemon_at but returns once it is forked
 * (0; -1 when it could not be): a daemon serves its socket only after it has registered
 * with the master, so this is how to start one while the master is down. Call it from the
 * thread that will outlive the daemon (children die with the thread that forked them). */
int mc_cluster_spawn_daemon_at(mc_cluster *c, int i);
/* Waits up to timeout_ms for daemon i to serve its socket: 0 once it does, -1 when it
 * exits or does not in time. */
int mc_cluster_await_daemon_at(mc_cluster *c, int i, int timeout_ms);
/* 1 while daemon i's process exists (a stopped one too), 0 once it has exited. */
int mc_cluster_daemon_alive(mc_cluster *c, int i);
/* Starts one more daemon with the cluster's daemon flags, then extra_flags
 * (NULL-terminated, later flags win); returns its index whether or not it came up (see
 * mc_cluster_daemon_alive and mc_cluster_wait_daemon_at), -1 when it could not be forked. */
int mc_cluster_add_daemon(mc_cluster *c, const char *const *extra_flags);
/* Waits up to timeout_ms for daemon i to exit on its own; its waitpid status, or -1 while
 * it still runs. */
int mc_cluster_wait_daemon_at(mc_cluster *c, int i, int timeout_ms);

/* Sends sig to the daemon 0 (or master) and waits for it to exit. */
void mc_cluster_kill_daemon(mc_cluster *c, int sig);
void mc_cluster_kill_master(mc_cluster *c, int sig);
/* Starts them again with the same socket, ports and flags; 0 once serving. */
int mc_cluster_restart_daemon(mc_cluster *c);
int mc_cluster_restart_master(mc_cluster *c);
/* The master's process id (e.g. to change its resource limits), or -1. */
int mc_cluster_master_pid(const mc_cluster *c);
/* The directory every process of the cluster lives in (logs, sockets, "{dir}"). */
const char *mc_cluster_dir(const mc_cluster *c);
const char *mc_cluster_master_log(const mc_cluster *c);
/* SIGSTOP the master (0 once stopped) and SIGCONT it: reads that still reach it hang. */
int mc_cluster_pause_master(mc_cluster *c);
void mc_cluster_resume_master(mc_cluster *c);

/* The master's view, asked over Thrift as a daemon would (the C ABI does not show where
 * replicas are). Tests use it to see placement, never to change anything. */
typedef struct mc_cluster_segment {
  int64_t id;
  uint64_t size;
  uint64_t used; /* bytes allocated to replicas, finished or still being written */
} mc_cluster_segment;
/* Daemon i's own segment (--global_segment_size) as the master lists it under daemon i's
 * name: 0, or -1 when the master lists none (or cannot be asked). */
int mc_cluster_segment_at(const mc_cluster *c, int i, mc_cluster_segment *out);
/* Where COMPLETE replica r of key lies (GetReplicaList, which grants a read lease): 0, or
 * -1 when there is no such replica. */
int mc_cluster_replica_at(const mc_cluster *c, const char *key, int r, int64_t *segment_id,
                          uint64_t *offset);

/* The master's Snapshot admin call, waited for (LastSnapshot polled until it names the
 * snapshot started): its code (0 once published; -1 when the master cannot be asked), with
 * the published snapshot's sequence and object count. */
int mc_cluster_master_snapshot(const mc_cluster *c, int64_t *sequence, int64_t *objects);

/* Some of the master's GetStats figures; 0, or -1 when it cannot be asked. */
typedef struct mc_cluster_master_stats {
  int64_t objects;
  int64_t daemons;
  int64_t pending_segments; /* detached segments (restored, or of a silent daemon) */
  int64_t oplog_sequence;
  int64_t oplog_synced;
  int64_t restore_ms;
  int64_t restored_objects;
  int64_t master_epoch;
  int64_t dropped_unreadable; /* objects_dropped{reason="unreadable"}: replicas readers reported */
} mc_cluster_master_stats;
int mc_cluster_master_stats_get(const mc_cluster *c, mc_cluster_master_stats *out);

/* Stops every daemon, then the master (SIGTERM), and removes the directory unless
 * $MC_KEEP_TEST_DIR is set. NULL is ignored. */
void mc_cluster_stop(mc_cluster *c);

/* The segments applications lent at daemon i (setup with a global_segment_size: the
 * master lists them under daemon i's name, marked lent_by_client), up to max of them into
 * out: how many the master lists, or -1 when it cannot be asked. */
int mc_cluster_lent_segments_at(const mc_cluster *c, int i, mc_cluster_segment *out, int max);

/* Opens fd (a fresh TCP connection to a daemon's transfer port) as a peer daemon named
 * name that holds the cluster's key (ClusterKeyFile() of tests/process_harness.h) opens
 * one (daemon/transfer/transfer_protocol.h): HELLO with a client nonce, then AUTH with the key's
 * proof, and the daemon's own proof checked. 0 once admitted; the daemon's refusal code
 * (-1305, -1400, ...); 1 when it closed the connection instead of answering; 2 when its
 * answer breaks the protocol or its proof is wrong. fd is then ready for requests. */
int mc_cluster_transfer_handshake(int fd, const char *name);

/* The master's pool usage and eviction figures (GetStats, with MasterStats.eviction:
 * docs/master.md, "Eviction"): 0, or -1 when it cannot be asked. */
typedef struct mc_cluster_eviction_stats {
  int64_t capacity_bytes;
  int64_t used_bytes;      /* allocated to replicas, finished or still being written */
  int64_t objects;
  int64_t evicted_objects;
  int64_t rounds;          /* eviction rounds, the upkeep's and puts' */
  int64_t put_rounds;      /* of which run by a put */
  int64_t short_rounds;    /* rounds that freed less than asked */
  int64_t evicted_bytes;
  int64_t total_us;        /* time spent in rounds */
  int64_t max_us;          /* the longest round */
  int64_t last_used_bytes; /* usage right after the latest round */
  int64_t no_space_puts;   /* PutStart/UpsertStart answered -200, each retry counted */
  int64_t exist_uses;      /* existence hits counted as a use (once per access) */
  int64_t exist_leases;    /* exist leases granted (--exist_lease_ttl) */
} mc_cluster_eviction_stats;
int mc_cluster_eviction_stats_get(const mc_cluster *c, mc_cluster_eviction_stats *out);

/* One tenant's figures as the master's GetStats lists them (docs/security.md, "Tenants");
 * "" is the default tenant. 0 (all zero when the master lists no such tenant), or -1 when
 * it cannot be asked. */
typedef struct mc_cluster_tenant_stats {
  int64_t objects;
  int64_t bytes; /* size x memory replicas, summed over its objects */
  int64_t quota_bytes;
  int64_t refused_puts;
} mc_cluster_tenant_stats;
int mc_cluster_tenant_stats_get(const mc_cluster *c, const char *tenant,
                                mc_cluster_tenant_stats *out);

/* ---- the SSD tier (docs/ssd.md) ------------------------------------------------------ */

/* "{ssd}" in a daemon flag (the cluster's daemon flags, or mc_cluster_add_daemon's extra
 * ones) stands for daemon i's own SSD directory, <dir>/ssd-<i>: e.g. {"--ssd_path",
 * "{ssd}", "--ssd_capacity", "64m"}. A restart keeps it, so the daemon finds its files. */
const char *mc_cluster_ssd_dir_at(const mc_cluster *c, int i);

/* Flips (xor 0xff) the byte at needle offset at (< n) of the first copy of needle[0, n)
 * found in daemon i's SSD directory: its data files, not the `.meta` files nor IDENTITY.
 * A test names an object's bytes and corrupts them in whatever bucket holds them, knowing
 * nothing of the layout. 0, or -1 when no data file holds them. */
int mc_cluster_flip_ssd_byte_at(const mc_cluster *c, int i, const void *needle, size_t n,
                                size_t at);

/* Mounts a tmpfs of bytes at <dir>/<name> (created), for a daemon's --ssd_path that runs
 * out of space; mc_cluster_stop unmounts it after the daemons are stopped. 0 with its path
 * in *path (owned by the cluster); 1 when this process may not mount (not root, no
 * CAP_SYS_ADMIN: the caller skips, saying so); -1 on another failure. */
int mc_cluster_mount_small_fs(mc_cluster *c, const char *name, uint64_t bytes,
                              const char **path);

/* The master's DiskStats (GetStats, MasterStats.disk): 0, or -1 when it cannot be asked. */
typedef struct mc_cluster_disk_stats {
  int64_t segments; /* LOCAL_DISK segments mounted, attached or not */
  int64_t capacity_bytes;
  int64_t objects; /* with a LOCAL_DISK replica */
  int64_t bytes;
  int64_t disk_only_objects; /* of which have no memory replica */
  int64_t offloads_queued;
  int64_t offloads_done;
  int64_t offloads_failed;
  int64_t evict_offloads;
  int64_t promotions;
  int64_t adopted;
  int64_t dropped;
} mc_cluster_disk_stats;
int mc_cluster_disk_stats_get(const mc_cluster *c, mc_cluster_disk_stats *out);

/* The master's figures of replicas it could not vouch for (docs/durability.md, "Verification
 * after restore", "A daemon that returns late"): objects dropped or kept by reason
 * (MasterStats.objects_dropped), parked objects and those adopted back. 0, or -1 when the
 * master cannot be asked. */
typedef struct mc_cluster_verify_stats {
  int64_t restore_checksum;     /* dropped: a replica's bytes failed their checksum */
  int64_t unreadable;           /* dropped: a reader reported its bytes wrong first */
  int64_t restore_unverifiable; /* kept: no checksum to check against */
  int64_t parked_expired;
  int64_t unverified_replicas; /* waiting for their daemon's check */
  int64_t parked_objects;
  int64_t parked_adopted;
} mc_cluster_verify_stats;
int mc_cluster_verify_stats_get(const mc_cluster *c, mc_cluster_verify_stats *out);

/* The COMPLETE replicas of key the master lists (GetReplicaList, which grants a read
 * lease), by kind: 0 with *memory and *disk counted and *disk_daemon the index of the
 * daemon holding the first disk replica (-1: none); -1 when the key is missing or the
 * master cannot be asked. Any out-parameter may be NULL. */
int mc_cluster_replica_kinds(const mc_cluster *c, const char *key, int *memory, int *disk,
                             int *disk_daemon);

/* ---- high availability (docs/ha.md) ------------------------------------------------- */

typedef struct mc_cluster_ha_options {
  int masters;            /* how many HA masters (>= 1) */
  int lease_ttl_ms;       /* --ha_lease_ttl; 0: 2000 (the master's default) */
  const char *oplog_mode; /* "strict" or "relaxed"; NULL: "strict" */
} mc_cluster_ha_options;

/* mc_cluster_start_with for a cluster with high availability: an etcd on free ports of
 * 127.0.0.1 (tests/etcd_process.h: data in <dir>/etcd-data, log <dir>/etcd.log), then ha->masters masters campaigning
 * through it, each on its own port with --enable_ha --etcd_endpoints <etcd> --cluster_id
 * <unique to this cluster> --ha_lease_ttl --enable_snapshot --snapshot_dir <dir>/master-<i>
 * --enable_snapshot_restore --oplog_mode, then options->master_flags; once one of them
 * leads, options->daemons daemons with --master etcd://<etcd> --cluster_id <id> in front of
 * options->daemon_flags (so a daemon finds the leader itself). NULL on failure, after
 * printing why and where the logs are. */
mc_cluster *mc_cluster_start_ha(const mc_cluster_options *options,
                                const mc_cluster_ha_options *ha);

/* A cluster started with ha_masters > 0. Master i listens on its own port for its whole
 * life (restarts keep it, so its name "127.0.0.1:<port>" too), logs to <dir>/master-<i>.log
 * and keeps its snapshots and operation log in <dir>/master-<i>. The single-master
 * functions above (mc_cluster_kill_master, mc_cluster_master_port, ...) are for clusters
 * without HA; the query functions (stats, segments, replicas) ask the current leader. */
int mc_cluster_ha_master_count(const mc_cluster *c);
int mc_cluster_ha_master_port_at(const mc_cluster *c, int i);
const char *mc_cluster_ha_master_log_at(const mc_cluster *c, int i);
const char *mc_cluster_ha_cluster_id(const mc_cluster *c);

/* What master i says it is (GetRole, over a connection that gives up after about a
 * second, so a stopped master costs one timeout; one paused by the harness is not asked):
 * 0 LEADER, 1 STANDBY, 2 DEPOSED (rpc::MasterRole), with its term in *term (may be NULL);
 * -1 when it is not running, paused, or does not answer. */
int mc_cluster_ha_role_at(const mc_cluster *c, int i, int64_t *term);
/* The last operation-log record in master i's state (GetRole's applied_seq): a standby
 * has caught up once it equals the leader's. -1 as for mc_cluster_ha_role_at. */
int64_t mc_cluster_ha_applied_seq_at(const mc_cluster *c, int i);
/* The index of the master that leads now: of those answering LEADER, the one of the
 * highest term (a deposed one may not know yet); -1 when none does. */
int mc_cluster_ha_leader(const mc_cluster *c);
/* Polls mc_cluster_ha_leader until a master other than except (-1: any) leads, for
 * timeout_ms at most: its index, or -1. */
int mc_cluster_ha_await_leader(const mc_cluster *c, int except, int timeout_ms);

/* Sends sig to master i and waits (10 s at most, then SIGKILL) for it to exit: its waitpid
 * status, or -1 when it was not running or had to be killed. A paused one is continued
 * first unless sig is SIGKILL. */
int mc_cluster_ha_kill_master_at(mc_cluster *c, int i, int sig);
/* SIGSTOP (returning once every thread has stopped: 0) and SIGCONT (0; -1 when it is not
 * running). */
int mc_cluster_ha_pause_master_at(mc_cluster *c, int i);
int mc_cluster_ha_resume_master_at(mc_cluster *c, int i);
/* Starts master i again with the same port, directory and flags: 0 once it accepts
 * connections (it then rejoins as a standby, or leads when no one else does). */
int mc_cluster_ha_restart_master_at(mc_cluster *c, int i);
/* 1 while master i's process exists (a stopped one too), 0 once it has exited. */
int mc_cluster_ha_master_alive(mc_cluster *c, int i);
/* Waits up to timeout_ms for master i to exit on its own: its waitpid status, or -1 while
 * it still runs (or was not running). */
int mc_cluster_ha_wait_master_at(mc_cluster *c, int i, int timeout_ms);

/* etcd's client port, and "127.0.0.1:<port>" (what --etcd_endpoints takes). */
int mc_cluster_etcd_port(const mc_cluster *c);
const char *mc_cluster_etcd_endpoint(const mc_cluster *c);
/* Stops etcd with sig (SIGTERM: a clean stop; SIGKILL: a crash), waiting for it to exit:
 * its waitpid status, or -1. */
int mc_cluster_etcd_stop(mc_cluster *c, int sig);
/* Starts etcd again on the same ports with the same data dir: 0 once it answers /health. */
int mc_cluster_etcd_start(mc_cluster *c);

/* The soft pin of key as the master's admin HTTP /query_key reports it (the fixed deadline
 * of docs/mooncake-api.md, "put-config"): 0 with *remaining_ms (0 when not soft-pinned),
 * -1 when the key is unknown or the master cannot be asked. Takes no lease. */
int mc_cluster_soft_pin_remaining_ms(const mc_cluster *c, const char *key,
                                     int64_t *remaining_ms);

/* Where the first replica of key lies in its segment, as /query_key reports it (no lease
 * granted): 0 with *offset, -1 when the key is unknown or the master cannot be asked. */
int mc_cluster_offset_of(const mc_cluster *c, const char *key, uint64_t *offset);
/* The value of one sample of the master's /metrics (admin HTTP), named as the exposition
 * writes it, labels included: e.g. "mooncake_master_objects_dropped_total{reason=
 * \"disk_reconcile\"}". 0 with *value, -1 when the master cannot be asked or has no
 * such sample. */
int mc_cluster_master_metric(const mc_cluster *c, const char *sample, double *value);

#ifdef __cplusplus
}
#endif

#endif /* MOONCAKE_TESTS_CLUSTER_H_ */
