// Object operations of MasterService: puts, upserts, reads and removals.
// Daemons and their segments (registration, mounts, liveness) and deferred frees are in
// master_service_upkeep.cc, eviction's side of an object in master_service_evict.cc; the
// log, snapshot export and restore in master_service_durable.cc.
//
// Fresh reads everywhere: a reader that will cache a replica list names itself, and the
// shard records it (master/directory/cache_holders.h). A change (UpsertEnd, a removal) takes those
// records into a CacheHolderSet; DescribeHolders turns it into the daemons the reply names,
// whose caches the writer empties of the key before it answers (docs/daemon.md, "Read
// cache"). Where the master cannot know who holds an entry it says "unknown, wait until"
// instead, never nothing. Nothing of this is logged or snapshotted: leases do not survive a
// restart, and for one lease after a restore every change says "unknown" (restore_fence).
//
// Tenants (docs/security.md, "Tenants"): keys are stored keys (common/base/tenant_key.h), a
// tenant's carrying its id. RemoveByRegex and RemoveAll walk one tenant's keys only, the
// pattern matched against the keys as its clients name them. Each tenant's objects and
// memory are accounted (master/directory/tenant_usage.h) where values gain or lose replicas, and a
// put that would take a tenant over its --tenant_quota answers -1402.
#include "master/service/master_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "common/base/units.h"

