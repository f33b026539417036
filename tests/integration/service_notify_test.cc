// sd_notify from the real mooncake-master and mooncaked (common/base/service_notify.h,
// master/server/master_readiness.h), as systemd's Type=notify units of deploy/ hear it: each is
// started with NOTIFY_SOCKET naming a datagram socket this test owns, as systemd does.
//   - the master says READY=1 once its RPC port listens (a connect right after succeeds);
//   - the daemon says first which master it is registering with, then READY=1 once its
//     socket accepts (a connect right after succeeds: ready means serving, not started);
//   - SIGTERM: STOPPING=1 from each, and a clean exit;
//   - with HA: the elected master is ready as the leader, the other as a standby that
//     follows it; when the leader stops, the standby's STATUS= says it leads now (with no
//     second READY=1).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/etcd_process.h"
#include "tests/harness/process_harness.h"

namespace harness = mooncake::testing;
using Clock = std::chrono::steady_clock;

namespace {

// Generous: the machine may be busy with other work; nothing here waits on a clock.
constexpr int kReadyTimeoutMs = 60000;

// The service manager's end of NOTIFY_SOCKET: a datagram socket bound at path.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~NotifyListener() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // The next message with a line that begins with `start` (e.g. "READY=1"), every
  // message before it appended to *seen; "" when none comes within timeout_ms.
  std::string WaitFor(const std::string& start, int timeout_ms, std::string* seen) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now()).count();
      if (left <= 0) return "";
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      std::string message(buf, static_cast<size_t>(n));
      if (("\n" + message).find("\n" + start) != std::string::npos) return message;
      *seen += message + "\n";
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Starts argv with NOTIFY_SOCKET=notify_path in its environment (and only in its own).
bool StartNotified(harness::ChildProcess* child, const std::vector<std::string>& argv,
                   const std::string& log_path, const std::string& notify_path) {
  setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
  bool started = child->Start(argv, log_path);
  unsetenv("NOTIFY_SOCKET");
  return started;
}

bool ConnectsTcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

