#include "daemon/service/store_service.h"

#include <cstring>

#include "common/base/crc32c.h"
#include "common/base/logging.h"
#include "common/base/master_endpoint.h"
#include "common/base/tenant_key.h"
#include "common/base/units.h"
#include "daemon/transfer/daemon_metrics.h"
#include "daemon/base/tenant_scope.h"
#include "include/mooncake_store.h"

namespace mooncake {

using uds::Op;
using namespace store_detail;

namespace store_detail {

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= tenant_key::kMaxStoredKeyLen;
}

ValidKeys PickValidKeys(const std::vector<std::string>& batch) {
  ValidKeys valid;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!ValidKey(batch[i])) continue;
    valid.keys.push_back(batch[i]);
    valid.index.push_back(i);
  }
  return valid;
}

bool ValidSize(uint64_t size) { return size >= 1 && size <= MOONCAKE_STORE_MAX_VALUE_SIZE; }

namespace {

struct Refusal {
  ErrorCode code = ErrorCode::OK;
  std::string why;
};
thread_local Refusal t_refusal;

}  // namespace

ErrorCode Refuse(ErrorCode code, std::string why) {
  t_refusal.code = code;
  t_refusal.why = std::move(why);
  return code;
}

std::string TakeRefusal(ErrorCode code) {
  std::string why;
  if (t_refusal.code == code && code != ErrorCode::OK) why.swap(t_refusal.why);
  t_refusal.code = ErrorCode::OK;
  t_refusal.why.clear();
  return why;
}

ErrorCode RefuseSize(uint64_t size) {
  return Refuse(ErrorCode::INVALID_PARAMS,
                "value size " + std::to_string(size) + " is not 1 byte to 4 GiB");
}

ErrorCode RefusePoolRange(const ClientConnection* s, uint64_t offset, uint64_t length) {
  return Refuse(ErrorCode::INVALID_PARAMS,
                "pool range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") is not inside the connection's pool of " +
                    std::to_string(s->pool_size()) + " bytes");
}

ErrorCode RefuseConfig(const uds::WireConfig& wire) {
  std::string why = "config: ";
  if (wire.replica_num < 1 || wire.replica_num > 64) {
    why += "replica_num " + std::to_string(wire.replica_num) + " is not 1..64";
  } else if (wire.offload > 2) {
    why += "offload " + std::to_string(wire.offload) + " is not 0..2";
  } else if (wire.soft_pin_action > 2) {
    why += "soft_pin_action " + std::to_string(wire.soft_pin_action) + " is not 0..2";
  } else if (!ValidGroup(wire)) {
    why += "group id: " + tenant_key::UserKeyProblem(wire.group);
    if (!wire.group_given) why = "config: a group id without group_given";
  } else {
    why += "soft_pin_ttl_ms " + std::to_string(wire.soft_pin_ttl_ms) + " is too large";
  }
  return Refuse(ErrorCode::INVALID_PARAMS, std::move(why));
}

ErrorCode RefuseStagedId(const char* kind, uint64_t id) {
  return Refuse(ErrorCode::INVALID_PARAMS, std::string(kind) + " id " + std::to_string(id) +
                                               " is not open on this connection");
}

bool ValidGroup(const uds::WireConfig& wire) {
  if (wire.group.empty()) return true;
  return wire.group_given && tenant_key::ValidUserKey(wire.group);
}

bool ToRpcConfig(const uds::WireConfig& wire, rpc::ReplicateConfig* out) {
  if (wire.replica_num < 1 || wire.replica_num > 64) return false;
  if (wire.offload > 2 || wire.soft_pin_action > 2) return false;
  if (wire.soft_pin_ttl_ms > static_cast<uint64_t>(INT64_MAX)) return false;
  if (!ValidGroup(wire)) return false;
  out->replica_num = static_cast<int32_t>(wire.replica_num);
  out->soft_pin_action = static_cast<int32_t>(wire.soft_pin_action);
  out->with_soft_pin = wire.soft_pin_action == 1;  // for a master that predates the action
  out->soft_pin_ttl_given = wire.soft_pin_ttl_given;
  out->soft_pin_ttl_ms = wire.soft_pin_ttl_given ? static_cast<int64_t>(wire.soft_pin_ttl_ms) : 0;
  out->with_hard_pin = wire.with_hard_pin;
  out->preferred_segments = wire.preferred_segments;
  out->offload = static_cast<int32_t>(wire.offload);
  out->prefer_local = wire.prefer_local;
  out->group_ids.clear();
  if (wire.group_given) out->group_ids.push_back(wire.group);
  return true;
}

}  // namespace store_detail

