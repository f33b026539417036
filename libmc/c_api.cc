// The extern "C" surface of include/mooncake_store.h: argument checks (libmc/api_checks.h:
// NULL -> -1, limits -> -600), conversion to C++ types, and every call framed by Api
// (libmc/c_api_call.h: the ABI's integers, no exception across the ABI, the message
// mooncake_store_errmsg() returns and the call's log line). Everything else lives in
// StoreClient; the put sessions' calls are in c_api_sessions.cc, the copy and move tasks'
// in c_api_tasks.cc, the tensor layout's in c_api_tensor.cc. Only functions marked
// MC_EXPORT (and mooncake_store_strerror, from
// common/base/error_code.cc) leave the library; see libmooncake_store.map.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "common/base/units.h"
#include "include/mooncake_store.h"
#include "libmc/api_checks.h"
#include "libmc/c_api_call.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

using mooncake::ErrorCode;
using mooncake::Result;
using mooncake::client::CheckAnyConfig;
using mooncake::client::CheckKey;
using mooncake::client::CheckPut;
using mooncake::client::kInternal;
using mooncake::client::kInvalidParams;
using mooncake::client::MemoryPlace;
using mooncake::client::NullArgument;
using mooncake::client::Refuse;
using mooncake::client::StoreClient;
using mooncake::client::abi::Api;
using mooncake::client::abi::AsClient;
using mooncake::client::abi::Finish;
using mooncake::client::abi::Kind;
using mooncake::client::abi::ToAbi;

namespace {

constexpr const char* kDefaultSocket = "/run/mooncake/mooncaked.sock";

std::string SocketPath(const char* socket_path) {
  if (socket_path != nullptr && socket_path[0] != '\0') return socket_path;
  const char* env = std::getenv("MOONCAKE_SOCKET");
  if (env != nullptr && env[0] != '\0') return env;
  return kDefaultSocket;
}

// mooncake_store_put and mooncake_store_upsert_from (and their _ex forms), which differ
// only in upsert.
template <typename Config>
int PutOrUpsert(const char* function, mooncake_store_t store, const char* key,
                const void* value, size_t size, const Config* config, bool upsert) {
  return Api<int>(function, store, Kind::kData, [&] {
    std::string k;
    mooncake::uds::WireConfig c;
    MemoryPlace place;
    int rc = CheckPut(AsClient(store), key, value, size, config, &k, &c, &place);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->Put(k, value, size, c, upsert, place));
  });
}

// What the batch put and get entry points share: the NULL checks, then check(client, i,
// &key, &place) for each entry (0, or its code, which is its result at once; the first
// such entry is the call's message), then run(client, items) for the entries that passed.
// 0 once the entries have their results, or -1.
template <typename Item, typename Out, typename Check, typename Run>
int BatchCall(const char* function, mooncake_store_t store, const char** keys, void** buffers,
              const size_t* sizes, size_t count, Out* results_out, Check check, Run run) {
  return Api<int>(function, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (keys == nullptr) return NullArgument("keys");
    if (buffers == nullptr) return NullArgument("buffers");
    if (sizes == nullptr) return NullArgument("sizes");
    if (results_out == nullptr) return NullArgument("results_out");
    StoreClient* client = AsClient(store);
    std::vector<Item> items;
    std::vector<size_t> where;  // the entry of each item
    items.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      std::string k;
      MemoryPlace place;
      int rc = check(client, i, &k, &place);
      if (rc != 0) {
        results_out[i] = rc;
        mooncake::client::NoteEntry(i, rc);
        continue;
      }
      // A char* fits both PutItem::data (const char*) and GetItem::buffer.
      items.push_back({std::move(k), static_cast<char*>(buffers[i]), sizes[i], place});
      where.push_back(i);
    }
    if (!items.empty()) run(client, items);
    for (size_t j = 0; j < items.size(); ++j) results_out[where[j]] = ToAbi(items[j].result);
    return 0;
  });
}

