// Whether someone other than this process's user and root could put their own file at a
// path: what a process checks before it trusts a file it reads a secret from (the cluster
// key), and before it trusts a Unix socket's name (mooncaked binding it, a client
// connecting to it). docs/security.md, "Files".
//
// The danger is the directory, not the file: whoever may write a directory may remove an
// entry of it and put their own in its place, or take a name before its owner binds it,
// whatever the mode of the file that was or will be there. So each check walks the
// directory that holds the name and every directory above it, to /, as the kernel resolves
// them (symbolic links followed, the real directories checked).
//
// The sticky bit (mode 1000, as on /tmp) stops others from removing or renaming entries
// they do not own, but not from creating new ones. So a sticky directory that others may
// write is fine ABOVE the directory holding the name (a subdirectory of ours in /tmp
// cannot be replaced by anyone else), never AS that directory (anyone may take a free name
// in /tmp first).
//
// Input policy: path as given (relative paths resolve against the working directory); a
// directory that does not exist or cannot be searched is a problem named like the others.
//
// Thread safety: free functions over stat(2); any thread.
#ifndef MOONCAKE_COMMON_PATH_TRUST_H_
#define MOONCAKE_COMMON_PATH_TRUST_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace mooncake {

// The real (absolute, symlink-free) directory holding path's last component, and that
// component; false with *why (the directory and the errno text) when it cannot be
// resolved, errno then saying why (ENOENT: it does not exist).
// "/etc/mooncake/cluster.key" -> "/etc/mooncake", "cluster.key".
bool SplitRealDirectory(const std::string& path, std::string* dir, std::string* name,
                        std::string* why);

// For a file holding a secret: "" when dir (a real directory, SplitRealDirectory's) and
// each directory above it are owned by this process's effective uid or root, and may be
// written by their owner only (a directory above dir: or it is sticky). Else why, naming
// the directory, its owner or mode, and the fix:
// "the directory /tmp may be written by others (mode 1777): anyone could put their own
// file in its place; keep it in a directory only its owner may write (chmod go-w /tmp, or
// move the file)".
std::string SecretDirectoryProblem(const std::string& dir);

// For a Unix socket's name: "" when others (not owner, not group) may not write dir,
// sticky or not; when writer_group is not (gid_t)-1, when dir's group may write it only
// if that group is writer_group (mooncaked's own group); and when no directory above dir
// may be written by others unless it is sticky. Else why, naming the directory and the
// fix, as SecretDirectoryProblem.
std::string SocketDirectoryProblem(const std::string& dir, gid_t writer_group);

// "1777" for st_mode's permission bits (with set-id and sticky), for messages.
std::string ModeText(mode_t mode);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_PATH_TRUST_H_
