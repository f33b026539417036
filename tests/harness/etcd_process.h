/* A real etcd (Debian's /usr/bin/etcd, or $MC_ETCD_BINARY) for tests and benchmarks: one
 * member on 127.0.0.1 with free client and peer ports, its data in <dir>/etcd-data and its
 * output in <dir>/etcd.log. Stop, kill -9, SIGSTOP/SIGCONT, and restart on the same ports
 * with the same data (leases and keys survive a restart, as etcd keeps them on disk).
 * A C interface (for the C suites and tests/harness/cluster.h) over the C++ class below. */
#ifndef MOONCAKE_TESTS_ETCD_PROCESS_H_
#define MOONCAKE_TESTS_ETCD_PROCESS_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_etcd mc_etcd;

/* Starts etcd with its data and log under dir (NULL: a fresh temp dir of its own, removed
 * by mc_etcd_destroy unless MC_KEEP_TEST_DIR is set) and returns once it answers GET
 * /health (30 s at most); NULL on failure, after printing why and where the log is. */
mc_etcd *mc_etcd_start(const char *dir);
/* "127.0.0.1:<client port>": what --etcd_endpoints and EtcdClient take. */
const char *mc_etcd_endpoint(const mc_etcd *e);
int mc_etcd_client_port(const mc_etcd *e);
const char *mc_etcd_log(const mc_etcd *e);
/* SIGTERM (or SIGKILL for kill9) and wait for the exit (10 s at most, then SIGKILL);
 * 0 once it has exited, -1 when it was not running. */
int mc_etcd_stop(mc_etcd *e);
int mc_etcd_kill9(mc_etcd *e);
/* SIGSTOP, returning once every thread has stopped; SIGCONT. 0 on success. */
int mc_etcd_pause(mc_etcd *e);
int mc_etcd_resume(mc_etcd *e);
/* Starts it again (stopped or killed first if it still runs) on the same ports and data
 * dir; 0 once it answers /health. */
int mc_etcd_restart(mc_etcd *e);
/* Kills it (if running) and frees e; removes its own temp dir. NULL is a no-op. */
void mc_etcd_destroy(mc_etcd *e);

#ifdef __cplusplus
}

#include <csignal>
#include <string>

#include "tests/harness/process_harness.h"

namespace mooncake {
namespace testing {

class EtcdProcess {
 public:
  EtcdProcess() = default;
  ~EtcdProcess();  // kills etcd; removes an own temp dir (unless MC_KEEP_TEST_DIR)
  EtcdProcess(const EtcdProcess &) = delete;
  EtcdProcess &operator=(const EtcdProcess &) = delete;

  // As mc_etcd_start: dir "" for a temp dir of its own. The ports were free a moment ago;
  // when etcd exits at once (one was taken since) others are tried.
  bool Start(const std::string &dir = "");
  bool Restart();
  int Stop(int sig = SIGTERM);  // the exit status as ChildProcess::Stop returns it
  bool Pause() { return process_.Pause(); }
  void Resume() { process_.Resume(); }
  bool running() const { return process_.running(); }
  // Polls GET /health until it says "true" or timeout_ms passes.
  bool WaitHealthy(int timeout_ms);

  const std::string &endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  const std::string &log_path() const { return log_path_; }
  const std::string &dir() const { return dir_; }

 private:
  bool Launch();

  ChildProcess process_;
  std::string dir_, log_path_, endpoint_;
  bool own_dir_ = false;
  int client_port_ = 0, peer_port_ = 0;
};

}  // namespace testing
}  // namespace mooncake

#endif /* __cplusplus */

#endif /* MOONCAKE_TESTS_ETCD_PROCESS_H_ */
