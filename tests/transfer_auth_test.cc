// The transfer port authenticated (issue 12, attack 1), against real processes: a master
// and daemons A, B started with the harness's cluster key, and a victim's object on B.
//   - a raw client without the key that READs the victim's range is refused (-1400) and
//     gets not one byte of it; one that WRITEs into it is refused and the victim reads
//     its own bytes back; one that says HELLO but proves another key, or replays a proof
//     seen on another connection, is refused; the refusals are logged with the peer's
//     address, at most about one line a second;
//   - the daemons' own client (TcpTransport) with the key is served; with another key or
//     none it fails with -800 at once, and B logs why; an impostor owner that cannot prove
//     the key is never sent a byte;
//   - the port listens on the advertised address only (127.0.0.1, not 127.0.0.2), on
//     every address with --transfer_bind_address 0.0.0.0;
//   - a daemon without a key serves peers of its user (or root) on its host with no
//     handshake, and closes a connection from another address at accept, before a byte
//     (another user's: tests/transfer_preauth_test.cc).
// In process: the opening's rules on a TransferServer (the AUTH deadline, AUTH out of
// place, a rotated key); common/host_address's rule has host_address_test, the owner of
// a peer's socket peer_owner_test.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/transfer/tcp_io.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transfer_protocol.h"
#include "daemon/transfer/transfer_server.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"
#include "tests/transfer_test_util.h"

extern "C" {
#include "tests/cluster.h"
#include "tests/cluster_test_util.h"
}

using namespace mooncake;
using Clock = std::chrono::steady_clock;
using testing::kClosed;
using testing::ReplyCode;
using testing::AwaitLogLine;
using testing::BytesUntilClosed;
using testing::ConnectFrom;
using testing::SendRequest;

