// The extern "C" surface of include/mooncake_store.h: argument checks (NULL -> -1, limits
// -> -600), conversion to C++ types and of ErrorCode / Result to the ABI's integers (here
// and nowhere else), and a catch-all so no exception crosses the ABI (-1). Everything
// else lives in StoreClient. Only functions marked MC_EXPORT (and
// mooncake_store_strerror, from common/error_code.cc) leave the library; see
// libmooncake_store.map.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/error_code.h"
#include "common/logging.h"
#include "common/tenant_key.h"
#include "common/units.h"
#include "include/mooncake_store.h"
#include "libmc/store_client.h"

#define MC_EXPORT extern "C" __attribute__((visibility("default")))

using mooncake::ErrorCode;
using mooncake::Result;
using mooncake::client::StoreClient;

namespace {

constexpr int kInternal = MOONCAKE_STORE_INTERNAL_ERROR;
constexpr int kInvalidParams = MOONCAKE_STORE_INVALID_PARAMS;
constexpr const char* kDefaultSocket = "/run/mooncake/mooncaked.sock";

// The library's lines in an application's stderr name it rather than the application (the
// library has its own copy of the logging state: mc_common is linked in, hidden).
const bool kLogComponentSet = (mooncake::SetLogComponent("libmc"), true);

StoreClient* AsClient(mooncake_store_t store) { return static_cast<StoreClient*>(store); }

// The ABI's integers: a code, a count or the code, a flag (1/0) or the code.
int ToAbi(ErrorCode code) { return mooncake::ToInt(code); }
int64_t ToAbi(const Result<uint64_t>& r) { return mooncake::ToWire(r); }
int ToAbi(const Result<bool>& r) { return r.ok() ? (r.value() ? 1 : 0) : ToAbi(r.code()); }

// Runs f, turning any exception into on_error: nothing C++ escapes through the C ABI.
template <typename R, typename F>
R Guard(R on_error, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return on_error;
  }
}

std::string SocketPath(const char* socket_path) {
  if (socket_path != nullptr && socket_path[0] != '\0') return socket_path;
  const char* env = std::getenv("MOONCAKE_SOCKET");
  if (env != nullptr && env[0] != '\0') return env;
  return kDefaultSocket;
}

// 0 with *out set, -1 for NULL, -600 for an empty or over-long key.
int CheckKey(const char* key, std::string* out) {
  if (key == nullptr) return kInternal;
  size_t n = strnlen(key, MOONCAKE_STORE_MAX_KEY_LEN + 1);
  if (n == 0 || n > MOONCAKE_STORE_MAX_KEY_LEN) return kInvalidParams;
  out->assign(key, n);
  return 0;
}

int CheckValueSize(size_t size) {
  return (size == 0 || size > MOONCAKE_STORE_MAX_VALUE_SIZE) ? kInvalidParams : 0;
}

// Copies count "host:port" names: -1 for a NULL list or name, -600 for too many or too long.
int CopySegments(const char* const* names, size_t count, std::vector<std::string>* out) {
  if (count > 0 && names == nullptr) return kInternal;
  // More names than a frame may list would cost the connection (docs/protocol.md).
  if (count > mooncake::uds::kMaxBatch) return kInvalidParams;
  for (size_t i = 0; i < count; ++i) {
    if (names[i] == nullptr) return kInternal;
    if (std::strlen(names[i]) > MOONCAKE_STORE_MAX_KEY_LEN) {
      return kInvalidParams;  // no "host:port" is that long
    }
    out->emplace_back(names[i]);
  }
  return 0;
}

// The wire config of a put: *config (NULL: the defaults) and the handle's offload choice,
// which the C struct predates (mooncake_store_set_ssd_offload).
int CheckConfig(const StoreClient* client, const mooncake_replicate_config_t* config,
                mooncake::uds::WireConfig* out) {
  *out = mooncake::uds::WireConfig();
  out->offload = client->ssd_offload();
  if (config == nullptr) return 0;
  if (config->replica_num == 0) return kInvalidParams;
  out->replica_num = config->replica_num;
  // The older struct's flag: a put pins or it does not (an upsert drops the old pin).
  out->soft_pin_action = config->with_soft_pin != 0 ? MOONCAKE_SOFT_PIN_ENABLE
                                                    : MOONCAKE_SOFT_PIN_DISABLE;
  out->with_hard_pin = config->with_hard_pin != 0;
  return CopySegments(config->preferred_segments, config->preferred_segments_count,
                      &out->preferred_segments);
}

