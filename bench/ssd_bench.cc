// ssd_bench: the SSD tier's storage engine (daemon/ssd_store/ssd_store.h) against the disk it runs
// on. For 1 MiB and 4 MiB objects and 1 and 4 threads: offload writes (SsdStore::Write,
// what the daemon's offloader calls) and SSD reads (SsdStore::Read of whole objects into
// page-aligned memory, checked), in GB/s, each beside fio's raw O_DIRECT sequential write
// and read of the same directory with the same block size and threads, measured in the
// same run; the ratio is the figure (aim: >= 0.7 of fio, bench/README.md).
//
// --dir should be on the filesystem the SSD tier will use (the default is under /var/tmp,
// which is disk-backed on most hosts; tmpfs would measure memory and fall back to
// buffered I/O). Progress goes to stderr, the table to stdout, the rows to --csv.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/base/flags.h"
#include "common/base/logging.h"
#include "daemon/ssd_store/ssd_io.h"
#include "daemon/ssd_store/ssd_store.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string dir;
  std::string fio = "fio";
  std::string csv = "ssd_bench.csv";
  std::string persist_mode = "relaxed";
  uint64_t bytes = 1ull << 30;  // per phase, over all threads
  int64_t batch = 4;            // objects per Write
  int64_t fio_iodepth = 1;
  int64_t rounds = 3;
};

// Runs a command, returns its stdout (empty when it failed).
std::string Capture(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  return pclose(p) == 0 ? out : std::string();
}

// fio's JSON: the first job's (group_reporting: the sum's) "bw_bytes" of its section "read"
// or "write" (`"write" : {`, not the option's value `"rw" : "write"`). A small search rather
// than a JSON library: fio writes each section once per job.
double FioBytesPerSecond(const std::string& json, const char* section) {
  const size_t jobs = json.find("\"jobs\"");
  if (jobs == std::string::npos) return 0;
  const size_t at = json.find(std::string("\"") + section + "\" : {", jobs);
  if (at == std::string::npos) return 0;
  const size_t bw = json.find("\"bw_bytes\"", at);
  if (bw == std::string::npos) return 0;
  const size_t colon = json.find(':', bw);
  return colon == std::string::npos ? 0 : std::strtod(json.c_str() + colon + 1, nullptr);
}

// fio's sequential O_DIRECT rw ("write" or "read") of `bytes` in blocks of `block`, by
// `threads` jobs of one file each, through io_uring. GB/s, 0 when fio failed.
double Fio(const Options& o, const std::string& dir, const char* rw, uint64_t block,
           int threads) {
  const std::string command =
      o.fio + " --name=ssd_bench --directory=" + dir + " --rw=" + rw +
      " --bs=" + std::to_string(block) + " --size=" + std::to_string(o.bytes / threads) +
      " --numjobs=" + std::to_string(threads) + " --ioengine=io_uring --iodepth=" +
      std::to_string(o.fio_iodepth) +
      " --direct=1 --end_fsync=0 --group_reporting --output-format=json 2>/dev/null";
  return FioBytesPerSecond(Capture(command), rw) / 1e9;
}

struct Phase {
  double write_gbps = 0;
  double read_gbps = 0;
  uint64_t failures = 0;
  bool direct = false;
};

