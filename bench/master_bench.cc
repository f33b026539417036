// master_bench: how many keys per second a mooncake-master takes through its Thrift
// interface, and how much memory it spends per object.
//
// A fake daemon registers and mounts one big segment (the master only does bookkeeping, so
// the segment needs no memory), then --threads client threads, each on its own connection,
// run these phases one after another, each in a single-key and a batch form:
//   PutStart+PutEnd   new keys; a key counts once both calls succeeded
//   GetReplicaList    existing keys
//   ExistKey          existing keys
// Every result code is checked; the first unexpected one aborts the run with its code.
// Then the memory phase: RemoveAll(true), read GetStats().resident_bytes, bulk-load
// --rss_objects single-replica objects with batch puts, read it again; the difference per
// object is the master's memory cost of one object.
//
// See bench/README.md for how to run it and what the columns mean.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "MasterService.h"
#include "common/crc32c.h"
#include "common/error_code.h"
#include "common/flags.h"
#include "common/units.h"
#include "tests/process_harness.h"

#ifndef MC_BUILD_TYPE
#define MC_BUILD_TYPE "unknown"
#endif

namespace {

namespace rpc = mooncake::rpc;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;
using Clock = std::chrono::steady_clock;

// ---- fatal errors --------------------------------------------------------------------

// The master we spawned, if any. Started with PR_SET_PDEATHSIG, so it never outlives us,
// even when Die() ends the run from another thread.
mooncake::testing::ChildProcess* g_master = nullptr;
std::mutex g_die_mu;

// Aborts the whole run, from any thread: a benchmark that keeps counting after an error
// measures nothing.
[[noreturn]] __attribute__((format(printf, 1, 2))) void Die(const char* format, ...) {
  g_die_mu.lock();  // never released: the first failure is the one reported
  std::fflush(stdout);
  std::fprintf(stderr, "\nmaster_bench: FATAL: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  _exit(1);
}

std::string CodeText(int64_t code) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%" PRId64 " (%s: %s)", code,
                mooncake::ErrorName(static_cast<int32_t>(code)),
                mooncake::ErrorText(static_cast<int32_t>(code)));
  return buf;
}

// The first 24 characters of a key, for error messages.
std::string Short(const std::string& key) {
  return key.size() <= 24 ? key : key.substr(0, 24) + "...";
}

// ---- flags -----------------------------------------------------------------------------

struct Options {
  std::string master = "127.0.0.1:50051";
  int64_t threads = 2;
  int64_t keys = 200000;
  int64_t batch = 128;
  int64_t key_size = 64;
  uint64_t object_size = 4096;
  uint64_t segment_size = 1ULL << 40;
  int64_t rss_objects = 1000000;
  bool rss_fresh_master = true;
  bool cleanup = true;
  std::string csv;
  std::string spawn_master;
  std::string master_args;
  std::string forms = "both";
};

// ---- keys ------------------------------------------------------------------------------

// splitmix64's finalizer: a bijection on 64-bit values, so distinct seeds give distinct
// first 16 hex digits.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Keys look like content hashes (lowercase hex), as KV-cache keys do. Key i of set s is
// unique for the run: its seed is base + s * 2^40 + i, and Mix is a bijection.
class KeyMaker {
 public:
  KeyMaker(uint64_t base, size_t size) : base_(base), size_(size) {}
  std::string Make(uint64_t set, uint64_t index) const {
    static const char kHex[] = "0123456789abcdef";
    std::string key(size_, '0');
    uint64_t h = Mix(base_ + (set << 40) + index);
    for (size_t i = 0; i < size_; ++i) {
      if (i > 0 && i % 16 == 0) h = Mix(h + i);
      key[i] = kHex[(h >> (60 - 4 * (i % 16))) & 15];
    }
    return key;
  }

 private:
  uint64_t base_;
  size_t size_;
};

constexpr uint64_t kSetPutSingle = 1;
constexpr uint64_t kSetPutBatch = 2;
constexpr uint64_t kSetMemory = 3;

// ---- connections -----------------------------------------------------------------------

