/* Issue 11, finding 5: no stale reads across hosts. A real master and two real daemons A
 * and B (indices 0 and 1), a 10 s read lease. An application on B reads a key, which fills
 * B's read cache for 9 s (a local entry when the replica is on B, a remote one when it is
 * on A); an application on A then changes the key. Once A's call has returned, B must see
 * the change at once: the new value, or -704 and is_exist 0 -- never the old value, which
 * B's cache served for up to 9 s before the writer invalidated remote caches
 * (daemon/cluster/cache_invalidator.h). A holder that cannot answer (stopped) costs the writer a
 * wait no longer than its lease, and the answer is still right. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define POOL (16 * MiB)
#define LEASE_S 10.0
#define V1 4096
#define V2 6000 /* a new value has another size too, so get_size shows which one is seen */

enum { A = 0, B = 1 };

typedef struct fixture {
  mc_cluster *c;
  mooncake_store_t a, b;
  char *buf;
} fixture;

static int setup(void **state) {
  /* A long daemon TTL: the paused-holder test stops B for most of a lease. */
  static const char *const master_flags[] = {"--client_live_ttl_sec", "120", NULL};
  mc_cluster_options opts = {2, 64 * MiB, (int)(LEASE_S * 1000), master_flags, NULL};
  fixture *f = calloc(1, sizeof(*f));
  f->c = mc_cluster_start_with(&opts);
  if (f->c == NULL) {
    free(f);
    return -1;
  }
  f->a = connect_app(f->c, A, POOL);
  f->b = connect_app(f->c, B, POOL);
  f->buf = malloc(V2);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  if (f == NULL) return 0;
  mooncake_store_destroy(f->a);
  mooncake_store_destroy(f->b);
  mc_cluster_stop(f->c);
  free(f->buf);
  free(f);
  return 0;
}

/* From A, size bytes of fill_pattern(seed) under key with its replica on daemon owner;
 * upsert replaces. */
static void write_on(fixture *f, const char *key, size_t size, uint64_t seed, int owner,
                     int upsert) {
  placement p;
  steer(&p, f->c, &owner, 1, 1);
  char *v = malloc(size);
  fill_pattern(v, size, seed);
  int rc = upsert ? mooncake_store_upsert_from(f->a, key, v, size, &p.config)
                  : mooncake_store_put(f->a, key, v, size, &p.config);
  assert_int_equal(rc, 0);
  free(v);
  assert_int_equal(replica_daemon(f->c, key, 0), owner);
}

/* B reads key and finds size bytes of fill_pattern(seed): its cache now holds the key. */
static void read_on_b(fixture *f, const char *key, size_t size, uint64_t seed) {
  memset(f->buf, 0, V2);
  assert_int_equal(mooncake_store_get_into(f->b, key, f->buf, V2), (int64_t)size);
  assert_int_equal(check_pattern(f->buf, size, seed), -1);
}

/* B's read cache answers key without the master: the test below is not vacuous. */
static void assert_cached_on_b(fixture *f, const char *key, size_t size, uint64_t seed) {
  assert_int_equal(mc_cluster_pause_master(f->c), 0);
  double t0 = now_seconds();
  read_on_b(f, key, size, seed);
  assert_int_equal(mooncake_store_is_exist(f->b, key), 1);
  /* An RPC would have hung on the stopped master for the daemons' 10 s RPC timeout. */
  assert_true(now_seconds() - t0 < 5.0);
  mc_cluster_resume_master(f->c);
}

static void assert_gone_on_b(fixture *f, const char *key) {
  assert_int_equal(mooncake_store_get_into(f->b, key, f->buf, V2), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_is_exist(f->b, key), 0);
  assert_int_equal(mooncake_store_get_size(f->b, key), MOONCAKE_STORE_OBJECT_NOT_FOUND);
}

/* Nothing made A wait for a holder's lease: B acknowledged. */
static void assert_no_wait_logged(fixture *f) {
  assert_int_equal(count_log_lines(mc_cluster_log_at(f->c, A), "did not confirm", NULL), 0);
}

static void test_upsert_is_seen_on_the_other_host(void **state) {
  fixture *f = *state;
  static const char *const keys[] = {"up-on-b", "up-on-a"}; /* B's entry: local, remote */
  const int owners[] = {B, A};
  for (int k = 0; k < 2; ++k) {
    write_on(f, keys[k], V1, 10 + k, owners[k], 0);
    read_on_b(f, keys[k], V1, 10 + k);
    assert_cached_on_b(f, keys[k], V1, 10 + k);

    double t0 = now_seconds();
    write_on(f, keys[k], V2, 20 + k, owners[k], 1);
    assert_true(now_seconds() - t0 < LEASE_S / 3); /* told, not waited out */
    read_on_b(f, keys[k], V2, 20 + k);
    assert_int_equal(mooncake_store_is_exist(f->b, keys[k]), 1);
    assert_int_equal(mooncake_store_get_size(f->b, keys[k]), V2);
    /* The new value is cached in turn, and a second upsert is seen as well. */
    read_on_b(f, keys[k], V2, 20 + k);
    write_on(f, keys[k], V1, 30 + k, owners[k], 1);
    read_on_b(f, keys[k], V1, 30 + k);
  }
  assert_no_wait_logged(f);
}

