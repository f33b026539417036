// The master's RPC handlers as the Thrift server runs them (master/server/main.cc): a
// connection's AuthenticatedProcessor reads call messages with the protocol the server
// uses (MakeRpcProtocolFactory) and, once the connection is admitted, the generated
// dispatch hands the decoded structs to RpcHandler, over a MasterService with an operation
// log in strict mode, on a clock the input moves.
//
// Input: repeated [clock byte][one Thrift call message]. The clock byte moves the clock by
// kSteps[byte & 7] ms; bit 4 then takes a snapshot (as the snapshot child writes one),
// bit 5 restarts the master (a clean shutdown, then the restore a restart makes: the
// newest snapshot and the log after it; the calls then come on a new connection of the
// same kind), bits 6-7 open a new connection (kPeers), and bit 3 runs the upkeep (Tick),
// before the call. The first connection is a peer on this host, as the master's user, of
// a master without a key (admitted at connect); a new one is that again, or a peer of a
// master holding kFuzzClusterKey (admitted by the handshake; its server nonce is
// kFuzzServerNonce, so a seed can prove), or a peer of a master without a key from another
// host or user (refused). Each input starts with a fresh service, log, directory and
// clock, so state stays bounded by it.
//
// Invariants of admission, at every call:
//  - a connection not admitted has every call but the handshake's answered with the
//    refusal ("-1400 UNAUTHENTICATED: ...") and nothing else, and the call changes nothing
//    (no log record, the same objects, segments and daemons);
//  - it is admitted only by an Authenticate whose proof checks (with the key, over the
//    nonce of the one AuthChallenge before it and the master's), which answers 0 with the
//    master's own proof; and such an Authenticate always admits (no false refusal), as an
//    AuthChallenge of 32 bytes first on a keyed connection is always answered;
//  - on an admitted connection the handshake answers -600.
// Invariants, after every call:
//  - errors are values: no handler throws (the processor would answer T_EXCEPTION, which
//    only an unknown method may get), and every reply is one well-formed message;
//  - what a call accepted keeps the documented limits: stored keys (common/base/tenant_key.h:
//    1..4096 bytes without NUL, behind a valid tenant id for a named tenant), sizes of
//    1..4 GiB, 1..64 replicas, checksums up to 2^32-1, segments of size > 0;
//  - a reservation or replica list names distinct attached segments and ranges inside
//    them, of the object's size; GetAllSegments never shows an incarnation;
//  - a change's reply (UpsertEnd, the removals) never names its caller as a cache holder,
//    gives each holder time left, and key indices only within a BatchRemove's batch;
//  - a drain batch moves distinct keys from ranges inside the draining segment to
//    PROCESSING ranges in other attached segments; CommitMoves and RevokeMoves answer
//    one code per key;
//  - the stats agree with the segments (used <= size each; capacity sums every memory
//    segment, used the attached ones' while none is detached; the disk figures the
//    LOCAL_DISK segments), and the tenants' figures with the
//    whole (their objects sum the objects, their bytes stay within the bytes used, a
//    tenant with a quota within it, refusals only where there is a quota);
// at every restart:
//  - the restore drops nothing (what a clean shutdown left is consistent) and loads the
//    newest snapshot;
// and after the last call:
//  - the state is consistent: exported as a snapshot is and restored into a fresh
//    service, no replica overlaps another or leaves its segment (FinishRestore drops none);
//  - the snapshots and the operation log say what the state is: what a restart restores
//    (the newest snapshot and the log after it) has the same segments and objects.
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/master_link/master_auth.h"
#include "common/master_link/rpc_logging.h"
#include "common/base/tenant_key.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "master/server/authenticated_processor.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/server/rpc_handler.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/state_restore.h"

namespace {

using namespace mooncake;
using apache::thrift::TApplicationException;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::protocol::TMessageType;
using apache::thrift::protocol::TProtocol;
using apache::thrift::transport::TMemoryBuffer;

int64_t g_now = 0;

// Time steps reaching every timeout of Options(): none, a tick, past a lease, past the
// discard and release timeouts, past a soft pin, past the daemons' TTL.
constexpr int64_t kSteps[8] = {0, 1, 60, 150, 1100, 6000, 11000, 31000};

MasterOptions Options() {
  MasterOptions o;
  o.now_ms = [] { return g_now; };
  o.default_kv_lease_ttl_ms = 100;
  o.default_kv_soft_pin_ttl_ms = 5000;
  o.max_kv_soft_pin_ttl_ms = 20000;
  o.client_live_ttl_ms = 30000;
  o.put_start_discard_timeout_ms = 1000;
  o.put_start_release_timeout_ms = 10000;
  o.eviction_high_watermark_ratio = 0.75;
  o.eviction_ratio = 0.25;
  o.allocation_strategy = "free_ratio_first";  // "random" would make runs differ
  o.tenant_quota = "fz=64KB";  // a tenant the seeds fill past its quota
  return o;
}

bool ValidKey(const std::string& key) { return tenant_key::ValidStoredKey(key); }

// RpcHandler with a check of every answer against what the call asked.
class CheckedHandler : public RpcHandler {
 public:
  explicit CheckedHandler(MasterService* service) : RpcHandler(service), service_(service) {}

