// What the benchmarks that drive a mooncake-master over Thrift share (master_bench,
// durability_bench): fatal errors, keys, connections, a fake daemon, timed phases over
// many connections, result checks, and plain-text tables and CSV files.
//
// The rule they all follow: every RPC result is checked, and the first unexpected one ends
// the run through Die() with a message naming the call, the key and the code. A benchmark
// that counted errors and went on would measure nothing.
#ifndef MOONCAKE_BENCH_MASTER_BENCH_UTIL_H_
#define MOONCAKE_BENCH_MASTER_BENCH_UTIL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransport.h>

#include "MasterService.h"
#include "tests/harness/process_harness.h"

namespace mooncake {
namespace bench {

using Clock = std::chrono::steady_clock;

inline int64_t NanosSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

// ---- fatal errors ----------------------------------------------------------------------

// The prefix of Die's message ("<program>: FATAL: ..."); set once at the start of main.
void SetProgramName(const char* name);

// Registers work Die does before it exits, e.g. killing spawned processes whose files are
// about to be removed, and removing temporary directories. Hooks run in reverse order of
// registration, on the dying thread.
void AtDie(std::function<void()> hook);

// Aborts the whole run from any thread with exit code 1. Only the first failure is
// reported: a second thread dying meanwhile blocks until the process is gone.
[[noreturn]] __attribute__((format(printf, 1, 2))) void Die(const char* format, ...);

// "-704 (OBJECT_NOT_FOUND: object not found)".
std::string CodeText(int64_t code);

// The first 24 characters of a key, for error messages.
std::string Short(const std::string& key);

// Draws png from csv with the gnuplot script (its variables csv and png set), when
// gnuplot is installed: it is optional, the CSV has every figure, so without it one line
// says there is no plot. png empty: nothing. Die()s when gnuplot fails.
void PlotCsv(const std::string& script, const std::string& csv, const std::string& png);

// ---- keys ------------------------------------------------------------------------------

// splitmix64's finalizer: a bijection on 64-bit values, so distinct seeds give distinct
// first 16 hex digits.
uint64_t Mix(uint64_t x);

// Keys look like content hashes (lowercase hex), as KV-cache keys do. Key i of set s is
// unique for the run: its seed is base + s * 2^40 + i, and Mix is a bijection. With a
// tenant, they are that tenant's keys as the master stores them (common/base/tenant_key.h).
class KeyMaker {
 public:
  KeyMaker(uint64_t base, size_t size, std::string tenant = "")
      : base_(base), size_(size), tenant_(std::move(tenant)) {}
  std::string Make(uint64_t set, uint64_t index) const;

 private:
  uint64_t base_;
  size_t size_;
  std::string tenant_;
};

// The checksum each put reports. There are no bytes here, so the key's CRC-32C stands in
// for the value's, and a read can check it.
int64_t ChecksumOf(const std::string& key);

// ---- connections and processes ---------------------------------------------------------

// The cluster key file every Conn (and FakeDaemon) proves to the master with
// (common/master_link/master_auth.h); "" (the default): no handshake, for a master without a key on
// this host. A benchmark that spawns its master gives it testing::ClusterKeyFile() and
// sets that here. Set once, before the first connection.
void SetClusterKeyFile(const std::string& path);

// One Thrift connection: TSocket, framed transport (as master/server/rpc_server.h reads calls),
// binary protocol, admitted by the cluster key's handshake. Dies when it cannot connect
// or either side's proof fails.
class Conn {
 public:
  Conn(const std::string& host, int port);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  rpc::MasterServiceClient* operator->() { return client_.get(); }

 private:
  std::shared_ptr<apache::thrift::transport::TSocket> socket_;
  std::shared_ptr<apache::thrift::transport::TTransport> transport_;
  std::unique_ptr<rpc::MasterServiceClient> client_;
};

std::vector<std::unique_ptr<Conn>> Connect(const std::string& host, int port, int64_t n);

// The master's GetStats; dies when the call fails.
rpc::MasterStats Stats(Conn& conn);

// "host:port"; false when malformed.
bool ParseHostPort(const std::string& text, std::string* host, int* port);

// The words of a flag list such as --master_args, split at blanks (no quoting).
std::vector<std::string> SplitWords(const std::string& text);

// CPU seconds (user + system) a running child has used; -1 when it is not running or its
// /proc entry cannot be read.
double ProcessCpuSeconds(const testing::ChildProcess& process);
double SelfCpuSeconds();

// ---- the fake daemon -------------------------------------------------------------------

// Registers a daemon, mounts one segment of segment_size bytes (the master only does
// bookkeeping and no bytes move, so it needs no memory) and lent_segments more marked
// lent_by_client (which placement uses only once the first is full: what they cost is the
// placement policy's ordering), and heartbeats every second on its
// own connection so the master never declares it dead (which would drop the segment and
// every object in it). A failed heartbeat ends the run; so destroy it before stopping the
// master on purpose.
class FakeDaemon {
 public:
  FakeDaemon(const std::string& host, int port, int64_t daemon_id, int64_t segment_id,
             uint64_t segment_size, int64_t lent_segments = 0);
  ~FakeDaemon();  // stops the heartbeats; the segment stays mounted
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;

