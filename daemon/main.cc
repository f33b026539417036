// mooncaked: the per-host daemon. Start-up, in order: parse flags; check that the
// directories they name exist and that this host can back --global_segment_size
// (daemon/memory/host_memory.h), exiting 2 or 1 when not; load the cluster key;
// reserve the transfer port on its bind address (so "host:port" names this daemon
// uniquely); choose the transport (RDMA or TCP);
// open the SSD tier (--ssd_path: the store, rebuilt or wiped, and its identity);
// find the master (a fixed address, or the leader etcd names, followed from then on);
// register with the master (retrying with back-off); serve the transfer port; create and
// mount the global segment, then the SSD tier's segment (which starts its reconciliation
// and the offloader); serve the Unix socket; heartbeat; serve the admin HTTP port
// (--metrics_port: /metrics, /health; daemon/server/daemon_admin.h).
// SIGTERM/SIGINT: with --drain_on_shutdown, first move the global segment's objects to
// other segments while still serving; then stop accepting, let running requests finish
// (bounded), revoke what is unfinished, stop the offloader (its round ends first), unmount
// at the master (the SSD tier's segment only in disabled mode: docs/ssd.md), remove the
// socket, exit 0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "common/auth/host_address.h"
#include "common/base/logging.h"
#include "common/master_link/master_locator.h"
#include "common/base/process_setup.h"
#include "common/master_link/rpc_logging.h"
#include "common/base/service_notify.h"
#include "common/base/text.h"
#include "common/base/units.h"
#include "common/base/version.h"
#include "daemon/cluster/bad_replica_reporter.h"
#include "daemon/cluster/cache_invalidator.h"
#include "daemon/server/daemon_admin.h"
#include "daemon/server/daemon_options.h"
#include "daemon/base/descriptor_limit.h"
#include "daemon/memory/host_memory.h"
#include "daemon/base/local_access.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/ssd_tier/offloader.h"
#include "daemon/replicas/replica_task_runner.h"
#include "daemon/transfer/rdma_transport.h"
#include "daemon/cluster/read_cache.h"
#include "daemon/replicas/replica_io.h"
#include "daemon/memory/segment_budget.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/ssd_tier/ssd_tier.h"
#include "daemon/service/store_service.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transfer_engine.h"
#include "daemon/transfer/transfer_server.h"
#include "daemon/server/uds_server.h"

namespace {

// The address the transfer port binds: --transfer_bind_address when given, else what host
// (the name peers are told) resolves to, an IPv4 address first as peers try them. False,
// with *error, when it does not resolve.
bool ResolveTransferBindAddress(const std::string& wanted, const std::string& host,
                                sockaddr_storage* out, std::string* error) {
  const std::string& name = wanted.empty() ? host : wanted;
  std::string why;
  if (!mooncake::ResolveHostAddress(name, out, &why)) {
    *error = "the transfer port's address: cannot resolve " + name + " (" +
             (wanted.empty() ? "--hostname, or this machine's name" : "--transfer_bind_address") +
             "): " + why + "; set --transfer_bind_address";
    return false;
  }
  return true;
}

// Binds and listens on the transfer-engine port at address: the first free one in
// 12300..14300 when port is 0. Returns the socket (held for the daemon's lifetime) or -1.
int ReserveTransferPort(sockaddr_storage address, int64_t port, int* bound) {
  int first = port == 0 ? 12300 : static_cast<int>(port);
  int last = port == 0 ? 14300 : static_cast<int>(port);
  const bool v4 = address.ss_family == AF_INET;
  const socklen_t length = v4 ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  for (int p = first; p <= last; ++p) {
    int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (v4) {
      reinterpret_cast<sockaddr_in*>(&address)->sin_port = htons(static_cast<uint16_t>(p));
    } else {
      reinterpret_cast<sockaddr_in6*>(&address)->sin6_port = htons(static_cast<uint16_t>(p));
    }
    // A deep backlog: a burst of connections (a flood, or many peers at once) must not
    // drop a fresh peer's SYN before the accept thread has seen it.
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
        listen(fd, SOMAXCONN) == 0) {
      *bound = p;
      return fd;
    }
    close(fd);
  }
  return -1;
}

