// The SSD tier's tunables (docs/ssd.md; flags --ssd_*, daemon/server/daemon_options.h), kept apart
// from daemon/ssd_store/ssd_store.h so that option parsing needs no storage code.
#ifndef MOONCAKE_DAEMON_SSD_OPTIONS_H_
#define MOONCAKE_DAEMON_SSD_OPTIONS_H_

#include <cstdint>
#include <string>

namespace mooncake {

// What survives a restart (daemon/ssd_store/ssd_store.h states each mode's bound).
enum class SsdPersistMode { kDisabled, kRelaxed, kStrict };
// Which bucket goes first when the tier is full: the oldest sealed one, or the one least
// recently read.
enum class SsdEvictionPolicy { kFifo, kLru };

struct SsdOptions {
  std::string path;                    // the directory; "" = no SSD tier
  uint64_t capacity = 0;               // bytes of bucket files at most
  uint64_t bucket_size = 64ull << 20;  // a bucket is sealed once this full
  double high_watermark = 0.9;         // of capacity: buckets are evicted past it
  SsdEvictionPolicy eviction_policy = SsdEvictionPolicy::kFifo;
  SsdPersistMode persist_mode = SsdPersistMode::kRelaxed;
};

// "fifo" / "lru", "disabled" / "relaxed" / "strict" (exact, lower case); false otherwise.
bool ParseSsdEvictionPolicy(const std::string& text, SsdEvictionPolicy* out);
bool ParseSsdPersistMode(const std::string& text, SsdPersistMode* out);
const char* SsdEvictionPolicyName(SsdEvictionPolicy policy);
const char* SsdPersistModeName(SsdPersistMode mode);

// Range checks of options with a path (an empty path is no tier and always valid); false
// with *error naming the flag.
bool ValidateSsdOptions(const SsdOptions& options, std::string* error);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_OPTIONS_H_