// What the batch calls on keys alone share: the NULL checks, each key checked (a bad one
// gets its code in results_out at once, and the first is the call's message), then
// run(client, valid_keys, &results) for the rest, whose results land where their keys came
// from. 0, or -1.
template <typename Result, typename Run>
int KeysCall(const char* function, mooncake_store_t store, const char** keys, size_t count,
             int* results_out, Run run) {
  return Api<int>(function, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (keys == nullptr) return NullArgument("keys");
    if (results_out == nullptr) return NullArgument("results_out");
    std::vector<std::string> valid;
    std::vector<size_t> where;
    valid.reserve(count);
    where.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      std::string k;
      int rc = CheckKey(keys[i], &k);
      if (rc != 0) {
        results_out[i] = rc;
        mooncake::client::NoteEntry(i, rc);
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
  try {
    return new (std::nothrow) StoreClient();
  } catch (...) {  // a std::thread or mutex that could not be made
    return nullptr;
  }
}

MC_EXPORT void mooncake_store_destroy(mooncake_store_t store) {
  try {
    delete AsClient(store);
  } catch (...) {
  }
}

MC_EXPORT const char* mooncake_store_errmsg(mooncake_store_t store) {
  return mooncake::client::LastMessage(store != nullptr ? AsClient(store)->serial() : 0);
}

MC_EXPORT int mooncake_store_set_tenant(mooncake_store_t store, const char* tenant_id) {
  return Api<int>(__func__, store, Kind::kData, [&] {
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
  return Api<int>(__func__, store, Kind::kSetup, [&] {
    return ToAbi(AsClient(store)->Connect(SocketPath(socket_path), local_buffer_size, "", 0));
  });
}

MC_EXPORT int mooncake_store_setup(mooncake_store_t store, const char* local_hostname,
                                   const char* metadata_server, uint64_t global_segment_size,
                                   uint64_t local_buffer_size, const char* protocol,
                                   const char* device_name, const char* master_server_addr) {
  (void)metadata_server;  // accepted for compatibility: the daemon keeps its own metadata
  (void)protocol;         // and chooses the transports
  (void)device_name;
  return Api<int>(__func__, store, Kind::kSetup, [&] {
    return ToAbi(AsClient(store)->Connect(SocketPath(nullptr), local_buffer_size,
                                          master_server_addr ? master_server_addr : "",
                                          global_segment_size,
                                          local_hostname ? local_hostname : ""));
  });
}

MC_EXPORT int mooncake_store_close(mooncake_store_t store) {
  return Api<int>(__func__, store, Kind::kData, [&] { return ToAbi(AsClient(store)->Close()); });
}

MC_EXPORT int mooncake_store_health_check(mooncake_store_t store) {
  return Api<int>(__func__, store, Kind::kData, [&] { return AsClient(store)->HealthCheck(); });
}

MC_EXPORT int mooncake_store_get_hostname(mooncake_store_t store, char* buf_out,
                                          size_t buf_len) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (buf_out == nullptr) return NullArgument("buf_out");
    std::string hostname;
    ErrorCode rc = AsClient(store)->GetHostname(&hostname);
    if (rc != ErrorCode::OK) return ToAbi(rc);
    if (hostname.size() + 1 > buf_len) {
      return Refuse(kInvalidParams, "buf_len " + std::to_string(buf_len) + " is too small: \"" +
                                        hostname + "\" needs " +
                                        std::to_string(hostname.size() + 1));
    }
    std::memcpy(buf_out, hostname.c_str(), hostname.size() + 1);
    return 0;
  });
}

// ---- shared memory --------------------------------------------------------------------

MC_EXPORT void* mooncake_store_alloc(mooncake_store_t store, size_t size) {
  void* p = nullptr;
  // The call's result for its message: 0, or the code of why there is no memory.
  Api<int>(__func__, store, Kind::kData, [&] {
    p = AsClient(store)->Alloc(size);
    if (p != nullptr) return 0;
    ErrorCode why = mooncake::client::ExplainedCode();
    return ToAbi(why != ErrorCode::OK ? why : ErrorCode::NO_AVAILABLE_HANDLE);
  });
  return p;
}

MC_EXPORT void mooncake_store_free(mooncake_store_t store, void* ptr) {
  if (store == nullptr || ptr == nullptr) return;
  try {
    AsClient(store)->Free(ptr);
  } catch (...) {
  }
}

MC_EXPORT int mooncake_store_register_buffer(mooncake_store_t store, void* buffer,
                                             size_t size) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (buffer == nullptr) return NullArgument("buffer");
    return ToAbi(AsClient(store)->RegisterBuffer(buffer, size));
  });
}

MC_EXPORT int mooncake_store_unregister_buffer(mooncake_store_t store, void* buffer) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (buffer == nullptr) return NullArgument("buffer");
    return ToAbi(AsClient(store)->UnregisterBuffer(buffer));
  });
}

