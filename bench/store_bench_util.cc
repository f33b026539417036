#include "bench/store_bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "common/base/flags.h"
#include "common/base/spin_wait.h"
#include "common/base/units.h"

namespace mooncake {
namespace store_bench {

void Die(const char* what, int64_t code) {
  std::fprintf(stderr, "store_bench: FATAL: %s returned %" PRId64 " (%s)\n", what, code,
               mooncake_store_strerror(static_cast<int>(code)));
  if (code == MOONCAKE_STORE_OBJECT_NOT_FOUND || code == MOONCAKE_STORE_NO_AVAILABLE_HANDLE) {
    std::fprintf(stderr,
                 "  the segment is too small: removed objects keep their space until their read "
                 "leases end,\n  so the master evicted this phase's objects. Use a bigger "
                 "segment, a shorter lease or --bytes_per_phase.\n");
  }
  std::exit(1);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

std::string Key(int run, uint64_t size, int thread, int64_t i) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "bench-r%d-s%" PRIu64 "-t%d-%" PRId64, run, size, thread, i);
  return buf;
}

void Stamp(char* buf, uint64_t size, int64_t i) {
  std::memcpy(buf, &i, std::min<uint64_t>(sizeof(i), size));
  if (size > 16) std::memcpy(buf + size - sizeof(i), &i, sizeof(i));
}

bool StampMatches(const char* buf, uint64_t size, int64_t i) {
  int64_t head = 0, tail = 0;
  std::memcpy(&head, buf, std::min<uint64_t>(sizeof(head), size));
  if (size > 16) std::memcpy(&tail, buf + size - sizeof(tail), sizeof(tail));
  int64_t want_head = 0;
  std::memcpy(&want_head, &i, std::min<uint64_t>(sizeof(i), size));
  return head == want_head && (size <= 16 || tail == i);
}

std::vector<double> RunThreads(int threads, const ThreadBody& body, double* seconds) {
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::function<void()> wait_for_start = [&] {
    ready.fetch_add(1);
    while (!go.load()) std::this_thread::yield();
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] { body(t, wait_for_start, &latencies[t]); });
  }
  while (ready.load() < threads) std::this_thread::yield();
  auto start = Clock::now();
  go.store(true);
  for (auto& w : workers) w.join();
  *seconds = Seconds(start, Clock::now());
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  return all;
}

std::vector<double> RunPhase(const Phase& p, Op op, double* seconds) {
  if (op == Op::kExist && p.batch == 1) Die("exist phases are batched", -1);
  ThreadBody body = [&](int t, const std::function<void()>& ready, std::vector<double>* latencies) {
    std::vector<char*> bufs(p.batch);
    for (auto& b : bufs) {
      b = p.pool ? static_cast<char*>(mooncake_store_alloc(p.store, p.size))
                 : static_cast<char*>(std::aligned_alloc(64, (p.size + 63) / 64 * 64));
      if (b == nullptr) Die("alloc (pool too small for this phase)", -1);
      std::memset(b, 0x5a, p.size);
    }
    std::vector<std::string> keys(p.batch);
    std::vector<const char*> key_ptrs(p.batch);
    std::vector<void*> buf_ptrs(bufs.begin(), bufs.end());
    std::vector<size_t> sizes(p.batch, p.size);
    std::vector<int> int_results(p.batch);
    std::vector<int64_t> get_results(p.batch);
    latencies->reserve(p.ops_per_thread / p.batch + 1);
    ready();
    for (int64_t i = 0; i < p.ops_per_thread; i += p.batch) {
      for (int j = 0; j < p.batch; ++j) {
        keys[j] = Key(p, t, i + j);
        key_ptrs[j] = keys[j].c_str();
        if (op == Op::kPut) Stamp(bufs[j], p.size, i + j);
      }
      auto start = Clock::now();
      if (p.batch == 1 && op == Op::kPut) {
        int rc = mooncake_store_put_from(p.store, key_ptrs[0], bufs[0], p.size, p.config);
        if (rc != 0) Die("put_from", rc);
      } else if (p.batch == 1) {
        int64_t rc = mooncake_store_get_into(p.store, key_ptrs[0], bufs[0], p.size);
        if (rc != static_cast<int64_t>(p.size)) Die("get_into", rc);
      } else if (op == Op::kPut) {
        int rc = mooncake_store_batch_put_from(p.store, key_ptrs.data(), buf_ptrs.data(),
                                               sizes.data(), p.batch, p.config, int_results.data());
        if (rc != 0) Die("batch_put_from", rc);
        for (int r : int_results) {
          if (r != 0) Die("batch_put_from entry", r);
        }
      } else if (op == Op::kExist) {
        int rc =
            mooncake_store_batch_is_exist(p.store, key_ptrs.data(), p.batch, int_results.data());
        if (rc != 0) Die("batch_is_exist", rc);
        for (int r : int_results) {
          if (r != 1) Die("batch_is_exist entry (1: present)", r);
        }
      } else {
        int rc = mooncake_store_batch_get_into(p.store, key_ptrs.data(), buf_ptrs.data(),
                                               sizes.data(), p.batch, get_results.data());
        if (rc != 0) Die("batch_get_into", rc);
        for (int64_t r : get_results) {
          if (r != static_cast<int64_t>(p.size)) Die("batch_get_into entry", r);
        }
      }
      latencies->push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (op == Op::kGet) {
        for (int j = 0; j < p.batch; ++j) {
          if (!StampMatches(bufs[j], p.size, i + j)) Die("get_into returned wrong bytes", -1);
        }
      }
    }
    for (char* b : bufs) {
      if (p.pool) {
        mooncake_store_free(p.store, b);
      } else {
        std::free(b);
      }
    }
  };
  return RunThreads(p.threads, body, seconds);
}

