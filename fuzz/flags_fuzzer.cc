// The command line and --config file of both binaries (common/base/flags.h, common/base/units.h,
// master/directory/master_options.h, daemon/server/daemon_options.h), parsed as their main() parses them.
//
// Input: sections (fuzz/fuzz_util.h). A section with an even tag is one argv element; one
// with an odd tag is the config file's text (YAML or JSON), written to a file that a
// "--config FILE" at the end of the command line names. The same command line is parsed
// with mooncake-master's flags and with mooncaked's, in any of gflags' spellings (-name,
// --noname, -v=N, --flagfile=F: common/base/flags.h).
//
// Invariants:
//  - a parse that fails says why (and nothing throws out of Parse);
//  - units: a size or a duration that parses is non-negative, in range, and reads back
//    the same from its plain decimal form; the case of the text does not matter;
//  - options that parse and validate keep the ranges the flags document, and the master
//    runs on them: a MasterService with those options, driven through registration, a
//    put, a read, leases, pins and a daemon's death on a clock that jumps by the longest
//    TTL, stays consistent (fuzz/master_state.h);
//  - the daemon's derived fields agree with the strings they come from.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "common/base/flags.h"
#include "common/base/units.h"
#include "daemon/server/daemon_options.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "master/directory/master_options.h"
#include "master/service/master_service.h"

namespace {

using namespace mooncake;

std::string Upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// What any value a flag may get must satisfy, read as a size and as a duration.
void CheckUnits(const std::string& text) {
  uint64_t bytes = 0;
  if (ParseSize(text, &bytes)) {
    uint64_t again = 0;
    FUZZ_CHECK(ParseSize(std::to_string(bytes), &again) && again == bytes,
               "size \"%s\" is %llu bytes, which reads back as %llu", text.c_str(),
               static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(again));
    uint64_t upper = 0;
    FUZZ_CHECK(ParseSize(Upper(text), &upper) && upper == bytes, "size \"%s\" depends on case",
               text.c_str());
  }
  for (int64_t unit : {int64_t{1}, int64_t{1000}}) {
    int64_t ms = -1;
    if (!ParseDuration(text, unit, &ms)) continue;
    FUZZ_CHECK(ms >= 0, "duration \"%s\" is %lld ms", text.c_str(), static_cast<long long>(ms));
    int64_t again = -1;
    FUZZ_CHECK(ParseDuration(std::to_string(ms) + "ms", unit, &again) && again == ms,
               "duration \"%s\" is %lld ms, which reads back as %lld", text.c_str(),
               static_cast<long long>(ms), static_cast<long long>(again));
  }
}

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  return argv;
}

int64_t g_now = 0;
// A steady clock in milliseconds does not pass this (some 30 years of uptime), so the
// master may add any TTL it accepts to it.
constexpr int64_t kLatestNow = 1000000000000;

// The master on options that validated: the calls a daemon makes, and time jumping past
// every TTL it was given.
void RunMaster(MasterOptions options) {
  g_now = 1000000;  // a steady clock some minutes after boot
  options.now_ms = [] { return g_now; };
  options.allocation_strategy = "free_ratio_first";  // "random" would make runs differ
  MasterService service(options);
  rpc::SegmentInfo segment;
  segment.segment_id = 11;
  segment.name = "10.0.0.1:7000";
  segment.size = 1 << 20;
  segment.daemon_id = 1;
  FUZZ_CHECK(service.RegisterDaemon(1, segment.name) == ErrorCode::OK, "RegisterDaemon");
  FUZZ_CHECK(service.MountSegment(segment) == ErrorCode::OK, "MountSegment");
  rpc::ReplicateConfig config;
  config.with_soft_pin = true;
  for (int i = 0; i < 8; ++i) {
    const std::string key = "key-" + std::to_string(i);
    rpc::PutStartResult started = service.PutStart(1, key, 200000, config);
    if (started.code == 0) service.PutEnd(1, key, i);
    service.GetReplicaList(key);
  }
  const int64_t longest =
      std::max({options.default_kv_lease_ttl_ms, options.default_kv_soft_pin_ttl_ms,
                options.max_kv_soft_pin_ttl_ms, options.client_live_ttl_ms,
                options.put_start_release_timeout_ms});
  for (int64_t step : {int64_t{1}, options.default_kv_lease_ttl_ms, longest}) {
    g_now += std::min(step, kLatestNow - g_now);
    service.Tick();
    service.Heartbeat(1);
    fuzz::CheckRestorable(fuzz::Export(&service));
  }
}

