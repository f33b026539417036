// failover_bench: how long a failover takes, and what high availability costs the master
// (issue 15, docs/ha.md).
//
// Part 1, failovers: an etcd, --masters HA masters and --daemons real daemons (found
// through etcd) on 127.0.0.1 (tests/cluster.h). --failovers times: once every standby has
// caught up with the leader, the leader is killed with SIGKILL, and three probers start at
// that instant:
//   - elected: GetRole on the other masters until one answers LEADER;
//   - master put: straight to the other masters over Thrift, as a daemon would after a
//     failover: RegisterDaemon, then PutStart + PutEnd of a fresh key (placed on a real
//     daemon's segment, so it also waits for one daemon to have re-mounted; no bytes move);
//   - daemon put: mooncake_store_put of a fresh 16 KiB value through a daemon (the C ABI:
//     the daemon finds the new leader, re-registers, re-mounts, then puts).
// Each reports the time from the kill until it succeeded. The killed master is then started
// again (it rejoins as a standby). Median and max over the failovers.
//
// Part 2, the cost: master batch put throughput (BatchPutStart + BatchPutEnd over Thrift,
// a fake daemon's segment, as master_bench's batch put) on a single master with
// --enable_snapshot --oplog_mode <mode>, and on the leader of --masters HA masters with the
// same flags (whose strict acknowledgements also wait for the standbys: docs/ha.md), same
// run, alternating, --rounds times.
//
// CSV (one row per failover, one per throughput round) and a PNG through
// bench/plot_failover_bench.gnuplot when gnuplot is installed.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "bench/master_bench_util.h"
#include "common/base/flags.h"
#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/process_harness.h"

#ifndef MC_BENCH_DIR
#define MC_BENCH_DIR "bench"
#endif