// One Thrift connection: TSocket, framed transport (the master is a TNonblockingServer),
// binary protocol.
class Conn {
 public:
  Conn(const std::string& host, int port) {
    socket_ = std::make_shared<TSocket>(host, port);
    socket_->setConnTimeout(5000);
    socket_->setRecvTimeout(120000);  // a master stuck for 2 min fails the run
    socket_->setSendTimeout(120000);
    socket_->setNoDelay(true);
    transport_ = std::make_shared<TFramedTransport>(socket_);
    client_ =
        std::make_unique<rpc::MasterServiceClient>(std::make_shared<TBinaryProtocol>(transport_));
    try {
      transport_->open();
    } catch (const std::exception& e) {
      Die("cannot connect to the master at %s:%d: %s", host.c_str(), port, e.what());
    }
  }
  ~Conn() {
    try {
      transport_->close();
    } catch (...) {
    }
  }
  rpc::MasterServiceClient* operator->() { return client_.get(); }

 private:
  std::shared_ptr<TSocket> socket_;
  std::shared_ptr<TFramedTransport> transport_;
  std::unique_ptr<rpc::MasterServiceClient> client_;
};

// ---- the spawned master ----------------------------------------------------------------

std::vector<std::string> SplitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Starts the master on a free port of 127.0.0.1 and waits until it accepts.
void SpawnMaster(const Options& o, int* port) {
  if (access(o.spawn_master.c_str(), X_OK) != 0) {
    Die("--spawn_master %s: not an executable file", o.spawn_master.c_str());
  }
  std::vector<std::string> flags = {"--log_level", "warning"};
  for (const std::string& w : SplitWords(o.master_args)) flags.push_back(w);
  std::fprintf(stderr, "spawning %s on 127.0.0.1 with --log_level warning %s\n",
               o.spawn_master.c_str(), o.master_args.c_str());
  if (!mooncake::testing::StartMaster(g_master, port, "/dev/stderr", flags, o.spawn_master)) {
    Die("the spawned master did not start serving");
  }
}

void StopSpawnedMaster() {
  if (!g_master->running()) return;
  int status = g_master->Stop(SIGTERM, 10000);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "warning: the spawned master did not exit cleanly (status 0x%x)\n",
                 status);
  }
}

// CPU seconds (user + system) the spawned master has used; -1 when there is none.
double MasterCpuSeconds() {
  if (!g_master->running()) return -1;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(g_master->pid()));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces
  if (p == nullptr) return -1;
  std::istringstream in(p + 1);
  std::vector<std::string> fields;
  for (std::string w; in >> w;) fields.push_back(w);
  if (fields.size() < 13) return -1;
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  double ticks =
      std::strtod(fields[11].c_str(), nullptr) + std::strtod(fields[12].c_str(), nullptr);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// ---- the fake daemon -------------------------------------------------------------------

// Registers the daemon, mounts the segment, and heartbeats on its own connection so the
// master never declares it dead (which would drop the segment and every object in it).
class FakeDaemon {
 public:
  FakeDaemon(const Options& o, const std::string& host, int port, int64_t daemon_id,
             int64_t segment_id)
      : host_(host), port_(port), daemon_id_(daemon_id) {
    Conn conn(host, port);
    std::string name = "127.0.0.1:" + std::to_string(20000 + daemon_id % 40000);
    int32_t rc = conn->RegisterDaemon(daemon_id, name);
    if (rc != 0) Die("RegisterDaemon returned %s", CodeText(rc).c_str());
    rpc::SegmentInfo segment;
    segment.segment_id = segment_id;
    segment.name = name;
    segment.base = static_cast<int64_t>(1ULL << 40);
    segment.size = static_cast<int64_t>(o.segment_size);
    segment.daemon_id = daemon_id;
    rpc::TransportEndpoint endpoint;
    endpoint.protocol = "tcp";
    endpoint.address = name;
    segment.endpoints.push_back(endpoint);
    rc = conn->MountSegment(segment);
    if (rc != 0) Die("MountSegment returned %s", CodeText(rc).c_str());
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }
  ~FakeDaemon() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    heartbeat_.join();
  }

 private:
  void HeartbeatLoop() {
    Conn conn(host_, port_);
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      rpc::HeartbeatResult r;
      try {
        conn->Heartbeat(r, daemon_id_);
      } catch (const std::exception& e) {
        Die("Heartbeat failed: %s", e.what());
      }
      if (r.code != 0) {
        Die("Heartbeat returned %s: the master dropped this daemon and its objects",
            CodeText(r.code).c_str());
      }
    }
  }

  std::string host_;
  int port_;
  int64_t daemon_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

// ---- phases ----------------------------------------------------------------------------

