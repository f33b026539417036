// The flag tables of the docs are generated from the flags' declarations (master/
// master_options.cc, daemon/server/daemon_options.cc): README.md's master flags, docs/daemon.md's
// flags and docs/durability.md's. The test fails when a committed table differs from what
// the code writes; run with --write to regenerate them.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/base/flags.h"
#include "daemon/server/daemon_options.h"
#include "master/directory/master_options.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/generated_docs.h"

namespace {

using mooncake::FlagSet;
using mooncake::testing::GeneratedDoc;

const char kCommand[] = "build/tests/unit/flags_docs_test --write";

std::vector<GeneratedDoc> Docs() {
  mooncake::MasterOptions master;
  FlagSet master_flags("mooncake-master", "");
  mooncake::RegisterMasterFlags(&master_flags, &master);
  mooncake::DaemonOptions daemon;
  FlagSet daemon_flags("mooncaked", "");
  mooncake::RegisterDaemonFlags(&daemon_flags, &daemon);
  return {
      {"README.md", {{"master-flags", master_flags.MarkdownTable()}}},
      {"docs/daemon.md", {{"daemon-flags", daemon_flags.MarkdownTable()}}},
      {"docs/durability.md",
       {{"durability-flags",
         master_flags.MarkdownTable({"enable_snapshot", "snapshot_dir", "snapshot_interval_seconds",
                                     "snapshot_retention_count", "snapshot_child_timeout_seconds",
                                     "enable_snapshot_restore", "oplog_mode",
                                     "oplog_flush_interval", "reattach_grace_period_sec",
                                     "parked_segment_ttl_sec"})}}},
  };
}

void TestDocsShowTheFlags(void**) {
  const std::string problem =
      mooncake::testing::CheckGeneratedDocs(MC_SOURCE_DIR, Docs(), kCommand);
  if (!problem.empty()) fail_msg("%s", problem.c_str());
}

// Every flag a table names exists (a renamed flag would silently drop out of a subset).
void TestSubsetsNameRealFlags(void**) {
  for (const GeneratedDoc& doc : Docs()) {
    for (const auto& section : doc.sections) {
      const size_t rows =
          static_cast<size_t>(std::count(section.text.begin(), section.text.end(), '\n'));
      assert_true(rows > 2);
      if (section.name == "durability-flags") assert_int_equal(rows, 2 + 10);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--write") == 0) {
    return mooncake::testing::WriteGeneratedDocs(MC_SOURCE_DIR, Docs());
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestDocsShowTheFlags),
      cmocka_unit_test(TestSubsetsNameRealFlags),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