  int32_t MountSegment(const rpc::SegmentInfo& segment) override {
    int32_t rc = RpcHandler::MountSegment(segment);
    FUZZ_CHECK(rc != 0 || (segment.size > 0 && !segment.name.empty()),
               "mounted a segment of size %lld named \"%s\"",
               static_cast<long long>(segment.size), segment.name.c_str());
    return rc;
  }

  void GetAllSegments(std::vector<rpc::SegmentInfo>& out) override {
    RpcHandler::GetAllSegments(out);
    for (const rpc::SegmentInfo& s : out) {
      FUZZ_CHECK(s.incarnation == 0, "GetAllSegments shows segment %lld's incarnation",
                 static_cast<long long>(s.segment_id));
    }
  }

  void PutStart(rpc::PutStartResult& out, int64_t writer, const std::string& key, int64_t size,
                const rpc::ReplicateConfig& config) override {
    RpcHandler::PutStart(out, writer, key, size, config);
    CheckReservation(out, key, size, config);
  }

  void UpsertStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                   int64_t size, const rpc::ReplicateConfig& config) override {
    RpcHandler::UpsertStart(out, writer, key, size, config);
    CheckReservation(out, key, size, config);
  }

  void BatchPutStart(std::vector<rpc::PutStartResult>& out, int64_t writer,
                     const std::vector<std::string>& keys, const std::vector<int64_t>& sizes,
                     const rpc::ReplicateConfig& config) override {
    RpcHandler::BatchPutStart(out, writer, keys, sizes, config);
    FUZZ_CHECK(out.size() == keys.size(), "BatchPutStart: %zu results for %zu keys", out.size(),
               keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      FUZZ_CHECK(out[i].code != 0 || sizes.size() == keys.size(),
                 "BatchPutStart reserved with %zu sizes for %zu keys", sizes.size(), keys.size());
      if (sizes.size() == keys.size()) CheckReservation(out[i], keys[i], sizes[i], config);
    }
  }

  int32_t PutEnd(int64_t writer, const std::string& key, int64_t checksum) override {
    return CheckEnd(RpcHandler::PutEnd(writer, key, checksum), key, checksum);
  }

  void UpsertEnd(rpc::ChangeResult& out, int64_t writer, const std::string& key,
                 int64_t checksum) override {
    RpcHandler::UpsertEnd(out, writer, key, checksum);
    FUZZ_CHECK(out.code == static_cast<int32_t>(out.code), "UpsertEnd answered %lld",
               static_cast<long long>(out.code));
    CheckEnd(static_cast<int32_t>(out.code), key, checksum);
    CheckHolders(out.holders, writer, 0);
  }

  void BatchPutEnd(std::vector<int32_t>& out, int64_t writer,
                   const std::vector<std::string>& keys,
                   const std::vector<int64_t>& checksums) override {
    RpcHandler::BatchPutEnd(out, writer, keys, checksums);
    FUZZ_CHECK(out.size() == keys.size(), "BatchPutEnd: %zu results for %zu keys", out.size(),
               keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      FUZZ_CHECK(out[i] != 0 || checksums.empty() || checksums.size() == keys.size(),
                 "BatchPutEnd published with %zu checksums for %zu keys", checksums.size(),
                 keys.size());
      CheckEnd(out[i], keys[i], checksums.size() == keys.size() ? checksums[i] : -1);
    }
  }

  void GetReplicaList(rpc::ReplicaListResult& out, const std::string& key,
                      int64_t reader) override {
    RpcHandler::GetReplicaList(out, key, reader);
    CheckReplicaList(out, key);
  }

  void BatchGetReplicaList(std::vector<rpc::ReplicaListResult>& out,
                           const std::vector<std::string>& keys, int64_t reader) override {
    RpcHandler::BatchGetReplicaList(out, keys, reader);
    FUZZ_CHECK(out.size() == keys.size(), "BatchGetReplicaList: %zu results for %zu keys",
               out.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) CheckReplicaList(out[i], keys[i]);
  }

  int32_t ExistKey(const std::string& key) override {
    int32_t rc = RpcHandler::ExistKey(key);
    FUZZ_CHECK(rc == 0 || rc == ToInt(ErrorCode::INVALID_PARAMS) || (rc == 1 && ValidKey(key)),
               "ExistKey answered %d", rc);
    return rc;
  }