namespace mooncake {

namespace {

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

rpc::PutStartResult PutStartError(ErrorCode code) {
  rpc::PutStartResult r;
  r.code = ToInt(code);
  return r;
}

rpc::ReplicaListResult ReplicaListError(ErrorCode code) {
  rpc::ReplicaListResult r;
  r.code = ToInt(code);
  return r;
}

// Negative is "none"; a CRC-32C has 32 bits.
bool ValidChecksum(int64_t checksum) { return checksum <= int64_t{0xFFFFFFFF}; }

int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

MasterOptions WithClock(MasterOptions options) {
  if (!options.now_ms) options.now_ms = SteadyNowMs;
  if (!options.unix_ms) options.unix_ms = UnixNowMs;
  return options;
}

// --tenant_quota, which ValidateMasterOptions has checked.
TenantUsage::Quotas QuotasOf(const std::string& text) {
  TenantUsage::Quotas quotas;
  std::string error;
  if (!TenantUsage::ParseQuotas(text, &quotas, &error)) {
    MC_LOG_ERROR("--tenant_quota ignored: %s", error.c_str());
  }
  std::string shown;
  for (const auto& [tenant, bytes] : quotas) {
    shown += (shown.empty() ? "" : ", ") + tenant + " " + FormatSize(bytes);
  }
  if (!shown.empty()) MC_LOG_INFO("tenant quotas: %s", shown.c_str());
  return quotas;
}

}  // namespace

int64_t MasterService::NewEpoch() {
  return static_cast<int64_t>(std::random_device{}() & 0x7fffffff) << 16 |
         (SteadyNowMs() & 0xffff);
}

MasterService::MasterService(MasterOptions options)
    : options_(WithClock(std::move(options))),
      epoch_(NewEpoch()),
      segments_(options_.allocation_strategy == "free_ratio_first" ? AllocationStrategy::kFreeRatioFirst
                : options_.allocation_strategy == "local_first"    ? AllocationStrategy::kLocalFirst
                                                                    : AllocationStrategy::kRandom,
                /*alignment=*/64, static_cast<uint64_t>(options_.placement_seed)),
      objects_(gate_, options_.max_cache_holders),
      tenants_(QuotasOf(options_.tenant_quota)),
      tasks_(ReplicaTaskLimits{static_cast<size_t>(options_.max_total_finished_tasks),
                               static_cast<size_t>(options_.max_total_pending_tasks),
                               static_cast<size_t>(options_.max_total_processing_tasks),
                               options_.pending_task_timeout_ms,
                               options_.processing_task_timeout_ms,
                               static_cast<uint32_t>(options_.max_retry_attempts)}) {}

bool MasterService::ValidKey(std::string_view key) { return tenant_key::ValidStoredKey(key); }

// ---- helpers -------------------------------------------------------------------------

ErrorCode MasterService::ValidatePut(int64_t writer, const std::string& key, int64_t size,
                                     const rpc::ReplicateConfig& config) const {
  if (!ValidKey(key) || size <= 0 || static_cast<uint64_t>(size) > MOONCAKE_STORE_MAX_VALUE_SIZE ||
      config.replica_num < 1 || static_cast<size_t>(config.replica_num) > kMaxReplicaNum ||
      config.soft_pin_ttl_ms < 0 || config.offload < 0 || config.offload > 2) {
    return ErrorCode::INVALID_PARAMS;
  }
  SoftPinRequest ignored;
  ErrorCode pin = ResolveSoftPin(config, &ignored);
  if (pin != ErrorCode::OK) return pin;
  if (!daemons_.Known(writer)) return ErrorCode::CLIENT_NOT_FOUND;
  if (log_.Refusing()) return ErrorCode::PERSISTENT_FAIL;
  return ErrorCode::OK;
}

ErrorCode MasterService::ResolveSoftPin(const rpc::ReplicateConfig& config,
                                        SoftPinRequest* out) const {
  *out = SoftPinRequest();
  if (config.soft_pin_action < 0) {  // an older daemon: with_soft_pin, as before
    if (!config.with_soft_pin) {
      out->action = SoftPin::kDisable;
      return ErrorCode::OK;
    }
    out->action = SoftPin::kEnable;
    out->ttl_ms = config.soft_pin_ttl_ms <= 0
                      ? options_.default_kv_soft_pin_ttl_ms
                      : std::min(config.soft_pin_ttl_ms, options_.max_kv_soft_pin_ttl_ms);
    return ErrorCode::OK;
  }
  if (config.soft_pin_action > 2 || config.soft_pin_ttl_ms < 0) return ErrorCode::INVALID_PARAMS;
  out->action = static_cast<SoftPin>(config.soft_pin_action);
  if (out->action != SoftPin::kEnable) {
    // Mooncake: a TTL only goes with ENABLE.
    return config.soft_pin_ttl_given ? ErrorCode::INVALID_PARAMS : ErrorCode::OK;
  }
  out->ttl_ms = config.soft_pin_ttl_given ? config.soft_pin_ttl_ms
                                          : options_.default_kv_soft_pin_ttl_ms;
  return out->ttl_ms > options_.max_kv_soft_pin_ttl_ms ? ErrorCode::INVALID_PARAMS
                                                       : ErrorCode::OK;
}

bool MasterService::TryReserve(uint64_t size, const rpc::ReplicateConfig& config,
                               int64_t writer, ReplicaList* out) {
  const int64_t local = config.prefer_local || segments_.local_first() ? writer : 0;
  std::vector<Placement> placed =
      segments_.Allocate(size, static_cast<size_t>(config.replica_num), config.preferred_segments,
                         config.avoided_segments, local);
  for (const Placement& p : placed) {
    Replica r;
    r.offset = p.offset;
    r.segment = p.segment->slot();
    r.alloc_node = p.node;
    out->push_back(r);
  }
  return !placed.empty();
}

ErrorCode MasterService::ReserveCharged(const std::string& key, uint64_t size,
                                        const rpc::ReplicateConfig& config, int64_t writer,
                                        ReplicaList* out) {
  int64_t asked = static_cast<int64_t>(size) * config.replica_num;
  if (!tenants_.TryCharge(key, static_cast<uint64_t>(asked))) return ErrorCode::QUOTA_EXCEEDED;
  ErrorCode rc = Reserve(size, config, writer, out);
  // Fewer replicas than asked may have fitted, or none.
  tenants_.Add(key, 0, (rc == ErrorCode::OK ? MemoryBytes(size, *out) : 0) - asked);
  return rc;
}

int64_t MasterService::MemoryBytes(uint64_t size, const ReplicaList& replicas) {
  int64_t n = 0;
  for (size_t i = 0; i < replicas.size(); ++i) n += replicas[i].kind == ReplicaKind::kMemory;
  return n * static_cast<int64_t>(size);
}

void MasterService::DescribeReplicas(const ReplicaList& replicas, uint64_t size,
                                     bool include_processing,
                                     std::vector<rpc::ReplicaDescriptor>* out) const {
  out->reserve(replicas.size());
  auto describe = [&](const Replica& r) {
    if (!include_processing && r.status != ReplicaStatus::kComplete) return;
    std::shared_ptr<Segment> segment = segments_.Get(r.segment);
    if (!segment) return;  // unmounted a moment ago; its replica is being dropped
    // Restored (its daemon has not proven it is back), or a disk replica a reconciliation
    // has not vouched for yet.
    if (!Listable(r, *segment)) return;
    rpc::ReplicaDescriptor d;
    d.replica_id = r.id();
    d.kind = static_cast<rpc::ReplicaKind::type>(r.kind);
    d.status = static_cast<rpc::ReplicaStatus::type>(r.status);
    d.segment_id = segment->info().segment_id;
    d.segment_name = segment->info().name;
    d.daemon_id = segment->info().daemon_id;
    d.offset = static_cast<int64_t>(r.offset);
    d.size = static_cast<int64_t>(size);
    d.__set_unverified(r.unverified);
    out->push_back(std::move(d));
  };
  // Memory replicas first, then disk ones: the order readers prefer (docs/ssd.md).
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].memory()) describe(replicas[i]);
  }
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].memory()) describe(replicas[i]);
  }
}

