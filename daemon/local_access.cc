#include "daemon/base/local_access.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "common/base/text.h"

namespace mooncake {

namespace {

// The highest id a list may name: (uid_t)-1 is the kernel's "no id".
constexpr uint64_t kMaxId = 4294967294ull;

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Calls lookup with a buffer big enough for the entry (getpwnam_r and getgrnam_r say
// ERANGE when it is not). true with *id once the name resolves.
bool LookUp(const std::function<int(char*, size_t, bool*, uint32_t*)>& lookup, uint32_t* id,
            std::string* failure) {
  std::vector<char> buffer(4096);
  for (;;) {
    bool found = false;
    int rc = lookup(buffer.data(), buffer.size(), &found, id);
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (rc != 0) {
      *failure = std::string("cannot be looked up: ") + std::strerror(rc);
      return false;
    }
    if (!found) *failure = "is unknown";
    return found;
  }
}

bool ResolveUser(const std::string& name, uint32_t* id, std::string* failure) {
  return LookUp(
      [&name](char* buf, size_t size, bool* found, uint32_t* out) {
        struct passwd entry;
        struct passwd* result = nullptr;
        int rc = getpwnam_r(name.c_str(), &entry, buf, size, &result);
        *found = rc == 0 && result != nullptr;
        if (*found) *out = result->pw_uid;
        return rc;
      },
      id, failure);
}

bool ResolveGroup(const std::string& name, uint32_t* id, std::string* failure) {
  return LookUp(
      [&name](char* buf, size_t size, bool* found, uint32_t* out) {
        struct group entry;
        struct group* result = nullptr;
        int rc = getgrnam_r(name.c_str(), &entry, buf, size, &result);
        *found = rc == 0 && result != nullptr;
        if (*found) *out = result->gr_gid;
        return rc;
      },
      id, failure);
}

// One flag's list (see the header's input policy); false with *error naming flag.
bool ResolveList(const std::string& flag, const std::string& list, bool users,
                 std::vector<uint32_t>* out, std::string* error) {
  for (const std::string& item : SplitList(list, ',')) {
    uint32_t id = 0;
    std::string failure;
    if (item.empty()) {
      *error = "--" + flag + ": an empty item in \"" + list + "\"";
      return false;
    }
    if (AllDigits(item)) {
      if (item.size() > 10 || std::stoull(item) > kMaxId) {
        *error = "--" + flag + ": " + item + " is not a valid " + (users ? "uid" : "gid");
        return false;
      }
      id = static_cast<uint32_t>(std::stoull(item));
    } else if (!(users ? ResolveUser(item, &id, &failure) : ResolveGroup(item, &id, &failure))) {
      *error = "--" + flag + ": " + (users ? "user " : "group ") + item + " " + failure;
      return false;
    }
    if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
  }
  return true;
}

// "65534 (nobody)", or the number alone when it has no name.
std::string UserText(uid_t uid) {
  std::vector<char> buffer(4096);
  struct passwd entry;
  struct passwd* result = nullptr;
  std::string text = std::to_string(uid);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &result) == 0 && result != nullptr) {
    text += std::string(" (") + result->pw_name + ")";
  }
  return text;
}

std::string GroupText(gid_t gid) {
  std::vector<char> buffer(4096);
  struct group entry;
  struct group* result = nullptr;
  std::string text = std::to_string(gid);
  if (getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &result) == 0 && result != nullptr) {
    text += std::string(" (") + result->gr_name + ")";
  }
  return text;
}

template <typename Id>
std::string ListText(const char* one, const char* many, const std::vector<Id>& ids,
                     std::string (*text)(Id)) {
  std::string out = ids.size() == 1 ? one : many;
  for (size_t i = 0; i < ids.size(); ++i) out += (i == 0 ? " " : ", ") + text(ids[i]);
  return out;
}

}  // namespace

LocalPeer ReadLocalPeer(int fd) {
  LocalPeer peer;
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    peer.pid = cred.pid;
    peer.uid = cred.uid;
    peer.gid = cred.gid;
  }
  // Says ERANGE, with the length it needs, while the buffer is too small.
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      peer.groups = std::move(groups);
      break;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return peer;
}