// ---- put ------------------------------------------------------------------------------

MC_EXPORT int mooncake_store_put(mooncake_store_t store, const char* key, const void* value,
                                 size_t size, const mooncake_replicate_config_t* config) {
  return PutOrUpsert(__func__, store, key, value, size, config, false);
}

MC_EXPORT int mooncake_store_put_from(mooncake_store_t store, const char* key, void* buffer,
                                      size_t size, const mooncake_replicate_config_t* config) {
  return PutOrUpsert(__func__, store, key, buffer, size, config, false);
}

MC_EXPORT int mooncake_store_upsert_from(mooncake_store_t store, const char* key, void* buffer,
                                         size_t size,
                                         const mooncake_replicate_config_t* config) {
  return PutOrUpsert(__func__, store, key, buffer, size, config, true);
}

namespace {

// A batch's config: the older struct has no group ids.
int CheckBatchConfig(const StoreClient* client, const mooncake_replicate_config_t* config,
                     size_t, mooncake::uds::WireConfig* out, std::vector<std::string>*) {
  return CheckAnyConfig(client, config, out);
}
int CheckBatchConfig(const StoreClient* client, const mooncake_put_config_t* config,
                     size_t count, mooncake::uds::WireConfig* out,
                     std::vector<std::string>* groups) {
  return CheckAnyConfig(client, config, out, count, groups);
}

// The batch put entry points: batch_put_from (upsert false) and batch_upsert_from, with
// either config struct.
template <typename Config>
int BatchPutOrUpsert(const char* function, mooncake_store_t store, const char** keys,
                     void** buffers, const size_t* sizes, size_t count, const Config* config,
                     int* results_out, bool upsert) {
  mooncake::uds::WireConfig c;
  std::vector<std::string> groups;  // one per entry, when the config names them
  std::vector<size_t> passed;       // the entries that became items, in order
  int config_rc = 0;
  return BatchCall<StoreClient::PutItem>(
      function, store, keys, buffers, sizes, count, results_out,
      [&](StoreClient* client, size_t i, std::string* k, MemoryPlace* place) {
        // The first entry checks the batch's config, inside the call's guard.
        if (i == 0) config_rc = CheckBatchConfig(client, config, count, &c, &groups);
        mooncake::uds::WireConfig unused;  // the batch's config is c
        if (config_rc != 0) return config_rc;  // every entry's: the call's message says why
        int rc = CheckPut<mooncake_replicate_config_t>(client, keys[i], buffers[i], sizes[i],
                                                       nullptr, k, &unused, place);
        if (rc == 0) passed.push_back(i);
        return rc;
      },
      [&](StoreClient* client, std::vector<StoreClient::PutItem>& items) {
        // Each entry's group id goes with it.
        for (size_t j = 0; j < items.size() && !groups.empty(); ++j) {
          items[j].group = std::move(groups[passed[j]]);
        }
        client->BatchPut(items, c, upsert);
      });
}

}  // namespace

MC_EXPORT int mooncake_store_batch_put_from(mooncake_store_t store, const char** keys,
                                            void** buffers, const size_t* sizes, size_t count,
                                            const mooncake_replicate_config_t* config,
                                            int* results_out) {
  return BatchPutOrUpsert(__func__, store, keys, buffers, sizes, count, config, results_out,
                          false);
}

// ---- put configuration, version 4 ----------------------------------------------------

MC_EXPORT int mooncake_store_put_config_init(mooncake_put_config_t* config) {
  if (config == nullptr) return kInternal;
  mooncake::client::PutConfigDefaults(config);
  return 0;
}

MC_EXPORT int mooncake_store_put_ex(mooncake_store_t store, const char* key, const void* value,
                                    size_t size, const mooncake_put_config_t* config) {
  return PutOrUpsert(__func__, store, key, value, size, config, false);
}

MC_EXPORT int mooncake_store_put_from_ex(mooncake_store_t store, const char* key, void* buffer,
                                         size_t size, const mooncake_put_config_t* config) {
  return PutOrUpsert(__func__, store, key, buffer, size, config, false);
}

MC_EXPORT int mooncake_store_upsert_from_ex(mooncake_store_t store, const char* key,
                                            void* buffer, size_t size,
                                            const mooncake_put_config_t* config) {
  return PutOrUpsert(__func__, store, key, buffer, size, config, true);
}

