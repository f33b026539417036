// Tests for mooncake::OpLog: the on-disk format, replay after a snapshot's seq, restart
// continuity, rotation and dropping, group commit under threads and relaxed-mode flushing.
// Preallocation (zero tails) is on, as in production, unless a test says otherwise; its own
// tests: recovery and restarts over zero tails, rotation, and preallocate_bytes 0 (the exact
// file sizes), plus a latency comparison. What damage and failures do to a log (cuts, a
// rejected record, discarding, a disk that fills, frames torn in the zero tails) is tested
// in oplog_recovery_test.cc.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/base/crc32c.h"
#include "common/base/little_endian.h"
#include "master/log/oplog.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/oplog_test_util.h"

using mooncake::ErrorCode;
using mooncake::OpLog;
using mooncake::OpLogOptions;

namespace {

using namespace mooncake::oplog_test;  // what the OpLog suites share

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
  // Durable on its own, without Sync: polled with a generous deadline, as a loaded
  // machine's fdatasync may take seconds.
  while (log.synced() < 100 && MsSince(t0) < 30000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int64_t took_ms = MsSince(t0);
  printf("relaxed: 100 records durable %lld ms after their append, without Sync (interval 50 ms)\n",
         static_cast<long long>(took_ms));
  assert_int_equal(log.synced(), 100);

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
  assert_true(sync_ms < 30000);  // at once, not at the 60 s interval (loaded disks are slow)
}

// ---- preallocation ----

// Zero tails end files cleanly: no cut, nothing renamed, nothing trimmed; and a log
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

// Rotation with small steps: files grow by steps (the flusher extending ahead of the
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

// preallocate_bytes 0: today's exact file sizes, the file growing with every write.
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
      cmocka_unit_test(test_group_commit),
      cmocka_unit_test(test_relaxed_flushes_on_its_own),
      cmocka_unit_test(test_prealloc_recover_and_restart),
      cmocka_unit_test(test_prealloc_rotation),
      cmocka_unit_test(test_no_preallocation),
      cmocka_unit_test(test_prealloc_latency),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
