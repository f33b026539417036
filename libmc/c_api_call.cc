#include "libmc/c_api_call.h"

#include "common/base/log_throttle.h"
#include "common/base/logging.h"

namespace mooncake {
namespace client {
namespace abi {

namespace {

// The library's lines in an application's stderr name it rather than the application (the
// library has its own copy of the logging state: mc_common is linked in, hidden).
const bool kLogComponentSet = (SetLogComponent("libmc"), true);

// Refused arguments of calls without a handle (or with a NULL one): one line a second.
LogThrottle g_no_handle_log;

void LogRefusal(const char* function, StoreClient* client, const std::string& message) {
  LogThrottle& throttle = client != nullptr ? client->argument_log() : g_no_handle_log;
  uint64_t skipped = 0;
  if (!throttle.Due(&skipped)) return;
  if (skipped > 0) {
    MC_LOG_WARN("%s: %s (%llu more refused calls on this handle since the last such line)",
                function, message.c_str(), static_cast<unsigned long long>(skipped));
  } else {
    MC_LOG_WARN("%s: %s", function, message.c_str());
  }
}

}  // namespace

void Finish(const char* function, StoreClient* client, Kind kind, int64_t result) noexcept {
  try {
    const uint64_t serial = client != nullptr ? client->serial() : 0;
    if (result >= 0) {
      const std::string* entry = NotedEntry();  // a batch's first refused entry, if any
      RecordMessage(serial, entry != nullptr ? *entry : std::string());
      if (entry != nullptr && kind == Kind::kData && NotedEntryBlamesArguments()) {
        LogRefusal(function, client, *entry);
      }
      return;
    }
    const ErrorCode code = FromWire(result);
    const std::string message = MessageFor(code);
    RecordMessage(serial, message);
    if (kind == Kind::kSetup) {
      MC_LOG_ERROR("%s: %s", function, message.c_str());
    } else if (kind == Kind::kData && BlamesArguments(code)) {
      LogRefusal(function, client, message);
    }
  } catch (...) {  // out of memory: the message is lost, the result is not
  }
}

}  // namespace abi
}  // namespace client
}  // namespace mooncake
