// Who may use the daemon's Unix socket (docs/security.md, "Local clients"): the rule,
// checked once per connection, at accept.
//
// The rule. The kernel says who connected, as they were at connect(): SO_PEERCRED gives
// the pid and the effective uid and gid, SO_PEERGROUPS the supplementary groups. A
// connection is admitted when that peer
//   1. is root (uid 0) or runs as the daemon's own uid: both can read and write the
//      daemon's memory anyway (ptrace, /proc/<pid>/mem), so refusing them protects
//      nothing; or
//   2. runs as a uid listed in --allowed_uids; or
//   3. is a member of a group listed in --allowed_gids: its gid or one of its
//      supplementary groups is one of them. Without --allowed_gids the list is the socket
//      file's group (the daemon's gid, or its directory's when that has the set-group-ID
//      bit), so that by default the check admits exactly whom the filesystem lets through
//      a socket of mode 0660, and a socket made 0666 by mistake admits nobody more.
//      Giving --allowed_gids replaces that group (list it too to keep it).
// Anyone else is refused: the first frame (HELLO) is answered -1401 PERMISSION_DENIED and
// the connection is closed, before anything is served and before its pool is mapped. So
// is a peer whose credentials cannot be read.
//
// Membership is the peer process's own groups as the kernel reports them, not the group
// database (getgrouplist): it is what the filesystem checks the socket's mode against, it
// is exact for uids without a passwd entry (containers), and a process that dropped its
// groups to run sandboxed is not let back in by /etc/group.
//
// Input policy. The flags are comma-separated lists of items, each a number or a name
// (blanks around an item are ignored). Digits are a number, taken as it is (a uid needs no
// passwd entry); anything else is a name, resolved once at start (getpwnam_r,
// getgrnam_r). A name that does not resolve, an empty item, or a number that is not a
// valid id (above 4294967294: -1 means "nobody" to the kernel) is a start-up error that
// names the flag.
//
// Thread-safety: a LocalAccess is immutable once made, for any thread; a RefusalThrottle
// belongs to one thread (the server's event loop).
#ifndef MOONCAKE_DAEMON_LOCAL_ACCESS_H_
#define MOONCAKE_DAEMON_LOCAL_ACCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mooncake {

// Who is on the other end of a Unix socket, as the kernel saw them at connect().
struct LocalPeer {
  static constexpr uid_t kUnknownUid = static_cast<uid_t>(-1);
  static constexpr gid_t kUnknownGid = static_cast<gid_t>(-1);
  pid_t pid = 0;
  uid_t uid = kUnknownUid;
  gid_t gid = kUnknownGid;
  std::vector<gid_t> groups;  // supplementary; empty when the kernel cannot say
};

// SO_PEERCRED and SO_PEERGROUPS of a connected Unix socket; what cannot be read stays
// unknown (and an unknown uid is refused).
LocalPeer ReadLocalPeer(int fd);
// "pid 123 uid 65534 gid 65534", or "unknown credentials", for log lines.
std::string LocalPeerText(const LocalPeer& peer);

// The flags, resolved to numbers.
struct LocalAccessRules {
  std::vector<uid_t> uids;   // --allowed_uids
  std::vector<gid_t> gids;   // --allowed_gids
  bool gids_given = false;   // false: the socket file's group instead
};

// Resolves --allowed_uids and --allowed_gids ("" = not given); false with *error naming
// the flag and the item.
bool ResolveLocalAccessRules(const std::string& allowed_uids, const std::string& allowed_gids,
                             LocalAccessRules* out, std::string* error);

// A list of users in the same form as --allowed_uids (numbers or names, resolved now),
// for another flag (--tenant_roaming_uids); "" is none. false with *error naming --flag
// and the item.
bool ResolveUids(const std::string& flag, const std::string& list, std::vector<uid_t>* out,
                 std::string* error);

class LocalAccess {
 public:
  // Why a connection was admitted, or that it was not.
  enum class Verdict { kRefused, kRoot, kDaemonUid, kAllowedUid, kAllowedGroup };

  // The default rule for a daemon running as geteuid() whose socket has its getegid().
  LocalAccess();
  LocalAccess(const LocalAccessRules& rules, uid_t daemon_uid, gid_t socket_group);

  Verdict Check(const LocalPeer& peer) const;
  // For the start-up log line, e.g. "root, uid 0 (the daemon's), uids 65534 (nobody),
  // members of group 0 (root)".
  std::string Describe() const;
  // For a connection's log line: "root", "the daemon's uid", "--allowed_uids",
  // "a member of an allowed group", "refused".
  static const char* VerdictName(Verdict verdict);

 private:
  uid_t daemon_uid_;
  std::vector<uid_t> uids_;
  std::vector<gid_t> gids_;
};

// Refusal lines at a bounded rate, so that a flood of connections from a refused uid
// cannot fill the log: a burst of kBurst lines, then one per second. The line that is
// logged says how many refusals went unlogged before it (a flood that stops leaves its
// last count to the next refusal's line).
class RefusalThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kBurst = 5;

  // true when a line may be written now; then *unlogged is how many refusals were not
  // logged since the previous line (and the count starts again).
  bool Allow(Clock::time_point now, uint64_t* unlogged);

 private:
  // Time banked, a second per line, at most kBurst seconds (integers: exact).
  static constexpr int64_t kLineNs = 1000 * 1000 * 1000;
  int64_t credit_ns_ = kBurst * kLineNs;
  Clock::time_point last_refill_{};
  uint64_t unlogged_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_LOCAL_ACCESS_H_
