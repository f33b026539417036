/* The master never stalls on a regex, and never mistakes its own stall, or a daemon's
 * short pause, for deaths (issue 11, findings 1 and 2). Real processes on 127.0.0.1: a
 * master and two daemons A and B (indices 0 and 1) whose silence is noticed after 3 s,
 * applications through the C ABI.
 *  - removal by backtracking patterns (which made std::regex run for ever under a shard
 *    lock) while other requests must be answered within 100 ms;
 *  - the master stopped (SIGSTOP) for 15 s: nobody is declared silent, nothing is lost;
 *  - daemon B stopped for 15 s: its objects fail cleanly meanwhile, and are all back,
 *    byte for byte, once it has re-attached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define SIZE MANY_SIZE /* put_many's values */
#define PAUSE_S 15

enum { A = 0, B = 1 };

/* Silence is noticed after 3 s (a 15 s pause is five times that); daemons heartbeat twice
 * a second so that a loaded machine delaying one does not detach a live daemon. */
static const char *const k_master_flags[] = {"--client_live_ttl_sec", "3", NULL};
static const char *const k_daemon_flags[] = {"--heartbeat_interval", "500ms", NULL};

static mc_cluster *start(void) {
  mc_cluster_options o = {2, 256 * MiB, 0, k_master_flags, k_daemon_flags};
  mc_cluster *c = mc_cluster_start_with(&o);
  assert_non_null(c);
  return c;
}

static void put_small(mooncake_store_t s, const char *key) {
  static const char value[64] = "trap";
  assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), NULL), 0);
}

/* ---- finding 1: a regex ------------------------------------------------------------ */

typedef struct remover {
  mooncake_store_t store;
  int64_t first[2];    /* what the first call of each pattern removed */
  int64_t again_bad;   /* a later call that did not answer 0 */
  int rounds;
  double slowest;      /* seconds */
  int done;
} remover;

static const char *const k_patterns[2] = {"(?:a|a)*c", "(a+)+$"};

/* Both patterns once (they remove their keys), then again and again for 2 s (each must
 * find nothing), so that the other thread's requests overlap many removals. */