bool MasterService::Readable(const ReplicaList& replicas) const {
  for (size_t i = 0; i < replicas.size(); ++i) {
    std::shared_ptr<Segment> segment = segments_.Get(replicas[i].segment);
    if (segment && Listable(replicas[i], *segment)) return true;
  }
  return false;
}

bool MasterService::OnDetachedSegment(const ReplicaList& replicas) const {
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].memory()) continue;
    std::shared_ptr<Segment> segment = segments_.Get(replicas[i].segment);
    if (segment && !segment->attached()) return true;
  }
  return false;
}

// Every replica leaving the directory passes here or through DeferFree, so this is where
// an unchecked one stops counting as waiting for its daemon's check, whatever dropped it.
void MasterService::ForgetUnverified(const ReplicaList& replicas) {
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].memory() || !replicas[i].unverified) continue;
    std::shared_ptr<Segment> segment = segments_.Get(replicas[i].segment);
    if (segment) segment->AddUnverified(-1);
  }
}

// A disk replica holds no range: nothing to free (its bytes are the daemon's to drop).
void MasterService::FreeReplicas(const ReplicaList& replicas) {
  ForgetUnverified(replicas);
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].memory()) segments_.Free(replicas[i].segment, replicas[i].alloc_node);
  }
}

void MasterService::DeferFree(const ReplicaList& replicas, int64_t due_ms, uint64_t due_seq) {
  ForgetUnverified(replicas);
  deferred_.Add(replicas, due_ms, due_seq);
}

void MasterService::ReleaseObject(Shard& shard, std::string_view key, ObjectMetadata& meta,
                                  uint64_t removed_at) {
  int64_t now = Now();
  if (!meta.complete) {
    processing_count_.fetch_sub(1);
    FreeReplicas(meta.replicas);
  } else if (meta.leased(now) || removed_at > 0) {
    // Removed by force while someone may still be reading: keep the bytes until the
    // lease runs out. Logged: keep them until the removal is on disk.
    DeferFree(meta.replicas, meta.leased(now) ? meta.time_ms : 0, removed_at);
  } else {
    FreeReplicas(meta.replicas);
  }
  LeaveGroup(key, meta);
  DropPendingUpsert(shard, key);
  DropPendingMove(shard, key);
  DropPendingPromotion(shard, key);
  disk_tier_.EndOffload(shard, key, &meta, /*failed=*/false);
  disk_tier_.Count(meta, -1);
  shard.holders.Forget(&meta);
  ForgetExistHit(shard, meta);  // before the block goes: the table is keyed by its address
  object_count_.fetch_sub(1);
  tenants_.Add(key, -1, -MemoryBytes(meta.size, meta.replicas));
}

void MasterService::RemoveLogged(Shard& shard, std::string_view key, ObjectMetadata& meta) {
  ReleaseObject(shard, key, meta, log_.Remove(key));
}

void MasterService::TakeHolders(Shard& shard, ObjectMetadata& meta, int64_t now,
                                int32_t key_index, CacheHolderSet* out) {
  shard.holders.Take(&meta, now, key_index, out);
  if (meta.untracked_holders && meta.time_ms > now) out->AddEveryone(meta.time_ms, key_index);
  meta.untracked_holders = false;
}

