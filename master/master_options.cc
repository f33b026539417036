#include "master/master_options.h"

namespace mooncake {

void RegisterMasterFlags(FlagSet* f, MasterOptions* o) {
  f->AddString("rpc_address", &o->rpc_address, "address the Thrift server listens on");
  f->AddInt("rpc_port", &o->rpc_port, "Thrift port (0: pick a free one and log it)");
  f->AddInt("rpc_thread_num", &o->rpc_thread_num, "RPC worker threads (0: one per core)");
  f->AddDuration("default_kv_lease_ttl", &o->default_kv_lease_ttl_ms, 1,
                 "read lease granted by each hit, ms");
  f->AddDuration("default_kv_soft_pin_ttl", &o->default_kv_soft_pin_ttl_ms, 1,
                 "soft-pin lifetime after the last read, ms");
  f->AddDuration("max_kv_soft_pin_ttl", &o->max_kv_soft_pin_ttl_ms, 1,
                 "upper bound on a soft-pin TTL asked for by a put, ms");
  f->AddDouble("eviction_high_watermark_ratio", &o->eviction_high_watermark_ratio,
               "evict when this fraction of the pool is used");
  f->AddDouble("eviction_ratio", &o->eviction_ratio,
               "fraction of the pool freed by one eviction round");
  f->AddDuration("client_live_ttl_sec", &o->client_live_ttl_ms, 1000,
                 "a daemon silent this long (s) is declared dead");
  f->AddDuration("put_start_discard_timeout_sec", &o->put_start_discard_timeout_ms, 1000,
                 "a put unfinished after this long (s) may be taken over by a new writer");
  f->AddDuration("put_start_release_timeout_sec", &o->put_start_release_timeout_ms, 1000,
                 "space of an abandoned put is freed this long (s) after it started");
  f->AddChoice("allocation_strategy", &o->allocation_strategy, {"random", "free_ratio_first"},
               "how replicas are spread over segments");
  f->AddChoice("log_level", &o->log_level, {"debug", "info", "warning", "error"},
               "least severe level logged");
}

bool ValidateMasterOptions(const MasterOptions& o, std::string* error) {
  if (o.rpc_port < 0 || o.rpc_port > 65535) {
    *error = "--rpc_port must be in 0..65535";
  } else if (o.rpc_thread_num < 0 || o.rpc_thread_num > 1024) {
    *error = "--rpc_thread_num must be in 0..1024";
  } else if (o.default_kv_lease_ttl_ms <= 0) {
    *error = "--default_kv_lease_ttl must be positive";
  } else if (o.default_kv_soft_pin_ttl_ms <= 0 || o.max_kv_soft_pin_ttl_ms <= 0) {
    *error = "--default_kv_soft_pin_ttl and --max_kv_soft_pin_ttl must be positive";
  } else if (!(o.eviction_high_watermark_ratio > 0.0 && o.eviction_high_watermark_ratio <= 1.0)) {
    *error = "--eviction_high_watermark_ratio must be in (0, 1]";
  } else if (!(o.eviction_ratio > 0.0 && o.eviction_ratio <= 1.0)) {
    *error = "--eviction_ratio must be in (0, 1]";
  } else if (o.client_live_ttl_ms <= 0) {
    *error = "--client_live_ttl_sec must be positive";
  } else if (o.put_start_discard_timeout_ms <= 0 ||
             o.put_start_release_timeout_ms < o.put_start_discard_timeout_ms) {
    *error = "--put_start_release_timeout_sec must be >= --put_start_discard_timeout_sec > 0";
  } else {
    return true;
  }
  return false;
}

}  // namespace mooncake