// The fields of a mooncake_put_config_t the caller's struct_size covers, over the defaults.
// -600 for a size outside [MOONCAKE_PUT_CONFIG_SIZE_V1, MOONCAKE_PUT_CONFIG_MAX_SIZE], -1012
// when the bytes past this library's struct are not all zero (fields of a later version).
int ReadPutConfig(const mooncake_put_config_t* config, mooncake_put_config_t* out) {
  mooncake_store_put_config_init(out);
  if (config == nullptr) return 0;
  const size_t size = config->struct_size;
  if (size < MOONCAKE_PUT_CONFIG_SIZE_V1 || size > MOONCAKE_PUT_CONFIG_MAX_SIZE) {
    MC_LOG_WARN("put config struct_size %zu outside [%zu, %d]", size,
                static_cast<size_t>(MOONCAKE_PUT_CONFIG_SIZE_V1), MOONCAKE_PUT_CONFIG_MAX_SIZE);
    return kInvalidParams;
  }
  const size_t known = std::min(size, sizeof(mooncake_put_config_t));
  std::memcpy(out, config, known);
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(config) + known;
  for (size_t i = 0; i < size - known; ++i) {
    if (tail[i] != 0) {
      MC_LOG_WARN("put config sets fields of a newer library (struct_size %zu)", size);
      return ToAbi(ErrorCode::NOT_SUPPORTED);
    }
  }
  out->struct_size = sizeof(mooncake_put_config_t);
  return 0;
}

// A feature of Mooncake's config this store does not have: refused, never ignored.
int Unsupported(const char* field) {
  MC_LOG_WARN("put config: %s is not supported by this store (docs/mooncake-api.md)", field);
  return ToAbi(ErrorCode::NOT_SUPPORTED);
}

// The wire config of a put with a mooncake_put_config_t (NULL: the defaults).
int CheckPutConfig(const StoreClient* client, const mooncake_put_config_t* given,
                   mooncake::uds::WireConfig* out) {
  *out = mooncake::uds::WireConfig();
  out->offload = client->ssd_offload();
  mooncake_put_config_t c;
  int rc = ReadPutConfig(given, &c);
  if (rc != 0) return rc;
  if (c.replica_num == 0 || c.replica_num > 64) return kInvalidParams;
  if (c.soft_pin_action < MOONCAKE_SOFT_PIN_PRESERVE ||
      c.soft_pin_action > MOONCAKE_SOFT_PIN_DISABLE) {
    return kInvalidParams;
  }
  // Mooncake's rule: a TTL goes with ENABLE only. The master checks it against its maximum.
  if (c.has_soft_pin_ttl != 0 && c.soft_pin_action != MOONCAKE_SOFT_PIN_ENABLE) {
    return kInvalidParams;
  }
  if (c.soft_pin_ttl_ms > static_cast<uint64_t>(INT64_MAX)) return kInvalidParams;
  if (c.data_type < 0 || c.data_type > 9) return kInvalidParams;
  if (c.nof_replica_num != 0) return Unsupported("nof_replica_num");
  if (c.dfs_replica_num != 0) return Unsupported("dfs_replica_num");
  if (c.preferred_nof_segments_count != 0) return Unsupported("preferred_nof_segments");
  if (c.host_id != nullptr && c.host_id[0] != '\0') return Unsupported("host_id");
  if (c.group_ids_count > 0 && c.group_ids == nullptr) return kInternal;
  for (size_t i = 0; i < c.group_ids_count; ++i) {
    if (c.group_ids[i] == nullptr) return kInternal;
    if (c.group_ids[i][0] != '\0') return Unsupported("group_ids");
  }
  out->replica_num = c.replica_num;
  out->soft_pin_action = static_cast<uint64_t>(c.soft_pin_action);
  out->soft_pin_ttl_given = c.has_soft_pin_ttl != 0;
  out->soft_pin_ttl_ms = out->soft_pin_ttl_given ? c.soft_pin_ttl_ms : 0;
  out->with_hard_pin = c.with_hard_pin != 0;
  out->prefer_local = c.prefer_alloc_in_same_node != 0;
  if (c.preferred_segments_count == 0 && c.preferred_segment != nullptr &&
      c.preferred_segment[0] != '\0') {
    const char* one[] = {c.preferred_segment};
    return CopySegments(one, 1, &out->preferred_segments);
  }
  return CopySegments(c.preferred_segments, c.preferred_segments_count,
                      &out->preferred_segments);
}

