// ReplicateConfig as Mooncake's Python API has it (every field, Mooncake's names and
// defaults: docs/mooncake-api.md, "put-config"), and its translation to the C ABI's sized
// mooncake_put_config_t. The library checks it: fields of features this store lacks
// (nof/dfs replicas, NoF segments) answer -1012, bad values -600.
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
  size_t nof_replica_num = 0;  // NVMe-oF replicas: not supported (-1012 when set)
  size_t dfs_replica_num = 0;  // DFS (3FS) replicas: not supported (-1012 when set)
  bool with_hard_pin = false;
  SoftPinAction soft_pin_action = SoftPinAction::PRESERVE;
  std::optional<uint64_t> soft_pin_ttl_ms;  // only with ENABLE
  std::string preferred_segment;            // used when preferred_segments is empty
  std::vector<std::string> preferred_segments;
  std::vector<std::string> preferred_nof_segments;  // not supported (-1012 when set)
  bool prefer_alloc_in_same_node = false;  // the first replica on this store's daemon
  int data_type = 0;                       // Mooncake's ObjectDataType, 0..9
  // None, or one group id per key of the call ("" for none): docs/mooncake-api.md, "groups".
  std::optional<std::vector<std::string>> group_ids;

  // The older boolean view of soft_pin_action.
  bool with_soft_pin() const { return soft_pin_action == SoftPinAction::ENABLE; }
  void set_with_soft_pin(bool on) {
    soft_pin_action = on ? SoftPinAction::ENABLE : SoftPinAction::DISABLE;
  }

  std::string ToString() const {
    std::ostringstream out;
    out << "ReplicateConfig(replica_num=" << replica_num << ", nof_replica_num=" << nof_replica_num
        << ", dfs_replica_num=" << dfs_replica_num
        << ", with_soft_pin=" << (with_soft_pin() ? "True" : "False")
        << ", with_hard_pin=" << (with_hard_pin ? "True" : "False")
        << ", soft_pin_action=SoftPinAction." << Name(soft_pin_action) << ", soft_pin_ttl_ms=";
    if (soft_pin_ttl_ms) {
      out << *soft_pin_ttl_ms;
    } else {
      out << "None";
    }
    out << ", preferred_segment='" << preferred_segment << "', preferred_segments=" << List(preferred_segments)
        << ", preferred_nof_segments=" << List(preferred_nof_segments)
        << ", prefer_alloc_in_same_node=" << (prefer_alloc_in_same_node ? "True" : "False")
        << ", data_type=" << data_type
        << ", group_ids=" << (group_ids ? List(*group_ids) : std::string("None")) << ")";
    return out.str();
  }

 private:
  static std::string List(const std::vector<std::string>& names) {
    std::string out = "[";
    for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
    return out + "]";
  }
};

// A ReplicateConfig copied (with the GIL held) into the C struct plus the strings its
// pointers refer to, so the call can run without the GIL while Python code changes the
// original. Neither copyable nor movable: c_ points into the vectors below.
class CConfig {
 public:
  explicit CConfig(const ReplicateConfig* config) {
    if (config == nullptr) return;  // None: the C ABI's defaults (Mooncake's ReplicateConfig())
    mooncake_store_put_config_init(&c_);
    segments_ = config->preferred_segments;
    nof_segments_ = config->preferred_nof_segments;
    if (config->group_ids) groups_ = *config->group_ids;
    // Mooncake's rule: a list names one id per key, so an empty one fits no call (-600);
    // the C ABI reads a count of 0 as "none named".
    if (config->group_ids && config->group_ids->empty()) status_ = MOONCAKE_STORE_INVALID_PARAMS;
    segment_ = config->preferred_segment;
    c_.replica_num = config->replica_num;
    c_.nof_replica_num = config->nof_replica_num;
    c_.dfs_replica_num = config->dfs_replica_num;
    c_.soft_pin_action = static_cast<int32_t>(config->soft_pin_action);
    c_.has_soft_pin_ttl = config->soft_pin_ttl_ms.has_value() ? 1 : 0;
    c_.soft_pin_ttl_ms = config->soft_pin_ttl_ms.value_or(0);
    c_.with_hard_pin = config->with_hard_pin ? 1 : 0;
    c_.prefer_alloc_in_same_node = config->prefer_alloc_in_same_node ? 1 : 0;
    c_.data_type = config->data_type;
    c_.preferred_segments = Pointers(segments_, &segment_ptrs_);
    c_.preferred_segments_count = segments_.size();
    c_.preferred_segment = segment_.c_str();
    c_.preferred_nof_segments = Pointers(nof_segments_, &nof_ptrs_);
    c_.preferred_nof_segments_count = nof_segments_.size();
    c_.group_ids = Pointers(groups_, &group_ptrs_);
    c_.group_ids_count = groups_.size();
    has_config_ = true;
  }
  CConfig(const CConfig&) = delete;
  CConfig& operator=(const CConfig&) = delete;

  // 0, or -600 for what the C ABI cannot express (an empty group_ids list); the library
  // validates the rest.
  int status() const { return status_; }
  const mooncake_put_config_t* get() const { return has_config_ ? &c_ : nullptr; }

 private:
  static const char** Pointers(const std::vector<std::string>& from, std::vector<const char*>* to) {
    for (const auto& s : from) to->push_back(s.c_str());
    return to->empty() ? nullptr : to->data();
  }

  bool has_config_ = false;
  int status_ = 0;
  std::vector<std::string> segments_, nof_segments_, groups_;
  std::string segment_;
  std::vector<const char*> segment_ptrs_, nof_ptrs_, group_ptrs_;
  mooncake_put_config_t c_{};
};

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_REPLICATE_CONFIG_H_
