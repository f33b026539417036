#include "libmc/socket_trust.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/base/path_trust.h"

namespace mooncake {
namespace client {

namespace {

// The directory holding path's last name passes SocketDirectoryProblem; *dir_owner is its
// owner. false with *why.
bool DirectoryTrusted(const std::string& path, uid_t* dir_owner, std::string* why) {
  std::string dir, name;
  if (!SplitRealDirectory(path, &dir, &name, why)) return false;
  *why = SocketDirectoryProblem(dir, static_cast<gid_t>(-1));
  if (!why->empty()) return false;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    *why = "cannot stat " + dir + ": " + std::strerror(errno);
    return false;
  }
  *dir_owner = st.st_uid;
  return true;
}

}  // namespace

ErrorCode TrustDaemonSocket(int fd, const std::string& path, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    *why = "refusing the socket " + path + " before sending it anything: " + reason;
    return ErrorCode::PERMISSION_DENIED;
  };
  // The name as given (a symbolic link in a directory others may write could be pointed
  // anywhere), then the socket it leads to.
  uid_t dir_owner = 0;
  std::string reason;
  if (!DirectoryTrusted(path, &dir_owner, &reason)) return refuse(reason);
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) {
    return refuse(std::string("cannot resolve it: ") + std::strerror(errno));
  }
  if (path != real && !DirectoryTrusted(real, &dir_owner, &reason)) {
    return refuse("it leads to " + std::string(real) + ": " + reason);
  }
  struct stat st;
  if (stat(real, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return refuse(std::string(real) + " is not a socket");
  }
  const uid_t me = geteuid();
  if (st.st_uid != 0 && st.st_uid != me && st.st_uid != dir_owner) {
    return refuse("the socket file is owned by uid " + std::to_string(st.st_uid) +
                  ", neither root, this process's user (uid " + std::to_string(me) +
                  ") nor its directory's owner (uid " + std::to_string(dir_owner) +
                  "): someone else bound it; find who (ls -l " + path + "), and give the "
                  "daemon a socket directory only it may write, such as /run/mooncake");
  }
  struct ucred peer {};
  socklen_t length = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
    return refuse(std::string("cannot tell who listens (SO_PEERCRED): ") +
                  std::strerror(errno));
  }
  if (peer.uid != 0 && peer.uid != st.st_uid) {
    return refuse("the process listening on it (pid " + std::to_string(peer.pid) + ", uid " +
                  std::to_string(peer.uid) + ") is not the socket file's owner (uid " +
                  std::to_string(st.st_uid) + ") nor root: it is not the daemon that made " +
                  "the socket; find it (ss -xlp)");
  }
  return ErrorCode::OK;
}

}  // namespace client
}  // namespace mooncake
