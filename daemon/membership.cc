#include "daemon/cluster/membership.h"

#include <chrono>
#include <random>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/logging.h"

namespace mooncake {

int64_t RandomId() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}() ^
                             static_cast<uint64_t>(
                                 std::chrono::steady_clock::now().time_since_epoch().count())};
  std::lock_guard<std::mutex> lock(mu);
  for (;;) {
    int64_t id = static_cast<int64_t>(rng() & INT64_MAX);
    if (id != 0) return id;
  }
}

Membership::Membership(MasterClient* master, TransferEngine* engine, std::string name,
                       int64_t heartbeat_interval_ms)
    : master_(master),
      engine_(engine),
      name_(std::move(name)),
      daemon_id_(RandomId()),
      incarnation_(RandomId()),
      heartbeat_interval_ms_(heartbeat_interval_ms),
      verifier_(std::make_unique<SegmentVerifier>(
          master, daemon_id_, [this](int64_t id) { return Find(id); })) {
  master_->SetLeaderChangeHandler([this](const MasterLeader& leader) {
    if (!leader.known()) return;  // an election: the next leader is what matters
    std::lock_guard<std::mutex> lock(heartbeat_mu_);
    heartbeat_now_ = true;
    heartbeat_cv_.notify_all();
  });
}

Membership::~Membership() {
  master_->SetLeaderChangeHandler(nullptr);
  StopHeartbeat();
  verifier_->Stop();
}

bool Membership::RegisterWithRetry(const std::atomic<bool>& stop) {
  int64_t backoff_ms = 50;
  while (!stop.load()) {
    ErrorCode code = master_->RegisterDaemon(daemon_id_, name_);
    if (code == ErrorCode::OK) {
      healthy_ = true;
      gate_.Set(LearnEpoch());
      MC_LOG_INFO("registered with the master as daemon %lld (%s)",
                  static_cast<long long>(daemon_id_), name_.c_str());
      return true;
    }
    std::string why = code == ErrorCode::RPC_FAIL ? MasterClient::LastError()
                                                         : ErrorName(code);
    MC_LOG_WARN("cannot register with the master: %s; retrying in %lld ms", why.c_str(),
                static_cast<long long>(backoff_ms));
    // Sleep in small steps so that SIGTERM during start-up is honoured quickly.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms);
    while (!stop.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 2000);
  }
  return false;
}

void Membership::ReclaimPredecessors(int64_t keep_disk_segment) {
  std::vector<rpc::SegmentInfo> all;
  // Best effort; the master's TTL remains.
  if (master_->GetAllSegments(&all) != ErrorCode::OK) return;
  for (const auto& s : all) {
    if (s.name != name_ || s.daemon_id == daemon_id_) continue;
    if (s.kind == rpc::ReplicaKind::LOCAL_DISK && s.segment_id == keep_disk_segment) continue;
    ErrorCode code = master_->UnmountSegment(s.daemon_id, s.segment_id);
    MC_LOG_INFO("segment %lld left by a previous daemon %lld on %s: unmount %s",
                static_cast<long long>(s.segment_id), static_cast<long long>(s.daemon_id),
                name_.c_str(), ErrorName(code));
  }
}

rpc::SegmentInfo Membership::Describe(int64_t segment_id, const SegmentMemory& memory) const {
  rpc::SegmentInfo info;
  info.segment_id = segment_id;
  info.name = name_;
  info.base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(memory.base()));
  info.size = static_cast<int64_t>(memory.size());
  info.daemon_id = daemon_id_;
  info.incarnation = incarnation_;
  info.endpoints = engine_->DescribeSegment(memory.base(), memory.size());
  std::shared_lock<std::shared_mutex> lock(segments_mu_);
  auto lent = lent_.find(segment_id);
  info.lent_by_client = lent != lent_.end();
  if (info.lent_by_client && !lent->second.name.empty()) {
    info.name = lent->second.name;
    info.lender = lent->second.pid;
  }
  return info;
}

