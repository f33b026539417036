#include "daemon/service/no_space_wait.h"

#include <algorithm>
#include <thread>

#include "daemon/service/client_connection.h"

namespace mooncake {

bool NoSpaceWait::Next(const ClientConnection* client) {
  if (client != nullptr && client->closed()) return false;
  auto now = std::chrono::steady_clock::now();
  if (!started_) {  // the first -200 was just now
    started_ = true;
    deadline_ = now + budget_;
  }
  auto left = deadline_ - now;
  if (left <= std::chrono::steady_clock::duration::zero()) return false;
  std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause_, left));
  pause_ = std::min(2 * pause_, kMaxPause);
  return client == nullptr || !client->closed();
}

}  // namespace mooncake
