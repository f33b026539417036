// Telling the service manager where mooncake-master and mooncaked are (sd_notify(3), through
// libsystemd): READY=1 once the process serves, STATUS= lines on the way there and after,
// STOPPING=1 when it begins to shut down. deploy/*.service are Type=notify units: with them,
// `systemctl start` returns, and units ordered After= this one start, only once the
// process really serves, not as soon as it has been exec'ed.
//
// Without NOTIFY_SOCKET in the environment (started by hand, by a test, by another
// supervisor) every call does nothing. A message the service manager cannot be sent is
// logged once as a warning and otherwise ignored: the process serves either way.
//
// One service manager per process, so these are free functions over one process-wide
// state: READY=1 is sent at most once however often NotifyReady is called (a standby
// master may learn its place more than once), and never after NotifyStopping.
//
// Thread roles: any thread may call any of them, at any time (a signal thread included).
#ifndef MOONCAKE_COMMON_SERVICE_NOTIFY_H_
#define MOONCAKE_COMMON_SERVICE_NOTIFY_H_

#include <string>

namespace mooncake {

// READY=1 (the first time, unless stopping) with STATUS=status.
void NotifyReady(const std::string& status);
// STATUS=status only: what the process waits for, or what it is now.
void NotifyStatus(const std::string& status);
// STOPPING=1 with STATUS=status.
void NotifyStopping(const std::string& status);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_SERVICE_NOTIFY_H_
