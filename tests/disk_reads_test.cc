// Reads of disk replicas (issue 14, part "reads"), in one process: READ_DISK on a real
// transfer server over loopback, fed by raw peers and by the daemons' own client
// (TcpTransport), against an in-memory SsdStore (a test double of the storage engine, not
// of a daemon or master): good reads, every refusal with its code and nothing served, the
// handshake, the bound on disk reads at once; then ReplicaIO: the candidates' order and
// a read falling through failing disk replicas to the next. Cluster tests (real master and
// daemons, real SSD directories) are in the offload part's suites.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/auth/cluster_key.h"
#include "common/base/crc32c.h"
#include "common/base/error_code.h"
#include "daemon/transfer/disk_reads.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/replicas/replica_io.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/ssd_store/ssd_store.h"
#include "daemon/transfer/tcp_io.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transfer_engine.h"
#include "daemon/transfer/transfer_protocol.h"
#include "daemon/transfer/transfer_server.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"
#include "tests/transfer_test_util.h"

using namespace mooncake;
using Clock = std::chrono::steady_clock;
using testing::kClosed;
using testing::ReplyCode;

namespace {

constexpr int64_t kMemorySegment = 7;
constexpr int64_t kDiskSegment = 9;
constexpr int64_t kEpoch = 5;
constexpr uint64_t kValueSize = 9ull << 20;  // over two READ_DISKs' worth

int32_t Code(ErrorCode c) { return ToInt(c); }

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// An SSD tier in memory: objects by key, Read checked as SsdStore says (a corrupt one
// answers CHECKSUM_MISMATCH and is dropped). Counts reads, and can hold them until
// released, to watch how many run at once.
class MemorySsd : public SsdStore {
 public:
  void Put(const std::string& key, const std::string& value, int64_t checksum,
           bool corrupt = false) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[key] = Object{value, checksum, corrupt};
  }
  bool Holds(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_.count(key) != 0;
  }
  void Hold(bool hold) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = hold;
    cv_.notify_all();
  }
  // Waits (5 s at most) until n reads are inside Read.
  void AwaitReading(int n) {
    for (auto until = Clock::now() + std::chrono::seconds(5); reading_.load() != n;) {
      assert_true(Clock::now() < until);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  int reads() const { return reads_.load(); }
  int most_at_once() const { return most_.load(); }

  std::vector<SsdObject> List() const override { return {}; }
  void Write(std::vector<WriteItem>*) override {}
  ErrorCode Read(const std::string& key, uint64_t offset, char* dest, uint64_t length) override {
    reads_.fetch_add(1);
    int now = reading_.fetch_add(1) + 1;
    for (int m = most_.load(); now > m && !most_.compare_exchange_weak(m, now);) {
    }
    ErrorCode code = ReadLocked(key, offset, dest, length);
    reading_.fetch_sub(1);
    return code;
  }
  bool Find(const std::string& key, SsdObject* out) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return false;
    *out = SsdObject{key, it->second.bytes.size(), it->second.checksum};
    return true;
  }
  void Forget(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& k : keys) objects_.erase(k);
  }
  SsdStats Stats() const override { return SsdStats(); }

 private:
  struct Object {
    std::string bytes;
    int64_t checksum;
    bool corrupt;
  };
  ErrorCode ReadLocked(const std::string& key, uint64_t offset, char* dest, uint64_t length) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !hold_; });
    auto it = objects_.find(key);
    if (it == objects_.end()) return ErrorCode::OBJECT_NOT_FOUND;
    const Object& o = it->second;
    if (length > o.bytes.size() || offset > o.bytes.size() - length) {
      return ErrorCode::INVALID_PARAMS;
    }
    if (o.corrupt) {
      objects_.erase(it);  // dropped, as the real store does
      return ErrorCode::CHECKSUM_MISMATCH;
    }
    std::memcpy(dest, o.bytes.data() + offset, length);
    return ErrorCode::OK;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Object> objects_;  // guarded by mu_
  bool hold_ = false;                      // guarded by mu_
  std::atomic<int> reads_{0}, reading_{0}, most_{0};
};

// A daemon's transfer port with a memory segment and an SSD tier.
struct Owner {
  std::shared_ptr<SegmentMemory> segment;
  MemorySsd ssd;
  EpochGate gate;
  int port = 0;
  std::unique_ptr<TransferServer> server;

