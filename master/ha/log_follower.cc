#include "master/ha/log_follower.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include <cstring>
#include <filesystem>

#include "MasterService.h"
#include "common/base/crc32c.h"
#include "common/base/logging.h"
#include "common/master_link/master_auth.h"
#include "common/base/private_dir.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_store.h"

namespace mooncake {

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

struct LogFollower::Connection {
  std::shared_ptr<TFramedTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> client;
  ~Connection() {
    try {
      transport->close();
    } catch (...) {
    }
  }
};

namespace {

bool WriteFileDurably(const std::string& path, const std::string& bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == bytes.size() && fsync(fd) == 0;
  close(fd);
  return ok;
}

bool SyncDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

}  // namespace

LogFollower::LogFollower(MasterService* service, OpLog* oplog, LogFollowerOptions options)
    : service_(service),
      oplog_(oplog),
      options_(std::move(options)),
      need_bootstrap_(options_.bootstrap_first) {}

LogFollower::~LogFollower() { Stop(); }

void LogFollower::Start() {
  MC_LOG_INFO("replication: standby %s following %s:%d from seq %llu",
              options_.name.c_str(), options_.leader_host.c_str(), options_.leader_port,
              static_cast<unsigned long long>(oplog_->last() + 1));
  thread_ = std::thread([this] { Loop(); });
}

void LogFollower::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void LogFollower::SetPaused(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
  cv_.SignalAll();
}

bool LogFollower::PauseUs(int64_t us) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::Microseconds(us);
  while (!stopping_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  // While paused, wait here (bounded by Stop).
  while (!stopping_ && paused_) cv_.Wait(&mu_);
  return !stopping_;
}

std::unique_ptr<LogFollower::Connection> LogFollower::Connect() {
  auto c = std::make_unique<Connection>();
  auto socket = std::make_shared<TSocket>(options_.leader_host, options_.leader_port);
  const int timeout = static_cast<int>(options_.rpc_timeout_ms);
  socket->setConnTimeout(timeout);
  socket->setRecvTimeout(timeout);
  socket->setSendTimeout(timeout);
  socket->setNoDelay(true);
  c->transport = std::make_shared<TFramedTransport>(socket);
  c->client = std::make_unique<rpc::MasterServiceClient>(std::make_shared<TBinaryProtocol>(c->transport));
  try {
    c->transport->open();
  } catch (const std::exception& e) {
    MC_LOG_DEBUG("replication: cannot connect to %s:%d: %s", options_.leader_host.c_str(),
                 options_.leader_port, e.what());
    return nullptr;
  }
  std::string error;
  if (AuthenticateToMaster(c->client.get(), options_.cluster_key.get(), &error) != ErrorCode::OK) {
    MC_LOG_WARN("replication: the leader %s:%d refused us or failed the handshake: %s",
                options_.leader_host.c_str(), options_.leader_port, error.c_str());
    return nullptr;
  }
  return c;
}

bool LogFollower::AcceptTerm(int64_t term) {
  int64_t highest = highest_term_.load();
  if (term < highest) {
    MC_LOG_WARN("replication: %s:%d answers in term %lld, below term %lld seen already: "
                "ignored",
                options_.leader_host.c_str(), options_.leader_port, static_cast<long long>(term),
                static_cast<long long>(highest));
    return false;
  }
  if (term > highest) highest_term_ = term;
  return true;
}

void LogFollower::Loop() {
  std::unique_ptr<Connection> connection;
  while (Pause(0)) {
    if (connection == nullptr) connection = Connect();
    bool ok = connection != nullptr;
    if (ok && need_bootstrap_) ok = Bootstrap(connection.get());
    if (ok && !need_bootstrap_) ok = PullOnce(connection.get());
    if (!ok) {
      connection.reset();
      if (!Pause(options_.retry_interval_ms)) break;
    }
  }
}

bool LogFollower::PullOnce(Connection* c) {
  const uint64_t applied = oplog_->last();
  uint32_t crc = 0;
  const int64_t prev_crc = oplog_->tail() != nullptr && oplog_->tail()->Crc(applied, &crc)
                               ? static_cast<int64_t>(crc)
                               : -1;
  rpc::FollowLogResult reply;
  try {
    c->client->FollowLog(reply, options_.name, static_cast<int64_t>(applied + 1),
                         static_cast<int64_t>(oplog_->synced()), prev_crc,
                         options_.max_pull_bytes);
  } catch (const std::exception& e) {
    MC_LOG_DEBUG("replication: FollowLog failed: %s", e.what());
    return false;
  }
  if (!AcceptTerm(reply.term)) return false;
  if (reply.code != 0) {
    MC_LOG_DEBUG("replication: FollowLog answered %d", reply.code);
    return false;
  }
  leader_last_ = static_cast<uint64_t>(std::max<int64_t>(0, reply.last_seq));
  if (reply.bootstrap) {
    MC_LOG_WARN("replication: the leader no longer has what follows seq %llu for us: "
                "bootstrapping from a snapshot",
                static_cast<unsigned long long>(applied));
    need_bootstrap_ = true;
    return true;
  }
  const auto now = std::chrono::steady_clock::now();
  if (reply.records.empty()) {
    const bool hot = now - last_records_ < std::chrono::milliseconds(kHotWindowMs);
    return hot ? PauseUs(kHotPollUs) : Pause(options_.poll_interval_ms);
  }
  last_records_ = now;
  {
    StateGate::Shared gate(service_->gate());
    for (const rpc::LogEntry& entry : reply.records) {
      const uint64_t expected = oplog_->last() + 1;
      if (static_cast<uint64_t>(entry.seq) != expected ||
          !service_->ApplyLogRecord(entry.payload)) {
        MC_LOG_ERROR("replication: record %lld from the leader is %s (expected seq %llu): "
                     "bootstrapping",
                     static_cast<long long>(entry.seq),
                     static_cast<uint64_t>(entry.seq) != expected ? "out of order" : "undecodable",
                     static_cast<unsigned long long>(expected));
        need_bootstrap_ = true;
        break;
      }
      const uint64_t seq = oplog_->Append(entry.payload);
      if (seq != expected) {
        // Only this thread appends on a standby: a different number is a bug.
        MC_LOG_ERROR("replication: our log numbered record %llu as %llu: bootstrapping",
                     static_cast<unsigned long long>(expected), static_cast<unsigned long long>(seq));
        need_bootstrap_ = true;
        break;
      }
      records_applied_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // One fdatasync per batch; the next pull, right away, reports it.
  const ErrorCode synced = oplog_->Sync(oplog_->last());
  if (synced != ErrorCode::OK) {
    MC_LOG_WARN("replication: our log does not take the records: %s", ErrorName(synced));
    return Pause(options_.retry_interval_ms);
  }
  return true;
}

bool LogFollower::Bootstrap(Connection* c) {
  rpc::FetchSnapshotResult taken;
  try {
    c->client->FetchSnapshot(taken, options_.name, "", "", 0, 0);
  } catch (const std::exception& e) {
    MC_LOG_DEBUG("replication: FetchSnapshot failed: %s", e.what());
    return false;
  }
  if (!AcceptTerm(taken.term)) return false;
  if (taken.code != 0) {
    MC_LOG_WARN("replication: the leader cannot take a snapshot for us: %d", taken.code);
    return false;
  }
  const std::string tmp_root = options_.snapshot_dir + "/bootstrap";
  const std::string tmp_dir = tmp_root + "/" + taken.name;
  std::error_code ec;
  std::filesystem::remove_all(tmp_root, ec);
  if (!MakePrivateDirectories(tmp_dir, "the bootstrap directory")) {
    MC_LOG_ERROR("replication: cannot create %s: %s", tmp_dir.c_str(), std::strerror(errno));
    return false;
  }
  if (!Download(c, taken.name, tmp_dir) ||
      !Install(taken.name, static_cast<uint64_t>(taken.sequence), tmp_dir)) {
    std::filesystem::remove_all(tmp_root, ec);
    return false;
  }
  std::filesystem::remove_all(tmp_root, ec);
  need_bootstrap_ = false;
  bootstraps_.fetch_add(1);
  return true;
}

bool LogFollower::Download(Connection* c, const std::string& name, const std::string& tmp_dir) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.snapshot_wait_ms);
  rpc::FetchSnapshotResult listing;
  try {
    for (;;) {
      c->client->FetchSnapshot(listing, options_.name, name, "", 0, 0);
      if (!AcceptTerm(listing.term)) return false;
      if (listing.code != 0) {
        MC_LOG_WARN("replication: snapshot %s for us failed at the leader: %d", name.c_str(),
                    listing.code);
        return false;
      }
      if (listing.ready) break;
      if (std::chrono::steady_clock::now() >= deadline || !Pause(20)) return false;
    }
    for (const std::string& file : listing.files) {
      if (!snapshot_format::ValidToken(file)) return false;  // never a path of the leader's
      std::string bytes;
      int64_t size = -1;
      while (size < 0 || static_cast<int64_t>(bytes.size()) < size) {
        rpc::FetchSnapshotResult chunk;
        c->client->FetchSnapshot(chunk, options_.name, name, file,
                                 static_cast<int64_t>(bytes.size()), options_.chunk_bytes);
        if (!AcceptTerm(chunk.term)) return false;
        if (chunk.code != 0 || (size >= 0 && chunk.file_size != size) ||
            (chunk.data.empty() && static_cast<int64_t>(bytes.size()) < chunk.file_size)) {
          MC_LOG_WARN("replication: reading %s of snapshot %s failed: %d", file.c_str(),
                      name.c_str(), chunk.code);
          return false;
        }
        size = chunk.file_size;
        bytes += chunk.data;
      }
      if (!WriteFileDurably(tmp_dir + "/" + file, bytes)) {
        MC_LOG_ERROR("replication: cannot write %s/%s", tmp_dir.c_str(), file.c_str());
        return false;
      }
    }
  } catch (const std::exception& e) {
    MC_LOG_DEBUG("replication: FetchSnapshot failed: %s", e.what());
    return false;
  }
  return SyncDirectory(tmp_dir);
}

bool LogFollower::Install(const std::string& name, uint64_t sequence, const std::string& tmp_dir) {
  const std::string snapshots = options_.snapshot_dir + "/" + snapshot_format::kSnapshotsDir;
  const std::string target = snapshots + "/" + name;
  std::error_code ec;
  MakePrivateDirectories(snapshots, "the snapshots directory");  // rename below says if not
  std::filesystem::remove_all(target, ec);  // our own earlier copy of the same name
  if (rename(tmp_dir.c_str(), target.c_str()) != 0 || !SyncDirectory(snapshots)) {
    MC_LOG_ERROR("replication: cannot move snapshot %s into %s", name.c_str(), snapshots.c_str());
    return false;
  }
  SnapshotStore store(options_.snapshot_dir);
  std::string why;
  Result<LoadedSnapshot> loaded = store.Load(name, &why);
  if (!loaded.ok()) {
    MC_LOG_ERROR("replication: the leader's snapshot %s is not valid here: %s", name.c_str(),
                 why.c_str());
    store.MarkInvalid(name);
    return false;
  }
  const std::string latest = options_.snapshot_dir + "/" + snapshot_format::kLatestFile;
  if (!WriteFileDurably(latest + ".tmp", name + "\n") ||
      rename((latest + ".tmp").c_str(), latest.c_str()) != 0 ||
      !SyncDirectory(options_.snapshot_dir)) {
    MC_LOG_ERROR("replication: cannot point %s at %s", latest.c_str(), name.c_str());
    return false;
  }
  // Ours hold another history: a restart must never fall back to them.
  store.Retain(0);
  SnapshotFigures figures;
  ErrorCode code;
  {
    StateGate::Exclusive gate(service_->gate());
    service_->ClearState();
    code = LoadSnapshotPayloads(service_, loaded.value(), &figures, &why);
    if (code == ErrorCode::OK) code = oplog_->Rebase(sequence);
    if (code != ErrorCode::OK) service_->ClearState();
  }
  if (code != ErrorCode::OK) {
    MC_LOG_ERROR("replication: cannot load the leader's snapshot %s: %s %s", name.c_str(),
                 ErrorName(code), why.c_str());
    return false;
  }
  MC_LOG_INFO("replication: bootstrapped from the leader's snapshot %s: %lld objects on %lld "
              "segments; following from seq %llu",
              name.c_str(), static_cast<long long>(figures.objects),
              static_cast<long long>(figures.segments),
              static_cast<unsigned long long>(sequence + 1));
  return true;
}

}  // namespace mooncake
