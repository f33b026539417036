// Tests for mooncake::SnapshotWriter and mooncake::SnapshotStore: the round trip (and the
// files' documented text), the order of candidates and retention, latest naming an older
// snapshot, setting a bad snapshot aside, writers that never publish, the writer in a
// forked child, the writer's misuse and I/O errors, names, and stray entries. Corrupt and
// hostile files are tested in snapshot_store_damage_test.cc.

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/crc32c.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/snapshot_writer.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/snapshot_store_test_util.h"

using mooncake::ErrorCode;
using mooncake::LoadedSnapshot;
using mooncake::Result;
using mooncake::SnapshotName;
using mooncake::SnapshotStore;
using mooncake::SnapshotWriter;

namespace {

using namespace mooncake::snapshot_store_test;  // what the SnapshotStore suites share

// ---- files ----------------------------------------------------------------------------------

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// ---- tests ----------------------------------------------------------------------------------

void test_round_trip(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  assert_false(store.HasAny());
  assert_true(store.Candidates().empty());
  assert_int_equal(store.OldestRetainedSequence(), 0);

  // A few MB streamed in chunks of every size class: tiny, empty, odd, one bigger than the
  // write buffer (written straight through), ones that just overflow it.
  const std::string big = RandomBytes(5 * 1000 * 1000 + 17, 1);
  constexpr size_t kBuffer = SnapshotWriter::kWriteBufferBytes;
  const size_t chunk_sizes[] = {1, 0, 7, 4096, 100003, kBuffer + 5, kBuffer - 1, 65536, 3};
  SnapshotWriter w(dir, 42, kMs + 123);
  std::string error;
  ExpectOk(w.Begin(&error), error);
  ExpectOk(w.OpenPayload("segments", &error), error);
  size_t at = 0, appends = 0;
  for (size_t i = 0; at < big.size(); ++i) {
    size_t n = std::min(chunk_sizes[i % 9], big.size() - at);
    ExpectOk(w.Append(std::string_view(big).substr(at, n), &error), error);
    at += n;
    ++appends;
  }
  assert_true(appends > 20);
  ExpectOk(w.ClosePayload(&error), error);
  ExpectOk(w.OpenPayload("empty", &error), error);
  ExpectOk(w.ClosePayload(&error), error);
  const Extra extra = {{"objects", "123"}, {"segments", "3"}, {"note", "with spaces, ok"}};
  ExpectOk(w.Publish(extra, &error), error);
  assert_true(w.bytes_written() > big.size());
  const std::string name = SnapshotName(42, kMs + 123);
  assert_string_equal(w.name().c_str(), name.c_str());
  assert_string_equal(name.c_str(), "00000000000000000042-1700000000123");
  assert_string_equal(w.path().c_str(), (dir + "/snapshots/" + name).c_str());

  assert_string_equal(ReadFile(dir + "/latest").c_str(), (name + "\n").c_str());
  assert_false(Exists(dir + "/latest.tmp"));
  assert_true(store.HasAny());
  ExpectNames(store.Candidates(), {name});

  std::string why;
  Result<LoadedSnapshot> r = store.Load(name, &why);
  if (!r.ok()) fail_msg("%s", why.c_str());
  const LoadedSnapshot& s = r.value();
  assert_string_equal(s.info.name.c_str(), name.c_str());
  assert_int_equal(s.info.sequence, 42);
  assert_int_equal(s.info.created_ms, kMs + 123);
  assert_int_equal(s.info.extra.size(), 3);
  assert_string_equal(s.info.extra.at("objects").c_str(), "123");
  assert_string_equal(s.info.extra.at("segments").c_str(), "3");
  assert_string_equal(s.info.extra.at("note").c_str(), "with spaces, ok");
  assert_int_equal(s.payloads.size(), 2);
  assert_true(s.payloads.at("segments") == big);
  assert_true(s.payloads.at("empty").empty());
  assert_int_equal(store.OldestRetainedSequence(), 42);

  // The files are the documented text.
  const std::string manifest = ReadFile(w.path() + "/manifest");
  assert_string_equal(
      manifest.c_str(),
      Seal("mooncake-master snapshot manifest\nformat 1\npayload segments " +
           std::to_string(big.size()) + " " + Hex8(mooncake::Crc32c(big.data(), big.size())) +
           "\npayload empty 0 00000000\n")
          .c_str());
  assert_string_equal(
      ReadFile(w.path() + "/descriptor").c_str(),
      Seal("mooncake-master snapshot descriptor\nformat 1\nsequence 42\ncreated_ms 1700000000123\n"
           "manifest_crc32c " +
           Hex8(mooncake::Crc32c(manifest.data(), manifest.size())) +
           "\nobjects 123\nsegments 3\nnote with spaces, ok\n")
          .c_str());
}

void test_candidates_and_retain(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  // Sequence wins over time: the second is "older" by the clock.
  const std::string a = WriteSnapshot(dir, 10, kMs + 500, Standard(1));
  const std::string b = WriteSnapshot(dir, 20, kMs + 100, Standard(2));
  const std::string c = WriteSnapshot(dir, 30, kMs + 300, Standard(3));
  ExpectNames(store.Candidates(), {c, b, a});
  assert_int_equal(store.OldestRetainedSequence(), 10);

  store.Retain(2);
  assert_false(Exists(dir + "/snapshots/" + a));
  ExpectNames(store.Candidates(), {c, b});
  assert_int_equal(store.OldestRetainedSequence(), 20);
  ExpectLoads(store, b, Standard(2));
  ExpectLoads(store, c, Standard(3));
  store.Retain(2);  // nothing more to do
  ExpectNames(store.Candidates(), {c, b});

  // Same sequence: created_ms orders them.
  const std::string d = WriteSnapshot(dir, 30, kMs + 400, Standard(4));
  ExpectNames(store.Candidates(), {d, c, b});
  store.Retain(1);
  ExpectNames(store.Candidates(), {d});
  assert_int_equal(store.OldestRetainedSequence(), 30);
}

// latest naming an older snapshot (say the newest one's publication did not get to
// latest): it is tried first and never pruned, and it bounds the log truncation.
void test_latest_names_an_older_snapshot(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  const std::string a = WriteSnapshot(dir, 1, kMs, Standard(1));
  const std::string b = WriteSnapshot(dir, 2, kMs, Standard(2));
  const std::string c = WriteSnapshot(dir, 3, kMs, Standard(3));
  WriteFile(dir + "/latest", a + "\n");
  ExpectNames(store.Candidates(), {a, c, b});
  store.Retain(1);
  ExpectNames(store.Candidates(), {a, c});
  assert_int_equal(store.OldestRetainedSequence(), 1);
  store.Retain(0);  // only latest's
  ExpectNames(store.Candidates(), {a});
}

void test_mark_invalid(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  const std::string a = WriteSnapshot(dir, 1, kMs, Standard(1));
  const std::string b = WriteSnapshot(dir, 2, kMs, Standard(2));
  assert_int_equal(static_cast<int>(store.MarkInvalid(b)), 0);
  ExpectNames(store.Candidates(), {a});  // latest still names b: ignored
  assert_true(Exists(dir + "/snapshots/" + b + ".invalid/descriptor"));
  assert_false(Exists(dir + "/snapshots/" + b));
  std::string why;
  assert_false(store.Load(b, &why).ok());
  assert_int_equal(static_cast<int>(store.Load(b + ".invalid", &why).code()),
                   static_cast<int>(ErrorCode::INVALID_PARAMS));
  // Twice, or a name that is not one: refused, nothing moves.
  assert_int_not_equal(static_cast<int>(store.MarkInvalid(b)), 0);
  assert_int_equal(static_cast<int>(store.MarkInvalid("../x")),
                   static_cast<int>(ErrorCode::INVALID_PARAMS));
  // Retain neither counts nor deletes it.
  store.Retain(1);
  assert_true(Exists(dir + "/snapshots/" + b + ".invalid"));
  ExpectNames(store.Candidates(), {a});
  assert_int_equal(store.OldestRetainedSequence(), 1);
  assert_true(store.HasAny());
}

// Writers that stop before Publish (a child that crashed or was killed): their directories
// are never candidates, survive Retain while they might still be in progress (newer than
// every published snapshot), and go once a newer one is published.
void test_unpublished_writer(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  const std::string a = WriteSnapshot(dir, 1, kMs, Standard(1));
  std::string error;
  {
    SnapshotWriter w(dir, 2, kMs);  // stops with a payload open
    ExpectOk(w.Begin(&error), error);
    ExpectOk(w.OpenPayload("segments", &error), error);
    ExpectOk(w.Append(RandomBytes(3 << 20, 5), &error), error);
  }
  {
    SnapshotWriter w(dir, 3, kMs);  // stops after Begin
    ExpectOk(w.Begin(&error), error);
  }
  // Killed mid-payload, for real.
  int pipefd[2];
  assert_int_equal(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    SnapshotWriter w(dir, 4, kMs);
    std::string e;
    if (w.Begin(&e) != ErrorCode::OK || w.OpenPayload("segments", &e) != ErrorCode::OK ||
        w.Append(RandomBytes(3 << 20, 6), &e) != ErrorCode::OK ||
        w.ClosePayload(&e) != ErrorCode::OK || w.OpenPayload("metadata", &e) != ErrorCode::OK ||
        w.Append("partial", &e) != ErrorCode::OK) {
      _exit(1);
    }
    char c = 'x';
    if (::write(pipefd[1], &c, 1) != 1) _exit(1);
    for (;;) ::pause();
  }
  ::close(pipefd[1]);
  char c = 0;
  assert_int_equal(::read(pipefd[0], &c, 1), 1);
  ::close(pipefd[0]);
  assert_int_equal(::kill(pid, SIGKILL), 0);
  int status = 0;
  assert_int_equal(::waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status));