// The transports --protocol asks for: TCP always, RDMA when chosen and it opens. Null
// (after logging why) when the daemon cannot start.
std::unique_ptr<mooncake::TransferEngine> OpenTransferEngine(
    const mooncake::DaemonOptions& options, const std::string& name,
    std::shared_ptr<const mooncake::ClusterKey> cluster_key, mooncake::MasterClient* master) {
  using namespace mooncake;
  TcpTransport::Options tcp_options;
  tcp_options.address = name;
  tcp_options.cluster_key = std::move(cluster_key);
  tcp_options.streams = static_cast<int>(options.transfer_streams);
  tcp_options.stall_timeout_ms = static_cast<int>(options.transfer_timeout_ms);
  tcp_options.connect_timeout_ms = static_cast<int>(std::min<int64_t>(options.transfer_timeout_ms, 2000));
  tcp_options.max_connections_per_peer = static_cast<size_t>(options.transfer_connections);
  tcp_options.threads = std::max<size_t>(4, 2 * static_cast<size_t>(options.transfer_streams));
  auto tcp = std::make_unique<TcpTransport>(tcp_options);

  std::vector<std::string> found;
  if (options.protocol != "tcp") found = ListRdmaDevices();
  TransportChoice choice = TransportChoice::kTcp;
  std::string message;
  if (!ChooseTransport(options.protocol, found, &choice, &message)) {
    MC_LOG_ERROR("%s", message.c_str());
    return nullptr;
  }
  std::unique_ptr<Transport> rdma;
  if (choice == TransportChoice::kRdma) {
    std::string error;
    std::vector<std::string> devices = SplitList(options.rdma_devices, ',');
    devices.erase(std::remove(devices.begin(), devices.end(), ""), devices.end());  // none: all
    rdma = RdmaTransport::Open(devices, tcp.get(), &error);
    if (rdma == nullptr) {
      if (options.protocol == "rdma") {
        MC_LOG_ERROR("--protocol rdma: %s", error.c_str());
        return nullptr;
      }
      message = "transport: tcp (RDMA device found but unusable: " + error + ")";
    }
  }
  MC_LOG_INFO("%s", message.c_str());
  return std::make_unique<TransferEngine>(master, std::move(tcp), std::move(rdma));
}

// The transfer port's caps: --transfer_max_connections within half the descriptor limit,
// --transfer_connections per peer, and the caps on connections not open yet that follow
// from the port's (TransferConnections::ForPort: a flood cannot fill it).
mooncake::TransferConnections::Limits TransferPortLimits(const mooncake::DaemonOptions& options,
                                                        uint64_t descriptors) {
  uint64_t wanted = static_cast<uint64_t>(options.transfer_max_connections);
  mooncake::TransferConnections::Limits limits = mooncake::TransferConnections::ForPort(
      mooncake::TransferConnectionsWithin(descriptors, wanted),
      static_cast<size_t>(options.transfer_connections));
  if (limits.max_connections < wanted) {
    MC_LOG_WARN("transfer port: at most %zu connections, not --transfer_max_connections "
                "%llu: half the descriptor limit (raise it: ulimit -n, LimitNOFILE=)",
                limits.max_connections, static_cast<unsigned long long>(wanted));
  }
  MC_LOG_INFO("transfer port: at most %zu connections, %zu per peer, %zu not yet open (%zu "
              "per address); idle ones make room for new peers",
              limits.max_connections, limits.per_peer, limits.new_total, limits.new_per_address);
  return limits;
}