namespace {

constexpr int A = 0, B = 1;
constexpr size_t kPool = 64 << 20;
constexpr size_t kVictimSize = 256 << 10;
constexpr uint64_t kVictimSeed = 4242;
constexpr int32_t kUnauthenticated = static_cast<int32_t>(ErrorCode::UNAUTHENTICATED);

mc_cluster* g_keyed;     // master, A, B with the harness's key
mc_cluster* g_keyless;   // master and one daemon without a key, on every address
int64_t g_segment = 0;   // where the victim's object lies on B
uint64_t g_offset = 0;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

ClusterKey HarnessKey() {
  std::string error;
  Result<ClusterKey> key = ClusterKey::Load(testing::ClusterKeyFile(), &error);
  assert_true(key.ok());
  return key.value();
}

ClusterKey OtherKey() { return ClusterKey::FromKeys({testing::RandomClusterKey()}); }

// Refusals for want of the key are logged at most once a second: after a second without
// one, the next is logged for sure. Waits that long before a refusal whose line a test
// checks.
void LetTheRefusalLogRest() { std::this_thread::sleep_for(std::chrono::milliseconds(1100)); }

// ---- a raw peer --------------------------------------------------------------------------

int Connect(int port) {
  int fd = ConnectFrom("", "127.0.0.1", port);
  assert_true(fd >= 0);
  return fd;
}

// HELLO naming name with a fresh client nonce: its code, with the nonces.
int32_t HelloWithNonce(int fd, const std::string& name, std::string* client_nonce,
                       std::string* server_nonce) {
  *client_nonce = ClusterKey::NewNonce();
  std::string payload = transfer::EncodeHello(transfer::Hello{name, *client_nonce});
  if (!SendRequest(fd, transfer::Op::kHello, 0, 0, payload.size(), payload)) return kClosed;
  int32_t code = ReplyCode(fd, server_nonce);
  if (code == 0) assert_int_equal(server_nonce->size(), transfer::kNonceBytes);
  return code;
}

int32_t Auth(int fd, const std::string& proof, std::string* answer = nullptr) {
  if (!SendRequest(fd, transfer::Op::kAuth, 0, 0, proof.size(), proof)) return kClosed;
  return ReplyCode(fd, answer);
}

// The whole opening with key: 0 once admitted (and the owner's proof checked).
int32_t Open(int fd, const std::string& name, const ClusterKey& key) {
  std::string client_nonce, server_nonce, answer;
  int32_t code = HelloWithNonce(fd, name, &client_nonce, &server_nonce);
  if (code != 0) return code;
  code = Auth(fd, key.Prove(ClusterKey::Role::kClient, transfer::kAuthContext, client_nonce,
                            server_nonce),
              &answer);
  if (code == 0) {
    assert_true(key.Check(answer, ClusterKey::Role::kServer, transfer::kAuthContext,
                          client_nonce, server_nonce) >= 0);
  }
  return code;
}

// The victim's object, read through daemon i: its bytes must be the victim's own.
void AssertVictimIntact(int i) {
  mooncake_store_t s = connect_app(g_keyed, i, kPool);
  std::vector<char> out(kVictimSize);
  assert_int_equal(mooncake_store_get_into(s, "victim", out.data(), out.size()),
                   static_cast<int64_t>(kVictimSize));
  assert_int_equal(check_pattern(out.data(), out.size(), kVictimSeed), -1);
  mooncake_store_destroy(s);
}

// B's segment as the master published it, for the daemons' own client.
std::shared_ptr<RemoteSegment> SegmentOf(const std::string& address, int64_t id) {
  auto remote = std::make_shared<RemoteSegment>();
  remote->segment_id = id;
  remote->name = address;
  remote->endpoints.push_back(rpc::TransportEndpoint());
  remote->endpoints[0].protocol = "tcp";
  remote->endpoints[0].address = address;
  return remote;
}

// A READ of the victim's range by a TcpTransport holding key (null: none): its result.
int32_t TransportRead(std::shared_ptr<const ClusterKey> key, std::vector<char>* out,
                      double* seconds) {
  TcpTransport::Options options;
  options.address = "127.0.0.1:1";
  // A refusal waited out would take this long: far longer than a loaded machine takes to
  // refuse at once (the bounds below).
  options.connect_timeout_ms = 20000;
  options.cluster_key = std::move(key);
  TcpTransport client(options);
  out->assign(kVictimSize, 0);
  TransferOp op{TransferKind::kRead, SegmentOf(mc_cluster_name_at(g_keyed, B), g_segment),
                g_offset, out->data(), out->size()};
  std::vector<TransferOp*> ops{&op};
  auto t0 = Clock::now();
  client.Execute(&ops, t0 + std::chrono::seconds(10));
  *seconds = SecondsSince(t0);
  return ToInt(op.result);
}

// ---- against the keyed cluster -----------------------------------------------------------

// (a) READs of the victim's range: first thing, after a HELLO without a nonce, after a
// HELLO with one but no AUTH. Each refused with -1400 and closed, not a byte sent.
void test_read_without_the_key_gets_nothing(void**) {
  const int port = mc_cluster_port_at(g_keyed, B);
  LetTheRefusalLogRest();
  int fd = Connect(port);
  assert_true(SendRequest(fd, transfer::Op::kRead, g_segment, g_offset, kVictimSize));
  assert_int_equal(ReplyCode(fd), kUnauthenticated);
  assert_int_equal(BytesUntilClosed(fd), 0);
  close(fd);

  fd = Connect(port);
  std::string hello = transfer::EncodeHello(transfer::Hello{"thief:1", ""});
  assert_true(SendRequest(fd, transfer::Op::kHello, 0, 0, hello.size(), hello));
  assert_int_equal(ReplyCode(fd), kUnauthenticated);
  assert_int_equal(BytesUntilClosed(fd), 0);
  close(fd);

  fd = Connect(port);
  std::string client_nonce, server_nonce;
  assert_int_equal(HelloWithNonce(fd, "thief:1", &client_nonce, &server_nonce), 0);
  assert_true(SendRequest(fd, transfer::Op::kRead, g_segment, g_offset, kVictimSize));
  assert_int_equal(ReplyCode(fd), kUnauthenticated);
  assert_int_equal(BytesUntilClosed(fd), 0);
  close(fd);
  // And a CONTROL (the RDMA set-up channel): refused the same way.
  fd = Connect(port);
  assert_true(SendRequest(fd, transfer::Op::kControl, 1, 0, 64, std::string(64, 'c')));
  assert_int_equal(ReplyCode(fd), kUnauthenticated);
  close(fd);
  assert_true(AwaitLogLine(mc_cluster_log_at(g_keyed, B), "refused 127.0.0.1:",
                           "before the cluster-key handshake"));
}

// (b) WRITEs of the attacker's bytes over the victim's range: refused before the payload
// is read; the victim's get through A and through B returns its own bytes.
void test_write_without_the_key_changes_nothing(void**) {
  const int port = mc_cluster_port_at(g_keyed, B);
  const std::string junk(kVictimSize, '\x66');
  // The header alone first: the refusal comes before any payload.
  int fd = Connect(port);
  assert_true(SendRequest(fd, transfer::Op::kWrite, g_segment, g_offset, kVictimSize));
  assert_int_equal(ReplyCode(fd), kUnauthenticated);
  tcp_io::Send(fd, nullptr, 0, junk.data(), junk.size(), testing::kRawPeerBounds);  // may fail: it closed
  close(fd);
  // Header and payload at once, after a HELLO with a nonce: the owner closes with the
  // payload unread (the reply may be lost to the reset that causes).
  fd = Connect(port);
  std::string client_nonce, server_nonce;
  assert_int_equal(HelloWithNonce(fd, "vandal:1", &client_nonce, &server_nonce), 0);
  SendRequest(fd, transfer::Op::kWrite, g_segment, g_offset, kVictimSize, junk);
  int32_t code = ReplyCode(fd);
  assert_true(code == kUnauthenticated || code == kClosed);
  close(fd);
  AssertVictimIntact(A);
  AssertVictimIntact(B);
}

// (c) HELLO, then AUTH with another key's proof, a proof of the wrong length, or a proof
// replayed from a connection that succeeded: refused, closed; 30 tries log a few lines.
void test_a_wrong_or_replayed_proof_is_refused(void**) {
  const int port = mc_cluster_port_at(g_keyed, B);
  const ClusterKey other = OtherKey();
  LetTheRefusalLogRest();
  auto t0 = Clock::now();
  for (int i = 0; i < 30; ++i) {
    int fd = Connect(port);
    std::string client_nonce, server_nonce;
    assert_int_equal(HelloWithNonce(fd, "guesser:1", &client_nonce, &server_nonce), 0);
    assert_int_equal(Auth(fd, other.Prove(ClusterKey::Role::kClient, transfer::kAuthContext,
                                          client_nonce, server_nonce)),
                     kUnauthenticated);
    assert_int_equal(BytesUntilClosed(fd), 0);
    close(fd);
  }
  double took = SecondsSince(t0);
  int fd = Connect(port);
  std::string client_nonce, server_nonce;
  assert_int_equal(HelloWithNonce(fd, "guesser:1", &client_nonce, &server_nonce), 0);
  assert_int_equal(Auth(fd, std::string(31, 'p')), kUnauthenticated);
  close(fd);

  // A handshake seen on the wire, replayed: the owner's nonce is fresh, the proof stale.
  const ClusterKey key = HarnessKey();
  fd = Connect(port);
  assert_int_equal(HelloWithNonce(fd, "seen:1", &client_nonce, &server_nonce), 0);
  std::string seen_proof =
      key.Prove(ClusterKey::Role::kClient, transfer::kAuthContext, client_nonce, server_nonce);
  assert_int_equal(Auth(fd, seen_proof), 0);
  close(fd);
  fd = Connect(port);
  std::string replayed_nonce = client_nonce, fresh_server_nonce;
  std::string payload = transfer::EncodeHello(transfer::Hello{"seen:1", replayed_nonce});
  assert_true(SendRequest(fd, transfer::Op::kHello, 0, 0, payload.size(), payload));
  assert_int_equal(ReplyCode(fd, &fresh_server_nonce), 0);
  assert_true(fresh_server_nonce != server_nonce);
  assert_int_equal(Auth(fd, seen_proof), kUnauthenticated);
  close(fd);

  assert_true(
      AwaitLogLine(mc_cluster_log_at(g_keyed, B), "wrong proof", "guesser:1 at 127.0.0.1:"));
  int lines = count_log_lines(mc_cluster_log_at(g_keyed, B), "refused", "want of the cluster key");
  double all = SecondsSince(t0);
  print_message("32 wrong proofs in %.2f s (%.2f s with the rest): %d lines about refusals "
                "in B's log\n", took, all, lines);
  // One a second at most, and those of the tests before (a second each, at most two).
  assert_true(lines >= 1 && lines <= static_cast<int>(all) + 3);
  AssertVictimIntact(A);
}

// (d) The daemons' own client: with the key it reads the victim's bytes; with another key
// or none it fails with -800 well within the connect timeout, and B says why.
void test_the_daemons_client_is_served_only_with_the_key(void**) {
  std::vector<char> out;
  double seconds = 0;
  assert_int_equal(TransportRead(std::make_shared<const ClusterKey>(HarnessKey()), &out,
                                 &seconds),
                   0);
  assert_int_equal(check_pattern(out.data(), out.size(), kVictimSeed), -1);
  const int32_t fail = ToInt(ErrorCode::TRANSFER_FAIL);
  assert_int_equal(TransportRead(std::make_shared<const ClusterKey>(OtherKey()), &out,
                                 &seconds),
                   fail);
  assert_true(seconds < 10.0);  // refused at once, not after the connect timeout
  assert_true(std::count(out.begin(), out.end(), 0) == static_cast<long>(out.size()));
  LetTheRefusalLogRest();
  assert_int_equal(TransportRead(nullptr, &out, &seconds), fail);
  assert_true(seconds < 10.0);  // refused at once, not after the connect timeout
  assert_true(std::count(out.begin(), out.end(), 0) == static_cast<long>(out.size()));
  assert_true(AwaitLogLine(mc_cluster_log_at(g_keyed, B), "refused 127.0.0.1:1 at 127.0.0.1:",
                           "HELLO without a client nonce"));
}

// An owner that answers the handshake but cannot prove the key: the client refuses it,
// never sends the WRITE's bytes, and fails the transfer (-800).
void test_an_owner_that_cannot_prove_the_key_is_sent_nothing(void**) {
  int port = 0;
  int listen_fd = testing::ListenOnLoopback(&port);
  assert_true(listen_fd >= 0);
  std::atomic<size_t> after_auth{0};
  std::thread impostor([&] {
    int fd = accept(listen_fd, nullptr, nullptr);
    tcp_io::Configure(fd, 5000);
    for (int request = 0; request < 2; ++request) {
      char head[transfer::kRequestHeaderSize];
      assert_true(tcp_io::Recv(fd, head, sizeof(head), testing::kRawPeerBounds));
      transfer::RequestHeader h;
      assert_true(transfer::DecodeRequest(head, &h));
      std::string payload(h.length, '\0');
      assert_true(tcp_io::Recv(fd, &payload[0], payload.size(), testing::kRawPeerBounds));
      transfer::ReplyHeader r;
      r.request_id = h.request_id;
      r.length = 32;  // a nonce, then a "proof"
      char reply[transfer::kReplyHeaderSize];
      transfer::EncodeReply(r, reply);
      std::string bytes(32, static_cast<char>('a' + request));
      assert_true(tcp_io::Send(fd, reply, sizeof(reply), bytes.data(), bytes.size(), testing::kRawPeerBounds));
    }
    after_auth = BytesUntilClosed(fd);
    close(fd);
  });
  TcpTransport::Options options;
  options.address = "127.0.0.1:1";
  options.cluster_key = std::make_shared<const ClusterKey>(HarnessKey());
  TcpTransport client(options);
  std::vector<char> value(64 << 10, 'v');
  TransferOp op{TransferKind::kWrite, SegmentOf("127.0.0.1:" + std::to_string(port), 7), 0,
                value.data(), value.size()};
  std::vector<TransferOp*> ops{&op};
  client.Execute(&ops, Clock::now() + std::chrono::seconds(5));
  assert_int_equal(op.result, ToInt(ErrorCode::TRANSFER_FAIL));
  assert_int_equal(client.open_connections(), 0);  // closed, not pooled
  impostor.join();
  close(listen_fd);
  assert_int_equal(after_auth.load(), 0);
}

// The port listens on the advertised address only; with --transfer_bind_address 0.0.0.0
// on every one, and the handshake is the same there.
void test_the_port_binds_the_advertised_address(void**) {
  const int port = mc_cluster_port_at(g_keyed, B);
  assert_int_equal(ConnectFrom("", "127.0.0.2", port), -1);
  assert_int_equal(errno, ECONNREFUSED);
  // "transfer port:": the admin HTTP port logs "listening on" too.
  assert_true(count_log_lines(mc_cluster_log_at(g_keyed, B),
                              "transfer port: listening on 127.0.0.1", NULL) == 1);
  const char* flags[] = {"--transfer_bind_address", "0.0.0.0", "--global_segment_size", "16MB",
                         nullptr};
  int d = mc_cluster_add_daemon(g_keyed, flags);
  assert_true(d >= 0);
  assert_int_equal(mc_cluster_daemon_alive(g_keyed, d), 1);
  int fd = ConnectFrom("", "127.0.0.2", mc_cluster_port_at(g_keyed, d));
  assert_true(fd >= 0);
  assert_int_equal(Open(fd, "anywhere:1", HarnessKey()), 0);
  close(fd);
  fd = ConnectFrom("", "127.0.0.2", mc_cluster_port_at(g_keyed, d));
  assert_true(SendRequest(fd, transfer::Op::kRead, 1, 0, 64));
  assert_int_equal(ReplyCode(fd), kUnauthenticated);  // loopback, and still no way in
  close(fd);
  int status = mc_cluster_kill_daemon_at(g_keyed, d, SIGTERM);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// ---- against a daemon without a key --------------------------------------------------------

// This host's IPv4 address that is not a loopback one, or "" when it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
        IsLoopbackAddress(i->ifa_addr)) {
      continue;
    }
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof(text));
    found = text;
  }
  freeifaddrs(list);
  return found;
}