void MasterService::ExtendUnlisted(int64_t until_ms) {
  int64_t seen = unlisted_until_ms_.load();
  while (seen < until_ms && !unlisted_until_ms_.compare_exchange_weak(seen, until_ms)) {
  }
}

void MasterService::DropPendingUpsert(Shard& shard, std::string_view key) {
  if (shard.upserts.empty()) return;
  auto it = shard.upserts.find(std::string(key));
  if (it == shard.upserts.end()) return;
  // Its writer may still be copying bytes in: free only when it must have given up.
  DeferFree(it->second.replicas, it->second.start_ms + options_.put_start_release_timeout_ms);
  tenants_.Add(key, 0, -MemoryBytes(it->second.size, it->second.replicas));
  shard.upserts.erase(it);
}

// ---- puts ----------------------------------------------------------------------------

rpc::PutStartResult MasterService::StartLocked(LockedKey& locked, int64_t writer, uint64_t size,
                                               const rpc::ReplicateConfig& config,
                                               const ReplicaList& reserved,
                                               const std::string* group) {
  ObjectMetadata meta;
  meta.size = size;
  meta.time_ms = Now();
  meta.writer = writer;
  meta.hard_pin = config.with_hard_pin;
  SoftPinRequest pin;
  ResolveSoftPin(config, &pin);  // ValidatePut accepted it
  meta.soft_pin_ms = NewObjectSoftPinTtl(pin);
  meta.offload_at_put = WantsOffload(config);
  meta.quota_slot = tenants_.QuotaSlot(locked.key);
  for (size_t i = 0; i < reserved.size(); ++i) meta.replicas.push_back(reserved[i]);
  rpc::PutStartResult result;
  result.code = ToInt(ErrorCode::OK);
  result.master_epoch = epoch_;
  DescribeReplicas(meta.replicas, size, /*include_processing=*/true, &result.replicas);
  locked.object = locked.shard.objects.Insert(locked.key, locked.hash, std::move(meta));
  JoinGroup(locked.key, *locked.object, group);
  object_count_.fetch_add(1);
  processing_count_.fetch_add(1);
  tenants_.Add(locked.key, 1, 0);  // its bytes were charged with the reservation
  return result;
}

rpc::PutStartResult MasterService::PutStart(int64_t writer, const std::string& key, int64_t size,
                                            const rpc::ReplicateConfig& config) {
  if (!ValidGroupIds(config, 1)) return PutStartError(ErrorCode::INVALID_PARAMS);
  return PutStartOne(writer, key, size, config, GroupAsked(config));
}

rpc::PutStartResult MasterService::PutStartOne(int64_t writer, const std::string& key,
                                               int64_t size, const rpc::ReplicateConfig& config,
                                               const std::string* group) {
  StateGate::Shared gate(gate_);
  ErrorCode rc = ValidatePut(writer, key, size, config);
  if (rc != ErrorCode::OK) return PutStartError(rc);
  {
    // Cheap early answer for the common "already cached" case, before reserving space.
    LockedKey locked(objects_, key);
    const ObjectMetadata* existing = locked.object;
    if (existing != nullptr &&
        (existing->complete ||
         Now() - existing->time_ms < options_.put_start_discard_timeout_ms)) {
      return PutStartError(ErrorCode::OBJECT_ALREADY_EXISTS);
    }
  }
  // Space is reserved without the shard lock: a reservation may have to evict, and
  // eviction takes shard locks one at a time.
  ReplicaList reserved;
  rc = ReserveCharged(key, static_cast<uint64_t>(size), config, writer, &reserved);
  if (rc != ErrorCode::OK) return PutStartError(rc);

  LockedKey locked(objects_, key);
  if (locked.object != nullptr) {
    ObjectMetadata& old = *locked.object;
    if (old.complete || Now() - old.time_ms < options_.put_start_discard_timeout_ms) {
      FreeReplicas(reserved);  // lost a race with another writer of the same key
      tenants_.Add(key, 0, -MemoryBytes(static_cast<uint64_t>(size), reserved));
      return PutStartError(ErrorCode::OBJECT_ALREADY_EXISTS);
    }
    // An abandoned put: the new writer takes over. The old writer might still be copying,
    // so its space is freed only after put_start_release_timeout.
    MC_LOG_WARN("put of '%.64s' by daemon %lld abandoned; taken over by %lld",
                std::string(tenant_key::UserKeyOf(key)).c_str(),
                static_cast<long long>(old.writer), static_cast<long long>(writer));
    DeferFree(old.replicas, old.time_ms + options_.put_start_release_timeout_ms);
    tenants_.Add(key, -1, -MemoryBytes(old.size, old.replicas));
    LeaveGroup(key, old);
    locked.Erase();
    object_count_.fetch_sub(1);
    processing_count_.fetch_sub(1);
  }
  return StartLocked(locked, writer, static_cast<uint64_t>(size), config, reserved, group);
}