  explicit Owner(std::shared_ptr<const ClusterKey> key = nullptr, size_t concurrency = 8,
                 int stall_ms = 2000) {
    std::string error;
    segment = SegmentMemory::Create(1 << 20, &error);
    assert_non_null(segment.get());
    int fd = testing::ListenOnLoopback(&port);
    assert_true(fd >= 0);
    TransferServer::Options o;
    o.stall_timeout_ms = stall_ms;
    o.cluster_key = std::move(key);
    o.disk_read_concurrency = concurrency;
    std::shared_ptr<SegmentMemory> s = segment;
    server.reset(new TransferServer(
        fd, [s](int64_t id) { return id == kMemorySegment ? s : nullptr; }, o));
    gate.Set(kEpoch);
    server->SetEpochGate(&gate);
    server->SetDiskTier(&ssd, kDiskSegment);
    server->Start();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }

  // The disk segment as GetAllSegments publishes it.
  std::shared_ptr<const RemoteSegment> DiskSegment() const {
    auto r = std::make_shared<RemoteSegment>();
    r->segment_id = kDiskSegment;
    r->name = address();
    r->size = 1ull << 40;  // the SSD's capacity: offsets mean nothing in it
    r->disk = true;
    rpc::TransportEndpoint e;
    e.protocol = "tcp";
    e.address = address();
    r->endpoints.push_back(e);
    return r;
  }
};

int Connect(const Owner& o) {
  std::string error;
  int fd = tcp_io::Connect(o.address(), 1000, testing::kRawPeerBounds.stall_timeout_ms, &error);
  assert_true(fd >= 0);
  return fd;
}

// A READ_DISK header (with any field) and payload bytes behind it.
bool SendHeader(int fd, int64_t segment, uint64_t offset, uint64_t length, int64_t epoch,
                const std::string& payload) {
  transfer::RequestHeader h;
  h.op = static_cast<uint16_t>(transfer::Op::kReadDisk);
  h.request_id = 99;
  h.segment_id = segment;
  h.offset = offset;
  h.length = length;
  h.master_epoch = epoch;
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  return tcp_io::Send(fd, head, sizeof(head), payload.data(), payload.size(),
                      testing::kRawPeerBounds);
}

transfer::DiskRead Ask(const std::string& key, uint64_t offset, uint64_t length,
                       uint64_t value_size, int64_t checksum) {
  transfer::DiskRead r;
  r.key = key;
  r.value_offset = offset;
  r.length = length;
  r.value_size = value_size;
  r.checksum = checksum;
  return r;
}

// A well-formed READ_DISK: the reply's code (its bytes into *data).
int32_t ReadDisk(int fd, const transfer::DiskRead& r, std::string* data = nullptr,
                 int64_t segment = kDiskSegment, int64_t epoch = kEpoch) {
  std::string payload = transfer::EncodeDiskRead(r);
  if (!SendHeader(fd, segment, 0, payload.size(), epoch, payload)) return kClosed;
  return ReplyCode(fd, data);
}

// True when the owner closes fd without sending another byte (within 5 s).
bool ClosedSilently(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return false;
  char c;
  ssize_t r = recv(fd, &c, 1, 0);
  return r == 0 || (r < 0 && errno == ECONNRESET);
}

// ---- READ_DISK on the transfer port -------------------------------------------------------

// A raw peer reads a whole small value and a range of a big one; the daemons' client reads
// a 9 MiB value (three READ_DISKs, striped) with its CRC computed on the way.
void test_read_disk_serves_the_bytes(void**) {
  Owner owner;
  const std::string small = Pattern(1000, 1), big = Pattern(kValueSize, 2);
  owner.ssd.Put("small", small, Crc32c(small.data(), small.size()));
  owner.ssd.Put("big", big, -1);
  int fd = Connect(owner);
  std::string got;
  assert_int_equal(ReadDisk(fd, Ask("small", 0, small.size(), small.size(),
                                    Crc32c(small.data(), small.size())),
                            &got),
                   0);
  assert_true(got == small);
  assert_int_equal(ReadDisk(fd, Ask("big", 12345, 4 << 20, big.size(), -1), &got), 0);
  assert_true(got == big.substr(12345, 4 << 20));
  close(fd);

  TcpTransport::Options options;
  options.address = "127.0.0.1:1";
  TcpTransport client(options);
  std::string into(big.size(), '\0');
  TransferOp op;
  op.kind = TransferKind::kRead;
  op.remote = owner.DiskSegment();
  op.disk = std::make_shared<const DiskAddress>(DiskAddress{"big", big.size(), -1});
  op.local = &into[0];
  op.length = big.size();
  op.master_epoch = kEpoch;
  op.want_crc = true;
  std::vector<TransferOp*> ops{&op};
  int reads_before = owner.ssd.reads();
  client.Execute(&ops, Clock::now() + std::chrono::seconds(10));
  assert_int_equal(op.result, 0);
  assert_true(into == big);
  assert_true(op.has_crc);
  assert_int_equal(op.crc, Crc32c(big.data(), big.size()));
  assert_int_equal(owner.ssd.reads() - reads_before, 3);  // 9 MiB in pieces of <= 4 MiB
  assert_int_equal(owner.server->disk_reads_served(), 5);
}