MC_EXPORT int mooncake_store_batch_put_from_ex(mooncake_store_t store, const char** keys,
                                               void** buffers, const size_t* sizes,
                                               size_t count, const mooncake_put_config_t* config,
                                               int* results_out) {
  return BatchPutOrUpsert(__func__, store, keys, buffers, sizes, count, config, results_out,
                          false);
}

MC_EXPORT int mooncake_store_batch_upsert_from(mooncake_store_t store, const char** keys,
                                               void** buffers, const size_t* sizes,
                                               size_t count, const mooncake_put_config_t* config,
                                               int* results_out) {
  return BatchPutOrUpsert(__func__, store, keys, buffers, sizes, count, config, results_out,
                          true);
}

// ---- get ------------------------------------------------------------------------------

MC_EXPORT int64_t mooncake_store_get_into(mooncake_store_t store, const char* key,
                                          void* buffer, size_t size) {
  return Api<int64_t>(__func__, store, Kind::kData, [&]() -> int64_t {
    if (buffer == nullptr) return NullArgument("buffer");
    std::string k;
    MemoryPlace place;
    int rc = CheckKey(key, &k);
    if (rc == 0) rc = ToAbi(AsClient(store)->CheckBuffer(buffer, size, true, &place));
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->GetInto(k, buffer, size, place));
  });
}

MC_EXPORT int mooncake_store_batch_get_into(mooncake_store_t store, const char** keys,
                                            void** buffers, const size_t* sizes, size_t count,
                                            int64_t* results_out) {
  return BatchCall<StoreClient::GetItem>(
      __func__, store, keys, buffers, sizes, count, results_out,
      [&](StoreClient* client, size_t i, std::string* k, MemoryPlace* place) {
        int rc = buffers[i] == nullptr ? NullArgument("buffer") : CheckKey(keys[i], k);
        return rc != 0 ? rc : ToAbi(client->CheckBuffer(buffers[i], sizes[i], true, place));
      },
      [](StoreClient* client, std::vector<StoreClient::GetItem>& items) {
        client->BatchGetInto(items);
      });
}

// ---- query ----------------------------------------------------------------------------

MC_EXPORT int mooncake_store_is_exist(mooncake_store_t store, const char* key) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->IsExist(k));
  });
}

MC_EXPORT int mooncake_store_batch_is_exist(mooncake_store_t store, const char** keys,
                                            size_t count, int* results_out) {
  return KeysCall<Result<bool>>(
      __func__, store, keys, count, results_out,
      [](StoreClient* client, const std::vector<std::string>& valid,
         std::vector<Result<bool>>* results) { client->BatchIsExist(valid, results); });
}

MC_EXPORT int64_t mooncake_store_get_size(mooncake_store_t store, const char* key) {
  return Api<int64_t>(__func__, store, Kind::kData, [&]() -> int64_t {
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
  if (replicas.size() > capacity) {
    // Also how a caller asks for the count: explained, never logged.
    mooncake::client::Explain(ErrorCode::INVALID_PARAMS,
                              std::to_string(replicas.size()) + " replicas, room for " +
                                  std::to_string(capacity));
    return kInvalidParams;
  }
  for (const auto& r : replicas) {
    if (r.location.size() >= MOONCAKE_STORE_LOCATION_SIZE) {
      mooncake::client::Explain(ErrorCode::INVALID_PARAMS,
                                "a replica's location is longer than " +
                                    std::to_string(MOONCAKE_STORE_LOCATION_SIZE - 1) + " bytes");
      return kInvalidParams;
    }
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
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (count_out == nullptr) return NullArgument("count_out");
    if (descs_out == nullptr && capacity > 0) return NullArgument("descs_out");
    *count_out = 0;
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
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (keys == nullptr) return NullArgument("keys");
    if (counts_out == nullptr) return NullArgument("counts_out");
    if (results_out == nullptr) return NullArgument("results_out");
    if (descs_out == nullptr && capacity_per_key > 0) return NullArgument("descs_out");
    // Key i's room starts at i * capacity_per_key, which must be addressable.
    if (capacity_per_key > 0 &&
        count > SIZE_MAX / sizeof(mooncake_replica_desc_t) / capacity_per_key) {
      return Refuse(kInvalidParams, "count x capacity_per_key descriptors do not fit in memory");
    }
    std::vector<std::string> valid;
    std::vector<size_t> where;
    for (size_t i = 0; i < count; ++i) {
      counts_out[i] = 0;
      std::string k;
      results_out[i] = CheckKey(keys[i], &k);
      if (results_out[i] != 0) {
        mooncake::client::NoteEntry(i, results_out[i]);
        continue;
      }
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
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (mode != MOONCAKE_SSD_OFFLOAD_DEFAULT && mode != MOONCAKE_SSD_OFFLOAD_ON &&
        mode != MOONCAKE_SSD_OFFLOAD_OFF) {
      return Refuse(kInvalidParams, "mode " + std::to_string(mode) +
                                        " is not a MOONCAKE_SSD_OFFLOAD_* value");
    }
    // The C modes are the wire's values (uds::WireConfig::offload).
    AsClient(store)->SetSsdOffload(static_cast<uint64_t>(mode));
    return 0;
  });
}

// ---- remove ---------------------------------------------------------------------------

MC_EXPORT int mooncake_store_remove(mooncake_store_t store, const char* key, int force) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    return ToAbi(AsClient(store)->Remove(k, force != 0));
  });
}