  void Remove(rpc::ChangeResult& out, const std::string& key, bool force,
              int64_t caller) override {
    RpcHandler::Remove(out, key, force, caller);
    FUZZ_CHECK(out.code <= 0 && (out.code != 0 || ValidKey(key)),
               "Remove of a %zu-byte key answered %lld", key.size(),
               static_cast<long long>(out.code));
    CheckHolders(out.holders, caller, 0);
  }

  void BatchRemove(rpc::BatchChangeResult& out, const std::vector<std::string>& keys, bool force,
                   int64_t caller) override {
    RpcHandler::BatchRemove(out, keys, force, caller);
    FUZZ_CHECK(out.codes.size() == keys.size(), "BatchRemove: %zu results for %zu keys",
               out.codes.size(), keys.size());
    CheckHolders(out.holders, caller, keys.size());
  }

  void RemoveByRegex(rpc::ChangeResult& out, const std::string& pattern, bool force,
                     int64_t caller, const std::string& tenant) override {
    RpcHandler::RemoveByRegex(out, pattern, force, caller, tenant);
    CheckCount(out.code);
    FUZZ_CHECK(out.code <= 0 || tenant_key::ValidTenantOrDefault(tenant),
               "RemoveByRegex removed %lld of a malformed tenant", static_cast<long long>(out.code));
    CheckHolders(out.holders, caller, 0);
  }

  void RemoveAll(rpc::ChangeResult& out, bool force, int64_t caller,
                 const std::string& tenant) override {
    RpcHandler::RemoveAll(out, force, caller, tenant);
    CheckCount(out.code);
    FUZZ_CHECK(out.code <= 0 || tenant_key::ValidTenantOrDefault(tenant),
               "RemoveAll removed %lld of a malformed tenant", static_cast<long long>(out.code));
    CheckHolders(out.holders, caller, 0);
  }

  void DrainSegment(rpc::DrainBatchResult& out, int64_t daemon_id, int64_t segment_id,
                    int64_t cursor, int32_t max_moves,
                    const std::vector<std::string>& avoided_segments) override {
    RpcHandler::DrainSegment(out, daemon_id, segment_id, cursor, max_moves, avoided_segments);
    if (out.code != 0) {
      FUZZ_CHECK(out.code < 0 && out.moves.empty(), "DrainSegment answered %d with %zu moves",
                 out.code, out.moves.size());
      return;
    }
    FUZZ_CHECK(cursor >= 0 && max_moves > 0 && out.next_cursor >= -1 && out.stranded >= 0 &&
                   out.shed >= 0 && out.busy >= 0,
               "DrainSegment from %lld (%d moves) answered cursor %lld, counts %lld %lld %lld",
               static_cast<long long>(cursor), max_moves, static_cast<long long>(out.next_cursor),
               static_cast<long long>(out.stranded), static_cast<long long>(out.shed),
               static_cast<long long>(out.busy));
    int64_t from_size = -1;
    for (const SegmentRecord& s : service_->ExportSegments()) {
      if (s.segment_id == segment_id) from_size = s.size;
    }
    FUZZ_CHECK(from_size > 0, "drained segment %lld is not known",
               static_cast<long long>(segment_id));
    std::set<std::string> keys;
    for (const rpc::SegmentMove& m : out.moves) {
      FUZZ_CHECK(ValidKey(m.key) && keys.insert(m.key).second, "a move of a %zu-byte key, or twice",
                 m.key.size());
      FUZZ_CHECK(m.size > 0 && m.from_offset >= 0 && m.size <= from_size &&
                     m.from_offset <= from_size - m.size,
                 "a move from [%lld, +%lld) of segment %lld of %lld bytes",
                 static_cast<long long>(m.from_offset), static_cast<long long>(m.size),
                 static_cast<long long>(segment_id), static_cast<long long>(from_size));
      FUZZ_CHECK(m.to.segment_id != segment_id, "a move within the draining segment");
      CheckReplicas({m.to}, m.size, rpc::ReplicaStatus::PROCESSING, "move target");
    }
  }

