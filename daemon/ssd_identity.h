// The SSD tier's identity across restarts (docs/ssd.md, "Identity"): the id and the
// incarnation of the daemon's LOCAL_DISK segment, kept in <ssd_path>/IDENTITY so that a
// restarted daemon mounts the same segment again and the master re-attaches its replicas.
//
// The file is one line, "mooncake-ssd-identity 1 <segment id> <incarnation>\n", mode 0600
// (the incarnation is what proves a re-mount comes from the owner of the files). It is
// written atomically: a temp file in the same directory, fsynced, renamed over IDENTITY,
// then the directory fsynced; a crash leaves the old file or the new one, never half.
//
// Input policy: a file that does not parse (torn by hand, another version) is reported as
// unusable with a reason, and the caller draws a new identity; it is never trusted in part.
//
// Thread-safety: plain functions on files; callers hold the SSD directory's lock (the
// store's), so no other daemon writes the file meanwhile.
#ifndef MOONCAKE_DAEMON_SSD_IDENTITY_H_
#define MOONCAKE_DAEMON_SSD_IDENTITY_H_

#include <cstdint>
#include <string>

#include "common/base/error_code.h"

namespace mooncake {

struct SsdIdentity {
  int64_t segment_id = 0;   // > 0
  int64_t incarnation = 0;  // > 0, never logged
};

// The file's path under the directory.
std::string SsdIdentityPath(const std::string& directory);

// OK with *out; FILE_NOT_FOUND when there is none; DESERIALIZE_FAIL (with *error) when it
// does not parse; FILE_READ_FAIL when it cannot be read.
ErrorCode ReadSsdIdentity(const std::string& directory, SsdIdentity* out, std::string* error);
// OK once durable; FILE_WRITE_FAIL with *error otherwise (the old file, if any, is left).
ErrorCode WriteSsdIdentity(const std::string& directory, const SsdIdentity& identity,
                           std::string* error);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_IDENTITY_H_
