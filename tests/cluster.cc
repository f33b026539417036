#include "tests/cluster.h"

#include <errno.h>
#include <signal.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/base/little_endian.h"
#include "tests/cluster_internal.h"
#include "tests/http_test_util.h"
#include "tests/process_harness.h"

namespace harness = mooncake::testing;

namespace {

std::vector<std::string> FlagList(const char* const* flags) {
  std::vector<std::string> out;
  for (; flags != nullptr && *flags != nullptr; ++flags) out.emplace_back(*flags);
  return out;
}

// "{dir}" in each flag becomes dir.
std::vector<std::string> InDir(std::vector<std::string> flags, const std::string& dir) {
  for (std::string& f : flags) {
    for (size_t at = f.find("{dir}"); at != std::string::npos; at = f.find("{dir}", at)) {
      f.replace(at, 5, dir);
    }
  }
  return flags;
}

// Tests use a 1 s read lease so lease tests stay short. The daemon TTL stays at the
// master's default unless a cluster asks otherwise: a short one declared daemons dead
// whenever a loaded machine delayed a heartbeat, and the death tests do not wait for it
// (a restarted daemon replaces its predecessor when it registers).
// The key file c's master runs with: the last --cluster_key_file among its flags ("" for
// none), else the harness's.
std::string MasterKeyFile(const mc_cluster* c) {
  std::string key_file = harness::ClusterKeyFile();
  for (size_t i = 0; i + 1 < c->master_flags.size(); ++i) {
    if (c->master_flags[i] == "--cluster_key_file") key_file = c->master_flags[i + 1];
  }
  return key_file;
}

// Calls fn with a client of c's master, holding the key the master runs with.
bool WithClusterMaster(const mc_cluster* c,
                       const std::function<void(mooncake::rpc::MasterServiceClient&)>& fn) {
  std::string key_file = MasterKeyFile(c);
  int port = c->ha != nullptr ? McHaLeaderPort(c) : c->master_port;
  return port > 0 && harness::WithMasterClientKey(port, key_file, fn);
}

bool StartMasterOn(mc_cluster* c) {
  std::vector<std::string> flags = {"--default_kv_lease_ttl", std::to_string(c->lease_ms)};
  flags.insert(flags.end(), c->master_flags.begin(), c->master_flags.end());
  return harness::StartMasterOnPort(&c->master, c->master_port, c->dir + "/master.log", flags);
}

bool StartDaemonOn(mc_cluster* c, McDaemon* d) {
  std::vector<std::string> flags = {"--port", std::to_string(d->port), "--global_segment_size",
                                    std::to_string(c->segment_size)};
  flags.insert(flags.end(), d->flags.begin(), d->flags.end());
  return harness::StartDaemon(&d->process, c->master_port, d->socket_path, d->log_path, flags);
}

void SetPort(McDaemon* d, int port) {
  d->port = port;
  d->name = "127.0.0.1:" + std::to_string(port);
}

McDaemon* NewDaemon(mc_cluster* c, const std::vector<std::string>& extra) {
  size_t i = c->daemons.size();
  auto d = std::make_unique<McDaemon>();
  d->socket_path = c->dir + "/mooncaked-" + std::to_string(i) + ".sock";
  d->log_path = c->dir + "/daemon-" + std::to_string(i) + ".log";
  d->ssd_dir = c->dir + "/ssd-" + std::to_string(i);
  d->flags = c->daemon_flags;
  d->flags.insert(d->flags.end(), extra.begin(), extra.end());
  for (std::string& f : d->flags) {
    for (size_t at = f.find("{ssd}"); at != std::string::npos; at = f.find("{ssd}", at)) {
      f.replace(at, 5, d->ssd_dir);
    }
  }
  SetPort(d.get(), harness::FreeTcpPort());
  c->daemons.push_back(std::move(d));
  return c->daemons.back().get();
}

McDaemon* At(const mc_cluster* c, int i) {
  if (i < 0 || static_cast<size_t>(i) >= c->daemons.size()) {
    std::fprintf(stderr, "mc_cluster: no daemon %d\n", i);
    std::abort();
  }
  return c->daemons[static_cast<size_t>(i)].get();
}

void StopAll(mc_cluster* c, int sig) {
  for (auto& d : c->daemons) {
    d->process.Resume();  // a paused daemon would not act on SIGTERM
    d->process.Stop(sig, 10000);
  }
  if (c->ha != nullptr) {
    McHaStop(c, sig);
  } else {
    c->master.Stop(sig, 10000);
  }
}

}  // namespace

