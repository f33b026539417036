// The transfer engine's parts in one process: the wire format, the transfer server over a
// real segment and real loopback sockets, the TCP transport against it (striping, pooled
// connections, dead, frozen and restarted peers, hostile requests), CONTROL calls, the
// choice of transport, and chunked checksums. The whole cluster (master and daemons) is
// exercised by tests/cluster_test.c.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/base/crc32c.h"
#include "common/base/error_code.h"
#include "daemon/base/chunked_checksum.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/transfer/tcp_io.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transfer_engine.h"
#include "daemon/transfer/transfer_protocol.h"
#include "daemon/transfer/transfer_server.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kSegmentId = 42;
constexpr uint64_t kSegmentSize = 16ull << 20;
constexpr int32_t kTransferFail = static_cast<int32_t>(ErrorCode::TRANSFER_FAIL);
constexpr int64_t kMasterEpoch = 5;  // of the master the fixture's segment is "mounted" at

// A listening socket on a free loopback port.
int Listen(int* port, int want = 0) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(want));
  assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  assert_int_equal(listen(fd, 64), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

void Fill(char* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(rng());
}

Clock::time_point In(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// For the raw connections of the tests, opened with a stall timeout of 2 s.
const tcp_io::Bounds kBounds{2000};

// A segment served on a loopback port, and a transport to reach it.
struct Fixture {
  std::shared_ptr<SegmentMemory> segment;
  int port = 0;
  std::unique_ptr<TransferServer> server;
  std::unique_ptr<TcpTransport> tcp;
  std::shared_ptr<RemoteSegment> remote = std::make_shared<RemoteSegment>();
  EpochGate gate;  // the owner's: mounted at the master of kMasterEpoch

  explicit Fixture(int streams = 4, int stall_ms = 2000, int connect_ms = 1000) {
    std::string error;
    segment = SegmentMemory::Create(kSegmentSize, &error);
    assert_non_null(segment.get());
    StartServer(0);
    TcpTransport::Options o;
    o.address = "127.0.0.1:1";
    o.streams = streams;
    o.stripe_min_bytes = 1 << 20;
    o.stall_timeout_ms = stall_ms;
    o.connect_timeout_ms = connect_ms;
    tcp.reset(new TcpTransport(o));
    remote->segment_id = kSegmentId;
    remote->name = "127.0.0.1:" + std::to_string(port);
    remote->size = kSegmentSize;
    rpc::TransportEndpoint e;
    e.protocol = "tcp";
    e.address = remote->name;
    remote->endpoints.push_back(e);
  }

  void StartServer(int want_port) {
    int fd = Listen(&port, want_port);
    std::shared_ptr<SegmentMemory> s = segment;
    TransferServer::Options options;
    options.stall_timeout_ms = 1000;
    server.reset(new TransferServer(
        fd, [s](int64_t id) { return id == kSegmentId ? s : nullptr; }, options));
    gate.Set(kMasterEpoch);
    server->SetEpochGate(&gate);
    server->SetControlHandler(transfer::ControlChannel::kRdmaConnect,
                              [](const std::string& in, std::string* out) {
                                out->assign(in.rbegin(), in.rend());
                                return ErrorCode::OK;
                              });
    server->Start();
  }

  int32_t Move(TransferKind kind, uint64_t remote_offset, char* local, uint64_t length,
               std::shared_ptr<const RemoteSegment> where = nullptr) {
    TransferOp op;
    op.kind = kind;
    op.remote = where != nullptr ? where : remote;
    op.remote_offset = remote_offset;
    op.local = local;
    op.length = length;
    std::vector<TransferOp*> ops{&op};
    tcp->Execute(&ops, In(5000));
    return ToInt(op.result);
  }
};

void test_protocol_round_trip(void**) {
  transfer::RequestHeader h;
  h.op = static_cast<uint16_t>(transfer::Op::kWrite);
  h.request_id = 0x1122334455667788ull;
  h.segment_id = -5;
  h.offset = UINT64_MAX - 1;
  h.length = 1ull << 40;
  char wire[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, wire);
  assert_memory_equal(wire, "MCTP", 4);  // readable in a packet dump
  transfer::RequestHeader back;
  assert_true(transfer::DecodeRequest(wire, &back));
  assert_int_equal(back.request_id, h.request_id);
  assert_int_equal(back.segment_id, -5);
  assert_true(back.offset == h.offset && back.length == h.length);
  wire[6] = 9;  // an unknown op
  assert_false(transfer::DecodeRequest(wire, &back));
  transfer::EncodeRequest(h, wire);
  wire[4] = 2;  // another version
  assert_false(transfer::DecodeRequest(wire, &back));
  h.master_epoch = -77;
  transfer::EncodeRequest(h, wire);
  assert_true(transfer::DecodeRequest(wire, &back));
  assert_int_equal(back.master_epoch, -77);

  transfer::ReplyHeader r;
  r.code = ErrorCode::CHECKSUM_MISMATCH;
  r.request_id = 7;
  r.length = 99;
  char reply[transfer::kReplyHeaderSize];
  transfer::EncodeReply(r, reply);
  transfer::ReplyHeader rb;
  assert_true(transfer::DecodeReply(reply, &rb));
  assert_int_equal(rb.code, -801);
  assert_int_equal(rb.length, 99);
  reply[0] = 'X';
  assert_false(transfer::DecodeReply(reply, &rb));
}

// HELLO's payload: what one daemon encodes, another decodes; anything else is refused.
void test_hello_round_trip(void**) {
  assert_true(transfer::KnownOp(static_cast<uint16_t>(transfer::Op::kHello)));
  assert_true(transfer::KnownOp(static_cast<uint16_t>(transfer::Op::kAuth)));
  assert_false(transfer::KnownOp(0x102));
  transfer::Hello hello{std::string(transfer::kMaxDaemonName, 'n'), ""};
  std::string wire = transfer::EncodeHello(hello);
  transfer::Hello back;
  const char* why = nullptr;
  assert_true(transfer::DecodeHello(wire.data(), wire.size(), &back, &why));
  assert_true(back.daemon_name == hello.daemon_name);
  // A truncated field, or one byte short, or one too many.
  for (size_t cut : {size_t{0}, size_t{3}, wire.size() - 1}) {
    assert_false(transfer::DecodeHello(wire.data(), cut, &back, &why));
  }
  std::string longer = wire + "x";
  assert_false(transfer::DecodeHello(longer.data(), longer.size(), &back, &why));
  for (const std::string& name : {std::string(), std::string(transfer::kMaxDaemonName + 1, 'n'),
                                  std::string("a b:1"), std::string("a\x01:1")}) {
    wire = transfer::EncodeHello(transfer::Hello{name, ""});
    assert_false(transfer::DecodeHello(wire.data(), wire.size(), &back, &why));
    assert_non_null(why);
  }
  // With a client nonce (the cluster-key handshake): it round-trips; one of another size,
  // or the fields out of order, is refused.
  transfer::Hello keyed{"a:1", std::string(transfer::kNonceBytes, '\x5a')};
  wire = transfer::EncodeHello(keyed);
  transfer::Hello keyed_back;
  assert_true(transfer::DecodeHello(wire.data(), wire.size(), &keyed_back, &why));
  assert_true(keyed_back.daemon_name == "a:1" && keyed_back.client_nonce == keyed.client_nonce);
  for (size_t size : {transfer::kNonceBytes - 1, transfer::kNonceBytes + 1}) {
    wire = transfer::EncodeHello(transfer::Hello{"a:1", std::string(size, 'n')});
    assert_false(transfer::DecodeHello(wire.data(), wire.size(), &back, &why));
  }
  std::string name_field = transfer::EncodeHello(transfer::Hello{"a:1", ""});
  std::string nonce_first = transfer::EncodeHello(keyed).substr(name_field.size()) + name_field;
  assert_false(transfer::DecodeHello(nonce_first.data(), nonce_first.size(), &back, &why));
  assert_string_equal(why, "HELLO fields repeated or out of order");
}

void test_write_then_read_small_and_striped(void**) {
  Fixture f;
  std::vector<char> out(12 << 20), in(12 << 20);
  Fill(out.data(), out.size(), 1);
  assert_int_equal(f.Move(TransferKind::kWrite, 100, out.data(), 4096), 0);
  assert_memory_equal(f.segment->base() + 100, out.data(), 4096);
  assert_int_equal(f.Move(TransferKind::kRead, 100, in.data(), 4096), 0);
  assert_memory_equal(in.data(), out.data(), 4096);

  // 12 MiB is cut into 4 pieces on 4 connections; every byte lands where it belongs.
  assert_int_equal(f.Move(TransferKind::kWrite, 4096 + 3, out.data(), out.size()), 0);
  assert_memory_equal(f.segment->base() + 4096 + 3, out.data(), out.size());
  std::memset(in.data(), 0, in.size());
  assert_int_equal(f.Move(TransferKind::kRead, 4096 + 3, in.data(), in.size()), 0);
  assert_memory_equal(in.data(), out.data(), in.size());
  assert_true(f.tcp->open_connections() >= 2);

  // Many ops of one Execute, in parallel.
  std::vector<TransferOp> ops(8);
  std::vector<TransferOp*> pointers;
  Fill(out.data(), 8 << 20, 2);
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].kind = TransferKind::kWrite;
    ops[i].remote = f.remote;
    ops[i].remote_offset = i << 20;
    ops[i].local = out.data() + (i << 20);
    ops[i].length = 1 << 20;
    pointers.push_back(&ops[i]);
  }
  f.tcp->Execute(&pointers, In(5000));
  for (const auto& op : ops) assert_int_equal(op.result, 0);
  assert_memory_equal(f.segment->base(), out.data(), 8 << 20);
}

