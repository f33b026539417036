#include "master/directory/groups.h"

#include "common/base/tenant_key.h"

namespace mooncake {

namespace {

// The group's name in the table: encoded with the tenant of the key that names it, as a
// key is, so that every tenant has groups of its own.
std::string Scoped(std::string_view key, std::string_view group) {
  return tenant_key::Encode(tenant_key::TenantOf(key), group);
}

}  // namespace

bool GroupTable::ValidGroup(std::string_view group) { return tenant_key::ValidUserKey(group); }

void GroupTable::Join(std::string_view key, std::string_view group) {
  std::string scoped = Scoped(key, group);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = group_of_.emplace(std::string(key), scoped);
  if (!inserted) return;  // already a member (the caller's bug): its group stays
  Group& g = groups_[std::move(scoped)];
  g.members.emplace(key);
  g.fresh = true;
}

void GroupTable::Leave(std::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = group_of_.find(std::string(key));
  if (it == group_of_.end()) return;
  auto g = groups_.find(it->second);
  if (g != groups_.end()) {
    g->second.members.erase(it->first);
    if (g->second.members.empty()) groups_.erase(g);
  }
  group_of_.erase(it);
}

bool GroupTable::GroupOf(std::string_view key, std::string* group) const {
  absl::MutexLock lock(&mu_);
  auto it = group_of_.find(std::string(key));
  if (it == group_of_.end()) return false;
  *group = std::string(tenant_key::UserKeyOf(it->second));
  return true;
}

std::vector<std::string> GroupTable::OthersOf(std::string_view key, Share share) {
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  auto it = group_of_.find(std::string(key));
  if (it == group_of_.end()) return out;
  auto g = groups_.find(it->second);
  if (g == groups_.end() || (share == Share::kLeaseIfFresh && !g->second.fresh)) return out;
  if (share != Share::kPeek) g->second.fresh = false;
  out.reserve(g->second.members.size());
  for (const std::string& member : g->second.members) {
    if (member != it->first) out.push_back(member);
  }
  return out;
}

size_t GroupTable::groups() const {
  absl::MutexLock lock(&mu_);
  return groups_.size();
}

size_t GroupTable::members() const {
  absl::MutexLock lock(&mu_);
  return group_of_.size();
}

void GroupTable::Clear() {
  absl::MutexLock lock(&mu_);
  group_of_.clear();
  groups_.clear();
}

}  // namespace mooncake