// The wire config of either struct.
int CheckAnyConfig(const StoreClient* client, const mooncake_replicate_config_t* config,
                   mooncake::uds::WireConfig* out) {
  return CheckConfig(client, config, out);
}
int CheckAnyConfig(const StoreClient* client, const mooncake_put_config_t* config,
                   mooncake::uds::WireConfig* out) {
  return CheckPutConfig(client, config, out);
}

// The checks every put shares; 0 when the put may go ahead.
template <typename Config>
int CheckPut(StoreClient* client, const char* key, const void* value, size_t size,
             const Config* config, std::string* key_out, mooncake::uds::WireConfig* config_out) {
  if (value == nullptr) return kInternal;
  int rc = CheckKey(key, key_out);
  if (rc != 0) return rc;
  rc = CheckAnyConfig(client, config, config_out);
  if (rc != 0) return rc;
  rc = CheckValueSize(size);
  if (rc != 0) return rc;
  return ToAbi(client->CheckRegistered(value, size));
}

// mooncake_store_put and mooncake_store_upsert_from (and their _ex forms), which differ
// only in upsert.
template <typename Config>
int PutOrUpsert(mooncake_store_t store, const char* key, const void* value, size_t size,
                const Config* config, bool upsert) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    std::string k;
    mooncake::uds::WireConfig c;
    int rc = CheckPut(AsClient(store), key, value, size, config, &k, &c);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->Put(k, value, size, c, upsert));
  });
}

// What the batch put and get entry points share: the NULL checks, then check(client, i,
// &key) for each entry (0, or its code, which is its result at once), then run(client,
// items) for the entries that passed. 0 once the entries have their results, or -1.
template <typename Item, typename Out, typename Check, typename Run>
int BatchCall(mooncake_store_t store, const char** keys, void** buffers, const size_t* sizes,
              size_t count, Out* results_out, Check check, Run run) {
  if (store == nullptr) return kInternal;
  if (count == 0) return 0;
  if (keys == nullptr || buffers == nullptr || sizes == nullptr || results_out == nullptr) {
    return kInternal;
  }
  return Guard(kInternal, [&] {
    StoreClient* client = AsClient(store);
    std::vector<Item> items;
    std::vector<size_t> where;  // the entry of each item
    items.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      std::string k;
      int rc = check(client, i, &k);
      if (rc != 0) {
        results_out[i] = rc;
        continue;
      }
      // A char* fits both PutItem::data (const char*) and GetItem::buffer.
      items.push_back({std::move(k), static_cast<char*>(buffers[i]), sizes[i]});
      where.push_back(i);
    }
    if (!items.empty()) run(client, items);
    for (size_t j = 0; j < items.size(); ++j) results_out[where[j]] = ToAbi(items[j].result);
    return 0;
  });
}

// What the batch calls on keys alone share: the NULL checks, each key checked (a bad one
// gets its code in results_out at once), then run(client, valid_keys, &results) for the
// rest, whose results land where their keys came from. 0, or -1.
template <typename Result, typename Run>
int KeysCall(mooncake_store_t store, const char** keys, size_t count, int* results_out,
             Run run) {
  if (store == nullptr) return kInternal;
  if (count == 0) return 0;
  if (keys == nullptr || results_out == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    std::vector<std::string> valid;
    std::vector<size_t> where;
    valid.reserve(count);
    where.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      std::string k;
      int rc = CheckKey(keys[i], &k);
      if (rc != 0) {
        results_out[i] = rc;
        continue;
      }
      valid.push_back(std::move(k));
      where.push_back(i);
    }
    if (!valid.empty()) {
      std::vector<Result> results;
      run(AsClient(store), valid, &results);
      for (size_t j = 0; j < where.size(); ++j) results_out[where[j]] = ToAbi(results[j]);
    }
    return 0;
  });
}

}  // namespace

// ---- lifecycle ------------------------------------------------------------------------