// The CRC32C of what moved, computed per piece (striped) and combined.
void test_checksums_on_the_way(void**) {
  Fixture f;
  std::vector<char> out((5 << 20) + 17), in(out.size());
  Fill(out.data(), out.size(), 6);
  for (uint64_t length : {uint64_t{1000}, uint64_t{out.size()}}) {
    TransferOp write{TransferKind::kWrite, f.remote, 64, out.data(), length};
    write.want_crc = true;
    TransferOp read{TransferKind::kRead, f.remote, 64, in.data(), length};
    read.want_crc = true;
    std::vector<TransferOp*> w{&write}, r{&read};
    f.tcp->Execute(&w, In(5000));
    f.tcp->Execute(&r, In(5000));
    uint32_t expect = Crc32c(out.data(), length);
    assert_true(write.result == ErrorCode::OK && write.has_crc && write.crc == expect);
    assert_true(read.result == ErrorCode::OK && read.has_crc && read.crc == expect);
  }
  // Not asked for, not computed; a failed op has none.
  TransferOp plain{TransferKind::kRead, f.remote, 0, in.data(), 100};
  TransferOp outside{TransferKind::kRead, f.remote, kSegmentSize, in.data(), 100};
  outside.want_crc = true;
  std::vector<TransferOp*> ops{&plain, &outside};
  f.tcp->Execute(&ops, In(5000));
  assert_false(plain.has_crc);
  assert_int_equal(outside.result, kTransferFail);
  assert_false(outside.has_crc);
}