  void CommitMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                   const std::vector<std::string>& keys) override {
    RpcHandler::CommitMoves(out, daemon_id, segment_id, keys);
    CheckMoveCodes(out, keys, "CommitMoves");
  }

  void RevokeMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                   const std::vector<std::string>& keys) override {
    RpcHandler::RevokeMoves(out, daemon_id, segment_id, keys);
    CheckMoveCodes(out, keys, "RevokeMoves");
  }

  void GetStats(rpc::MasterStats& out) override {
    RpcHandler::GetStats(out);
    FUZZ_CHECK(out.objects >= 0 && out.segments >= 0 && out.daemons >= 0,
               "negative counts in the stats");
  }

 private:
  void CheckReservation(const rpc::PutStartResult& r, const std::string& key, int64_t size,
                        const rpc::ReplicateConfig& config) {
    if (r.code != 0) {
      FUZZ_CHECK(r.code < 0, "PutStart answered code %d", r.code);
      return;
    }
    FUZZ_CHECK(ValidKey(key) && size > 0 &&
                   static_cast<uint64_t>(size) <= MOONCAKE_STORE_MAX_VALUE_SIZE &&
                   config.replica_num >= 1 &&
                   static_cast<size_t>(config.replica_num) <= MasterService::kMaxReplicaNum &&
                   config.soft_pin_ttl_ms >= 0,
               "reserved for a %zu-byte key, size %lld, %d replicas", key.size(),
               static_cast<long long>(size), config.replica_num);
    FUZZ_CHECK(!r.replicas.empty() && r.replicas.size() <= static_cast<size_t>(config.replica_num),
               "%zu replicas reserved for %d asked", r.replicas.size(), config.replica_num);
    CheckReplicas(r.replicas, size, rpc::ReplicaStatus::PROCESSING, "reservation");
  }

  void CheckReplicaList(const rpc::ReplicaListResult& r, const std::string& key) {
    if (r.code != 0) return;
    FUZZ_CHECK(ValidKey(key), "a replica list for a %zu-byte key", key.size());
    FUZZ_CHECK(!r.replicas.empty(), "an OK replica list without replicas");
    FUZZ_CHECK(r.checksum >= -1 && r.checksum <= int64_t{0xFFFFFFFF}, "checksum %lld",
               static_cast<long long>(r.checksum));
    CheckReplicas(r.replicas, r.size, rpc::ReplicaStatus::COMPLETE, "replica list");
  }

  void CheckReplicas(const std::vector<rpc::ReplicaDescriptor>& replicas, int64_t size,
                     rpc::ReplicaStatus::type status, const char* what) {
    std::map<int64_t, rpc::SegmentInfo> segments;
    for (const rpc::SegmentInfo& s : service_->GetAllSegments()) segments[s.segment_id] = s;
    std::set<int64_t> seen;
    for (const rpc::ReplicaDescriptor& d : replicas) {
      FUZZ_CHECK(d.size == size && d.status == status, "%s: a replica of size %lld, status %d",
                 what, static_cast<long long>(d.size), static_cast<int>(d.status));
      FUZZ_CHECK(seen.insert(d.segment_id).second, "%s: two replicas on segment %lld", what,
                 static_cast<long long>(d.segment_id));
      auto s = segments.find(d.segment_id);
      FUZZ_CHECK(s != segments.end(), "%s: segment %lld is not attached", what,
                 static_cast<long long>(d.segment_id));
      FUZZ_CHECK(d.offset >= 0 && d.size <= s->second.size && d.offset <= s->second.size - d.size,
                 "%s: [%lld, +%lld) outside segment %lld of %lld bytes", what,
                 static_cast<long long>(d.offset), static_cast<long long>(d.size),
                 static_cast<long long>(d.segment_id), static_cast<long long>(s->second.size));
      FUZZ_CHECK(d.daemon_id == s->second.daemon_id && d.segment_name == s->second.name,
                 "%s: replica names another owner than its segment", what);
    }
  }

  int32_t CheckEnd(int32_t rc, const std::string& key, int64_t checksum) {
    FUZZ_CHECK(rc != 0 || (ValidKey(key) && checksum <= int64_t{0xFFFFFFFF}),
               "published a %zu-byte key with checksum %lld", key.size(),
               static_cast<long long>(checksum));
    return rc;
  }

  // The holders a change names: never its caller, each with time left on its lease, key
  // indices (batch_size > 0: BatchRemove) only within the batch.
  void CheckHolders(const std::vector<rpc::CacheHolder>& holders, int64_t caller,
                    size_t batch_size) {
    for (const rpc::CacheHolder& h : holders) {
      FUZZ_CHECK(caller == 0 || h.daemon_id != caller, "a change names its caller %lld",
                 static_cast<long long>(caller));
      FUZZ_CHECK(h.ms_left > 0, "a holder with %lld ms left", static_cast<long long>(h.ms_left));
      FUZZ_CHECK(batch_size > 0 || h.keys.empty(), "%zu key indices outside a batch",
                 h.keys.size());
      for (int32_t k : h.keys) {
        FUZZ_CHECK(k >= 0 && static_cast<size_t>(k) < batch_size,
                   "key index %d in a batch of %zu", k, batch_size);
      }
    }
  }

  void CheckMoveCodes(const std::vector<int32_t>& out, const std::vector<std::string>& keys,
                      const char* what) {
    FUZZ_CHECK(out.size() == keys.size(), "%s: %zu results for %zu keys", what, out.size(),
               keys.size());
    for (size_t i = 0; i < out.size(); ++i) {
      FUZZ_CHECK(out[i] <= 0 && (out[i] != 0 || ValidKey(keys[i])), "%s answered %d", what,
                 out[i]);
    }
  }

  int64_t CheckCount(int64_t removed) {
    FUZZ_CHECK(removed >= 0 || FromWire(removed) != ErrorCode::INTERNAL_ERROR,
               "a removal answered %lld", static_cast<long long>(removed));
    return removed;
  }

  MasterService* const service_;
};