 private:
  void HeartbeatLoop();

  std::string host_;
  int port_;
  int64_t daemon_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // mu_
  std::thread heartbeat_;
};

// ---- timed phases ----------------------------------------------------------------------

struct PhaseResult {
  std::string operation;
  std::string form;
  int64_t threads = 0;
  int64_t keys = 0;
  int64_t rpcs = 0;  // latencies recorded: one per Recorder::Rpc call
  double seconds = 0;
  double keys_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  double master_cores = -1;       // CPU the master used during the phase, in cores; -1 unknown
  double bench_cores = 0;         // same for this process
  double master_us_per_key = -1;  // master CPU time per key, µs; -1 unknown
};

// What one worker thread measures.
class Recorder {
 public:
  Recorder(std::string phase, std::atomic<int64_t>* progress)
      : phase_(std::move(phase)), progress_(progress) {}

  // Runs call (one RPC, or whatever the caller wants timed as one) and records its latency.
  // A Thrift exception (the master died or stopped answering) ends the run.
  template <typename F>
  void Rpc(F&& call) {
    auto t0 = Clock::now();
    try {
      call();
    } catch (const std::exception& e) {
      DieRpcFailed(e);
    }
    latencies_ns_.push_back(NanosSince(t0));
  }
  void KeysDone(int64_t n) { progress_->fetch_add(n, std::memory_order_relaxed); }
  std::vector<int64_t>& latencies() { return latencies_ns_; }

 private:
  [[noreturn]] void DieRpcFailed(const std::exception& e) const;

  std::string phase_;
  std::atomic<int64_t>* progress_;
  std::vector<int64_t> latencies_ns_;
};

// The body of one worker: thread index, its connection, its recorder.
using Body = std::function<void(size_t, Conn&, Recorder&)>;

// The q-quantile (0..1) of v in µs (v holds ns; reordered); 0 when empty. Nearest rank.
double Percentile(std::vector<int64_t>* v, double q);

// The median of v; -1 when empty.
double Median(std::vector<double> v);

// Thread t's share [begin, end) of count items split over n threads.
std::pair<int64_t, int64_t> Share(int64_t count, size_t t, size_t n);

// Runs body on every connection at once, timing from the moment all threads are released
// until the last one finishes, and prints progress to stderr about once a second. The
// bodies together must report exactly total_keys through KeysDone, or the run dies.
// master: the master's process, for its CPU time (not running: the CPU columns read -1).
PhaseResult RunPhase(const std::string& operation, const std::string& form, int64_t total_keys,
                     std::vector<std::unique_ptr<Conn>>& conns, const Body& body,
                     const testing::ChildProcess& master);

// ---- result checks (each dies with the call, the key and the code) ---------------------

// code 0 and exactly one replica.
void CheckPutStart(const rpc::PutStartResult& r, const std::string& key, const char* call);
// code 0, one COMPLETE replica of size, and the checksum ChecksumOf(key).
void CheckReplicaList(const rpc::ReplicaListResult& r, const std::string& key, int64_t size,
                      const char* call);
void CheckCode(int32_t code, int32_t expected, const std::string& key, const char* call);

template <typename T>
void CheckBatchSize(const std::vector<T>& results, size_t keys, const char* call) {
  if (results.size() != keys)
    Die("%s returned %zu results for %zu keys", call, results.size(), keys);
}

// Puts keys [begin, end) as single-replica objects of object_size, each reporting
// ChecksumOf(key): PutStart then PutEnd per key, or BatchPutStart then BatchPutEnd per
// batch keys. make_key gives key i. Every RPC is timed on rec; KeysDone after each key
// (or batch) whose both calls succeeded.
void PutKeys(Conn& conn, Recorder& rec, int64_t writer, int64_t object_size, int64_t batch,
             bool batched, int64_t begin, int64_t end,
             const std::function<std::string(int64_t)>& make_key);

// ---- report ----------------------------------------------------------------------------

// v with the given decimals, or "-" when v is negative (unknown).
std::string Fixed(double v, int decimals);

// A plain-text table on stdout: cells separated by one space, each padded to its column's
// width (longer cells push the rest right), left- or right-aligned.
class Table {
 public:
  struct Column {
    const char* title;
    int width;
    bool left = false;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void PrintHeader() const;
  // One cell per column; flushes stdout, so rows appear as phases finish.
  void PrintRow(const std::vector<std::string>& cells) const;

 private:
  void Print(const std::vector<std::string>& cells) const;
  std::vector<Column> columns_;
};

// A CSV file written row by row: the header at open, then one line per Row. Dies when the
// file cannot be written. Cells are written as given (the benchmarks' cells hold no commas).
class CsvFile {
 public:
  CsvFile(const std::string& path, const std::vector<std::string>& header);
  ~CsvFile();  // closes; Close() first to learn about a failed write
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;
  void Row(const std::vector<std::string>& cells);
  void Close();

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

// printf into a std::string.
__attribute__((format(printf, 1, 2))) std::string Format(const char* format, ...);

}  // namespace bench
}  // namespace mooncake

#endif  // MOONCAKE_BENCH_MASTER_BENCH_UTIL_H_