// Reads under a lease of the master the owner is mounted at now, or unchecked, are served;
// under another master's lease (it restarted, the range may be another object's) refused.
void test_reads_under_another_masters_lease_are_refused(void**) {
  Fixture f(1);
  char buf[64];
  for (int64_t epoch : {kMasterEpoch, int64_t{0}, kMasterEpoch + 1}) {
    TransferOp read{TransferKind::kRead, f.remote, 0, buf, sizeof(buf)};
    read.master_epoch = epoch;
    std::vector<TransferOp*> ops{&read};
    f.tcp->Execute(&ops, In(2000));
    assert_int_equal(read.result, epoch == kMasterEpoch + 1 ? kTransferFail : 0);
  }
  assert_int_equal(f.tcp->open_connections(), 1);  // a refused READ keeps the connection
}

// The same for writes, under the reservation of the master that placed them: one from a
// master the owner has left would overwrite what the new master put in that range.
void test_writes_under_another_masters_reservation_are_refused(void**) {
  Fixture f(1);
  std::vector<char> buf(64, 'w');
  std::memset(f.segment->base(), 0, buf.size());
  for (int64_t epoch : {kMasterEpoch + 1, kMasterEpoch, int64_t{0}}) {
    TransferOp write{TransferKind::kWrite, f.remote, 0, buf.data(), buf.size()};
    write.master_epoch = epoch;
    std::vector<TransferOp*> ops{&write};
    f.tcp->Execute(&ops, In(2000));
    assert_int_equal(write.result, epoch == kMasterEpoch + 1 ? kTransferFail : 0);
    // The refused one wrote nothing.
    assert_int_equal(f.segment->base()[0], epoch == kMasterEpoch + 1 ? 0 : 'w');
  }
}