// Who a connection's calls come from (master_rpc_fuzzer's input, bits 6-7 of a clock byte:
// kPeers[bits - 1]).
enum class Peer { kThisHost, kKeyed, kRemote };
constexpr Peer kPeers[3] = {Peer::kKeyed, Peer::kRemote, Peer::kThisHost};

const ClusterKey& FuzzKey() {
  static const ClusterKey key = ClusterKey::FromKeys({fuzz::kFuzzClusterKey});
  return key;
}

// A connection's processor, as the server's factory makes one: with the key for kKeyed,
// without one (admitting only this host's own user or root) for the others.
std::unique_ptr<AuthenticatedProcessor> Connect(const std::shared_ptr<RpcHandler>& handler,
                                                Peer peer) {
  std::shared_ptr<const ClusterKey> key;
  if (peer == Peer::kKeyed) key = std::make_shared<const ClusterKey>(FuzzKey());
  return std::make_unique<AuthenticatedProcessor>(
      handler, key,
      AuthenticatedProcessor::Peer{"fuzz:1", peer == Peer::kThisHost,
                                   peer == Peer::kThisHost ? "" : "another user's socket"},
      [] { return fuzz::kFuzzServerNonce; });
}

// The call just served, read again from its bytes: its name, and the argument of a
// handshake call (decoded: it was one and it decoded).
struct Call {
  std::string name;
  bool decoded = false;
  std::string auth_argument;  // AuthChallenge's nonce, Authenticate's proof
};

Call ReadCall(const uint8_t* bytes, size_t size) {
  Call call;
  try {
    auto buffer = std::make_shared<TMemoryBuffer>(const_cast<uint8_t*>(bytes),
                                                  static_cast<uint32_t>(size));
    TBinaryProtocol reader(buffer);
    TMessageType type;
    int32_t seqid;
    reader.readMessageBegin(call.name, type, seqid);
    if (call.name == "AuthChallenge") {
      rpc::MasterService_AuthChallenge_args args;
      args.read(&reader);
      call.auth_argument = args.client_nonce;
      call.decoded = true;
    } else if (call.name == "Authenticate") {
      rpc::MasterService_Authenticate_args args;
      args.read(&reader);
      call.auth_argument = args.client_proof;
      call.decoded = true;
    }
  } catch (const std::exception&) {
    call.decoded = false;
  }
  return call;
}

// The reply the processor wrote for one call: one message, checked to be well formed.
struct Reply {
  bool present = false;  // false: the call did not decode, nothing was answered
  std::string name;
  TMessageType type = apache::thrift::protocol::T_REPLY;
  int exception_type = -1;
  std::string exception;  // T_EXCEPTION: its message
  int32_t auth_code = 0;  // a handshake call's reply: its code and nonce or proof
  std::string auth_bytes;
};

Reply ReadReply(const std::shared_ptr<TMemoryBuffer>& out) {
  Reply reply;
  if (out->available_read() == 0) return reply;
  reply.present = true;
  TBinaryProtocol reader(out);
  int32_t seqid;
  reader.readMessageBegin(reply.name, reply.type, seqid);
  if (reply.type == apache::thrift::protocol::T_EXCEPTION) {
    TApplicationException x;
    x.read(&reader);
    reply.exception_type = x.getType();
    reply.exception = x.what();
  } else if (reply.name == "AuthChallenge") {
    rpc::MasterService_AuthChallenge_result result;
    result.read(&reader);
    reply.auth_code = result.success.code;
    reply.auth_bytes = result.success.server_nonce;
  } else if (reply.name == "Authenticate") {
    rpc::MasterService_Authenticate_result result;
    result.read(&reader);
    reply.auth_code = result.success.code;
    reply.auth_bytes = result.success.server_proof;
  } else {
    FUZZ_CHECK(reply.type == apache::thrift::protocol::T_REPLY, "%s answered message type %d",
               reply.name.c_str(), static_cast<int>(reply.type));
    reader.skip(apache::thrift::protocol::T_STRUCT);
  }
  reader.readMessageEnd();
  FUZZ_CHECK(out->available_read() == 0, "%s answered more than one message", reply.name.c_str());
  return reply;
}

// What a refused call must leave as it was.
struct Footprint {
  uint64_t logged;
  int64_t objects, segments, daemons;
  bool operator==(const Footprint& o) const {
    return logged == o.logged && objects == o.objects && segments == o.segments &&
           daemons == o.daemons;
  }
};