  const std::string b = SnapshotName(2, kMs), c3 = SnapshotName(3, kMs), d = SnapshotName(4, kMs);
  assert_true(Exists(dir + "/snapshots/" + d + "/segments"));
  ExpectNames(store.Candidates(), {a});
  std::string why;
  Result<LoadedSnapshot> r = store.Load(d, &why);
  assert_int_equal(static_cast<int>(r.code()), static_cast<int>(ErrorCode::FILE_NOT_FOUND));
  ExpectContains(why, dir + "/snapshots/" + d + "/descriptor");
  assert_string_equal(ReadFile(dir + "/latest").c_str(), (a + "\n").c_str());

  store.Retain(1);  // all three are newer than a: they may be in progress
  assert_true(Exists(dir + "/snapshots/" + b));
  assert_true(Exists(dir + "/snapshots/" + c3));
  assert_true(Exists(dir + "/snapshots/" + d));
  assert_int_equal(store.OldestRetainedSequence(), 1);

  const std::string e = WriteSnapshot(dir, 3, kMs + 1, Standard(5));  // newer than b and c3
  store.Retain(5);
  assert_false(Exists(dir + "/snapshots/" + b));
  assert_false(Exists(dir + "/snapshots/" + c3));
  assert_true(Exists(dir + "/snapshots/" + d));  // sequence 4: still newer than e
  ExpectNames(store.Candidates(), {e, a});
  ExpectLoads(store, a, Standard(1));