rpc::SegmentInfo Membership::DescribeDisk(const DiskSegment& disk) const {
  rpc::SegmentInfo info;
  info.segment_id = disk.id;
  info.name = name_;
  info.base = 0;
  info.size = static_cast<int64_t>(disk.size);
  info.daemon_id = daemon_id_;
  info.incarnation = disk.incarnation;
  info.kind = rpc::ReplicaKind::LOCAL_DISK;
  // Disk replicas are read with READ_DISK, over TCP only (also when RDMA is in use).
  info.endpoints.resize(1);
  engine_->tcp()->DescribeSegment(nullptr, disk.size, &info.endpoints[0]);
  return info;
}

ErrorCode Membership::MountDisk(const DiskSegment& disk) {
  {
    std::unique_lock<std::shared_mutex> lock(segments_mu_);
    disk_ = disk;
  }
  // SEGMENT_ALREADY_EXISTS is a refusal here: the id is known under another name or
  // incarnation, or still attached to a live daemon (a memory segment's is a race with a
  // concurrent re-registration, which a disk segment, mounted once, does not have).
  ErrorCode code = master_->MountSegment(DescribeDisk(disk));
  if (code != ErrorCode::OK) return code;
  MC_LOG_INFO("mounted the SSD tier's segment %lld: %llu bytes",
              static_cast<long long>(disk.id), static_cast<unsigned long long>(disk.size));
  if (after_disk_mount_) after_disk_mount_();
  return ErrorCode::OK;
}

ErrorCode Membership::UnmountDisk() {
  int64_t id = 0;
  {
    std::unique_lock<std::shared_mutex> lock(segments_mu_);
    id = disk_.id;
    disk_ = DiskSegment{};
  }
  if (id == 0) return ErrorCode::SEGMENT_NOT_FOUND;
  ErrorCode code = master_->UnmountSegment(daemon_id_, id);
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("unmount of the SSD tier's segment %lld at the master: %s",
                static_cast<long long>(id), ErrorName(code));
  }
  return code;
}

ErrorCode Membership::RetireDisk(const DiskSegment& old) {
  ErrorCode code = master_->MountSegment(DescribeDisk(old));
  if (code == ErrorCode::OK) code = master_->UnmountSegment(daemon_id_, old.id);
  MC_LOG_INFO("the SSD tier's segment %lld of an earlier run (its files wiped): released at "
              "the master: %s",
              static_cast<long long>(old.id), ErrorName(code));
  return code;
}

int64_t Membership::disk_segment_id() const {
  std::shared_lock<std::shared_mutex> lock(segments_mu_);
  return disk_.id;
}

std::vector<Membership::MountedSegment> Membership::Mounted() const {
  std::vector<MountedSegment> out;
  std::shared_lock<std::shared_mutex> lock(segments_mu_);
  for (const auto& [id, memory] : segments_) {
    out.push_back({id, memory->size(), lent_.count(id) > 0, false});
  }
  if (disk_.id != 0) out.push_back({disk_.id, disk_.size, false, true});
  return out;
}

ErrorCode Membership::Mount(std::shared_ptr<SegmentMemory> memory, int64_t* segment_id,
                            bool lent, Lender lender) {
  const bool named = lent && !lender.name.empty();
  int64_t id = RandomId();
  // Registered before it is described: an RDMA endpoint carries the registration's key.
  ErrorCode code = engine_->RegisterMemory(memory->base(), memory->size(), MemoryAccess::kPeers);
  if (code != ErrorCode::OK) return code;
  std::shared_ptr<SegmentMemory> described = memory;
  {
    // Visible before the master hands out ranges in it, and included by a concurrent
    // Reregister (whose mount makes ours answer -102, which is fine).
    std::unique_lock<std::shared_mutex> lock(segments_mu_);
    segments_[id] = std::move(memory);
    if (lent) lent_[id] = named ? std::move(lender) : Lender();
  }
  rpc::SegmentInfo info = Describe(id, *described);
  code = master_->MountSegment(info);
  // A fresh id: -102 is a concurrent Reregister's mount of it, except for a named segment,
  // whose -102 says its name is another client's.
  if (code == ErrorCode::SEGMENT_ALREADY_EXISTS && !named) code = ErrorCode::OK;
  if (code != ErrorCode::OK) {
    char* base = nullptr;
    {
      std::unique_lock<std::shared_mutex> lock(segments_mu_);
      base = segments_[id]->base();
      segments_.erase(id);
      lent_.erase(id);
    }
    engine_->UnregisterMemory(base);
    return code;
  }
  *segment_id = id;
  MC_LOG_INFO("mounted segment %lld: %llu bytes%s%s", static_cast<long long>(id),
              static_cast<unsigned long long>(info.size), named ? ", lent as " : "",
              named ? info.name.c_str() : "");
  return ErrorCode::OK;
}