extern "C" {

mc_cluster* mc_cluster_start_with(const mc_cluster_options* options) {
  return mc_cluster_start_ha(options, nullptr);
}

mc_cluster* mc_cluster_start_ha(const mc_cluster_options* options,
                                const mc_cluster_ha_options* ha) {
  auto* c = new mc_cluster;
  c->dir = harness::MakeTempDir("mc-cluster-");
  c->segment_size = options->segment_size;
  c->lease_ms = options->lease_ms > 0 ? options->lease_ms : 1000;
  c->master_flags = InDir(FlagList(options->master_flags), c->dir);
  c->daemon_flags = InDir(FlagList(options->daemon_flags), c->dir);
  c->master_port = harness::FreeTcpPort();
  bool ok = ha != nullptr ? McHaStart(c, ha) : StartMasterOn(c);
  for (int i = 0; ok && i < options->daemons; ++i) {
    McDaemon* d = NewDaemon(c, {});
    // The port was free a moment ago; another program may have taken it since (the
    // daemon then exits at once). Try others before giving up.
    ok = StartDaemonOn(c, d);
    for (int attempt = 0; !ok && !d->process.running() && attempt < 3; ++attempt) {
      SetPort(d, harness::FreeTcpPort());
      ok = StartDaemonOn(c, d);
    }
  }
  if (!ok) {
    std::fprintf(stderr, "cluster did not start; logs in %s\n", c->dir.c_str());
    StopAll(c, SIGKILL);
    delete c;
    return nullptr;
  }
  return c;
}

mc_cluster* mc_cluster_start(uint64_t segment_size) {
  return mc_cluster_start_with_lease(segment_size, 1000);
}

mc_cluster* mc_cluster_start_with_lease(uint64_t segment_size, int lease_ms) {
  mc_cluster_options options = {1, segment_size, lease_ms, nullptr, nullptr};
  return mc_cluster_start_with(&options);
}

const char* mc_cluster_socket(const mc_cluster* c) { return mc_cluster_socket_at(c, 0); }
int mc_cluster_daemon_port(const mc_cluster* c) { return mc_cluster_port_at(c, 0); }

int mc_cluster_master_port(const mc_cluster* c) { return c->master_port; }
int mc_cluster_daemon_count(const mc_cluster* c) { return static_cast<int>(c->daemons.size()); }
const char* mc_cluster_socket_at(const mc_cluster* c, int i) { return At(c, i)->socket_path.c_str(); }
int mc_cluster_port_at(const mc_cluster* c, int i) { return At(c, i)->port; }
const char* mc_cluster_name_at(const mc_cluster* c, int i) { return At(c, i)->name.c_str(); }
const char* mc_cluster_log_at(const mc_cluster* c, int i) { return At(c, i)->log_path.c_str(); }

int mc_cluster_kill_daemon_at(mc_cluster* c, int i, int sig) {
  McDaemon* d = At(c, i);
  // A paused daemon would act on anything but SIGKILL only once continued.
  if (sig != SIGKILL) d->process.Resume();
  return d->process.Stop(sig, 10000);
}

int mc_cluster_pause_daemon_at(mc_cluster* c, int i) {
  return At(c, i)->process.Pause() ? 0 : -1;
}

int mc_cluster_unread_request_at(const mc_cluster* c, int i) {
  return harness::UnreadBytesAtPort(At(c, i)->port) ? 1 : 0;
}

int mc_cluster_resume_daemon_at(mc_cluster* c, int i) {
  McDaemon* d = At(c, i);
  if (!d->process.running()) return -1;
  d->process.Resume();
  return 0;
}

int mc_cluster_restart_daemon_at(mc_cluster* c, int i) {
  return StartDaemonOn(c, At(c, i)) ? 0 : -1;
}

int mc_cluster_spawn_daemon_at(mc_cluster* c, int i) {
  McDaemon* d = At(c, i);
  // The argv harness::StartDaemon and StartDaemonOn make, without the wait.
  std::vector<std::string> argv = {harness::BuildPath("daemon/mooncaked"),
                                   "--metrics_port", "0",
                                   "--master", "127.0.0.1:" + std::to_string(c->master_port),
                                   "--socket", d->socket_path,
                                   "--hostname", "127.0.0.1",
                                   "--port", std::to_string(d->port),
                                   "--global_segment_size", std::to_string(c->segment_size),
                                   "--cluster_key_file", harness::ClusterKeyFile()};
  argv.insert(argv.end(), d->flags.begin(), d->flags.end());
  harness::MakeFlagDirectories(argv);
  return d->process.Start(argv, d->log_path) ? 0 : -1;
}

int mc_cluster_await_daemon_at(mc_cluster* c, int i, int timeout_ms) {
  McDaemon* d = At(c, i);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (harness::WaitForUnixSocket(d->socket_path, 100)) return 0;
    if (!d->process.running() || d->process.Wait(0) != -1) return -1;
  }
  return -1;
}