  // The parent's way of cleaning up after a child it gave up on.
  assert_int_equal(static_cast<int>(SnapshotStore::RemoveSnapshotDir(dir + "/snapshots/" + d)), 0);
  assert_false(Exists(dir + "/snapshots/" + d));
  assert_int_equal(static_cast<int>(SnapshotStore::RemoveSnapshotDir(dir + "/snapshots/" + d)),
                   static_cast<int>(ErrorCode::FILE_NOT_FOUND));
  // Anything that is not dir/snapshots/<name> is refused.
  for (const std::string& p : {dir, dir + "/snapshots", dir + "/snapshots/" + e + "/segments",
                               dir + "/" + e, std::string("/"), std::string("")}) {
    assert_int_equal(static_cast<int>(SnapshotStore::RemoveSnapshotDir(p)),
                     static_cast<int>(ErrorCode::INVALID_PARAMS));
  }
  ExpectNames(store.Candidates(), {e, a});
  ExpectLoads(store, e, Standard(5));
}

// The writer where the master uses it: in a child forked from a process with other
// threads busy (here, allocating), which exits with _exit.
void test_forked_child(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  const std::string payload = RandomBytes(4 << 20, 9);
  std::atomic<bool> stop{false};
  std::thread busy([&stop] {
    std::vector<std::string> junk;
    while (!stop.load()) {
      junk.emplace_back(1000, 'j');
      if (junk.size() > 1000) junk.clear();
    }
  });
  pid_t pid = ::fork();
  if (pid == 0) {
    SnapshotWriter w(dir, 77, kMs + 7);
    std::string error;
    ErrorCode rc = w.Begin(&error);
    if (rc == ErrorCode::OK) rc = w.OpenPayload("segments", &error);
    for (size_t at = 0; rc == ErrorCode::OK && at < payload.size(); at += 65536) {
      rc = w.Append(std::string_view(payload).substr(at, 65536), &error);
    }
    if (rc == ErrorCode::OK) rc = w.ClosePayload(&error);
    if (rc == ErrorCode::OK) rc = w.Publish({{"objects", "1000000"}}, &error);
    _exit(rc == ErrorCode::OK ? 0 : 1);
  }
  stop = true;
  busy.join();
  assert_true(pid > 0);
  int status = 0;
  assert_int_equal(::waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  const std::string name = SnapshotName(77, kMs + 7);
  ExpectNames(store.Candidates(), {name});
  ExpectLoads(store, name, {{"segments", payload}});
  std::string why;
  assert_string_equal(store.Load(name, &why).value().info.extra.at("objects").c_str(), "1000000");
}

// Misuse is INVALID_PARAMS and changes nothing; I/O failures name the file and stick.
void test_writer_errors(void** state) {
  const std::string& dir = Dir(state);
  std::string error;
  const auto kBad = static_cast<int>(ErrorCode::INVALID_PARAMS);
  {
    SnapshotWriter w(dir, 5, kMs);
    assert_int_equal(static_cast<int>(w.OpenPayload("a", &error)), kBad);
    assert_int_equal(static_cast<int>(w.Publish({}, &error)), kBad);
    ExpectOk(w.Begin(&error), error);
    assert_int_equal(static_cast<int>(w.Begin(&error)), kBad);
    assert_int_equal(static_cast<int>(w.Append("x", &error)), kBad);
    assert_int_equal(static_cast<int>(w.ClosePayload(&error)), kBad);
    for (const char* name :
         {"", "manifest", "descriptor", "a b", "../x", "x/y", ".hidden", "new\nline"}) {
      assert_int_equal(static_cast<int>(w.OpenPayload(name, &error)), kBad);
    }
    assert_int_equal(static_cast<int>(w.OpenPayload(std::string(129, 'a'), &error)), kBad);
    ExpectOk(w.OpenPayload(std::string(128, 'a'), &error), error);
    assert_int_equal(static_cast<int>(w.OpenPayload("b", &error)), kBad);
    assert_int_equal(static_cast<int>(w.Publish({}, &error)), kBad);
    ExpectOk(w.ClosePayload(&error), error);
    assert_int_equal(static_cast<int>(w.OpenPayload(std::string(128, 'a'), &error)), kBad);
    ExpectOk(w.OpenPayload("segments-1.v2_x", &error), error);
    ExpectOk(w.Append("abc", &error), error);
    ExpectOk(w.ClosePayload(&error), error);
    const Extra bad_extras[] = {
        {{"sequence", "1"}},
        {{"crc32c", "00000000"}},
        {{"format", "2"}},
        {{"a b", "1"}},
        {{"", "1"}},
        {{"k", "new\nline"}},
        {{"k", "\r"}},
        {{"k", "1"}, {"k", "2"}},
        {{"k", std::string(513, 'v')}},
    };
    for (const Extra& extra : bad_extras) {
      assert_int_equal(static_cast<int>(w.Publish(extra, &error)), kBad);
    }
    assert_false(Exists(w.path() + "/manifest"));
    ExpectOk(w.Publish({{"k", ""}, {"k2", std::string(512, 'v')}}, &error), error);
    assert_int_equal(static_cast<int>(w.Publish({}, &error)), kBad);
    SnapshotStore store(dir);
    std::string why;
    Result<LoadedSnapshot> r = store.Load(w.name(), &why);
    if (!r.ok()) fail_msg("%s", why.c_str());
    assert_string_equal(r.value().info.extra.at("k").c_str(), "");
    assert_string_equal(r.value().payloads.at("segments-1.v2_x").c_str(), "abc");
  }
  {
    SnapshotWriter w(dir, 5, kMs);  // the same name again
    assert_true(w.path().empty());
    assert_int_equal(static_cast<int>(w.Begin(&error)),
                     static_cast<int>(ErrorCode::FILE_OPEN_FAIL));
    ExpectContains(error, dir + "/snapshots/" + w.name() + " already exists");
    assert_true(w.path().empty());  // not this writer's to remove
    assert_int_equal(static_cast<int>(w.OpenPayload("a", &error)),
                     static_cast<int>(ErrorCode::FILE_OPEN_FAIL));  // sticky
    ExpectContains(error, "failed earlier");
  }
  {
    SnapshotWriter w(dir, 6, -1);
    assert_int_equal(static_cast<int>(w.Begin(&error)), kBad);
  }
  {
    const std::string file = dir + "/plain-file";
    WriteFile(file, "x");
    SnapshotWriter w(file, 6, kMs);  // dir is a file
    assert_int_equal(static_cast<int>(w.Begin(&error)),
                     static_cast<int>(ErrorCode::FILE_OPEN_FAIL));
    ExpectContains(error, file + "/snapshots");
    ExpectContains(error, "ENOTDIR");
  }
  if (::geteuid() != 0) {  // root ignores permissions
    SnapshotWriter w(dir, 7, kMs);
    ExpectOk(w.Begin(&error), error);
    assert_int_equal(::chmod(w.path().c_str(), 0555), 0);
    assert_int_equal(static_cast<int>(w.OpenPayload("a", &error)),
                     static_cast<int>(ErrorCode::FILE_OPEN_FAIL));
    ExpectContains(error, w.path() + "/a");
    ExpectContains(error, "EACCES");
    assert_int_equal(::chmod(w.path().c_str(), 0755), 0);
  }
}

void test_names(void**) {
  uint64_t seq = 0;
  int64_t ms = 0;
  assert_string_equal(SnapshotName(0, 0).c_str(), "00000000000000000000-0");
  assert_string_equal(SnapshotName(UINT64_MAX, INT64_MAX).c_str(),
                      "18446744073709551615-9223372036854775807");
  assert_true(mooncake::ParseSnapshotName(SnapshotName(123, kMs), &seq, &ms));
  assert_int_equal(seq, 123);
  assert_int_equal(ms, kMs);
  assert_true(mooncake::ParseSnapshotName("18446744073709551615-9223372036854775807", &seq, &ms));
  assert_true(seq == UINT64_MAX && ms == INT64_MAX);
  // Names sort as sequences do.
  assert_true(SnapshotName(9, kMs) < SnapshotName(10, 0));
  for (const char* bad :
       {"", "1-2", "0000000000000000000-1", "000000000000000000001-1", "00000000000000000001-",
        "00000000000000000001-01", "00000000000000000001--1", "00000000000000000001-1.invalid",
        "00000000000000000001_1", "18446744073709551616-1",
        "00000000000000000001-9223372036854775808", "0000000000000000000a-1",
        "00000000000000000001-1 ", "00000000000000000001-+1"}) {
    if (mooncake::ParseSnapshotName(bad, &seq, &ms)) fail_msg("accepted \"%s\"", bad);
  }
}

// Directories in snapshots/ that are not snapshots are ignored; HasAny sees them all.
void test_stray_entries(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  assert_int_equal(::mkdir(dir.c_str(), 0755), 0);
  assert_false(store.HasAny());
  assert_int_equal(::mkdir((dir + "/snapshots").c_str(), 0755), 0);
  assert_false(store.HasAny());
  WriteFile(dir + "/snapshots/README", "hello");
  assert_true(store.HasAny());
  assert_true(store.Candidates().empty());
  const std::string a = WriteSnapshot(dir, 1, kMs, Standard(1));
  assert_int_equal(::mkdir((dir + "/snapshots/not-a-snapshot").c_str(), 0755), 0);
  WriteFile(dir + "/snapshots/" + SnapshotName(9, kMs), "a file, not a directory");
  ExpectNames(store.Candidates(), {a});
  store.Retain(1);
  assert_true(Exists(dir + "/snapshots/README"));
  assert_true(Exists(dir + "/snapshots/not-a-snapshot"));
  ExpectNames(store.Candidates(), {a});
  // Nothing published: an incomplete directory is left alone (it may be in progress).
  const std::string dir2 = dir + "/second";
  {
    SnapshotWriter w(dir2, 1, kMs);
    std::string error;
    ExpectOk(w.Begin(&error), error);
  }
  SnapshotStore store2(dir2);
  assert_true(store2.HasAny());
  store2.Retain(1);
  assert_true(Exists(dir2 + "/snapshots/" + SnapshotName(1, kMs)));
  assert_true(store2.Candidates().empty());
  assert_int_equal(store2.OldestRetainedSequence(), 0);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_candidates_and_retain, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_latest_names_an_older_snapshot, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_mark_invalid, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_unpublished_writer, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_forked_child, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_writer_errors, Setup, Teardown),
      cmocka_unit_test(test_names),
      cmocka_unit_test_setup_teardown(test_stray_entries, Setup, Teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
