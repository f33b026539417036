// The on-disk format of the master's snapshots: what SnapshotWriter (master/snapshot/snapshot_writer.h),
// which stores one, and SnapshotStore (master/snapshot/snapshot_store.h), which finds, checks, loads
// and prunes them, agree on. Neither looks inside a payload: what the bytes mean (msgpack +
// zstd of the object directory) is the encoder's business; here they are named blobs with
// a size and a CRC-32C (common/base/crc32c.h).
//
// Layout under the snapshot directory `dir`:
//
//   dir/latest                   the name of the newest published snapshot, one line + "\n"
//   dir/latest.tmp               latest being replaced (only ever briefly, or after a crash)
//   dir/snapshots/<name>/        one snapshot: its payload files (one per payload, named
//                                after it), then `manifest`, then `descriptor`
//   dir/snapshots/<name>.invalid a snapshot that failed to load, kept for inspection
//
// <name> is SnapshotName(sequence, created_ms): the operation-log sequence at the fork as
// 20 decimal digits, '-', the creation time in unix milliseconds ("00000000000000000042-
// 1700000000123"), so that names sort by sequence.
//
// manifest (text, every line ends in "\n"):
//
//   mooncake-master snapshot manifest
//   format 1
//   payload <payload name> <size in bytes> <crc32c as 8 lowercase hex digits>   (0 or more)
//   crc32c <8 lowercase hex digits: the CRC-32C of every preceding byte of the file>
//
// descriptor (text, every line ends in "\n"):
//
//   mooncake-master snapshot descriptor
//   format 1
//   sequence <u64>                 the operation-log sequence at the fork
//   created_ms <i64>               unix milliseconds
//   manifest_crc32c <8 hex>        the CRC-32C of the whole manifest file
//   <key> <value>                  0 or more lines from the caller ("objects 123")
//   crc32c <8 hex>                 the CRC-32C of every preceding byte of the file
//
// Publishing, each step durable (fsync) before the next: every payload file; manifest;
// descriptor; the snapshot's directory; then dir/latest.tmp, renamed over dir/latest, and
// dir itself. So a snapshot directory without a valid descriptor is incomplete (its writer
// crashed, was killed, or is still running) and is never loaded, and latest only ever
// names a complete snapshot. A crash between the descriptor and the rename leaves a
// complete snapshot latest does not name: SnapshotStore::Candidates still finds it.
//
// Names of payloads and extra keys: 1..kMaxTokenBytes bytes of [A-Za-z0-9._-], not
// starting with '.'; payloads cannot be called "manifest" or "descriptor", extra keys
// cannot be a key the descriptor already has ("sequence", "created_ms",
// "manifest_crc32c", "format", "crc32c"). Extra values: up to kMaxValueBytes bytes of
// printable ASCII (space included). Numbers are written in canonical form (no sign on
// unsigned, no leading zeros) and read back only in that form.
//
// Fork safety: SnapshotWriter runs in the child the master forks to take a snapshot, a copy
// of a multithreaded process, and uses the helpers below. So nothing declared here (nor
// anything in snapshot_format.cc) logs, takes a lock, starts a thread or calls a
// locale-dependent libc function (no snprintf, no strerror: errno texts come from
// strerrordesc_np); only system calls and malloc (which glibc's fork keeps usable in the
// child). What only the reading side needs belongs in snapshot_store.cc, not here.
#ifndef MOONCAKE_MASTER_SNAPSHOT_FORMAT_H_
#define MOONCAKE_MASTER_SNAPSHOT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mooncake {

// The snapshot directory's name for a snapshot: "<sequence as 20 digits>-<created_ms>".
// created_ms must be >= 0 (SnapshotWriter::Begin refuses a negative one).
std::string SnapshotName(uint64_t sequence, int64_t created_ms);

// The inverse, strictly: exactly 20 digits, '-', a canonical non-negative int64 (no sign,
// no leading zeros), nothing else. False for anything else ("<name>.invalid" included).
bool ParseSnapshotName(std::string_view name, uint64_t* sequence, int64_t* created_ms);

// The format both files declare ("format 1"); Load refuses any other.
constexpr int kSnapshotFormat = 1;
// Limits that bound every parse of a file that may be corrupted (the writer keeps to them).
constexpr size_t kMaxTokenBytes = 128;  // a payload name or an extra key
constexpr size_t kMaxValueBytes = 512;  // an extra value
constexpr size_t kMaxSnapshotPayloads = 1000;
constexpr size_t kMaxSnapshotExtras = 1000;
constexpr size_t kMaxSnapshotTextBytes = 1 << 20;  // a manifest or a descriptor

// What SnapshotWriter and SnapshotStore share beyond that; not for other callers. All of
// it is fork-safe (above).
namespace snapshot_format {

// Names under dir (kLatestFile, kSnapshotsDir) and in a snapshot's directory.
inline constexpr char kManifestFile[] = "manifest";
inline constexpr char kDescriptorFile[] = "descriptor";
inline constexpr char kLatestFile[] = "latest";
inline constexpr char kSnapshotsDir[] = "snapshots";
// The first line of each file.
inline constexpr char kManifestHeader[] = "mooncake-master snapshot manifest";
inline constexpr char kDescriptorHeader[] = "mooncake-master snapshot descriptor";

// ---- numbers, written and read back only in canonical form -------------------------------

// Decimal: no sign on unsigned, '-' only on a negative int64, no leading zeros.
void AppendU64(std::string* out, uint64_t v);
void AppendI64(std::string* out, int64_t v);
std::string U64Text(uint64_t v);
std::string I64Text(int64_t v);
// 8 lowercase hex digits (a CRC-32C).
void AppendHex8(std::string* out, uint32_t v);
std::string Hex8(uint32_t v);

// A canonical unsigned decimal: 1..20 digits, no leading zero unless it is "0", at most
// max.
bool ParseCanonicalU64(std::string_view s, uint64_t max, uint64_t* out);
// A canonical signed decimal: optional '-' (not on "0"), then a canonical unsigned.
bool ParseCanonicalI64(std::string_view s, int64_t* out);
// Exactly 8 lowercase hex digits.
bool ParseHex8(std::string_view s, uint32_t* out);

// ---- names and values (the rules above) ---------------------------------------------------

// A payload name or an extra key: 1..kMaxTokenBytes of [A-Za-z0-9._-], no leading '.'.
bool ValidToken(std::string_view s);
// A token other than "manifest" and "descriptor".
bool ValidPayloadName(std::string_view s);
// One of the keys the descriptor has itself, which an extra line cannot use.
bool ReservedKey(std::string_view s);
// Up to kMaxValueBytes bytes of printable ASCII (space included).
bool ValidValue(std::string_view s);

// ---- system calls both sides make ---------------------------------------------------------

// "No such file or directory (ENOENT)", from glibc's static tables (no translation, so
// no locale lock); "errno <n>" where those are not available.
std::string ErrnoText(int err);
// fsync of a file or directory by path; 0 or the errno.
int FsyncPath(const std::string& path);
// The directory holding path (trailing '/' ignored): "." when there is no '/', "/" for a
// top-level entry.
std::string ParentOf(const std::string& path);

}  // namespace snapshot_format

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SNAPSHOT_FORMAT_H_
