#include "tests/harness/daemon_test_client.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "MasterService.h"
#include "tests/harness/cmocka_cpp.h"

namespace mooncake {
namespace testing {

using uds::Op;

Fixture* g_fixture = nullptr;

Pool::Pool(uint64_t bytes, bool seal) : size(bytes) {
  fd = memfd_create("test-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  if (seal) assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  base = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  assert_true(base != MAP_FAILED);
}

Pool::~Pool() {
  munmap(base, size);
  close(fd);
}

Conn::Conn() : Conn(g_fixture->socket_path) {}

Conn::Conn(const std::string& socket_path) {
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, socket_path.c_str());
  assert_int_equal(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{kRecvTimeoutS, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

Conn::~Conn() { Close(); }

void Conn::Close() {
  if (fd >= 0) close(fd);
  fd = -1;
}

bool Conn::SendRaw(const std::string& bytes) {
  return uds::SendFrame(fd, bytes.data(), bytes.size());
}

bool Conn::Send(uds::FrameBuilder* frame, int pass_fd) {
  return uds::SendFrame(fd, frame->data(), frame->size(), pass_fd);
}

bool Conn::Recv(uds::Message* out) {
  const char* payload = nullptr;
  size_t length = 0;
  bool oversized = false;
  while (!reader.Next(&payload, &length, &oversized)) {
    if (reader.ReadFrom(fd) != uds::FrameReader::Status::kOk) return false;
  }
  return uds::ParseMessage(payload, length, out);
}

bool Conn::ClosedByPeer() {
  const char* payload = nullptr;
  size_t length = 0;
  bool oversized = false;
  for (;;) {
    if (reader.Next(&payload, &length, &oversized)) return false;  // a frame came first
    switch (reader.ReadFrom(fd)) {
      case uds::FrameReader::Status::kOk:
        break;
      case uds::FrameReader::Status::kWouldBlock:
        return false;  // the receive timeout: still open
      case uds::FrameReader::Status::kClosed:
      case uds::FrameReader::Status::kError:  // reset by the peer
        return true;
    }
  }
}

int64_t Conn::Call(uds::FrameBuilder* frame, uint64_t id, uds::Message* out, int pass_fd) {
  if (!Send(frame, pass_fd)) return -9999;
  if (!Recv(out)) return -9998;
  assert_int_equal(out->id, id);
  return out->head;
}

int64_t Conn::Hello(const Pool* pool, uint64_t abi, const std::string& master,
                    std::string* hostname, int override_fd, const std::string& tenant) {
  uint64_t id = next_id++;
  uds::FrameBuilder f(id, static_cast<int64_t>(Op::kHello), 5);
  f.args().pack(abi);
  f.args().pack(pool ? pool->size : uint64_t{0});
  f.args().pack(static_cast<uint64_t>(getpid()));
  f.args().pack(master);
  f.args().pack(tenant);
  uds::Message m;
  int pass = override_fd != -2 ? override_fd : (pool ? pool->fd : -1);
  int64_t code = Call(&f, id, &m, pass);
  if (code == 0 && hostname) *hostname = m.args.Str();
  return code;
}

int64_t Conn::Ints(Op op, const std::function<void(uds::FrameBuilder*)>& pack, uint32_t argc,
                   std::vector<int64_t>* values) {
  uint64_t id = next_id++;
  uds::FrameBuilder f(id, static_cast<int64_t>(op), argc);
  pack(&f);
  uds::Message m;
  int64_t code = Call(&f, id, &m);
  if (values) {
    values->clear();
    for (size_t i = 0; i < m.args.size(); ++i) values->push_back(m.args.I64());
  }
  return code;
}

int64_t Conn::Put(const std::string& key, uint64_t offset, uint64_t size, Op op) {
  return Ints(op, [&](uds::FrameBuilder* f) {
    f->args().pack(key);
    f->args().pack(offset);
    f->args().pack(size);
    uds::PackValue(f->args(), uds::WireConfig());
  }, 4);
}

int64_t Conn::Get(const std::string& key, uint64_t offset, uint64_t capacity) {
  std::vector<int64_t> v;
  int64_t code = Ints(Op::kGet, [&](uds::FrameBuilder* f) {
    f->args().pack(key);
    f->args().pack(offset);
    f->args().pack(capacity);
  }, 3, &v);
  return code != 0 ? code : v.at(0);
}

int64_t Conn::BatchGet(const std::vector<std::string>& keys, uint64_t offset, uint64_t capacity,
                       std::vector<int64_t>* v) {
  return Ints(Op::kBatchGet, [&](uds::FrameBuilder* f) {
    f->args().pack_array(static_cast<uint32_t>(keys.size()));
    for (size_t i = 0; i < keys.size(); ++i) {
      f->args().pack_array(3);
      f->args().pack(keys[i]);
      f->args().pack(offset + i * capacity);
      f->args().pack(capacity);
    }
  }, 1, v);
}

int64_t Conn::GetSize(const std::string& key) {
  std::vector<int64_t> v;
  int64_t code = Ints(Op::kGetSize, [&](uds::FrameBuilder* f) { f->args().pack(key); }, 1, &v);
  return code != 0 ? code : v.at(0);
}

int64_t Conn::Remove(const std::string& key) {
  return Ints(Op::kRemove, [&](uds::FrameBuilder* f) {
    f->args().pack(key);
    f->args().pack(true);
  }, 2);
}

int64_t Conn::Exist(const std::string& key) {
  std::vector<int64_t> v;
  int64_t code = Ints(Op::kExist, [&](uds::FrameBuilder* f) { f->args().pack(key); }, 1, &v);
  return code != 0 ? code : v.at(0);
}

int64_t Conn::Health() {
  std::vector<int64_t> v;
  int64_t code = Ints(Op::kHealth, [](uds::FrameBuilder*) {}, 0, &v);
  return code != 0 ? code : v.at(0);
}

void Fill(char* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(rng());
}

std::string Frame(const std::string& payload) {
  uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out(reinterpret_cast<const char*>(&n), 4);  // little-endian host
  return out + payload;
}

int64_t PutBegin(Conn* c, const std::string& key, uint64_t size, std::vector<int64_t>* v) {
  return c->Ints(Op::kPutBegin, [&](uds::FrameBuilder* f) {
    f->args().pack(key);
    f->args().pack(size);
    uds::PackValue(f->args(), uds::WireConfig());
    f->args().pack(false);
  }, 4, v);
}

OwnCluster::OwnCluster(const std::string& lease, std::vector<std::string> daemon_flags) {
  dir = MakeTempDir("mc-daemon-cache-");
  socket_path = dir + "/mooncaked.sock";
  // A short RPC timeout bounds what a request costs while the master is stopped.
  daemon_flags.insert(daemon_flags.begin(), {"--rpc_timeout", "500ms", "--heartbeat_interval",
                                             "200ms", "--global_segment_size", "64MB"});
  bool ok = StartMaster(&master, &master_port, dir + "/master.log",
                        {"--default_kv_lease_ttl", lease}) &&
            StartDaemon(&daemon, master_port, socket_path, dir + "/daemon.log", daemon_flags);
  assert_true(ok);
}

void StopFixture(Fixture* f) {
  if (f->daemon.running()) f->daemon.Stop(SIGKILL, 2000);
  f->master.Stop(SIGTERM, 5000);
  if (std::getenv("MC_KEEP_TEST_DIR") == nullptr) {
    RemoveTree(f->dir);
  } else {
    std::printf("logs kept in %s\n", f->dir.c_str());
  }
}

OwnCluster::~OwnCluster() {
  Resume();
  daemon.Stop(SIGKILL, 2000);
  master.Stop(SIGKILL, 2000);
  if (std::getenv("MC_KEEP_TEST_DIR") == nullptr) RemoveTree(dir);
}

void OwnCluster::Pause() {
  paused = true;
  assert_true(master.Pause());
}

void OwnCluster::Resume() {
  if (paused) master.Resume();
  paused = false;
}

bool MasterUnreachable(int64_t code) {
  return code == ToInt(ErrorCode::RPC_FAIL) || code == ToInt(ErrorCode::RPC_TIMEOUT);
}

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since).count();
}

size_t MasterSegmentCount(int port) {
  std::vector<rpc::SegmentInfo> segments;
  WithMasterClient(port, [&](rpc::MasterServiceClient& client) { client.GetAllSegments(segments); });
  return segments.size();
}

}  // namespace testing
}  // namespace mooncake
