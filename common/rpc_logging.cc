#include "common/master_link/rpc_logging.h"

#include <string>  // thrift/TOutput.h uses std::string without including it

#include <thrift/TOutput.h>

#include "common/base/logging.h"

namespace mooncake {

void RouteThriftOutputToDebugLog() {
  apache::thrift::GlobalOutput.setOutputFunction(
      [](const char* message) { MC_LOG_DEBUG("thrift: %s", message); });
}

}  // namespace mooncake
