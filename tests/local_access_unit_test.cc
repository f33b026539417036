// The admission rule of the daemon's Unix socket (daemon/base/local_access.h) on its own:
//  - --allowed_uids / --allowed_gids as numbers and names, blanks and repeats; bad names,
//    empty items and ids out of range refused with the flag named;
//  - root and the daemon's uid always admitted; the socket's group by default, its members
//    by primary or supplementary group; --allowed_gids replacing it; unknown credentials
//    refused;
//  - the credentials a real socket reports, of a child that dropped to another uid with
//    chosen supplementary groups (needs root; that part is skipped otherwise);
//  - the refusal log's throttle: a burst, one a second, the count of lines left out.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/base/local_access.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using mooncake::LocalAccess;
using mooncake::LocalAccessRules;
using mooncake::LocalPeer;
using mooncake::RefusalThrottle;
using Verdict = LocalAccess::Verdict;
namespace harness = mooncake::testing;

namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

LocalPeer Peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  LocalPeer peer;
  peer.pid = 4242;
  peer.uid = uid;
  peer.gid = gid;
  peer.groups = std::move(groups);
  return peer;
}

void test_numbers_and_names(void**) {
  LocalAccessRules rules;
  std::string error;
  assert_true(mooncake::ResolveLocalAccessRules(" 12, nobody,root ,12", "nogroup, 7", &rules,
                                                &error));
  assert_true(rules.uids == (std::vector<uid_t>{12, 65534, 0}));  // repeats dropped
  assert_true(rules.gids == (std::vector<gid_t>{65534, 7}));
  assert_true(rules.gids_given);
  // A number needs no passwd entry; the largest valid id is 4294967294.
  assert_true(mooncake::ResolveLocalAccessRules("4294967294", "", &rules, &error));
  assert_true(rules.uids == (std::vector<uid_t>{4294967294u}));
  assert_false(rules.gids_given);
  assert_true(rules.gids.empty());
  // Nothing given: nothing listed, and the socket's group stands.
  assert_true(mooncake::ResolveLocalAccessRules("", "  ", &rules, &error));
  assert_true(rules.uids.empty());
  assert_false(rules.gids_given);
}

void test_bad_items_name_the_flag(void**) {
  struct Case {
    const char* uids;
    const char* gids;
    const char* flag;
    const char* says;
  } cases[] = {
      {"no-such-user-mc12", "", "--allowed_uids", "user no-such-user-mc12 is unknown"},
      {"", "no-such-group-mc12", "--allowed_gids", "group no-such-group-mc12 is unknown"},
      {"0,,1", "", "--allowed_uids", "an empty item"},
      {"", "5,", "--allowed_gids", "an empty item"},
      {"4294967295", "", "--allowed_uids", "is not a valid uid"},
      {"", "99999999999", "--allowed_gids", "is not a valid gid"},
      {"-1", "", "--allowed_uids", "user -1 is unknown"},  // not a number: a name
  };
  for (const Case& c : cases) {
    LocalAccessRules rules;
    std::string error;
    assert_false(mooncake::ResolveLocalAccessRules(c.uids, c.gids, &rules, &error));
    if (!Contains(error, c.flag) || !Contains(error, c.says)) {
      fail_msg("uids \"%s\" gids \"%s\": \"%s\"", c.uids, c.gids, error.c_str());
    }
  }
}

void test_default_rule(void**) {
  // A daemon running as uid 1000 whose socket has group 2000.
  LocalAccess access(LocalAccessRules(), 1000, 2000);
  assert_int_equal(access.Check(Peer(0, 0)), Verdict::kRoot);
  assert_int_equal(access.Check(Peer(1000, 1000)), Verdict::kDaemonUid);
  assert_int_equal(access.Check(Peer(3000, 2000)), Verdict::kAllowedGroup);
  assert_int_equal(access.Check(Peer(3000, 3000, {5, 2000})), Verdict::kAllowedGroup);
  assert_int_equal(access.Check(Peer(3000, 3000, {5, 6})), Verdict::kRefused);
  assert_int_equal(access.Check(Peer(3000, 3000)), Verdict::kRefused);
  // Credentials the kernel could not give: refused, whatever the gid says.
  assert_int_equal(access.Check(Peer(LocalPeer::kUnknownUid, 2000)), Verdict::kRefused);
  assert_int_equal(access.Check(LocalPeer()), Verdict::kRefused);
}

void test_allowed_lists(void**) {
  LocalAccessRules rules;
  rules.uids = {3000};
  rules.gids = {4000, 4001};
  rules.gids_given = true;
  LocalAccess access(rules, 1000, 2000);
  assert_int_equal(access.Check(Peer(3000, 3000)), Verdict::kAllowedUid);
  assert_int_equal(access.Check(Peer(3001, 4001)), Verdict::kAllowedGroup);
  assert_int_equal(access.Check(Peer(3001, 3001, {4000})), Verdict::kAllowedGroup);
  // --allowed_gids replaced the socket's group.
  assert_int_equal(access.Check(Peer(3001, 2000)), Verdict::kRefused);
  assert_int_equal(access.Check(Peer(3001, 3001, {2000})), Verdict::kRefused);
  assert_int_equal(access.Check(Peer(0, 5)), Verdict::kRoot);
  assert_int_equal(access.Check(Peer(1000, 5)), Verdict::kDaemonUid);

  // Only uids listed: the socket's group still stands.
  LocalAccessRules uids_only;
  uids_only.uids = {3000};
  LocalAccess with_group(uids_only, 1000, 2000);
  assert_int_equal(with_group.Check(Peer(3001, 2000)), Verdict::kAllowedGroup);
  assert_int_equal(with_group.Check(Peer(3000, 9)), Verdict::kAllowedUid);
}