bool ConnectsUnix(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> MasterArgv(int port, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {harness::BuildPath("master/mooncake-master"),
                                   "--rpc_address", "127.0.0.1", "--rpc_port",
                                   std::to_string(port), "--cluster_key_file",
                                   harness::ClusterKeyFile(), "--metrics_port", "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

void test_master_and_daemon_ready_and_stopping(void**) {
  const std::string dir = harness::MakeTempDir("mc-notify-");
  NotifyListener master_notify(dir + "/master.notify");
  NotifyListener daemon_notify(dir + "/daemon.notify");
  assert_true(master_notify.ok());
  assert_true(daemon_notify.ok());

  harness::ChildProcess master;
  const int port = harness::FreeTcpPort();
  assert_true(StartNotified(&master, MasterArgv(port, {}), dir + "/master.log",
                            master_notify.path()));
  std::string seen;
  std::string ready = master_notify.WaitFor("READY=1", kReadyTimeoutMs, &seen);
  assert_true(Contains(ready, "STATUS=serving on 127.0.0.1:" + std::to_string(port)));
  assert_true(ConnectsTcp(port));  // ready means listening

  harness::ChildProcess daemon;
  const std::string socket_path = dir + "/d.sock";
  std::vector<std::string> daemon_argv = {
      harness::BuildPath("daemon/mooncaked"), "--metrics_port", "0", "--master",
      "127.0.0.1:" + std::to_string(port), "--socket", socket_path, "--hostname", "127.0.0.1",
      "--global_segment_size", "16MB", "--cluster_key_file", harness::ClusterKeyFile()};
  assert_true(StartNotified(&daemon, daemon_argv, dir + "/daemon.log", daemon_notify.path()));
  seen.clear();
  ready = daemon_notify.WaitFor("READY=1", kReadyTimeoutMs, &seen);
  assert_false(ready.empty());
  // Before READY=1, it said which master it was registering with.
  assert_true(Contains(seen, "STATUS=registering with the master at 127.0.0.1:" +
                                 std::to_string(port)));
  assert_true(Contains(ready, "STATUS=serving " + socket_path));
  assert_true(ConnectsUnix(socket_path));  // at once: the socket accepted before READY=1

  kill(daemon.pid(), SIGTERM);  // the signal only: STOPPING=1 comes before the exit
  seen.clear();
  assert_true(Contains(daemon_notify.WaitFor("STOPPING=1", kReadyTimeoutMs, &seen), "STATUS="));
  int status = daemon.Wait(kReadyTimeoutMs);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  kill(master.pid(), SIGTERM);
  seen.clear();
  assert_false(master_notify.WaitFor("STOPPING=1", kReadyTimeoutMs, &seen).empty());
  status = master.Wait(kReadyTimeoutMs);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(dir);
}

void test_ha_leader_and_standby_ready(void**) {
  const std::string dir = harness::MakeTempDir("mc-notify-ha-");
  mooncake::testing::EtcdProcess etcd;
  assert_int_equal(mkdir((dir + "/etcd").c_str(), 0700), 0);
  assert_true(etcd.Start(dir + "/etcd"));
  std::vector<std::string> ha = {"--enable_ha", "--etcd_endpoints", etcd.endpoint(),
                                 "--cluster_id", "notify", "--enable_snapshot",
                                 "--oplog_mode", "relaxed", "--snapshot_dir"};

  // The first master is elected: ready as the leader.
  NotifyListener first_notify(dir + "/first.notify");
  assert_true(first_notify.ok());
  harness::ChildProcess first;
  const int first_port = harness::FreeTcpPort();
  std::vector<std::string> flags = ha;
  assert_int_equal(mkdir((dir + "/first").c_str(), 0700), 0);  // nothing creates it
  flags.push_back(dir + "/first");
  assert_true(StartNotified(&first, MasterArgv(first_port, flags), dir + "/first.log",
                            first_notify.path()));
  std::string seen;
  std::string ready = first_notify.WaitFor("READY=1", kReadyTimeoutMs, &seen);
  assert_true(Contains(ready, "STATUS=leader of term "));
  assert_true(ConnectsTcp(first_port));

  // The second finds it leading: ready as a standby following it.
  NotifyListener second_notify(dir + "/second.notify");
  assert_true(second_notify.ok());
  harness::ChildProcess second;
  const int second_port = harness::FreeTcpPort();
  flags = ha;
  assert_int_equal(mkdir((dir + "/second").c_str(), 0700), 0);  // nothing creates it
  flags.push_back(dir + "/second");
  assert_true(StartNotified(&second, MasterArgv(second_port, flags), dir + "/second.log",
                            second_notify.path()));
  seen.clear();
  ready = second_notify.WaitFor("READY=1", kReadyTimeoutMs, &seen);
  assert_true(Contains(ready, "STATUS=standby on 127.0.0.1:" + std::to_string(second_port) +
                                  ", following 127.0.0.1:" + std::to_string(first_port)));

  // The leader resigns at SIGTERM; the standby takes over and says so, READY=1 not again.
  kill(first.pid(), SIGTERM);
  seen.clear();
  assert_false(first_notify.WaitFor("STOPPING=1", kReadyTimeoutMs, &seen).empty());
  int status = first.Wait(kReadyTimeoutMs);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  seen.clear();
  std::string leading = second_notify.WaitFor("STATUS=leader of term ", kReadyTimeoutMs, &seen);
  assert_false(leading.empty());
  assert_false(Contains(leading, "READY=1"));
  second.Stop(SIGTERM, kReadyTimeoutMs);
  etcd.Stop();
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(dir);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_master_and_daemon_ready_and_stopping),
      cmocka_unit_test(test_ha_leader_and_standby_ready),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
