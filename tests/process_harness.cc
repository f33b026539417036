#include "tests/process_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/master_link/master_auth.h"

namespace mooncake {
namespace testing {

namespace {

// How long a master or daemon may take to start serving: far more than it takes on an idle
// machine, so that one busy with other work (builds, other suites) does not fail a test.
constexpr std::chrono::seconds kStartDeadline(60);

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

}  // namespace

int FreeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

int ListenOnLoopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  // A deep backlog: some tests connect many peers before the server accepts any.
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 256) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

std::string BuildPath(const std::string& relative) {
  const char* dir = std::getenv("MC_BUILD_DIR");
  return std::string(dir ? dir : "build") + "/" + relative;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return "";
  return templ;
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

void MakeFlagDirectories(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    for (const std::string flag : {"--snapshot_dir", "--ssd_path"}) {
      std::string dir;
      if (argv[i] == flag && i + 1 < argv.size()) {
        dir = argv[i + 1];
      } else if (argv[i].compare(0, flag.size() + 1, flag + "=") == 0) {
        dir = argv[i].substr(flag.size() + 1);
      }
      std::error_code ignored;  // what cannot be made, the binary reports
      if (!dir.empty()) std::filesystem::create_directories(dir, ignored);
    }
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) Stop(SIGKILL, 5000);
}

bool ChildProcess::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  log_path_ = log_path;
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test, even when it crashes
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  pid_ = pid;
  return true;
}

int ChildProcess::Wait(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pid_ > 0) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return status;
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

int ChildProcess::Stop(int sig, int timeout_ms) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = Wait(timeout_ms);
  if (status == -1 && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &exit_status_, 0);
    pid_ = -1;
  }
  return status;
}

bool ChildProcess::Pause() {
  if (pid_ <= 0 || kill(pid_, SIGSTOP) != 0) return false;
  std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
  // Each thread stops when it next runs, which a loaded machine may delay.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    std::error_code ignored;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ignored)) {
      std::ifstream stat(t.path() / "stat");
      std::string line;
      std::getline(stat, line);
      size_t paren = line.rfind(')');  // the state follows the command name
      if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') {
        all = false;
      }
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

void ChildProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

bool WaitForTcpPort(int port, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = Loopback(port);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool UnreadBytesAtPort(int port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // sl local_address rem_address st tx_queue:rx_queue ... (addresses and queues in hex)
    char local[64], remote[64], state[8], queues[64];
    if (std::sscanf(line.c_str(), "%*s %63s %63s %7s %63s", local, remote, state, queues) != 4) {
      continue;
    }
    const char* local_port = std::strchr(local, ':');
    const char* rx_queue = std::strchr(queues, ':');
    if (local_port == nullptr || rx_queue == nullptr) continue;
    if (std::strtol(local_port + 1, nullptr, 16) == port && std::strcmp(state, "01") == 0 &&
        std::strtol(rx_queue + 1, nullptr, 16) > 0) {
      return true;
    }
  }
  return false;
}

std::string RandomClusterKey() {
  std::random_device random;
  std::string key;
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 64; ++i) key += kHex[random() % 16];
  return key;
}

bool WriteClusterKeyFile(const std::string& path, const std::vector<std::string>& keys) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::string text;
  for (const std::string& key : keys) text += key + "\n";
  bool ok = fchmod(fd, 0600) == 0 &&
            write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

const std::string& ClusterKeyFile() {
  static const std::string* path = [] {
    static std::string dir = MakeTempDir("mc-cluster-key");
    static pid_t owner = getpid();
    // Only the process that made it: a forked child that exits must not take it away.
    std::atexit([] {
      if (getpid() == owner) RemoveTree(dir);
    });
    auto* file = new std::string(dir + "/cluster.key");
    if (!WriteClusterKeyFile(*file, {RandomClusterKey()})) std::abort();
    return file;
  }();
  return *path;
}

bool StartMaster(ChildProcess* master, int* port, const std::string& log_path,
                 const std::vector<std::string>& extra_flags, const std::string& binary) {
  // The port can be taken between FreeTcpPort() and the master's bind; try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    *port = FreeTcpPort();
    if (StartMasterOnPort(master, *port, log_path, extra_flags, binary)) return true;
  }
  return false;
}

