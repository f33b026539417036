// Mooncake's spellings of our flags, and Mooncake's settings we do not implement, so that
// an operator's existing command lines and config files (Mooncake's conf/master.yaml,
// conf/master.json) start our binaries.
//
// Each table is the one place its binary's compatibility is stated; docs/operations.md
// ("Compatibility") lists the same, and master_compat_test checks the two agree. A setting
// Mooncake has and we implement under the same name is an ordinary flag (master/
// master_options.cc, daemon/server/daemon_options.cc) and appears in neither table.
#ifndef MOONCAKE_COMMON_MOONCAKE_COMPAT_H_
#define MOONCAKE_COMMON_MOONCAKE_COMPAT_H_

#include <vector>

#include "common/base/flags.h"

namespace mooncake {

struct MooncakeSetting {
  const char* name;    // Mooncake's flag or config key
  const char* target;  // our flag it is an alias of; nullptr: ignored
  const char* reason;  // ignored: why (one line); alias: what differs, or ""
};

// mooncake_master's flags and keys (mooncake-store/src/master.cpp).
const std::vector<MooncakeSetting>& MooncakeMasterSettings();
// mooncake_client's (mooncake-store/src/real_client_main.cpp), for mooncaked.
const std::vector<MooncakeSetting>& MooncakeClientSettings();

// Declares a table's aliases and ignored settings on flags (after its own flags).
void AddMooncakeSettings(FlagSet* flags, const std::vector<MooncakeSetting>& settings);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MOONCAKE_COMPAT_H_
