// The RDMA transport without a device: the descriptor and queue-pair endpoint encodings,
// how an op's remote side is resolved, the registration map, the work-request pipeline
// (over a queue pair made of memory), and how Open fails on a host with no RDMA device.
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "daemon/transfer/rdma_batch.h"
#include "daemon/transfer/rdma_endpoint.h"
#include "daemon/transfer/rdma_memory_map.h"
#include "daemon/transfer/rdma_transport.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;

namespace {

using Clock = std::chrono::steady_clock;
const int32_t kFail = ToInt(ErrorCode::TRANSFER_FAIL);

RdmaSegmentDescriptor SampleDescriptor() {
  RdmaSegmentDescriptor d;
  d.mtu = 5;
  d.lid = 0x1234;
  for (int i = 0; i < 16; ++i) d.gid[i] = static_cast<uint8_t>(0xa0 + i);
  d.rkey = 0xdeadbeef;
  d.base = 0x00007f1122334455ull;
  d.size = 0x0000000180000000ull;  // 6 GiB: above 32 bits
  return d;
}

uint64_t Le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  }
  return v;
}

void test_descriptor_round_trip(void**) {
  RdmaSegmentDescriptor d = SampleDescriptor();
  std::string bytes = EncodeRdmaDescriptor(d);
  // The layout is a contract with daemons of other builds: pin it byte by byte.
  assert_int_equal(bytes.size(), kRdmaDescriptorSize);
  assert_int_equal(Le(bytes, 0, 1), 1);
  assert_int_equal(Le(bytes, 1, 1), 5);
  assert_int_equal(Le(bytes, 2, 2), 0x1234);
  assert_memory_equal(bytes.data() + 4, d.gid, 16);
  assert_int_equal(Le(bytes, 20, 4), 0xdeadbeef);
  assert_true(Le(bytes, 24, 8) == d.base);
  assert_true(Le(bytes, 32, 8) == d.size);

  RdmaSegmentDescriptor back;
  assert_true(DecodeRdmaDescriptor(bytes, &back));
  assert_int_equal(back.mtu, d.mtu);
  assert_int_equal(back.lid, d.lid);
  assert_memory_equal(back.gid, d.gid, 16);
  assert_int_equal(back.rkey, d.rkey);
  assert_true(back.base == d.base);
  assert_true(back.size == d.size);
}

void test_descriptor_decode_rejects(void**) {
  const std::string good = EncodeRdmaDescriptor(SampleDescriptor());
  RdmaSegmentDescriptor untouched;
  untouched.rkey = 77;
  RdmaSegmentDescriptor d = untouched;
  for (size_t n = 0; n < good.size(); ++n) {  // every truncation
    assert_false(DecodeRdmaDescriptor(good.substr(0, n), &d));
  }
  assert_false(DecodeRdmaDescriptor(good + '\0', &d));  // extended
  assert_false(DecodeRdmaDescriptor(good + good, &d));
  for (int version : {0, 2, 255}) {
    std::string other = good;
    other[0] = static_cast<char>(version);
    assert_false(DecodeRdmaDescriptor(other, &d));
  }
  for (int mtu : {0, 6, 255}) {
    std::string bad = good;
    bad[1] = static_cast<char>(mtu);
    assert_false(DecodeRdmaDescriptor(bad, &d));
  }
  assert_false(DecodeRdmaDescriptor(std::string(kRdmaDescriptorSize, '\xff'), &d));
  assert_false(DecodeRdmaDescriptor(std::string(kRdmaDescriptorSize, '\0'), &d));
  assert_false(DecodeRdmaDescriptor("127.0.0.1:12300 is not a descriptor, really", &d));
  assert_int_equal(d.rkey, 77);  // a refused decode writes nothing
}

RdmaQpEndpoint SampleEndpoint() {
  RdmaQpEndpoint e;
  e.mtu = 3;
  e.rd_atomic = 16;
  e.lid = 0xbeef;
  for (int i = 0; i < 16; ++i) e.gid[i] = static_cast<uint8_t>(i);
  e.qpn = 0x00abcdef;
  e.psn = 0x00fedcba;
  e.instance = 0x0102030405060708ull;
  e.device = "mlx5_0";
  return e;
}