namespace {

// The endpoint of the daemon's --master (resolved at start, on the main thread); the text
// itself when it does not resolve, so that a HELLO then matches nothing but that text.
std::string MasterEndpoint(const std::string& master) {
  std::string endpoint, error;
  if (CanonicalMasterEndpoint(master, HostLookup::kResolve, &endpoint, &error)) return endpoint;
  MC_LOG_WARN("--master %s: %s; clients naming a master must name it exactly so",
              master.c_str(), error.c_str());
  return master;
}

// Whether theirs, a HELLO's master (libmc sends it resolved), is the endpoint ours; false
// with *why. Their text is the peer's: it is read as a numeric address only (the HELLO is
// handled on the socket's thread, which must not wait for DNS), and shown only as such.
bool SameMaster(const std::string& theirs, const std::string& ours, const std::string& flag,
                std::string* why) {
  std::string endpoint, error;
  bool numeric = CanonicalMasterEndpoint(theirs, HostLookup::kNumericOnly, &endpoint, &error);
  if (numeric ? endpoint == ours : theirs == ours) return true;
  *why = "client expects master " +
         (numeric ? endpoint : "of " + std::to_string(theirs.size()) + " bytes, not an address") +
         ", daemon uses " + ours + " (--master " + flag + "): pass setup() the daemon's " +
         "master as master_server_addr, or leave it empty";
  return false;
}

}  // namespace

StoreService::StoreService(MasterClient* master, Membership* membership, ReadCache* cache,
                           CacheInvalidator* invalidator, ReplicaIO* io,
                           SegmentDrainer* drainer, std::string master_address, bool checksum,
                           std::shared_ptr<SegmentBudget> segment_budget,
                           int64_t put_no_space_wait_ms, TenantPolicy tenants,
                           size_t group_commit_max, int64_t spin_us)
    : master_(master),
      batcher_(master, group_commit_max, spin_us * 1000),
      membership_(membership),
      cache_(cache),
      invalidator_(invalidator),
      io_(io),
      drainer_(drainer),
      master_address_(std::move(master_address)),
      master_endpoint_(MasterEndpoint(master_address_)),
      checksum_(checksum),
      segment_budget_(std::move(segment_budget)),
      put_no_space_wait_ms_(put_no_space_wait_ms),
      tenants_(std::move(tenants)),
      promoter_(master, membership, io) {}

int64_t StoreService::ValueChecksum(const ValueSlice& written) const {
  if (!checksum_) return -1;
  if (written.crc >= 0) return written.crc;
  return static_cast<int64_t>(Crc32c(written.pool, written.length));
}

