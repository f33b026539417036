#include "common/base/version.h"

namespace mooncake {

// MC_VERSION is defined for this file alone (common/CMakeLists.txt), so that a new version
// recompiles one file.
const char* MooncakeVersion() { return MC_VERSION; }

}  // namespace mooncake