MC_EXPORT mooncake_store_t mooncake_store_create(void) {
  return Guard<mooncake_store_t>(nullptr, [] { return new (std::nothrow) StoreClient(); });
}

MC_EXPORT void mooncake_store_destroy(mooncake_store_t store) {
  Guard<int>(0, [&] {
    delete AsClient(store);
    return 0;
  });
}

MC_EXPORT int mooncake_store_set_tenant(mooncake_store_t store, const char* tenant_id) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    // NULL names none, as "" does; an over-long id is refused without reading past what
    // could be one.
    std::string tenant;
    if (tenant_id != nullptr) {
      tenant.assign(tenant_id, strnlen(tenant_id, mooncake::tenant_key::kMaxTenantLen + 1));
    }
    return ToAbi(AsClient(store)->SetTenant(tenant));
  });
}

MC_EXPORT int mooncake_store_connect(mooncake_store_t store, const char* socket_path,
                                     uint64_t local_buffer_size) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    return ToAbi(AsClient(store)->Connect(SocketPath(socket_path), local_buffer_size, "", 0));
  });
}

MC_EXPORT int mooncake_store_setup(mooncake_store_t store, const char* local_hostname,
                                   const char* metadata_server, uint64_t global_segment_size,
                                   uint64_t local_buffer_size, const char* protocol,
                                   const char* device_name, const char* master_server_addr) {
  (void)local_hostname;  // accepted for compatibility: the daemon advertises its own host,
  (void)metadata_server;  // keeps its own metadata and chooses the transports
  (void)protocol;
  (void)device_name;
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    return ToAbi(AsClient(store)->Connect(SocketPath(nullptr), local_buffer_size,
                                          master_server_addr ? master_server_addr : "",
                                          global_segment_size));
  });
}

MC_EXPORT int mooncake_store_close(mooncake_store_t store) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] { return ToAbi(AsClient(store)->Close()); });
}

MC_EXPORT int mooncake_store_health_check(mooncake_store_t store) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] { return AsClient(store)->HealthCheck(); });
}

MC_EXPORT int mooncake_store_get_hostname(mooncake_store_t store, char* buf_out,
                                          size_t buf_len) {
  if (store == nullptr || buf_out == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    std::string hostname;
    ErrorCode rc = AsClient(store)->GetHostname(&hostname);
    if (rc != ErrorCode::OK) return ToAbi(rc);
    if (hostname.size() + 1 > buf_len) return kInvalidParams;
    std::memcpy(buf_out, hostname.c_str(), hostname.size() + 1);
    return 0;
  });
}

// ---- shared memory --------------------------------------------------------------------

MC_EXPORT void* mooncake_store_alloc(mooncake_store_t store, size_t size) {
  if (store == nullptr) return nullptr;
  return Guard<void*>(nullptr, [&] { return AsClient(store)->Alloc(size); });
}

MC_EXPORT void mooncake_store_free(mooncake_store_t store, void* ptr) {
  if (store == nullptr || ptr == nullptr) return;
  Guard<int>(0, [&] {
    AsClient(store)->Free(ptr);
    return 0;
  });
}

MC_EXPORT int mooncake_store_register_buffer(mooncake_store_t store, void* buffer,
                                             size_t size) {
  if (store == nullptr || buffer == nullptr) return kInternal;
  return Guard(kInternal, [&] { return ToAbi(AsClient(store)->RegisterBuffer(buffer, size)); });
}

MC_EXPORT int mooncake_store_unregister_buffer(mooncake_store_t store, void* buffer) {
  if (store == nullptr || buffer == nullptr) return kInternal;
  return Guard(kInternal, [&] { return ToAbi(AsClient(store)->UnregisterBuffer(buffer)); });
}

// ---- put ------------------------------------------------------------------------------

MC_EXPORT int mooncake_store_put(mooncake_store_t store, const char* key, const void* value,
                                 size_t size, const mooncake_replicate_config_t* config) {
  return PutOrUpsert(store, key, value, size, config, false);
}

MC_EXPORT int mooncake_store_put_from(mooncake_store_t store, const char* key, void* buffer,
                                      size_t size, const mooncake_replicate_config_t* config) {
  return mooncake_store_put(store, key, buffer, size, config);
}