struct PhaseResult {
  std::string operation;
  std::string form;
  int64_t threads = 0;
  int64_t keys = 0;
  int64_t rpcs = 0;
  double seconds = 0;
  double keys_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  double master_cores = -1;       // CPU the master used during the phase, in cores; -1 unknown
  double bench_cores = 0;         // same for this process
  double master_us_per_key = -1;  // master CPU time per key, µs; -1 unknown
  double bytes_per_object = -1;
};

// What one worker thread measures.
class Recorder {
 public:
  Recorder(std::string phase, std::atomic<int64_t>* progress)
      : phase_(std::move(phase)), progress_(progress) {}

  // Runs one RPC and records its latency.
  template <typename F>
  void Rpc(F&& call) {
    auto t0 = Clock::now();
    try {
      call();
    } catch (const std::exception& e) {
      Die("%s: RPC failed (is the master still up?): %s", phase_.c_str(), e.what());
    }
    latencies_ns_.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }
  void KeysDone(int64_t n) { progress_->fetch_add(n, std::memory_order_relaxed); }
  std::vector<int64_t>& latencies() { return latencies_ns_; }

 private:
  std::string phase_;
  std::atomic<int64_t>* progress_;
  std::vector<int64_t> latencies_ns_;
};

// The body of one worker: thread index, its connection, its recorder.
using Body = std::function<void(size_t, Conn&, Recorder&)>;

double Percentile(std::vector<int64_t>* v, double q) {
  if (v->empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v->size())));
  rank = std::min(v->size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v->begin(), v->begin() + static_cast<ptrdiff_t>(rank), v->end());
  return static_cast<double>((*v)[rank]) / 1000.0;
}

// Runs body on every connection at once, timing from the moment all threads are released
// until the last one finishes, and prints progress to stderr about once a second.
PhaseResult RunPhase(const std::string& operation, const std::string& form, int64_t total_keys,
                     std::vector<std::unique_ptr<Conn>>& conns, const Body& body) {
  size_t n = conns.size();
  std::atomic<int64_t> progress{0};
  std::atomic<size_t> ready{0};
  std::atomic<size_t> finished{0};
  std::atomic<bool> go{false};
  std::vector<std::unique_ptr<Recorder>> recorders;
  for (size_t t = 0; t < n; ++t)
    recorders.push_back(std::make_unique<Recorder>(operation + " " + form, &progress));
  // Each worker notes when it finished; the phase ends with the last of them (the loop
  // below only polls, so its own clock would be late by up to a polling period).
  std::vector<Clock::time_point> ends(n);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < n; ++t) {
    workers.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(t, *conns[t], *recorders[t]);
      ends[t] = Clock::now();
      finished.fetch_add(1);
    });
  }
  while (ready.load() < n) std::this_thread::yield();
  double master_cpu0 = MasterCpuSeconds();
  double self_cpu0 = SelfCpuSeconds();
  auto t0 = Clock::now();
  go.store(true, std::memory_order_release);

  auto last_print = t0;
  int64_t last_progress = 0;
  while (finished.load() < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto now = Clock::now();
    double since = std::chrono::duration<double>(now - last_print).count();
    if (since >= 1.0 && finished.load() < n) {
      int64_t done = progress.load();
      std::fprintf(
          stderr, "  [%s %s] %" PRId64 "/%" PRId64 " keys (%3.0f%%)  %.0f keys/s  %.1f s\n",
          operation.c_str(), form.c_str(), done, total_keys,
          total_keys > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_keys)
                         : 0.0,
          static_cast<double>(done - last_progress) / since,
          std::chrono::duration<double>(now - t0).count());
      last_print = now;
      last_progress = done;
    }
  }
  double master_cpu1 = MasterCpuSeconds();
  double self_cpu1 = SelfCpuSeconds();
  for (auto& w : workers) w.join();
  auto t1 = *std::max_element(ends.begin(), ends.end());

  PhaseResult r;
  r.operation = operation;
  r.form = form;
  r.threads = static_cast<int64_t>(n);
  r.keys = progress.load();
  if (r.keys != total_keys) {
    Die("%s %s: %" PRId64 " keys done, %" PRId64 " expected", operation.c_str(), form.c_str(),
        r.keys, total_keys);
  }
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  r.keys_per_s = r.seconds > 0 ? static_cast<double>(r.keys) / r.seconds : 0;
  std::vector<int64_t> all;
  for (auto& rec : recorders) {
    all.insert(all.end(), rec->latencies().begin(), rec->latencies().end());
  }
  r.rpcs = static_cast<int64_t>(all.size());
  r.p50_us = Percentile(&all, 0.50);
  r.p99_us = Percentile(&all, 0.99);
  if (master_cpu0 >= 0 && master_cpu1 >= 0 && r.seconds > 0) {
    r.master_cores = (master_cpu1 - master_cpu0) / r.seconds;
    if (r.keys > 0)
      r.master_us_per_key = (master_cpu1 - master_cpu0) * 1e6 / static_cast<double>(r.keys);
  }
  r.bench_cores = r.seconds > 0 ? (self_cpu1 - self_cpu0) / r.seconds : 0;
  return r;
}

