// master_bench_protocol: what the wire protocol costs per master call, Thrift's binary
// protocol (what the master and the daemons speak) against the compact one, on the calls
// of the hot paths: PutStart, PutEnd, GetReplicaList and BatchGetReplicaList of --batch
// keys. No socket: the client's call goes through a TMemoryBuffer into the generated
// processor over a real MasterService (one daemon, one 1 TiB segment), and the reply back
// into the client, so the figure (CPU time of the one thread) is encoding + decoding on
// both sides plus the handler; the handler's part is the same for both protocols, so the
// difference is the protocol's.
// Also the bytes each call and reply take on the wire. Chunks of 1024 calls alternate
// between the protocols, and the table gives each protocol's mean over all its chunks.
//
//   build/bench/master_bench_protocol [--keys 40000] [--batch 128]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/protocol/TCompactProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include "MasterService.h"
#include "common/base/flags.h"
#include "master/service/master_service.h"
#include "master/server/rpc_handler.h"

namespace {

namespace rpc = mooncake::rpc;
using apache::thrift::protocol::TBinaryProtocolFactory;
using apache::thrift::protocol::TCompactProtocolFactory;
using apache::thrift::protocol::TProtocolFactory;
using apache::thrift::transport::TMemoryBuffer;

struct Figures {
  double ns_per_call = 0;
  double call_bytes = 0;
  double reply_bytes = 0;
  double calls = 0;
};

// A client and the master's processor, joined by two memory buffers, in one protocol.
struct Pipe {
  std::shared_ptr<TMemoryBuffer> calls = std::make_shared<TMemoryBuffer>();
  std::shared_ptr<TMemoryBuffer> replies = std::make_shared<TMemoryBuffer>();
  std::shared_ptr<apache::thrift::protocol::TProtocol> in, out;
  std::unique_ptr<rpc::MasterServiceClient> client;
  rpc::MasterServiceProcessor processor;
  uint64_t call_bytes = 0;
  uint64_t reply_bytes = 0;

  Pipe(const std::shared_ptr<TProtocolFactory>& factory,
       std::shared_ptr<rpc::MasterServiceIf> handler)
      : in(factory->getProtocol(calls)),
        out(factory->getProtocol(replies)),
        client(std::make_unique<rpc::MasterServiceClient>(factory->getProtocol(replies),
                                                          factory->getProtocol(calls))),
        processor(std::move(handler)) {}

  // The call the client just sent, served.
  void Serve() {
    call_bytes += calls->available_read();
    processor.process(in, out, nullptr);
    reply_bytes += replies->available_read();
  }
};

std::string Key(const std::string& prefix, int64_t i) {
  char buf[80];
  std::snprintf(buf, sizeof(buf), "%s-%048lld", prefix.c_str(), static_cast<long long>(i));
  return buf;
}

// This thread's CPU time: other work on the machine (it is shared) does not count.
int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

template <typename Fn>
Figures Time(Pipe& pipe, int64_t calls, Fn&& one_call) {
  pipe.call_bytes = pipe.reply_bytes = 0;
  const int64_t start = ThreadCpuNanos();
  for (int64_t i = 0; i < calls; ++i) one_call(i);
  const double ns = static_cast<double>(ThreadCpuNanos() - start);
  return {ns / static_cast<double>(calls), static_cast<double>(pipe.call_bytes) / calls,
          static_cast<double>(pipe.reply_bytes) / calls, static_cast<double>(calls)};
}

void Die(const char* what, int code) {
  std::fprintf(stderr, "master_bench_protocol: %s returned %d\n", what, code);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t keys = 40000;
  int64_t batch = 128;
  mooncake::FlagSet flags("master_bench_protocol",
                          "Binary vs compact Thrift protocol: CPU and bytes per master call.");
  flags.AddInt("keys", &keys, "keys per protocol (puts, then single and batch lookups)");
  flags.AddInt("batch", &batch, "keys per BatchGetReplicaList");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);

  mooncake::MasterOptions options;
  mooncake::MasterService service(options);
  auto handler = std::make_shared<mooncake::RpcHandler>(&service);
  if (int rc = mooncake::ToInt(service.RegisterDaemon(1, "127.0.0.1:20001"))) {
    Die("RegisterDaemon", rc);
  }
  rpc::SegmentInfo segment;
  segment.segment_id = 1;
  segment.name = "127.0.0.1:20001";
  segment.base = static_cast<int64_t>(1ULL << 40);
  segment.size = static_cast<int64_t>(1ULL << 40);
  segment.daemon_id = 1;
  rpc::TransportEndpoint endpoint;
  endpoint.protocol = "tcp";
  endpoint.address = segment.name;
  segment.endpoints.push_back(endpoint);
  if (int rc = mooncake::ToInt(service.MountSegment(segment))) Die("MountSegment", rc);