MC_EXPORT int mooncake_store_batch_remove(mooncake_store_t store, const char** keys,
                                          size_t count, int force, int* results_out) {
  return KeysCall<ErrorCode>(
      __func__, store, keys, count, results_out,
      [force](StoreClient* client, const std::vector<std::string>& valid,
              std::vector<ErrorCode>* results) { client->BatchRemove(valid, force != 0, results); });
}

MC_EXPORT int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char* pattern,
                                                 int force) {
  return Api<int64_t>(__func__, store, Kind::kData, [&]() -> int64_t {
    if (pattern == nullptr) return NullArgument("pattern");
    return ToAbi(AsClient(store)->RemoveByRegex(pattern, force != 0));
  });
}

MC_EXPORT int64_t mooncake_store_remove_all(mooncake_store_t store, int force) {
  return Api<int64_t>(__func__, store, Kind::kData,
                      [&] { return ToAbi(AsClient(store)->RemoveAll(force != 0)); });
}

// ---- segments and replica clearing ---------------------------------------------------

MC_EXPORT int mooncake_store_batch_replica_clear(mooncake_store_t store, const char** keys,
                                                 size_t count, const char* segment_name,
                                                 int* results_out) {
  std::string name;
  if (segment_name != nullptr) {
    size_t n = strnlen(segment_name, MOONCAKE_STORE_LOCATION_SIZE);
    if (n >= MOONCAKE_STORE_LOCATION_SIZE) {  // no "host:port" is
      return Api<int>(__func__, store, Kind::kData, [] {
        return Refuse(kInvalidParams, "segment_name is longer than " +
                                          std::to_string(MOONCAKE_STORE_LOCATION_SIZE - 1) +
                                          " bytes: no \"host:port\" is");
      });
    }
    name.assign(segment_name, n);
  }
  return KeysCall<ErrorCode>(
      __func__, store, keys, count, results_out,
      [&name](StoreClient* client, const std::vector<std::string>& valid,
              std::vector<ErrorCode>* results) {
        client->BatchReplicaClear(valid, name, results);
      });
}

MC_EXPORT int mooncake_store_mount_segment(mooncake_store_t store, void* buffer, uint64_t size,
                                           uint64_t* segment_id_out) {
  return Api<int>(__func__, store, Kind::kSetup, [&] {
    if (buffer == nullptr) return NullArgument("buffer");
    if (segment_id_out == nullptr) return NullArgument("segment_id_out");
    return ToAbi(AsClient(store)->MountPoolSegment(buffer, size, segment_id_out));
  });
}

MC_EXPORT int mooncake_store_allocate_and_mount_segment(mooncake_store_t store, uint64_t size,
                                                        uint64_t* segment_id_out,
                                                        uint64_t* allocated_size_out) {
  return Api<int>(__func__, store, Kind::kSetup, [&] {
    if (segment_id_out == nullptr) return NullArgument("segment_id_out");
    uint64_t allocated = 0;
    int rc = ToAbi(AsClient(store)->AllocateSegment(size, segment_id_out, &allocated));
    if (rc == 0 && allocated_size_out != nullptr) *allocated_size_out = allocated;
    return rc;
  });
}

