// Reading a secret from a file (the cluster key, common/auth/cluster_key.h, and whatever else
// is loaded with ClusterKey::Load), and judging whether a secret is guessable.
// docs/security.md, "Files".
//
// Whoever can read the file holds the secret; whoever can replace it chooses the secret
// the process trusts. So a secret file must be a regular file owned by this process's
// effective uid or root, with no permission bits for group or others, in a directory that
// only this user or root can write, under directories that no one else can write either
// (common/base/path_trust.h: sticky directories such as /tmp above it are fine, not as its
// directory). Anything else is refused before a byte is read: a FIFO (which would block
// the process at start, waiting for a writer), a socket or device (never opened), a
// symbolic link (name the file itself).
//
// Thread safety: free functions; any thread.
#ifndef MOONCAKE_COMMON_SECRET_FILE_H_
#define MOONCAKE_COMMON_SECRET_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "common/base/error_code.h"

namespace mooncake {

// What a secret must carry by EstimatedSecretBits: what 32 random bytes give with a wide
// margin (openssl rand -hex 32: about 240; -base64 32: about 210), and what no repeated,
// sequential or few-character string of the minimum length (32 characters) reaches.
constexpr double kMinSecretBits = 128;

// The text of the secret file path, at most max_bytes, into *text. On failure *why says
// what is wrong and the fix, without the path (the caller names the file):
//   FILE_NOT_FOUND   no such file;
//   FILE_OPEN_FAIL   not a regular file, not owned by this user or root, mode with group
//                    or other bits, a directory others could write (above), or open(2)
//                    failed;
//   FILE_READ_FAIL   read(2) failed;
//   INVALID_PARAMS   larger than max_bytes.
ErrorCode ReadSecretFile(const std::string& path, size_t max_bytes, std::string* text,
                         std::string* why);

// A simple, explainable estimate of how many bits an attacker must guess: the Shannon
// entropy of the secret's byte frequencies times its length, and the same of the steps
// between neighbouring bytes (so "abcdefgh..." and "0123456789..." score low), whichever
// is lower; a secret that is a shorter part repeated counts as that part. It overestimates
// a chosen phrase (English text scores about 4 bits a character), so it stops the worst
// keys, not every weak one: generate keys.
double EstimatedSecretBits(std::string_view secret);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_SECRET_FILE_H_