// The directories the daemon's flags name must exist (common/base/process_setup.h), but for
// one: /run/mooncake, the default socket's, the daemon's own runtime directory, made here
// (mode 0755, and only that level) as systemd's RuntimeDirectory= makes it for the unit:
// /run is emptied at every boot, and a daemon started by hand as root should find its
// default socket's home. The socket's directory must be one nobody else may write
// (UdsServer::CheckSocketDirectory). false with *error naming the flag.
bool CheckDirectories(const mooncake::DaemonOptions& options, std::string* error) {
  const std::string runtime_dir = "/run/mooncake";
  const std::string socket_dir = std::filesystem::path(options.socket).parent_path().string();
  if (socket_dir == runtime_dir) {
    if (mkdir(runtime_dir.c_str(), 0755) == 0) {
      MC_LOG_INFO("created %s, the default socket's directory", runtime_dir.c_str());
    } else if (errno != EEXIST) {
      *error = "--socket " + options.socket + ": cannot create " + runtime_dir +
               ", the default socket's directory (" + std::strerror(errno) +
               "): create it as root (install -d -o $USER " + runtime_dir +
               "), or point --socket elsewhere";
      return false;
    }
  }
  if (!socket_dir.empty() &&
      !mooncake::CheckFlagDirectory("--socket", options.socket, socket_dir, error)) {
    return false;
  }
  if (!mooncake::UdsServer::CheckSocketDirectory(options.socket, error)) return false;
  return options.ssd.path.empty() ||
         mooncake::CheckFlagDirectory("--ssd_path", options.ssd.path, options.ssd.path, error);
}

// Whether this host can back the daemon's own segment (daemon/memory/host_memory.h); false,
// after logging why, when it cannot. *huge_pages_only as HostMemory::Admits sets it.
bool HostBacksGlobalSegment(uint64_t size, bool* huge_pages_only) {
  std::string why;
  mooncake::HostMemory host = mooncake::HostMemory::Parse(mooncake::HostMemory::ReadMeminfo());
  if (host.Admits(size, 0, huge_pages_only, &why)) return true;
  MC_LOG_ERROR("--global_segment_size: %s: lower --global_segment_size, or free memory on "
               "this host", why.c_str());
  return false;
}