// Every refusal a well-formed payload can earn, each with its code, nothing served, and
// the connection still in step (a good read follows on it).
void test_read_disk_refusals_keep_the_connection(void**) {
  Owner owner;
  const std::string value = Pattern(4096, 3);
  const int64_t crc = Crc32c(value.data(), value.size());
  owner.ssd.Put("k", value, crc);
  owner.ssd.Put("rotten", value, crc, /*corrupt=*/true);
  int fd = Connect(owner);
  const transfer::DiskRead good = Ask("k", 0, value.size(), value.size(), crc);
  struct Case {
    const char* what;
    transfer::DiskRead read;
    int64_t segment, epoch;
    ErrorCode code;
  } cases[] = {
      {"unknown segment", good, 12345, kEpoch, ErrorCode::SEGMENT_NOT_FOUND},
      {"a memory segment", good, kMemorySegment, kEpoch, ErrorCode::INVALID_PARAMS},
      {"another master's lease", good, kDiskSegment, kEpoch + 1, ErrorCode::LEASE_EXPIRED},
      {"unknown key", Ask("nope", 0, 10, value.size(), crc), kDiskSegment, kEpoch,
       ErrorCode::OBJECT_NOT_FOUND},
      {"another size", Ask("k", 0, 10, value.size() + 1, crc), kDiskSegment, kEpoch,
       ErrorCode::OBJECT_NOT_FOUND},
      {"another checksum", Ask("k", 0, 10, value.size(), crc ^ 1), kDiskSegment, kEpoch,
       ErrorCode::OBJECT_NOT_FOUND},
      {"length 0", Ask("k", 0, 0, value.size(), crc), kDiskSegment, kEpoch,
       ErrorCode::INVALID_PARAMS},
      {"over 4 MiB", Ask("k", 0, (4 << 20) + 1, 8 << 20, crc), kDiskSegment, kEpoch,
       ErrorCode::INVALID_PARAMS},
      {"outside the value", Ask("k", 4000, 100, value.size(), crc), kDiskSegment, kEpoch,
       ErrorCode::INVALID_PARAMS},
      {"overflowing range", Ask("k", ~0ull - 5, 10, value.size(), crc), kDiskSegment, kEpoch,
       ErrorCode::INVALID_PARAMS},
  };
  for (const Case& c : cases) {
    print_message("READ_DISK, %s\n", c.what);
    assert_int_equal(ReadDisk(fd, c.read, nullptr, c.segment, c.epoch), Code(c.code));
  }
  assert_int_equal(owner.ssd.reads(), 0);  // the SSD was never read for any of them
  // Corrupt: -801 once, dropped, then not there.
  const transfer::DiskRead rotten = Ask("rotten", 0, value.size(), value.size(), crc);
  assert_int_equal(ReadDisk(fd, rotten), Code(ErrorCode::CHECKSUM_MISMATCH));
  assert_false(owner.ssd.Holds("rotten"));
  assert_int_equal(ReadDisk(fd, rotten), Code(ErrorCode::OBJECT_NOT_FOUND));
  std::string got;
  assert_int_equal(ReadDisk(fd, good, &got), 0);
  assert_true(got == value);
  assert_int_equal(owner.server->disk_reads_served(), 1);
  close(fd);
}

