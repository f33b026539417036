// mooncake-master: the control plane. Parses flags, restores and keeps its state when
// snapshots are on (master/snapshot/durability.h), serves MasterService over Thrift (framed
// transport, binary protocol, master/server/rpc_server.h with rpc_thread_num I/O threads) on
// --rpc_address (default: this host's own address), admitting only peers that prove the
// cluster key (master/server/authenticated_processor.h), runs upkeep every 100 ms, and exits 0 on
// SIGINT/SIGTERM.
//
// With --enable_ha (master/ha/ha_master.h, docs/ha.md) it starts as a standby: it serves
// GetRole and the replication calls only, runs no upkeep, and takes over when elected. A
// leader resigns on SIGTERM (a standby takes over at once); one that loses its lease
// exits with status 3, for its supervisor to start it again as a standby.
//
// Handlers run on the I/O threads themselves: no hand-off to a worker and back, which on
// this path costs more than most handlers do. Each connection is served by one I/O thread,
// so a handler that waits (a strict log's fdatasync) holds up the other connections of its
// thread: hence more I/O threads than cores by default, so that daemons' connections
// rarely share one. Nothing waits longer than that: the Snapshot admin call answers once
// the snapshot has forked.
#include <signal.h>
#include <unistd.h>

#include <string>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/admin/admin_http.h"
#include "common/auth/cluster_key.h"
#include "common/base/descriptor_limit.h"
#include "common/auth/host_address.h"
#include "common/base/logging.h"
#include "common/base/process_setup.h"
#include "common/master_link/rpc_logging.h"
#include "common/base/version.h"
#include "master/server/authenticated_processor.h"
#include "master/snapshot/durability.h"
#include "master/ha/ha_master.h"
#include "master/server/master_admin.h"
#include "master/server/master_metrics.h"
#include "master/ha/master_role.h"
#include "master/directory/master_options.h"
#include "master/server/master_readiness.h"
#include "master/service/master_service.h"
#include "master/server/rpc_handler.h"
#include "master/server/rpc_server.h"