// One connection's handshake so far, as its processor must see it.
struct Handshake {
  static Handshake Fresh(Peer peer) {
    Handshake h;
    h.peer = peer;
    return h;
  }
  Peer peer = Peer::kThisHost;
  int calls = 0;          // AuthChallenge and Authenticate calls served
  bool challenged = false;  // the first was an AuthChallenge answered 0
  std::string client_nonce;
};

// The admission invariants (the header's) for one call served on a connection.
void CheckAdmission(const Call& call, const Reply& reply, bool admitted_before,
                    bool admitted_after, Handshake* handshake, const Footprint& before,
                    const Footprint& after) {
  const bool handshake_call = call.name == "AuthChallenge" || call.name == "Authenticate";
  if (admitted_before) {
    FUZZ_CHECK(admitted_after, "an admitted connection lost its admission");
    FUZZ_CHECK(!reply.present || reply.type != apache::thrift::protocol::T_EXCEPTION ||
                   reply.exception_type == TApplicationException::UNKNOWN_METHOD,
               "%s answered an exception: %s", reply.name.c_str(), reply.exception.c_str());
    FUZZ_CHECK(!reply.present || !handshake_call ||
                   reply.auth_code == ToInt(ErrorCode::INVALID_PARAMS),
               "%s on an admitted connection answered %d", call.name.c_str(), reply.auth_code);
    return;
  }
  if (!handshake_call) {
    FUZZ_CHECK(!admitted_after, "%s admitted a connection", call.name.c_str());
    FUZZ_CHECK(before == after, "%s changed the master's state before the handshake",
               call.name.c_str());
    FUZZ_CHECK(!reply.present || (reply.type == apache::thrift::protocol::T_EXCEPTION &&
                                  IsUnauthenticatedMessage(reply.exception)),
               "%s before the handshake was answered, not refused", call.name.c_str());
    return;
  }
  if (!call.decoded || !reply.present) return;  // the processor threw: the server closes
  FUZZ_CHECK(reply.type == apache::thrift::protocol::T_REPLY && before == after,
             "%s answered an exception or changed the state", call.name.c_str());
  const int call_index = handshake->calls++;
  if (call.name == "AuthChallenge") {
    const bool answerable = handshake->peer == Peer::kKeyed && call_index == 0 &&
                            call.auth_argument.size() == ClusterKey::kNonceBytes;
    FUZZ_CHECK((reply.auth_code == 0) == answerable && !admitted_after,
               "AuthChallenge %d of a connection answered %d", call_index, reply.auth_code);
    if (answerable) {
      FUZZ_CHECK(reply.auth_bytes == fuzz::kFuzzServerNonce, "a server nonce of %zu bytes",
                 reply.auth_bytes.size());
      handshake->challenged = true;
      handshake->client_nonce = call.auth_argument;
    }
    return;
  }
  const bool proves = handshake->challenged && call_index == 1 &&
                      FuzzKey().Check(call.auth_argument, ClusterKey::Role::kClient,
                                      kMasterAuthContext, handshake->client_nonce,
                                      fuzz::kFuzzServerNonce) == 0;
  FUZZ_CHECK((reply.auth_code == 0) == proves && admitted_after == proves,
             "Authenticate with a proof that %s answered %d (admitted: %d)",
             proves ? "checks" : "does not check", reply.auth_code, admitted_after);
  if (proves) {
    FUZZ_CHECK(reply.auth_bytes == FuzzKey().Prove(ClusterKey::Role::kServer, kMasterAuthContext,
                                                   handshake->client_nonce,
                                                   fuzz::kFuzzServerNonce),
               "the master's proof does not check");
  }
}