std::string LocalPeerText(const LocalPeer& peer) {
  if (peer.uid == LocalPeer::kUnknownUid) return "unknown credentials";
  return "pid " + std::to_string(peer.pid) + " uid " + std::to_string(peer.uid) + " gid " +
         std::to_string(peer.gid);
}

bool ResolveLocalAccessRules(const std::string& allowed_uids, const std::string& allowed_gids,
                             LocalAccessRules* out, std::string* error) {
  LocalAccessRules rules;
  std::vector<uint32_t> uids;
  std::vector<uint32_t> gids;
  if (!Trim(allowed_uids).empty() &&
      !ResolveList("allowed_uids", allowed_uids, true, &uids, error)) {
    return false;
  }
  if (!Trim(allowed_gids).empty()) {
    if (!ResolveList("allowed_gids", allowed_gids, false, &gids, error)) return false;
    rules.gids_given = true;
  }
  rules.uids.assign(uids.begin(), uids.end());
  rules.gids.assign(gids.begin(), gids.end());
  *out = std::move(rules);
  return true;
}

bool ResolveUids(const std::string& flag, const std::string& list, std::vector<uid_t>* out,
                 std::string* error) {
  std::vector<uint32_t> uids;
  if (!Trim(list).empty() && !ResolveList(flag, list, true, &uids, error)) return false;
  out->assign(uids.begin(), uids.end());
  return true;
}

LocalAccess::LocalAccess() : LocalAccess(LocalAccessRules(), geteuid(), getegid()) {}

LocalAccess::LocalAccess(const LocalAccessRules& rules, uid_t daemon_uid, gid_t socket_group)
    : daemon_uid_(daemon_uid), uids_(rules.uids), gids_(rules.gids) {
  if (!rules.gids_given) gids_ = {socket_group};
}

LocalAccess::Verdict LocalAccess::Check(const LocalPeer& peer) const {
  if (peer.uid == LocalPeer::kUnknownUid) return Verdict::kRefused;
  if (peer.uid == 0) return Verdict::kRoot;
  if (peer.uid == daemon_uid_) return Verdict::kDaemonUid;
  if (std::find(uids_.begin(), uids_.end(), peer.uid) != uids_.end()) {
    return Verdict::kAllowedUid;
  }
  for (gid_t gid : gids_) {
    if (peer.gid == gid ||
        std::find(peer.groups.begin(), peer.groups.end(), gid) != peer.groups.end()) {
      return Verdict::kAllowedGroup;
    }
  }
  return Verdict::kRefused;
}

std::string LocalAccess::Describe() const {
  std::string out = "root";
  if (daemon_uid_ != 0) out += ", uid " + UserText(daemon_uid_) + " (the daemon's)";
  if (!uids_.empty()) out += ", " + ListText<uid_t>("uid", "uids", uids_, UserText);
  if (!gids_.empty()) out += ", members of " + ListText<gid_t>("group", "groups", gids_, GroupText);
  return out;
}

const char* LocalAccess::VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kRoot:
      return "root";
    case Verdict::kDaemonUid:
      return "the daemon's uid";
    case Verdict::kAllowedUid:
      return "--allowed_uids";
    case Verdict::kAllowedGroup:
      return "a member of an allowed group";
    case Verdict::kRefused:
      break;
  }
  return "refused";
}

bool RefusalThrottle::Allow(Clock::time_point now, uint64_t* unlogged) {
  if (now > last_refill_) {
    int64_t elapsed =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_refill_).count();
    credit_ns_ = std::min(kBurst * kLineNs, credit_ns_ + std::min(elapsed, kBurst * kLineNs));
    last_refill_ = now;
  }
  if (credit_ns_ < kLineNs) {
    ++unlogged_;
    return false;
  }
  credit_ns_ -= kLineNs;
  *unlogged = unlogged_;
  unlogged_ = 0;
  return true;
}

}  // namespace mooncake