ErrorCode Membership::Unmount(int64_t segment_id) {
  if (Find(segment_id) == nullptr) return ErrorCode::SEGMENT_NOT_FOUND;
  // The master first: until it has stopped placing replicas in the segment, puts may still
  // be sent here, and must find it (a segment forgotten too early answered them -800).
  ErrorCode code = master_->UnmountSegment(daemon_id_, segment_id);
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("unmount of segment %lld at the master: %s", static_cast<long long>(segment_id),
                ErrorName(code));
  }
  std::shared_ptr<SegmentMemory> gone;
  {
    std::unique_lock<std::shared_mutex> lock(segments_mu_);
    auto it = segments_.find(segment_id);
    if (it == segments_.end()) return code;
    gone = std::move(it->second);
    segments_.erase(it);
    lent_.erase(segment_id);
  }
  // Transfers still running against it fail, and their readers move to another replica.
  engine_->UnregisterMemory(gone->base());
  if (code == ErrorCode::OK) {  // a refusal was logged above
    MC_LOG_INFO("unmounted segment %lld: %llu bytes", static_cast<long long>(segment_id),
                static_cast<unsigned long long>(gone->size()));
  }
  return code;
}

void Membership::UnmountAll() {
  std::vector<int64_t> ids;
  {
    std::shared_lock<std::shared_mutex> lock(segments_mu_);
    for (const auto& s : segments_) ids.push_back(s.first);
  }
  for (int64_t id : ids) Unmount(id);
}

std::shared_ptr<SegmentMemory> Membership::Find(int64_t segment_id) const {
  std::shared_lock<std::shared_mutex> lock(segments_mu_);
  auto it = segments_.find(segment_id);
  return it == segments_.end() ? nullptr : it->second;
}

ErrorCode Membership::Reregister() {
  std::lock_guard<std::mutex> lock(reregister_mu_);
  // After a master restart every request in flight meets -103 at about the same time;
  // one registration serves them all.
  if (std::chrono::steady_clock::now() - last_registered_ < std::chrono::milliseconds(200)) {
    return ErrorCode::OK;
  }
  // Connections opened to the old master are dead.
  master_->DropIdle();
  ErrorCode code = master_->RegisterDaemon(daemon_id_, name_);
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("registering again failed: %s",
                code == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                                                   : ErrorName(code));
    return code;
  }
  // Before anything is mounted there again: from then on the new master may hand our
  // ranges to new objects, so grants of the old master are refused from now on, and the
  // writes already admitted under them must be over.
  if (!gate_.Advance(LearnEpoch(), std::chrono::seconds(30))) {
    MC_LOG_WARN("writes under the previous master's reservations still running after 30 s; "
                "mounting again regardless");
  }
  if (before_remount_) before_remount_();
  std::vector<std::pair<int64_t, std::shared_ptr<SegmentMemory>>> snapshot;
  {
    std::shared_lock<std::shared_mutex> seg_lock(segments_mu_);
    snapshot.assign(segments_.begin(), segments_.end());
  }
  size_t mounted = 0;
  for (const auto& s : snapshot) {
    ErrorCode rc = master_->MountSegment(Describe(s.first, *s.second));
    if (rc == ErrorCode::OK && Find(s.first) == nullptr) {
      // Unmounted here while we were mounting it there: do not leave it at the master.
      master_->UnmountSegment(daemon_id_, s.first);
    } else if (rc == ErrorCode::OK || rc == ErrorCode::SEGMENT_ALREADY_EXISTS) {
      ++mounted;
      // Restored or parked replicas in it wait for our check.
      if (rc == ErrorCode::OK) verifier_->Enqueue(s.first);
    } else {
      MC_LOG_WARN("mounting segment %lld again failed: %s", static_cast<long long>(s.first),
                  ErrorName(rc));
    }
  }
  DiskSegment disk;
  {
    std::shared_lock<std::shared_mutex> seg_lock(segments_mu_);
    disk = disk_;
  }
  if (disk.id != 0) {
    ErrorCode rc = master_->MountSegment(DescribeDisk(disk));
    if (rc == ErrorCode::OK) {
      MC_LOG_INFO("the SSD tier's segment %lld mounted again", static_cast<long long>(disk.id));
      if (after_disk_mount_) after_disk_mount_();
    } else {
      MC_LOG_WARN("mounting the SSD tier's segment %lld again failed: %s",
                  static_cast<long long>(disk.id), ErrorName(rc));
    }
  }
  last_registered_ = std::chrono::steady_clock::now();
  MC_LOG_INFO("registered again with the master; %zu of %zu segments mounted", mounted,
              snapshot.size());
  return ErrorCode::OK;
}