namespace {

using mooncake::bench::Clock;
using mooncake::bench::Die;
using mooncake::bench::Format;
namespace rpc = mooncake::rpc;

// The cluster of the running part, stopped by Die (its processes would outlive us).
std::atomic<mc_cluster*> g_running{nullptr};

struct Options {
  std::string build_dir = "build";
  int64_t failovers = 10;
  int64_t masters = 3;
  int64_t daemons = 3;
  int64_t lease_ttl_ms = 2000;
  std::string oplog_mode = "strict";
  int64_t probe_timeout_ms = 30000;
  int64_t put_keys = 100000;  // per throughput round
  int64_t batch = 128;
  int64_t threads = 4;
  int64_t rounds = 2;
  std::string csv = "failover_bench.csv";
  std::string png = "failover_bench.png";
  std::string plot_script = MC_BENCH_DIR "/plot_failover_bench.gnuplot";
};

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A Thrift client of 127.0.0.1:port that gives up after timeout_ms, admitted with the
// harness's cluster key; null when it cannot connect or is refused.
struct Client {
  std::shared_ptr<apache::thrift::transport::TTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> master;
  ~Client() {
    try {
      if (transport) transport->close();
    } catch (const std::exception&) {
    }
  }
};

std::unique_ptr<Client> Open(int port, int timeout_ms) {
  using apache::thrift::protocol::TBinaryProtocol;
  using apache::thrift::transport::TFramedTransport;
  using apache::thrift::transport::TSocket;
  auto c = std::make_unique<Client>();
  try {
    auto socket = std::make_shared<TSocket>("127.0.0.1", port);
    socket->setConnTimeout(timeout_ms);
    socket->setRecvTimeout(timeout_ms);
    socket->setSendTimeout(timeout_ms);
    c->transport = std::make_shared<TFramedTransport>(socket);
    c->transport->open();
    c->master = std::make_unique<rpc::MasterServiceClient>(
        std::make_shared<TBinaryProtocol>(c->transport));
    if (!mooncake::testing::AuthenticateMasterClient(c->master.get(), "")) return nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
  return c;
}

struct Failover {
  int killed = -1, next = -1;
  double elected_s = -1, master_put_s = -1, daemon_put_s = -1;
};

// Part 1's probers, each run on its own thread from the kill on.
class Probes {
 public:
  Probes(const Options& o, mc_cluster* c, int killed, int round)
      : o_(o), c_(c), killed_(killed), round_(round) {}

  Failover Run(mooncake_store_t via_daemon) {
    Failover f;
    f.killed = killed_;
    auto t0 = Clock::now();
    if (mc_cluster_ha_kill_master_at(c_, killed_, SIGKILL) == -1 &&
        mc_cluster_ha_master_alive(c_, killed_)) {
      Die("master %d would not die", killed_);
    }
    std::thread elected([&] {
      f.next = mc_cluster_ha_await_leader(c_, killed_, static_cast<int>(o_.probe_timeout_ms));
      if (f.next >= 0) f.elected_s = SecondsSince(t0);
    });
    std::thread master_put([&] { f.master_put_s = MasterPut(t0); });
    f.daemon_put_s = DaemonPut(via_daemon, t0);
    elected.join();
    master_put.join();
    return f;
  }

 private:
  bool Expired(Clock::time_point t0) const {
    return SecondsSince(t0) * 1000 > static_cast<double>(o_.probe_timeout_ms);
  }

  double MasterPut(Clock::time_point t0) {
    const int64_t writer = 900000 + round_;
    rpc::ReplicateConfig config;
    config.replica_num = 1;
    for (int64_t attempt = 0; !Expired(t0); ++attempt) {
      for (int i = 0; i < mc_cluster_ha_master_count(c_); ++i) {
        if (i == killed_) continue;
        auto client = Open(mc_cluster_ha_master_port_at(c_, i), 500);
        if (client == nullptr) continue;
        std::string key = Format("failover-%d-master-%" PRId64, round_, attempt);
        try {
          if (client->master->RegisterDaemon(writer, "127.0.0.1:1") != 0) continue;
          rpc::PutStartResult started;
          client->master->PutStart(started, writer, key, 4096, config);
          if (started.code != 0) continue;
          if (client->master->PutEnd(writer, key, mooncake::bench::ChecksumOf(key)) == 0) {
            return SecondsSince(t0);
          }
        } catch (const std::exception&) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  double DaemonPut(mooncake_store_t s, Clock::time_point t0) {
    std::vector<char> value(16 << 10, 'f');
    for (int64_t k = 0; !Expired(t0); ++k) {
      std::string key = Format("failover-%d-daemon-%" PRId64, round_, k);
      if (mooncake_store_put(s, key.c_str(), value.data(), value.size(), nullptr) == 0) {
        return SecondsSince(t0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  const Options& o_;
  mc_cluster* c_;
  const int killed_;
  const int round_;
};

// Masters that exited on their own (a deposed leader exits with status 3, for its
// supervisor to start it again as a standby: docs/ha.md) and were started again.
std::atomic<int> g_unplanned_restarts{0};

// Waits until one master leads and every other one is a standby that has applied
// everything the leader has: the state in which a failover may lose nothing. Plays the
// supervisor: a master that exited is started again.
int AwaitCaughtUp(mc_cluster* c, double timeout_s) {
  auto t0 = Clock::now();
  while (SecondsSince(t0) < timeout_s) {
    for (int i = 0; i < mc_cluster_ha_master_count(c); ++i) {
      if (mc_cluster_ha_master_alive(c, i)) continue;
      std::fprintf(stderr, "master %d had exited (status %d): starting it again\n", i,
                   mc_cluster_ha_wait_master_at(c, i, 0));
      if (mc_cluster_ha_restart_master_at(c, i) != 0) Die("master %d did not restart", i);
      ++g_unplanned_restarts;
    }
    int leader = mc_cluster_ha_leader(c);
    int64_t seq = leader >= 0 ? mc_cluster_ha_applied_seq_at(c, leader) : -1;
    bool all = leader >= 0 && seq >= 0;
    for (int i = 0; all && i < mc_cluster_ha_master_count(c); ++i) {
      if (i == leader) continue;
      all = mc_cluster_ha_role_at(c, i, nullptr) == 1 && mc_cluster_ha_applied_seq_at(c, i) >= seq;
    }
    if (all) return leader;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

std::vector<Failover> RunFailovers(const Options& o) {
  mc_cluster_options options{static_cast<int>(o.daemons), 64ull << 20, 10000, nullptr, nullptr};
  mc_cluster_ha_options ha{static_cast<int>(o.masters), static_cast<int>(o.lease_ttl_ms),
                           o.oplog_mode.c_str()};
  mc_cluster* c = mc_cluster_start_ha(&options, &ha);
  if (c == nullptr) Die("cannot start the HA cluster from %s", o.build_dir.c_str());
  g_running = c;
  std::vector<mooncake_store_t> stores;
  for (int d = 0; d < o.daemons; ++d) {
    mooncake_store_t s = mooncake_store_create();
    int rc = mooncake_store_connect(s, mc_cluster_socket_at(c, d), 4 << 20);
    if (rc != 0) Die("connect to daemon %d: %d (%s)", d, rc, mooncake_store_strerror(rc));
    stores.push_back(s);
  }
  std::vector<Failover> out;
  for (int round = 0; round < o.failovers; ++round) {
    int leader = AwaitCaughtUp(c, 60);
    if (leader < 0) Die("failover %d: the standbys did not catch up within 60 s", round);
    Failover f = Probes(o, c, leader, round).Run(stores[static_cast<size_t>(round) % stores.size()]);
    if (f.elected_s < 0 || f.master_put_s < 0 || f.daemon_put_s < 0) {
      Die("failover %d (master %d killed): elected %.2f s, master put %.2f s, daemon put %.2f s "
          "(-1: not within %" PRId64 " ms); logs in %s",
          round, leader, f.elected_s, f.master_put_s, f.daemon_put_s, o.probe_timeout_ms,
          mc_cluster_dir(c));
    }
    std::fprintf(stderr,
                 "[failover %d/%" PRId64 "] master %d killed: master %d elected after %.2f s; "
                 "first put through a master %.2f s, through a daemon %.2f s\n",
                 round + 1, o.failovers, leader, f.next, f.elected_s, f.master_put_s,
                 f.daemon_put_s);
    out.push_back(f);
    if (mc_cluster_ha_restart_master_at(c, leader) != 0) Die("master %d did not restart", leader);
  }
  for (mooncake_store_t s : stores) mooncake_store_destroy(s);
  g_running = nullptr;
  mc_cluster_stop(c);
  return out;
}

// ---- part 2 -----------------------------------------------------------------------------

struct Throughput {
  std::string setup;  // "single" or "ha"
  int round = 0;
  mooncake::bench::PhaseResult phase;
};

Throughput PutRound(const Options& o, bool with_ha, int round) {
  const std::vector<std::string> flags = {"--enable_snapshot", "--snapshot_dir", "{dir}/single",
                                          "--oplog_mode", o.oplog_mode};
  std::vector<const char*> argv;
  if (!with_ha) {
    for (const std::string& f : flags) argv.push_back(f.c_str());
  }
  argv.push_back(nullptr);
  mc_cluster_options options{0, 0, 10000, argv.data(), nullptr};
  mc_cluster_ha_options ha{static_cast<int>(o.masters), static_cast<int>(o.lease_ttl_ms),
                           o.oplog_mode.c_str()};
  mc_cluster* c = with_ha ? mc_cluster_start_ha(&options, &ha) : mc_cluster_start_with(&options);
  if (c == nullptr) Die("cannot start the master(s) for round %d", round);
  g_running = c;
  int port = mc_cluster_master_port(c);
  if (with_ha) {
    int leader = AwaitCaughtUp(c, 60);
    if (leader < 0) Die("the standbys did not catch up within 60 s");
    port = mc_cluster_ha_master_port_at(c, leader);
  }
  const int64_t daemon_id = 7000 + round;
  Throughput t;
  t.setup = with_ha ? "ha" : "single";
  t.round = round;
  {
    mooncake::bench::FakeDaemon daemon("127.0.0.1", port, daemon_id, 1000 + round, 1ull << 40);
    auto conns = mooncake::bench::Connect("127.0.0.1", port, o.threads);
    mooncake::bench::KeyMaker keys(static_cast<uint64_t>(getpid()) << 20, 64);
    size_t n = conns.size();
    mooncake::testing::ChildProcess unknown;  // the master's CPU is not measured here
    t.phase = mooncake::bench::RunPhase(
        t.setup, "batch", o.put_keys, conns,
        [&](size_t th, mooncake::bench::Conn& conn, mooncake::bench::Recorder& rec) {
          auto [b, e] = mooncake::bench::Share(o.put_keys, th, n);
          mooncake::bench::PutKeys(conn, rec, daemon_id, 4096, o.batch, true, b, e,
                                   [&](int64_t i) {
                                     return keys.Make(static_cast<uint64_t>(round),
                                                      static_cast<uint64_t>(i));
                                   });
        },
        unknown);
  }
  g_running = nullptr;
  mc_cluster_stop(c);
  std::fprintf(stderr, "[throughput %s round %d] %.0f keys/s\n", t.setup.c_str(), round + 1,
               t.phase.keys_per_s);
  return t;
}

// ---- report -----------------------------------------------------------------------------

double Median(std::vector<double> v) { return mooncake::bench::Median(std::move(v)); }
double Max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void Report(const Options& o, const std::vector<Failover>& failovers,
            const std::vector<Throughput>& puts) {
  std::vector<double> elected, master_put, daemon_put;
  for (const Failover& f : failovers) {
    elected.push_back(f.elected_s);
    master_put.push_back(f.master_put_s);
    daemon_put.push_back(f.daemon_put_s);
  }
  std::printf("\n1. %zu failovers (leader killed with SIGKILL, --ha_lease_ttl %" PRId64
              " ms, --oplog_mode %s, %" PRId64 " masters, %" PRId64 " daemons)\n",
              failovers.size(), o.lease_ttl_ms, o.oplog_mode.c_str(), o.masters, o.daemons);
  std::printf("%-34s %9s %9s\n", "seconds from the kill until", "median", "max");
  std::printf("%-34s %9.2f %9.2f\n", "another master answers LEADER", Median(elected), Max(elected));
  std::printf("%-34s %9.2f %9.2f\n", "a put through another master", Median(master_put),
              Max(master_put));
  std::printf("%-34s %9.2f %9.2f\n", "a put through a daemon", Median(daemon_put),
              Max(daemon_put));
  std::printf("(masters that exited on their own and were started again: %d)\n",
              g_unplanned_restarts.load());

  std::printf("\n2. master batch put throughput (batches of %" PRId64 " x 4 KiB, %" PRId64
              " threads, --enable_snapshot --oplog_mode %s)\n",
              o.batch, o.threads, o.oplog_mode.c_str());
  std::printf("%-8s %6s %12s %10s %10s\n", "setup", "round", "keys/s", "p50 us", "p99 us");
  std::vector<double> single, ha;
  for (const Throughput& t : puts) {
    std::printf("%-8s %6d %12.0f %10.0f %10.0f\n", t.setup.c_str(), t.round + 1,
                t.phase.keys_per_s, t.phase.p50_us, t.phase.p99_us);
    (t.setup == "ha" ? ha : single).push_back(t.phase.keys_per_s);
  }
  std::printf("median: single %.0f keys/s, HA %.0f keys/s (%.2fx)\n", Median(single), Median(ha),
              Median(ha) / std::max(1.0, Median(single)));

  mooncake::bench::CsvFile csv(o.csv, {"kind", "round", "elected_s", "master_put_s",
                                       "daemon_put_s", "setup", "keys_per_s", "p50_us",
                                       "p99_us"});
  int round = 0;
  for (const Failover& f : failovers) {
    csv.Row({"failover", std::to_string(++round), Format("%.3f", f.elected_s),
             Format("%.3f", f.master_put_s), Format("%.3f", f.daemon_put_s), "", "", "", ""});
  }
  for (const Throughput& t : puts) {
    csv.Row({"throughput", std::to_string(t.round + 1), "", "", "", t.setup,
             Format("%.0f", t.phase.keys_per_s), Format("%.0f", t.phase.p50_us),
             Format("%.0f", t.phase.p99_us)});
  }
  csv.Close();
  std::printf("\nCSV written to %s\n", o.csv.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("failover_bench",
                          "failover time over repeated SIGKILLs of the leader, and master batch "
                          "put throughput with and without HA; spawns etcd, masters, daemons");
  flags.AddString("build_dir", &o.build_dir, "build tree holding the binaries to spawn");
  flags.AddInt("failovers", &o.failovers, "leaders killed, one after another");
  flags.AddInt("masters", &o.masters, "HA masters");
  flags.AddInt("daemons", &o.daemons, "daemons (part 1)");
  flags.AddDuration("lease_ttl_ms", &o.lease_ttl_ms, 1, "the masters' --ha_lease_ttl");
  flags.AddChoice("oplog_mode", &o.oplog_mode, {"strict", "relaxed"}, "the masters' --oplog_mode");
  flags.AddDuration("probe_timeout_ms", &o.probe_timeout_ms, 1,
                    "a failover taking longer ends the run");
  flags.AddInt("put_keys", &o.put_keys, "keys per throughput round");
  flags.AddInt("batch", &o.batch, "keys per BatchPutStart/BatchPutEnd");
  flags.AddInt("threads", &o.threads, "connections putting at once");
  flags.AddInt("rounds", &o.rounds, "throughput rounds per setup, alternating");
  flags.AddString("csv", &o.csv, "CSV of every failover and throughput round");
  flags.AddString("png", &o.png, "plot of it (needs gnuplot; empty: none)");
  flags.AddString("plot_script", &o.plot_script, "the gnuplot script that draws it");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  mooncake::bench::SetProgramName("failover_bench");
  mooncake::bench::AtDie([] {
    if (mc_cluster* c = g_running.exchange(nullptr)) mc_cluster_stop(c);
  });
  if (o.failovers < 1 || o.masters < 2 || o.daemons < 1 || o.put_keys < 1 || o.batch < 1 ||
      o.threads < 1 || o.rounds < 1) {
    Die("--failovers, --daemons, --put_keys, --batch, --threads and --rounds must be positive, "
        "--masters at least 2");
  }
  setenv("MC_BUILD_DIR", o.build_dir.c_str(), 1);
  mooncake::bench::SetClusterKeyFile(mooncake::testing::ClusterKeyFile());
  std::printf("machine: %ld cores; %" PRId64 " masters, %" PRId64 " daemons, %" PRId64
              " failovers, --ha_lease_ttl %" PRId64 " ms, --oplog_mode %s\n",
              sysconf(_SC_NPROCESSORS_ONLN), o.masters, o.daemons, o.failovers, o.lease_ttl_ms,
              o.oplog_mode.c_str());
  std::vector<Failover> failovers = RunFailovers(o);
  std::vector<Throughput> puts;
  for (int round = 0; round < o.rounds; ++round) {
    puts.push_back(PutRound(o, false, round));
    puts.push_back(PutRound(o, true, round));
  }
  Report(o, failovers, puts);
  mooncake::bench::PlotCsv(o.plot_script, o.csv, o.png);
  return 0;
}
