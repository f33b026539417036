// What the OpLog suites (oplog_test, oplog_recovery_test) share: a temp directory, the
// options and payloads they write, appending and replaying whole chains, and reading log
// files by the documented format (frames, zero tails, logical sizes).
// A suite that includes it lists <filesystem> and <fstream> among its own standard headers, which
// come before tests/harness/cmocka_cpp.h: cmocka's fail() macro breaks <ios> included after it.
#ifndef MOONCAKE_TESTS_OPLOG_TEST_UTIL_H_
#define MOONCAKE_TESTS_OPLOG_TEST_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/little_endian.h"
#include "master/log/oplog.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"

namespace mooncake {
namespace oplog_test {

using Clock = std::chrono::steady_clock;
using Records = std::vector<std::pair<uint64_t, std::string>>;

inline int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

struct TempDir {
  std::string path = mooncake::testing::MakeTempDir("oplog_test.");
  ~TempDir() { mooncake::testing::RemoveTree(path); }
};

// Never empty, 20..219 bytes, different for every seq.
inline std::string Payload(uint64_t seq) {
  std::string p = "record-" + std::to_string(seq) + "-";
  p.resize(20 + seq * 37 % 200, static_cast<char>('a' + seq % 26));
  return p;
}

inline OpLogOptions Options(const std::string& dir) {
  OpLogOptions o;
  o.dir = dir;
  return o;
}

// Replays dir after after_seq with a fresh OpLog: what a restarting master sees.
inline mooncake::Result<uint64_t> RecoverAll(const OpLogOptions& options, uint64_t after_seq,
                                             Records* out) {
  OpLog log(options);
  return log.Recover(after_seq, [&](uint64_t seq, std::string_view payload) {
    out->emplace_back(seq, std::string(payload));
    return true;
  });
}

inline void AssertChain(const Records& records, uint64_t first, uint64_t last) {
  assert_int_equal(records.size(), last - first + 1);
  for (size_t i = 0; i < records.size(); ++i) {
    assert_int_equal(records[i].first, first + i);
    assert_true(records[i].second == Payload(first + i));
  }
}

// Recovers dir (no snapshot), starts after its last record and appends n records of
// Payload(seq), syncing each (so that every flush holds one record and rotation is
// predictable). Returns the last seq.
inline uint64_t AppendRecords(const OpLogOptions& options, uint64_t n,
                              bool sync_each = true) {
  OpLog log(options);
  auto last = log.Recover(0, [&](uint64_t, std::string_view) { return true; });
  assert_true(last.ok());
  assert_int_equal(log.Start(last.value()), ErrorCode::OK);
  for (uint64_t i = 1; i <= n; ++i) {
    const uint64_t seq = log.Append(Payload(last.value() + i));
    assert_int_equal(seq, last.value() + i);
    if (sync_each) assert_int_equal(log.Sync(seq), ErrorCode::OK);
  }
  assert_int_equal(log.Sync(log.last()), ErrorCode::OK);
  assert_int_equal(log.synced(), last.value() + n);
  return log.last();
}

// Names in dir ending with suffix (".log", ".cut", ".discarded"), sorted.
inline std::vector<std::string> FilesEndingWith(const std::string& dir,
                                                const std::string& suffix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline uint64_t SeqOfName(const std::string& name) { return std::stoull(name.substr(0, 20)); }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline bool AllZero(const std::string& data, size_t from) {
  return std::all_of(data.begin() + static_cast<std::ptrdiff_t>(std::min(from, data.size())),
                     data.end(), [](char c) { return c == 0; });
}

// Walks a log file by the documented format (no checksums checked): the byte offset and
// seq of every whole frame, up to a zero frame head (the preallocated tail) or the end.
// *clean: after the frames there is nothing, or nothing but zeros. *end: where the frames
// end (the logical size).
struct Frame {
  uint64_t offset;
  uint64_t seq;
};
inline std::vector<Frame> Frames(const std::string& path, bool* clean = nullptr,
                                 uint64_t* end = nullptr) {
  const std::string data = ReadFile(path);
  std::vector<Frame> frames;
  size_t pos = OpLog::kHeaderBytes;
  while (pos + 12 <= data.size()) {
    const char* p = data.data() + pos;
    const uint64_t length = mooncake::GetLittleEndian(&p, 4);
    const uint64_t seq = mooncake::GetLittleEndian(&p, 8);
    if (length == 0 && seq == 0) break;  // a zero head: the tail
    if (pos + OpLog::kFrameOverhead + length > data.size()) break;
    frames.push_back({pos, seq});
    pos += OpLog::kFrameOverhead + length;
  }
  if (clean != nullptr) *clean = AllZero(data, pos);
  if (end != nullptr) *end = pos;
  return frames;
}

inline uint64_t LogicalSize(const std::string& path) {
  uint64_t end = 0;
  Frames(path, nullptr, &end);
  return end;
}

}  // namespace oplog_test
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_OPLOG_TEST_UTIL_H_
