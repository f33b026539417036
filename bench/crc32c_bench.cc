// crc32c_bench: CRC-32C throughput on one buffer (64 MiB by default, far larger than the
// caches), the hardware path and the portable table, next to memcpy of the same buffer
// in the same run. One thread. Each method runs passes over the buffer for --seconds; the
// best and the median pass are printed, since a shared machine slows some passes down.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "common/base/crc32c.h"
#include "common/base/flags.h"

namespace {

using Clock = std::chrono::steady_clock;

// GB/s of each pass of fn over `bytes`, for at least `seconds` (and at least 3 passes).
std::vector<double> Passes(size_t bytes, double seconds, const std::function<void()>& fn) {
  std::vector<double> gbps;
  Clock::time_point start = Clock::now();
  while (gbps.size() < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    Clock::time_point t0 = Clock::now();
    fn();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    gbps.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps;
}

void Print(const char* name, const std::vector<double>& gbps, double memcpy_best) {
  double best = gbps.back();
  std::printf("%-18s %8.2f %8.2f %8.2fx %6zu\n", name, best, gbps[gbps.size() / 2],
              best / memcpy_best, gbps.size());
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size = 64ull << 20;
  double seconds = 2;
  mooncake::FlagSet flags("crc32c_bench", "CRC-32C GB/s, hardware and portable, against memcpy.");
  flags.AddSize("size", &size, "buffer size");
  flags.AddDouble("seconds", &seconds, "time spent on each method");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);

  std::vector<uint8_t> src(size);
  std::vector<uint8_t> dst(size, 0);  // touched now, so no pass pays for page faults
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(&src[i], &v, 8);
  }
  volatile uint32_t sink = 0;  // keeps the CRC computations from being optimized away

#if defined(__x86_64__)
  bool sse42 = __builtin_cpu_supports("sse4.2");
#else
  bool sse42 = false;
#endif
  std::printf("buffer %llu bytes, one thread; Crc32c uses %s\n",
              static_cast<unsigned long long>(size), sse42 ? "SSE4.2 crc32" : "the table");
  std::vector<double> copy =
      Passes(size, seconds, [&] { std::memcpy(dst.data(), src.data(), size); });
  std::vector<double> hw =
      Passes(size, seconds, [&] { sink = mooncake::Crc32c(src.data(), size); });
  std::vector<double> sw = Passes(
      size, seconds, [&] { sink = mooncake::Crc32cExtendPortable(0, src.data(), size); });
  (void)sink;

  std::printf("%-18s %8s %8s %9s %6s\n", "method", "best", "median", "vs_memcpy", "passes");
  Print("memcpy", copy, copy.back());
  Print("Crc32c", hw, copy.back());
  Print("Crc32cPortable", sw, copy.back());
  return 0;
}
