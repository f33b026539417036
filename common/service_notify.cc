#include "common/base/service_notify.h"

#include <string.h>
#include <systemd/sd-daemon.h>

#include <mutex>

#include "common/base/logging.h"

namespace mooncake {

namespace {

std::mutex& NotifyMutex() {
  static std::mutex mu;
  return mu;
}
bool ready_sent = false;    // NotifyMutex()
bool stopping_sent = false;  // NotifyMutex()
bool warned = false;        // NotifyMutex()

// Holds NotifyMutex(), so that READY=1 and STOPPING=1 reach the manager in the order they
// were decided. A newline in status would start another assignment: it becomes a space.
void Send(const char* state, const std::string& status) {
  std::string message = state;
  std::string line = status;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  message += "STATUS=" + line;
  int rc = sd_notify(0, message.c_str());
  if (rc < 0 && !warned) {
    warned = true;
    MC_LOG_WARN("cannot tell the service manager (NOTIFY_SOCKET) \"%s\": %s", message.c_str(),
                strerror(-rc));
  }
}

}  // namespace

void NotifyReady(const std::string& status) {
  std::lock_guard<std::mutex> lock(NotifyMutex());
  if (stopping_sent) return;
  Send(ready_sent ? "" : "READY=1\n", status);
  ready_sent = true;
}

void NotifyStatus(const std::string& status) {
  std::lock_guard<std::mutex> lock(NotifyMutex());
  Send("", status);
}

void NotifyStopping(const std::string& status) {
  std::lock_guard<std::mutex> lock(NotifyMutex());
  stopping_sent = true;
  Send("STOPPING=1\n", status);
}

}  // namespace mooncake