Phase RunStore(const Options& o, const std::string& dir, uint64_t size, int threads) {
  Phase phase;
  mooncake::SsdOptions so;
  so.path = dir;
  so.capacity = o.bytes * 2 + (256ull << 20);
  so.bucket_size = 64ull << 20;
  so.high_watermark = 1.0;
  mooncake::ParseSsdPersistMode(o.persist_mode, &so.persist_mode);
  std::unique_ptr<mooncake::SsdStore> store;
  std::string error;
  if (mooncake::SsdStore::Open(so, [](const std::vector<std::string>&) { return true; }, &store,
                               &error) != mooncake::ErrorCode::OK) {
    std::fprintf(stderr, "ssd_bench: Open %s: %s\n", dir.c_str(), error.c_str());
    std::exit(1);
  }
  phase.direct = store->Stats().direct_io;
  const uint64_t per_thread = o.bytes / threads / size;
  std::atomic<uint64_t> failures{0};
  // Each thread's source: batch values of random bytes, page-aligned like a segment's.
  auto run = [&](bool write) {
    std::vector<std::thread> workers;
    const Clock::time_point t0 = Clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const size_t batch = static_cast<size_t>(std::max<int64_t>(1, o.batch));
        mooncake::AlignedBuffer buf(size * batch);
        for (size_t i = 0; i < buf.size(); ++i) buf.data()[i] = static_cast<char>(i * 131 + t);
        for (uint64_t i = 0; i < per_thread; i += batch) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(batch, per_thread - i));
          if (write) {
            std::vector<mooncake::SsdStore::WriteItem> items(n);
            for (size_t k = 0; k < n; ++k) {
              items[k].object.key = "t" + std::to_string(t) + "-" + std::to_string(i + k);
              items[k].object.size = size;
              items[k].data = buf.data() + k * size;
            }
            store->Write(&items);
            for (const auto& item : items) failures += item.result != mooncake::ErrorCode::OK;
          } else {
            for (size_t k = 0; k < n; ++k) {
              const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i + k);
              failures += store->Read(key, 0, buf.data(), size) != mooncake::ErrorCode::OK;
            }
          }
        }
      });
    }
    for (auto& w : workers) w.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return static_cast<double>(per_thread * threads * size) / s / 1e9;
  };
  phase.write_gbps = run(true);
  phase.read_gbps = run(false);
  phase.failures = failures.load();
  store.reset();
  return phase;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("ssd_bench",
                          "SsdStore offload writes and reads against fio's raw O_DIRECT "
                          "sequential I/O of the same directory.");
  flags.AddString("dir", &o.dir, "directory to measure in (default: a new one under /var/tmp)");
  flags.AddString("fio", &o.fio, "the fio program");
  flags.AddString("csv", &o.csv, "CSV of the rows");
  flags.AddString("persist_mode", &o.persist_mode, "the store's mode: disabled|relaxed|strict");
  flags.AddSize("bytes", &o.bytes, "bytes written (then read) per phase, all threads together");
  flags.AddInt("batch", &o.batch, "objects per SsdStore::Write");
  flags.AddInt("fio_iodepth", &o.fio_iodepth,
               "fio's --iodepth per job (1: one request at a time per thread, as a caller of "
               "SsdStore makes them)");
  flags.AddInt("rounds", &o.rounds, "rounds per case (store, then fio); the best of each counts");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  mooncake::SetLogLevel(mooncake::LogLevel::kWarning);
  mooncake::SsdPersistMode mode;
  if (!mooncake::ParseSsdPersistMode(o.persist_mode, &mode)) {
    std::fprintf(stderr, "ssd_bench: --persist_mode must be disabled, relaxed or strict\n");
    return 2;
  }
  bool own_dir = false;
  if (o.dir.empty()) {
    char tmpl[] = "/var/tmp/ssd_bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    o.dir = tmpl;
    own_dir = true;
  }
  if (Capture(o.fio + " --version").empty()) {
    std::fprintf(stderr, "ssd_bench: %s not found (scripts/install-deps.sh installs fio)\n",
                 o.fio.c_str());
    return 1;
  }
  FILE* csv = std::fopen(o.csv.c_str(), "w");
  if (csv == nullptr) {
    std::perror(o.csv.c_str());
    return 1;
  }
  std::fprintf(csv, "op,object_bytes,threads,store_gb_per_s,fio_gb_per_s,ratio,direct_io\n");
  std::printf("dir %s, %llu MiB per phase, %s mode, batches of %lld, best of %lld rounds; "
              "fio: io_uring, iodepth %lld, O_DIRECT\n",
              o.dir.c_str(), (unsigned long long)(o.bytes >> 20), o.persist_mode.c_str(),
              (long long)o.batch, (long long)o.rounds, (long long)o.fio_iodepth);
  std::printf("%-6s %8s %7s %10s %10s %7s\n", "op", "object", "threads", "store_GB/s",
              "fio_GB/s", "ratio");
  bool failed = false;
  for (uint64_t size : {1ull << 20, 4ull << 20}) {
    for (int threads : {1, 4}) {
      const std::string store_dir = o.dir + "/store";
      const std::string fio_dir = o.dir + "/fio";
      fs::remove_all(store_dir);
      fs::remove_all(fio_dir);
      // Rounds alternate the store and fio, and each keeps its best: a shared machine
      // slows some rounds down, and either side should be measured at its best.
      Phase store;
      double fio_write = 0, fio_read = 0;
      for (int64_t round = 0; round < std::max<int64_t>(1, o.rounds); ++round) {
        std::fprintf(stderr, "ssd_bench: %llu MiB objects, %d threads, round %lld: store...\n",
                     (unsigned long long)(size >> 20), threads, (long long)round + 1);
        const Phase p = RunStore(o, store_dir, size, threads);
        fs::remove_all(store_dir);
        store.write_gbps = std::max(store.write_gbps, p.write_gbps);
        store.read_gbps = std::max(store.read_gbps, p.read_gbps);
        store.failures += p.failures;
        store.direct = p.direct;
        std::fprintf(stderr, "ssd_bench: %llu MiB objects, %d threads, round %lld: fio...\n",
                     (unsigned long long)(size >> 20), threads, (long long)round + 1);
        fs::create_directories(fio_dir);
        fio_write = std::max(fio_write, Fio(o, fio_dir, "write", size, threads));
        fio_read = std::max(fio_read, Fio(o, fio_dir, "read", size, threads));
        fs::remove_all(fio_dir);
      }
      if (store.failures > 0) {
        std::fprintf(stderr, "ssd_bench: %llu operations failed\n",
                     (unsigned long long)store.failures);
        failed = true;
      }
      const struct {
        const char* op;
        double mine, fio;
      } rows[] = {{"write", store.write_gbps, fio_write}, {"read", store.read_gbps, fio_read}};
      for (const auto& r : rows) {
        const double ratio = r.fio > 0 ? r.mine / r.fio : 0;
        std::printf("%-6s %6lluMiB %7d %10.2f %10.2f %7.2f%s\n", r.op,
                    (unsigned long long)(size >> 20), threads, r.mine, r.fio, ratio,
                    store.direct ? "" : "  (buffered: no O_DIRECT here)");
        std::fprintf(csv, "%s,%llu,%d,%.4f,%.4f,%.4f,%d\n", r.op, (unsigned long long)size,
                     threads, r.mine, r.fio, ratio, store.direct ? 1 : 0);
      }
      std::fflush(stdout);
    }
  }
  std::fclose(csv);
  std::printf("\nCSV written to %s\n", o.csv.c_str());
  if (own_dir) fs::remove_all(o.dir);
  return failed ? 1 : 0;
}