  struct Protocol {
    const char* name;
    std::shared_ptr<TProtocolFactory> factory;
    std::unique_ptr<Pipe> pipe;
    Figures total[4];
  };
  Protocol protocols[2] = {
      {"binary", mooncake::MakeRpcProtocolFactory(), nullptr, {}},
      {"compact",
       std::make_shared<TCompactProtocolFactory>(mooncake::kMaxRpcStringBytes,
                                                 mooncake::kMaxRpcListEntries),
       nullptr, {}}};
  for (Protocol& p : protocols) p.pipe = std::make_unique<Pipe>(p.factory, handler);
  const char* call_names[4] = {"PutStart", "PutEnd", "GetReplicaList",
                               "BatchGetReplicaList"};
  rpc::ReplicateConfig config;
  config.replica_num = 1;
  std::vector<std::string> batch_keys(static_cast<size_t>(batch));
  // One chunk of calls of one kind on one protocol: keys [begin, begin + n) of its own.
  auto run_chunk = [&](int kind, Protocol& p, int64_t begin, int64_t n) {
    Pipe& pipe = *p.pipe;
    const std::string prefix = p.name;
    switch (kind) {
      case 0:
        return Time(pipe, n, [&](int64_t i) {
          pipe.client->send_PutStart(1, Key(prefix, begin + i), 4096, config);
          pipe.Serve();
          rpc::PutStartResult r;
          pipe.client->recv_PutStart(r);
          if (r.code != 0) Die("PutStart", r.code);
        });
      case 1:
        return Time(pipe, n, [&](int64_t i) {
          pipe.client->send_PutEnd(1, Key(prefix, begin + i), 0);
          pipe.Serve();
          if (int32_t rc = pipe.client->recv_PutEnd()) Die("PutEnd", rc);
        });
      case 2:
        return Time(pipe, n, [&](int64_t i) {
          pipe.client->send_GetReplicaList(Key(prefix, begin + i), 1);
          pipe.Serve();
          rpc::ReplicaListResult r;
          pipe.client->recv_GetReplicaList(r);
          if (r.code != 0) Die("GetReplicaList", r.code);
        });
      default:
        return Time(pipe, n / batch, [&](int64_t b) {
          for (int64_t j = 0; j < batch; ++j) batch_keys[j] = Key(prefix, begin + b * batch + j);
          pipe.client->send_BatchGetReplicaList(batch_keys, 1);
          pipe.Serve();
          std::vector<rpc::ReplicaListResult> r;
          pipe.client->recv_BatchGetReplicaList(r);
          if (r.size() != batch_keys.size() || r[0].code != 0) Die("BatchGetReplicaList", -1);
        });
    }
  };
  // Chunks of each kind alternate between the protocols (which goes first alternates
  // too), so that the machine's drift and the table's growth fall on both alike.
  const int64_t chunk = std::max<int64_t>(batch, 1024);
  for (int kind = 0; kind < 4; ++kind) {
    for (int64_t begin = 0, k = 0; begin + chunk <= keys; begin += chunk, ++k) {
      for (int j = 0; j < 2; ++j) {
        Protocol& p = protocols[(k + j) % 2];
        const Figures f = run_chunk(kind, p, begin, chunk);
        const double calls = static_cast<double>(kind == 3 ? chunk / batch : chunk);
        p.total[kind].ns_per_call += f.ns_per_call * calls;
        p.total[kind].call_bytes += f.call_bytes * calls;
        p.total[kind].reply_bytes += f.reply_bytes * calls;
        p.total[kind].calls += calls;
      }
    }
  }
  for (Protocol& p : protocols) {
    for (Figures& f : p.total) {
      f.ns_per_call /= f.calls;
      f.call_bytes /= f.calls;
      f.reply_bytes /= f.calls;
    }
  }
  std::printf("call                 protocol   us/call  call_B  reply_B   vs_binary\n");
  for (int c = 0; c < 4; ++c) {
    for (const Protocol& p : protocols) {
      const Figures& f = p.total[c];
      std::printf("%-20s %-8s %9.2f %7.0f %8.0f %10.2fx\n",
                  c == 3 ? (std::string(call_names[c]) + std::to_string(batch)).c_str()
                         : call_names[c],
                  p.name, f.ns_per_call / 1000.0, f.call_bytes, f.reply_bytes,
                  f.ns_per_call / protocols[0].total[c].ns_per_call);
    }
  }
  return 0;
}