// A peer on this host needs no handshake; a HELLO offering one is refused (-1400).
void test_without_a_key_local_peers_need_no_proof(void**) {
  const int port = mc_cluster_port_at(g_keyless, 0);
  mc_cluster_segment seg;
  assert_int_equal(mc_cluster_segment_at(g_keyless, 0, &seg), 0);
  int fd = Connect(port);
  assert_true(SendRequest(fd, transfer::Op::kRead, seg.id, 0, 64));
  assert_int_equal(ReplyCode(fd), 0);
  close(fd);
  fd = Connect(port);
  std::string client_nonce, server_nonce;
  assert_int_equal(HelloWithNonce(fd, "keyed:1", &client_nonce, &server_nonce),
                   kUnauthenticated);
  close(fd);
}

// A connection from another address than the one it reached (a peer on another host, as
// far as the daemon can tell) is closed at accept, before a byte; one from this host's
// own address to that address is served.
void test_without_a_key_other_hosts_are_refused_at_accept(void**) {
  const std::string address = NonLoopbackAddress();
  if (address.empty()) {
    print_message("no non-loopback IPv4 address on this host: only the unit test of "
                  "PeerOnThisHost (host_address_test) covers the refusal\n");
    return;
  }
  const int port = mc_cluster_port_at(g_keyless, 0);
  mc_cluster_segment seg;
  assert_int_equal(mc_cluster_segment_at(g_keyless, 0, &seg), 0);
  LetTheRefusalLogRest();
  int fd = ConnectFrom(address, "127.0.0.1", port);
  assert_true(fd >= 0);
  SendRequest(fd, transfer::Op::kRead, seg.id, 0, 64);  // may fail: it is closed already
  assert_int_equal(BytesUntilClosed(fd), 0);
  close(fd);
  assert_true(AwaitLogLine(mc_cluster_log_at(g_keyless, 0), "not on this host",
                           ("refused " + address + ":").c_str()));
  fd = ConnectFrom(address, address, port);  // bound to 0.0.0.0: this address too
  assert_true(fd >= 0);
  assert_true(SendRequest(fd, transfer::Op::kRead, seg.id, 0, 64));
  assert_int_equal(ReplyCode(fd), 0);
  close(fd);
}