ErrorCode MasterService::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key) || !ValidChecksum(checksum)) return ErrorCode::INVALID_PARAMS;
  LockedKey locked(objects_, key);
  if (locked.object == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  ObjectMetadata& meta = *locked.object;
  if (meta.writer != writer) return ErrorCode::ILLEGAL_CLIENT;
  if (meta.complete) return ErrorCode::OK;  // a retried PutEnd
  int64_t now = Now();
  for (size_t i = 0; i < meta.replicas.size(); ++i) {
    meta.replicas[i].status = ReplicaStatus::kComplete;
  }
  meta.complete = true;
  meta.set_checksum(checksum);
  meta.time_ms = now;  // no lease yet; eviction age counts from publication
  meta.unread = true;
  if (meta.soft_pin_ms > 0) meta.soft_pin_ms += now;
  processing_count_.fetch_sub(1);
  LogPublish(key, meta);
  if (meta.offload_at_put) {
    meta.offload_at_put = false;
    disk_tier_.QueueOffload(locked.shard, key, meta, /*for_eviction=*/false);
  }
  return ErrorCode::OK;
}

ErrorCode MasterService::PutRevoke(int64_t writer, const std::string& key) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ErrorCode::INVALID_PARAMS;
  LockedKey locked(objects_, key);
  ObjectMetadata* meta = locked.object;
  if (meta == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  if (meta->writer != writer) return ErrorCode::ILLEGAL_CLIENT;
  if (meta->complete) return ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
  ReleaseObject(locked.shard, key, *meta);
  locked.Erase();
  return ErrorCode::OK;
}

// ---- upserts -------------------------------------------------------------------------

rpc::PutStartResult MasterService::UpsertStart(int64_t writer, const std::string& key,
                                               int64_t size, const rpc::ReplicateConfig& config) {
  StateGate::Shared gate(gate_);
  if (!ValidGroupIds(config, 1)) return PutStartError(ErrorCode::INVALID_PARAMS);
  const std::string* group = GroupAsked(config);
  ErrorCode rc = ValidatePut(writer, key, size, config);
  if (rc != ErrorCode::OK) return PutStartError(rc);
  ReplicaList reserved;
  rc = ReserveCharged(key, static_cast<uint64_t>(size), config, writer, &reserved);
  if (rc != ErrorCode::OK) return PutStartError(rc);

  LockedKey locked(objects_, key);
  Shard& shard = locked.shard;
  int64_t now = Now();
  ObjectMetadata* existing = locked.object;
  if (existing == nullptr) {
    return StartLocked(locked, writer, static_cast<uint64_t>(size), config, reserved, group);
  }
  auto pending = shard.upserts.find(key);
  bool busy = !existing->complete ||
              (pending != shard.upserts.end() &&
               now - pending->second.start_ms < options_.put_start_discard_timeout_ms);
  if (busy || !UpsertKeepsGroup(key, *existing, group)) {
    FreeReplicas(reserved);
    tenants_.Add(key, 0, -MemoryBytes(static_cast<uint64_t>(size), reserved));
    return PutStartError(busy ? ErrorCode::REPLICA_IS_NOT_READY : ErrorCode::INVALID_PARAMS);
  }
  DropPendingUpsert(shard, key);  // an abandoned earlier upsert
  PendingUpsert& up = shard.upserts[key];
  up.writer = writer;
  up.start_ms = now;
  up.size = static_cast<uint64_t>(size);
  up.hard_pin = config.with_hard_pin;
  ResolveSoftPin(config, &up.soft_pin);  // ValidatePut accepted it
  up.offload = WantsOffload(config);
  for (size_t i = 0; i < reserved.size(); ++i) up.replicas.push_back(reserved[i]);
  rpc::PutStartResult result;
  result.code = ToInt(ErrorCode::OK);
  result.master_epoch = epoch_;
  DescribeReplicas(up.replicas, up.size, /*include_processing=*/true, &result.replicas);
  return result;
}