// An owner moving to a new master waits for the writes it admitted under the old one, and
// admits no more of them.
void test_epoch_gate_drains_admitted_writes(void**) {
  EpochGate gate;
  gate.Set(1);
  std::atomic<bool> done{false};
  auto admitted = std::make_unique<EpochGate::Write>(&gate, 1);
  assert_true(admitted->admitted());
  std::thread mover([&] {
    assert_true(gate.Advance(2, std::chrono::seconds(60)));
    done = true;
  });
  // The mover has moved the epoch: it is in Advance, waiting for the admitted write.
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (gate.epoch() != 2 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  assert_int_equal(gate.epoch(), 2);
  assert_false(done.load());  // still waiting for the write admitted under epoch 1
  assert_false(EpochGate::Write(&gate, 1).admitted());
  admitted.reset();
  mover.join();
  assert_true(done.load());
  assert_true(EpochGate::Write(&gate, 2).admitted());
  assert_true(EpochGate::Write(&gate, 0).admitted());
  EpochGate::Write stuck(&gate, 2);
  assert_false(gate.Advance(3, std::chrono::milliseconds(20)));  // gives up, says so
}

// Gigabytes through one connection, both ways, with no error and no reconnect.
void test_gigabytes_through_one_connection(void**) {
  Fixture f(1);
  std::vector<char> out(kSegmentSize), in(kSegmentSize);
  uint64_t moved = 0;
  for (uint32_t round = 0; moved < (3ull << 30); ++round) {
    out[round % out.size()] = static_cast<char>(round);  // each round's bytes differ
    assert_int_equal(f.Move(TransferKind::kWrite, 0, out.data(), out.size()), 0);
    assert_int_equal(f.Move(TransferKind::kRead, 0, in.data(), in.size()), 0);
    moved += 2 * out.size();
  }
  assert_memory_equal(in.data(), out.data(), in.size());
  assert_int_equal(f.tcp->open_connections(), 1);
}

void test_connections_are_pooled(void**) {
  Fixture f;
  char buf[512];
  for (int i = 0; i < 300; ++i) {
    assert_int_equal(f.Move(TransferKind::kRead, static_cast<uint64_t>(i) * 512, buf, 512), 0);
  }
  // Sequential transfers reuse one connection: no handshake each, no port churn.
  assert_int_equal(f.tcp->open_connections(), 1);
}

void test_refusals_fail_the_op_and_the_server_goes_on(void**) {
  Fixture f;
  char buf[4096];
  assert_int_equal(f.Move(TransferKind::kRead, kSegmentSize - 10, buf, 100), kTransferFail);
  assert_int_equal(f.Move(TransferKind::kWrite, kSegmentSize, buf, 1), kTransferFail);
  auto unknown = std::make_shared<RemoteSegment>(*f.remote);
  unknown->segment_id = 43;
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, 100, unknown), kTransferFail);
  assert_int_equal(f.Move(TransferKind::kWrite, 0, buf, 100, unknown), kTransferFail);
  auto no_tcp = std::make_shared<RemoteSegment>(*f.remote);
  no_tcp->endpoints.clear();
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, 100, no_tcp), kTransferFail);
  // Still serving, on the pooled connection that survived the refused READs or a new one.
  Fill(buf, sizeof(buf), 3);
  assert_int_equal(f.Move(TransferKind::kWrite, 0, buf, sizeof(buf)), 0);
  assert_memory_equal(f.segment->base(), buf, sizeof(buf));
}

