#include "common/base/mooncake_compat.h"

namespace mooncake {

namespace {

constexpr const char* kIgnored = nullptr;

const char kNoSnapshotBackends[] =
    "snapshots are files in --snapshot_dir (no S3 or Redis stores)";
const char kNoKvEvents[] = "no KV-cache event publisher";
const char kNoMetadataServer[] =
    "no transfer-engine metadata server: daemons learn each other's addresses from the master";
const char kNoDynamicReplication[] =
    "no dynamic replica fan-out: a put's replica count decides";
const char kNoSharedFs[] = "no shared-filesystem (NFS/3FS) storage backend: daemons' --ssd_path";
const char kNoNof[] = "no NVMe-oF segments";
const char kNoCxl[] = "no CXL memory segments";
const char kOffloadTuning[] =
    "offloads are queued per daemon without a cap; see --allow_evict_without_offload";
const char kPromotionTuning[] = "every hit on a disk-only object promotes it (--promotion_on_hit)";
const char kLogFiles[] = "logs go to stderr, which journald keeps (docs/operations.md, \"Logs\")";

}  // namespace

const std::vector<MooncakeSetting>& MooncakeMasterSettings() {
  static const std::vector<MooncakeSetting> kSettings = {
      // Deprecated spellings Mooncake still takes, and its command-line names of keys.
      {"config_path", "config", ""},
      {"port", "rpc_port", ""},
      {"max_threads", "rpc_thread_num", "ours counts Thrift I/O threads"},
      {"client_ttl", "client_live_ttl_sec", "seconds, as Mooncake's"},
      {"ha_backend_connstring", "etcd_endpoints", "etcd is the only backend"},

      {"rpc_interface", kIgnored, "name the address with --rpc_address"},
      {"rpc_conn_timeout_seconds", kIgnored,
       "see --rpc_idle_timeout_sec (an admitted connection silent 300 s is closed) and "
       "--rpc_handshake_timeout_sec (one not admitted after 5 s)"},
      {"rpc_enable_tcp_no_delay", kIgnored, "Thrift's server socket always sets TCP_NODELAY"},
      {"nof_eviction_ratio", kIgnored, kNoNof},
      {"nof_eviction_high_watermark_ratio", kIgnored, kNoNof},
      {"nof_heartbeat_interval_sec", kIgnored, kNoNof},
      {"nof_heartbeat_probe_timeout_ms", kIgnored, kNoNof},
      {"nof_heartbeat_failures_threshold", kIgnored, kNoNof},
      {"offload_force_evict", kIgnored, kOffloadTuning},
      {"offloading_queue_limit", kIgnored, kOffloadTuning},
      {"offload_cap_ratio", kIgnored, kOffloadTuning},
      {"promotion_admission_threshold", kIgnored, kPromotionTuning},
      {"promotion_queue_limit", kIgnored, kPromotionTuning},
      {"promotion_max_per_heartbeat", kIgnored, kPromotionTuning},
      {"dynamic_replication_mode", kIgnored, kNoDynamicReplication},
      {"dynamic_replication_heat_window_seconds", kIgnored, kNoDynamicReplication},
      {"dynamic_replication_admission_qps_threshold", kIgnored, kNoDynamicReplication},
      {"dynamic_replication_max_memory_replicas", kIgnored, kNoDynamicReplication},
      {"enable_kv_events", kIgnored, kNoKvEvents},
      {"kv_events_bind_endpoint", kIgnored, kNoKvEvents},
      {"kv_events_model_name", kIgnored, kNoKvEvents},
      {"kv_events_backend_id", kIgnored, kNoKvEvents},
      {"kv_events_tenant_id", kIgnored, kNoKvEvents},
      {"kv_events_additional_salt", kIgnored, kNoKvEvents},
      {"kv_events_lora_name", kIgnored, kNoKvEvents},
      {"kv_events_block_size", kIgnored, kNoKvEvents},
      {"kv_events_dp_rank", kIgnored, kNoKvEvents},
      {"kv_events_emit_legacy_compat", kIgnored, kNoKvEvents},
      {"kv_events_emit_object_key", kIgnored, kNoKvEvents},
      {"kv_events_queue_capacity", kIgnored, kNoKvEvents},
      {"oplog_poll_interval_ms", kIgnored, "standbys are streamed the log, they do not poll"},
      {"oplog_batch_max_entries", kIgnored, "the log is batched by --oplog_flush_interval"},
      {"batch_oplog_retry_timeout_sec", kIgnored,
       "a standby follows its leader until another is elected (docs/ha.md)"},
      {"root_fs_dir", kIgnored, kNoSharedFs},
      {"global_file_segment_size", kIgnored, kNoSharedFs},
      {"enable_disk_eviction", kIgnored, kNoSharedFs},
      {"quota_bytes", kIgnored, kNoSharedFs},
      {"enable_http_metadata_server", kIgnored, kNoMetadataServer},
      {"http_metadata_server_port", kIgnored, kNoMetadataServer},
      {"http_metadata_server_host", kIgnored, kNoMetadataServer},
      {"enable_metadata_cleanup_on_timeout", kIgnored, kNoMetadataServer},
      {"pod_name", kIgnored, "no Kubernetes label routing"},
      {"pod_namespace", kIgnored, "no Kubernetes label routing"},
      {"enable_multi_tenants", kIgnored,
       "tenants are always on (a connection names its own); quotas by --tenant_quota"},
      {"tenant_quota_connector_type", kIgnored, "quotas come from --tenant_quota"},
      {"tenant_quota_connector_uri", kIgnored, "quotas come from --tenant_quota"},
      {"snapshot_backup_dir", kIgnored, kNoSnapshotBackends},
      {"snapshot_object_store_type", kIgnored, kNoSnapshotBackends},
      {"snapshot_payload_store_type", kIgnored, kNoSnapshotBackends},
      {"snapshot_payload_backend_type", kIgnored, kNoSnapshotBackends},
      {"snapshot_catalog_store_type", kIgnored, kNoSnapshotBackends},
      {"snapshot_catalog_backend_type", kIgnored, kNoSnapshotBackends},
      {"snapshot_catalog_store_connstring", kIgnored, kNoSnapshotBackends},
      {"snapshot_catalog_backend_connstring", kIgnored, kNoSnapshotBackends},
      {"enable_cxl", kIgnored, kNoCxl},
      {"cxl_path", kIgnored, kNoCxl},
      {"cxl_size", kIgnored, kNoCxl},
      {"log_dir", kIgnored, kLogFiles},
      {"logtostderr", kIgnored, kLogFiles},
  };
  return kSettings;
}

const std::vector<MooncakeSetting>& MooncakeClientSettings() {
  static const std::vector<MooncakeSetting> kSettings = {
      {"config_path", "config", ""},
      {"master_server_address", "master", ""},
      {"device_names", "rdma_devices", ""},
      {"host", "hostname", "the name other daemons reach this one by"},
      {"http_port", "metrics_port", "serves /metrics and /health"},

      {"metadata_server", kIgnored, kNoMetadataServer},
      {"local_buffer_size", kIgnored,
       "applications mount their own buffers (mooncake_store_setup)"},
      {"threads", kIgnored, "request workers are --worker_threads"},
      {"tenant_id", kIgnored, "each application connection names its tenant"},
      {"enable_offload", kIgnored, "the SSD tier is on with --ssd_path; the master decides"},
      {"start_offload_rpc_server", kIgnored, "disk reads go through the transfer port"},
      {"enable_http_server", kIgnored, "the admin HTTP server runs unless --metrics_port -1"},
      {"log_dir", kIgnored, kLogFiles},
      {"logtostderr", kIgnored, kLogFiles},
  };
  return kSettings;
}

void AddMooncakeSettings(FlagSet* flags, const std::vector<MooncakeSetting>& settings) {
  for (const MooncakeSetting& s : settings) {
    if (s.target != nullptr) {
      flags->AddAlias(s.name, s.target);
    } else {
      flags->AddIgnored(s.name, s.reason);
    }
  }
}

}  // namespace mooncake
