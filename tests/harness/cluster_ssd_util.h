/* Helpers of the SSD tier's cluster suites (tests/cluster/cluster_ssd_test.c,
 * tests/cluster/cluster_ssd_restart_test.c): objects named prefix/i holding size bytes of
 * fill_pattern(seed_of(prefix, i)) (every key its own bytes, so another object's bytes or
 * a stale copy fail the check), put one by one or in series, read back checked, and the
 * master's DiskStats waited on. Failures are CMocka assertions. */
#ifndef MOONCAKE_TESTS_CLUSTER_SSD_UTIL_H_
#define MOONCAKE_TESTS_CLUSTER_SSD_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define SSD_KEY_LEN 64

/* The master's DiskStats (asserted to be fetched). */
mc_cluster_disk_stats disk_stats(const mc_cluster *c);

/* Waits until the master counts at least n offloads done; fails after timeout_s, printing
 * the figures. */
void await_offloads_done(const mc_cluster *c, int64_t n, double timeout_s);

/* Puts prefix/first .. prefix/first+count-1 (size bytes each) from s, one at a time
 * (config may be NULL); every put must answer 0. */
void put_series(mooncake_store_t s, const char *prefix, int first, int count, size_t size,
                const mooncake_replicate_config_t *config);

/* Reads prefix/i (size bytes) through s: size when every byte is right, or the negative
 * code the get answered. A wrong byte, or any other length, fails the test: the SSD tier
 * must never serve wrong bytes. */
int64_t read_checked(mooncake_store_t s, const char *prefix, int i, size_t size);

/* read_checked until it answers size, for timeout_s at most (a daemon that just came back
 * may still be mounting); returns the last answer. */
int64_t read_checked_within(mooncake_store_t s, const char *prefix, int i, size_t size,
                            double timeout_s);

/* The reconciliations daemon i's log says were complete ("reconciliation complete": after
 * each, the master lists no disk replica of its SSD that the SSD does not hold). */
int reconciliations(const mc_cluster *c, int i);

/* Waits until daemon i has completed more than before reconciliations; fails after
 * timeout_s. */
void await_reconciliation(const mc_cluster *c, int i, int before, double timeout_s);

/* The replicas of prefix/i as the master lists them (mc_cluster_replica_kinds): 0 with the
 * counts, -1 when the object is gone. */
int kinds_of(const mc_cluster *c, const char *prefix, int i, int *memory, int *disk);

#endif /* MOONCAKE_TESTS_CLUSTER_SSD_UTIL_H_ */