void test_describe(void**) {
  LocalAccessRules rules;
  std::string error;
  assert_true(mooncake::ResolveLocalAccessRules("nobody", "", &rules, &error));
  std::string text = LocalAccess(rules, 1000, 65534).Describe();
  if (!Contains(text, "root, uid 1000") || !Contains(text, "(the daemon's)") ||
      !Contains(text, "uid 65534 (nobody)") ||
      !Contains(text, "members of group 65534 (nogroup)")) {
    fail_msg("%s", text.c_str());
  }
  assert_string_equal(LocalAccess(LocalAccessRules(), 0, 0).Describe().c_str(),
                      "root, members of group 0 (root)");
  assert_string_equal(LocalAccess::VerdictName(Verdict::kAllowedUid), "--allowed_uids");
  assert_string_equal(LocalAccess::VerdictName(Verdict::kRefused), "refused");
}

// A child that becomes uid 65534, gid 1, groups {65534, 7} connects to path.
int ConnectAsOther(const std::string& path) {
  gid_t groups[] = {65534, 7};
  if (setgroups(2, groups) != 0 || setgid(1) != 0 || setuid(65534) != 0) return 10;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 11;
  char byte;
  return read(fd, &byte, 1) == 0 ? 0 : 12;  // until the parent has looked
}

void test_credentials_of_a_real_socket(void**) {
  int pair[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  LocalPeer self = mooncake::ReadLocalPeer(pair[0]);
  assert_int_equal(self.pid, getpid());
  assert_int_equal(self.uid, geteuid());
  assert_int_equal(self.gid, getegid());
  std::vector<gid_t> mine(static_cast<size_t>(getgroups(0, nullptr)));
  assert_int_equal(getgroups(static_cast<int>(mine.size()), mine.data()), mine.size());
  std::sort(mine.begin(), mine.end());
  std::sort(self.groups.begin(), self.groups.end());
  assert_true(self.groups == mine);
  close(pair[0]);
  close(pair[1]);
  assert_int_equal(mooncake::ReadLocalPeer(-1).uid, LocalPeer::kUnknownUid);

  if (geteuid() != 0) {
    std::printf("not root: the part with another uid is skipped\n");
    return;
  }
  std::string dir = harness::MakeTempDir("local-access-");
  assert_int_equal(chmod(dir.c_str(), 0755), 0);
  std::string path = dir + "/s";
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  assert_int_equal(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  assert_int_equal(chmod(path.c_str(), 0666), 0);
  assert_int_equal(listen(listener, 1), 0);
  std::fflush(nullptr);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(ConnectAsOther(path));
  int fd = accept(listener, nullptr, nullptr);
  assert_true(fd >= 0);
  LocalPeer other = mooncake::ReadLocalPeer(fd);
  close(fd);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  close(listener);
  harness::RemoveTree(dir);
  assert_int_equal(other.pid, child);
  assert_int_equal(other.uid, 65534);
  assert_int_equal(other.gid, 1);
  std::sort(other.groups.begin(), other.groups.end());
  assert_true(other.groups == (std::vector<gid_t>{7, 65534}));
  // And the rule reads them: in group 7 through a supplementary group only.
  LocalAccess access(LocalAccessRules(), 1000, 7);
  assert_int_equal(access.Check(other), Verdict::kAllowedGroup);
  assert_int_equal(LocalAccess(LocalAccessRules(), 1000, 8).Check(other), Verdict::kRefused);
  assert_string_equal(mooncake::LocalPeerText(other).c_str(),
                      ("pid " + std::to_string(child) + " uid 65534 gid 1").c_str());
}

void test_refusal_throttle(void**) {
  using Clock = RefusalThrottle::Clock;
  RefusalThrottle throttle;
  Clock::time_point t0 = Clock::now();
  uint64_t unlogged = 99;
  for (int i = 0; i < RefusalThrottle::kBurst; ++i) {
    assert_true(throttle.Allow(t0, &unlogged));
    assert_int_equal(unlogged, 0);
  }
  for (int i = 0; i < 100; ++i) {
    assert_false(throttle.Allow(t0 + std::chrono::milliseconds(i), &unlogged));
  }
  // A second on, one line, which counts the 100 left out.
  assert_true(throttle.Allow(t0 + std::chrono::milliseconds(1000), &unlogged));
  assert_int_equal(unlogged, 100);
  assert_false(throttle.Allow(t0 + std::chrono::milliseconds(1500), &unlogged));
  // A long quiet time refills no more than the burst.
  Clock::time_point later = t0 + std::chrono::hours(1);
  for (int i = 0; i < RefusalThrottle::kBurst; ++i) assert_true(throttle.Allow(later, &unlogged));
  assert_false(throttle.Allow(later, &unlogged));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_numbers_and_names),
      cmocka_unit_test(test_bad_items_name_the_flag),
      cmocka_unit_test(test_default_rule),
      cmocka_unit_test(test_allowed_lists),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_credentials_of_a_real_socket),
      cmocka_unit_test(test_refusal_throttle),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