static void *run_remover(void *arg) {
  remover *r = arg;
  double until = now_seconds() + 2.0;
  for (int round = 0; round == 0 || now_seconds() < until; ++round) {
    for (int p = 0; p < 2; ++p) {
      double t0 = now_seconds();
      int64_t n = mooncake_store_remove_by_regex(r->store, k_patterns[p], 1);
      double took = now_seconds() - t0;
      if (took > r->slowest) r->slowest = took;
      if (round == 0) {
        r->first[p] = n;
      } else if (n != 0) {
        r->again_bad = n;
      }
    }
    r->rounds = round + 1;
  }
  __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void test_regex_never_stalls_the_master(void **state) {
  (void)state;
  mc_cluster *c = start();
  mooncake_store_t a = connect_app(c, A, 16 * MiB), b = connect_app(c, B, 16 * MiB);
  mooncake_store_t removing = connect_app(c, A, MiB);
  put_many(a, "keep", 500, NULL); /* spread over both daemons; no 'c', no final 'a' */
  /* The traps: a 4 KiB key of 'a's, which (?:a|a)*c backtracks over for ever and (a+)+$
   * matches; 200 short keys of 'a's then 'b', which (a+)+$ backtracks over for ever. */
  char *longest = malloc(MOONCAKE_STORE_MAX_KEY_LEN + 1);
  memset(longest, 'a', MOONCAKE_STORE_MAX_KEY_LEN);
  longest[MOONCAKE_STORE_MAX_KEY_LEN] = '\0';
  put_small(a, longest);
  char key[64];
  for (int i = 0; i < 200; ++i) {
    snprintf(key, sizeof(key), "t%03d-aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", i);
    put_small(a, key);
  }
  for (int i = 0; i < 5; ++i) { /* what (?:a|a)*c removes */
    snprintf(key, sizeof(key), "with-c-%d", i);
    put_small(b, key);
  }
  for (int i = 0; i < 7; ++i) { /* what (a+)+$ removes, with the 4 KiB key */
    snprintf(key, sizeof(key), "m%d-aaaa", i);
    put_small(b, key);
  }
  assert_int_equal(mooncake_store_is_exist(a, longest), 1);

  remover r;
  memset(&r, 0, sizeof(r));
  r.store = removing;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, run_remover, &r), 0);
  /* Meanwhile: a read of a value (from the other daemon, half of them remote), a put, an
   * existence check the master must answer (the key was never read here). */
  char *out = mooncake_store_alloc(b, SIZE);
  char *value = mooncake_store_alloc(b, SIZE);
  double slowest = 0;
  int ops = 0, over_bar = 0; /* requests answered in more than 100 ms */
  /* Bounded: a remover that never ends (std::regex did not) fails the test below. */
  double give_up = now_seconds() + 30;
  for (int i = 0; !__atomic_load_n(&r.done, __ATOMIC_ACQUIRE) && now_seconds() < give_up; ++i) {
    double t0 = now_seconds();
    key_of(key, sizeof(key), "keep", i % 500);
    assert_int_equal(mooncake_store_get_into(b, key, out, SIZE), (int64_t)SIZE);
    assert_int_equal(check_pattern(out, SIZE, seed_of("keep", i % 500)), -1);
    double t1 = now_seconds();
    key_of(key, sizeof(key), "probe", i);
    fill_pattern(value, SIZE, (uint64_t)i);
    assert_int_equal(mooncake_store_put_from(b, key, value, SIZE, NULL), 0);
    double t2 = now_seconds();
    key_of(key, sizeof(key), "absent", i);
    assert_int_equal(mooncake_store_is_exist(b, key), 0);
    double t3 = now_seconds();
    double took[3] = {t1 - t0, t2 - t1, t3 - t2};
    for (int k = 0; k < 3; ++k) {
      over_bar += took[k] > 0.100;
      if (took[k] > slowest) slowest = took[k];
    }
    ops += 3;
  }
  assert_int_equal(__atomic_load_n(&r.done, __ATOMIC_ACQUIRE), 1);
  pthread_join(thread, NULL);
  print_message("%d removal rounds (slowest call %.1f ms); %d other requests meanwhile, %d "
                "of them over 100 ms, the slowest answered in %.1f ms\n",
                r.rounds, r.slowest * 1000, ops, over_bar, slowest * 1000);
  assert_int_equal(r.first[0], 5);
  assert_int_equal(r.first[1], 7 + 1);
  assert_int_equal(r.again_bad, 0);
  assert_true(r.rounds > 10);
  assert_true(ops > 30);
  /* The bar is 100 ms for each. On this shared 2-core machine under a parallel ctest a
   * request is now and then descheduled for about that long whatever the master does
   * (the removals themselves then take as long), so the test holds 99% of them to it, and
   * every one to a second: a pattern run under a shard lock (std::regex) stalled them for
   * good. */
  assert_true(over_bar * 100 <= ops);
  assert_true(slowest < 1.0);

  /* Refused cleanly: too long (by the daemon), too large once compiled and malformed (by
   * the master). */
  char *pattern = malloc(MOONCAKE_STORE_MAX_PATTERN_LEN + 2);
  memset(pattern, 'a', MOONCAKE_STORE_MAX_PATTERN_LEN + 1);
  pattern[MOONCAKE_STORE_MAX_PATTERN_LEN + 1] = '\0';
  assert_int_equal(mooncake_store_remove_by_regex(a, pattern, 1), MOONCAKE_STORE_INVALID_PARAMS);
  pattern[0] = '\0';
  while (strlen(pattern) + 11 <= MOONCAKE_STORE_MAX_PATTERN_LEN) strcat(pattern, "[a-z]{1000}");
  assert_int_equal(mooncake_store_remove_by_regex(a, pattern, 1), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_remove_by_regex(a, "(unclosed", 1),
                   MOONCAKE_STORE_INVALID_PARAMS);
  free(pattern);

  /* Nothing unrelated lost; nobody was ever thought silent. */
  assert_all_read(a, "keep", 500);
  assert_int_equal(mooncake_store_is_exist(a, longest), 0);
  assert_int_equal(mooncake_store_is_exist(a, "t000-aaaaaaaaaaaaaaaaaaaaaaaaaaaaab"), 1);
  mc_cluster_master_stats st = master_stats(c);
  assert_int_equal(st.daemons, 2);
  assert_int_equal(st.pending_segments, 0);
  assert_int_equal(count_log_lines(mc_cluster_master_log(c), "silent for", NULL), 0);
  free(longest);
  mooncake_store_free(b, out);
  mooncake_store_free(b, value);
  mooncake_store_destroy(removing);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mc_cluster_stop(c);
}

/* ---- finding 2: the master stopped ------------------------------------------------- */