ErrorCode MasterService::UpsertEnd(int64_t writer, const std::string& key, int64_t checksum,
                                   CacheHolderSet* holders) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key) || !ValidChecksum(checksum)) return ErrorCode::INVALID_PARAMS;
  {
    LockedKey locked(objects_, key);
    Shard& shard = locked.shard;
    auto pending = shard.upserts.find(key);
    if (pending != shard.upserts.end()) {
      PendingUpsert& up = pending->second;
      if (up.writer != writer) return ErrorCode::ILLEGAL_CLIENT;
      if (locked.object == nullptr) {  // removed meanwhile: the new value is dropped too
        DropPendingUpsert(shard, key);
        return ErrorCode::OBJECT_NOT_FOUND;
      }
      ObjectMetadata& meta = *locked.object;
      int64_t now = Now();
      // The old value's disk replicas and offload go with it.
      disk_tier_.EndOffload(shard, key, &meta, /*failed=*/false);
      DropPendingPromotion(shard, key);
      disk_tier_.Count(meta, -1);
      const bool offload = up.offload;
      ReplicaList old = std::move(meta.replicas);
      int64_t old_lease = meta.time_ms;
      tenants_.Add(key, 0, -MemoryBytes(meta.size, old));  // the new value's were charged
      meta.replicas = std::move(up.replicas);
      for (size_t i = 0; i < meta.replicas.size(); ++i) {
        meta.replicas[i].status = ReplicaStatus::kComplete;
      }
      meta.size = up.size;
      meta.set_checksum(checksum);
      meta.writer = writer;
      // Mooncake's rules: a hard pin survives the upsert; the soft pin is kept (PRESERVE,
      // until its deadline, which does not move), set anew from now (ENABLE) or dropped.
      meta.hard_pin = meta.hard_pin || up.hard_pin;
      if (up.soft_pin.action == SoftPin::kEnable) {
        meta.soft_pin_ms = up.soft_pin.ttl_ms > 0 ? now + up.soft_pin.ttl_ms : 0;
      } else if (up.soft_pin.action == SoftPin::kDisable || meta.soft_pin_ms <= now) {
        meta.soft_pin_ms = 0;
      }
      shard.upserts.erase(pending);
      DropPendingMove(shard, key);  // it was copying the old value
      ForgetExistHit(shard, meta);  // a new value: written now
      CacheHolderSet ignored;
      TakeHolders(shard, meta, now, 0, holders != nullptr ? holders : &ignored);
      // Readers holding a lease may still read the old bytes, and until the new value's
      // record is on disk a restart would bring the old one back.
      DeferFree(old, std::max(now, old_lease), LogPublish(key, meta));
      if (offload) disk_tier_.QueueOffload(shard, key, meta, /*for_eviction=*/false);
      return ErrorCode::OK;
    }
    if (locked.object != nullptr && locked.object->complete) {
      // No upsert of this key is open: it was dropped (its segment went, its writer was
      // revoked, it was abandoned, the master restarted) or it was published already and
      // this is a retry. Only the retry may answer OK: the object must hold this writer's
      // value with this checksum. Anything else would acknowledge a value nobody stored
      // (a writer that wrote the previous value too would pass PutEnd's retry check).
      const ObjectMetadata& meta = *locked.object;
      const bool published =
          meta.writer == writer && checksum >= 0 && meta.checksum_or_none() == checksum;
      return published ? ErrorCode::OK : ErrorCode::ILLEGAL_CLIENT;
    }
  }
  return PutEnd(writer, key, checksum);  // the upsert created a new object
}

