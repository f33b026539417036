#include "common/base/path_trust.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace mooncake {

namespace {

std::string Uid(uid_t uid) { return "uid " + std::to_string(uid); }

// The directory above dir ("/a/b" -> "/a", "/a" -> "/"), dir being real and absolute.
std::string Parent(const std::string& dir) {
  size_t slash = dir.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

bool StatDirectory(const std::string& dir, struct stat* st, std::string* why) {
  if (stat(dir.c_str(), st) != 0) {
    *why = "cannot stat the directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

// Why a directory above the one holding the name could let others in: others (or, with
// group_too, its group) may write it and it is not sticky. "" when none.
std::string AncestorsProblem(const std::string& dir, bool group_too, bool owned_by_us,
                             const std::string& what) {
  const uid_t me = geteuid();
  std::string why;
  for (std::string up = dir; up != "/";) {
    up = Parent(up);
    struct stat st;
    if (!StatDirectory(up, &st, &why)) return why;
    if (owned_by_us && st.st_uid != me && st.st_uid != 0) {
      return "the directory " + up + " above it is owned by " + Uid(st.st_uid) +
             ", neither this process's user (" + Uid(me) + ") nor root: its owner could put " +
             "another directory in the place of the one below; keep " + what + " under " +
             "directories owned by root or " + Uid(me);
    }
    const mode_t writers = group_too ? (S_IWGRP | S_IWOTH) : S_IWOTH;
    if ((st.st_mode & writers) != 0 && (st.st_mode & S_ISVTX) == 0) {
      return "the directory " + up + " above it may be written by " +
             ((st.st_mode & S_IWOTH) != 0 ? "anyone" : "its group") + " (mode " +
             ModeText(st.st_mode) + ", not sticky): they could put another directory in " +
             "the place of the one below; chmod go-w " + up + ", or move " + what;
    }
  }
  return "";
}

}  // namespace

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool SplitRealDirectory(const std::string& path, std::string* dir, std::string* name,
                        std::string* why) {
  const size_t slash = path.rfind('/');
  const std::string lexical =
      slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  *name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name->empty() || *name == "." || *name == "..") {
    *why = path + " names a directory, not a file";
    return false;
  }
  char real[PATH_MAX];
  if (realpath(lexical.c_str(), real) == nullptr) {
    const int err = errno;
    *why = "cannot resolve its directory " + lexical + ": " + std::strerror(err);
    errno = err;
    return false;
  }
  *dir = real;
  return true;
}

std::string SecretDirectoryProblem(const std::string& dir) {
  const uid_t me = geteuid();
  struct stat st;
  std::string why;
  if (!StatDirectory(dir, &st, &why)) return why;
  if (st.st_uid != me && st.st_uid != 0) {
    return "its directory " + dir + " is owned by " + Uid(st.st_uid) +
           ", neither this process's user (" + Uid(me) + ") nor root: its owner could put " +
           "their own file in its place; keep the file in a directory owned by root or " +
           Uid(me);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    return "its directory " + dir + " may be written by " +
           ((st.st_mode & S_IWOTH) != 0 ? "anyone" : "its group") + " (mode " +
           ModeText(st.st_mode) + "): " +
           (sticky ? "sticky, but others may still create names in it, so the file there "
                     "may be one they put first; move it to a directory only its owner may "
                     "write (such as /etc/mooncake, or one made with mkdir -m 0700)"
                   : "they could put their own file in its place; chmod go-w " + dir +
                         ", or move the file to a directory only its owner may write (such "
                         "as /etc/mooncake)");
  }
  return AncestorsProblem(dir, /*group_too=*/true, /*owned_by_us=*/true, "the file");
}

std::string SocketDirectoryProblem(const std::string& dir, gid_t writer_group) {
  struct stat st;
  std::string why;
  if (!StatDirectory(dir, &st, &why)) return why;
  const bool others = (st.st_mode & S_IWOTH) != 0;
  const bool group = (st.st_mode & S_IWGRP) != 0 && writer_group != static_cast<gid_t>(-1) &&
                     st.st_gid != writer_group;
  if (others || group) {
    return "the socket's directory " + dir + " may be written by " +
           (others ? "anyone" : "the group gid " + std::to_string(st.st_gid)) + " (mode " +
           ModeText(st.st_mode) + (others && (st.st_mode & S_ISVTX) != 0 ? ", sticky" : "") +
           "): they could bind the socket's name first, or put their own in its place, and " +
           "receive the clients' pools and values; use a directory only the daemon's user " +
           "(and its group) may write, such as /run/mooncake (chmod o-w" +
           (group ? ",g-w " : " ") + dir + " where that is yours to change)";
  }
  return AncestorsProblem(dir, /*group_too=*/false, /*owned_by_us=*/false, "the socket");
}

}  // namespace mooncake