void test_qp_endpoint_round_trip(void**) {
  RdmaQpEndpoint e = SampleEndpoint();
  std::string bytes = EncodeRdmaQpEndpoint(e);
  assert_int_equal(bytes.size(), kRdmaQpEndpointFixedSize + 6);
  assert_int_equal(Le(bytes, 0, 1), 1);
  assert_int_equal(Le(bytes, 1, 1), 3);
  assert_int_equal(Le(bytes, 2, 1), 16);
  assert_int_equal(Le(bytes, 3, 2), 0xbeef);
  assert_memory_equal(bytes.data() + 5, e.gid, 16);
  assert_int_equal(Le(bytes, 21, 4), 0x00abcdef);
  assert_int_equal(Le(bytes, 25, 4), 0x00fedcba);
  assert_true(Le(bytes, 29, 8) == 0x0102030405060708ull);
  assert_int_equal(Le(bytes, 37, 1), 6);
  assert_string_equal(bytes.substr(38).c_str(), "mlx5_0");

  RdmaQpEndpoint back;
  assert_true(DecodeRdmaQpEndpoint(bytes, &back));
  assert_int_equal(back.mtu, e.mtu);
  assert_int_equal(back.rd_atomic, e.rd_atomic);
  assert_int_equal(back.lid, e.lid);
  assert_memory_equal(back.gid, e.gid, 16);
  assert_int_equal(back.qpn, e.qpn);
  assert_int_equal(back.psn, e.psn);
  assert_true(back.instance == e.instance);
  assert_string_equal(back.device.c_str(), "mlx5_0");

  e.device = std::string(kRdmaMaxDeviceName, 'd');  // the longest name still fits
  assert_true(DecodeRdmaQpEndpoint(EncodeRdmaQpEndpoint(e), &back));
  assert_int_equal(back.device.size(), kRdmaMaxDeviceName);
}

void test_qp_endpoint_decode_rejects(void**) {
  RdmaQpEndpoint e = SampleEndpoint();
  const std::string good = EncodeRdmaQpEndpoint(e);
  RdmaQpEndpoint out;
  for (size_t n = 0; n < good.size(); ++n) {
    assert_false(DecodeRdmaQpEndpoint(good.substr(0, n), &out));
  }
  assert_false(DecodeRdmaQpEndpoint(good + "x", &out));  // longer than its name says
  std::string other = good;
  other[0] = 2;
  assert_false(DecodeRdmaQpEndpoint(other, &out));
  std::string zero_name = good.substr(0, kRdmaQpEndpointFixedSize) + "x";
  zero_name[37] = 0;
  assert_false(DecodeRdmaQpEndpoint(zero_name, &out));
  std::string bad_mtu = good;
  bad_mtu[1] = 9;
  assert_false(DecodeRdmaQpEndpoint(bad_mtu, &out));
  std::string no_reads = good;
  no_reads[2] = 0;
  assert_false(DecodeRdmaQpEndpoint(no_reads, &out));
  std::string wide_psn = good;
  wide_psn[28] = 1;  // the psn's fourth byte: more than 24 bits
  assert_false(DecodeRdmaQpEndpoint(wide_psn, &out));
  assert_false(DecodeRdmaQpEndpoint(std::string(64, '\x01'), &out));
  assert_true(out.device.empty());  // nothing was written

  // What cannot be decoded is not encoded either.
  e.device = "";
  assert_true(EncodeRdmaQpEndpoint(e).empty());
  e.device = std::string(kRdmaMaxDeviceName + 1, 'd');
  assert_true(EncodeRdmaQpEndpoint(e).empty());
}

std::shared_ptr<RemoteSegment> Segment(bool tcp, bool rdma, const std::string& descriptor) {
  auto s = std::make_shared<RemoteSegment>();
  s->segment_id = 42;
  s->name = "10.0.0.2:12300";
  if (tcp) {
    rpc::TransportEndpoint e;
    e.protocol = "tcp";
    e.address = "10.0.0.2:12300";
    s->endpoints.push_back(e);
  }
  if (rdma) {
    rpc::TransportEndpoint e;
    e.protocol = "rdma";
    e.address = "mlx5_1";
    e.descriptor = descriptor;
    s->endpoints.push_back(e);
  }
  return s;
}