bool StoreService::Hello(ClientConnection* s, const uds::Message& hello, std::vector<int> fds,
                         std::string* why) {
  uds::HelloArgs in;
  if (!uds::ParseFields(hello.args, &in)) {
    for (int fd : fds) close(fd);
    *why = "malformed HELLO";
    return false;
  }
  ErrorCode refusal = ErrorCode::INVALID_PARAMS;
  std::string master_check;
  Result<std::string> tenant = tenants_.Resolve(in.tenant, s->peer_uid());
  if (in.abi_version != MOONCAKE_STORE_ABI_VERSION) {
    *why = "ABI version " + std::to_string(in.abi_version) + ", daemon speaks " +
           std::to_string(MOONCAKE_STORE_ABI_VERSION) +
           ": libmooncake_store and mooncaked must come from one release (upgrade the older)";
  } else if (!in.master_address.empty() && !SameMaster(in.master_address, master_endpoint_,
                                                        master_address_, &master_check)) {
    *why = master_check;
  } else if (!tenant.ok()) {
    refusal = tenant.code();
    // Only a well-formed id is shown: it is the peer's input.
    *why = refusal == ErrorCode::PERMISSION_DENIED
               ? tenants_.Refusal(in.tenant, s->peer_uid())
               : "a tenant id of " + std::to_string(in.tenant.size()) +
                     " bytes that is not 1..64 characters of [A-Za-z0-9_.-]";
  } else if (fds.size() > 1 || (in.pool_size == 0) != fds.empty()) {
    *why = in.pool_size == 0
               ? "a pool fd came with pool_size 0"
               : "pool_size " + std::to_string(in.pool_size) + " needs exactly one fd";
  } else if (in.pool_size == 0 || s->AttachPool(fds[0], in.pool_size, why)) {
    fds.clear();  // the client owns the pool fd now
    // Remote reads land in the pool and remote writes leave from it: RDMA must know it,
    // as memory no peer may address.
    char* pool = s->PoolRange(0, in.pool_size);
    if (pool != nullptr && io_->engine()->RegisterMemory(pool, in.pool_size,
                                                         MemoryAccess::kLocalOnly) !=
                               ErrorCode::OK) {
      *why = "the pool could not be registered with the transfer engine";
      uds::ReplyFrame refusal(hello.id, ErrorCode::TRANSFER_FAIL, uds::NoReply(), *why);
      s->Send(&refusal);
      return false;
    }
    s->set_tenant(tenant.value());
    if (!tenant.value().empty()) {
      MC_LOG_DEBUG("connection %llu (pid %d, uid %d) is tenant '%s'",
                   static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()),
                   static_cast<int>(s->peer_uid()), tenant.value().c_str());
    }
    uds::HelloReply out;
    out.hostname = membership_->name();
    out.daemon_id = static_cast<uint64_t>(membership_->daemon_id());
    uds::ReplyFrame reply(hello.id, ErrorCode::OK, out);
    if (!s->Send(&reply)) {
      *why = "HELLO reply could not be sent";
      return false;
    }
    s->set_greeted();
    DaemonMetrics::Get().clients()->Add(1);
    return true;
  } else {
    fds.clear();  // AttachPool closed it
  }
  for (int fd : fds) close(fd);
  uds::ReplyFrame reply(hello.id, refusal, uds::NoReply(), *why);
  s->Send(&reply);
  return false;
}

template <Op op>
bool StoreService::Run(ClientConnection* s, const uds::Message& request,
                       ErrorCode (StoreService::*handler)(ClientConnection*,
                                                          const typename uds::OpSpec<op>::Args&,
                                                          typename uds::OpSpec<op>::Reply*)) {
  const int64_t start_ns = MonotonicNanos();
  typename uds::OpSpec<op>::Args in;
  if (!uds::ParseFields(request.args, &in)) return false;
  std::string bad_key;
  ScopeKeys(s->tenant(), &in, &bad_key);
  typename uds::OpSpec<op>::Reply out;
  TakeRefusal(ErrorCode::OK);  // nothing an earlier request of this thread left
  ReplicaIO::DiskReadSink disk_reads(s->disk_read_counter());
  ErrorCode code = (this->*handler)(s, in, &out);
  std::string reason = TakeRefusal(code);
  // A single key's -600 is its key's, unless the handler said otherwise (a batch answers
  // its entries' -600 inside a reply whose code is 0).
  if (reason.empty() && code == ErrorCode::INVALID_PARAMS) reason = std::move(bad_key);
  uds::ReplyFrame reply(request.id, code, out, reason);
  // Counted before the reply leaves: a client holding its answer finds it in /metrics.
  DaemonMetrics::Get().CountRequest(static_cast<int64_t>(op), code, start_ns);
  s->Send(&reply);
  return true;
}