MC_EXPORT int mooncake_store_upsert_from(mooncake_store_t store, const char* key, void* buffer,
                                         size_t size,
                                         const mooncake_replicate_config_t* config) {
  return PutOrUpsert(store, key, buffer, size, config, true);
}

namespace {

// The batch put entry points: batch_put_from (upsert false) and batch_upsert_from, with
// either config struct.
template <typename Config>
int BatchPutOrUpsert(mooncake_store_t store, const char** keys, void** buffers,
                     const size_t* sizes, size_t count, const Config* config, int* results_out,
                     bool upsert) {
  mooncake::uds::WireConfig c;
  int config_rc = 0;
  return BatchCall<StoreClient::PutItem>(
      store, keys, buffers, sizes, count, results_out,
      [&](StoreClient* client, size_t i, std::string* k) {
        // The first entry checks the batch's config, inside BatchCall's guard.
        if (i == 0) config_rc = CheckAnyConfig(client, config, &c);
        mooncake::uds::WireConfig unused;  // the batch's config is c
        if (config_rc != 0) return config_rc;
        return CheckPut<mooncake_replicate_config_t>(client, keys[i], buffers[i], sizes[i],
                                                     nullptr, k, &unused);
      },
      [&](StoreClient* client, std::vector<StoreClient::PutItem>& items) {
        client->BatchPut(items, c, upsert);
      });
}

}  // namespace

MC_EXPORT int mooncake_store_batch_put_from(mooncake_store_t store, const char** keys,
                                            void** buffers, const size_t* sizes, size_t count,
                                            const mooncake_replicate_config_t* config,
                                            int* results_out) {
  return BatchPutOrUpsert(store, keys, buffers, sizes, count, config, results_out, false);
}

// ---- put configuration, version 4 ----------------------------------------------------

MC_EXPORT int mooncake_store_put_config_init(mooncake_put_config_t* config) {
  if (config == nullptr) return kInternal;
  std::memset(config, 0, sizeof(*config));
  config->struct_size = sizeof(*config);
  config->replica_num = 1;
  config->soft_pin_action = MOONCAKE_SOFT_PIN_PRESERVE;
  return 0;
}

MC_EXPORT int mooncake_store_put_ex(mooncake_store_t store, const char* key, const void* value,
                                    size_t size, const mooncake_put_config_t* config) {
  return PutOrUpsert(store, key, value, size, config, false);
}

MC_EXPORT int mooncake_store_put_from_ex(mooncake_store_t store, const char* key, void* buffer,
                                         size_t size, const mooncake_put_config_t* config) {
  return PutOrUpsert(store, key, buffer, size, config, false);
}

MC_EXPORT int mooncake_store_upsert_from_ex(mooncake_store_t store, const char* key,
                                            void* buffer, size_t size,
                                            const mooncake_put_config_t* config) {
  return PutOrUpsert(store, key, buffer, size, config, true);
}

MC_EXPORT int mooncake_store_batch_put_from_ex(mooncake_store_t store, const char** keys,
                                               void** buffers, const size_t* sizes,
                                               size_t count, const mooncake_put_config_t* config,
                                               int* results_out) {
  return BatchPutOrUpsert(store, keys, buffers, sizes, count, config, results_out, false);
}

MC_EXPORT int mooncake_store_batch_upsert_from(mooncake_store_t store, const char** keys,
                                               void** buffers, const size_t* sizes,
                                               size_t count, const mooncake_put_config_t* config,
                                               int* results_out) {
  return BatchPutOrUpsert(store, keys, buffers, sizes, count, config, results_out, true);
}

// ---- get ------------------------------------------------------------------------------

MC_EXPORT int64_t mooncake_store_get_into(mooncake_store_t store, const char* key,
                                          void* buffer, size_t size) {
  if (store == nullptr || buffer == nullptr) return kInternal;
  return Guard<int64_t>(kInternal, [&]() -> int64_t {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc == 0) rc = ToAbi(AsClient(store)->CheckRegistered(buffer, size));
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->GetInto(k, buffer, size));
  });
}

MC_EXPORT int mooncake_store_batch_get_into(mooncake_store_t store, const char** keys,
                                            void** buffers, const size_t* sizes, size_t count,
                                            int64_t* results_out) {
  return BatchCall<StoreClient::GetItem>(
      store, keys, buffers, sizes, count, results_out,
      [&](StoreClient* client, size_t i, std::string* k) {
        int rc = buffers[i] == nullptr ? kInternal : CheckKey(keys[i], k);
        return rc != 0 ? rc : ToAbi(client->CheckRegistered(buffers[i], sizes[i]));
      },
      [](StoreClient* client, std::vector<StoreClient::GetItem>& items) {
        client->BatchGetInto(items);
      });
}