std::string MachineHostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mooncake;
  SetLogComponent("daemon");
  DaemonOptions options;
  FlagSet flags("mooncaked",
                "The Mooncake Store daemon: lends this host's memory to the pool and serves "
                "local applications over a Unix socket.");
  RegisterDaemonFlags(&flags, &options);
  ParseFlagsOrExit(&flags, argc, argv);
  std::string error;
  if (!ValidateDaemonOptions(&options, &error)) {
    std::fprintf(stderr, "mooncaked: %s\n", error.c_str());
    return 2;
  }
  InitLogging(options.log_level);
  RouteThriftOutputToDebugLog();
  if (!CheckDirectories(options, &error)) {
    MC_LOG_ERROR("%s", error.c_str());
    return 2;
  }
  // Before anything is started, so that a segment the host cannot back is refused at
  // once; checked again just before it is mapped (the master may keep us waiting).
  bool huge_pages_only = false;
  if (options.global_segment_size > 0 &&
      !HostBacksGlobalSegment(options.global_segment_size, &huge_pages_only)) {
    return 1;
  }
  std::shared_ptr<const ClusterKey> cluster_key;
  if (!LoadClusterKeyForProcess(options.cluster_key_file, &cluster_key)) return 2;
  std::vector<std::string> admin_tokens;  // the admin HTTP port's (common/admin/admin_http.h)
  if (options.metrics_port >= 0 &&
      !LoadAdminTokensForProcess(cluster_key.get(), options.admin_token_file, &admin_tokens)) {
    return 2;
  }
  std::string limit_message;
  uint64_t descriptors = RaiseDescriptorLimit(&limit_message);
  MC_LOG_INFO("%s", limit_message.c_str());

  // Signals are taken by one thread with sigwait; every other thread runs unbothered.
  sigset_t stop_signals = BlockStopSignals();
  std::atomic<bool> stop{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  std::thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    MC_LOG_INFO("signal %d: shutting down", sig);
    NotifyStopping("signal " + std::to_string(sig) + ": stopping");
    std::lock_guard<std::mutex> lock(stop_mu);
    stop = true;
    stop_cv.notify_all();
  }).detach();

  std::string host = options.hostname.empty() ? MachineHostname() : options.hostname;
  sockaddr_storage bind_address{};
  if (!ResolveTransferBindAddress(options.transfer_bind_address, host, &bind_address, &error)) {
    MC_LOG_ERROR("%s", error.c_str());
    return 1;
  }
  int port = 0;
  int transfer_fd = ReserveTransferPort(bind_address, options.port, &port);
  if (transfer_fd < 0) {
    MC_LOG_ERROR("no free transfer port on %s (%s)", FormatIp(reinterpret_cast<const sockaddr*>(&bind_address)).c_str(),
                 options.port == 0 ? "12300..14300" : std::to_string(options.port).c_str());
    return 1;
  }
  std::string name = host + ":" + std::to_string(port);
  MC_LOG_INFO("transfer port: listening on %s port %d (%s)%s", FormatIp(reinterpret_cast<const sockaddr*>(&bind_address)).c_str(),
              port,
              options.transfer_bind_address.empty() ? "what the advertised host name resolves to"
                                                    : "--transfer_bind_address",
              cluster_key != nullptr
                  ? "; peers must prove the cluster key"
                  : "; no cluster key: peers of this user or root on this host only");

  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  size_t workers = options.worker_threads > 0 ? static_cast<size_t>(options.worker_threads)
                                              : std::max<size_t>(4, 2 * cores);
  MasterClientOptions client_options;
  std::unique_ptr<MasterLocator> locator;  // null: the fixed master_host:master_port
  if (!options.etcd_endpoints.empty()) {
    ErrorCode located =
        MasterLocator::ViaEtcd(options.etcd_endpoints, options.cluster_id,
                               options.connect_timeout_ms, MasterLocator::kPollIntervalMs,
                               &locator);
    if (located != ErrorCode::OK) {
      MC_LOG_ERROR("--master %s: %s", options.master.c_str(), ErrorName(located));
      close(transfer_fd);
      return 2;
    }
    client_options.failover_wait_ms = static_cast<int>(options.master_failover_wait_ms);
    MC_LOG_INFO("the master: whichever leader %s names, followed when it changes",
                locator->description().c_str());
  } else if (options.master_host.empty()) {
    options.master_host = ThisHostAddress();
    options.master = options.master_host + ":" + std::to_string(options.master_port);
  }
  client_options.host = options.master_host;
  client_options.cluster_key = cluster_key;
  client_options.port = options.master_port;
  client_options.connect_timeout_ms = static_cast<int>(options.connect_timeout_ms);
  client_options.rpc_timeout_ms = static_cast<int>(options.rpc_timeout_ms);
  client_options.spin_us = options.spin_us;
  client_options.max_connections = options.max_master_connections > 0
                                       ? static_cast<size_t>(options.max_master_connections)
                                       : workers + 4;
  MasterClient master(client_options, std::move(locator));
  std::unique_ptr<TransferEngine> engine = OpenTransferEngine(options, name, cluster_key, &master);
  if (engine == nullptr) {
    close(transfer_fd);
    return 1;
  }
  ReadCache cache(options.read_cache);
  Membership membership(&master, engine.get(), name, options.heartbeat_interval_ms);
  membership.SetBeforeRemount([&cache] {
    size_t entries = cache.size();
    cache.ClearForRemount();
    if (entries > 0) MC_LOG_INFO("read cache: %zu entries forgotten before mounting again", entries);
  });
  // Before the master hears of us: a directory another daemon holds, or one we cannot
  // write, stops the start here.
  std::unique_ptr<SsdTier> ssd;
  if (!options.ssd.path.empty()) {
    ssd = std::make_unique<SsdTier>(options.ssd, &master, &membership);
    if (ssd->Open(&error) != ErrorCode::OK) {
      MC_LOG_ERROR("--ssd_path %s: %s", options.ssd.path.c_str(), error.c_str());
      close(transfer_fd);
      return 1;
    }
  }
  NotifyStatus("registering with the master at " + options.master);
  if (!membership.RegisterWithRetry(stop)) {
    close(transfer_fd);
    return 0;  // stopped before the master ever answered
  }
  membership.ReclaimPredecessors(ssd != nullptr ? ssd->persisted_segment_id() : 0);

  // Replicas reads find bad go to the master, which stops listing them.
  BadReplicaReporter reporter(&master, &membership);
  reporter.Start();
  // Serving before the first segment is mounted: peers may write to it from then on.
  TransferServer::Options server_options;
  server_options.disk_miss = [&reporter](const DiskAddress& object, int64_t segment) {
    reporter.ReportNotHeld(object, segment);
  };
  server_options.stall_timeout_ms = static_cast<int>(options.transfer_timeout_ms);
  server_options.limits = TransferPortLimits(options, descriptors);
  server_options.cluster_key = cluster_key;
  TransferServer transfer_server(
      transfer_fd, [&membership](int64_t id) { return membership.Find(id); }, server_options);
  if (auto* rdma = dynamic_cast<RdmaTransport*>(engine->rdma())) {
    transfer_server.SetControlHandler(transfer::ControlChannel::kRdmaConnect,
                                      rdma->control_handler());
  }
  transfer_server.SetControlHandler(transfer::ControlChannel::kCacheInvalidate,
                                    CacheInvalidator::Handler(&cache));
  transfer_server.SetEpochGate(membership.epoch_gate());
  transfer_server.Start();

  // Mounts with mount() until the master takes it: OK; the refusal's code; or RPC_FAIL
  // when stopped meanwhile. An unreachable master, or one that lost us, is retried.
  auto mount_with_retry = [&](const char* what, const std::function<ErrorCode()>& mount) {
    int64_t backoff_ms = 50;
    for (;;) {
      ErrorCode code = mount();
      if (code == ErrorCode::OK) return code;
      if (code != ErrorCode::RPC_FAIL && code != ErrorCode::CLIENT_NOT_FOUND) {
        MC_LOG_ERROR("the master refused %s: %s", what, ErrorName(code));
        return code;
      }
      if (code == ErrorCode::CLIENT_NOT_FOUND) membership.Reregister();
      MC_LOG_WARN("mounting %s failed (%s); retrying in %lld ms", what, ErrorName(code),
                  static_cast<long long>(backoff_ms));
      std::unique_lock<std::mutex> lock(stop_mu);
      if (stop_cv.wait_for(lock, std::chrono::milliseconds(backoff_ms), [&] { return stop.load(); })) {
        return ErrorCode::RPC_FAIL;
      }
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 2000);
    }
  };

  int64_t global_segment_id = 0;  // when global_segment_size > 0
  if (options.global_segment_size > 0) {
    if (!HostBacksGlobalSegment(options.global_segment_size, &huge_pages_only)) {
      close(transfer_fd);
      return 1;
    }
    std::shared_ptr<SegmentMemory> segment =
        SegmentMemory::Create(options.global_segment_size, &error, huge_pages_only);
    if (segment == nullptr) {
      MC_LOG_ERROR("cannot create the global segment: %s", error.c_str());
      return 1;
    }
    ErrorCode code = mount_with_retry("the global segment", [&] {
      return membership.Mount(segment, &global_segment_id);
    });
    if (code != ErrorCode::OK) return stop.load() ? 0 : 1;
    MC_LOG_INFO("global segment: %s%s", FormatSize(segment->size()).c_str(),
                segment->huge_pages() ? " (huge pages)" : "");
  }
  // After the memory segments: the offloader copies out of them.
  std::unique_ptr<Offloader> offloader;
  if (ssd != nullptr) {
    ssd->Start();
    ErrorCode code = mount_with_retry("the SSD tier's segment", [&] { return ssd->Mount(); });
    if (code != ErrorCode::OK) {
      membership.UnmountAll();
      return stop.load() ? 0 : 1;
    }
    Offloader::Options offload_options;
    offload_options.reporter = &reporter;
    offloader = std::make_unique<Offloader>(&master, &membership, ssd.get(), offload_options);
    offloader->Start();
    // Peers may read its disk replicas from now on (READ_DISK).
    transfer_server.SetDiskTier(ssd->store(), ssd->segment_id());
  }

  // Each client's mount is checked against the host when it is asked for.
  auto segment_budget = std::make_shared<SegmentBudget>(SegmentBudget::Limits{
      options.client_segment_budget, options.client_segment_budget_per_client});
  MC_LOG_INFO("client segments: %s", segment_budget->Describe().c_str());

  // Big local copies (a large value, a big batch) are shared with a helper thread.
  ParallelCopy copier(options.copy_helper_min);
  ReplicaIO io(&membership, engine.get(), &copier);
  if (ssd != nullptr) io.SetDiskTier(ssd->store(), ssd->segment_id());
  io.SetReporter(&reporter);
  SegmentDrainer drainer(&master, &membership, &io);
  // Copies and moves the master assigns to this daemon (the holder of their source).
  ReplicaTaskRunner task_runner(&master, &membership, &io);
  task_runner.Start();
  CacheInvalidator invalidator(engine->tcp());
  StoreService service(&master, &membership, &cache, &invalidator, &io, &drainer, options.master,
                       options.checksum, segment_budget, options.put_no_space_wait_ms,
                       options.tenant_policy, static_cast<size_t>(options.group_commit_max),
                       options.spin_us);
  if (!options.tenant_policy.empty()) {
    MC_LOG_INFO("tenants only their uids may claim: %s",
                options.tenant_policy.Describe().c_str());
  }
  UdsServer::Limits limits;
  limits.hello_timeout_ms = options.hello_timeout_ms;
  limits.spin_us = options.spin_us;
  UdsServer server(&service, workers, limits);
  if (!server.Listen(options.socket, options.socket_mode_bits, &error)) {
    MC_LOG_ERROR("%s", error.c_str());
    membership.UnmountAll();
    return 1;
  }
  LocalAccess access(options.local_access, geteuid(), server.socket_group());
  MC_LOG_INFO("socket %s (mode %04o) admits %s", options.socket.c_str(),
              options.socket_mode_bits, access.Describe().c_str());
  server.SetLocalAccess(std::move(access));
  server.Start();
  membership.StartHeartbeat();
  MC_LOG_INFO("mooncaked %s serving %s (version %s, master %s, %zu workers, read cache %s, "
              "transfers over %s%s)",
              name.c_str(), options.socket.c_str(), MooncakeVersion(), options.master.c_str(),
              workers,
              options.read_cache ? "on" : "off", engine->protocol(),
              options.checksum ? ", checksums" : ", NO checksums (--checksum=false)");

  // The admin HTTP port, once everything it reports on is up. One that cannot be bound
  // stops the daemon (exit 1) by the ordinary shutdown: an operator must notice.
  int exit_code = 0;
  std::unique_ptr<DaemonAdmin> admin;
  if (options.metrics_port >= 0) {
    DaemonAdmin::Sources sources;
    sources.master = &master;
    sources.membership = &membership;
    sources.service = &service;
    sources.ssd = ssd.get();
    sources.offloader = offloader.get();
    sources.reporter = &reporter;
    admin = std::make_unique<DaemonAdmin>(sources, std::move(admin_tokens));
    const std::string admin_host =
        options.metrics_host.empty() ? "127.0.0.1" : options.metrics_host;
    if (!admin->Start(admin_host, static_cast<int>(options.metrics_port), &error)) {
      MC_LOG_ERROR("daemon: %s (--metrics_port, --metrics_host)", error.c_str());
      exit_code = 1;
    }
  }

  if (exit_code == 0) {
    // systemd's Type=notify unit (deploy/mooncaked.service): registered, socket accepting.
    NotifyReady("serving " + options.socket + " as " + name + ", master " + options.master);
    std::unique_lock<std::mutex> lock(stop_mu);
    stop_cv.wait(lock, [&] { return stop.load(); });
  }
  // Asked to, the global segment is drained first, while everything still runs: clients
  // are served (new puts go elsewhere: the drain stops allocation in it), peers read from
  // it until each object has moved, heartbeats go on. Then nothing is drained any more:
  // the segments clients lent go with the daemon (their objects too), and the shutdown
  // waits for no copy.
  if (exit_code == 0 && options.drain_on_shutdown && options.global_segment_size > 0) {
    MC_LOG_INFO("draining the global segment before stopping (--drain_on_shutdown)");
    drainer.DrainAndUnmount(global_segment_id);
  }
  drainer.Stop();
  task_runner.Stop();  // its copies read the segments, and may write into clients'
  server.Shutdown(options.shutdown_timeout_ms);
  // Before the memory segments go: it copies out of them.
  if (offloader != nullptr) offloader->Stop();
  if (ssd != nullptr) ssd->Stop();
  membership.StopHeartbeat();
  membership.UnmountAll();
  transfer_server.Stop();
  reporter.Stop();
  admin.reset();
  MC_LOG_INFO("mooncaked stopped");
  return exit_code;
}