void test_resolve_remote(void**) {
  RdmaSegmentDescriptor d = SampleDescriptor();
  const std::string desc = EncodeRdmaDescriptor(d);
  TransferOp op;
  op.remote = Segment(true, true, desc);
  op.remote_offset = 4096;
  op.length = 100;
  RdmaRemote r;
  std::string why;
  assert_true(ResolveRdmaRemote(op, &r, &why));
  assert_string_equal(r.peer.c_str(), "10.0.0.2:12300");
  assert_string_equal(r.device.c_str(), "mlx5_1");
  assert_true(r.addr == d.base + 4096);
  assert_int_equal(r.segment.rkey, d.rkey);

  op.remote_offset = d.size - 100;  // ends exactly at the segment's end
  assert_true(ResolveRdmaRemote(op, &r, &why));
  assert_true(r.addr == d.base + d.size - 100);
  op.remote_offset = d.size - 99;
  assert_false(ResolveRdmaRemote(op, &r, &why));
  assert_non_null(strstr(why.c_str(), "outside segment 42"));
  op.remote_offset = UINT64_MAX - 50;  // offset + length wraps around
  assert_false(ResolveRdmaRemote(op, &r, &why));
  op.remote_offset = 0;
  op.length = d.size + 1;
  assert_false(ResolveRdmaRemote(op, &r, &why));

  op.length = 100;
  op.remote = Segment(true, false, desc);
  assert_false(ResolveRdmaRemote(op, &r, &why));
  assert_non_null(strstr(why.c_str(), "no rdma endpoint"));
  op.remote = Segment(false, true, desc);
  assert_false(ResolveRdmaRemote(op, &r, &why));
  assert_non_null(strstr(why.c_str(), "no tcp endpoint"));
  op.remote = Segment(true, true, desc.substr(0, 39));
  assert_false(ResolveRdmaRemote(op, &r, &why));
  assert_non_null(strstr(why.c_str(), "cannot decode"));
  op.remote = nullptr;
  assert_false(ResolveRdmaRemote(op, &r, &why));
}

char g_memory[8192];

void test_memory_map_lookup(void**) {
  ibv_mr a{}, b{}, c{};
  a.lkey = 1;
  b.lkey = 2;
  c.lkey = 3;
  char* m = g_memory;
  RdmaMemoryMap map;
  assert_true(map.empty());
  assert_true(map.Insert(m + 1000, 100, {&a}));
  assert_true(map.Insert(m + 1100, 50, {&b}));  // adjacent after
  assert_true(map.Insert(m + 4000, 10, {&c}));
  auto key = [&](const char* addr, uint64_t len) -> int {
    const RdmaMemoryMap::Region* r = map.Find(addr, len);
    return r == nullptr ? 0 : static_cast<int>(r->mrs.at(0)->lkey);
  };
  assert_int_equal(key(m + 1000, 1), 1);    // start
  assert_int_equal(key(m + 1000, 100), 1);  // all of it
  assert_int_equal(key(m + 1050, 10), 1);   // middle
  assert_int_equal(key(m + 1099, 1), 1);    // last byte
  assert_int_equal(key(m + 1000, 101), 0);  // one byte too many
  assert_int_equal(key(m + 1099, 2), 0);    // spans two registrations
  assert_int_equal(key(m + 1100, 1), 2);    // one past the end: the next one
  assert_int_equal(key(m + 1149, 1), 2);
  assert_int_equal(key(m + 1150, 1), 0);    // gap
  assert_int_equal(key(m + 1150, 0), 0);
  assert_int_equal(key(m + 999, 1), 0);     // before every region
  assert_int_equal(key(m, 1), 0);
  assert_int_equal(key(m + 4005, 5), 3);
  assert_int_equal(key(m + 4005, 6), 0);
  assert_int_equal(key(m + 4010, 1), 0);    // after every region
  assert_int_equal(key(m + 1000, UINT64_MAX), 0);
}