ErrorCode MasterService::UpsertRevoke(int64_t writer, const std::string& key) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ErrorCode::INVALID_PARAMS;
  {
    LockedKey locked(objects_, key);
    Shard& shard = locked.shard;
    auto pending = shard.upserts.find(key);
    if (pending != shard.upserts.end()) {
      if (pending->second.writer != writer) return ErrorCode::ILLEGAL_CLIENT;
      FreeReplicas(pending->second.replicas);
      tenants_.Add(key, 0, -MemoryBytes(pending->second.size, pending->second.replicas));
      shard.upserts.erase(pending);
      return ErrorCode::OK;
    }
  }
  return PutRevoke(writer, key);
}

// ---- reads ---------------------------------------------------------------------------

rpc::ReplicaListResult MasterService::GetReplicaList(const std::string& key, int64_t reader) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ReplicaListError(ErrorCode::INVALID_PARAMS);
  // The other members of a grouped object's group get its lease, once its shard is let go.
  std::vector<std::string> group;
  int64_t until = 0;
  rpc::ReplicaListResult listed = [&] {
    LockedKey locked(objects_, key);
    if (locked.object == nullptr) return ReplicaListError(ErrorCode::OBJECT_NOT_FOUND);
    ObjectMetadata& meta = *locked.object;
    if (!meta.complete) return ReplicaListError(ErrorCode::REPLICA_IS_NOT_READY);
    int64_t now = Now();
    if (meta.time_ms <= now) meta.untracked_holders = false;  // every earlier lease has ended
    ForgetExistHit(locked.shard, meta);  // the read lease covers an exist lease, and the
                                         // next hit counts again
    until = now + options_.default_kv_lease_ttl_ms;
    if (meta.grouped) {
      // Renewed with it when its own lease was past half its TTL (Mooncake's rule), or when
      // the group gained a member since.
      bool renew = meta.time_ms <= now + options_.default_kv_lease_ttl_ms / 2;
      group = groups_.OthersOf(key, renew ? GroupTable::Share::kLease
                                          : GroupTable::Share::kLeaseIfFresh);
    }
    meta.time_ms = std::max(meta.time_ms, until);
    meta.unread = false;
    // A soft pin's deadline is fixed at publication (Mooncake's rule): reads do not move it.
    rpc::ReplicaListResult result;
    DescribeReplicas(meta.replicas, meta.size, /*include_processing=*/false, &result.replicas);
    // Restored, and no daemon holding a replica has re-attached yet.
    if (result.replicas.empty()) return ReplicaListError(ErrorCode::REPLICA_IS_NOT_READY);
    if (reader != 0) {
      if (!meta.untracked_holders && !locked.shard.holders.Grant(&meta, reader, until, now)) {
        meta.untracked_holders = true;
      }
      // A reader the registry does not list (declared dead and not told yet) would be left
      // out of "every daemon": remember that one may hold an untracked object until then.
      if (meta.untracked_holders && !daemons_.Known(reader)) ExtendUnlisted(until);
    }
    result.code = ToInt(ErrorCode::OK);
    result.size = static_cast<int64_t>(meta.size);
    result.lease_ttl_ms = options_.default_kv_lease_ttl_ms;
    result.checksum = meta.checksum_or_none();
    result.master_epoch = epoch_;
    // Served from disk only: the reader may re-create a memory replica, unless one is on
    // its way (another reader's promotion, or a put's).
    result.promote = options_.promotion_on_hit && meta.memory_replicas() == 0 &&
                     (locked.shard.promotions.empty() || locked.shard.promotions.count(key) == 0);
    return result;
  }();
  if (!group.empty() && listed.code == ToInt(ErrorCode::OK)) ShareWithGroup(group, until);
  return listed;
}

int32_t MasterService::ExistKey(const std::string& key) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ToInt(ErrorCode::INVALID_PARAMS);
  std::vector<std::string> group;  // the rest of its group, when the hit counted as a use
  {
    LockedKey locked(objects_, key);
    ObjectMetadata* meta = locked.object;
    if (meta == nullptr || !meta->complete) return 0;
    if ((segments_.detached_count() > 0 || meta->disk_replicas() > 0) &&
        !Readable(meta->replicas)) {
      return 0;
    }
    int64_t now = Now();
    bool counts = !meta->exist_hit && !meta->leased(now);
    CountExistHit(locked.shard, *meta, now);
    if (counts && meta->grouped) group = groups_.OthersOf(key);
  }
  if (!group.empty()) ShareWithGroup(group, 0);
  return 1;
}