// ---- query ----------------------------------------------------------------------------

MC_EXPORT int mooncake_store_is_exist(mooncake_store_t store, const char* key) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->IsExist(k));
  });
}

MC_EXPORT int mooncake_store_batch_is_exist(mooncake_store_t store, const char** keys,
                                            size_t count, int* results_out) {
  return KeysCall<Result<bool>>(
      store, keys, count, results_out,
      [](StoreClient* client, const std::vector<std::string>& valid,
         std::vector<Result<bool>>* results) { client->BatchIsExist(valid, results); });
}

MC_EXPORT int64_t mooncake_store_get_size(mooncake_store_t store, const char* key) {
  if (store == nullptr) return kInternal;
  return Guard<int64_t>(kInternal, [&]() -> int64_t {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->GetSize(k));
  });
}

// ---- replicas and the SSD tier ----------------------------------------------------------

namespace {

// Copies replicas into out (room for capacity of them); *count_out gets their number. 0, or
// -600 when they do not fit (nothing is written then) or a location is too long.
int WriteReplicas(const std::vector<mooncake::uds::WireReplica>& replicas,
                  mooncake_replica_desc_t* out, size_t capacity, size_t* count_out) {
  *count_out = replicas.size();
  if (replicas.size() > capacity) return kInvalidParams;
  for (const auto& r : replicas) {
    if (r.location.size() >= MOONCAKE_STORE_LOCATION_SIZE) return kInvalidParams;
  }
  for (size_t i = 0; i < replicas.size(); ++i) {
    const auto& r = replicas[i];
    mooncake_replica_desc_t& d = out[i];
    std::memset(&d, 0, sizeof(d));
    d.kind = static_cast<int>(r.kind);
    d.status = static_cast<int>(r.status);
    d.size = r.size;
    std::memcpy(d.location, r.location.data(), r.location.size());
  }
  return 0;
}

}  // namespace

MC_EXPORT int mooncake_store_get_replica_desc(mooncake_store_t store, const char* key,
                                              mooncake_replica_desc_t* descs_out,
                                              size_t capacity, size_t* count_out) {
  if (store == nullptr || count_out == nullptr || (descs_out == nullptr && capacity > 0)) {
    return kInternal;
  }
  *count_out = 0;
  return Guard(kInternal, [&] {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    std::vector<mooncake::uds::WireReplica> replicas;
    ErrorCode code = AsClient(store)->GetReplicaDesc(k, &replicas);
    if (code != ErrorCode::OK) return ToAbi(code);
    return WriteReplicas(replicas, descs_out, capacity, count_out);
  });
}

MC_EXPORT int mooncake_store_batch_get_replica_desc(mooncake_store_t store, const char** keys,
                                                    size_t count,
                                                    mooncake_replica_desc_t* descs_out,
                                                    size_t capacity_per_key, size_t* counts_out,
                                                    int* results_out) {
  if (store == nullptr) return kInternal;
  if (count == 0) return 0;
  if (keys == nullptr || counts_out == nullptr || results_out == nullptr ||
      (descs_out == nullptr && capacity_per_key > 0)) {
    return kInternal;
  }
  // Key i's room starts at i * capacity_per_key, which must be addressable.
  if (capacity_per_key > 0 && count > SIZE_MAX / sizeof(mooncake_replica_desc_t) / capacity_per_key) {
    return kInvalidParams;
  }
  return Guard(kInternal, [&] {
    std::vector<std::string> valid;
    std::vector<size_t> where;
    for (size_t i = 0; i < count; ++i) {
      counts_out[i] = 0;
      std::string k;
      results_out[i] = CheckKey(keys[i], &k);
      if (results_out[i] != 0) continue;
      valid.push_back(std::move(k));
      where.push_back(i);
    }
    if (valid.empty()) return 0;
    std::vector<ErrorCode> codes;
    std::vector<std::vector<mooncake::uds::WireReplica>> replicas;
    AsClient(store)->BatchGetReplicaDesc(valid, &codes, &replicas);
    for (size_t j = 0; j < where.size(); ++j) {
      size_t i = where[j];
      results_out[i] = codes[j] != ErrorCode::OK
                           ? ToAbi(codes[j])
                           : WriteReplicas(replicas[j], descs_out + i * capacity_per_key,
                                           capacity_per_key, &counts_out[i]);
    }
    return 0;
  });
}