// Raw bytes at the port, as a hostile or broken peer would send them.
void test_hostile_requests(void**) {
  Fixture f;
  std::string error;
  auto connect = [&] {
    int fd = tcp_io::Connect(f.remote->name, 1000, 2000, &error);
    assert_true(fd >= 0);
    return fd;
  };
  auto reply_code = [](int fd, transfer::ReplyHeader* r) {
    char head[transfer::kReplyHeaderSize];
    if (!tcp_io::Recv(fd, head, sizeof(head), kBounds)) return false;
    return transfer::DecodeReply(head, r);
  };
  transfer::ReplyHeader r;

  // Garbage: refused with -600, then the connection is closed.
  int fd = connect();
  char garbage[transfer::kRequestHeaderSize];
  Fill(garbage, sizeof(garbage), 4);
  assert_true(tcp_io::Send(fd, garbage, sizeof(garbage), nullptr, 0, kBounds));
  assert_true(reply_code(fd, &r));
  assert_int_equal(r.code, -600);
  char byte;
  assert_int_equal(recv(fd, &byte, 1, 0), 0);
  close(fd);

  // A READ past the end (offset + length overflowing too): refused, connection kept.
  fd = connect();
  transfer::RequestHeader h;
  h.op = static_cast<uint16_t>(transfer::Op::kRead);
  h.segment_id = kSegmentId;
  h.offset = UINT64_MAX - 5;
  h.length = 100;
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  assert_true(tcp_io::Send(fd, head, sizeof(head), nullptr, 0, kBounds));
  assert_true(reply_code(fd, &r));
  assert_int_equal(r.code, -600);
  h.offset = 0;
  h.length = 1ull << 40;  // a huge length
  transfer::EncodeRequest(h, head);
  assert_true(tcp_io::Send(fd, head, sizeof(head), nullptr, 0, kBounds));
  assert_true(reply_code(fd, &r));
  assert_int_equal(r.code, -600);
  h.length = 64;
  h.request_id = 77;
  transfer::EncodeRequest(h, head);
  assert_true(tcp_io::Send(fd, head, sizeof(head), nullptr, 0, kBounds));
  assert_true(reply_code(fd, &r));
  assert_int_equal(r.code, 0);
  assert_int_equal(r.request_id, 77);
  char data[64];
  assert_true(tcp_io::Recv(fd, data, sizeof(data), kBounds));
  assert_memory_equal(data, f.segment->base(), 64);
  close(fd);

  // A WRITE with a huge length to an unknown segment: refused, closed, nothing written.
  fd = connect();
  h.op = static_cast<uint16_t>(transfer::Op::kWrite);
  h.segment_id = 999;
  h.length = 1ull << 40;
  transfer::EncodeRequest(h, head);
  assert_true(tcp_io::Send(fd, head, sizeof(head), nullptr, 0, kBounds));
  assert_true(reply_code(fd, &r));
  assert_int_equal(r.code, -101);
  close(fd);

  // A truncated header, then hang up; a WRITE whose payload never comes in full.
  fd = connect();
  assert_true(tcp_io::Send(fd, head, 20, nullptr, 0, kBounds));
  close(fd);
  fd = connect();
  h.segment_id = kSegmentId;
  h.offset = 0;
  h.length = 1 << 20;
  transfer::EncodeRequest(h, head);
  assert_true(tcp_io::Send(fd, head, sizeof(head), data, sizeof(data), kBounds));
  close(fd);

  // The server is unharmed.
  char buf[256];
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, sizeof(buf)), 0);
}