int mc_cluster_daemon_alive(mc_cluster* c, int i) {
  McDaemon* d = At(c, i);
  d->process.Wait(0);  // reaps it if it has exited
  return d->process.running() ? 1 : 0;
}

int mc_cluster_add_daemon(mc_cluster* c, const char* const* extra_flags) {
  McDaemon* d = NewDaemon(c, InDir(FlagList(extra_flags), c->dir));
  StartDaemonOn(c, d);
  return d->process.running() || d->process.exit_status() != -1
             ? static_cast<int>(c->daemons.size() - 1)
             : -1;
}

int mc_cluster_wait_daemon_at(mc_cluster* c, int i, int timeout_ms) {
  McDaemon* d = At(c, i);
  if (!d->process.running()) return d->process.exit_status();
  return d->process.Wait(timeout_ms);
}

void mc_cluster_kill_daemon(mc_cluster* c, int sig) { mc_cluster_kill_daemon_at(c, 0, sig); }
void mc_cluster_kill_master(mc_cluster* c, int sig) { c->master.Stop(sig, 10000); }
int mc_cluster_restart_daemon(mc_cluster* c) { return mc_cluster_restart_daemon_at(c, 0); }
int mc_cluster_restart_master(mc_cluster* c) { return StartMasterOn(c) ? 0 : -1; }

int mc_cluster_master_pid(const mc_cluster* c) {
  return c->master.running() ? static_cast<int>(c->master.pid()) : -1;
}
const char* mc_cluster_dir(const mc_cluster* c) { return c->dir.c_str(); }
const char* mc_cluster_master_log(const mc_cluster* c) { return c->master.log_path().c_str(); }

int mc_cluster_pause_master(mc_cluster* c) { return c->master.Pause() ? 0 : -1; }

void mc_cluster_resume_master(mc_cluster* c) { c->master.Resume(); }

int mc_cluster_segment_at(const mc_cluster* c, int i, mc_cluster_segment* out) {
  const std::string& name = At(c, i)->name;
  std::vector<mooncake::rpc::SegmentInfo> segments;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetAllSegments(segments);
      })) {
    return -1;
  }
  for (const auto& s : segments) {
    if (s.name != name || s.lent_by_client) continue;
    out->id = s.segment_id;
    out->size = static_cast<uint64_t>(s.size);
    out->used = static_cast<uint64_t>(s.used);
    return 0;
  }
  return -1;
}

int mc_cluster_replica_at(const mc_cluster* c, const char* key, int r, int64_t* segment_id,
                          uint64_t* offset) {
  mooncake::rpc::ReplicaListResult list;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetReplicaList(list, key, 0);
      }) ||
      list.code != 0 || r < 0 || static_cast<size_t>(r) >= list.replicas.size()) {
    return -1;
  }
  *segment_id = list.replicas[static_cast<size_t>(r)].segment_id;
  *offset = static_cast<uint64_t>(list.replicas[static_cast<size_t>(r)].offset);
  return 0;
}

