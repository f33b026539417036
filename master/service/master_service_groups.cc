// Groups of MasterService (Mooncake's ReplicateConfig.group_ids): which group a put names,
// keeping an object in its group, and what one member's read, existence hit and eviction
// do to the others. The table: master/directory/groups.h.
//
// The rules: a put may name its key's group, per tenant; the object stays in it for as long as it
// exists (ObjectMetadata::grouped, and the GroupTable), and its group travels in its
// snapshot and log records. A read's lease, and an existence hit's use, of one member are
// given to the group's other members (each under its own shard's lock, after the reader's
// is let go: the lock order has no two shards at once), when the reader's own lease needed
// renewing or the group gained a member since; eviction that takes a member takes the rest
// of its group with it, each only if eviction could take it alone. Removal is per object.
#include "master/service/master_service.h"

#include <unordered_set>

namespace mooncake {

bool MasterService::ValidGroupIds(const rpc::ReplicateConfig& config, size_t keys) {
  if (config.group_ids.empty()) return true;
  if (config.group_ids.size() != keys) return false;
  for (const std::string& group : config.group_ids) {
    if (!group.empty() && !GroupTable::ValidGroup(group)) return false;
  }
  return true;
}

bool MasterService::UpsertKeepsGroup(std::string_view key, const ObjectMetadata& meta,
                                     const std::string* group) const {
  if (group == nullptr) return true;  // none named: the object keeps its own
  std::string current;
  if (meta.grouped) groups_.GroupOf(key, &current);
  return current == *group;
}

void MasterService::JoinGroup(std::string_view key, ObjectMetadata& meta,
                              const std::string* group) {
  if (group == nullptr || group->empty()) return;
  groups_.Join(key, *group);
  meta.grouped = true;
}

std::string MasterService::GroupForLog(std::string_view key, const ObjectMetadata& meta) const {
  std::string group;
  if (meta.grouped) groups_.GroupOf(key, &group);
  return group;
}

void MasterService::ShareWithGroup(const std::vector<std::string>& members, int64_t until_ms) {
  StateGate::Shared gate(gate_);
  for (const std::string& member : members) {
    LockedKey locked(objects_, member);
    ObjectMetadata* meta = locked.object;
    if (meta == nullptr || !meta->complete) continue;
    if (until_ms == 0) {
      CountExistHit(locked.shard, *meta, Now());
      continue;
    }
    // A lease as a read's, but no reader caches the member: no holder to record.
    ForgetExistHit(locked.shard, *meta);
    meta->time_ms = std::max(meta->time_ms, until_ms);
    meta->unread = false;
  }
}

uint64_t MasterService::EvictRestOfGroup(const std::vector<std::string>& members,
                                         const EvictionThresholds& take, int64_t now,
                                         int64_t* evicted, uint64_t* queued) {
  StateGate::Shared gate(gate_);
  uint64_t freed = 0;
  std::unordered_set<std::string> seen;
  for (const std::string& member : members) {
    if (!seen.insert(member).second) continue;  // named by two members the walk took
    LockedKey locked(objects_, member);
    ObjectMetadata* meta = locked.object;
    if (meta == nullptr) continue;
    // Whatever its age: it goes with its group, unless eviction could not take it alone.
    if (!take.Reaches(TierOf(locked.shard, *meta, now))) continue;
    bool erase = false;
    freed += EvictOne(locked.shard, member, *meta, queued, &erase);
    if (erase) {
      locked.Erase();
      ++*evicted;
    }
  }
  return freed;
}

}  // namespace mooncake