// Thread t's share [begin, end) of count items.
std::pair<int64_t, int64_t> Share(int64_t count, size_t t, size_t n) {
  int64_t begin = count * static_cast<int64_t>(t) / static_cast<int64_t>(n);
  int64_t end = count * static_cast<int64_t>(t + 1) / static_cast<int64_t>(n);
  return {begin, end};
}

void CheckPutStart(const rpc::PutStartResult& r, const std::string& key, const char* call) {
  if (r.code != 0) Die("%s('%s') returned %s", call, Short(key).c_str(), CodeText(r.code).c_str());
  if (r.replicas.size() != 1) {
    Die("%s('%s') returned %zu replicas, 1 expected", call, Short(key).c_str(), r.replicas.size());
  }
}

// The checksum each put reports. There are no bytes here, so the key's CRC-32C stands in
// for the value's, and a read can check it.
int64_t ChecksumOf(const std::string& key) { return mooncake::Crc32c(key.data(), key.size()); }

void CheckReplicaList(const rpc::ReplicaListResult& r, const std::string& key, int64_t size,
                      const char* call) {
  if (r.code != 0) Die("%s('%s') returned %s", call, Short(key).c_str(), CodeText(r.code).c_str());
  if (r.checksum != ChecksumOf(key)) {
    Die("%s('%s') returned checksum %" PRId64 ", expected %" PRId64, call, Short(key).c_str(),
        static_cast<int64_t>(r.checksum), ChecksumOf(key));
  }
  if (r.size != size || r.replicas.size() != 1 ||
      r.replicas[0].status != rpc::ReplicaStatus::COMPLETE) {
    Die("%s('%s') returned size %" PRId64 " with %zu replica(s); expected size %" PRId64
        " with 1 COMPLETE replica",
        call, Short(key).c_str(), static_cast<int64_t>(r.size), r.replicas.size(), size);
  }
}

void CheckCode(int32_t code, int32_t expected, const std::string& key, const char* call) {
  if (code != expected) {
    Die("%s('%s') returned %s, expected %d", call, Short(key).c_str(), CodeText(code).c_str(),
        expected);
  }
}

template <typename T>
void CheckBatchSize(const std::vector<T>& results, size_t keys, const char* call) {
  if (results.size() != keys)
    Die("%s returned %zu results for %zu keys", call, results.size(), keys);
}

// Puts keys [begin, end) of one thread's list, single or batch. make_key gives key i.
void PutKeys(Conn& conn, Recorder& rec, int64_t writer, int64_t object_size, int64_t batch,
             bool batched, int64_t begin, int64_t end,
             const std::function<std::string(int64_t)>& make_key) {
  rpc::ReplicateConfig config;
  config.replica_num = 1;
  if (!batched) {
    for (int64_t i = begin; i < end; ++i) {
      std::string key = make_key(i);
      rpc::PutStartResult started;
      rec.Rpc([&] { conn->PutStart(started, writer, key, object_size, config); });
      CheckPutStart(started, key, "PutStart");
      int32_t rc = 0;
      rec.Rpc([&] { rc = conn->PutEnd(writer, key, ChecksumOf(key)); });
      CheckCode(rc, 0, key, "PutEnd");
      rec.KeysDone(1);
    }
    return;
  }
  std::vector<std::string> keys;
  std::vector<int64_t> sizes;
  std::vector<int64_t> checksums;
  std::vector<rpc::PutStartResult> started;
  std::vector<int32_t> ended;
  for (int64_t i = begin; i < end; i += batch) {
    int64_t stop = std::min(end, i + batch);
    keys.clear();
    checksums.clear();
    for (int64_t j = i; j < stop; ++j) {
      keys.push_back(make_key(j));
      checksums.push_back(ChecksumOf(keys.back()));
    }
    sizes.assign(keys.size(), object_size);
    rec.Rpc([&] { conn->BatchPutStart(started, writer, keys, sizes, config); });
    CheckBatchSize(started, keys.size(), "BatchPutStart");
    for (size_t k = 0; k < keys.size(); ++k) CheckPutStart(started[k], keys[k], "BatchPutStart");
    rec.Rpc([&] { conn->BatchPutEnd(ended, writer, keys, checksums); });
    CheckBatchSize(ended, keys.size(), "BatchPutEnd");
    for (size_t k = 0; k < keys.size(); ++k) CheckCode(ended[k], 0, keys[k], "BatchPutEnd");
    rec.KeysDone(static_cast<int64_t>(keys.size()));
  }
}