int mc_cluster_master_snapshot(const mc_cluster* c, int64_t* sequence, int64_t* objects) {
  mooncake::rpc::SnapshotResult started, result;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.Snapshot(started);
      })) {
    return -1;
  }
  result = started;
  // It answers once forked; the outcome is LastSnapshot's once that names it.
  for (int polls = 0; result.code == 0 && result.running && polls < 6000; ++polls) {
    usleep(10 * 1000);
    if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
          m.LastSnapshot(result);
        })) {
      return -1;
    }
    if (result.name != started.name) result.running = true;  // an older one: keep waiting
  }
  if (result.code != 0) std::fprintf(stderr, "Snapshot: %d %s\n", result.code, result.error.c_str());
  if (sequence != nullptr) *sequence = result.sequence;
  if (objects != nullptr) *objects = result.objects;
  return result.code;
}

int mc_cluster_master_stats_get(const mc_cluster* c, mc_cluster_master_stats* out) {
  mooncake::rpc::MasterStats stats;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetStats(stats);
      })) {
    return -1;
  }
  out->objects = stats.objects;
  out->daemons = stats.daemons;
  out->pending_segments = stats.pending_segments;
  out->oplog_sequence = stats.oplog_sequence;
  out->oplog_synced = stats.oplog_synced;
  out->restore_ms = stats.restore_ms;
  out->restored_objects = stats.restored_objects;
  out->master_epoch = stats.master_epoch;
  auto unreadable = stats.objects_dropped.find("unreadable");
  out->dropped_unreadable = unreadable != stats.objects_dropped.end() ? unreadable->second : 0;
  return 0;
}

void mc_cluster_stop(mc_cluster* c) {
  if (c == nullptr) return;
  StopAll(c, SIGTERM);
  for (const std::string& m : c->mounts) {
    if (umount2(m.c_str(), MNT_DETACH) != 0) {
      std::fprintf(stderr, "umount %s: %s\n", m.c_str(), std::strerror(errno));
    }
  }
  if (std::getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(c->dir);
  delete c;
}

int mc_cluster_lent_segments_at(const mc_cluster* c, int i, mc_cluster_segment* out, int max) {
  const std::string& name = At(c, i)->name;
  std::vector<mooncake::rpc::SegmentInfo> segments;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetAllSegments(segments);
      })) {
    return -1;
  }
  // Memory lent at daemon i carries its client's name when the client named itself
  // (setup's local_hostname), so it is found by the daemon's id, which the daemon's own
  // segments name.
  std::vector<int64_t> ids;
  for (const auto& s : segments) {
    if (s.name == name && !s.lent_by_client) ids.push_back(s.daemon_id);
  }
  int n = 0;
  for (const auto& s : segments) {
    bool at_daemon = s.name == name ||
                     std::find(ids.begin(), ids.end(), s.daemon_id) != ids.end();
    if (!at_daemon || !s.lent_by_client) continue;
    if (n < max) {
      out[n].id = s.segment_id;
      out[n].size = static_cast<uint64_t>(s.size);
      out[n].used = static_cast<uint64_t>(s.used);
    }
    ++n;
  }
  return n;
}

int mc_cluster_eviction_stats_get(const mc_cluster* c, mc_cluster_eviction_stats* out) {
  mooncake::rpc::MasterStats stats;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetStats(stats);
      })) {
    return -1;
  }
  const mooncake::rpc::EvictionStats& e = stats.eviction;
  out->capacity_bytes = stats.capacity_bytes;
  out->used_bytes = stats.used_bytes;
  out->objects = stats.objects;
  out->evicted_objects = stats.evicted_objects;
  out->rounds = e.rounds;
  out->put_rounds = e.put_rounds;
  out->short_rounds = e.short_rounds;
  out->evicted_bytes = e.evicted_bytes;
  out->total_us = e.total_us;
  out->max_us = e.max_us;
  out->last_used_bytes = e.last_used_bytes;
  out->no_space_puts = e.no_space_puts;
  out->exist_uses = e.exist_uses;
  out->exist_leases = e.exist_leases;
  return 0;
}