void test_dead_peer_fails_fast(void**) {
  // Timeouts far longer than a refusal takes on a loaded machine: "fast" is then told from
  // "waited for one of them" by a generous bound.
  Fixture f(4, 30000, 30000);
  int port = 0;
  int fd = Listen(&port);
  close(fd);  // nothing listens there now
  auto dead = std::make_shared<RemoteSegment>(*f.remote);
  dead->endpoints[0].address = "127.0.0.1:" + std::to_string(port);
  char buf[100];
  auto t0 = Clock::now();
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, sizeof(buf), dead), kTransferFail);
  assert_true(Clock::now() - t0 < std::chrono::seconds(10));
}

void test_frozen_peer_fails_within_the_stall_timeout(void**) {
  Fixture f(1, 300);
  int port = 0;
  int fd = Listen(&port);  // the kernel accepts; nobody ever answers
  auto frozen = std::make_shared<RemoteSegment>(*f.remote);
  frozen->endpoints[0].address = "127.0.0.1:" + std::to_string(port);
  char buf[100];
  auto t0 = Clock::now();
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, sizeof(buf), frozen), kTransferFail);
  auto took = Clock::now() - t0;
  // By the stall timeout, not before; the upper bound only tells it from a hang.
  assert_true(took >= std::chrono::milliseconds(250) && took < std::chrono::seconds(10));
  close(fd);
}

void test_restarted_peer_is_reached_again(void**) {
  Fixture f(1);
  char buf[100];
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, sizeof(buf)), 0);
  int port = f.port;
  f.server.reset();  // its connections close; ours is pooled and now stale
  f.StartServer(port);
  assert_int_equal(f.Move(TransferKind::kRead, 0, buf, sizeof(buf)), 0);
  assert_int_equal(f.tcp->open_connections(), 1);
}

void test_control_calls(void**) {
  Fixture f;
  std::string reply;
  assert_int_equal(f.tcp->CallControl(f.remote->name, transfer::ControlChannel::kRdmaConnect,
                                      "abc", &reply, In(2000)),
                   0);
  assert_string_equal(reply.c_str(), "cba");
  ErrorCode code = f.tcp->CallControl(f.remote->name, static_cast<transfer::ControlChannel>(9),
                                      "x", &reply, In(2000));
  assert_int_equal(code, -600);
}

void test_choose_transport(void**) {
  TransportChoice c = TransportChoice::kRdma;
  std::string message;
  assert_true(ChooseTransport("auto", {}, &c, &message));
  assert_true(c == TransportChoice::kTcp);
  assert_non_null(std::strstr(message.c_str(), "no RDMA device"));
  assert_true(ChooseTransport("auto", {"mlx5_0"}, &c, &message));
  assert_true(c == TransportChoice::kRdma);
  assert_true(ChooseTransport("tcp", {"mlx5_0"}, &c, &message));
  assert_true(c == TransportChoice::kTcp);
  assert_false(ChooseTransport("rdma", {}, &c, &message));
  assert_non_null(std::strstr(message.c_str(), "no RDMA device"));
  assert_true(ChooseTransport("rdma", {"mlx5_0", "mlx5_1"}, &c, &message));
  assert_true(c == TransportChoice::kRdma);
  assert_false(ChooseTransport("udp", {}, &c, &message));
}