MC_EXPORT int mooncake_store_set_ssd_offload(mooncake_store_t store, int mode) {
  if (store == nullptr) return kInternal;
  if (mode != MOONCAKE_SSD_OFFLOAD_DEFAULT && mode != MOONCAKE_SSD_OFFLOAD_ON &&
      mode != MOONCAKE_SSD_OFFLOAD_OFF) {
    return kInvalidParams;
  }
  // The C modes are the wire's values (uds::WireConfig::offload).
  AsClient(store)->SetSsdOffload(static_cast<uint64_t>(mode));
  return 0;
}

// ---- remove ---------------------------------------------------------------------------

MC_EXPORT int mooncake_store_remove(mooncake_store_t store, const char* key, int force) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->Remove(k, force != 0));
  });
}

MC_EXPORT int mooncake_store_batch_remove(mooncake_store_t store, const char** keys,
                                          size_t count, int force, int* results_out) {
  return KeysCall<ErrorCode>(
      store, keys, count, results_out,
      [force](StoreClient* client, const std::vector<std::string>& valid,
              std::vector<ErrorCode>* results) { client->BatchRemove(valid, force != 0, results); });
}

MC_EXPORT int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char* pattern,
                                                 int force) {
  if (store == nullptr || pattern == nullptr) return kInternal;
  return Guard<int64_t>(kInternal,
                        [&] { return ToAbi(AsClient(store)->RemoveByRegex(pattern, force != 0)); });
}

MC_EXPORT int64_t mooncake_store_remove_all(mooncake_store_t store, int force) {
  if (store == nullptr) return kInternal;
  return Guard<int64_t>(kInternal, [&] { return ToAbi(AsClient(store)->RemoveAll(force != 0)); });
}

// ---- segments and replica clearing ---------------------------------------------------

MC_EXPORT int mooncake_store_batch_replica_clear(mooncake_store_t store, const char** keys,
                                                 size_t count, const char* segment_name,
                                                 int* results_out) {
  if (store == nullptr) return kInternal;
  std::string name;
  if (segment_name != nullptr) {
    size_t n = strnlen(segment_name, MOONCAKE_STORE_LOCATION_SIZE);
    if (n >= MOONCAKE_STORE_LOCATION_SIZE) return kInvalidParams;  // no "host:port" is
    name.assign(segment_name, n);
  }
  return KeysCall<ErrorCode>(
      store, keys, count, results_out,
      [&name](StoreClient* client, const std::vector<std::string>& valid,
              std::vector<ErrorCode>* results) {
        client->BatchReplicaClear(valid, name, results);
      });
}

MC_EXPORT int mooncake_store_mount_segment(mooncake_store_t store, void* buffer, uint64_t size,
                                           uint64_t* segment_id_out) {
  if (store == nullptr || buffer == nullptr || segment_id_out == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    return ToAbi(AsClient(store)->MountPoolSegment(buffer, size, segment_id_out));
  });
}

MC_EXPORT int mooncake_store_allocate_and_mount_segment(mooncake_store_t store, uint64_t size,
                                                        uint64_t* segment_id_out,
                                                        uint64_t* allocated_size_out) {
  if (store == nullptr || segment_id_out == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    uint64_t allocated = 0;
    int rc = ToAbi(AsClient(store)->AllocateSegment(size, segment_id_out, &allocated));
    if (rc == 0 && allocated_size_out != nullptr) *allocated_size_out = allocated;
    return rc;
  });
}

MC_EXPORT int mooncake_store_unmount_segment(mooncake_store_t store, uint64_t segment_id,
                                             uint64_t* moved_out, uint64_t* dropped_out) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    mooncake::uds::UnmountSegmentsReply drained;
    int rc = ToAbi(AsClient(store)->UnmountSegment(segment_id, &drained));
    if (rc != 0) return rc;
    if (moved_out != nullptr) *moved_out = drained.moved;
    if (dropped_out != nullptr) *dropped_out = drained.dropped;
    return 0;
  });
}