// ---- in process ----------------------------------------------------------------------------

// A segment served in process with key (null: none), handshake deadline handshake_ms.
struct Owner {
  std::shared_ptr<SegmentMemory> segment;
  int port = 0;
  std::unique_ptr<TransferServer> server;

  Owner(std::shared_ptr<const ClusterKey> key, int handshake_ms = 2000) {
    std::string error;
    segment = SegmentMemory::Create(1 << 20, &error);
    assert_non_null(segment.get());
    int fd = testing::ListenOnLoopback(&port);
    assert_true(fd >= 0);
    TransferServer::Options o;
    o.handshake_timeout_ms = handshake_ms;
    o.cluster_key = std::move(key);
    std::shared_ptr<SegmentMemory> s = segment;
    server.reset(new TransferServer(
        fd, [s](int64_t id) { return id == 7 ? s : nullptr; }, o));
    server->Start();
  }
};

// AUTH must come within the handshake deadline, right after HELLO, and only to an owner
// with a key; a HELLO after the opening is refused. Each refusal counted.
void test_the_opening_rules(void**) {
  const ClusterKey key = HarnessKey();
  Owner keyed(std::make_shared<const ClusterKey>(key), 300);
  int fd = Connect(keyed.port);
  std::string client_nonce, server_nonce;
  assert_int_equal(HelloWithNonce(fd, "slow:1", &client_nonce, &server_nonce), 0);
  auto t0 = Clock::now();
  assert_int_equal(BytesUntilClosed(fd), 0);  // no AUTH: closed at the deadline
  double closed_after = SecondsSince(t0);
  print_message("HELLO without AUTH closed after %.3f s (handshake deadline 0.3 s)\n",
                closed_after);
  assert_true(closed_after < 2.0);
  close(fd);
  fd = Connect(keyed.port);
  assert_int_equal(Auth(fd, std::string(32, 'p')), kUnauthenticated);  // no HELLO first
  close(fd);
  fd = Connect(keyed.port);
  assert_int_equal(Open(fd, "good:1", key), 0);
  assert_true(SendRequest(fd, transfer::Op::kRead, 7, 0, 64));
  assert_int_equal(ReplyCode(fd), 0);
  std::string hello = transfer::EncodeHello(transfer::Hello{"good:1", client_nonce});
  assert_true(SendRequest(fd, transfer::Op::kHello, 0, 0, hello.size(), hello));
  assert_int_equal(ReplyCode(fd), ToInt(ErrorCode::INVALID_PARAMS));  // not first
  close(fd);
  assert_true(keyed.server->unauthenticated() >= 1);

  Owner keyless(nullptr);
  fd = Connect(keyless.port);
  assert_int_equal(Auth(fd, std::string(32, 'p')), kUnauthenticated);
  close(fd);
  assert_int_equal(keyless.server->unauthenticated(), 1);
}

