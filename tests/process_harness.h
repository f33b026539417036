// Starting and stopping the real binaries from integration tests: free ports, temp dirs,
// child processes with their output in a log file, and waiting until they serve.
#ifndef MOONCAKE_TESTS_PROCESS_HARNESS_H_
#define MOONCAKE_TESTS_PROCESS_HARNESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace apache::thrift::transport {
class TTransport;
}  // namespace apache::thrift::transport

namespace mooncake {
namespace rpc {
class MasterServiceClient;
}
namespace testing {

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeTcpPort();

// A TCP socket listening on 127.0.0.1 at a port the kernel chose (*port), for tests that
// serve in process; -1 when it cannot be had.
int ListenOnLoopback(int* port);

// $MC_BUILD_DIR/relative (CTest sets MC_BUILD_DIR to the build tree).
std::string BuildPath(const std::string& relative);

// A fresh directory under $TMPDIR (or /tmp), removed by RemoveTree().
std::string MakeTempDir(const std::string& prefix);
void RemoveTree(const std::string& path);

// Makes (mkdir -p) the directories --snapshot_dir and --ssd_path name in argv ("--flag
// DIR" or "--flag=DIR"), as an operator prepares them: the binaries refuse a missing one
// (common/base/process_setup.h). StartMaster(OnPort) and SpawnDaemon call it; a test of that
// refusal starts the binary with ChildProcess::Start itself.
void MakeFlagDirectories(const std::vector<std::string>& argv);

// A child process whose stdout and stderr go to log_path.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // kills with SIGKILL if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool Start(const std::vector<std::string>& argv, const std::string& log_path);
  // Sends sig and waits up to timeout_ms; returns the exit status as waitpid reports it,
  // or -1 when it did not exit in time (it is then killed).
  int Stop(int sig, int timeout_ms);
  // Waits for the process to exit on its own; same return convention as Stop.
  int Wait(int timeout_ms);
  // SIGSTOP, then waits (up to 10 s) until every thread is stopped: kill()
  // returns before they are, and a thread still running could answer. True once they are.
  bool Pause();
  void Resume();  // SIGCONT
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // The waitpid status of the last run that ended (-1 before one has).
  int exit_status() const { return exit_status_; }
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::string log_path_;
};

// Polls until something accepts TCP connections on 127.0.0.1:port.
bool WaitForTcpPort(int port, int timeout_ms);

// Whether a connection accepted on local port `port` holds bytes its owner has not read
// (/proc/net/tcp: ESTABLISHED with a non-zero receive queue). The kernel accepts for a
// stopped (SIGSTOP) process too, so for a stopped daemon this is the observable event "a
// peer has sent it a request": a test waits on it instead of sleeping.
bool UnreadBytesAtPort(int port);

// The cluster key every master and daemon the harness starts shares: a file holding one
// random key, mode 0600, made on first use in a temp dir that is removed at exit.
// StartMaster(OnPort) and StartDaemon pass it as --cluster_key_file; a later
// --cluster_key_file in extra_flags wins ("" runs one without a key).
const std::string& ClusterKeyFile();
// Writes keys (one per line) to path with mode 0600: other keys for tests of refusal and
// rotation. RandomClusterKey() is a fresh 64-hex-digit key.
bool WriteClusterKeyFile(const std::string& path, const std::vector<std::string>& keys);
std::string RandomClusterKey();

// Starts a mooncake-master (binary, default build/master/mooncake-master) on a free
// port of 127.0.0.1 with extra flags; true once it serves.
bool StartMaster(ChildProcess* master, int* port, const std::string& log_path,
                 const std::vector<std::string>& extra_flags, const std::string& binary = "");

// The same on exactly this port (e.g. to restart it in place).
bool StartMasterOnPort(ChildProcess* master, int port, const std::string& log_path,
                       const std::vector<std::string>& extra_flags,
                       const std::string& binary = "");

// Polls until something accepts connections on the Unix socket at path.
bool WaitForUnixSocket(const std::string& path, int timeout_ms);

// Starts build/daemon/mooncaked against the master on 127.0.0.1:master_port, serving
// socket_path and advertising 127.0.0.1, with a 64 MiB global segment unless extra_flags
// say otherwise (later flags win). true once the socket accepts connections; false at
// once when the daemon exits first (its status stays in daemon->exit_status()).
bool StartDaemon(ChildProcess* daemon, int master_port, const std::string& socket_path,
                 const std::string& log_path, const std::vector<std::string>& extra_flags);

// Starts mooncaked as StartDaemon does, returning once it is forked (false: fork failed)
// without waiting for it to serve: for a daemon that is expected never to (one whose key
// the master refuses, or that refuses the master).
bool SpawnDaemon(ChildProcess* daemon, int master_port, const std::string& socket_path,
                 const std::string& log_path, const std::vector<std::string>& extra_flags);

// Calls fn with a Thrift client of the master on 127.0.0.1:port, connected as daemons
// connect (framed transport, binary protocol) and admitted with the key of
// ClusterKeyFile() (the handshake of common/master_link/master_auth.h); false when it cannot be
// reached, the handshake fails or the call throws.
bool WithMasterClient(int port, const std::function<void(rpc::MasterServiceClient&)>& fn);

// The same with the key of key_file, or, with key_file "", without any handshake (as a
// client that holds no key: a master with a key then refuses every call). *error (may be
// null) says why it returned false: the handshake's failure or what fn threw.
bool WithMasterClientKey(int port, const std::string& key_file,
                         const std::function<void(rpc::MasterServiceClient&)>& fn,
                         std::string* error = nullptr);

// Runs the handshake on client, a connection just opened, with the key of key_file
// (ClusterKeyFile() when ""): for tests and benchmarks that keep their own connections.
// False, with *error (may be null) saying why, when the key cannot be loaded or either
// side's proof fails.
bool AuthenticateMasterClient(rpc::MasterServiceClient* client, const std::string& key_file,
                              std::string* error = nullptr);

// A connection of the caller's own to the master on 127.0.0.1:port (connect 2 s, send and
// receive 5 s), authenticated with the harness's key: the client, and in *transport what
// to close it with. nullptr, with *error (may be null) saying why, when it cannot connect
// or the handshake fails.
std::unique_ptr<rpc::MasterServiceClient> ConnectMasterClient(
    int port, std::shared_ptr<apache::thrift::transport::TTransport>* transport,
    std::string* error = nullptr);

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_PROCESS_HARNESS_H_