void MasterService::CountExistHit(Shard& shard, ObjectMetadata& meta, int64_t now) {
  // Once per access: a poller that never reads cannot keep an object young. A read lease
  // running covers the hit.
  if (meta.exist_hit || meta.leased(now)) return;
  meta.exist_hit = true;
  // A use, as eviction orders objects, and no lease: a deadline of now is already past.
  meta.time_ms = now;
  eviction_.counters().ExistUse();
  int64_t ttl = std::min(options_.exist_lease_ttl_ms, options_.default_kv_lease_ttl_ms);
  // Full: answered, protected by its use alone.
  if (ttl > 0 && shard.exist_leases.Grant(&meta, now + ttl, now)) eviction_.counters().ExistLease();
}

// ---- removal -------------------------------------------------------------------------

ErrorCode MasterService::Remove(const std::string& key, bool force, CacheHolderSet* holders,
                                int32_t key_index) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ErrorCode::INVALID_PARAMS;
  LockedKey locked(objects_, key);
  DiscardParked(key);  // a removed key never comes back (master/liveness/parked_segments.h)
  ObjectMetadata* meta = locked.object;
  if (meta == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  if (!meta->complete) return ErrorCode::REPLICA_IS_NOT_READY;
  if (!force && meta->leased(Now())) return ErrorCode::OBJECT_HAS_LEASE;
  if (!force && meta->hard_pin) return ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
  CacheHolderSet ignored;
  TakeHolders(locked.shard, *meta, Now(), key_index, holders != nullptr ? holders : &ignored);
  RemoveLogged(locked.shard, key, *meta);
  locked.Erase();
  return ErrorCode::OK;
}

// ---- read caches -----------------------------------------------------------------------

namespace {

rpc::CacheHolder Describe(int64_t daemon, std::string address, const CacheHolderSet::Holder& h,
                          int64_t now, bool with_keys) {
  rpc::CacheHolder out;
  out.daemon_id = daemon;
  out.address = std::move(address);
  out.ms_left = h.until_ms - now;
  if (with_keys) out.keys = h.keys;
  return out;
}

}  // namespace

std::vector<rpc::CacheHolder> MasterService::DescribeHolders(const CacheHolderSet& holders,
                                                             int64_t caller,
                                                             bool with_keys) const {
  StateGate::Shared gate(gate_);
  std::vector<rpc::CacheHolder> out;
  if (!holders.changed()) return out;
  int64_t now = Now();
  // Who cannot be told, only waited for: holders the registry forgot, and the blind spots.
  CacheHolderSet::Holder unreachable;
  std::map<int64_t, CacheHolderSet::Holder> reachable;
  std::map<int64_t, std::string> names;
  for (const auto& [daemon, h] : holders.daemons()) {
    if (daemon == caller || h.until_ms <= now) continue;
    std::string name;
    if (daemons_.NameOf(daemon, &name)) {
      names[daemon] = name;
      CacheHolderSet::Merge(h, &reachable[daemon]);
    } else {
      CacheHolderSet::Merge(h, &unreachable);
    }
  }
  const CacheHolderSet::Holder& everyone = holders.everyone();
  if (everyone.until_ms > now) {
    for (const auto& [daemon, name] : daemons_.List()) {
      if (daemon == caller) continue;
      names[daemon] = name;
      CacheHolderSet::Merge(everyone, &reachable[daemon]);
    }
    int64_t unlisted = unlisted_until_ms_.load();
    if (unlisted > now) {
      CacheHolderSet::Holder blind = everyone;
      blind.until_ms = std::min(everyone.until_ms, unlisted);
      CacheHolderSet::Merge(blind, &unreachable);
    }
  }
  if (restore_fence_ms_ > now) {
    CacheHolderSet::Holder blind;
    blind.until_ms = restore_fence_ms_;
    CacheHolderSet::Merge(blind, &unreachable);
  }
  for (const auto& [daemon, h] : reachable) {
    out.push_back(Describe(daemon, names[daemon], h, now, with_keys));
  }
  if (unreachable.until_ms > now) out.push_back(Describe(0, "", unreachable, now, with_keys));
  return out;
}

size_t MasterService::cache_holder_records() const { return objects_.cache_holder_records(); }

}  // namespace mooncake