// The stats against the segments they sum (detached ones, restored and not yet
// re-attached, are counted but not listed). Memory segments make the pool's figures;
// LOCAL_DISK ones (the daemons' SSD tiers) only the disk figures.
void CheckStats(MasterService* service) {
  rpc::MasterStats stats = service->GetStats();
  const std::vector<rpc::SegmentInfo> attached = service->GetAllSegments();
  const std::vector<SegmentRecord> all = service->ExportSegments();
  const uint8_t kDisk = static_cast<uint8_t>(rpc::ReplicaKind::LOCAL_DISK);
  uint64_t used = 0, capacity = 0, disk_capacity = 0;
  int64_t memory_segments = 0, disk_segments = 0;
  for (const rpc::SegmentInfo& s : attached) {
    FUZZ_CHECK(s.used >= 0 && s.used <= s.size, "segment %lld uses %lld of %lld bytes",
               static_cast<long long>(s.segment_id), static_cast<long long>(s.used),
               static_cast<long long>(s.size));
    if (s.kind == rpc::ReplicaKind::MEMORY) used += static_cast<uint64_t>(s.used);
  }
  for (const SegmentRecord& s : all) {
    if (s.kind == kDisk) {
      ++disk_segments;
      disk_capacity += static_cast<uint64_t>(s.size);
    } else {
      ++memory_segments;
      capacity += static_cast<uint64_t>(s.size) / 64 * 64;  // the allocator's alignment
    }
  }
  FUZZ_CHECK(stats.segments == memory_segments && stats.disk.segments == disk_segments &&
                 stats.pending_segments == static_cast<int64_t>(all.size() - attached.size()),
             "stats say %lld + %lld disk segments, %lld pending; there are %lld + %lld, %zu "
             "attached",
             static_cast<long long>(stats.segments), static_cast<long long>(stats.disk.segments),
             static_cast<long long>(stats.pending_segments),
             static_cast<long long>(memory_segments), static_cast<long long>(disk_segments),
             attached.size());
  FUZZ_CHECK(static_cast<uint64_t>(stats.disk.capacity_bytes) == disk_capacity,
             "stats say %lld bytes of disk, the segments %llu",
             static_cast<long long>(stats.disk.capacity_bytes),
             static_cast<unsigned long long>(disk_capacity));
  FUZZ_CHECK(static_cast<uint64_t>(stats.capacity_bytes) == capacity &&
                 (stats.pending_segments == 0 ? static_cast<uint64_t>(stats.used_bytes) == used
                                              : static_cast<uint64_t>(stats.used_bytes) >= used),
             "stats say %lld of %lld bytes used, the segments %llu of %llu",
             static_cast<long long>(stats.used_bytes), static_cast<long long>(stats.capacity_bytes),
             static_cast<unsigned long long>(used), static_cast<unsigned long long>(capacity));
  FUZZ_CHECK(stats.objects >= 0, "%lld objects", static_cast<long long>(stats.objects));
  int64_t tenant_objects = 0, tenant_bytes = 0;
  for (const rpc::TenantStats& t : stats.tenants) {
    FUZZ_CHECK(t.objects >= 0 && t.bytes >= 0 && t.refused_puts >= 0 &&
                   (t.quota_bytes == 0 ? t.refused_puts == 0 : t.bytes <= t.quota_bytes),
               "tenant '%s': %lld objects, %lld bytes, quota %lld, %lld refused",
               t.tenant.c_str(), static_cast<long long>(t.objects),
               static_cast<long long>(t.bytes), static_cast<long long>(t.quota_bytes),
               static_cast<long long>(t.refused_puts));
    tenant_objects += t.objects;
    tenant_bytes += t.bytes;
  }
  FUZZ_CHECK(tenant_objects == stats.objects && tenant_bytes <= stats.used_bytes,
             "the tenants hold %lld objects and %lld bytes; the master %lld and %lld",
             static_cast<long long>(tenant_objects), static_cast<long long>(tenant_bytes),
             static_cast<long long>(stats.objects), static_cast<long long>(stats.used_bytes));
}

// One master's life: a service with its strict log in dir/oplog, served by the generated
// processor through CheckedHandler. Restored (as at a restart: RestoreMasterState over the
// newest snapshot in dir and the log after it) or new.
struct Master {
  std::unique_ptr<MasterService> service;
  std::unique_ptr<OpLog> oplog;
  std::shared_ptr<RpcHandler> handler;
  std::unique_ptr<AuthenticatedProcessor> processor;  // the connection the calls come on

  // expect_snapshot: the snapshot the restore must load (empty: none may have been taken).
  Master(const std::string& dir, bool restore, Peer peer,
         const std::string* expect_snapshot = nullptr) {
    OpLogOptions log_options;
    log_options.dir = dir + "/oplog";
    log_options.flush_interval_ms = 60000;  // only the strict Syncs write: deterministic
    log_options.preallocate_bytes = 0;
    service = std::make_unique<MasterService>(Options());
    oplog = std::make_unique<OpLog>(log_options);
    uint64_t last = 0;
    if (restore) {
      SnapshotStore store(dir);
      Result<RestoreOutcome> restored = RestoreMasterState(service.get(), &store, oplog.get());
      FUZZ_CHECK(restored.ok(), "the restore failed: %d", ToInt(restored.code()));
      const RestoreOutcome& outcome = restored.value();
      FUZZ_CHECK(outcome.counts.dropped_replicas == 0 && outcome.counts.dropped_objects == 0,
                 "the restore dropped %lld replicas and %lld objects of a clean shutdown",
                 static_cast<long long>(outcome.counts.dropped_replicas),
                 static_cast<long long>(outcome.counts.dropped_objects));
      FUZZ_CHECK(expect_snapshot == nullptr || outcome.snapshot == *expect_snapshot,
                 "the restore loaded snapshot \"%s\", the newest is \"%s\"",
                 outcome.snapshot.c_str(), expect_snapshot->c_str());
      last = outcome.last_sequence;
    } else {
      FUZZ_CHECK(oplog->Recover(0, [](uint64_t, std::string_view) { return true; }).ok(),
                 "cannot recover an empty log");
    }
    FUZZ_CHECK(oplog->Start(last) == ErrorCode::OK, "cannot start the log after %llu",
               static_cast<unsigned long long>(last));
    service->AttachOpLog(oplog.get(), /*strict=*/true);
    handler = std::make_shared<CheckedHandler>(service.get());
    processor = Connect(handler, peer);
  }