int main(int argc, char** argv) {
  mooncake::SetLogComponent("master");
  mooncake::MasterOptions options;
  mooncake::FlagSet flags("mooncake-master",
                          "The Mooncake Store master: metadata, allocation, leases, eviction.");
  mooncake::RegisterMasterFlags(&flags, &options);
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  std::string error;
  if (!mooncake::ValidateMasterOptions(options, &error)) {
    std::fprintf(stderr, "mooncake-master: %s\n", error.c_str());
    return 2;
  }
  mooncake::InitLogging(options.log_level);
  // Thrift narrates its server start and stop; that belongs at debug level.
  mooncake::RouteThriftOutputToDebugLog();
  if (options.rpc_thread_num == 0) {
    options.rpc_thread_num = std::max(8u, std::thread::hardware_concurrency());
  }
  MC_LOG_INFO("mooncake-master %s starting: %s", mooncake::MooncakeVersion(),
              mooncake::DescribeMasterOptions(options).c_str());

  std::shared_ptr<const mooncake::ClusterKey> cluster_key;
  if (!mooncake::LoadClusterKeyForProcess(options.cluster_key_file, &cluster_key)) return 2;
  if (cluster_key == nullptr) {
    MC_LOG_INFO("without a cluster key the Thrift port admits only connections from this "
                "host whose socket belongs to uid %u (this process's) or root",
                static_cast<unsigned>(geteuid()));
  }
  std::string limit_message;
  const uint64_t descriptors = mooncake::RaiseDescriptorLimit(&limit_message);
  MC_LOG_INFO("%s", limit_message.c_str());
  std::vector<std::string> admin_tokens;  // the admin HTTP port's (common/admin/admin_http.h)
  if (options.metrics_port != -1 &&
      !mooncake::LoadAdminTokensForProcess(cluster_key.get(), options.admin_token_file,
                                           &admin_tokens)) {
    return 2;
  }

  // Signals are taken by one thread with sigwait, so every other thread runs unbothered.
  sigset_t stop_signals = mooncake::BlockStopSignals();

  // Never created here: a missing directory is an error (common/base/process_setup.h).
  if (options.enable_snapshot &&
      !mooncake::CheckFlagDirectory("--snapshot_dir", options.snapshot_dir, options.snapshot_dir,
                                    &error)) {
    MC_LOG_ERROR("%s", error.c_str());
    return 2;
  }

  mooncake::MasterService service(options);
  std::unique_ptr<mooncake::Durability> durability;
  if (options.enable_snapshot) {
    int exit_code = 1;
    durability = mooncake::Durability::Open(options, &service, &error, &exit_code);
    if (!durability) {
      MC_LOG_ERROR("%s", error.c_str());
      return exit_code;
    }
  } else {
    MC_LOG_INFO("durability: off (--enable_snapshot): a restart forgets every object");
  }
  if (options.rpc_address.empty()) options.rpc_address = mooncake::ThisHostAddress();

  std::atomic<bool> stopping{false};
  std::unique_ptr<mooncake::HaMaster> ha;
  if (options.enable_ha) {
    // Named as it listens; with --rpc_port 0 nobody could reach it by that name.
    if (options.rpc_port == 0) {
      MC_LOG_ERROR("--enable_ha needs a fixed --rpc_port: the leader key names the master by it");
      return 2;
    }
    std::string name = options.rpc_address + ":" + std::to_string(options.rpc_port);
    ha = mooncake::HaMaster::Create(
        options, name, &service, durability.get(), cluster_key,
        // Deposed (any thread, must not block): wake the signal thread, which stops the
        // server; main then exits with status 3.
        [] { kill(getpid(), SIGTERM); }, &error);
    if (!ha) {
      MC_LOG_ERROR("%s", error.c_str());
      return 2;
    }
  }
  mooncake::RoleMachine* role = ha ? ha->role() : nullptr;
  mooncake::MasterSources sources{&service, durability ? durability->snapshotter() : nullptr,
                                  ha ? ha->replication() : nullptr, role};
  mooncake::MasterMetrics metrics(sources);
  auto handler = std::make_shared<mooncake::RpcHandler>(
      &service, sources.snapshotter, sources.replication, role, &metrics);
  // A processor per connection: each has its own handshake (AuthenticatedProcessor), and
  // with HA refuses client calls unless this master leads.
  auto processors =
      std::make_shared<mooncake::AuthenticatedProcessorFactory>(handler, cluster_key, role);
  mooncake::RpcServerOptions server_options;
  server_options.address = options.rpc_address;
  server_options.port = static_cast<int>(options.rpc_port);
  server_options.io_threads = static_cast<size_t>(options.rpc_thread_num);
  server_options.spin_ns = options.spin_us * 1000;
  // Half the cores at most: the daemons and clients that call us (on a shared host) and
  // the handlers' own work need the rest.
  server_options.max_spinning =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2));
  server_options.idle_timeout_ms = options.rpc_idle_timeout_ms;
  server_options.handshake_timeout_ms = options.rpc_handshake_timeout_ms;
  const size_t connections = mooncake::RpcConnections::WithinDescriptors(
      descriptors, static_cast<uint64_t>(options.rpc_max_connections));
  if (options.rpc_max_connections > 0 &&
      connections < static_cast<uint64_t>(options.rpc_max_connections)) {
    MC_LOG_WARN("--rpc_max_connections %lld does not fit the descriptor limit %llu: at most "
                "%zu (raise it: ulimit -n, LimitNOFILE=)",
                static_cast<long long>(options.rpc_max_connections),
                static_cast<unsigned long long>(descriptors), connections);
  }
  server_options.limits = mooncake::RpcConnections::Split(connections);
  const std::string idle =
      options.rpc_idle_timeout_ms == 0
          ? "admitted ones are never closed for silence (--rpc_idle_timeout_sec 0)"
          : "admitted ones idle for " + std::to_string(options.rpc_idle_timeout_ms) +
                " ms are closed";
  MC_LOG_INFO("rpc server: at most %zu connections admitted and %zu in their handshake (%zu "
              "per address, frames up to %u bytes, %lld ms from accept to admission); %s",
              server_options.limits.max_admitted, server_options.limits.max_unadmitted,
              server_options.limits.max_unadmitted_per_source,
              server_options.unadmitted_max_frame_bytes,
              static_cast<long long>(server_options.handshake_timeout_ms), idle.c_str());
  auto server = std::make_shared<mooncake::RpcServer>(
      processors, mooncake::MakeRpcProtocolFactory(), server_options);
  if (!server->Listen(&error)) {
    MC_LOG_ERROR("cannot serve on %s:%lld: %s", options.rpc_address.c_str(),
                 static_cast<long long>(options.rpc_port), error.c_str());
    return 1;
  }
  metrics.WatchRpcServer(server.get(), processors.get());

  // The admin HTTP (docs/operations.md) on a thread of its own; a port it cannot have is
  // fatal, so that an operator notices.
  // Stopped before what its handlers read (the snapshotter, the replication) goes.
  std::unique_ptr<mooncake::AdminHttpServer> admin;
  if (options.metrics_port != -1) {
    admin = std::make_unique<mooncake::AdminHttpServer>("master");
    admin->AcceptTokens(std::move(admin_tokens));
    const std::string rpc_address = options.rpc_address;
    mooncake::RegisterMasterAdminRoutes(admin.get(), &metrics, [server, rpc_address] {
      return rpc_address + ":" + std::to_string(server->port());
    });
    const std::string host = options.metrics_host.empty() ? "127.0.0.1" : options.metrics_host;
    if (!admin->Start(host, static_cast<int>(options.metrics_port), &error)) {
      MC_LOG_ERROR("%s", error.c_str());
      return 1;
    }
  }

  // systemd's Type=notify unit (deploy/mooncake-master.service): READY=1 once serving.
  mooncake::MasterReadiness readiness(role, options.rpc_address + ":" +
                                                std::to_string(server->port()));
  absl::Mutex tick_mu;
  absl::CondVar tick_cv;
  std::thread upkeep([&] {
    absl::MutexLock lock(&tick_mu);
    auto next_report = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(options.metrics_report_interval_ms);
    while (!stopping.load()) {
      tick_cv.WaitWithTimeout(&tick_mu, absl::Milliseconds(options.upkeep_interval_ms));
      // Upkeep (liveness, eviction, frees) is the leader's: a standby's state is the log's.
      if (!stopping.load() && (role == nullptr || role->Serving())) service.Tick();
      if (options.enable_metric_reporting && std::chrono::steady_clock::now() >= next_report) {
        MC_LOG_INFO("%s", metrics.ReportLine().c_str());
        next_report = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(options.metrics_report_interval_ms);
      }
    }
  });
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    stopping.store(true);
    readiness.Stopping("signal " + std::to_string(sig));
    if (ha && ha->must_restart()) {
      MC_LOG_WARN("deposed: exiting with status 3, to come back as a standby");
    } else {
      MC_LOG_INFO("signal %d: shutting down", sig);
      if (ha) ha->Shutdown();  // a leader resigns before the server stops answering
    }
    server->Stop();  // heard whenever it comes: before Serve, it makes Serve return at once
  });

  if (durability) durability->Start();
  readiness.Listening();  // before the election, whose role changes it reports
  if (ha) ha->Start();
  // Tests and operators with --rpc_port 0 learn the port from this line.
  MC_LOG_INFO("mooncake-master listening on %s:%d", options.rpc_address.c_str(), server->port());
  server->Serve();  // returns once the signal thread stopped it
  int rc = 0;
  tick_cv.SignalAll();
  upkeep.join();
  signal_waiter.join();
  admin.reset();
  if (ha) {
    if (ha->must_restart()) rc = 3;
    ha.reset();  // stops the election and the follower, which use the log
  }
  durability.reset();  // the last records reach the disk before we exit
  MC_LOG_INFO("mooncake-master stopped (exit status %d)", rc);
  return rc;
}