// ---- report ----------------------------------------------------------------------------

std::string Fixed(double v, int decimals) {
  if (v < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

void PrintTableHeader() {
  std::printf("%-16s %-6s %3s %9s %9s %8s %10s %9s %9s %7s %7s %7s\n", "operation", "form", "thr",
              "keys", "rpcs", "seconds", "keys/s", "p50_us", "p99_us", "mst_cpu", "cli_cpu",
              "mst_us");
}

void PrintRow(const PhaseResult& r) {
  std::printf("%-16s %-6s %3" PRId64 " %9" PRId64 " %9" PRId64
              " %8.2f %10.0f %9.1f %9.1f %7s %7s %7s\n",
              r.operation.c_str(), r.form.c_str(), r.threads, r.keys, r.rpcs, r.seconds,
              r.keys_per_s, r.p50_us, r.p99_us, Fixed(r.master_cores, 2).c_str(),
              Fixed(r.bench_cores, 2).c_str(), Fixed(r.master_us_per_key, 2).c_str());
  std::fflush(stdout);
}

void WriteCsv(const std::string& path, const std::vector<PhaseResult>& rows, int64_t key_size) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) Die("cannot write --csv %s: %s", path.c_str(), std::strerror(errno));
  std::fprintf(f,
               "operation,form,threads,keys,rpcs,seconds,keys_per_s,p50_us,p99_us,"
               "master_cores,bench_cores,master_us_per_key,key_size,bytes_per_object\n");
  for (const PhaseResult& r : rows) {
    std::fprintf(
        f,
        "%s,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%.4f,%.1f,%.2f,%.2f,%s,%.3f,%s,%" PRId64 ",%s\n",
        r.operation.c_str(), r.form.c_str(), r.threads, r.keys, r.rpcs, r.seconds, r.keys_per_s,
        r.p50_us, r.p99_us, r.master_cores < 0 ? "" : Fixed(r.master_cores, 3).c_str(),
        r.bench_cores, r.master_us_per_key < 0 ? "" : Fixed(r.master_us_per_key, 3).c_str(),
        key_size, r.bytes_per_object < 0 ? "" : Fixed(r.bytes_per_object, 1).c_str());
  }
  std::fclose(f);
}

bool ParseHostPort(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = text.substr(0, colon);
  char* end = nullptr;
  long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) return false;
  *port = static_cast<int>(p);
  return true;
}

