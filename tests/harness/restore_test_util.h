/* Helpers of the suites that kill the master and restore it (tests/cluster/master_restore_test.c,
 * tests/cluster/fault_matrix_test.c): snapshots taken by hand and damaged on disk, and the newest
 * operation-log file's records located so that a test can tear, cut or flip one (the
 * framing of master/log/oplog.h). Every path is under the cluster's directory, for a master
 * started with "--snapshot_dir {dir}/snap". Failures are CMocka assertions. */
#ifndef MOONCAKE_TESTS_RESTORE_TEST_UTIL_H_
#define MOONCAKE_TESTS_RESTORE_TEST_UTIL_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/harness/cluster.h"

/* <dir>/snap/snapshots/<name>[/<file>] */
void snap_path(char *out, size_t n, mc_cluster *c, const char *name, const char *file);

/* Takes a snapshot (it must succeed) and returns the name <dir>/snap/latest gives it, with
 * its object count in *objects (may be NULL). */
void take_snapshot(mc_cluster *c, char *name, size_t n, int64_t *objects);

enum corruption { FLIP_BYTE, TRUNCATE_HALF, DELETE_MANIFEST };
/* Damages snapshot name: a byte of its metadata flipped, its metadata cut to half, or its
 * manifest deleted. */
void corrupt(mc_cluster *c, const char *name, enum corruption how);

/* The records of the newest file of <dir>/snap/oplog (the master must be down): its path,
 * and each frame's offset in the file and total length (head, payload and CRC), in order.
 * The zero tail of a preallocated file is not a record. Free with oplog_frames_free. */
typedef struct oplog_frames {
  char path[1024];
  int count;
  off_t *offset;
  uint32_t *length;
} oplog_frames;
oplog_frames oplog_frames_read(mc_cluster *c);
void oplog_frames_free(oplog_frames *f);

/* Where the newest log file's records end (its last non-zero byte + 1). */
off_t oplog_written_end(mc_cluster *c);

#endif /* MOONCAKE_TESTS_RESTORE_TEST_UTIL_H_ */