bool StoreService::Handle(ClientConnection* s, const uds::Message& m, std::string* why) {
  switch (m.head) {
#define MC_UDS_DISPATCH_(name, wire, code, args, reply, note)                  \
  case code:                                                                   \
    if (Run<Op::k##name>(s, m, &StoreService::On##name)) return true;         \
    *why = "malformed arguments for " wire;                                    \
    return false;
    MC_UDS_OPS(MC_UDS_DISPATCH_)
#undef MC_UDS_DISPATCH_
    default:
      *why = "unexpected op " + std::to_string(m.head);
      return false;
  }
}

ErrorCode StoreService::OnHostname(ClientConnection*, const uds::NoArgs&, uds::HostnameReply* out) {
  out->hostname = membership_->name();
  return ErrorCode::OK;
}

ErrorCode StoreService::OnClientStats(ClientConnection* s, const uds::NoArgs&,
                                      uds::ClientStatsReply* out) {
  out->disk_reads = s->disk_reads();
  return ErrorCode::OK;
}

ErrorCode StoreService::OnHealth(ClientConnection*, const uds::NoArgs&, uds::HealthReply* out) {
  out->master_reachable = membership_->healthy() ? 1 : 0;
  return ErrorCode::OK;
}

void StoreService::Teardown(ClientConnection* s) {
  if (s->greeted()) DaemonMetrics::Get().clients()->Add(-1);
  size_t revoked = 0;
  for (const auto& put : s->TakeAllPuts()) {
    std::unique_lock<std::shared_mutex> lock(put->mu);
    if (put->finished) continue;
    put->finished = true;
    RevokePut(put->key, put->upsert);
    ++revoked;
  }
  s->ClearGets();
  // A client that closed without UNMOUNT_SEGMENTS (it crashed, or never asked): the memory
  // is ours, so its objects can still be moved out.
  std::vector<int64_t> segments = s->TakeSegments();
  DrainSegments(segments);
  char* pool = s->PoolRange(0, s->pool_size());
  if (pool != nullptr) io_->engine()->UnregisterMemory(pool);
  s->UnmapPool();
  if (revoked > 0 || !segments.empty()) {
    MC_LOG_INFO("connection %llu (pid %d) closed: %zu staged puts revoked, %zu segments unmounted",
                static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()),
                revoked, segments.size());
  } else {
    MC_LOG_DEBUG("connection %llu (pid %d) closed", static_cast<unsigned long long>(s->id()),
                 static_cast<int>(s->peer_pid()));
  }
}

// ---- queries and removal ----

ErrorCode StoreService::OnExist(ClientConnection*, const uds::KeyArgs& in, uds::ExistReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  ReadCache::Entry cached;
  if (cache_->Lookup(in.key, &cached)) {
    out->present = 1;
    return ErrorCode::OK;
  }
  Result<bool> found = master_->ExistKey(in.key);
  out->present = found.ok() && found.value() ? 1 : 0;
  return found.code();
}

ErrorCode StoreService::OnBatchExist(ClientConnection*, const uds::BatchExistArgs& in,
                                     uds::BatchExistReply* out) {
  std::vector<int64_t>& results = out->values;
  results.assign(in.keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
  std::vector<std::string> keys;
  std::vector<size_t> index;
  ReadCache::Entry cached;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& key = in.keys[i];
    if (!ValidKey(key)) continue;
    if (cache_->Lookup(key, &cached)) {
      results[i] = 1;
      continue;
    }
    keys.push_back(key);
    index.push_back(i);
  }
  if (!keys.empty()) {
    std::vector<int32_t> found;
    ErrorCode rc = master_->BatchExistKey(keys, &found);
    for (size_t j = 0; j < index.size(); ++j) {
      results[index[j]] = rc != ErrorCode::OK ? ToInt(rc) : found[j];
    }
  }
  return ErrorCode::OK;
}

ErrorCode StoreService::OnGetSize(ClientConnection*, const uds::KeyArgs& in, uds::SizeReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  ReadCache::Entry cached;
  if (cache_->Lookup(in.key, &cached)) {
    out->size = cached.size;
    return ErrorCode::OK;
  }
  ReadCache::Ticket ticket = cache_->Begin(in.key);
  auto asked_at = std::chrono::steady_clock::now();
  rpc::ReplicaListResult list;
  ErrorCode code = master_->GetReplicaList(in.key, CacheReader(), &list);
  std::vector<ReplicaTarget> candidates;
  uint64_t size = 0;
  // Only to remember where the bytes are: the size is the answer whoever holds them. Not
  // a local replica of an object with a checksum: cached local reads do not verify it.
  if (code == ErrorCode::OK && Locate(in.key, list, &candidates, &size) == ErrorCode::OK &&
      (list.checksum < 0 || !candidates[0].local())) {
    Remember(in.key, ticket, candidates[0], size, asked_at, list.lease_ttl_ms, list.checksum);
  }
  out->size = list.size > 0 ? static_cast<uint64_t>(list.size) : 0;
  return code;
}