int mc_cluster_tenant_stats_get(const mc_cluster* c, const char* tenant,
                                mc_cluster_tenant_stats* out) {
  mooncake::rpc::MasterStats stats;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetStats(stats);
      })) {
    return -1;
  }
  *out = mc_cluster_tenant_stats{};
  for (const mooncake::rpc::TenantStats& t : stats.tenants) {
    if (t.tenant != tenant) continue;
    out->objects = t.objects;
    out->bytes = t.bytes;
    out->quota_bytes = t.quota_bytes;
    out->refused_puts = t.refused_puts;
  }
  return 0;
}

}  // extern "C"

namespace {

// Sends all of bytes; false when the daemon closed first.
bool SendAll(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// One request of the opening (op, payload) and its reply: its code, with the reply's
// payload (at most max_reply bytes) in *reply; 1 when closed first, 2 when out of step.
int OpeningRequest(int fd, uint16_t op, uint64_t id, const std::string& payload,
                   size_t max_reply, std::string* reply) {
  std::string head;
  mooncake::AppendLittleEndian(&head, 0x5054434d, 4);  // "MCTP"
  mooncake::AppendLittleEndian(&head, 1, 2);           // version
  mooncake::AppendLittleEndian(&head, op, 2);
  mooncake::AppendLittleEndian(&head, id, 8);
  mooncake::AppendLittleEndian(&head, 0, 8);  // segment id
  mooncake::AppendLittleEndian(&head, 0, 8);  // offset
  mooncake::AppendLittleEndian(&head, payload.size(), 8);
  mooncake::AppendLittleEndian(&head, 0, 8);  // master epoch
  if (!SendAll(fd, head + payload)) return 1;
  char in[24];
  ssize_t got = recv(fd, in, sizeof(in), MSG_WAITALL);
  if (got == 0) return 1;
  if (got != static_cast<ssize_t>(sizeof(in))) return errno == ECONNRESET ? 1 : 2;
  const char* p = in;
  uint32_t magic = static_cast<uint32_t>(mooncake::GetLittleEndian(&p, 4));
  int32_t code = static_cast<int32_t>(mooncake::GetLittleEndian(&p, 4));
  uint64_t request_id = mooncake::GetLittleEndian(&p, 8);
  uint64_t length = mooncake::GetLittleEndian(&p, 8);
  if (magic != 0x5254434d || request_id != id || length > max_reply) return 2;
  if (code != 0) return length == 0 ? code : 2;
  reply->assign(length, '\0');
  if (length > 0 && recv(fd, &(*reply)[0], length, MSG_WAITALL) != static_cast<ssize_t>(length)) {
    return 2;
  }
  return 0;
}

}  // namespace

extern "C" int mc_cluster_transfer_handshake(int fd, const char* name) {
  static const mooncake::ClusterKey key = [] {
    std::string error;
    auto loaded = mooncake::ClusterKey::Load(harness::ClusterKeyFile(), &error);
    if (!loaded.ok()) {
      std::fprintf(stderr, "the harness's cluster key: %s\n", error.c_str());
      std::abort();
    }
    return loaded.value();
  }();
  const std::string client_nonce = mooncake::ClusterKey::NewNonce();
  std::string hello;
  mooncake::AppendLittleEndian(&hello, 1, 2);  // tag 1: the daemon's name
  mooncake::AppendLittleEndian(&hello, std::strlen(name), 2);
  hello += name;
  mooncake::AppendLittleEndian(&hello, 2, 2);  // tag 2: the client nonce
  mooncake::AppendLittleEndian(&hello, client_nonce.size(), 2);
  hello += client_nonce;
  std::string server_nonce, server_proof;
  int code = OpeningRequest(fd, 0x100, 1, hello, 32, &server_nonce);
  if (code != 0) return code;
  if (server_nonce.size() != 32) return 2;
  std::string proof =
      key.Prove(mooncake::ClusterKey::Role::kClient, "transfer", client_nonce, server_nonce);
  code = OpeningRequest(fd, 0x101, 2, proof, 32, &server_proof);
  if (code != 0) return code;
  return key.Check(server_proof, mooncake::ClusterKey::Role::kServer, "transfer", client_nonce,
                   server_nonce) >= 0
             ? 0
             : 2;
}

namespace {

// Every regular file under dir, recursively, that may hold object bytes.
void DataFiles(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      DataFiles(path, out);
    } else if (S_ISREG(st.st_mode) && name != "IDENTITY" &&
               !(name.size() > 5 && name.compare(name.size() - 5, 5, ".meta") == 0)) {
      out->push_back(path);
    }
  }
  closedir(d);
}

