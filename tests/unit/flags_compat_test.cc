// FlagSet's aliases and ignored settings (common/base/flags.h), in process:
//  - an alias sets its flag from the command line and from a config file, and a flag given
//    on the command line under either name wins over the file under either name;
//  - an ignored setting consumes its value (or none, before another flag), may have any
//    shape in a file, and is reported once however often it is given;
//  - a name that is neither still fails, naming it.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/base/flags.h"
#include "common/base/mooncake_compat.h"
#include "daemon/server/daemon_options.h"
#include "master/directory/master_options.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"

namespace {

struct Parsed {
  bool ok = false;
  std::string error;
  std::vector<std::string> warnings;
  int64_t port = 1;
  int64_t threads = 2;
  bool flag = false;
};

Parsed Parse(std::vector<std::string> args, const std::string& config_text = "") {
  std::string dir;
  if (!config_text.empty()) {
    dir = mooncake::testing::MakeTempDir("mc-flags");
    std::ofstream(dir + "/c.yaml") << config_text;
    args.push_back("--config_path");
    args.push_back(dir + "/c.yaml");
  }
  Parsed p;
  mooncake::FlagSet flags("t", "");
  flags.AddInt("rpc_port", &p.port, "");
  flags.AddInt("rpc_thread_num", &p.threads, "");
  flags.AddBool("flag", &p.flag, "");
  flags.AddAlias("port", "rpc_port");
  flags.AddAlias("max_threads", "rpc_thread_num");
  flags.AddAlias("config_path", "config");
  flags.AddIgnored("rpc_interface", "why");
  flags.AddIgnored("enable_cxl", "why not");
  std::vector<char*> argv = {const_cast<char*>("t")};
  for (auto& a : args) argv.push_back(a.data());
  p.ok = flags.Parse(static_cast<int>(argv.size()), argv.data(), &p.error);
  p.warnings = flags.warnings();
  if (!dir.empty()) mooncake::testing::RemoveTree(dir);
  return p;
}

void TestAliasSetsFlag(void**) {
  Parsed p = Parse({"--port", "7", "--max_threads=3"});
  assert_true(p.ok);
  assert_int_equal(p.port, 7);
  assert_int_equal(p.threads, 3);
  p = Parse({}, "port: 8\nmax_threads: 4\n");
  assert_true(p.ok);
  assert_int_equal(p.port, 8);
  assert_int_equal(p.threads, 4);
}

void TestCommandLineWinsUnderEitherName(void**) {
  Parsed p = Parse({"--port", "7", "--rpc_thread_num", "5"}, "rpc_port: 8\nmax_threads: 4\n");
  assert_true(p.ok);
  assert_int_equal(p.port, 7);
  assert_int_equal(p.threads, 5);
}

void TestIgnoredConsumesValueOnce(void**) {
  Parsed p = Parse({"--rpc_interface", "eth0", "--enable_cxl", "--flag", "--port", "9"},
                   "rpc_interface: eth1\nenable_cxl: {a: [1, 2]}\n");
  assert_true(p.ok);
  assert_true(p.flag);  // --enable_cxl took no value: --flag is a flag
  assert_int_equal(p.port, 9);
  assert_int_equal(p.warnings.size(), 2);
  assert_string_equal(p.warnings[0].c_str(), "--rpc_interface is ignored: why");
  assert_string_equal(p.warnings[1].c_str(), "--enable_cxl is ignored: why not");
  p = Parse({}, "enable_cxl: true\n");
  assert_int_equal(p.warnings.size(), 1);
  assert_non_null(strstr(p.warnings[0].c_str(), "--enable_cxl (in "));
}

void TestUnknownStillFails(void**) {
  Parsed p = Parse({"--interface", "x"});
  assert_false(p.ok);
  assert_string_equal(p.error.c_str(), "unknown flag --interface");
  p = Parse({}, "rpc_interfaces: x\n");
  assert_false(p.ok);
  assert_non_null(strstr(p.error.c_str(), "unknown flag --rpc_interfaces (in "));
}

// Every alias of the tables names a flag its binary has (else Mooncake's spelling would be
// "unknown flag"), and every ignored setting has a reason and is not also one of ours.
void CheckTable(const mooncake::FlagSet& flags,
                const std::vector<mooncake::MooncakeSetting>& table) {
  std::set<std::string> ours = {"config"};
  for (const auto& doc : flags.Docs()) ours.insert(doc.name);
  for (const auto& s : table) {
    if (s.target != nullptr) {
      if (!ours.count(s.target)) fail_msg("%s: no flag %s", s.name, s.target);
    } else {
      assert_true(std::string(s.reason).size() > 0);
      if (ours.count(s.name)) fail_msg("%s is ours and ignored", s.name);
    }
  }
}

void TestTablesConsistent(void**) {
  mooncake::MasterOptions master;
  mooncake::FlagSet master_flags("mooncake-master", "");
  mooncake::RegisterMasterFlags(&master_flags, &master);
  CheckTable(master_flags, mooncake::MooncakeMasterSettings());
  mooncake::DaemonOptions daemon;
  mooncake::FlagSet daemon_flags("mooncaked", "");
  mooncake::RegisterDaemonFlags(&daemon_flags, &daemon);
  CheckTable(daemon_flags, mooncake::MooncakeClientSettings());
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestAliasSetsFlag),
      cmocka_unit_test(TestCommandLineWinsUnderEitherName),
      cmocka_unit_test(TestIgnoredConsumesValueOnce),
      cmocka_unit_test(TestUnknownStillFails),
      cmocka_unit_test(TestTablesConsistent),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