void test_failed_peers_are_suspect(void**) {
  Fixture f;
  MasterClientOptions never_asked;
  never_asked.port = 1;
  MasterClient master(never_asked);
  TcpTransport::Options o;
  o.address = "127.0.0.1:1";
  TransferEngine engine(&master, std::unique_ptr<TcpTransport>(new TcpTransport(o)), nullptr);
  assert_string_equal(engine.protocol(), "tcp");
  assert_int_equal(engine.DescribeSegment(nullptr, 0).size(), 1);  // tcp only, no rdma

  int port = 0;
  close(Listen(&port));
  auto dead = std::make_shared<RemoteSegment>(*f.remote);
  dead->name = "127.0.0.1:" + std::to_string(port);
  dead->endpoints[0].address = dead->name;
  char buf[64];
  TransferOp ok_op{TransferKind::kRead, f.remote, 0, buf, sizeof(buf)};
  TransferOp dead_op{TransferKind::kRead, dead, 0, buf, sizeof(buf)};
  std::vector<TransferOp*> ops{&ok_op, &dead_op};
  engine.Execute(&ops, In(2000));
  assert_int_equal(ok_op.result, 0);
  assert_int_equal(dead_op.result, kTransferFail);
  assert_true(engine.Suspect(dead->name));
  assert_false(engine.Suspect(f.remote->name));
}

void test_chunked_checksum(void**) {
  std::vector<char> value(1 << 20);
  Fill(value.data(), value.size(), 5);
  uint32_t whole = Crc32c(value.data(), value.size());
  ChunkedChecksum in_order, shuffled, gap, twice;
  const uint64_t chunk = 300000;  // not a divisor: a short last chunk
  std::vector<uint64_t> offsets;
  for (uint64_t o = 0; o < value.size(); o += chunk) offsets.push_back(o);
  auto add = [&](ChunkedChecksum& c, uint64_t o) {
    c.Add(o, value.data() + o, std::min<uint64_t>(chunk, value.size() - o));
  };
  for (uint64_t o : offsets) add(in_order, o);
  for (size_t i = offsets.size(); i-- > 0;) add(shuffled, offsets[i]);
  for (size_t i = 1; i < offsets.size(); ++i) add(gap, offsets[i]);
  for (uint64_t o : offsets) add(twice, o);
  add(twice, offsets[1]);
  uint32_t crc = 0;
  assert_true(in_order.Total(value.size(), &crc));
  assert_int_equal(crc, whole);
  assert_int_equal(in_order.bytes(), value.size());
  crc = 0;
  assert_true(shuffled.Total(value.size(), &crc));
  assert_int_equal(crc, whole);
  assert_false(gap.Total(value.size(), &crc));
  assert_false(twice.Total(value.size(), &crc));
  assert_false(in_order.Total(value.size() + 1, &crc));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_protocol_round_trip),
      cmocka_unit_test(test_hello_round_trip),
      cmocka_unit_test(test_write_then_read_small_and_striped),
      cmocka_unit_test(test_checksums_on_the_way),
      cmocka_unit_test(test_reads_under_another_masters_lease_are_refused),
      cmocka_unit_test(test_writes_under_another_masters_reservation_are_refused),
      cmocka_unit_test(test_epoch_gate_drains_admitted_writes),
      cmocka_unit_test(test_gigabytes_through_one_connection),
      cmocka_unit_test(test_connections_are_pooled),
      cmocka_unit_test(test_refusals_fail_the_op_and_the_server_goes_on),
      cmocka_unit_test(test_hostile_requests),
      cmocka_unit_test(test_dead_peer_fails_fast),
      cmocka_unit_test(test_frozen_peer_fails_within_the_stall_timeout),
      cmocka_unit_test(test_restarted_peer_is_reached_again),
      cmocka_unit_test(test_control_calls),
      cmocka_unit_test(test_choose_transport),
      cmocka_unit_test(test_failed_peers_are_suspect),
      cmocka_unit_test(test_chunked_checksum),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
