// The C ABI's argument checks (include/mooncake_store.h, "Conventions"): NULL pointers,
// keys, value sizes and put configs, each turned into the ABI's code, with the reason
// explained as the caller's doing (libmc/last_error.h, Blame::kArgument). c_api.cc calls
// them before anything reaches StoreClient, which then may take its arguments as valid.
//
// Input policy: every pointer may be NULL (-1); a key is a NUL-terminated string that is
// read only up to MOONCAKE_STORE_MAX_KEY_LEN + 1 bytes unless it is too long (then its
// length is measured for the message); a config is read only up to its struct_size.
#ifndef MOONCAKE_LIBMC_API_CHECKS_H_
#define MOONCAKE_LIBMC_API_CHECKS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "common/uds/uds_ops.h"
#include "include/mooncake_store.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

constexpr int kInternal = MOONCAKE_STORE_INTERNAL_ERROR;
constexpr int kInvalidParams = MOONCAKE_STORE_INVALID_PARAMS;

// Explains code (an ABI code) as the caller's doing and returns it.
int Refuse(int code, std::string why);
// -1 for a NULL argument: "<what> is NULL".
int NullArgument(const char* what);

// What mooncake_store_put_config_init writes.
void PutConfigDefaults(mooncake_put_config_t* config);

// 0 with *out set; -1 for NULL, -600 for a key that breaks a rule (which one: explained).
int CheckKey(const char* key, std::string* out);
// 0 for 1 byte to 4 GiB, else -600.
int CheckValueSize(size_t size);

// The wire config of a put, from either config struct (NULL: the defaults), with the
// handle's offload choice: 0, -1 (a NULL list or name), -600 (a bad value), -1012 (a
// feature this store lacks). A put config's group ids name one group per key of a call of
// keys keys (else -600): a single put's goes in out->group, a batch's (groups not null)
// into *groups, one per key, in order.
int CheckAnyConfig(const StoreClient* client, const mooncake_replicate_config_t* config,
                   uds::WireConfig* out);
int CheckAnyConfig(const StoreClient* client, const mooncake_put_config_t* config,
                   uds::WireConfig* out, size_t keys = 1,
                   std::vector<std::string>* groups = nullptr);

// The checks every put shares (value, key, config, size, where the value lives: *place);
// 0 when the put may go ahead.
template <typename Config>
int CheckPut(StoreClient* client, const char* key, const void* value, size_t size,
             const Config* config, std::string* key_out, uds::WireConfig* config_out,
             MemoryPlace* place) {
  if (value == nullptr) return NullArgument("value");
  int rc = CheckKey(key, key_out);
  if (rc != 0) return rc;
  rc = CheckAnyConfig(client, config, config_out);
  if (rc != 0) return rc;
  rc = CheckValueSize(size);
  if (rc != 0) return rc;
  return ToInt(client->CheckBuffer(value, size, false, place));
}

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_API_CHECKS_H_
