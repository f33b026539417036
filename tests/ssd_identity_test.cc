// The SSD tier's IDENTITY file (daemon/ssd_store/ssd_identity.h): what a restarted daemon mounts its
// LOCAL_DISK segment with again. A written identity reads back, is private (0600) and
// replaces the old one whole; a missing file, a torn one, another version or trailing
// bytes are never trusted (the daemon draws a new identity then).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/base/error_code.h"
#include "daemon/ssd_store/ssd_identity.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

namespace harness = mooncake::testing;
using mooncake::ErrorCode;
using mooncake::ReadSsdIdentity;
using mooncake::SsdIdentity;
using mooncake::SsdIdentityPath;
using mooncake::WriteSsdIdentity;

namespace {

void WriteFile(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
}

void test_written_identity_reads_back_private(void** state) {
  (void)state;
  std::string dir = harness::MakeTempDir("mc-ssd-identity-");
  SsdIdentity got;
  std::string error;
  assert_int_equal(ReadSsdIdentity(dir, &got, &error), ErrorCode::FILE_NOT_FOUND);
  SsdIdentity first{1234567890123LL, 987654321987LL};
  assert_int_equal(WriteSsdIdentity(dir, first, &error), ErrorCode::OK);
  assert_int_equal(ReadSsdIdentity(dir, &got, &error), ErrorCode::OK);
  assert_int_equal(got.segment_id, first.segment_id);
  assert_int_equal(got.incarnation, first.incarnation);
  struct stat st;
  assert_int_equal(stat(SsdIdentityPath(dir).c_str(), &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  // A temp file a crash left behind does not stand in the way, and is not left behind.
  WriteFile(SsdIdentityPath(dir) + ".tmp", "half");
  SsdIdentity second{INT64_MAX, 1};
  assert_int_equal(WriteSsdIdentity(dir, second, &error), ErrorCode::OK);
  assert_int_equal(ReadSsdIdentity(dir, &got, &error), ErrorCode::OK);
  assert_int_equal(got.segment_id, INT64_MAX);
  assert_int_equal(got.incarnation, 1);
  assert_int_not_equal(access((SsdIdentityPath(dir) + ".tmp").c_str(), F_OK), 0);
  harness::RemoveTree(dir);
}

void test_damaged_identity_is_not_trusted(void** state) {
  (void)state;
  std::string dir = harness::MakeTempDir("mc-ssd-identity-");
  const char* bad[] = {
      "",                                           // empty
      "mooncake-ssd-identity 1 12",                 // torn
      "mooncake-ssd-identity 2 12 34\n",            // another version
      "mooncake-ssd-identity 1 0 34\n",             // not a segment id
      "mooncake-ssd-identity 1 12 -34\n",           // not an incarnation
      "mooncake-ssd-identity 1 12 34\nextra",       // trailing bytes
      "something-else 1 12 34\n",                   // not ours
      "mooncake-ssd-identity 1 99999999999999999999 34\n",  // out of range
  };
  for (const char* text : bad) {
    WriteFile(SsdIdentityPath(dir), text);
    SsdIdentity got;
    std::string error;
    assert_int_equal(ReadSsdIdentity(dir, &got, &error), ErrorCode::DESERIALIZE_FAIL);
    assert_false(error.empty());
  }
  harness::RemoveTree(dir);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_written_identity_reads_back_private),
      cmocka_unit_test(test_damaged_identity_is_not_trusted),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
