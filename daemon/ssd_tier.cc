#include "daemon/ssd_tier/ssd_tier.h"

#include <chrono>

#include "common/base/logging.h"
#include "common/base/units.h"

namespace mooncake {

SsdTier::SsdTier(const SsdOptions& options, MasterClient* master, Membership* membership)
    : options_(options), master_(master), membership_(membership) {}

SsdTier::~SsdTier() { Stop(); }

ErrorCode SsdTier::Open(std::string* error) {
  ErrorCode code = SsdStore::Open(
      options_, [this](const std::vector<std::string>& keys) { return Drop(keys); }, &store_,
      error);
  if (code != ErrorCode::OK) return code;
  const bool persistent = options_.persist_mode != SsdPersistMode::kDisabled;
  std::string why;
  bool reused = false;
  if (persistent) {
    ErrorCode read = ReadSsdIdentity(options_.path, &identity_, &why);
    reused = read == ErrorCode::OK;
    if (read != ErrorCode::OK && read != ErrorCode::FILE_NOT_FOUND) {
      MC_LOG_WARN("SSD tier: %s; drawing a new identity (the master drops what it held here)",
                  why.c_str());
    }
  } else if (ReadSsdIdentity(options_.path, &retired_, &why) != ErrorCode::OK) {
    retired_ = SsdIdentity{};  // nothing of an earlier run to release
  }
  if (!reused) {
    // Written in disabled mode too: the next start releases this segment (see Mount).
    identity_.segment_id = RandomId();
    identity_.incarnation = RandomId();
    if (WriteSsdIdentity(options_.path, identity_, &why) != ErrorCode::OK) {
      *error = "cannot persist the SSD tier's identity: " + why;
      store_.reset();
      return ErrorCode::FILE_WRITE_FAIL;
    }
  }
  SsdStats stats = store_->Stats();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.rebuilt = stats.objects;
  }
  MC_LOG_INFO("SSD tier %s: %s, %s capacity, %s buckets, %s eviction, %s I/O; %s; segment %lld "
              "(%s identity)",
              options_.path.c_str(), SsdPersistModeName(options_.persist_mode),
              FormatSize(options_.capacity).c_str(), FormatSize(options_.bucket_size).c_str(),
              SsdEvictionPolicyName(options_.eviction_policy),
              stats.direct_io ? "O_DIRECT" : "buffered",
              persistent ? ("rebuilt " + std::to_string(stats.objects) + " objects (" +
                            FormatSize(stats.live_bytes) + ") in " +
                            std::to_string(stats.buckets) + " buckets")
                               .c_str()
                         : "wiped (persistence disabled)",
              static_cast<long long>(identity_.segment_id), reused ? "persisted" : "new");
  return ErrorCode::OK;
}

void SsdTier::Start() {
  membership_->SetAfterDiskMount([this] {
    std::lock_guard<std::mutex> lock(mu_);
    register_wanted_ = true;
    cv_.notify_all();
  });
  registrar_ = std::thread([this] { RegistrarLoop(); });
}

ErrorCode SsdTier::MountWith(const SsdIdentity& identity) {
  Membership::DiskSegment disk;
  disk.id = identity.segment_id;
  disk.incarnation = identity.incarnation;
  disk.size = options_.capacity;
  return membership_->MountDisk(disk);
}

ErrorCode SsdTier::Mount() {
  if (retired_.segment_id != 0) {
    Membership::DiskSegment old;
    old.id = retired_.segment_id;
    old.incarnation = retired_.incarnation;
    old.size = options_.capacity;
    ErrorCode code = membership_->RetireDisk(old);
    if (code == ErrorCode::RPC_FAIL || code == ErrorCode::CLIENT_NOT_FOUND) return code;
    retired_ = SsdIdentity{};  // released, or the master will not have it: either way done
  }
  ErrorCode code = MountWith(identity_);
  if (code == ErrorCode::OK || code == ErrorCode::RPC_FAIL ||
      code == ErrorCode::CLIENT_NOT_FOUND || code == ErrorCode::NOT_SUPPORTED) {
    return code;  // NOT_SUPPORTED: a master without the SSD tier; the identity stays
  }
  // The master will not take this identity for us (e.g. it is known under another name):
  // a fresh one, so that the tier serves at all; what the SSD holds is reconciled as any
  // other daemon's.
  MC_LOG_WARN("the master refused the SSD tier's segment %lld: %s; mounting under a new "
              "identity",
              static_cast<long long>(identity_.segment_id), ErrorName(code));
  identity_.segment_id = RandomId();
  identity_.incarnation = RandomId();
  std::string why;
  if (WriteSsdIdentity(options_.path, identity_, &why) != ErrorCode::OK) {
    MC_LOG_WARN("SSD tier: %s (the next start draws another identity)", why.c_str());
  }
  return MountWith(identity_);
}

void SsdTier::MountAgain() {
  ErrorCode code = MountWith(identity_);
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("mounting the SSD tier's segment again: %s", ErrorName(code));
  }
}

void SsdTier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (registrar_.joinable()) registrar_.join();
  if (store_ == nullptr) return;
  if (options_.persist_mode == SsdPersistMode::kDisabled) membership_->UnmountDisk();
  Stats s = stats();
  MC_LOG_INFO("SSD tier stopped: %llu objects registered with the master, %llu refused by it, "
              "%llu dropped at its request or on eviction",
              static_cast<unsigned long long>(s.registered),
              static_cast<unsigned long long>(s.refused), static_cast<unsigned long long>(s.dropped));
}