// Rotation on the transfer port: an owner holding [new, old] admits a client proving old
// and proves itself with old, which that client checks; one holding only new does not.
void test_a_rotated_key(void**) {
  const std::string old_key = testing::RandomClusterKey(), new_key = testing::RandomClusterKey();
  Owner both(std::make_shared<const ClusterKey>(ClusterKey::FromKeys({new_key, old_key})));
  Owner only_new(std::make_shared<const ClusterKey>(ClusterKey::FromKeys({new_key})));
  TcpTransport::Options options;
  options.address = "127.0.0.1:1";
  options.cluster_key = std::make_shared<const ClusterKey>(ClusterKey::FromKeys({old_key}));
  TcpTransport client(options);
  char buf[64];
  for (const Owner* o : {&both, &only_new}) {
    TransferOp op{TransferKind::kRead, SegmentOf("127.0.0.1:" + std::to_string(o->port), 7), 0,
                  buf, sizeof(buf)};
    std::vector<TransferOp*> ops{&op};
    client.Execute(&ops, Clock::now() + std::chrono::seconds(5));
    assert_int_equal(op.result, o == &both ? 0 : ToInt(ErrorCode::TRANSFER_FAIL));
  }
}

// ---- set-up ----------------------------------------------------------------------------------

int StartKeyed(void**) {
  mc_cluster_options options = {2, 64 << 20, 20000, nullptr, nullptr};
  g_keyed = mc_cluster_start_with(&options);
  if (g_keyed == nullptr) return -1;
  // The victim: another client's object, its only replica on B.
  mooncake_store_t a = connect_app(g_keyed, A, kPool);
  std::vector<char> value(kVictimSize);
  fill_pattern(value.data(), value.size(), kVictimSeed);
  placement p;
  const int target = B;
  steer(&p, g_keyed, &target, 1, 1);
  int rc = mooncake_store_put(a, "victim", value.data(), value.size(), &p.config);
  mooncake_store_destroy(a);
  if (rc != 0 || replica_daemon(g_keyed, "victim", 0) != B) return -1;
  return mc_cluster_replica_at(g_keyed, "victim", 0, &g_segment, &g_offset);
}

