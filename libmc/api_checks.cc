#include "libmc/api_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/base/error_code.h"
#include "common/base/tenant_key.h"
#include "libmc/last_error.h"

namespace mooncake {
namespace client {

namespace {

int Unsupported(const char* field) {
  return Refuse(ToInt(ErrorCode::NOT_SUPPORTED),
                std::string("put config: ") + field +
                    " is not supported by this store (docs/mooncake-api.md)");
}

// Copies count "host:port" names: -1 for a NULL list or name, -600 for too many or too long.
int CopySegments(const char* const* names, size_t count, std::vector<std::string>* out) {
  if (count > 0 && names == nullptr) return NullArgument("preferred_segments");
  // More names than a frame may list would cost the connection (docs/protocol.md).
  if (count > uds::kMaxBatch) {
    return Refuse(kInvalidParams, "preferred_segments_count " + std::to_string(count) +
                                      " is over " + std::to_string(uds::kMaxBatch));
  }
  for (size_t i = 0; i < count; ++i) {
    if (names[i] == nullptr) return NullArgument("a preferred segment name");
    if (std::strlen(names[i]) > MOONCAKE_STORE_MAX_KEY_LEN) {  // no "host:port" is that long
      return Refuse(kInvalidParams, "preferred segment " + std::to_string(i) +
                                        " is longer than " +
                                        std::to_string(MOONCAKE_STORE_MAX_KEY_LEN) + " bytes");
    }
    out->emplace_back(names[i]);
  }
  return 0;
}

// The fields of a mooncake_put_config_t the caller's struct_size covers, over the defaults.
// -600 for a size outside [MOONCAKE_PUT_CONFIG_SIZE_V1, MOONCAKE_PUT_CONFIG_MAX_SIZE], -1012
// when the bytes past this library's struct are not all zero (fields of a later version).
int ReadPutConfig(const mooncake_put_config_t* config, mooncake_put_config_t* out) {
  PutConfigDefaults(out);
  if (config == nullptr) return 0;
  const size_t size = config->struct_size;
  if (size < MOONCAKE_PUT_CONFIG_SIZE_V1 || size > MOONCAKE_PUT_CONFIG_MAX_SIZE) {
    return Refuse(kInvalidParams,
                  "put config struct_size " + std::to_string(size) + " is outside [" +
                      std::to_string(MOONCAKE_PUT_CONFIG_SIZE_V1) + ", " +
                      std::to_string(MOONCAKE_PUT_CONFIG_MAX_SIZE) +
                      "]: fill it with mooncake_store_put_config_init()");
  }
  const size_t known = std::min(size, sizeof(mooncake_put_config_t));
  std::memcpy(out, config, known);
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(config) + known;
  for (size_t i = 0; i < size - known; ++i) {
    if (tail[i] != 0) {
      return Refuse(ToInt(ErrorCode::NOT_SUPPORTED),
                    "put config sets fields of a newer library (struct_size " +
                        std::to_string(size) + ")");
    }
  }
  out->struct_size = sizeof(mooncake_put_config_t);
  return 0;
}

int ReplicaNumRefused(size_t replica_num, const char* range) {
  return Refuse(kInvalidParams, "replica_num " + std::to_string(replica_num) + " is not " +
                                    range);
}

}  // namespace

int Refuse(int code, std::string why) {
  Explain(FromWire(code), std::move(why), Blame::kArgument);
  return code;
}

int NullArgument(const char* what) { return Refuse(kInternal, std::string(what) + " is NULL"); }

void PutConfigDefaults(mooncake_put_config_t* config) {
  std::memset(config, 0, sizeof(*config));
  config->struct_size = sizeof(*config);
  config->replica_num = 1;
  config->soft_pin_action = MOONCAKE_SOFT_PIN_PRESERVE;
}

int CheckKey(const char* key, std::string* out) {
  if (key == nullptr) return NullArgument("key");
  size_t n = strnlen(key, MOONCAKE_STORE_MAX_KEY_LEN + 1);
  if (n == 0 || n > MOONCAKE_STORE_MAX_KEY_LEN) {
    // A C string holds no NUL, so only its length can be wrong: measured whole for the
    // message (the caller promised a terminated string).
    std::string_view whole(key, n == 0 ? 0 : std::strlen(key));
    return Refuse(kInvalidParams, tenant_key::UserKeyProblem(whole));
  }
  out->assign(key, n);
  return 0;
}

int CheckValueSize(size_t size) {
  if (size == 0) return Refuse(kInvalidParams, "value size 0: a value is 1 byte to 4 GiB");
  if (size > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    return Refuse(kInvalidParams,
                  "value size " + std::to_string(size) + " is over 4 GiB (4294967296 bytes)");
  }
  return 0;
}

int CheckAnyConfig(const StoreClient* client, const mooncake_replicate_config_t* config,
                   uds::WireConfig* out) {
  *out = uds::WireConfig();
  out->offload = client->ssd_offload();
  if (config == nullptr) return 0;
  if (config->replica_num == 0) return ReplicaNumRefused(0, "at least 1");
  out->replica_num = config->replica_num;
  // The older struct's flag: a put pins or it does not (an upsert drops the old pin).
  out->soft_pin_action = config->with_soft_pin != 0 ? MOONCAKE_SOFT_PIN_ENABLE
                                                    : MOONCAKE_SOFT_PIN_DISABLE;
  out->with_hard_pin = config->with_hard_pin != 0;
  return CopySegments(config->preferred_segments, config->preferred_segments_count,
                      &out->preferred_segments);
}

int CheckAnyConfig(const StoreClient* client, const mooncake_put_config_t* given,
                   uds::WireConfig* out, size_t keys, std::vector<std::string>* groups) {
  *out = uds::WireConfig();
  out->offload = client->ssd_offload();
  mooncake_put_config_t c;
  int rc = ReadPutConfig(given, &c);
  if (rc != 0) return rc;
  if (c.replica_num == 0 || c.replica_num > 64) return ReplicaNumRefused(c.replica_num, "1..64");
  if (c.soft_pin_action < MOONCAKE_SOFT_PIN_PRESERVE ||
      c.soft_pin_action > MOONCAKE_SOFT_PIN_DISABLE) {
    return Refuse(kInvalidParams, "soft_pin_action " + std::to_string(c.soft_pin_action) +
                                      " is not a MOONCAKE_SOFT_PIN_* value");
  }
  // Mooncake's rule: a TTL goes with ENABLE only. The master checks it against its maximum.
  if (c.has_soft_pin_ttl != 0 && c.soft_pin_action != MOONCAKE_SOFT_PIN_ENABLE) {
    return Refuse(kInvalidParams,
                  "has_soft_pin_ttl goes with soft_pin_action MOONCAKE_SOFT_PIN_ENABLE only");
  }
  if (c.soft_pin_ttl_ms > static_cast<uint64_t>(INT64_MAX)) {
    return Refuse(kInvalidParams, "soft_pin_ttl_ms " + std::to_string(c.soft_pin_ttl_ms) +
                                      " is too large");
  }
  if (c.data_type < 0 || c.data_type > 9) {
    return Refuse(kInvalidParams,
                  "data_type " + std::to_string(c.data_type) + " is not 0 (UNKNOWN) to 9");
  }
  if (c.nof_replica_num != 0) return Unsupported("nof_replica_num");
  if (c.dfs_replica_num != 0) return Unsupported("dfs_replica_num");
  if (c.preferred_nof_segments_count != 0) return Unsupported("preferred_nof_segments");
  if (c.host_id != nullptr && c.host_id[0] != '\0') return Unsupported("host_id");
  if (c.group_ids_count > 0 && c.group_ids == nullptr) return NullArgument("group_ids");
  if (c.group_ids_count > 0 && c.group_ids_count != keys) {
    return Refuse(kInvalidParams, "group_ids_count " + std::to_string(c.group_ids_count) +
                                      ": name one group id per key (" + std::to_string(keys) +
                                      "), or none");
  }
  for (size_t i = 0; i < c.group_ids_count; ++i) {
    if (c.group_ids[i] == nullptr) return NullArgument("a group id");
    size_t n = strnlen(c.group_ids[i], MOONCAKE_STORE_MAX_KEY_LEN + 1);
    if (n > MOONCAKE_STORE_MAX_KEY_LEN) {
      return Refuse(kInvalidParams, "group id " + std::to_string(i) + " is longer than " +
                                        std::to_string(MOONCAKE_STORE_MAX_KEY_LEN) +
                                        " bytes: a group id follows a key's rules");
    }
  }
  out->group_given = c.group_ids_count > 0;
  if (out->group_given && groups == nullptr) out->group = c.group_ids[0];
  if (out->group_given && groups != nullptr) groups->assign(c.group_ids, c.group_ids + keys);
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

}  // namespace client
}  // namespace mooncake