void test_memory_map_insert_remove(void**) {
  ibv_mr a{}, b{}, c{};
  char* m = g_memory;
  RdmaMemoryMap map;
  assert_true(map.Insert(m + 1000, 100, {&a, &b}));
  assert_false(map.Insert(m + 1050, 100, {&c}));  // overlaps the end
  assert_false(map.Insert(m + 1099, 10, {&c}));   // by one byte
  assert_false(map.Insert(m + 950, 51, {&c}));    // overlaps the start
  assert_false(map.Insert(m + 900, 400, {&c}));   // covers it
  assert_false(map.Insert(m + 1010, 10, {&c}));   // inside it
  assert_false(map.Insert(m + 1000, 100, {&c}));  // the same
  assert_false(map.Insert(m + 2000, 0, {&c}));    // empty
  assert_false(map.Insert(reinterpret_cast<char*>(UINTPTR_MAX - 10), 20, {&c}));  // wraps
  assert_true(map.Find(m + 1010, 1)->mrs.size() == 2);  // the refused left it alone
  assert_true(map.Insert(m + 950, 50, {&c}));     // adjacent before
  // Which regions peers may address (segments) and which not (pools): DescribeSegment
  // publishes only the former.
  assert_true(map.Insert(m + 3000, 10, {&c}, /*for_peers=*/true));
  assert_true(map.Find(m + 3000, 10)->for_peers);
  assert_false(map.Find(m + 950, 10)->for_peers);
  assert_int_equal(map.Remove(m + 3000).size(), 1);

  assert_true(map.Remove(m + 1001).empty());  // not a base
  std::vector<ibv_mr*> gone = map.Remove(m + 1000);
  assert_int_equal(gone.size(), 2);
  assert_ptr_equal(gone[0], &a);
  assert_ptr_equal(gone[1], &b);
  assert_null(map.Find(m + 1000, 1));
  assert_true(map.Remove(m + 1000).empty());  // twice
  assert_true(map.Insert(m + 1000, 100, {&a}));  // the range is free again

  std::vector<ibv_mr*> all = map.TakeAll();
  assert_int_equal(all.size(), 2);
  assert_true(map.empty());
  assert_null(map.Find(m + 960, 1));
}

// A queue pair made of memory: RDMA requests are memcpys between this process's buffers,
// completed a few at a time, with failures injected where a test asks.
class FakeQueue : public RdmaSendQueue {
 public:
  struct Posted {
    uint64_t wr_id;
    ibv_wr_opcode opcode;
    unsigned flags;
    uint64_t local;
    uint32_t length;
    uint32_t lkey;
    uint64_t remote;
    uint32_t rkey;
  };

  explicit FakeQueue(int window) : window_(window) {}

  int PostSend(ibv_send_wr* wr, ibv_send_wr** bad) override {
    for (; wr != nullptr; wr = wr->next) {
      if (static_cast<int>(posted.size()) == refuse_post_at) {
        *bad = wr;
        return ENOMEM;
      }
      if (broken_) ++posts_after_error;
      assert_int_equal(wr->num_sge, 1);
      posted.push_back(Posted{wr->wr_id, wr->opcode, wr->send_flags, wr->sg_list[0].addr,
                              wr->sg_list[0].length, wr->sg_list[0].lkey,
                              wr->wr.rdma.remote_addr, wr->wr.rdma.rkey});
      pending_.push_back(posted.size() - 1);
      assert_true(static_cast<int>(pending_.size()) <= window_);
      max_in_flight = std::max(max_in_flight, static_cast<int>(pending_.size()));
    }
    return 0;
  }

