// Tests for mooncake::OpLog: the on-disk format, replay after a snapshot's seq, restart
// continuity, rotation and dropping, point-in-time cuts (torn tail, flipped byte, gap,
// rejected record), discarding, group commit under threads, relaxed-mode flushing, and a
// disk that fills (RLIMIT_FSIZE, in a child process). Preallocation (zero tails) is on, as
// in production, unless a test says otherwise; its own tests: recovery of zero tails,
// frames torn inside them, a zero head before non-zero bytes, rotation, and
// preallocate_bytes 0 (the exact file sizes), plus a latency comparison.

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "common/little_endian.h"
#include "master/oplog.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using mooncake::ErrorCode;
using mooncake::OpLog;
using mooncake::OpLogOptions;

namespace {

using Clock = std::chrono::steady_clock;
using Records = std::vector<std::pair<uint64_t, std::string>>;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

struct TempDir {
  std::string path = mooncake::testing::MakeTempDir("oplog_test.");
  ~TempDir() { mooncake::testing::RemoveTree(path); }
};

// Never empty, 20..219 bytes, different for every seq.
std::string Payload(uint64_t seq) {
  std::string p = "record-" + std::to_string(seq) + "-";
  p.resize(20 + seq * 37 % 200, static_cast<char>('a' + seq % 26));
  return p;
}

OpLogOptions Options(const std::string& dir) {
  OpLogOptions o;
  o.dir = dir;
  return o;
}

// Replays dir after after_seq with a fresh OpLog: what a restarting master sees.
mooncake::Result<uint64_t> RecoverAll(const OpLogOptions& options, uint64_t after_seq,
                                      Records* out) {
  OpLog log(options);
  return log.Recover(after_seq, [&](uint64_t seq, std::string_view payload) {
    out->emplace_back(seq, std::string(payload));
    return true;
  });
}

void AssertChain(const Records& records, uint64_t first, uint64_t last) {
  assert_int_equal(records.size(), last - first + 1);
  for (size_t i = 0; i < records.size(); ++i) {
    assert_int_equal(records[i].first, first + i);
    assert_true(records[i].second == Payload(first + i));
  }
}

// Recovers dir (no snapshot), starts after its last record and appends n records of
// Payload(seq), syncing each (so that every flush holds one record and rotation is
// predictable). Returns the last seq.
uint64_t AppendRecords(const OpLogOptions& options, uint64_t n, bool sync_each = true) {
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
std::vector<std::string> FilesEndingWith(const std::string& dir, const std::string& suffix) {
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

uint64_t SeqOfName(const std::string& name) { return std::stoull(name.substr(0, 20)); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool AllZero(const std::string& data, size_t from) {
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
std::vector<Frame> Frames(const std::string& path, bool* clean = nullptr,
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

uint64_t LogicalSize(const std::string& path) {
  uint64_t end = 0;
  Frames(path, nullptr, &end);
  return end;
}

// Writes 60 records into files of about 1 KiB: at least three files.
std::vector<std::string> WriteSeveralFiles(const std::string& dir, uint64_t* last) {
  OpLogOptions options = Options(dir);
  options.file_bytes = 1024;
  *last = AppendRecords(options, 60);
  std::vector<std::string> files = FilesEndingWith(dir, ".log");
  assert_true(files.size() >= 3);
  return files;
}

// ---- the format ----

void test_on_disk_format(void** state) {
  (void)state;
  TempDir dir;
  {
    OpLog log(Options(dir.path));
    assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
    assert_int_equal(log.Start(0), ErrorCode::OK);
    assert_int_equal(log.Append("abc"), 1);
    assert_int_equal(log.Append(""), 2);  // an empty payload is a record too
    assert_int_equal(log.Sync(2), ErrorCode::OK);
    const mooncake::OpLogStats stats = log.stats();
    assert_int_equal(stats.files, 1);
    // The file's size on disk: one preallocation step, zeros after the two frames.
    assert_int_equal(stats.bytes, OpLogOptions().preallocate_bytes);
  }
  const std::vector<std::string> files = FilesEndingWith(dir.path, ".log");
  assert_int_equal(files.size(), 1);
  assert_string_equal(files[0].c_str(), "00000000000000000001.log");
  const std::string data = ReadFile(dir.path + "/" + files[0]);
  assert_int_equal(data.size(), OpLogOptions().preallocate_bytes);
  assert_true(AllZero(data, 24 + 16 + 3 + 16));  // the zero tail, right after the frames
  const char* p = data.data();
  assert_memory_equal(p, "MCOPLOG1", 8);
  p += 8;
  assert_int_equal(mooncake::GetLittleEndian(&p, 8), 1);  // first seq
  assert_int_equal(mooncake::GetLittleEndian(&p, 4), 1);  // format version
  assert_int_equal(mooncake::GetLittleEndian(&p, 4), mooncake::Crc32c(data.data(), 20));
  const char* frame = p;
  assert_int_equal(mooncake::GetLittleEndian(&p, 4), 3);
  assert_int_equal(mooncake::GetLittleEndian(&p, 8), 1);
  assert_memory_equal(p, "abc", 3);
  p += 3;
  assert_int_equal(mooncake::GetLittleEndian(&p, 4), mooncake::Crc32c(frame, 12 + 3));
  frame = p;
  assert_int_equal(mooncake::GetLittleEndian(&p, 4), 0);
  assert_int_equal(mooncake::GetLittleEndian(&p, 8), 2);
  assert_int_equal(mooncake::GetLittleEndian(&p, 4), mooncake::Crc32c(frame, 12));
  bool clean = false;
  uint64_t end = 0;
  const std::vector<Frame> frames = Frames(dir.path + "/" + files[0], &clean, &end);
  assert_int_equal(frames.size(), 2);
  assert_true(clean);
  assert_int_equal(end, 24 + 16 + 3 + 16);

  Records records;
  assert_int_equal(RecoverAll(Options(dir.path), 0, &records).value(), 2);
  assert_int_equal(records.size(), 2);
  assert_true(records[0].second == "abc" && records[1].second.empty());
  assert_true(FilesEndingWith(dir.path, ".cut").empty());
  assert_int_equal(std::filesystem::file_size(dir.path + "/" + files[0]), data.size());  // left
}

// ---- append, recover, skip ----

// sync_each: every record made durable on its own (how a strict master acknowledges), or
// all at the end.
void AppendAndRecover(bool sync_each) {
  TempDir dir;
  const OpLogOptions options = Options(dir.path);
  assert_int_equal(AppendRecords(options, 1000, sync_each), 1000);
  Records all;
  assert_int_equal(RecoverAll(options, 0, &all).value(), 1000);
  AssertChain(all, 1, 1000);
  Records tail;  // a snapshot at seq 400 holds the first 400
  assert_int_equal(RecoverAll(options, 400, &tail).value(), 1000);
  AssertChain(tail, 401, 1000);
  Records none;  // a snapshot taken after the last record
  assert_int_equal(RecoverAll(options, 1000, &none).value(), 1000);
  assert_true(none.empty());
  assert_true(FilesEndingWith(dir.path, ".cut").empty());  // a clean log is never cut
}

void test_append_recover_each_synced(void** state) {
  (void)state;
  AppendAndRecover(/*sync_each=*/true);
}

void test_append_recover_synced_once(void** state) {
  (void)state;
  AppendAndRecover(/*sync_each=*/false);
}

// Misuse answered with codes, and the lock-free fast path of Sync.
void test_contract(void** state) {
  (void)state;
  TempDir dir;
  OpLog log(Options(dir.path + "/made/by/recover"));
  assert_int_equal(log.stats().files, 0);  // no directory yet
  assert_int_equal(log.Append("early"), 0);                   // before Start
  assert_int_equal(log.Start(0), ErrorCode::INVALID_PARAMS);  // neither Recover nor DiscardAll
  assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
  assert_int_equal(log.Start(0), ErrorCode::OK);
  assert_int_equal(log.Start(0), ErrorCode::INVALID_PARAMS);
  assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).code(),
                   ErrorCode::INVALID_PARAMS);
  assert_int_equal(log.DiscardAll(), ErrorCode::INVALID_PARAMS);
  assert_int_equal(log.Sync(0), ErrorCode::OK);
  assert_int_equal(log.Sync(1), ErrorCode::INVALID_PARAMS);  // never appended
  assert_int_equal(log.Append(std::string(OpLog::kMaxPayload + 1, 'x')), 0);
  assert_int_equal(log.Append("one"), 1);
  assert_int_equal(OpLog::LastAppendedByThisThread(), 1);
  assert_int_equal(log.Sync(1), ErrorCode::OK);
  assert_int_equal(log.Sync(1), ErrorCode::OK);
  assert_true(log.healthy());

  TempDir other;
  AppendRecords(Options(other.path), 5);
  OpLog behind(Options(other.path));
  assert_int_equal(behind.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 5);
  assert_int_equal(behind.Start(4), ErrorCode::INVALID_PARAMS);  // seq 5 would be used twice
}

// ---- restarts ----

void test_restart_continuity(void** state) {
  (void)state;
  TempDir dir;
  const OpLogOptions options = Options(dir.path);
  // A run that appends nothing leaves a header-only file named after seq 1; the next run
  // deletes it and starts the same name again.
  assert_int_equal(AppendRecords(options, 0), 0);
  assert_int_equal(FilesEndingWith(dir.path, ".log").size(), 1);
  assert_int_equal(AppendRecords(options, 50), 50);
  assert_int_equal(AppendRecords(options, 50), 100);
  const std::vector<std::string> files = FilesEndingWith(dir.path, ".log");
  assert_int_equal(files.size(), 2);
  assert_int_equal(SeqOfName(files[0]), 1);
  assert_int_equal(SeqOfName(files[1]), 51);
  Records records;
  assert_int_equal(RecoverAll(options, 0, &records).value(), 100);
  AssertChain(records, 1, 100);
  records.clear();
  assert_int_equal(RecoverAll(options, 70, &records).value(), 100);
  AssertChain(records, 71, 100);
}

// ---- rotation and DropThrough ----

void test_rotation_and_drop(void** state) {
  (void)state;
  TempDir dir;
  OpLogOptions options = Options(dir.path);
  options.file_bytes = 1024;
  OpLog log(options);
  assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
  assert_int_equal(log.Start(0), ErrorCode::OK);
  for (uint64_t seq = 1; seq <= 60; ++seq) {
    assert_int_equal(log.Append(Payload(seq)), seq);
    assert_int_equal(log.Sync(seq), ErrorCode::OK);
  }
  std::vector<std::string> files = FilesEndingWith(dir.path, ".log");
  assert_true(files.size() >= 4);
  uint64_t expected_first = 1;
  for (const std::string& name : files) {  // each named after its first record, no gaps
    const std::string path = dir.path + "/" + name;
    const std::vector<Frame> frames = Frames(path);
    assert_int_equal(SeqOfName(name), expected_first);
    assert_int_equal(frames.front().seq, expected_first);
    expected_first = frames.back().seq + 1;
    // Rotation happens once a file's logical size reaches file_bytes, and not before (the
    // zeros do not count: every file is a 4 MiB step on disk).
    if (name != files.back()) {
      assert_true(LogicalSize(path) >= 1024);
      assert_true(frames.back().offset < 1024);
    }
  }
  assert_int_equal(expected_first, 61);

  const uint64_t third = SeqOfName(files[2]);
  log.DropThrough(third - 2);  // file 1 is wholly <= it, file 2 is not
  assert_int_equal(FilesEndingWith(dir.path, ".log").size(), files.size() - 1);
  log.DropThrough(third - 1);  // now file 2 is
  std::vector<std::string> left = FilesEndingWith(dir.path, ".log");
  assert_int_equal(left.size(), files.size() - 2);
  assert_true(left.front() == files[2]);
  log.DropThrough(1000000);  // everything but the file being appended to
  left = FilesEndingWith(dir.path, ".log");
  assert_int_equal(left.size(), 1);
  assert_true(left[0] == files.back());
  assert_int_equal(log.stats().files, 1);
  for (uint64_t seq = 61; seq <= 70; ++seq) assert_int_equal(log.Append(Payload(seq)), seq);
  assert_int_equal(log.Sync(70), ErrorCode::OK);

  Records records;
  const uint64_t current = SeqOfName(files.back());
  assert_int_equal(RecoverAll(options, current - 1, &records).value(), 70);
  AssertChain(records, current, 70);
}

// ---- cuts ----

void test_torn_tail(void** state) {
  (void)state;
  TempDir dir;
  uint64_t last;
  const std::vector<std::string> files = WriteSeveralFiles(dir.path, &last);
  const std::string path = dir.path + "/" + files.back();
  const std::vector<Frame> frames = Frames(path);
  assert_int_equal(frames.back().seq, last);
  // A crash cut the last frame short.
  assert_int_equal(truncate(path.c_str(), static_cast<off_t>(frames.back().offset + 7)), 0);
  OpLogOptions options = Options(dir.path);
  options.file_bytes = 1024;
  Records records;
  assert_int_equal(RecoverAll(options, 0, &records).value(), last - 1);
  AssertChain(records, 1, last - 1);
  assert_int_equal(std::filesystem::file_size(path), frames.back().offset);  // at the frame start
  assert_true(FilesEndingWith(dir.path, ".cut").empty());
  // The log goes on from there as if the torn record had never been.
  assert_int_equal(AppendRecords(options, 5), last + 4);
  records.clear();
  assert_int_equal(RecoverAll(options, 0, &records).value(), last + 4);
  AssertChain(records, 1, last + 4);
}

void test_flipped_byte(void** state) {
  (void)state;
  TempDir dir;
  uint64_t last;
  const std::vector<std::string> files = WriteSeveralFiles(dir.path, &last);
  const std::string first = dir.path + "/" + files[0];
  const std::vector<Frame> frames = Frames(first);
  const Frame middle = frames[frames.size() / 2];
  std::string data = ReadFile(first);
  data[middle.offset + 12 + 3] ^= 0x10;  // a payload byte
  std::ofstream(first, std::ios::binary | std::ios::trunc) << data;

  Records records;
  assert_int_equal(RecoverAll(Options(dir.path), 0, &records).value(), middle.seq - 1);
  AssertChain(records, 1, middle.seq - 1);
  assert_int_equal(std::filesystem::file_size(first), middle.offset);
  const std::vector<std::string> cut = FilesEndingWith(dir.path, ".cut");
  assert_int_equal(cut.size(), files.size() - 1);
  for (size_t i = 1; i < files.size(); ++i) assert_true(cut[i - 1] == files[i] + ".cut");
  assert_int_equal(FilesEndingWith(dir.path, ".log").size(), 1);
  records.clear();  // cut files are never read again
  assert_int_equal(RecoverAll(Options(dir.path), 0, &records).value(), middle.seq - 1);
  AssertChain(records, 1, middle.seq - 1);
}

void test_gap(void** state) {
  (void)state;
  TempDir dir;
  uint64_t last;
  const std::vector<std::string> files = WriteSeveralFiles(dir.path, &last);
  const uint64_t first_size = std::filesystem::file_size(dir.path + "/" + files[0]);
  assert_int_equal(unlink((dir.path + "/" + files[1]).c_str()), 0);
  Records records;
  assert_int_equal(RecoverAll(Options(dir.path), 0, &records).value(), SeqOfName(files[1]) - 1);
  AssertChain(records, 1, SeqOfName(files[1]) - 1);
  assert_int_equal(std::filesystem::file_size(dir.path + "/" + files[0]), first_size);
  assert_int_equal(FilesEndingWith(dir.path, ".cut").size(), files.size() - 2);
  assert_int_equal(FilesEndingWith(dir.path, ".log").size(), 1);
  // A snapshot that does not meet the log is a gap too: nothing after seq 0 chains on 200.
  TempDir late;
  OpLog log(Options(late.path));
  assert_int_equal(log.Recover(199, [](uint64_t, std::string_view) { return true; }).value(), 199);
  assert_int_equal(log.Start(199), ErrorCode::OK);
  assert_int_equal(log.Append("x"), 200);
  assert_int_equal(log.Sync(200), ErrorCode::OK);
  records.clear();
  assert_int_equal(RecoverAll(Options(late.path), 100, &records).value(), 100);
  assert_true(records.empty());
  assert_int_equal(FilesEndingWith(late.path, ".cut").size(), 1);
}

void test_apply_false(void** state) {
  (void)state;
  TempDir dir;
  uint64_t last;
  const std::vector<std::string> files = WriteSeveralFiles(dir.path, &last);
  const std::string second = dir.path + "/" + files[1];
  const std::vector<Frame> frames = Frames(second);
  const uint64_t reject = frames[1].seq;  // the second record of the second file
  std::vector<uint64_t> seen;
  {
    OpLog log(Options(dir.path));
    auto result = log.Recover(0, [&](uint64_t seq, std::string_view) {
      seen.push_back(seq);
      return seq != reject;
    });
    assert_int_equal(result.value(), reject - 1);
  }
  assert_int_equal(seen.size(), reject);  // asked about the rejected one, then stopped
  assert_int_equal(std::filesystem::file_size(second), frames[1].offset);
  assert_int_equal(FilesEndingWith(dir.path, ".cut").size(), files.size() - 2);
  Records records;
  assert_int_equal(RecoverAll(Options(dir.path), 0, &records).value(), reject - 1);
  AssertChain(records, 1, reject - 1);

  // Rejecting a file's first record leaves nothing of it but its header: it is set aside
  // whole, so that Start can create a file of that name again.
  const uint64_t second_first = SeqOfName(files[1]);
  OpLog log(Options(dir.path));
  auto result = log.Recover(0, [&](uint64_t seq, std::string_view) { return seq != second_first; });
  assert_int_equal(result.value(), second_first - 1);
  assert_int_equal(FilesEndingWith(dir.path, ".log").size(), 1);
  assert_int_equal(log.Start(second_first - 1), ErrorCode::OK);
  assert_int_equal(log.Append(Payload(second_first)), second_first);
  assert_int_equal(log.Sync(second_first), ErrorCode::OK);
}

void test_discard_all(void** state) {
  (void)state;
  TempDir dir;
  uint64_t last;
  const std::vector<std::string> files = WriteSeveralFiles(dir.path, &last);
  OpLog log(Options(dir.path));
  assert_int_equal(log.DiscardAll(), ErrorCode::OK);
  assert_true(FilesEndingWith(dir.path, ".log").empty());
  const std::vector<std::string> discarded = FilesEndingWith(dir.path, ".discarded");
  assert_int_equal(discarded.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) assert_true(discarded[i] == files[i] + ".discarded");
  int applied = 0;
  auto result = log.Recover(0, [&](uint64_t, std::string_view) {
    ++applied;
    return true;
  });
  assert_int_equal(result.value(), 0);
  assert_int_equal(applied, 0);
  assert_int_equal(log.Start(0), ErrorCode::OK);  // a new history from seq 1
  assert_int_equal(log.Append(Payload(1)), 1);
  assert_int_equal(log.Sync(1), ErrorCode::OK);
}

// ---- durability under load, timing ----

void test_group_commit(void** state) {
  (void)state;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  TempDir dir;
  const OpLogOptions options = Options(dir.path);
  uint64_t syncs_before = 0, syncs = 0;
  std::atomic<int> failures{0};
  const auto t0 = Clock::now();
  {
    OpLog log(options);
    assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
    assert_int_equal(log.Start(0), ErrorCode::OK);
    syncs_before = log.stats().fdatasyncs;  // the header's
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const uint64_t seq = log.Append(std::to_string(t) + ":" + std::to_string(i));
          if (seq == 0 || OpLog::LastAppendedByThisThread() != seq) ++failures;
          if (log.Sync(seq) != ErrorCode::OK || log.synced() < seq) ++failures;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    syncs = log.stats().fdatasyncs - syncs_before;
    assert_int_equal(log.last(), kThreads * kPerThread);
  }
  const int64_t elapsed_ms = MsSince(t0);
  assert_int_equal(failures.load(), 0);
  printf("group commit: %d records from %d threads, %llu fdatasyncs (%.1f records each), %lld ms\n",
         kThreads * kPerThread, kThreads, static_cast<unsigned long long>(syncs),
         static_cast<double>(kThreads * kPerThread) / static_cast<double>(syncs),
         static_cast<long long>(elapsed_ms));
  assert_true(syncs < static_cast<uint64_t>(kThreads * kPerThread));

  Records records;
  assert_int_equal(RecoverAll(options, 0, &records).value(), kThreads * kPerThread);
  std::vector<int> next(kThreads, 0);  // each thread's records, in its own order, once
  for (size_t i = 0; i < records.size(); ++i) {
    assert_int_equal(records[i].first, i + 1);
    const size_t colon = records[i].second.find(':');
    const int t = std::stoi(records[i].second.substr(0, colon));
    assert_int_equal(std::stoi(records[i].second.substr(colon + 1)), next[t]++);
  }
  for (int t = 0; t < kThreads; ++t) assert_int_equal(next[t], kPerThread);
}

void test_relaxed_flushes_on_its_own(void** state) {
  (void)state;
  TempDir dir;
  OpLogOptions options = Options(dir.path);
  options.flush_interval_ms = 50;
  OpLog log(options);
  assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
  assert_int_equal(log.Start(0), ErrorCode::OK);
  const auto t0 = Clock::now();
  for (uint64_t seq = 1; seq <= 100; ++seq) log.Append(Payload(seq));
  while (log.synced() < 100 && MsSince(t0) < 2000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int64_t took_ms = MsSince(t0);
  printf("relaxed: 100 records durable %lld ms after their append, without Sync (interval 50 ms)\n",
         static_cast<long long>(took_ms));
  assert_int_equal(log.synced(), 100);
  assert_true(took_ms < 2000);

  // With a long interval nothing is written until a Sync asks; then at once.
  TempDir lazy_dir;
  OpLogOptions lazy_options = Options(lazy_dir.path);
  lazy_options.flush_interval_ms = 60000;
  OpLog lazy(lazy_options);
  assert_int_equal(lazy.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
  assert_int_equal(lazy.Start(0), ErrorCode::OK);
  lazy.Append(Payload(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  assert_int_equal(lazy.synced(), 0);
  const auto t1 = Clock::now();
  assert_int_equal(lazy.Sync(1), ErrorCode::OK);
  const int64_t sync_ms = MsSince(t1);
  printf("relaxed: Sync with a 60 s interval took %lld ms\n", static_cast<long long>(sync_ms));
  assert_true(sync_ms < 2000);
}

// ---- a disk that fills ----

// The child's steps; its exit status is the number of the first that failed (0: all passed).
// preallocate_bytes: small (the file grows by steps, and the step that would pass the limit
// fails), or 0 (the write itself passes the limit).
int DiskFullChild(const std::string& dir, uint64_t preallocate_bytes) {
  signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
  OpLogOptions options = Options(dir);
  options.sync_timeout_ms = 500;
  options.preallocate_bytes = preallocate_bytes;
  const std::string path = dir + "/00000000000000000001.log";
  {
    OpLog log(options);
    if (!log.Recover(0, [](uint64_t, std::string_view) { return true; }).ok()) return 1;
    if (log.Start(0) != ErrorCode::OK) return 2;
    for (uint64_t seq = 1; seq <= 10; ++seq) log.Append(Payload(seq));
    if (log.Sync(10) != ErrorCode::OK) return 3;

    struct rlimit old_limit;
    if (getrlimit(RLIMIT_FSIZE, &old_limit) != 0) return 4;
    struct rlimit small = old_limit;
    small.rlim_cur = std::filesystem::file_size(path) + 300;  // room for one or two records
    if (setrlimit(RLIMIT_FSIZE, &small) != 0) return 5;
    for (uint64_t seq = 11; seq <= 110; ++seq) log.Append(Payload(seq));
    const auto t0 = Clock::now();
    if (log.Sync(110) != ErrorCode::PERSISTENT_FAIL) return 6;
    const int64_t refused_ms = MsSince(t0);
    if (refused_ms < 450 || refused_ms > 2000) return 7;
    if (log.healthy() || log.synced() >= 110 || log.stats().failed_flushes == 0) return 8;
    bool clean = false;  // what is on disk meanwhile ends with a whole frame: cut back to it
    uint64_t end = 0;
    const std::vector<Frame> frames = Frames(path, &clean, &end);
    if (!clean || frames.back().seq != log.synced() || std::filesystem::file_size(path) != end) {
      return 9;
    }

    if (setrlimit(RLIMIT_FSIZE, &old_limit) != 0) return 10;  // the disk has room again
    const auto t1 = Clock::now();
    if (log.Sync(110) != ErrorCode::OK) return 11;
    const int64_t recovered_ms = MsSince(t1);
    if (!log.healthy() || log.synced() != 110) return 12;
    printf("disk full: Sync refused after %lld ms; after the limit was lifted the records were "
           "durable in %lld ms (%llu failed flushes)\n",
           static_cast<long long>(refused_ms), static_cast<long long>(recovered_ms),
           static_cast<unsigned long long>(log.stats().failed_flushes));
  }
  bool clean = false;
  Frames(path, &clean);
  if (!clean) return 13;
  Records records;
  mooncake::Result<uint64_t> result = RecoverAll(options, 0, &records);
  if (!result.ok() || result.value() != 110 || records.size() != 110) return 14;
  for (uint64_t i = 0; i < records.size(); ++i) {
    if (records[i].first != i + 1 || records[i].second != Payload(i + 1)) return 15;
  }
  if (!FilesEndingWith(dir, ".cut").empty()) return 16;
  return 0;
}

void DiskFull(uint64_t preallocate_bytes) {
  TempDir dir;
  printf("disk full, preallocate_bytes %llu:\n",
         static_cast<unsigned long long>(preallocate_bytes));
  fflush(stdout);  // or the child flushes the parent's buffered output a second time
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    const int failed_step = DiskFullChild(dir.path, preallocate_bytes);
    fflush(stdout);
    _exit(failed_step);  // no destructors: the parent owns the directory
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0) printf("disk full child failed at step %d\n", WEXITSTATUS(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

void test_disk_full(void** state) {
  (void)state;
  DiskFull(512);  // small steps, so that the file grows and reaches the limit
}

void test_disk_full_no_preallocation(void** state) {
  (void)state;
  DiskFull(0);
}

// ---- preallocation ----

// (a) Zero tails end files cleanly: no cut, nothing renamed, nothing trimmed; and a log
// restarted twice (Recover, Start, append) chains on across files that keep their tails.
void test_prealloc_recover_and_restart(void** state) {
  (void)state;
  TempDir dir;
  const OpLogOptions options = Options(dir.path);
  const uint64_t step = options.preallocate_bytes;
  for (uint64_t run = 1; run <= 3; ++run) {
    if (run > 1) {  // what the next run's Recover sees first
      Records records;
      assert_int_equal(RecoverAll(options, 0, &records).value(), 40 * (run - 1));
      AssertChain(records, 1, 40 * (run - 1));
    }
    assert_int_equal(AppendRecords(options, 40), 40 * run);  // Recover, Start, 40 records
  }
  const std::vector<std::string> files = FilesEndingWith(dir.path, ".log");
  assert_int_equal(files.size(), 3);
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = dir.path + "/" + files[i];
    bool clean = false;
    uint64_t end = 0;
    const std::vector<Frame> frames = Frames(path, &clean, &end);
    assert_int_equal(SeqOfName(files[i]), 40 * i + 1);
    assert_int_equal(frames.size(), 40);
    assert_true(clean);
    assert_int_equal(std::filesystem::file_size(path), step);  // left in place by Recover
    assert_true(end < step);
  }
  assert_true(FilesEndingWith(dir.path, ".cut").empty());
  Records records;
  assert_int_equal(RecoverAll(options, 0, &records).value(), 120);
  AssertChain(records, 1, 120);
  records.clear();
  assert_int_equal(RecoverAll(options, 60, &records).value(), 120);
  AssertChain(records, 61, 120);
  assert_true(FilesEndingWith(dir.path, ".cut").empty());
}

// (b) A crash inside the preallocated region: the last frame's end never reached the disk
// and reads as the zeros there. Its checksum fails: it is cut at its start.
void test_prealloc_torn_frame(void** state) {
  (void)state;
  for (int variant = 0; variant < 2; ++variant) {  // 0: from mid-payload on, 1: the CRC only
    TempDir dir;
    const OpLogOptions options = Options(dir.path);
    assert_int_equal(AppendRecords(options, 20), 20);
    const std::string path = dir.path + "/" + FilesEndingWith(dir.path, ".log")[0];
    const Frame torn = Frames(path).back();
    assert_int_equal(torn.seq, 20);
    std::string data = ReadFile(path);
    const size_t size = data.size();
    const char* p = data.data() + torn.offset;
    const size_t length = mooncake::GetLittleEndian(&p, 4);
    const size_t frame_end = torn.offset + OpLog::kFrameOverhead + length;
    const size_t from = variant == 0 ? torn.offset + 12 + length / 2 : frame_end - 4;
    std::fill(data.begin() + static_cast<std::ptrdiff_t>(from),
              data.begin() + static_cast<std::ptrdiff_t>(frame_end), '\0');
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
    assert_int_equal(std::filesystem::file_size(path), size);

    Records records;
    assert_int_equal(RecoverAll(options, 0, &records).value(), 19);
    AssertChain(records, 1, 19);
    assert_int_equal(std::filesystem::file_size(path), torn.offset);  // the zeros went too
    assert_true(FilesEndingWith(dir.path, ".cut").empty());
    assert_int_equal(AppendRecords(options, 5), 24);  // on from there
    records.clear();
    assert_int_equal(RecoverAll(options, 0, &records).value(), 24);
    AssertChain(records, 1, 24);
  }
}

// (c) A zero frame head with a non-zero byte after it is no end but corruption: the log is
// cut there, point-in-time (the later files set aside).
void test_prealloc_zero_head_then_garbage(void** state) {
  (void)state;
  TempDir dir;
  uint64_t last;
  const std::vector<std::string> files = WriteSeveralFiles(dir.path, &last);
  const std::string first = dir.path + "/" + files[0];
  uint64_t end = 0;
  const std::vector<Frame> frames = Frames(first, nullptr, &end);
  std::string data = ReadFile(first);
  assert_true(data.size() > end + 100);
  data[data.size() - 1] = 1;  // far into the tail
  std::ofstream(first, std::ios::binary | std::ios::trunc) << data;

  Records records;
  assert_int_equal(RecoverAll(Options(dir.path), 0, &records).value(), frames.back().seq);
  AssertChain(records, 1, frames.back().seq);  // no record lost in that file
  assert_int_equal(std::filesystem::file_size(first), end);
  assert_int_equal(FilesEndingWith(dir.path, ".cut").size(), files.size() - 1);

  // The same right after the zero head, in the last file (nothing after it to set aside).
  TempDir one;
  assert_int_equal(AppendRecords(Options(one.path), 10), 10);
  const std::string path = one.path + "/" + FilesEndingWith(one.path, ".log")[0];
  const uint64_t logical = LogicalSize(path);
  data = ReadFile(path);
  data[logical + 12] = 'x';
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  records.clear();
  assert_int_equal(RecoverAll(Options(one.path), 0, &records).value(), 10);
  AssertChain(records, 1, 10);
  assert_int_equal(std::filesystem::file_size(path), logical);

  // Fewer zeros than a frame head (a batch that ended just short of a step) end the file
  // too; fewer bytes than that with one non-zero among them are a torn frame.
  for (const bool garbage : {false, true}) {
    TempDir short_tail;
    OpLogOptions options = Options(short_tail.path);
    options.preallocate_bytes = 0;
    assert_int_equal(AppendRecords(options, 10), 10);
    const std::string name = short_tail.path + "/" + FilesEndingWith(short_tail.path, ".log")[0];
    const uint64_t size = std::filesystem::file_size(name);
    std::string tail(5, '\0');
    if (garbage) tail[4] = 'x';
    std::ofstream(name, std::ios::binary | std::ios::app) << tail;
    records.clear();
    assert_int_equal(RecoverAll(options, 0, &records).value(), 10);
    AssertChain(records, 1, 10);
    assert_int_equal(std::filesystem::file_size(name), garbage ? size : size + 5);
    assert_true(FilesEndingWith(short_tail.path, ".cut").empty());
  }
}

// (d) Rotation with small steps: files grow by steps (the flusher extending ahead of the
// flushes, from several threads at once), rotation counts the logical size, every file
// but the last may keep a zero tail, and the chain replays whole across them.
void test_prealloc_rotation(void** state) {
  (void)state;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  constexpr uint64_t kTotal = kThreads * kPerThread;
  TempDir dir;
  OpLogOptions options = Options(dir.path);
  options.file_bytes = 8192;
  options.preallocate_bytes = 1024;
  {
    OpLog log(options);
    assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
    assert_int_equal(log.Start(0), ErrorCode::OK);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kPerThread; ++i) {
          const uint64_t seq = log.Append(std::string(40, 'p'));
          if (seq == 0 || log.Sync(seq) != ErrorCode::OK) ++failures;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    assert_int_equal(failures.load(), 0);
    assert_true(log.healthy());
  }
  const std::vector<std::string> files = FilesEndingWith(dir.path, ".log");
  assert_true(files.size() >= 5);
  uint64_t expected_first = 1, tails = 0, on_disk = 0;
  for (const std::string& name : files) {
    const std::string path = dir.path + "/" + name;
    bool clean = false;
    uint64_t end = 0;
    const std::vector<Frame> frames = Frames(path, &clean, &end);
    const uint64_t size = std::filesystem::file_size(path);
    assert_true(clean);
    assert_int_equal(SeqOfName(name), expected_first);
    assert_int_equal(frames.front().seq, expected_first);
    for (size_t i = 0; i < frames.size(); ++i) assert_int_equal(frames[i].seq, expected_first + i);
    expected_first = frames.back().seq + 1;
    assert_int_equal(size % options.preallocate_bytes, 0);  // grown by whole steps
    assert_true(size >= end && size - end < options.preallocate_bytes * 3 / 2);
    if (name != files.back()) {
      assert_true(end >= options.file_bytes);  // the logical size, not the size on disk
      tails += size > end;
    }
    on_disk += size;
  }
  assert_int_equal(expected_first, kTotal + 1);
  assert_true(tails > 0);
  OpLog reader(options);
  assert_int_equal(reader.stats().bytes, on_disk);  // the sizes on disk, tails included
  uint64_t replayed = 0;
  auto result = reader.Recover(0, [&](uint64_t seq, std::string_view payload) {
    replayed += seq == replayed + 1 && payload == std::string(40, 'p');
    return true;
  });
  assert_int_equal(result.value(), kTotal);
  assert_int_equal(replayed, kTotal);
  assert_true(FilesEndingWith(dir.path, ".cut").empty());
}

// (e) preallocate_bytes 0: today's exact file sizes, the file growing with every write.
void test_no_preallocation(void** state) {
  (void)state;
  TempDir dir;
  OpLogOptions options = Options(dir.path);
  options.preallocate_bytes = 0;
  {
    OpLog log(options);
    assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
    assert_int_equal(log.Start(0), ErrorCode::OK);
    assert_int_equal(log.Append("abc"), 1);
    assert_int_equal(log.Append(""), 2);
    assert_int_equal(log.Sync(2), ErrorCode::OK);
    assert_int_equal(log.stats().bytes, 24 + 16 + 3 + 16);
  }
  assert_int_equal(std::filesystem::file_size(dir.path + "/00000000000000000001.log"),
                   24 + 16 + 3 + 16);
  options.file_bytes = 1024;  // rotation and a restart: every file exactly its frames
  assert_int_equal(AppendRecords(options, 30), 32);
  assert_int_equal(AppendRecords(options, 30), 62);
  const std::vector<std::string> files = FilesEndingWith(dir.path, ".log");
  assert_true(files.size() >= 3);
  for (const std::string& name : files) {
    const std::string path = dir.path + "/" + name;
    assert_int_equal(std::filesystem::file_size(path), LogicalSize(path));
  }
  Records records;
  assert_int_equal(RecoverAll(options, 2, &records).value(), 62);
  AssertChain(records, 3, 62);
  assert_true(FilesEndingWith(dir.path, ".cut").empty());
}

// Informational: mean latency of Append + Sync, one record per flush, with and without
// preallocation (no assertion on time).
void test_prealloc_latency(void** state) {
  (void)state;
  constexpr int kRecords = 2000;
  for (const size_t payload_bytes : {size_t{128}, size_t{8192}}) {
    double mean_us[2];
    for (int prealloc = 1; prealloc >= 0; --prealloc) {
      sync();  // what earlier tests left for writeback would skew the first numbers
      TempDir dir;
      OpLogOptions options = Options(dir.path);
      if (prealloc == 0) options.preallocate_bytes = 0;
      OpLog log(options);
      assert_int_equal(log.Recover(0, [](uint64_t, std::string_view) { return true; }).value(), 0);
      assert_int_equal(log.Start(0), ErrorCode::OK);
      const std::string payload(payload_bytes, 'v');
      std::vector<int64_t> ns(kRecords);
      for (int i = 0; i < kRecords; ++i) {
        const auto t0 = Clock::now();
        const uint64_t seq = log.Append(payload);
        assert_int_equal(log.Sync(seq), ErrorCode::OK);
        ns[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      }
      double sum = 0;
      for (int64_t v : ns) sum += static_cast<double>(v);
      std::sort(ns.begin(), ns.end());
      mean_us[prealloc] = sum / kRecords / 1000.0;
      printf("prealloc latency: %zu-byte records, preallocate_bytes %-7llu: Append+Sync mean "
             "%.1f us, p50 %.1f us, p99 %.1f us, max %.1f us (%d records)\n",
             payload_bytes, static_cast<unsigned long long>(options.preallocate_bytes),
             mean_us[prealloc], ns[kRecords / 2] / 1000.0, ns[kRecords * 99 / 100] / 1000.0,
             ns.back() / 1000.0, kRecords);
    }
    printf("prealloc latency: %zu-byte records: preallocated %.1f us vs %.1f us (%.2fx)\n",
           payload_bytes, mean_us[1], mean_us[0], mean_us[0] / mean_us[1]);
  }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_on_disk_format),
      cmocka_unit_test(test_append_recover_each_synced),
      cmocka_unit_test(test_append_recover_synced_once),
      cmocka_unit_test(test_contract),
      cmocka_unit_test(test_restart_continuity),
      cmocka_unit_test(test_rotation_and_drop),
      cmocka_unit_test(test_torn_tail),
      cmocka_unit_test(test_flipped_byte),
      cmocka_unit_test(test_gap),
      cmocka_unit_test(test_apply_false),
      cmocka_unit_test(test_discard_all),
      cmocka_unit_test(test_group_commit),
      cmocka_unit_test(test_relaxed_flushes_on_its_own),
      cmocka_unit_test(test_disk_full),
      cmocka_unit_test(test_disk_full_no_preallocation),
      cmocka_unit_test(test_prealloc_recover_and_restart),
      cmocka_unit_test(test_prealloc_torn_frame),
      cmocka_unit_test(test_prealloc_zero_head_then_garbage),
      cmocka_unit_test(test_prealloc_rotation),
      cmocka_unit_test(test_no_preallocation),
      cmocka_unit_test(test_prealloc_latency),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