static void test_forced_remove_is_seen_on_the_other_host(void **state) {
  fixture *f = *state;
  static const char *const keys[] = {"rm-on-b", "rm-on-a"};
  const int owners[] = {B, A};
  for (int k = 0; k < 2; ++k) {
    write_on(f, keys[k], V1, 40 + k, owners[k], 0);
    read_on_b(f, keys[k], V1, 40 + k);
    /* B holds a lease: a remove without force is refused, and B rightly still reads v1. */
    assert_int_equal(mooncake_store_remove(f->a, keys[k], 0), MOONCAKE_STORE_OBJECT_HAS_LEASE);
    read_on_b(f, keys[k], V1, 40 + k);
    double t0 = now_seconds();
    assert_int_equal(mooncake_store_remove(f->a, keys[k], 1), 0);
    assert_true(now_seconds() - t0 < LEASE_S / 3);
    assert_gone_on_b(f, keys[k]);
  }
  assert_no_wait_logged(f);
}

static void test_batch_remove_is_seen_on_the_other_host(void **state) {
  fixture *f = *state;
  enum { N = 6 };
  char names[N + 1][32];
  const char *keys[N + 1];
  for (int k = 0; k < N; ++k) {
    snprintf(names[k], sizeof(names[k]), "batch-%d", k);
    keys[k] = names[k];
    write_on(f, keys[k], V1, 50 + k, k % 2 == 0 ? B : A, 0);
    if (k < 4) read_on_b(f, keys[k], V1, 50 + k); /* B holds four of the six */
  }
  keys[N] = "batch-missing";
  int results[N + 1];
  double t0 = now_seconds();
  assert_int_equal(mooncake_store_batch_remove(f->a, keys, N + 1, 1, results), 0);
  assert_true(now_seconds() - t0 < LEASE_S / 3);
  for (int k = 0; k < N; ++k) assert_int_equal(results[k], 0);
  assert_int_equal(results[N], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  int present[N];
  assert_int_equal(mooncake_store_batch_is_exist(f->b, keys, N, present), 0);
  for (int k = 0; k < N; ++k) {
    assert_int_equal(present[k], 0);
    assert_gone_on_b(f, keys[k]);
  }
  assert_no_wait_logged(f);
}

static void test_remove_by_regex_is_seen_on_the_other_host(void **state) {
  fixture *f = *state;
  static const char *const doomed[] = {"rx-1", "rx-2", "rx-3"};
  for (int k = 0; k < 3; ++k) {
    write_on(f, doomed[k], V1, 60 + k, k % 2 == 0 ? B : A, 0);
    read_on_b(f, doomed[k], V1, 60 + k);
  }
  write_on(f, "kept-rx", V1, 69, B, 0);
  read_on_b(f, "kept-rx", V1, 69);
  double t0 = now_seconds();
  assert_int_equal(mooncake_store_remove_by_regex(f->a, "^rx-", 1), 3);
  assert_true(now_seconds() - t0 < LEASE_S / 3);
  for (int k = 0; k < 3; ++k) assert_gone_on_b(f, doomed[k]);
  read_on_b(f, "kept-rx", V1, 69); /* B forgot everything; what stays reads right */
  assert_int_equal(mooncake_store_remove(f->a, "kept-rx", 1), 0);
  assert_gone_on_b(f, "kept-rx");
  assert_no_wait_logged(f);
}

static void test_remove_all_is_seen_on_the_other_host(void **state) {
  fixture *f = *state;
  static const char *const keys[] = {"all-1", "all-2", "all-3", "all-4"};
  for (int k = 0; k < 4; ++k) {
    write_on(f, keys[k], V1, 70 + k, k % 2 == 0 ? B : A, 0);
    read_on_b(f, keys[k], V1, 70 + k);
  }
  double t0 = now_seconds();
  assert_true(mooncake_store_remove_all(f->a, 1) >= 4);
  assert_true(now_seconds() - t0 < LEASE_S / 3);
  for (int k = 0; k < 4; ++k) assert_gone_on_b(f, keys[k]);
  assert_no_wait_logged(f);
}

/* B stops right after reading: it can acknowledge nothing. A's upsert waits for B's lease
 * to end -- no longer -- and B, resumed, reads the new value. The last test: B's lease
 * wait is logged on A. */
static void test_stopped_holder_is_waited_out_within_its_lease(void **state) {
  fixture *f = *state;
  write_on(f, "paused", V1, 80, B, 0);
  double read_at = now_seconds();
  read_on_b(f, "paused", V1, 80);
  assert_int_equal(mc_cluster_pause_daemon_at(f->c, B), 0);
  placement p;
  const int owner = A;
  steer(&p, f->c, &owner, 1, 1);
  char *v = malloc(V2);
  fill_pattern(v, V2, 81);
  double t0 = now_seconds();
  assert_int_equal(mooncake_store_upsert_from(f->a, "paused", v, V2, &p.config), 0);
  double done = now_seconds();
  free(v);
  /* Bounded by B's lease (granted after read_at), with a loaded machine's margin; and it
   * did wait: B could not have confirmed. */
  assert_true(done - read_at < LEASE_S + 3.0);
  assert_true(done - t0 > 0.5 * LEASE_S - (t0 - read_at));
  assert_true(count_log_lines(mc_cluster_log_at(f->c, A), "did not confirm", NULL) >= 1);
  assert_int_equal(mc_cluster_resume_daemon_at(f->c, B), 0);
  read_on_b(f, "paused", V2, 81);
  assert_int_equal(mooncake_store_get_size(f->b, "paused"), V2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_upsert_is_seen_on_the_other_host),
      cmocka_unit_test(test_forced_remove_is_seen_on_the_other_host),
      cmocka_unit_test(test_batch_remove_is_seen_on_the_other_host),
      cmocka_unit_test(test_remove_by_regex_is_seen_on_the_other_host),
      cmocka_unit_test(test_remove_all_is_seen_on_the_other_host),
      cmocka_unit_test(test_stopped_holder_is_waited_out_within_its_lease),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