  int WaitCompletions(ibv_wc* wc, int max, Clock::time_point) override {
    assert_false(pending_.empty());  // never waits for nothing
    assert_true(max <= static_cast<int>(pending_.size()));
    int n = 0;
    while (n < std::min(max, 2) && !pending_.empty() && completed < complete_limit) {
      size_t i = pending_.front();
      pending_.pop_front();
      const Posted& p = posted[i];
      wc[n] = ibv_wc{};
      wc[n].wr_id = p.wr_id;
      if (broken_) {
        wc[n].status = IBV_WC_WR_FLUSH_ERR;
      } else if (static_cast<int>(i) == fail_wr) {
        wc[n].status = IBV_WC_REM_ACCESS_ERR;
        broken_ = true;
      } else {
        wc[n].status = IBV_WC_SUCCESS;
        char* local = reinterpret_cast<char*>(p.local);
        char* remote = reinterpret_cast<char*>(p.remote);
        if (p.opcode == IBV_WR_RDMA_WRITE) std::memcpy(remote, local, p.length);
        if (p.opcode == IBV_WR_RDMA_READ) std::memcpy(local, remote, p.length);
      }
      ++completed;
      ++n;
    }
    return n;  // 0: stalled, as though the deadline passed
  }

  int max_outstanding() const override { return window_; }

  int fail_wr = -1;          // the request that completes with a remote access error
  int refuse_post_at = -1;   // the request PostSend refuses
  int complete_limit = INT_MAX;  // completions before the queue stalls
  std::vector<Posted> posted;
  int completed = 0;
  int max_in_flight = 0;
  int posts_after_error = 0;

 private:
  const int window_;
  std::deque<size_t> pending_;
  bool broken_ = false;
};

// Four ops against a 16 KiB "remote": WRITE 3500 B, READ 2000 B, WRITE 1 B, and an empty op.
struct BatchFixture {
  std::vector<char> local = std::vector<char>(16384);
  std::vector<char> remote = std::vector<char>(16384);
  TransferOp ops[4];
  std::vector<RdmaWork> works;

  BatchFixture() {
    for (size_t i = 0; i < local.size(); ++i) {
      local[i] = static_cast<char>(i * 7 + 1);
      remote[i] = static_cast<char>(i * 13 + 5);
    }
    Add(TransferKind::kWrite, 0, 8000, 3500);
    Add(TransferKind::kRead, 4000, 12000, 2000);
    Add(TransferKind::kWrite, 7000, 100, 1);
    Add(TransferKind::kRead, 9000, 200, 0);
  }
  void Add(TransferKind kind, uint64_t local_at, uint64_t remote_at, uint64_t length) {
    TransferOp& op = ops[works.size()];
    op.kind = kind;
    op.local = local.data() + local_at;
    op.length = length;
    op.result = ErrorCode::INTERNAL_ERROR;  // a sentinel the batch must overwrite
    works.push_back(RdmaWork{&op, 0x11, reinterpret_cast<uintptr_t>(remote.data()) + remote_at,
                             0x22});
  }
  // True when op i moved its bytes.
  bool Moved(int i) const {
    const TransferOp& op = ops[i];
    const char* r = reinterpret_cast<const char*>(works[i].remote_addr);
    return std::memcmp(op.local, r, op.length) == 0;
  }
};

const Clock::time_point kFarAway = Clock::now() + std::chrono::hours(1);

void test_batch_splits_and_completes(void**) {
  BatchFixture f;
  FakeQueue q(3);
  assert_true(RunRdmaBatch(&q, f.works, 1000, kFarAway, "peer"));
  for (int i = 0; i < 4; ++i) assert_int_equal(f.ops[i].result, 0);
  for (int i = 0; i < 3; ++i) assert_true(f.Moved(i));
  // 4 + 2 + 1 requests (none for the empty op), never more than the window in flight.
  assert_int_equal(q.posted.size(), 7);
  assert_int_equal(q.max_in_flight, 3);
  uint64_t covered[3] = {0, 0, 0};
  for (const FakeQueue::Posted& p : q.posted) {
    assert_true(p.length >= 1 && p.length <= 1000);
    assert_true(p.flags & IBV_SEND_SIGNALED);
    assert_int_equal(p.lkey, 0x11);
    assert_int_equal(p.rkey, 0x22);
    const TransferOp& op = f.ops[p.wr_id];
    assert_int_equal(p.opcode,
                     op.kind == TransferKind::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ);
    // Local and remote move together: request k of an op is bytes [1000k, ...) of both.
    assert_true(p.local - reinterpret_cast<uintptr_t>(op.local) ==
                p.remote - f.works[p.wr_id].remote_addr);
    covered[p.wr_id] += p.length;
  }
  assert_true(covered[0] == 3500 && covered[1] == 2000 && covered[2] == 1);
}