void StoreService::ForgetEverywhere(const StaleCaches& stale, const std::vector<std::string>& keys,
                                    bool everything) {
  // Here whatever the outcome (a -900 may hide a change that happened): the writer's next
  // read must not come from the cache.
  if (everything) {
    cache_->Clear();  // cheaper than matching a pattern against every entry
  } else {
    for (const std::string& key : keys) cache_->Invalidate(key);
  }
  invalidator_->Forget(stale, keys, everything);
}

ErrorCode StoreService::OnRemove(ClientConnection*, const uds::RemoveArgs& in, uds::NoReply*) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  StaleCaches stale;
  ErrorCode code = master_->Remove(in.key, in.force.value, membership_->daemon_id(), &stale);
  ForgetEverywhere(stale, {in.key}, false);
  return code;
}

ErrorCode StoreService::OnBatchRemove(ClientConnection*, const uds::BatchRemoveArgs& in,
                                      uds::BatchRemoveReply* out) {
  out->values.assign(in.keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
  ValidKeys valid = PickValidKeys(in.keys);
  if (valid.keys.empty()) return ErrorCode::OK;
  std::vector<ErrorCode> codes;
  StaleCaches stale;  // its key indices are into valid.keys
  ErrorCode rc = master_->BatchRemove(valid.keys, in.force.value, membership_->daemon_id(),
                                      &codes, &stale);
  ForgetEverywhere(stale, valid.keys, false);
  for (size_t j = 0; j < valid.index.size(); ++j) {
    out->values[valid.index[j]] = ToInt(rc != ErrorCode::OK ? rc : codes[j]);
  }
  return ErrorCode::OK;
}

ErrorCode StoreService::OnRemoveByRegex(ClientConnection* s, const uds::RemoveByRegexArgs& in,
                                        uds::CountReply* out) {
  // The master refuses it too; refused here, it costs neither an RPC nor a cache.
  if (in.pattern.size() > MOONCAKE_STORE_MAX_PATTERN_LEN) {
    MC_LOG_WARN("connection %llu: REMOVE_BY_REGEX refused: a pattern of %zu bytes, more than %d",
                static_cast<unsigned long long>(s->id()), in.pattern.size(),
                MOONCAKE_STORE_MAX_PATTERN_LEN);
    return Refuse(ErrorCode::INVALID_PARAMS,
                  "pattern longer than " + std::to_string(MOONCAKE_STORE_MAX_PATTERN_LEN) +
                      " bytes (" + std::to_string(in.pattern.size()) + ")");
  }
  StaleCaches stale;
  Result<uint64_t> removed = master_->RemoveByRegex(in.pattern, in.force.value,
                                                    membership_->daemon_id(), s->tenant(), &stale);
  ForgetEverywhere(stale, {}, true);
  out->count = removed.value();
  return removed.code();
}

ErrorCode StoreService::OnRemoveAll(ClientConnection* s, const uds::RemoveAllArgs& in,
                                    uds::CountReply* out) {
  StaleCaches stale;
  Result<uint64_t> removed =
      master_->RemoveAll(in.force.value, membership_->daemon_id(), s->tenant(), &stale);
  ForgetEverywhere(stale, {}, true);
  out->count = removed.value();
  return removed.code();
}

SegmentDrainer::Outcome StoreService::DrainSegments(const std::vector<int64_t>& segments) {
  SegmentDrainer::Outcome total;
  for (int64_t segment : segments) {
    SegmentDrainer::Outcome drained = drainer_->DrainAndUnmount(segment);
    // Forgotten here only after Membership stopped resolving it and the master dropped
    // its objects, so no fill can bring an entry for it back.
    cache_->DropSegment(segment);
    total.moved += drained.moved;
    total.shed += drained.shed;
    total.dropped += drained.dropped;
  }
  return total;
}

ErrorCode StoreService::OnUnmountSegments(ClientConnection* s, const uds::NoArgs&,
                                          uds::UnmountSegmentsReply* out) {
  SegmentDrainer::Outcome drained = DrainSegments(s->TakeSegments());
  out->moved = drained.moved;
  out->dropped = drained.dropped;
  return ErrorCode::OK;
}

ErrorCode StoreService::OnMountSegment(ClientConnection* s, const uds::MountSegmentArgs& in,
                                       uds::NoReply*) {
  int64_t segment_id = 0;
  return MountDaemonMemory(s, in.size, "MOUNT_SEGMENT", &segment_id);
}

}  // namespace mooncake
