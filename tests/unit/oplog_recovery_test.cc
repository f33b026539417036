// Tests for what damage and failures do to a mooncake::OpLog: point-in-time cuts (a torn
// tail, a flipped byte, a gap, a record the caller rejects), discarding the whole log, a
// disk that fills (RLIMIT_FSIZE, in a child process), and damage inside the preallocated
// region (a frame torn in its zeros, a zero frame head before non-zero bytes). The format,
// rotation, restarts and group commit are tested in oplog_test.cc.

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/little_endian.h"
#include "master/log/oplog.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/oplog_test_util.h"

using mooncake::ErrorCode;
using mooncake::OpLog;
using mooncake::OpLogOptions;

namespace {

using namespace mooncake::oplog_test;  // what the OpLog suites share

// Writes 60 records into files of about 1 KiB: at least three files.
std::vector<std::string> WriteSeveralFiles(const std::string& dir, uint64_t* last) {
  OpLogOptions options = Options(dir);
  options.file_bytes = 1024;
  *last = AppendRecords(options, 60);
  std::vector<std::string> files = FilesEndingWith(dir, ".log");
  assert_true(files.size() >= 3);
  return files;
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

// ---- damage in the preallocated region ----

// A crash inside the preallocated region: the last frame's end never reached the disk
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

// A zero frame head with a non-zero byte after it is no end but corruption: the log is
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

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_torn_tail),
      cmocka_unit_test(test_flipped_byte),
      cmocka_unit_test(test_gap),
      cmocka_unit_test(test_apply_false),
      cmocka_unit_test(test_discard_all),
      cmocka_unit_test(test_disk_full),
      cmocka_unit_test(test_disk_full_no_preallocation),
      cmocka_unit_test(test_prealloc_torn_frame),
      cmocka_unit_test(test_prealloc_zero_head_then_garbage),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