void CheckMaster(std::vector<std::string> args) {
  MasterOptions options;
  FlagSet flags("mooncake-master", "fuzzed");
  RegisterMasterFlags(&flags, &options);
  std::vector<char*> argv = Argv(args);
  std::string error;
  if (!flags.Parse(static_cast<int>(args.size()), argv.data(), &error)) {
    FUZZ_CHECK(!error.empty(), "mooncake-master's flags refused without a reason");
    return;
  }
  if (flags.help_requested()) return;
  if (!ValidateMasterOptions(options, &error)) {
    FUZZ_CHECK(!error.empty(), "mooncake-master's options refused without a reason");
    return;
  }
  FUZZ_CHECK(options.default_kv_lease_ttl_ms > 0 && options.client_live_ttl_ms > 0 &&
                 options.eviction_ratio > 0 && options.eviction_ratio <= 1 &&
                 options.eviction_high_watermark_ratio > 0 &&
                 options.eviction_high_watermark_ratio <= 1 && options.rpc_port >= 0 &&
                 options.rpc_port <= 65535,
             "mooncake-master's options validated out of their ranges");
  RunMaster(options);
}

void CheckDaemon(std::vector<std::string> args) {
  DaemonOptions options;
  FlagSet flags("mooncaked", "fuzzed");
  RegisterDaemonFlags(&flags, &options);
  std::vector<char*> argv = Argv(args);
  std::string error;
  if (!flags.Parse(static_cast<int>(args.size()), argv.data(), &error)) {
    FUZZ_CHECK(!error.empty(), "mooncaked's flags refused without a reason");
    return;
  }
  if (flags.help_requested()) return;
  if (!ValidateDaemonOptions(&options, &error)) {
    FUZZ_CHECK(!error.empty(), "mooncaked's options refused without a reason");
    return;
  }
  // An empty --master is this host's address (main resolves it), port 50051.
  const size_t colon = options.master.rfind(':');
  FUZZ_CHECK(options.master.empty()
                 ? options.master_host.empty() && options.master_port == 50051
                 : colon != std::string::npos &&
                       options.master_host == options.master.substr(0, colon) &&
                       !options.master_host.empty() && options.master_port >= 1 &&
                       options.master_port <= 65535,
             "--master \"%s\" became host \"%s\" port %d", options.master.c_str(),
             options.master_host.c_str(), options.master_port);
  FUZZ_CHECK(options.socket_mode_bits <= 0777 && !options.socket.empty() &&
                 options.socket.size() < 108 && options.transfer_streams >= 1 &&
                 options.transfer_streams <= 64 && options.transfer_timeout_ms > 0,
             "mooncaked's options validated out of their ranges");
  // Ids resolved: never the kernel's "no id", and the socket's group only when no group given.
  const LocalAccessRules& access = options.local_access;
  const bool gids_given = options.allowed_gids.find_first_not_of(" \t") != std::string::npos;
  FUZZ_CHECK(access.gids_given == gids_given &&
                 std::count(access.uids.begin(), access.uids.end(), LocalPeer::kUnknownUid) == 0 &&
                 std::count(access.gids.begin(), access.gids.end(), LocalPeer::kUnknownGid) == 0,
             "--allowed_uids \"%s\" --allowed_gids \"%s\" resolved to %zu uids, %zu gids%s",
             options.allowed_uids.c_str(), options.allowed_gids.c_str(), access.uids.size(),
             access.gids.size(), access.gids_given ? "" : " (the socket's group)");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"fuzzed"};
  std::string config;
  bool has_config = false;
  for (const fuzz::Section& s : fuzz::SplitSections(data, size)) {
    std::string text(s.bytes);
    if (s.tag & 1) {
      config += text;
      has_config = true;
      continue;
    }
    // argv elements are C strings: the part before a NUL is what a process would see.
    text = text.substr(0, text.find('\0'));
    CheckUnits(text);
    const size_t eq = text.find('=');
    if (eq != std::string::npos) CheckUnits(text.substr(eq + 1));
    args.push_back(std::move(text));
  }
  if (has_config) {
    const std::string path = fuzz::FreshDir() + "/config.yaml";
    fuzz::WriteFile(path, config);
    args.push_back("--config=" + path);
  }
  CheckMaster(args);
  CheckDaemon(args);
  return 0;
}
