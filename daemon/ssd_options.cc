#include "daemon/ssd_store/ssd_options.h"

namespace mooncake {

bool ParseSsdEvictionPolicy(const std::string& text, SsdEvictionPolicy* out) {
  if (text == "fifo") {
    *out = SsdEvictionPolicy::kFifo;
  } else if (text == "lru") {
    *out = SsdEvictionPolicy::kLru;
  } else {
    return false;
  }
  return true;
}

bool ParseSsdPersistMode(const std::string& text, SsdPersistMode* out) {
  if (text == "disabled") {
    *out = SsdPersistMode::kDisabled;
  } else if (text == "relaxed") {
    *out = SsdPersistMode::kRelaxed;
  } else if (text == "strict") {
    *out = SsdPersistMode::kStrict;
  } else {
    return false;
  }
  return true;
}

const char* SsdEvictionPolicyName(SsdEvictionPolicy policy) {
  return policy == SsdEvictionPolicy::kLru ? "lru" : "fifo";
}

const char* SsdPersistModeName(SsdPersistMode mode) {
  switch (mode) {
    case SsdPersistMode::kDisabled:
      return "disabled";
    case SsdPersistMode::kStrict:
      return "strict";
    default:
      return "relaxed";
  }
}

bool ValidateSsdOptions(const SsdOptions& o, std::string* error) {
  if (o.path.empty()) return true;
  // A bucket holds at least one 4 KiB-aligned object; a tier holds at least two buckets,
  // so that one can be evicted while the other is written.
  if (o.bucket_size < (1ull << 20) || o.bucket_size > (1ull << 40)) {
    *error = "--ssd_bucket_size must be in 1 MiB..1 TiB";
  } else if (o.capacity < 2 * o.bucket_size) {
    *error = "--ssd_capacity must be at least two buckets (2 x --ssd_bucket_size)";
  } else if (!(o.high_watermark > 0.0 && o.high_watermark <= 1.0)) {
    *error = "--ssd_high_watermark must be in (0, 1]";
  } else {
    return true;
  }
  return false;
}

}  // namespace mooncake
