// A mooncake-master that a benchmark starts, times and stops: its process, port, flags
// and log file. Start says how long the master took to accept connections, which is the
// restore time when it restores (it listens only once the restore is done); Kill is a
// crash as far as its files are concerned; LogLines reads what the last start logged.
//
// At most one runs at a time in a benchmark that uses it (the figures should be the
// master's alone on the machine), and KillRunning (for a Die hook) knows which one that is.
#ifndef MOONCAKE_BENCH_SPAWNED_MASTER_H_
#define MOONCAKE_BENCH_SPAWNED_MASTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tests/harness/process_harness.h"

namespace mooncake {
namespace bench {

class SpawnedMaster {
 public:
  // binary: the mooncake-master to run; flags: after --rpc_address 127.0.0.1 --rpc_port P
  // --cluster_key_file testing::ClusterKeyFile() (which the benchmark's connections
  // prove: SetClusterKeyFile); its stdout and stderr are appended to log_path.
  SpawnedMaster(std::string binary, std::vector<std::string> flags, std::string log_path,
                int64_t start_timeout_ms);
  ~SpawnedMaster();  // SIGKILL if still running
  SpawnedMaster(const SpawnedMaster&) = delete;
  SpawnedMaster& operator=(const SpawnedMaster&) = delete;

  // Starts it on port (0: a free one, retried when another process takes it first) and
  // waits until it accepts connections; returns the seconds from fork until then. Dies,
  // with the log's tail, when it exits first or is not up within start_timeout_ms.
  double Start(int port = 0);
  // SIGKILL; dies unless the master died of it.
  void Kill();
  // SIGTERM; a master that does not exit 0 within 30 s is reported on stderr.
  void Stop();

  // The lines the last Start's process logged that contain needle, in order.
  std::vector<std::string> LogLines(const std::string& needle) const;

  int port() const { return port_; }
  const testing::ChildProcess& process() const { return process_; }
  const std::string& log_path() const { return log_path_; }

  // SIGKILLs the current master (the last one started and not stopped since), if it still
  // runs, and prints the last lines of its log on stderr: what a failed run does before it
  // removes the master's files.
  static void KillRunning();

 private:
  const std::string binary_;
  const std::vector<std::string> flags_;
  const std::string log_path_;
  const int64_t start_timeout_ms_;
  testing::ChildProcess process_;
  int port_ = 0;
  uint64_t log_start_ = 0;  // the log's size when the last Start began
};

}  // namespace bench
}  // namespace mooncake

#endif  // MOONCAKE_BENCH_SPAWNED_MASTER_H_