SsdTier::Stats SsdTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool SsdTier::Drop(const std::vector<std::string>& keys) {
  const int64_t segment = membership_->disk_segment_id();
  if (segment == 0) return keys.empty();  // never mounted: the master holds nothing of ours
  for (size_t begin = 0; begin < keys.size(); begin += kRegisterBatch) {
    size_t end = std::min(keys.size(), begin + kRegisterBatch);
    std::vector<std::string> batch(keys.begin() + static_cast<long>(begin),
                                   keys.begin() + static_cast<long>(end));
    std::vector<ErrorCode> codes;
    ErrorCode call = master_->DropDiskReplicas(membership_->daemon_id(), segment, batch, &codes);
    bool answered = call == ErrorCode::OK;
    for (ErrorCode code : codes) {
      answered = answered && (code == ErrorCode::OK || code == ErrorCode::OBJECT_NOT_FOUND);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!answered) {
      ++stats_.drop_failures;
      MC_LOG_WARN("SSD tier: the master could not be told to drop %zu disk replicas (%s): "
                  "their files are kept",
                  keys.size(),
                  call == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                  : call != ErrorCode::OK     ? ErrorName(call)
                                              : "a key refused");
      return false;
    }
    stats_.dropped += batch.size();
  }
  return true;
}

void SsdTier::RegistrarLoop() {
  int64_t backoff_ms = 100;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || register_wanted_; });
    if (stop_) return;
    register_wanted_ = false;
    lock.unlock();
    bool done = RegisterAll();
    lock.lock();
    if (done) {
      backoff_ms = 100;
      continue;
    }
    // Not every batch reached the master: again after a pause, unless a re-mount (which
    // wakes us anyway) or the stop comes first.
    if (cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms),
                     [this] { return stop_ || register_wanted_; })) {
      continue;
    }
    register_wanted_ = true;
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 5000);
  }
}

bool SsdTier::RegisterAll() {
  const int64_t segment = membership_->disk_segment_id();
  const int64_t daemon = membership_->daemon_id();
  // A token of our own for this round: its end never applies to a round the master began
  // since (a re-attach, a restarted master, our next registration).
  const int64_t round = RandomId();
  ErrorCode failed = ErrorCode::OK;
  {
    // Under the lock: no offload's report is in flight, so each one the master takes from
    // here on counts in the round (and its object is in List() below or after it).
    std::unique_lock<std::mutex> reconcile = ReconcileLock();
    failed = master_->BeginDiskReconciliation(daemon, segment, round);
  }
  if (failed != ErrorCode::OK) {
    MC_LOG_WARN("SSD tier: the master would not begin a reconciliation: %s",
                failed == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                                              : ErrorName(failed));
    return false;
  }
  std::vector<SsdObject> objects = store_->List();
  uint64_t kept = 0, refused = 0;
  for (size_t begin = 0; begin < objects.size() && failed == ErrorCode::OK;
       begin += kRegisterBatch) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return true;
    }
    size_t end = std::min(objects.size(), begin + kRegisterBatch);
    std::unique_lock<std::mutex> reconcile = ReconcileLock();
    std::vector<rpc::DiskObject> batch;
    for (size_t i = begin; i < end; ++i) {
      // What the store holds now: the offloader may have replaced or forgotten it since
      // List() (it cannot while we hold the lock).
      SsdObject now;
      if (!store_->Find(objects[i].key, &now)) continue;
      rpc::DiskObject o;
      o.key = now.key;
      o.size = static_cast<int64_t>(now.size);
      o.checksum = now.checksum;
      batch.push_back(std::move(o));
    }
    if (batch.empty()) continue;
    std::vector<ErrorCode> codes;
    ErrorCode call = master_->RegisterDiskReplicas(daemon, segment, batch, round, &codes);
    if (call != ErrorCode::OK) {
      failed = call;
      break;
    }
    std::vector<std::string> forget;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (codes[i] == ErrorCode::OK) {
        ++kept;
      } else if (codes[i] == ErrorCode::OBJECT_NOT_FOUND || codes[i] == ErrorCode::INVALID_PARAMS) {
        forget.push_back(batch[i].key);
      } else if (failed == ErrorCode::OK) {
        failed = codes[i];  // -103 / -101: the master lost us meanwhile; a re-mount follows
      }
    }
    store_->Forget(forget);
    refused += forget.size();
  }
  // Everything is sent: the master drops what the round did not vouch for (what this SSD
  // no longer holds), and lists the segment's replicas again.
  if (failed == ErrorCode::OK) failed = master_->EndDiskReconciliation(daemon, segment, round);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.registered += kept;
    stats_.refused += refused;
    ++stats_.registrations;
  }
  MC_LOG_INFO("SSD tier: %zu objects registered with the master: %llu kept or adopted, %llu "
              "dropped (the master no longer has them, or holds another value); %s%s",
              objects.size(), static_cast<unsigned long long>(kept),
              static_cast<unsigned long long>(refused),
              failed == ErrorCode::OK ? "reconciliation complete"
                                      : "reconciliation not complete, again later: ",
              failed == ErrorCode::OK        ? ""
              : failed == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                                              : ErrorName(failed));
  return failed == ErrorCode::OK;
}

}  // namespace mooncake
