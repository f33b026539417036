/* Helpers of tests/cluster/cluster_ha_test.c: a bounded put/get load on client threads, each
 * through its own daemon, that records which puts were acknowledged, and the check that
 * every acknowledged object reads back with its own bytes after a failover. The load
 * threads never assert (CMocka's assertions belong to the test's thread): they count, and
 * the test asserts on the counts. */
#ifndef MOONCAKE_TESTS_CLUSTER_HA_UTIL_H_
#define MOONCAKE_TESTS_CLUSTER_HA_UTIL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"

#define HA_LOAD_MAX_PUTS 4096
#define HA_VALUE_SIZE ((size_t)16 * 1024)

/* One client thread: puts <prefix>-<id>-<k> (HA_VALUE_SIZE bytes of
 * fill_pattern(ha_seed(id, k))) for k = 0, 1, ... and, after each, reads an earlier
 * acknowledged one back, pausing pause_ms between the two. */
typedef struct ha_load {
  mooncake_store_t store; /* its own handle, on daemon `daemon` */
  int daemon;
  int id;
  int pause_ms;
  const char *prefix;
  volatile int stop;
  volatile int done;
  pthread_t thread;
  /* Written by the thread; read by the test once done (or racily, as progress). */
  volatile int puts;        /* started */
  volatile int acked;       /* returned 0 */
  int failed;               /* returned an error */
  int last_error;
  int reads_ok, reads_wrong, reads_failed; /* reads_wrong: the size, wrong bytes */
  double max_put_s;                        /* the longest put, whatever it returned */
  volatile double mark;                    /* set by the test: a monotonic time, 0 none */
  int acked_after_mark;                    /* acknowledged puts started after mark */
  unsigned char ack[HA_LOAD_MAX_PUTS];     /* 1: put k returned 0 */
  double started[HA_LOAD_MAX_PUTS], ended[HA_LOAD_MAX_PUTS];
} ha_load;

uint64_t ha_seed(int id, int k);
void ha_key(char *out, size_t n, const char *prefix, int id, int k);

/* Connects a handle on daemon and starts the thread. */
void ha_load_start(ha_load *l, const mc_cluster *c, int daemon, int id, const char *prefix,
                   int pause_ms);
/* Sets every load's mark to now (e.g. the moment the leader is killed). */
void ha_load_mark(ha_load *loads, int n, double when);
/* Waits until every load has at least acks acknowledged puts started after its mark (or
 * in all, without a mark), timeout_s at most; fails the test when they do not. */
void ha_load_await_acks(ha_load *loads, int n, int acks, double timeout_s);
/* Stops the loads and waits for them: fails the test when one has not ended within
 * timeout_s (a put or get that hung). Closes their handles. */
void ha_load_stop(ha_load *loads, int n, double timeout_s);

typedef struct ha_verdict {
  int acked;   /* acknowledged puts checked */
  int lost;    /* of which never read back within the deadline (its last code in last_code) */
  int wrong;   /* of which read back with other bytes */
  int last_code;
} ha_verdict;
/* Reads every acknowledged object of the loads back through daemon `daemon`, each retried
 * until timeout_s has passed since the call (a daemon may still be re-mounting), every
 * byte checked. */
ha_verdict ha_verify(const mc_cluster *c, int daemon, const ha_load *loads, int n,
                     double timeout_s);

/* Puts fresh keys <prefix>-<k> through s until one returns 0, for timeout_s at most: the
 * seconds from `since` (a monotonic time) until it did, or -1. */
double ha_first_put(mooncake_store_t s, const char *prefix, double since, double timeout_s);

#endif /* MOONCAKE_TESTS_CLUSTER_HA_UTIL_H_ */
