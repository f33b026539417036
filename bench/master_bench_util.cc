#include "bench/master_bench_util.h"

#include "common/base/tenant_key.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/base/crc32c.h"
#include "common/base/error_code.h"

namespace mooncake {
namespace bench {

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

// ---- fatal errors ----------------------------------------------------------------------

namespace {

const char* g_program = "bench";
std::mutex g_die_mu;
std::mutex g_hooks_mu;
std::vector<std::function<void()>> g_die_hooks;

}  // namespace

void SetProgramName(const char* name) { g_program = name; }

void AtDie(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  g_die_hooks.push_back(std::move(hook));
}

void Die(const char* format, ...) {
  g_die_mu.lock();  // never released: the first failure is the one reported
  std::fflush(stdout);
  std::fprintf(stderr, "\n%s: FATAL: ", g_program);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  // A hook that itself dies would deadlock on g_die_mu; hooks only clean up.
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(g_hooks_mu);
    hooks = g_die_hooks;
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
  std::fflush(stderr);
  _exit(1);
}

std::string CodeText(int64_t code) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%" PRId64 " (%s: %s)", code,
                ErrorName(static_cast<int32_t>(code)), ErrorText(static_cast<int32_t>(code)));
  return buf;
}

std::string Short(const std::string& key) {
  return key.size() <= 24 ? key : key.substr(0, 24) + "...";
}

namespace {

// The first executable named name in $PATH; empty when there is none.
std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/" + name;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

void PlotCsv(const std::string& script, const std::string& csv, const std::string& png) {
  if (png.empty()) return;
  std::string gnuplot = FindInPath("gnuplot");
  if (gnuplot.empty()) {
    std::printf("gnuplot is not installed: no plot\n");
    return;
  }
  testing::ChildProcess plot;
  std::string vars = "csv='" + csv + "'; png='" + png + "'";
  if (!plot.Start({gnuplot, "-e", vars, script}, "/dev/stderr")) {
    Die("cannot start %s", gnuplot.c_str());
  }
  int status = plot.Wait(60000);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    Die("gnuplot %s failed (status 0x%x)", script.c_str(), status);
  }
  std::printf("plot written to %s\n", png.c_str());
}

// ---- keys ------------------------------------------------------------------------------

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string KeyMaker::Make(uint64_t set, uint64_t index) const {
  static const char kHex[] = "0123456789abcdef";
  std::string key(size_, '0');
  uint64_t h = Mix(base_ + (set << 40) + index);
  for (size_t i = 0; i < size_; ++i) {
    if (i > 0 && i % 16 == 0) h = Mix(h + i);
    key[i] = kHex[(h >> (60 - 4 * (i % 16))) & 15];
  }
  return tenant_key::Encode(tenant_, key);
}

int64_t ChecksumOf(const std::string& key) { return Crc32c(key.data(), key.size()); }

// ---- connections and processes ---------------------------------------------------------

namespace {
std::string g_cluster_key_file;
}  // namespace

void SetClusterKeyFile(const std::string& path) { g_cluster_key_file = path; }

Conn::Conn(const std::string& host, int port) {
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
  std::string error;
  if (!g_cluster_key_file.empty() &&
      !testing::AuthenticateMasterClient(client_.get(), g_cluster_key_file, &error)) {
    Die("the master at %s:%d and this benchmark do not share a cluster key (%s): %s",
        host.c_str(), port, g_cluster_key_file.c_str(), error.c_str());
  }
}

Conn::~Conn() {
  try {
    transport_->close();
  } catch (...) {
  }
}

std::vector<std::unique_ptr<Conn>> Connect(const std::string& host, int port, int64_t n) {
  std::vector<std::unique_ptr<Conn>> conns;
  for (int64_t t = 0; t < n; ++t) conns.push_back(std::make_unique<Conn>(host, port));
  return conns;
}