// The offset of the first copy of needle in the file, or -1.
int64_t FindInFile(const std::string& path, const std::string& needle) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const size_t chunk = 8u << 20;
  std::string window;  // the tail of the last chunk (needle - 1 bytes) and the new one
  int64_t window_at = 0;
  std::vector<char> buf(chunk);
  int64_t found = -1;
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    window.append(buf.data(), static_cast<size_t>(n));
    size_t at = window.find(needle);
    if (at != std::string::npos) {
      found = window_at + static_cast<int64_t>(at);
      break;
    }
    size_t keep = std::min(window.size(), needle.size() - 1);
    window_at += static_cast<int64_t>(window.size() - keep);
    window.erase(0, window.size() - keep);
  }
  close(fd);
  return found;
}

}  // namespace

extern "C" {

const char* mc_cluster_ssd_dir_at(const mc_cluster* c, int i) { return At(c, i)->ssd_dir.c_str(); }

int mc_cluster_flip_ssd_byte_at(const mc_cluster* c, int i, const void* needle, size_t n,
                                size_t at) {
  if (n == 0 || at >= n) return -1;
  const std::string wanted(static_cast<const char*>(needle), n);
  std::vector<std::string> files;
  DataFiles(At(c, i)->ssd_dir, &files);
  for (const std::string& path : files) {
    int64_t offset = FindInFile(path, wanted);
    if (offset < 0) continue;
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return -1;
    unsigned char byte = 0;
    off_t where = static_cast<off_t>(offset) + static_cast<off_t>(at);
    bool ok = pread(fd, &byte, 1, where) == 1;
    byte ^= 0xff;
    ok = ok && pwrite(fd, &byte, 1, where) == 1 && fsync(fd) == 0;
    close(fd);
    return ok ? 0 : -1;
  }
  return -1;
}

int mc_cluster_mount_small_fs(mc_cluster* c, const char* name, uint64_t bytes,
                              const char** path) {
  std::string where = c->dir + "/" + name;
  if (mkdir(where.c_str(), 0700) != 0 && errno != EEXIST) return -1;
  std::string data = "size=" + std::to_string(bytes);
  if (mount("tmpfs", where.c_str(), "tmpfs", 0, data.c_str()) != 0) {
    if (errno == EPERM) return 1;
    std::fprintf(stderr, "mount tmpfs at %s: %s\n", where.c_str(), std::strerror(errno));
    return -1;
  }
  c->mounts.push_back(where);
  *path = c->mounts.back().c_str();
  return 0;
}

int mc_cluster_disk_stats_get(const mc_cluster* c, mc_cluster_disk_stats* out) {
  mooncake::rpc::MasterStats stats;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetStats(stats);
      })) {
    return -1;
  }
  const mooncake::rpc::DiskStats& d = stats.disk;
  out->segments = d.segments;
  out->capacity_bytes = d.capacity_bytes;
  out->objects = d.objects;
  out->bytes = d.bytes;
  out->disk_only_objects = d.disk_only_objects;
  out->offloads_queued = d.offloads_queued;
  out->offloads_done = d.offloads_done;
  out->offloads_failed = d.offloads_failed;
  out->evict_offloads = d.evict_offloads;
  out->promotions = d.promotions;
  out->adopted = d.adopted;
  out->dropped = d.dropped;
  return 0;
}

int mc_cluster_verify_stats_get(const mc_cluster* c, mc_cluster_verify_stats* out) {
  mooncake::rpc::MasterStats stats;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetStats(stats);
      })) {
    return -1;
  }
  auto dropped = [&stats](const char* reason) -> int64_t {
    auto it = stats.objects_dropped.find(reason);
    return it == stats.objects_dropped.end() ? 0 : it->second;
  };
  out->restore_checksum = dropped("restore_checksum");
  out->unreadable = dropped("unreadable");
  out->restore_unverifiable = dropped("restore_unverifiable");
  out->parked_expired = dropped("parked_expired");
  out->unverified_replicas = stats.unverified_replicas;
  out->parked_objects = stats.parked_objects;
  out->parked_adopted = stats.parked_adopted;
  return 0;
}