namespace {

// A buffer of `bytes` (rounded up to a cache line), every page touched.
char* TouchedBuffer(uint64_t bytes, int fill) {
  char* b = static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  std::memset(b, fill, bytes);
  return b;
}

// This thread's CPU time in seconds: a copy loop's own cost, without the time it spent
// preempted (with ten runnable threads on two vCPUs, wall time measured the scheduler).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// GB/s of `pass` (which copies `bytes`), the median of 5 passes timed in thread CPU time:
// a pass is tens of milliseconds, and one can land in another program's burst of memory
// traffic.
double CopyGbps(uint64_t bytes, const std::function<void()>& pass) {
  std::vector<double> figures;
  for (int i = 0; i < 5; ++i) {
    double start = ThreadCpuSeconds();
    pass();
    figures.push_back(static_cast<double>(bytes) / (ThreadCpuSeconds() - start) / 1e9);
  }
  return Median(figures);
}

}  // namespace

double MemcpyColdToColdGbps(uint64_t size, uint64_t total_bytes) {
  uint64_t span = std::max<uint64_t>(size, std::min<uint64_t>(total_bytes, 256ull << 20));
  char* src = TouchedBuffer(span, 1);
  char* dst = TouchedBuffer(span, 2);
  uint64_t ops = std::max<uint64_t>(1, total_bytes / size), slots = span / size;
  double gbps = CopyGbps(ops * size, [&] {
    for (uint64_t i = 0; i < ops; ++i) {
      uint64_t off = (i % slots) * size;
      std::memcpy(dst + off, src + off, size);
      asm volatile("" : : "r"(dst) : "memory");  // keep the copy
    }
  });
  std::free(src);
  std::free(dst);
  return gbps;
}

double MemcpyColdToWarmGbps(uint64_t size, uint64_t total_bytes) {
  // As much as a phase of the store moves by default (--bytes_per_phase): the source is as
  // cold as the segment a get reads from was (this VM reports a 480 MiB shared L3, so
  // neither is cold in DRAM terms; both are far from the core's own 2 MiB L2).
  uint64_t span = std::max<uint64_t>(4 * size, 256ull << 20);
  char* src = TouchedBuffer(span, 1);
  char* dst = TouchedBuffer(size, 2);
  uint64_t slots = span / size, ops = std::max<uint64_t>(slots, total_bytes / size);
  for (int i = 0; i < 4; ++i) std::memcpy(dst, src, size);  // the destination warm
  double gbps = CopyGbps(ops * size, [&] {
    for (uint64_t i = 0; i < ops; ++i) {
      std::memcpy(dst, src + (i % slots) * size, size);
      asm volatile("" : : "r"(dst) : "memory");
    }
  });
  std::free(src);
  std::free(dst);
  return gbps;
}

