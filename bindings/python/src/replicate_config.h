// ReplicateConfig as Mooncake's Python API has it, and its translation to the C ABI's
// mooncake_replicate_config_t.
//
// The C struct is narrower than Mooncake's config: it has a with_soft_pin flag but no soft
// pin action and no TTL. So soft_pin_action and soft_pin_ttl_ms are validated here, on the
// client, and an ENABLE (with or without a TTL) becomes with_soft_pin = 1; the soft-pin TTL
// then is the master's default (see README.md, "Differences from Mooncake").
#ifndef MOONCAKE_STORE_PY_REPLICATE_CONFIG_H_
#define MOONCAKE_STORE_PY_REPLICATE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "mooncake_store.h"

namespace mooncake_py {

// Mooncake's values: PRESERVE keeps whatever soft pin an upserted object had, ENABLE pins,
// DISABLE unpins.
enum class SoftPinAction : int { PRESERVE = 0, ENABLE = 1, DISABLE = 2 };

inline const char* Name(SoftPinAction a) {
  switch (a) {
    case SoftPinAction::ENABLE:
      return "ENABLE";
    case SoftPinAction::DISABLE:
      return "DISABLE";
    case SoftPinAction::PRESERVE:
      break;
  }
  return "PRESERVE";
}

struct ReplicateConfig {
  size_t replica_num = 1;
  bool with_hard_pin = false;
  SoftPinAction soft_pin_action = SoftPinAction::PRESERVE;
  std::optional<uint64_t> soft_pin_ttl_ms;  // only meaningful with ENABLE
  std::string preferred_segment;            // wins over preferred_segments when not empty
  std::vector<std::string> preferred_segments;
  bool prefer_alloc_in_same_node = false;  // accepted for compatibility; the daemon places

  // The older boolean view of soft_pin_action.
  bool with_soft_pin() const { return soft_pin_action == SoftPinAction::ENABLE; }
  void set_with_soft_pin(bool on) {
    soft_pin_action = on ? SoftPinAction::ENABLE : SoftPinAction::DISABLE;
  }

  std::string ToString() const {
    std::ostringstream out;
    out << "ReplicateConfig(replica_num=" << replica_num
        << ", with_soft_pin=" << (with_soft_pin() ? "True" : "False")
        << ", with_hard_pin=" << (with_hard_pin ? "True" : "False")
        << ", soft_pin_action=SoftPinAction." << Name(soft_pin_action) << ", soft_pin_ttl_ms=";
    if (soft_pin_ttl_ms) {
      out << *soft_pin_ttl_ms;
    } else {
      out << "None";
    }
    out << ", preferred_segment='" << preferred_segment << "', preferred_segments=[";
    for (size_t i = 0; i < preferred_segments.size(); ++i) {
      out << (i ? ", '" : "'") << preferred_segments[i] << "'";
    }
    out << "], prefer_alloc_in_same_node=" << (prefer_alloc_in_same_node ? "True" : "False")
        << ")";
    return out.str();
  }
};

// A ReplicateConfig copied (with the GIL held) into the C struct plus the strings its
// pointers refer to, so the call can run without the GIL while Python code changes the
// original. Neither copyable nor movable: c_.preferred_segments points into segments_.
class CConfig {
 public:
  // status() is 0, or -600 when the config cannot be expressed (a TTL without ENABLE).
  explicit CConfig(const ReplicateConfig* config) {
    if (config == nullptr) return;  // None: the C ABI's defaults (one replica, no pins)
    if (config->soft_pin_ttl_ms && config->soft_pin_action != SoftPinAction::ENABLE) {
      status_ = MOONCAKE_STORE_INVALID_PARAMS;
      return;
    }
    if (!config->preferred_segment.empty()) {
      segments_.push_back(config->preferred_segment);
    } else {
      segments_ = config->preferred_segments;
    }
    for (const auto& s : segments_) pointers_.push_back(s.c_str());
    c_.replica_num = config->replica_num;
    c_.with_soft_pin = config->with_soft_pin() ? 1 : 0;
    c_.with_hard_pin = config->with_hard_pin ? 1 : 0;
    c_.preferred_segments = pointers_.empty() ? nullptr : pointers_.data();
    c_.preferred_segments_count = pointers_.size();
    has_config_ = true;
  }
  CConfig(const CConfig&) = delete;
  CConfig& operator=(const CConfig&) = delete;

  int status() const { return status_; }
  const mooncake_replicate_config_t* get() const { return has_config_ ? &c_ : nullptr; }

 private:
  int status_ = 0;
  bool has_config_ = false;
  std::vector<std::string> segments_;
  std::vector<const char*> pointers_;
  mooncake_replicate_config_t c_{};
};

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_REPLICATE_CONFIG_H_
