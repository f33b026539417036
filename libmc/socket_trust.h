// Whether the Unix socket a client just connected to is mooncaked's, before the client
// sends it anything: HELLO carries the handle's pool (its descriptor, with every value the
// application reads or writes through it), and every later request a key. A socket whose
// name someone else could have taken first, or put in place of the daemon's, is refused
// (docs/security.md, "Local clients": the client's side).
//
// Checked, for the path as the application named it and for the socket it leads to:
//  - its directory may not be written by others (o+w), sticky or not, and no directory
//    above it by others unless sticky (common/base/path_trust.h);
//  - the socket file is owned by root, by this process's user, or by its directory's
//    owner (who could have put anything there anyway);
//  - the process listening on it (SO_PEERCRED of the connected socket, as the kernel
//    recorded it at listen) runs as the socket file's owner, or as root.
// A daemon started the usual way passes all three: its socket is in /run/mooncake (made by
// systemd or the daemon, owned by the daemon's user) or a directory of its user, bound by
// that user.
//
// Thread safety: a free function over stat(2) and getsockopt(2); any thread.
#ifndef MOONCAKE_LIBMC_SOCKET_TRUST_H_
#define MOONCAKE_LIBMC_SOCKET_TRUST_H_

#include <string>

#include "common/base/error_code.h"

namespace mooncake {
namespace client {

// OK when fd, connected to path, may be sent the handle's pool; else PERMISSION_DENIED
// with *why naming the path, what is wrong and the fix.
ErrorCode TrustDaemonSocket(int fd, const std::string& path, std::string* why);

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_SOCKET_TRUST_H_