int mc_cluster_replica_kinds(const mc_cluster* c, const char* key, int* memory, int* disk,
                             int* disk_daemon) {
  mooncake::rpc::ReplicaListResult list;
  if (!WithClusterMaster(c, [&](mooncake::rpc::MasterServiceClient& m) {
        m.GetReplicaList(list, key, 0);
      }) ||
      list.code != 0) {
    return -1;
  }
  int mem = 0, dsk = 0, holder = -1;
  for (const auto& r : list.replicas) {
    if (r.kind != mooncake::rpc::ReplicaKind::LOCAL_DISK) {
      ++mem;
      continue;
    }
    if (dsk++ > 0) continue;
    for (size_t i = 0; i < c->daemons.size(); ++i) {
      if (c->daemons[i]->name == r.segment_name) holder = static_cast<int>(i);
    }
  }
  if (memory != nullptr) *memory = mem;
  if (disk != nullptr) *disk = dsk;
  if (disk_daemon != nullptr) *disk_daemon = holder;
  return 0;
}

// The admin HTTP's /query_key answer for key (it grants no lease): 0 with its body, -1.
static int QueryKey(const mc_cluster* c, const char* key, std::string* body) {
  int port = mooncake::testing::AdminPortFromLog(mc_cluster_master_log(c), "master");
  if (port < 0) return -1;
  // A master without a key admits its own uid's requests without a token.
  const std::string key_file = MasterKeyFile(c);
  std::vector<std::string> headers;
  if (!key_file.empty()) headers.push_back(mooncake::testing::AdminAuthorization(key_file));
  mooncake::testing::HttpAnswer a = mooncake::testing::HttpRequestLoopback(
      port, "GET", "/query_key?key=" + mooncake::testing::UrlEncode(key), headers);
  if (a.status != 200) {
    std::fprintf(stderr, "/query_key?key=%s: %d %s\n", key, a.status, a.body.c_str());
    return -1;
  }
  *body = std::move(a.body);
  return 0;
}

// The integer after the first "field": in body, or -1 when there is none.
static int FieldOf(const std::string& body, const char* field, int64_t* out) {
  const std::string quoted = std::string("\"") + field + "\":";
  size_t at = body.find(quoted);
  if (at == std::string::npos) return -1;
  *out = std::strtoll(body.c_str() + at + quoted.size(), nullptr, 10);
  return 0;
}

int mc_cluster_soft_pin_remaining_ms(const mc_cluster* c, const char* key,
                                     int64_t* remaining_ms) {
  std::string body;
  if (QueryKey(c, key, &body) != 0) return -1;
  return FieldOf(body, "soft_pin_remaining_ms", remaining_ms);
}

int mc_cluster_offset_of(const mc_cluster* c, const char* key, uint64_t* offset) {
  std::string body;
  int64_t value = 0;
  if (QueryKey(c, key, &body) != 0 || FieldOf(body, "offset", &value) != 0) return -1;
  *offset = static_cast<uint64_t>(value);
  return 0;
}

int mc_cluster_master_metric(const mc_cluster* c, const char* sample, double* value) {
  int port = mooncake::testing::AdminPortFromLog(mc_cluster_master_log(c), "master");
  if (port < 0) return -1;
  const std::string key_file = MasterKeyFile(c);
  std::vector<std::string> headers;
  if (!key_file.empty()) headers.push_back(mooncake::testing::AdminAuthorization(key_file));
  mooncake::testing::HttpAnswer a =
      mooncake::testing::HttpRequestLoopback(port, "GET", "/metrics", headers);
  if (a.status != 200) return -1;
  const std::string line = std::string("\n") + sample + " ";
  size_t at = ("\n" + a.body).find(line);
  if (at == std::string::npos) return -1;
  *value = std::strtod(a.body.c_str() + at + line.size() - 1, nullptr);
  return 0;
}

}  // extern "C"