void test_batch_completion_error_fails_the_rest(void**) {
  BatchFixture f;
  FakeQueue q(2);
  q.fail_wr = 4;  // the READ's first request; requests 0-3 (the WRITE) complete first
  assert_false(RunRdmaBatch(&q, f.works, 1000, kFarAway, "peer"));
  assert_int_equal(f.ops[0].result, 0);
  assert_true(f.Moved(0));
  assert_int_equal(f.ops[1].result, kFail);
  assert_int_equal(f.ops[2].result, kFail);  // flushed, or never posted
  assert_int_equal(f.ops[3].result, 0);      // empty: nothing to fail
  assert_int_equal(q.posts_after_error, 0);
  assert_int_equal(q.completed, static_cast<int>(q.posted.size()));  // all drained
}

void test_batch_post_failure(void**) {
  BatchFixture f;
  FakeQueue q(8);
  q.refuse_post_at = 5;  // the READ's second request
  assert_false(RunRdmaBatch(&q, f.works, 1000, kFarAway, "peer"));
  assert_int_equal(f.ops[0].result, 0);
  assert_true(f.Moved(0));
  assert_int_equal(f.ops[1].result, kFail);
  assert_int_equal(f.ops[2].result, kFail);
  assert_int_equal(q.posted.size(), 5);
  assert_int_equal(q.completed, 5);  // what was posted still completed before returning
}

void test_batch_deadline(void**) {
  BatchFixture f;
  FakeQueue q(8);
  q.complete_limit = 5;  // the WRITE's 4 requests and 1 of the READ's, then silence
  assert_false(RunRdmaBatch(&q, f.works, 1000, kFarAway, "peer"));
  assert_int_equal(f.ops[0].result, 0);
  assert_int_equal(f.ops[1].result, kFail);  // half done is not done
  assert_int_equal(f.ops[2].result, kFail);

  // Past the deadline before the start: nothing is posted, and the connection stays usable.
  BatchFixture late;
  FakeQueue idle(8);
  assert_true(RunRdmaBatch(&idle, late.works, 1000, Clock::now() - std::chrono::seconds(1),
                           "peer"));
  assert_int_equal(idle.posted.size(), 0);
  for (int i = 0; i < 3; ++i) assert_int_equal(late.ops[i].result, kFail);
  assert_int_equal(late.ops[3].result, 0);
}

void test_no_device_here(void**) {
  std::vector<std::string> devices = ListRdmaDevices();
  if (!devices.empty()) skip();  // a host with RDMA: these are about one without
  std::string error;
  assert_null(RdmaTransport::Open({}, nullptr, &error).get());
  assert_non_null(strstr(error.c_str(), "no RDMA device"));
  error.clear();
  assert_null(RdmaTransport::Open({"mlx5_9"}, nullptr, &error).get());
  assert_non_null(strstr(error.c_str(), "RDMA device mlx5_9 not found"));
  assert_non_null(strstr(error.c_str(), "have: none"));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_descriptor_round_trip),
      cmocka_unit_test(test_descriptor_decode_rejects),
      cmocka_unit_test(test_qp_endpoint_round_trip),
      cmocka_unit_test(test_qp_endpoint_decode_rejects),
      cmocka_unit_test(test_resolve_remote),
      cmocka_unit_test(test_memory_map_lookup),
      cmocka_unit_test(test_memory_map_insert_remove),
      cmocka_unit_test(test_batch_splits_and_completes),
      cmocka_unit_test(test_batch_completion_error_fails_the_rest),
      cmocka_unit_test(test_batch_post_failure),
      cmocka_unit_test(test_batch_deadline),
      cmocka_unit_test(test_no_device_here),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
