#include "daemon/no_space_wait.h"

#include <algorithm>
#include <thread>

#include "daemon/client_connection.h"

namespace mooncake {

NoSpaceWait::NoSpaceWait(int64_t budget_ms)
    : deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms)) {}

bool NoSpaceWait::Next(const ClientConnection* client) {
  if (client != nullptr && client->closed()) return false;
  auto left = deadline_ - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return false;
  std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause_, left));
  pause_ = std::min(2 * pause_, kMaxPause);
  return client == nullptr || !client->closed();
}

}  // namespace mooncake