rpc::MasterStats Stats(Conn& conn) {
  rpc::MasterStats stats;
  try {
    conn->GetStats(stats);
  } catch (const std::exception& e) {
    Die("GetStats failed: %s", e.what());
  }
  return stats;
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

std::vector<std::string> SplitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

double ProcessCpuSeconds(const testing::ChildProcess& process) {
  if (!process.running()) return -1;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(process.pid()));
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

FakeDaemon::FakeDaemon(const std::string& host, int port, int64_t daemon_id, int64_t segment_id,
                       uint64_t segment_size, int64_t lent_segments)
    : host_(host), port_(port), daemon_id_(daemon_id) {
  Conn conn(host, port);
  std::string name = "127.0.0.1:" + std::to_string(20000 + daemon_id % 40000);
  int32_t rc = conn->RegisterDaemon(daemon_id, name);
  if (rc != 0) Die("RegisterDaemon returned %s", CodeText(rc).c_str());
  rpc::SegmentInfo segment;
  segment.segment_id = segment_id;
  segment.name = name;
  segment.base = static_cast<int64_t>(1ULL << 40);
  segment.size = static_cast<int64_t>(segment_size);
  segment.daemon_id = daemon_id;
  rpc::TransportEndpoint endpoint;
  endpoint.protocol = "tcp";
  endpoint.address = name;
  segment.endpoints.push_back(endpoint);
  rc = conn->MountSegment(segment);
  if (rc != 0) Die("MountSegment returned %s", CodeText(rc).c_str());
  for (int64_t i = 1; i <= lent_segments; ++i) {
    segment.segment_id = segment_id + i;
    segment.base = static_cast<int64_t>((1ULL << 40) * static_cast<uint64_t>(i + 1));
    segment.lent_by_client = true;
    rc = conn->MountSegment(segment);
    if (rc != 0) Die("MountSegment (lent) returned %s", CodeText(rc).c_str());
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

FakeDaemon::~FakeDaemon() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  heartbeat_.join();
}

void FakeDaemon::HeartbeatLoop() {
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

// ---- timed phases ----------------------------------------------------------------------

void Recorder::DieRpcFailed(const std::exception& e) const {
  Die("%s: RPC failed (is the master still up?): %s", phase_.c_str(), e.what());
}

double Percentile(std::vector<int64_t>* v, double q) {
  if (v->empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v->size())));
  rank = std::min(v->size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v->begin(), v->begin() + static_cast<ptrdiff_t>(rank), v->end());
  return static_cast<double>((*v)[rank]) / 1000.0;
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::pair<int64_t, int64_t> Share(int64_t count, size_t t, size_t n) {
  int64_t begin = count * static_cast<int64_t>(t) / static_cast<int64_t>(n);
  int64_t end = count * static_cast<int64_t>(t + 1) / static_cast<int64_t>(n);
  return {begin, end};
}

PhaseResult RunPhase(const std::string& operation, const std::string& form, int64_t total_keys,
                     std::vector<std::unique_ptr<Conn>>& conns, const Body& body,
                     const testing::ChildProcess& master) {
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
  double master_cpu0 = ProcessCpuSeconds(master);
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
  double master_cpu1 = ProcessCpuSeconds(master);
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

// ---- result checks ---------------------------------------------------------------------

void CheckPutStart(const rpc::PutStartResult& r, const std::string& key, const char* call) {
  if (r.code != 0) Die("%s('%s') returned %s", call, Short(key).c_str(), CodeText(r.code).c_str());
  if (r.replicas.size() != 1) {
    Die("%s('%s') returned %zu replicas, 1 expected", call, Short(key).c_str(), r.replicas.size());
  }
}

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

std::string Format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

void Table::Print(const std::vector<std::string>& cells) const {
  if (cells.size() != columns_.size()) {
    Die("table row of %zu cells for %zu columns", cells.size(), columns_.size());
  }
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += ' ';
    size_t width = static_cast<size_t>(columns_[i].width);
    std::string pad(cells[i].size() < width ? width - cells[i].size() : 0, ' ');
    line += columns_[i].left ? cells[i] + pad : pad + cells[i];
  }
  std::printf("%s\n", line.c_str());
}

void Table::PrintHeader() const {
  std::vector<std::string> titles;
  for (const Column& c : columns_) titles.push_back(c.title);
  Print(titles);
}

void Table::PrintRow(const std::vector<std::string>& cells) const {
  Print(cells);
  std::fflush(stdout);
}

CsvFile::CsvFile(const std::string& path, const std::vector<std::string>& header) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) Die("cannot write --csv %s: %s", path.c_str(), std::strerror(errno));
  Row(header);
}

CsvFile::~CsvFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void CsvFile::Row(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += ',';
    line += cells[i];
  }
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    Die("cannot write --csv %s: %s", path_.c_str(), std::strerror(errno));
  }
}

void CsvFile::Close() {
  FILE* f = file_;
  file_ = nullptr;
  if (f != nullptr && std::fclose(f) != 0) {
    Die("cannot write --csv %s: %s", path_.c_str(), std::strerror(errno));
  }
}

}  // namespace bench
}  // namespace mooncake