  Footprint Print() const {
    rpc::MasterStats stats = service->GetStats();
    return {oplog->last(), stats.objects, stats.segments, stats.daemons};
  }

  // A snapshot of the state as the log stands (every record is on disk: strict), with a
  // name of its own.
  std::string Snapshot(const std::string& dir, int64_t created_ms) {
    FUZZ_CHECK(oplog->Sync(oplog->last()) == ErrorCode::OK, "the log does not sync");
    return fuzz::WriteSnapshot(service.get(), dir, oplog->last(), created_ms);
  }

  // Shuts the master down as SIGTERM does (the log's last records reach the disk); the
  // service stays to be looked at. Returns the log's last seq.
  uint64_t Stop() {
    processor.reset();
    handler.reset();
    service->AttachOpLog(nullptr, false);
    const uint64_t last = oplog->last();
    oplog.reset();
    return last;
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  mooncake::RouteThriftOutputToDebugLog();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_now = 1000;
  const std::string dir = fuzz::FreshDir();
  auto in = std::make_shared<TMemoryBuffer>(const_cast<uint8_t*>(data),
                                            static_cast<uint32_t>(size));
  auto out = std::make_shared<TMemoryBuffer>();
  const auto factory = MakeRpcProtocolFactory();
  std::shared_ptr<TProtocol> in_protocol = factory->getProtocol(in);
  std::shared_ptr<TProtocol> out_protocol = factory->getProtocol(out);
  Handshake handshake;  // of the connection the calls come on
  auto master = std::make_unique<Master>(dir, /*restore=*/false, handshake.peer);
  uint64_t logged = 0;          // records appended by every master of this input
  int64_t snapshot_clock = 0;   // created_ms of the snapshots, each a new name
  std::string newest_snapshot;  // the last one taken
  while (in->available_read() > 1) {
    uint8_t clock = 0;
    in->read(&clock, 1);
    g_now += kSteps[clock & 7];
    if (clock & 0x10) newest_snapshot = master->Snapshot(dir, ++snapshot_clock);
    if (clock & 0xC0) handshake = Handshake::Fresh(kPeers[(clock >> 6) - 1]);
    if (clock & 0x20) {
      logged = std::max(logged, master->Stop());
      master = std::make_unique<Master>(dir, /*restore=*/true, handshake.peer, &newest_snapshot);
      CheckStats(master->service.get());
      handshake = Handshake::Fresh(handshake.peer);  // a restart breaks every connection
    } else if (clock & 0xC0) {
      master->processor = Connect(master->handler, handshake.peer);
    }
    if (clock & 8) master->service->Tick();
    out->resetBuffer();
    const bool admitted = master->processor->admitted();
    const Footprint before = master->Print();
    const size_t unread = in->available_read();
    try {
      if (!master->processor->process(in_protocol, out_protocol, nullptr)) break;
    } catch (const std::exception&) {
      break;  // what the server does too (master/server/rpc_server.h): it closes the connection
    }
    const Call call = ReadCall(data + (size - unread), unread - in->available_read());
    const Reply reply = ReadReply(out);
    CheckAdmission(call, reply, admitted, master->processor->admitted(), &handshake, before,
                   master->Print());
    CheckStats(master->service.get());
  }
  logged = std::max(logged, master->Stop());  // the log's last records reach the disk
  const fuzz::ExportedState live = fuzz::Export(master->service.get());
  if (logged == 0) {
    // Nothing logged, so nothing to restore: the state must be empty (a mount and a
    // publish are logged), which spares most inputs the two services below.
    FUZZ_CHECK(live.segments.empty() && live.objects.empty(),
               "%zu segments and %zu objects, and not one log record", live.segments.size(),
               live.objects.size());
    return 0;
  }
  fuzz::CheckRestorable(live);
  // What the next restart would restore: the newest snapshot and the log after it.
  Master restarted(dir, /*restore=*/true, Peer::kThisHost, &newest_snapshot);
  restarted.Stop();
  fuzz::CheckSameState(live, fuzz::Export(restarted.service.get()), "the live state",
                       "a restart's restore");
  return 0;
}