// A header the payload's length cannot be trusted by (an offset set, a payload too short
// for the fixed fields or too long for a key), and a payload cut short, close the
// connection with nothing served.
void test_read_disk_bad_headers_close_the_connection(void**) {
  Owner owner;
  owner.ssd.Put("k", Pattern(100, 4), -1);
  const std::string payload = transfer::EncodeDiskRead(Ask("k", 0, 100, 100, -1));
  struct Case {
    const char* what;
    uint64_t offset, length;
  } cases[] = {
      {"an offset", 8, payload.size()},
      {"fixed fields cut short", 0, 20},
      {"no key", 0, transfer::kDiskReadFixedBytes},
      {"a key over the longest", 0, transfer::kDiskReadFixedBytes + transfer::kMaxDiskKey + 1},
      {"a payload of 1 GiB", 0, 1ull << 30},
  };
  for (const Case& c : cases) {
    print_message("READ_DISK header with %s\n", c.what);
    int fd = Connect(owner);
    assert_true(SendHeader(fd, kDiskSegment, c.offset, c.length, kEpoch, ""));
    assert_int_equal(ReplyCode(fd), Code(ErrorCode::INVALID_PARAMS));
    assert_true(ClosedSilently(fd));
    close(fd);
  }
  // Truncated: the header promises more payload than comes, and the peer goes quiet.
  int fd = Connect(owner);
  assert_true(SendHeader(fd, kDiskSegment, 0, payload.size(), kEpoch, payload.substr(0, 20)));
  shutdown(fd, SHUT_WR);
  assert_true(ClosedSilently(fd));
  close(fd);
  assert_int_equal(owner.ssd.reads(), 0);
  assert_int_equal(owner.server->disk_reads_served(), 0);
}

// With a cluster key, READ_DISK before the handshake is -1400 and closed, the SSD unread;
// the daemons' client holding the key is served.
void test_read_disk_needs_the_cluster_key(void**) {
  auto key =
      std::make_shared<const ClusterKey>(ClusterKey::FromKeys({testing::RandomClusterKey()}));
  Owner owner(key);
  const std::string value = Pattern(5000, 5);
  owner.ssd.Put("k", value, -1);
  int fd = Connect(owner);
  assert_int_equal(ReadDisk(fd, Ask("k", 0, value.size(), value.size(), -1)),
                   Code(ErrorCode::UNAUTHENTICATED));
  assert_true(ClosedSilently(fd));
  close(fd);
  assert_int_equal(owner.ssd.reads(), 0);
  assert_true(owner.server->unauthenticated() >= 1);

  TcpTransport::Options options;
  options.address = "127.0.0.1:1";
  options.cluster_key = key;
  TcpTransport client(options);
  std::string into(value.size(), '\0');
  TransferOp op;
  op.remote = owner.DiskSegment();
  op.disk = std::make_shared<const DiskAddress>(DiskAddress{"k", value.size(), -1});
  op.local = &into[0];
  op.length = value.size();
  std::vector<TransferOp*> ops{&op};
  client.Execute(&ops, Clock::now() + std::chrono::seconds(5));
  assert_int_equal(op.result, 0);
  assert_true(into == value);
}

// At most disk_read_concurrency READ_DISKs read the SSD at once; one more waits, and gets
// -1300 once half the stall timeout has passed with all of them busy; the connection stays
// usable, and once the reads end it is served.
void test_disk_reads_are_bounded(void**) {
  Owner owner(nullptr, 2, /*stall_ms=*/1000);
  const std::string value = Pattern(1 << 20, 6);
  owner.ssd.Put("k", value, -1);
  const transfer::DiskRead read = Ask("k", 0, value.size(), value.size(), -1);
  owner.ssd.Hold(true);
  std::vector<int> fds;
  std::vector<std::thread> readers;
  std::atomic<int> served{0};
  for (int i = 0; i < 2; ++i) {
    fds.push_back(Connect(owner));
    readers.emplace_back([&, fd = fds.back()] {
      std::string got;
      if (ReadDisk(fd, read, &got) == 0 && got == value) served.fetch_add(1);
    });
  }
  owner.ssd.AwaitReading(2);
  int third = Connect(owner);
  auto t0 = Clock::now();
  assert_int_equal(ReadDisk(third, read), Code(ErrorCode::RESOURCE_LIMIT_EXCEEDED));
  double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  print_message("the third disk read waited %.3f s, then was refused\n", waited);
  assert_true(waited >= 0.4);
  assert_int_equal(owner.ssd.most_at_once(), 2);
  owner.ssd.Hold(false);
  for (auto& t : readers) t.join();
  assert_int_equal(served.load(), 2);
  std::string got;
  assert_int_equal(ReadDisk(third, read, &got), 0);  // still in step, and served now
  assert_true(got == value);
  assert_int_equal(owner.ssd.most_at_once(), 2);
  for (int fd : fds) close(fd);
  close(third);
}