int64_t Membership::LearnEpoch() {
  rpc::HeartbeatResult result;
  ErrorCode code = master_->Heartbeat(daemon_id_, &result);
  int64_t epoch = code == ErrorCode::OK ? result.master_epoch : -1;
  if (epoch == -1) {
    MC_LOG_WARN("the master's epoch is unknown until the next heartbeat: reads and writes "
                "of our segments are refused meanwhile");
  }
  return epoch;
}

void Membership::StartHeartbeat() {
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

void Membership::StopHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(heartbeat_mu_);
    heartbeat_stop_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void Membership::HeartbeatLoop() {
  // After a failed beat (a master busy or changing) the next comes sooner than the
  // interval, doubling up to it: a daemon following a new leader must not sit out a whole
  // interval because one attempt met it before it answered.
  constexpr int64_t kFirstRetryMs = 100;
  int64_t wait_ms = heartbeat_interval_ms_;
  std::unique_lock<std::mutex> lock(heartbeat_mu_);
  while (!heartbeat_stop_) {
    heartbeat_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                           [this] { return heartbeat_stop_ || heartbeat_now_; });
    if (heartbeat_stop_) break;
    heartbeat_now_ = false;
    lock.unlock();
    // The epoch of the master our segments are mounted at (learnt at registration);
    // -1 or 0 while unknown.
    const int64_t mounted_at = gate_.epoch();
    rpc::HeartbeatResult result;
    ErrorCode code = master_->Heartbeat(daemon_id_, &result);
    if (code == ErrorCode::CLIENT_NOT_FOUND) {
      MC_LOG_WARN("the master does not know this daemon (it restarted, another one leads "
                  "now, or it found us silent); registering again");
      code = Reregister();
    } else if (code == ErrorCode::OK && mounted_at > 0 && result.master_epoch != 0 &&
               result.master_epoch != mounted_at) {
      // Another master, which may know us (a standby that took over replayed our
      // registration) but holds our segments detached until we mount them again.
      MC_LOG_INFO("the master changed (epoch %lld -> %lld: it restarted, or another one "
                  "leads now); registering and mounting again",
                  static_cast<long long>(mounted_at),
                  static_cast<long long>(result.master_epoch));
      code = Reregister();
    } else if (code == ErrorCode::OK && mounted_at <= 0 && result.master_epoch != 0) {
      // The epoch was not learnt when we registered: the leader may have changed since, so
      // this master need not be the one holding our segments. Mounting again is harmless
      // where they are (already there) and necessary where they are not.
      MC_LOG_INFO("the master's epoch was unknown since registering; mounting again");
      code = Reregister();
    }
    wait_ms = code == ErrorCode::OK
                  ? heartbeat_interval_ms_
                  : std::min(heartbeat_interval_ms_,
                             wait_ms >= heartbeat_interval_ms_ ? kFirstRetryMs : 2 * wait_ms);
    if (code == ErrorCode::OK && !healthy_.exchange(true)) {
      MC_LOG_INFO("the master is reachable again");
    } else if (code != ErrorCode::OK && healthy_.exchange(false)) {
      MC_LOG_WARN("heartbeat failed: %s",
                  code == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                                                     : ErrorName(code));
      master_->DropIdle();
    }
    lock.lock();
  }
}

}  // namespace mooncake
