// Directories only this process's user may enter: where the master keeps its snapshots and
// operation log (--snapshot_dir) and the daemon its SSD tier (--ssd_path). What they hold
// names every tenant's keys, and the SSD tier's files hold the values; docs/security.md,
// "Files".
//
// Files in them are created with kPrivateFileMode named on the open(2) itself, and
// directories with kPrivateDirMode on the mkdir(2): never what the umask happens to leave.
//
// A directory that already exists with group or other bits (made by an earlier version,
// by hand, or by systemd's StateDirectoryMode=) is tightened when this process's user owns
// it: the tree is the process's alone, nothing else has a reason to read it, and a
// directory others cannot enter also hides files an earlier version left readable
// (snapshots and logs of mode 0644), without rewriting them. One log line says so. A
// directory of another owner cannot be changed: a warning says what to do, once per
// directory and process.
//
// Thread safety: any thread (the set of directories warned about is locked).
#ifndef MOONCAKE_COMMON_PRIVATE_DIR_H_
#define MOONCAKE_COMMON_PRIVATE_DIR_H_

#include <sys/types.h>

#include <string>

namespace mooncake {

constexpr mode_t kPrivateFileMode = 0600;
constexpr mode_t kPrivateDirMode = 0700;

// Removes the group and other bits of the existing directory path when this process's
// user owns it (logged), or warns once when another user does. what names it in the log
// ("--snapshot_dir"). A path that is not a directory, or cannot be stat'ed, is left to
// whoever opens it next to report.
void KeepPrivate(const std::string& path, const char* what);

// mkdir(path, kPrivateDirMode). true when made; when it already exists as a directory,
// true after KeepPrivate. Else false, errno saying why.
bool MakePrivateDirectory(const std::string& path, const char* what);

// mkdir -p: each missing level made with kPrivateDirMode, the last one kept private when it
// existed (the levels above, which this process did not make, are left alone). false,
// errno saying why, when a level cannot be made.
bool MakePrivateDirectories(const std::string& path, const char* what);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_PRIVATE_DIR_H_