// ---- ReplicaIO ----------------------------------------------------------------------------

ReplicaTarget Target(ReplicaTier tier, const std::string& owner_name, int64_t id) {
  ReplicaTarget t;
  t.segment_id = id;
  static std::shared_ptr<SegmentMemory> local;
  static MemorySsd ssd;
  if (tier == ReplicaTier::kLocalMemory) {
    std::string error;
    if (local == nullptr) local = SegmentMemory::Create(1 << 20, &error);
    t.segment = local;
  } else if (tier == ReplicaTier::kLocalDisk) {
    t.ssd = &ssd;
  } else {
    auto r = std::make_shared<RemoteSegment>();
    r->name = owner_name;
    r->disk = tier == ReplicaTier::kRemoteDisk;
    t.remote = r;
  }
  if (tier == ReplicaTier::kLocalDisk || tier == ReplicaTier::kRemoteDisk) {
    t.disk = std::make_shared<const DiskAddress>(DiskAddress{"k", 10, -1});
  }
  return t;
}

// Local memory, remote memory, local disk, remote disk; owners suspected dead after all of
// those (memory, then disk); ties keep the master's order.
void test_candidates_are_ordered_by_tier(void**) {
  std::vector<ReplicaTarget> c = {
      Target(ReplicaTier::kRemoteDisk, "dead:1", 1),
      Target(ReplicaTier::kRemoteDisk, "b:1", 2),
      Target(ReplicaTier::kLocalDisk, "", 3),
      Target(ReplicaTier::kRemoteMemory, "dead:1", 4),
      Target(ReplicaTier::kRemoteMemory, "a:1", 5),
      Target(ReplicaTier::kLocalMemory, "", 6),
      Target(ReplicaTier::kRemoteDisk, "c:1", 7),
  };
  ReplicaIO::Order(&c, [](const std::string& name) { return name == "dead:1"; });
  const int64_t want[] = {6, 5, 3, 2, 7, 4, 1};
  assert_int_equal(c.size(), 7);
  for (size_t i = 0; i < c.size(); ++i) assert_int_equal(c[i].segment_id, want[i]);
}

// A daemon that knows no master (GetAllSegments fails): from a list, its own disk replica
// (once SetDiskTier named its disk segment) is a local-disk candidate carrying the key, the
// size and the checksum; replicas of segments nobody published are none.
void test_candidates_from_a_replica_list(void**) {
  MasterClientOptions mo;
  mo.port = testing::FreeTcpPort();  // nobody listens
  mo.connect_timeout_ms = 200;
  MasterClient master(mo);
  TcpTransport::Options to;
  to.address = "127.0.0.1:1";
  TransferEngine engine(&master, std::unique_ptr<TcpTransport>(new TcpTransport(to)), nullptr);
  Membership membership(&master, &engine, "127.0.0.1:1", 1000);
  ReplicaIO io(&membership, &engine);
  std::vector<rpc::ReplicaDescriptor> list(3);
  list[0].kind = rpc::ReplicaKind::MEMORY;  // a segment nobody published
  list[0].segment_id = 77;
  list[1].kind = rpc::ReplicaKind::LOCAL_DISK;  // another daemon's, unpublished
  list[1].segment_id = 78;
  list[2].kind = rpc::ReplicaKind::LOCAL_DISK;  // ours
  list[2].segment_id = kDiskSegment;
  assert_true(io.Candidates("key", list, 100, 42, kEpoch).empty());  // no SSD tier yet
  MemorySsd ssd;
  io.SetDiskTier(&ssd, kDiskSegment);
  std::vector<ReplicaTarget> c = io.Candidates("key", list, 100, 42, kEpoch);
  assert_int_equal(c.size(), 1);
  assert_int_equal(static_cast<int>(c[0].tier()), static_cast<int>(ReplicaTier::kLocalDisk));
  assert_true(c[0].ssd == &ssd);
  assert_true(c[0].disk->key == "key");
  assert_int_equal(c[0].disk->value_size, 100);
  assert_int_equal(c[0].disk->checksum, 42);
  assert_int_equal(c[0].master_epoch, kEpoch);
}