MC_EXPORT int mooncake_store_unmount_segment(mooncake_store_t store, uint64_t segment_id,
                                             uint64_t* moved_out, uint64_t* dropped_out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    mooncake::uds::UnmountSegmentsReply drained;
    int rc = ToAbi(AsClient(store)->UnmountSegment(segment_id, &drained));
    if (rc != 0) return rc;
    if (moved_out != nullptr) *moved_out = drained.moved;
    if (dropped_out != nullptr) *dropped_out = drained.dropped;
    return 0;
  });
}

MC_EXPORT int mooncake_store_unmount_local_disk_segment(mooncake_store_t store) {
  return Api<int>(__func__, store, Kind::kData,
                  [&] { return ToAbi(AsClient(store)->UnmountLocalDiskSegment()); });
}

// ---- utilities ------------------------------------------------------------------------

MC_EXPORT int mooncake_store_parse_size(const char* text, uint64_t* out) {
  // No handle: its message is the one errmsg(NULL) returns.
  mooncake::client::BeginCall();
  int rc = 0;
  uint64_t bytes = 0;
  if (text == nullptr || out == nullptr) {
    rc = NullArgument(text == nullptr ? "text" : "out");
  } else {
    try {
      if (!mooncake::ParseSize(text, &bytes)) {
        rc = Refuse(kInvalidParams, "\"" + std::string(text, strnlen(text, 64)) +
                                        "\" is not a size (\"4096\", \"16MB\", \"1.5G\")");
      }
    } catch (...) {
      rc = kInternal;
    }
  }
  if (rc == 0) *out = bytes;
  Finish(__func__, nullptr, Kind::kQuiet, rc);
  return rc;
}

// ---- ranged reads -----------------------------------------------------------------------

namespace {

// A get's checks before it is sent: 0, or the code every fragment (and the get) answers.
int CheckRangedGet(StoreClient* client, const mooncake_ranged_get_t& g, std::string* key,
                   MemoryPlace* place) {
  if (g.range_count == 0) return 0;
  if (g.buffer == nullptr) return NullArgument("buffer");
  if (g.ranges == nullptr) return NullArgument("ranges");
  if (g.results_out == nullptr) return NullArgument("results_out");
  int rc = CheckKey(g.key, key);
  if (rc != 0) return rc;
  return ToAbi(client->CheckBuffer(g.buffer, g.buffer_size, true, place));
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
    MemoryPlace place;
    int rc = CheckRangedGet(client, g, &k, &place);
    if (rc != 0 || g.range_count == 0) {
      for (size_t r = 0; rc != kInternal && r < g.range_count; ++r) g.results_out[r] = rc;
      results_out[i] = rc;
      if (rc != 0) mooncake::client::NoteEntry(i, rc);
      continue;
    }
    StoreClient::RangeGet item{std::move(k), static_cast<char*>(g.buffer), g.buffer_size, place,
                               {}};
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
  return Api<int64_t>(__func__, store, Kind::kData, [&]() -> int64_t {
    mooncake_ranged_get_t get{key, buffer, buffer_size, ranges, range_count, results_out};
    int64_t result = 0;
    RangedGets(store, &get, 1, &result);
    return result;
  });
}

MC_EXPORT int mooncake_store_batch_get_ranges(mooncake_store_t store,
                                              const mooncake_ranged_get_t* gets, size_t count,
                                              int64_t* results_out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (gets == nullptr) return NullArgument("gets");
    if (results_out == nullptr) return NullArgument("results_out");
    return RangedGets(store, gets, count, results_out);
  });
}

// ---- device memory -----------------------------------------------------------------------

MC_EXPORT int mooncake_store_memory_kind(mooncake_store_t store, const void* buffer) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (buffer == nullptr) return NullArgument("buffer");
    MemoryPlace place;
    int rc = ToAbi(AsClient(store)->CheckBuffer(buffer, 1, false, &place));
    if (rc != 0) return rc;
    return place.device ? MOONCAKE_MEMORY_CUDA : MOONCAKE_MEMORY_HOST;
  });
}

MC_EXPORT int mooncake_store_copy_memory(mooncake_store_t store, void* dst, const void* src,
                                         size_t size) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (dst == nullptr) return NullArgument("dst");
    if (src == nullptr) return NullArgument("src");
    MemoryPlace to, from;
    int rc = ToAbi(AsClient(store)->CheckBuffer(src, size, false, &from));
    if (rc == 0) rc = ToAbi(AsClient(store)->CheckBuffer(dst, size, true, &to));
    if (rc != 0) return rc;
    return ToAbi(mooncake::client::CopyMemory(to, dst, from, src, size));
  });
}