MC_EXPORT int mooncake_store_unmount_local_disk_segment(mooncake_store_t store) {
  if (store == nullptr) return kInternal;
  return Guard(kInternal, [&] { return ToAbi(AsClient(store)->UnmountLocalDiskSegment()); });
}

// ---- utilities ------------------------------------------------------------------------

MC_EXPORT int mooncake_store_parse_size(const char* text, uint64_t* out) {
  if (text == nullptr || out == nullptr) return kInternal;
  return Guard(kInternal, [&] {
    uint64_t bytes = 0;
    if (!mooncake::ParseSize(text, &bytes)) return kInvalidParams;
    *out = bytes;
    return 0;
  });
}

// ---- ranged reads -----------------------------------------------------------------------

namespace {

// A get's checks before it is sent: 0, or the code every fragment (and the get) answers.
int CheckRangedGet(StoreClient* client, const mooncake_ranged_get_t& g, std::string* key) {
  if (g.range_count == 0) return 0;
  if (g.buffer == nullptr || g.ranges == nullptr || g.results_out == nullptr) return kInternal;
  int rc = CheckKey(g.key, key);
  if (rc != 0) return rc;
  return ToAbi(client->CheckRegistered(g.buffer, g.buffer_size));
}

// What get_ranges returns for a get whose fragments have their results.
int64_t RangedGetResult(const int64_t* results, size_t count) {
  int64_t total = 0;
  for (size_t k = 0; k < count; ++k) {
    if (results[k] < 0) return results[k];
    total += results[k];
  }
  return total;
}

// Runs count gets: results_out[i] as get_ranges returns it for gets[i]. -1 for a NULL
// argument of the call itself.
int RangedGets(mooncake_store_t store, const mooncake_ranged_get_t* gets, size_t count,
               int64_t* results_out) {
  StoreClient* client = AsClient(store);
  std::vector<StoreClient::RangeGet> items;
  std::vector<size_t> where;  // the get of each item
  for (size_t i = 0; i < count; ++i) {
    const mooncake_ranged_get_t& g = gets[i];
    std::string k;
    int rc = CheckRangedGet(client, g, &k);
    if (rc != 0 || g.range_count == 0) {
      for (size_t r = 0; rc != kInternal && r < g.range_count; ++r) g.results_out[r] = rc;
      results_out[i] = rc;
      continue;
    }
    StoreClient::RangeGet item{std::move(k), static_cast<char*>(g.buffer), g.buffer_size, {}};
    item.ranges.reserve(g.range_count);
    for (size_t r = 0; r < g.range_count; ++r) {
      item.ranges.push_back({g.ranges[r].src_offset, g.ranges[r].length, g.ranges[r].dst_offset});
    }
    items.push_back(std::move(item));
    where.push_back(i);
  }
  if (!items.empty()) client->BatchGetRanges(items);
  for (size_t j = 0; j < items.size(); ++j) {
    const mooncake_ranged_get_t& g = gets[where[j]];
    for (size_t r = 0; r < g.range_count; ++r) g.results_out[r] = ToAbi(items[j].ranges[r].result);
    results_out[where[j]] = RangedGetResult(g.results_out, g.range_count);
  }
  return 0;
}

}  // namespace

MC_EXPORT int64_t mooncake_store_get_ranges(mooncake_store_t store, const char* key,
                                            void* buffer, size_t buffer_size,
                                            const mooncake_range_t* ranges, size_t range_count,
                                            int64_t* results_out) {
  if (store == nullptr) return kInternal;
  return Guard<int64_t>(kInternal, [&]() -> int64_t {
    mooncake_ranged_get_t get{key, buffer, buffer_size, ranges, range_count, results_out};
    int64_t result = 0;
    RangedGets(store, &get, 1, &result);
    return result;
  });
}

MC_EXPORT int mooncake_store_batch_get_ranges(mooncake_store_t store,
                                              const mooncake_ranged_get_t* gets, size_t count,
                                              int64_t* results_out) {
  if (store == nullptr) return kInternal;
  if (count == 0) return 0;
  if (gets == nullptr || results_out == nullptr) return kInternal;
  return Guard(kInternal, [&] { return RangedGets(store, gets, count, results_out); });
}