std::vector<std::unique_ptr<Conn>> Connect(const std::string& host, int port, int64_t n) {
  std::vector<std::unique_ptr<Conn>> conns;
  for (int64_t t = 0; t < n; ++t) conns.push_back(std::make_unique<Conn>(host, port));
  return conns;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("master_bench",
                          "Throughput, latency and memory per object of a mooncake-master.");
  flags.AddString("master", &o.master, "host:port of the master (ignored with --spawn_master)");
  flags.AddInt("threads", &o.threads, "client threads, each with its own connection");
  flags.AddInt("keys", &o.keys, "keys per phase (0: skip the throughput phases)");
  flags.AddInt("batch", &o.batch, "keys per batch call");
  flags.AddInt("key_size", &o.key_size, "key length in bytes (hex digits, >= 16)");
  flags.AddSize("object_size", &o.object_size, "size of every object, as told to PutStart");
  flags.AddSize("segment_size", &o.segment_size, "size of the one segment mounted (virtual)");
  flags.AddInt("rss_objects", &o.rss_objects,
               "objects inserted for the memory-per-object figure (0: skip)");
  flags.AddBool("rss_fresh_master", &o.rss_fresh_master,
                "with --spawn_master: measure memory on a newly started master, so memory "
                "freed by the earlier phases (kept and reused by malloc) does not hide cost");
  flags.AddBool("cleanup", &o.cleanup, "RemoveAll(true) and unmount the segment at the end");
  flags.AddChoice("forms", &o.forms, {"both", "single", "batch"},
                  "which forms of the throughput phases to run");
  flags.AddString("csv", &o.csv, "also write one CSV row per phase to this file");
  flags.AddString("spawn_master", &o.spawn_master,
                  "path of a mooncake-master binary to start on a free port and stop at the end");
  flags.AddString("master_args", &o.master_args,
                  "extra flags for the spawned master, space-separated");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  if (o.threads < 1 || o.threads > 1024) Die("--threads must be in 1..1024");
  if (o.keys < 0 || o.rss_objects < 0) Die("--keys and --rss_objects must be >= 0");
  if (o.batch < 1) Die("--batch must be >= 1");
  if (o.key_size < 16 || o.key_size > MOONCAKE_STORE_MAX_KEY_LEN) {
    Die("--key_size must be in 16..%d", MOONCAKE_STORE_MAX_KEY_LEN);
  }
  if (o.object_size == 0 || o.object_size > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    Die("--object_size must be in 1..%llu",
        static_cast<unsigned long long>(MOONCAKE_STORE_MAX_VALUE_SIZE));
  }
  uint64_t needed = o.object_size * static_cast<uint64_t>(2 * o.keys + o.rss_objects);
  if (needed > o.segment_size / 10 * 8) {
    Die("--segment_size %s is too small for %s of objects (keep usage under the master's "
        "eviction watermark)",
        mooncake::FormatSize(o.segment_size).c_str(), mooncake::FormatSize(needed).c_str());
  }
  signal(SIGPIPE, SIG_IGN);

  mooncake::testing::ChildProcess master;
  g_master = &master;
  std::string host;
  int port = 0;
  if (!o.spawn_master.empty()) {
    host = "127.0.0.1";
    SpawnMaster(o, &port);
  } else if (!ParseHostPort(o.master, &host, &port)) {
    Die("--master must be host:port, not '%s'", o.master.c_str());
  }

  // A random run id keeps keys, the daemon and the segment apart from earlier runs against
  // the same master.
  std::mt19937_64 rng{std::random_device{}() ^
                      static_cast<uint64_t>(Clock::now().time_since_epoch().count())};
  uint64_t run_id = rng();
  int64_t daemon_id = static_cast<int64_t>(rng() >> 2) + 1;
  int64_t segment_id = static_cast<int64_t>(rng() >> 2) + 1;
  KeyMaker keys(run_id, static_cast<size_t>(o.key_size));
  int64_t object_size = static_cast<int64_t>(o.object_size);

  std::printf("master_bench: master %s:%d%s, %" PRId64 " threads, %" PRId64
              " keys/phase, batch %" PRId64 ", key %" PRId64 " B, object %s, segment %s\n",
              host.c_str(), port, o.spawn_master.empty() ? "" : " (spawned)", o.threads, o.keys,
              o.batch, o.key_size, mooncake::FormatSize(o.object_size).c_str(),
              mooncake::FormatSize(o.segment_size).c_str());
  std::printf(
      "machine: %u cores (shared by client and master when both run here); "
      "bench built %s; sample key %s\n\n",
      std::thread::hardware_concurrency(), MC_BUILD_TYPE, keys.Make(0, 0).c_str());
  std::fflush(stdout);

  auto daemon = std::make_unique<FakeDaemon>(o, host, port, daemon_id, segment_id);
  auto conns = Connect(host, port, o.threads);
  std::vector<PhaseResult> results;
  size_t n = conns.size();
  int64_t batch = o.batch;

  if (o.keys > 0) {
    bool single = o.forms != "batch";
    bool batched = o.forms != "single";
    // Every thread's keys are made before the clock starts.
    std::vector<std::vector<std::string>> put_single(n), put_batch(n), read(n);
    for (size_t t = 0; t < n; ++t) {
      auto [b, e] = Share(o.keys, t, n);
      for (int64_t i = b; i < e; ++i) {
        if (single) put_single[t].push_back(keys.Make(kSetPutSingle, static_cast<uint64_t>(i)));
        if (batched) put_batch[t].push_back(keys.Make(kSetPutBatch, static_cast<uint64_t>(i)));
      }
    }
    // Reads pick --keys of the stored keys, in an order unrelated to the puts.
    {
      std::vector<std::string> all;
      for (size_t t = 0; t < n; ++t) {
        all.insert(all.end(), put_single[t].begin(), put_single[t].end());
        all.insert(all.end(), put_batch[t].begin(), put_batch[t].end());
      }
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(static_cast<size_t>(o.keys));
      for (size_t t = 0; t < n; ++t) {
        auto [b, e] = Share(o.keys, t, n);
        read[t].assign(all.begin() + b, all.begin() + e);
      }
    }
    // Thread t's read keys in chunks of --batch.
    auto for_each_chunk = [&](size_t t, const std::function<void(std::vector<std::string>&)>& f) {
      const std::vector<std::string>& list = read[t];
      std::vector<std::string> chunk;
      for (size_t i = 0; i < list.size(); i += static_cast<size_t>(batch)) {
        size_t stop = std::min(list.size(), i + static_cast<size_t>(batch));
        chunk.assign(list.begin() + static_cast<ptrdiff_t>(i),
                     list.begin() + static_cast<ptrdiff_t>(stop));
        f(chunk);
      }
    };

    auto put = [&](bool batch_form) {
      auto& lists = batch_form ? put_batch : put_single;
      return [&, batch_form](size_t t, Conn& c, Recorder& r) {
        const std::vector<std::string>& list = lists[t];
        PutKeys(c, r, daemon_id, object_size, batch, batch_form, 0,
                static_cast<int64_t>(list.size()),
                [&list](int64_t i) { return list[static_cast<size_t>(i)]; });
      };
    };
    Body get_single = [&](size_t t, Conn& c, Recorder& r) {
      rpc::ReplicaListResult result;
      for (const std::string& key : read[t]) {
        r.Rpc([&] { c->GetReplicaList(result, key); });
        CheckReplicaList(result, key, object_size, "GetReplicaList");
        r.KeysDone(1);
      }
    };
    Body get_batch = [&](size_t t, Conn& c, Recorder& r) {
      std::vector<rpc::ReplicaListResult> out;
      for_each_chunk(t, [&](std::vector<std::string>& chunk) {
        r.Rpc([&] { c->BatchGetReplicaList(out, chunk); });
        CheckBatchSize(out, chunk.size(), "BatchGetReplicaList");
        for (size_t k = 0; k < chunk.size(); ++k) {
          CheckReplicaList(out[k], chunk[k], object_size, "BatchGetReplicaList");
        }
        r.KeysDone(static_cast<int64_t>(chunk.size()));
      });
    };
    Body exist_single = [&](size_t t, Conn& c, Recorder& r) {
      for (const std::string& key : read[t]) {
        int32_t rc = 0;
        r.Rpc([&] { rc = c->ExistKey(key); });
        CheckCode(rc, 1, key, "ExistKey");
        r.KeysDone(1);
      }
    };
    Body exist_batch = [&](size_t t, Conn& c, Recorder& r) {
      std::vector<int32_t> out;
      for_each_chunk(t, [&](std::vector<std::string>& chunk) {
        r.Rpc([&] { c->BatchExistKey(out, chunk); });
        CheckBatchSize(out, chunk.size(), "BatchExistKey");
        for (size_t k = 0; k < chunk.size(); ++k) CheckCode(out[k], 1, chunk[k], "BatchExistKey");
        r.KeysDone(static_cast<int64_t>(chunk.size()));
      });
    };

    struct Phase {
      const char* operation;
      const char* form;
      Body body;
    };
    std::vector<Phase> phases;
    if (single) phases.push_back({"PutStart+PutEnd", "single", put(false)});
    if (batched) phases.push_back({"PutStart+PutEnd", "batch", put(true)});
    if (single) phases.push_back({"GetReplicaList", "single", get_single});
    if (batched) phases.push_back({"GetReplicaList", "batch", get_batch});
    if (single) phases.push_back({"ExistKey", "single", exist_single});
    if (batched) phases.push_back({"ExistKey", "batch", exist_batch});
    PrintTableHeader();
    for (const Phase& phase : phases) {
      results.push_back(RunPhase(phase.operation, phase.form, o.keys, conns, phase.body));
      PrintRow(results.back());
    }
  }

  if (o.rss_objects > 0) {
    std::printf("\nmemory per object (%" PRId64 " single-replica objects, %" PRId64 "-byte keys)\n",
                o.rss_objects, o.key_size);
    if (g_master->running() && o.rss_fresh_master && o.keys > 0) {
      // Objects freed by RemoveAll stay in malloc's free lists and would be reused by the
      // load below, so a delta on the same process would come out too small.
      std::printf("  restarting the spawned master so the measurement starts from a clean heap\n");
      conns.clear();
      daemon.reset();
      StopSpawnedMaster();
      SpawnMaster(o, &port);
      daemon = std::make_unique<FakeDaemon>(o, host, port, daemon_id, segment_id);
      conns = Connect(host, port, o.threads);
    }
    rpc::MasterStats before, after;
    int64_t removed = (*conns[0])->RemoveAll(true);
    if (removed < 0) Die("RemoveAll(true) returned %s", CodeText(removed).c_str());
    (*conns[0])->GetStats(before);
    std::printf("  RemoveAll(true) removed %" PRId64 " objects; master now holds %" PRId64
                " objects, resident %s\n",
                removed, static_cast<int64_t>(before.objects),
                mooncake::FormatSize(static_cast<uint64_t>(before.resident_bytes)).c_str());
    std::fflush(stdout);
    PrintTableHeader();
    PhaseResult load = RunPhase(
        "PutStart+PutEnd", "load", o.rss_objects, conns, [&](size_t t, Conn& c, Recorder& r) {
          auto [b, e] = Share(o.rss_objects, t, n);
          PutKeys(c, r, daemon_id, object_size, batch, /*batched=*/true, b, e,
                  [&keys](int64_t i) { return keys.Make(kSetMemory, static_cast<uint64_t>(i)); });
        });
    (*conns[0])->GetStats(after);
    int64_t added = after.objects - before.objects;
    if (added != o.rss_objects) {
      Die("the master counts %" PRId64 " more objects after loading %" PRId64, added,
          o.rss_objects);
    }
    int64_t delta = after.resident_bytes - before.resident_bytes;
    load.bytes_per_object = static_cast<double>(delta) / static_cast<double>(o.rss_objects);
    PrintRow(load);
    results.push_back(load);
    std::printf("  resident before %s, after %s: +%s for %" PRId64 " objects\n",
                mooncake::FormatSize(static_cast<uint64_t>(before.resident_bytes)).c_str(),
                mooncake::FormatSize(static_cast<uint64_t>(after.resident_bytes)).c_str(),
                mooncake::FormatSize(static_cast<uint64_t>(std::max<int64_t>(0, delta))).c_str(),
                added);
    std::printf("  GetStats().objects = %" PRId64 "  (used %s of %s)\n",
                static_cast<int64_t>(after.objects),
                mooncake::FormatSize(static_cast<uint64_t>(after.used_bytes)).c_str(),
                mooncake::FormatSize(static_cast<uint64_t>(after.capacity_bytes)).c_str());
    std::printf("  => %.1f bytes of master memory per single-replica object (key %" PRId64
                " bytes; target <= 250 with 64-byte keys)%s\n",
                load.bytes_per_object, o.key_size,
                g_master->running() && o.rss_fresh_master
                    ? ""
                    : (o.keys > 0 ? "\n     (same master process as the throughput phases: memory "
                                    "they freed is reused, so this is a lower bound)"
                                  : ""));
  }

  bool printed_targets = false;
  for (const PhaseResult& r : results) {
    if (r.form == "single") continue;
    if (!printed_targets) std::printf("\nbatch calls vs the 300k keys/s target:\n");
    printed_targets = true;
    std::printf("  %-16s %-6s %10.0f keys/s  %s\n", r.operation.c_str(), r.form.c_str(),
                r.keys_per_s, r.keys_per_s >= 300000 ? "met" : "NOT met");
  }
  if (!o.csv.empty()) {
    WriteCsv(o.csv, results, o.key_size);
    std::printf("CSV written to %s\n", o.csv.c_str());
  }
  if (o.cleanup) {
    int64_t removed = (*conns[0])->RemoveAll(true);
    if (removed < 0) Die("final RemoveAll(true) returned %s", CodeText(removed).c_str());
    // Leaves no segment behind on a master that keeps running (it would otherwise stay
    // until the master notices the missing heartbeats).
    int32_t rc = (*conns[0])->UnmountSegment(daemon_id, segment_id);
    if (rc != 0) Die("UnmountSegment returned %s", CodeText(rc).c_str());
  }
  conns.clear();
  daemon.reset();
  StopSpawnedMaster();
  return 0;
}