int StartKeyless(void**) {
  static const char* const master[] = {"--cluster_key_file", "", nullptr};
  static const char* const daemon[] = {"--cluster_key_file", "", "--transfer_bind_address",
                                       "0.0.0.0", nullptr};
  mc_cluster_options options = {1, 16 << 20, 0, master, daemon};
  g_keyless = mc_cluster_start_with(&options);
  return g_keyless == nullptr ? -1 : 0;
}

int StopKeyed(void**) {
  mc_cluster_stop(g_keyed);
  return 0;
}

int StopKeyless(void**) {
  mc_cluster_stop(g_keyless);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest in_process[] = {
      cmocka_unit_test(test_the_opening_rules),
      cmocka_unit_test(test_a_rotated_key),
      cmocka_unit_test(test_an_owner_that_cannot_prove_the_key_is_sent_nothing),
  };
  const struct CMUnitTest keyed[] = {
      cmocka_unit_test(test_read_without_the_key_gets_nothing),
      cmocka_unit_test(test_write_without_the_key_changes_nothing),
      cmocka_unit_test(test_a_wrong_or_replayed_proof_is_refused),
      cmocka_unit_test(test_the_daemons_client_is_served_only_with_the_key),
      cmocka_unit_test(test_the_port_binds_the_advertised_address),
  };
  const struct CMUnitTest keyless[] = {
      cmocka_unit_test(test_without_a_key_local_peers_need_no_proof),
      cmocka_unit_test(test_without_a_key_other_hosts_are_refused_at_accept),
  };
  int failed = cmocka_run_group_tests_name("in process", in_process, nullptr, nullptr);
  failed += cmocka_run_group_tests_name("keyed cluster", keyed, StartKeyed, StopKeyed);
  failed += cmocka_run_group_tests_name("keyless daemon", keyless, StartKeyless, StopKeyless);
  return failed;
}