// A read tries a corrupt local SSD copy (-801, dropped), a remote owner that no longer
// holds the value (-704), a remote owner whose bytes fail the checksum, and is served by
// the last; a staged chunk falls through the same way; the counters say where.
void test_a_read_falls_through_failing_disk_replicas(void**) {
  const std::string value = Pattern(100 << 10, 7);
  const int64_t crc = Crc32c(value.data(), value.size());
  MemorySsd local;
  local.Put("k", value, crc, /*corrupt=*/true);
  Owner forgot, lying, good;
  std::string wrong = value;
  wrong[500] ^= 1;
  lying.ssd.Put("k", wrong, -1);  // its copy knows no checksum, and is wrong
  good.ssd.Put("k", value, crc);

  MasterClientOptions mo;
  mo.port = testing::FreeTcpPort();
  MasterClient master(mo);
  TcpTransport::Options to;
  to.address = "127.0.0.1:1";
  TransferEngine engine(&master, std::unique_ptr<TcpTransport>(new TcpTransport(to)), nullptr);
  ReplicaIO io(nullptr, &engine);
  auto disk = std::make_shared<const DiskAddress>(DiskAddress{"k", value.size(), crc});
  std::vector<ReplicaTarget> candidates(4);
  candidates[0].ssd = &local;
  Owner* owners[] = {&forgot, &lying, &good};
  for (int i = 0; i < 3; ++i) candidates[i + 1].remote = owners[i]->DiskSegment();
  for (ReplicaTarget& t : candidates) {
    t.disk = disk;
    t.master_epoch = kEpoch;
  }

  std::string into(value.size(), '\0');
  std::vector<ValueSlice> slices{{&candidates, 0, &into[0], value.size()}};
  io.ReadAny(&slices, {crc}, Clock::now() + std::chrono::seconds(10));
  assert_int_equal(slices[0].result, 0);
  assert_int_equal(slices[0].served, 3);
  assert_int_equal(static_cast<int>(slices[0].served_tier),
                   static_cast<int>(ReplicaTier::kRemoteDisk));
  assert_true(into == value);
  assert_false(local.Holds("k"));  // the corrupt copy was dropped
  assert_int_equal(forgot.server->disk_reads_refused(), 1);
  assert_int_equal(lying.server->disk_reads_served(), 1);
  assert_int_equal(io.disk_reads().remote, 1);
  assert_int_equal(io.disk_reads().local, 0);

  // A chunk: the local copy (now gone) and the forgetful owner fail, lying serves (no
  // checksum on a chunk: the staged get checks the whole value at the end).
  local.Put("k", value, crc);
  std::string chunk(4096, '\0');
  Result<size_t> served = io.ReadFrom(candidates, 0, 8192, &chunk[0], chunk.size(),
                                      Clock::now() + std::chrono::seconds(10));
  assert_true(served.ok());
  assert_int_equal(served.value(), 0);  // the local SSD holds it again: served there
  assert_true(chunk == value.substr(8192, 4096));
  assert_int_equal(io.disk_reads().local, 1);
  local.Forget({"k"});
  served = io.ReadFrom(candidates, 0, 8192, &chunk[0], chunk.size(),
                       Clock::now() + std::chrono::seconds(10));
  assert_true(served.ok());
  assert_int_equal(served.value(), 2);

  // None good: the result says the checksum was wrong, not that nothing answered.
  std::vector<ReplicaTarget> bad{candidates[1], candidates[2]};
  slices = {{&bad, 0, &into[0], value.size()}};
  io.ReadAny(&slices, {crc}, Clock::now() + std::chrono::seconds(10));
  assert_int_equal(slices[0].result, Code(ErrorCode::CHECKSUM_MISMATCH));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read_disk_serves_the_bytes),
      cmocka_unit_test(test_read_disk_refusals_keep_the_connection),
      cmocka_unit_test(test_read_disk_bad_headers_close_the_connection),
      cmocka_unit_test(test_read_disk_needs_the_cluster_key),
      cmocka_unit_test(test_disk_reads_are_bounded),
      cmocka_unit_test(test_candidates_are_ordered_by_tier),
      cmocka_unit_test(test_candidates_from_a_replica_list),
      cmocka_unit_test(test_a_read_falls_through_failing_disk_replicas),
  };
  return cmocka_run_group_tests_name("disk reads", tests, nullptr, nullptr);
}