bool StartMasterOnPort(ChildProcess* master, int port, const std::string& log_path,
                       const std::vector<std::string>& extra_flags, const std::string& binary) {
  std::vector<std::string> argv = {binary.empty() ? BuildPath("master/mooncake-master") : binary,
                                   "--rpc_address", "127.0.0.1", "--rpc_port",
                                   std::to_string(port), "--cluster_key_file",
                                   ClusterKeyFile(), "--metrics_port", "0"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  MakeFlagDirectories(argv);
  if (!master->Start(argv, log_path)) return false;
  // A generous deadline (a loaded machine starts it slowly), but a master that exits (its
  // port was taken meanwhile, or it refuses its flags) is given up on at once.
  auto deadline = std::chrono::steady_clock::now() + kStartDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    if (WaitForTcpPort(port, 100)) return true;
    if (master->Wait(0) != -1) return false;
  }
  master->Stop(SIGKILL, 2000);
  return false;
}

bool WaitForUnixSocket(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool SpawnDaemon(ChildProcess* daemon, int master_port, const std::string& socket_path,
                 const std::string& log_path, const std::vector<std::string>& extra_flags) {
  std::vector<std::string> argv = {BuildPath("daemon/mooncaked"),
                                   "--metrics_port",
                                   "0",
                                   "--master",
                                   "127.0.0.1:" + std::to_string(master_port),
                                   "--socket",
                                   socket_path,
                                   "--hostname",
                                   "127.0.0.1",
                                   "--global_segment_size",
                                   "64MB",
                                   "--cluster_key_file",
                                   ClusterKeyFile()};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  MakeFlagDirectories(argv);
  return daemon->Start(argv, log_path);
}

bool StartDaemon(ChildProcess* daemon, int master_port, const std::string& socket_path,
                 const std::string& log_path, const std::vector<std::string>& extra_flags) {
  if (!SpawnDaemon(daemon, master_port, socket_path, log_path, extra_flags)) return false;
  // A daemon refusing its flags exits at once; waiting the full time for it would only
  // slow down the tests that expect that.
  auto deadline = std::chrono::steady_clock::now() + kStartDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    if (WaitForUnixSocket(socket_path, 100)) return true;
    if (daemon->Wait(0) != -1) return false;
  }
  daemon->Stop(SIGKILL, 2000);
  return false;
}

bool AuthenticateMasterClient(rpc::MasterServiceClient* client, const std::string& key_file,
                              std::string* error) {
  std::string why;
  Result<ClusterKey> key = ClusterKey::Load(key_file.empty() ? ClusterKeyFile() : key_file, &why);
  bool ok = key.ok() && AuthenticateToMaster(client, &key.value(), &why) == ErrorCode::OK;
  if (!ok && error != nullptr) *error = why;
  return ok;
}

namespace {

// An open framed transport to the master on 127.0.0.1:port and a client on it, with the
// harness's timeouts (connect 2 s, send and receive 5 s); throws as Thrift does.
std::unique_ptr<rpc::MasterServiceClient> OpenMasterClient(
    int port, std::shared_ptr<apache::thrift::transport::TTransport>* transport) {
  using apache::thrift::protocol::TBinaryProtocol;
  using apache::thrift::transport::TFramedTransport;
  using apache::thrift::transport::TSocket;
  auto socket = std::make_shared<TSocket>("127.0.0.1", port);
  socket->setConnTimeout(2000);
  socket->setRecvTimeout(5000);
  socket->setSendTimeout(5000);
  *transport = std::make_shared<TFramedTransport>(socket);
  (*transport)->open();
  return std::make_unique<rpc::MasterServiceClient>(std::make_shared<TBinaryProtocol>(*transport));
}

}  // namespace

std::unique_ptr<rpc::MasterServiceClient> ConnectMasterClient(
    int port, std::shared_ptr<apache::thrift::transport::TTransport>* transport,
    std::string* error) {
  try {
    auto client = OpenMasterClient(port, transport);
    if (!AuthenticateMasterClient(client.get(), "", error)) return nullptr;
    return client;
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
    return nullptr;
  }
}

bool WithMasterClientKey(int port, const std::string& key_file,
                         const std::function<void(rpc::MasterServiceClient&)>& fn,
                         std::string* error) {
  try {
    std::shared_ptr<apache::thrift::transport::TTransport> transport;
    auto client = OpenMasterClient(port, &transport);
    if (!key_file.empty() && !AuthenticateMasterClient(client.get(), key_file, error)) {
      transport->close();
      return false;
    }
    fn(*client);
    transport->close();
    return true;
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
    return false;
  }
}

bool WithMasterClient(int port, const std::function<void(rpc::MasterServiceClient&)>& fn) {
  return WithMasterClientKey(port, ClusterKeyFile(), fn);
}

}  // namespace testing
}  // namespace mooncake