namespace {

// A /proc/meminfo count ("HugePages_Free:    12"); 0 when absent.
uint64_t MeminfoCount(const std::string& meminfo, const char* field) {
  size_t at = meminfo.find(std::string("\n") + field + ":");
  return at == std::string::npos ? 0 : std::strtoull(meminfo.c_str() + at + std::strlen(field) + 2,
                                                     nullptr, 10);
}

std::string ReadSmallFile(const char* path) {
  std::string text;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

}  // namespace

namespace {

uint64_t HugePagesInUse(const std::string& meminfo) {
  return MeminfoCount(meminfo, "HugePages_Total") - MeminfoCount(meminfo, "HugePages_Free") +
         MeminfoCount(meminfo, "HugePages_Rsvd");
}

}  // namespace

uint64_t HugePagesInUse() { return HugePagesInUse("\n" + ReadSmallFile("/proc/meminfo")); }

std::string SharedPagesSummary() {
  std::string meminfo = "\n" + ReadSmallFile("/proc/meminfo");
  uint64_t total = MeminfoCount(meminfo, "HugePages_Total");
  uint64_t in_use = HugePagesInUse(meminfo);
  uint64_t page_kb = MeminfoCount(meminfo, "Hugepagesize");
  std::string thp = ReadSmallFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  size_t open = thp.find('['), close = thp.find(']');
  thp = open != std::string::npos && close > open ? thp.substr(open + 1, close - open - 1)
                                                  : "unknown";
  char text[256];
  std::snprintf(text, sizeof(text),
                "%" PRIu64 " of %" PRIu64 " reserved %" PRIu64 " KiB huge pages in use "
                "(%s); shmem THP: %s",
                in_use, total, page_kb,
                total == 0 ? "none reserved: segments and pools on 4 KiB pages unless shmem "
                             "THP allows; see docs/operations.md \"Huge pages\""
                           : "the segment and the pool take them first",
                thp.c_str());
  return text;
}

double UnixRoundTripUs() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  std::thread echo([fd = sv[1]] {
    char msg[64];
    for (;;) {
      ssize_t n = read(fd, msg, sizeof(msg));
      if (n <= 0 || write(fd, msg, n) != n) break;
    }
  });
  std::vector<double> rtts;
  char msg[48] = {0}, back[48];
  for (int i = 0; i < 20000; ++i) {
    auto start = Clock::now();
    if (write(sv[0], msg, sizeof(msg)) != sizeof(msg)) break;
    size_t got = 0;
    while (got < sizeof(back)) {
      ssize_t n = read(sv[0], back + got, sizeof(back) - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  close(sv[0]);
  echo.join();
  close(sv[1]);
  return Percentile(rtts, 0.5);
}

namespace {

// A listening socket on 127.0.0.1 at a free port, *addr its address; -1 on failure.
int ListenOnLoopback(sockaddr_in* addr) {
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*addr);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener >= 0 &&
      (bind(listener, reinterpret_cast<sockaddr*>(addr), sizeof(*addr)) != 0 ||
       listen(listener, 1) != 0 ||
       getsockname(listener, reinterpret_cast<sockaddr*>(addr), &len) != 0)) {
    close(listener);
    return -1;
  }
  return listener;
}

constexpr size_t kHopMessage = 48;

// Waits as our processes do (spin, then block), then reads one whole message. Only
// async-signal-safe calls: it runs in children forked from a threaded process.
bool ReadMessage(int fd, char* buf) {
  SpinUntilReadable(fd, kDefaultSpinMicros * 1000);
  size_t got = 0;
  while (got < kHopMessage) {
    ssize_t n = read(fd, buf + got, kHopMessage - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

bool WriteMessage(int fd, const char* buf) {
  return write(fd, buf, kHopMessage) == static_cast<ssize_t>(kHopMessage);
}

// The master's stand-in: echoes every message on the first connection.
[[noreturn]] void RunEcho(int listener) {
  int fd = accept(listener, nullptr, nullptr);
  char buf[kHopMessage];
  while (fd >= 0 && ReadMessage(fd, buf) && WriteMessage(fd, buf)) {
  }
  _exit(0);
}

// The daemon's stand-in: per message from the client, buf[0] round trips to the echo.
[[noreturn]] void RunRelay(int client, const sockaddr_in& echo) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&echo), sizeof(echo)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    _exit(1);
  }
  char buf[kHopMessage];
  while (ReadMessage(client, buf)) {
    for (int h = 0; h < buf[0]; ++h) {
      if (!WriteMessage(fd, buf) || !ReadMessage(fd, buf)) _exit(1);
    }
    if (!WriteMessage(client, buf)) _exit(1);
  }
  _exit(0);
}

}  // namespace

bool MeasureHopFloor(HopFloor* floor) {
  sockaddr_in addr;
  int listener = ListenOnLoopback(&addr);
  int sv[2] = {-1, -1};
  if (listener < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    if (listener >= 0) close(listener);
    return false;
  }
  // Each child closes the parent's end of the Unix socket, so that the relay reads EOF
  // when the parent closes it.
  pid_t echo = fork();
  if (echo == 0) {
    close(sv[0]);
    close(sv[1]);
    RunEcho(listener);
  }
  pid_t relay = echo < 0 ? -1 : fork();
  if (relay == 0) {
    close(sv[0]);
    close(listener);
    RunRelay(sv[1], addr);
  }
  close(listener);
  close(sv[1]);
  bool ok = echo > 0 && relay > 0;
  char buf[kHopMessage] = {0};
  for (int hops = 0; ok && hops < 3; ++hops) {
    std::vector<double> rtts;
    for (int i = 0; ok && i < 10000; ++i) {
      buf[0] = static_cast<char>(hops);
      auto start = Clock::now();
      ok = WriteMessage(sv[0], buf) && ReadMessage(sv[0], buf);
      rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    floor->us[hops] = Percentile(rtts, 0.5);
  }
  close(sv[0]);  // the relay reads EOF and exits, and with it the echo's connection
  for (pid_t pid : {relay, echo}) {
    if (pid <= 0) continue;
    if (!ok) kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return ok;
}

double LoopbackTcpGbps(double seconds) {
  sockaddr_in addr;
  int listener = ListenOnLoopback(&addr);
  int tx = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0 || connect(tx, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Die("loopback TCP set-up", -1);
  }
  int rx = accept(listener, nullptr, nullptr);
  uint64_t received = 0;
  std::thread receiver([&] {
    std::vector<char> buf(1 << 20);
    for (;;) {
      ssize_t n = read(rx, buf.data(), buf.size());
      if (n <= 0) break;
      received += static_cast<uint64_t>(n);
    }
  });
  std::vector<char> buf(1 << 20, 1);
  auto start = Clock::now();
  while (Seconds(start, Clock::now()) < seconds) {
    for (size_t off = 0; off < buf.size();) {
      ssize_t n = write(tx, buf.data() + off, buf.size() - off);
      if (n <= 0) Die("loopback TCP write", -1);
      off += static_cast<size_t>(n);
    }
  }
  shutdown(tx, SHUT_WR);
  receiver.join();
  double s = Seconds(start, Clock::now());
  close(tx);
  close(rx);
  close(listener);
  return static_cast<double>(received) / s / 1e9;
}

void LeasedSpace::WaitForRoom(uint64_t bytes) {
  for (;;) {
    auto now = Clock::now();
    while (!held_.empty() && held_.front().first <= now) {
      total_ -= held_.front().second;
      held_.pop_front();
    }
    if (held_.empty() || total_ + bytes <= budget_) return;
    std::this_thread::sleep_until(held_.front().first);
  }
}

void LeasedSpace::Removed(uint64_t bytes) {
  held_.emplace_back(Clock::now() + lease_ + std::chrono::milliseconds(200), bytes);
  total_ += bytes;
}

std::vector<uint64_t> ParseSizes(const std::string& text) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint64_t v = 0;
    if (!mooncake::ParseSize(item, &v) || v == 0) {
      std::fprintf(stderr, "store_bench: bad size '%s' in --sizes\n", item.c_str());
      std::exit(2);
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void PrintHeader(const char* baseline, const char* ratio, FILE* csv) {
  std::printf("%-4s %-6s %-9s %9s %3s %7s %10s %8s %9s %9s %8s %7s\n", "op", "buffer", "form",
              "size", "thr", "ops", "ops/s", "GB/s", "p50_us", "p99_us", baseline, ratio);
  if (csv) {
    std::fprintf(csv,
                 "op,buffer,form,size,threads,ops,seconds,ops_per_s,gb_per_s,p50_us,p99_us,"
                 "%s_gb_per_s,ratio_to_%s\n",
                 baseline, baseline);
  }
}

void Print(const Row& r, FILE* csv) {
  double ratio = r.baseline_gbps > 0 ? r.gbps() / r.baseline_gbps : 0;
  std::printf("%-4s %-6s %-9s %9s %3d %7" PRId64 " %10.0f %8.2f %9.1f %9.1f %8.2f %6.0f%%\n",
              r.op.c_str(), r.buffer.c_str(), r.form.c_str(), mooncake::FormatSize(r.size).c_str(),
              r.threads, r.ops, r.ops_per_s(), r.gbps(), r.p50_us, r.p99_us, r.baseline_gbps,
              ratio * 100);
  std::fflush(stdout);
  if (csv) {
    std::fprintf(csv, "%s,%s,%s,%" PRIu64 ",%d,%" PRId64 ",%.3f,%.0f,%.4f,%.2f,%.2f,%.4f,%.4f\n",
                 r.op.c_str(), r.buffer.c_str(), r.form.c_str(), r.size, r.threads, r.ops,
                 r.seconds, r.ops_per_s(), r.gbps(), r.p50_us, r.p99_us, r.baseline_gbps, ratio);
  }
}

std::vector<std::string> SplitArgs(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while ((start = text.find_first_not_of(' ', start)) != std::string::npos) {
    size_t end = text.find(' ', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = end;
  }
  return out;
}

int64_t PhaseOps(const Options& o, uint64_t size, int64_t unit) {
  int64_t base = std::max<int64_t>(
      32, std::min<int64_t>(o.max_ops, static_cast<int64_t>(o.bytes_per_phase / size)));
  return (base + unit - 1) / unit * unit;
}

}  // namespace store_bench
}  // namespace mooncake