static void test_master_stopped_loses_nothing(void **state) {
  (void)state;
  mc_cluster *c = start();
  mooncake_store_t a = connect_app(c, A, 16 * MiB), b = connect_app(c, B, 16 * MiB);
  put_many(a, "from-a", 2000, NULL);
  put_many(b, "from-b", 2000, NULL);
  mc_cluster_segment seg;
  for (int i = 0; i < 2; ++i) { /* spread over both daemons */
    assert_int_equal(mc_cluster_segment_at(c, i, &seg), 0);
    assert_true(seg.used > 0);
  }

  assert_int_equal(mc_cluster_pause_master(c), 0);
  sleep(PAUSE_S);
  mc_cluster_resume_master(c);

  /* The daemons are never detached: not at the resume, nor while their heartbeats come
   * back after it. */
  for (double until = now_seconds() + 3.0; now_seconds() < until;) {
    mc_cluster_master_stats st = master_stats(c);
    assert_int_equal(st.daemons, 2);
    assert_int_equal(st.pending_segments, 0);
    assert_int_equal(st.objects, 4000);
    usleep(100 * 1000);
  }
  assert_all_read(a, "from-a", 2000);
  assert_all_read(a, "from-b", 2000);
  assert_all_read(b, "from-a", 2000);
  assert_all_read(b, "from-b", 2000);
  assert_true(count_log_lines(mc_cluster_master_log(c), "upkeep stalled", NULL) >= 1);
  assert_int_equal(count_log_lines(mc_cluster_master_log(c), "silent for", NULL), 0);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mc_cluster_stop(c);
}

/* ---- finding 2: a daemon stopped --------------------------------------------------- */

static void test_daemon_stopped_keeps_its_objects(void **state) {
  (void)state;
  mc_cluster *c = start();
  mooncake_store_t a = connect_app(c, A, 16 * MiB), b = connect_app(c, B, 16 * MiB);
  placement on_a, on_b;
  const int ia = A, ib = B;
  steer(&on_a, c, &ia, 1, 1);
  steer(&on_b, c, &ib, 1, 1);
  put_many(a, "on-a", 2000, &on_a.config);
  put_many(a, "on-b", 2000, &on_b.config);
  char key[64];
  for (int i = 0; i < 2000; i += 250) {
    key_of(key, sizeof(key), "on-b", i);
    assert_int_equal(replica_daemon(c, key, 0), B);
  }
  assert_all_read(a, "on-b", 2000); /* A's read cache now remembers where they are */

  assert_int_equal(mc_cluster_pause_daemon_at(c, B), 0);
  double paused_at = now_seconds();
  /* While B is stopped: its objects fail with a code, within the RPC timeout (10 s),
   * never with bytes; A's are untouched. A read that still finds B in A's read cache waits
   * for --transfer_timeout (5 s) on B; once the master has detached B it answers -703 at
   * once. */
  char *out = mooncake_store_alloc(a, SIZE);
  int reads = 0, not_ready = 0;
  double slowest = 0;
  while (now_seconds() - paused_at < PAUSE_S - 1) {
    key_of(key, sizeof(key), "on-b", reads % 2000);
    double t0 = now_seconds();
    int64_t rc = mooncake_store_get_into(a, key, out, SIZE);
    double took = now_seconds() - t0;
    if (rc >= 0) fail_msg("get %s from a stopped daemon answered %lld", key, (long long)rc);
    not_ready += rc == MOONCAKE_STORE_REPLICA_IS_NOT_READY;
    if (took > slowest) slowest = took;
    ++reads;
    usleep(50 * 1000);
  }
  mooncake_store_free(a, out);
  mc_cluster_master_stats st = master_stats(c);
  print_message("%d reads of the stopped daemon's objects: %d answered -703, the slowest in "
                "%.2f s\n", reads, not_ready, slowest);
  assert_int_equal(st.pending_segments, 1); /* detached, not dropped */
  assert_int_equal(st.daemons, 1);
  assert_int_equal(st.objects, 4000);
  assert_true(not_ready > reads / 2);
  assert_true(slowest < 10.0);
  assert_all_read(a, "on-a", 2000);
  while (now_seconds() - paused_at < PAUSE_S) usleep(50 * 1000);
  assert_int_equal(mc_cluster_resume_daemon_at(c, B), 0);

  await_pending(c, 0, 15);
  st = master_stats(c);
  assert_int_equal(st.pending_segments, 0);
  assert_int_equal(st.daemons, 2);
  assert_int_equal(st.objects, 4000);
  assert_all_read(a, "on-b", 2000);
  assert_all_read(b, "on-b", 2000);
  assert_all_read(b, "on-a", 2000);
  assert_true(count_log_lines(mc_cluster_master_log(c), "re-attached", NULL) >= 1);
  assert_int_equal(count_log_lines(mc_cluster_master_log(c), "is dead", NULL), 0);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mc_cluster_stop(c);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_regex_never_stalls_the_master),
      cmocka_unit_test(test_master_stopped_loses_nothing),
      cmocka_unit_test(test_daemon_stopped_keeps_its_objects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
