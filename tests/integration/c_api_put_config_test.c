/* The sized put config of ABI 4 (issue 17, part put-config) against a real master and
 * three daemons: mooncake_put_config_t's struct_size rules (the V1 size works, a larger
 * zero-padded one works, a smaller one and an absurd one are -600, set bytes past the known
 * fields are -1012), each field's effect (replicas, the soft pin's fixed deadline as the
 * master's /query_key shows it, Mooncake's TTL rules, hard pin, preferred segment(s),
 * prefer_alloc_in_same_node, the refused NoF/DFS/host fields, the group ids' count), the
 * _ex calls and
 * mooncake_store_batch_upsert_from, and that the older config still works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (16u << 20)
#define VALUE_SIZE 4096
#define MAX_TTL_MS 600000

static mc_cluster *g_cluster;

/* Each test's handle is on daemon 0. */
static int setup_store(void **state) {
  return store_fixture_setup(state, g_cluster, 0, POOL_SIZE);
}

static int put(mooncake_store_t s, const char *key, uint64_t seed,
               const mooncake_put_config_t *c) {
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), seed);
  return mooncake_store_put_ex(s, key, value, sizeof(value), c);
}

static void assert_value(mooncake_store_t s, const char *key, uint64_t seed) {
  char got[VALUE_SIZE];
  assert_int_equal(mooncake_store_get_into(s, key, got, sizeof(got)), VALUE_SIZE);
  assert_int_equal(check_pattern(got, sizeof(got), seed), -1);
}

static int64_t soft_pin_left(const char *key) {
  int64_t left = -1;
  assert_int_equal(mc_cluster_soft_pin_remaining_ms(g_cluster, key, &left), 0);
  return left;
}

static void test_init_and_defaults(void **state) {
  store_fixture *f = *state;
  assert_int_equal(mooncake_store_put_config_init(NULL), -1);
  mooncake_put_config_t c = default_put_config();
  assert_int_equal(c.struct_size, sizeof(c));
  assert_int_equal(c.replica_num, 1);
  assert_int_equal(c.soft_pin_action, MOONCAKE_SOFT_PIN_PRESERVE);
  assert_true(MOONCAKE_PUT_CONFIG_SIZE_V1 <= sizeof(c));
  /* NULL is the defaults; a new object with PRESERVE has no pin. */
  assert_int_equal(put(f->store, "null-config", 1, NULL), 0);
  assert_int_equal(put(f->store, "default-config", 2, &c), 0);
  assert_value(f->store, "null-config", 1);
  assert_value(f->store, "default-config", 2);
  assert_int_equal(soft_pin_left("default-config"), 0);
}

/* A buffer holding a config of struct_size bytes (zero past the struct). */
typedef struct {
  mooncake_put_config_t c;
  unsigned char tail[64];
} padded;

static void test_struct_size(void **state) {
  store_fixture *f = *state;
  padded p;
  memset(&p, 0, sizeof(p));
  mooncake_store_put_config_init(&p.c);
  p.c.replica_num = 2;
  /* The first version's size: read whole. */
  p.c.struct_size = MOONCAKE_PUT_CONFIG_SIZE_V1;
  assert_int_equal(put(f->store, "v1-size", 3, &p.c), 0);
  assert_int_equal(replica_daemon(g_cluster, "v1-size", 1) >= 0, 1); /* replica_num read */
  /* A later version's caller, its extra fields zero: accepted. */
  p.c.struct_size = sizeof(p);
  assert_int_equal(put(f->store, "newer-zero", 4, &p.c), 0);
  /* ... with a field this library does not know set: refused, nothing stored. */
  p.tail[10] = 1;
  assert_int_equal(put(f->store, "newer-set", 5, &p.c), MOONCAKE_STORE_NOT_SUPPORTED);
  assert_int_equal(mooncake_store_is_exist(f->store, "newer-set"), 0);
  p.tail[10] = 0;
  /* Too small, zero, absurdly large: -600. */
  p.c.struct_size = MOONCAKE_PUT_CONFIG_SIZE_V1 - 1;
  assert_int_equal(put(f->store, "small", 6, &p.c), MOONCAKE_STORE_INVALID_PARAMS);
  p.c.struct_size = 0;
  assert_int_equal(put(f->store, "small", 6, &p.c), MOONCAKE_STORE_INVALID_PARAMS);
  p.c.struct_size = MOONCAKE_PUT_CONFIG_MAX_SIZE + 1;
  assert_int_equal(put(f->store, "small", 6, &p.c), MOONCAKE_STORE_INVALID_PARAMS);
  p.c.struct_size = (size_t)-1;
  assert_int_equal(put(f->store, "small", 6, &p.c), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_is_exist(f->store, "small"), 0);
}

static void test_replica_num(void **state) {
  store_fixture *f = *state;
  mooncake_put_config_t c = default_put_config();
  c.replica_num = 3;
  assert_int_equal(put(f->store, "three", 7, &c), 0);
  int a = replica_daemon(g_cluster, "three", 0), b = replica_daemon(g_cluster, "three", 1),
      d = replica_daemon(g_cluster, "three", 2);
  assert_true(a >= 0 && b >= 0 && d >= 0 && a != b && b != d && a != d);
  c.replica_num = 0;
  assert_int_equal(put(f->store, "zero", 7, &c), MOONCAKE_STORE_INVALID_PARAMS);
  c.replica_num = 65;
  assert_int_equal(put(f->store, "zero", 7, &c), MOONCAKE_STORE_INVALID_PARAMS);
}

/* The deadline is fixed at publication: a read does not move it (Mooncake's semantics). */
static void test_soft_pin_ttl_is_a_fixed_deadline(void **state) {
  store_fixture *f = *state;
  mooncake_put_config_t c = default_put_config();
  c.soft_pin_action = MOONCAKE_SOFT_PIN_ENABLE;
  c.has_soft_pin_ttl = 1;
  c.soft_pin_ttl_ms = 300000;
  double start = now_seconds();
  assert_int_equal(put(f->store, "pinned", 8, &c), 0);
  int64_t first = soft_pin_left("pinned");
  assert_true(first > 0 && first <= 300000);
  /* Reads, then the remaining time has only gone down, by about the time that passed. */
  for (int i = 0; i < 5; ++i) assert_value(f->store, "pinned", 8);
  int64_t later = soft_pin_left("pinned");
  double passed_ms = (now_seconds() - start) * 1000;
  assert_true(later <= first);
  assert_true(later >= 300000 - (int64_t)passed_ms - 50);
  /* Without a TTL: the master's default (--default_kv_soft_pin_ttl 200000 here). */
  c.has_soft_pin_ttl = 0;
  assert_int_equal(put(f->store, "default-ttl", 9, &c), 0);
  int64_t def = soft_pin_left("default-ttl");
  assert_true(def > 100000 && def <= 200000);
  /* A short TTL runs out: polled with a deadline. */
  c.has_soft_pin_ttl = 1;
  c.soft_pin_ttl_ms = 300;
  assert_int_equal(put(f->store, "short", 10, &c), 0);
  double until = now_seconds() + 20;
  while (soft_pin_left("short") != 0 && now_seconds() < until) {
    assert_value(f->store, "short", 10); /* reads do not keep it pinned */
  }
  assert_int_equal(soft_pin_left("short"), 0);
  /* TTL 0 with ENABLE: no pin. */
  c.soft_pin_ttl_ms = 0;
  assert_int_equal(put(f->store, "zero-ttl", 11, &c), 0);
  assert_int_equal(soft_pin_left("zero-ttl"), 0);
}

static void test_soft_pin_rules(void **state) {
  store_fixture *f = *state;
  mooncake_put_config_t c = default_put_config();
  c.has_soft_pin_ttl = 1;
  c.soft_pin_ttl_ms = 1000;
  c.soft_pin_action = MOONCAKE_SOFT_PIN_PRESERVE; /* a TTL only with ENABLE */
  assert_int_equal(put(f->store, "bad", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  c.soft_pin_action = MOONCAKE_SOFT_PIN_DISABLE;
  assert_int_equal(put(f->store, "bad", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  c.soft_pin_action = 3;
  c.has_soft_pin_ttl = 0;
  assert_int_equal(put(f->store, "bad", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  c.soft_pin_action = MOONCAKE_SOFT_PIN_ENABLE; /* above the master's maximum */
  c.has_soft_pin_ttl = 1;
  c.soft_pin_ttl_ms = MAX_TTL_MS + 1;
  assert_int_equal(put(f->store, "bad", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  c.soft_pin_ttl_ms = UINT64_MAX;
  assert_int_equal(put(f->store, "bad", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_is_exist(f->store, "bad"), 0);
}

/* Upserts: PRESERVE keeps the deadline, ENABLE sets a new one, DISABLE drops it. */
static void test_upsert_soft_pin_actions(void **state) {
  store_fixture *f = *state;
  char value[VALUE_SIZE];
  mooncake_put_config_t c = default_put_config();
  c.soft_pin_action = MOONCAKE_SOFT_PIN_ENABLE;
  c.has_soft_pin_ttl = 1;
  c.soft_pin_ttl_ms = 500000;
  fill_pattern(value, sizeof(value), 20);
  assert_int_equal(mooncake_store_upsert_from_ex(f->store, "u", value, sizeof(value), &c), 0);
  int64_t before = soft_pin_left("u");
  assert_true(before > 400000);
  mooncake_put_config_t keep = default_put_config();
  fill_pattern(value, sizeof(value), 21);
  assert_int_equal(mooncake_store_upsert_from_ex(f->store, "u", value, sizeof(value), &keep), 0);
  assert_value(f->store, "u", 21);
  int64_t kept = soft_pin_left("u");
  assert_true(kept > 400000 && kept <= before);
  c.soft_pin_ttl_ms = 100000;
  assert_int_equal(mooncake_store_upsert_from_ex(f->store, "u", value, sizeof(value), &c), 0);
  int64_t renewed = soft_pin_left("u");
  assert_true(renewed > 50000 && renewed <= 100000);
  mooncake_put_config_t off = default_put_config();
  off.soft_pin_action = MOONCAKE_SOFT_PIN_DISABLE;
  assert_int_equal(mooncake_store_upsert_from_ex(f->store, "u", value, sizeof(value), &off), 0);
  assert_int_equal(soft_pin_left("u"), 0);
}

static void test_hard_pin(void **state) {
  store_fixture *f = *state;
  mooncake_put_config_t c = default_put_config();
  c.with_hard_pin = 1;
  assert_int_equal(put(f->store, "hard", 30, &c), 0);
  assert_int_equal(mooncake_store_remove(f->store, "hard", 0), /* kept: hard-pinned */
                   MOONCAKE_STORE_UNAVAILABLE_IN_CURRENT_STATUS);
  assert_int_equal(mooncake_store_is_exist(f->store, "hard"), 1);
  assert_int_equal(mooncake_store_remove(f->store, "hard", 1), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "hard"), 0);
}

static void test_preferred_segments(void **state) {
  store_fixture *f = *state;
  mooncake_put_config_t c = default_put_config();
  const char *two[] = {mc_cluster_name_at(g_cluster, 2)};
  c.preferred_segments = two;
  c.preferred_segments_count = 1;
  assert_int_equal(put(f->store, "on-2", 40, &c), 0);
  assert_int_equal(replica_daemon(g_cluster, "on-2", 0), 2);
  /* The deprecated single name, used when the list is empty. */
  mooncake_put_config_t one = default_put_config();
  one.preferred_segment = mc_cluster_name_at(g_cluster, 1);
  assert_int_equal(put(f->store, "on-1", 41, &one), 0);
  assert_int_equal(replica_daemon(g_cluster, "on-1", 0), 1);
  /* The list wins over it. */
  c.preferred_segment = mc_cluster_name_at(g_cluster, 1);
  assert_int_equal(put(f->store, "list-wins", 42, &c), 0);
  assert_int_equal(replica_daemon(g_cluster, "list-wins", 0), 2);
  c.preferred_segments = NULL;
  assert_int_equal(put(f->store, "null-list", 42, &c), -1);
}

/* prefer_alloc_in_same_node: always the caller's daemon (1, here), whatever random says. */
static void test_prefer_alloc_in_same_node(void **state) {
  (void)state;
  mooncake_store_t s = connect_app(g_cluster, 1, POOL_SIZE);
  mooncake_put_config_t c = default_put_config();
  c.prefer_alloc_in_same_node = 1;
  char key[32];
  for (int i = 0; i < 12; ++i) {
    snprintf(key, sizeof(key), "local-%d", i);
    assert_int_equal(put(s, key, 50 + i, &c), 0);
    assert_int_equal(replica_daemon(g_cluster, key, 0), 1);
  }
  /* Two replicas: the first local, the other elsewhere. */
  c.replica_num = 2;
  assert_int_equal(put(s, "local-two", 70, &c), 0);
  assert_int_equal(replica_daemon(g_cluster, "local-two", 0), 1);
  assert_int_not_equal(replica_daemon(g_cluster, "local-two", 1), 1);
  /* Without it, random placement leaves the caller's daemon at least once in 24 puts
   * (seeded: the same placements every run, not a 3^-24 chance of failing). */
  mooncake_put_config_t plain = default_put_config();
  int elsewhere = 0;
  for (int i = 0; i < 24; ++i) {
    snprintf(key, sizeof(key), "random-%d", i);
    assert_int_equal(put(s, key, 80 + i, &plain), 0);
    elsewhere += replica_daemon(g_cluster, key, 0) != 1;
  }
  assert_true(elsewhere > 0);
  mooncake_store_destroy(s);
}

/* Fields of features this store lacks: refused with -1012, nothing stored. Group ids name
 * one group per key (tests/integration/c_api_sessions_test.c has what groups do). */
static void test_unsupported_fields(void **state) {
  store_fixture *f = *state;
  const char *nof[] = {"nof-0"};
  const char *groups_empty[] = {""};
  const char *groups_set[] = {"g1", "g2"};
  mooncake_put_config_t c = default_put_config();
  c.nof_replica_num = 1;
  assert_int_equal(put(f->store, "x", 1, &c), MOONCAKE_STORE_NOT_SUPPORTED);
  c = default_put_config();
  c.dfs_replica_num = 1;
  assert_int_equal(put(f->store, "x", 1, &c), MOONCAKE_STORE_NOT_SUPPORTED);
  c = default_put_config();
  c.preferred_nof_segments = nof;
  c.preferred_nof_segments_count = 1;
  assert_int_equal(put(f->store, "x", 1, &c), MOONCAKE_STORE_NOT_SUPPORTED);
  c = default_put_config();
  c.host_id = "node-7";
  assert_int_equal(put(f->store, "x", 1, &c), MOONCAKE_STORE_NOT_SUPPORTED);
  c = default_put_config();
  c.group_ids = groups_set;
  c.group_ids_count = 2; /* two for one key */
  assert_int_equal(put(f->store, "x", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  c.group_ids = NULL;
  c.group_ids_count = 1;
  assert_int_equal(put(f->store, "x", 1, &c), -1);
  c = default_put_config();
  c.data_type = 10;
  assert_int_equal(put(f->store, "x", 1, &c), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_is_exist(f->store, "x"), 0);
  /* Accepted: empty group ids (ungrouped), an empty host id, a known data type. */
  c = default_put_config();
  c.group_ids = groups_empty;
  c.group_ids_count = 1;
  c.host_id = "";
  c.data_type = 1; /* KVCACHE */
  assert_int_equal(put(f->store, "accepted", 2, &c), 0);
  assert_value(f->store, "accepted", 2);
}

static void test_ex_calls_and_batches(void **state) {
  store_fixture *f = *state;
  mooncake_put_config_t c = default_put_config();
  c.replica_num = 2;
  char *pool = mooncake_store_alloc(f->store, 4 * VALUE_SIZE);
  assert_non_null(pool);
  const char *keys[4] = {"b0", "b1", "b2", "b0"};
  void *buffers[4];
  size_t sizes[4];
  int results[4];
  for (int i = 0; i < 4; ++i) {
    buffers[i] = pool + i * VALUE_SIZE;
    sizes[i] = VALUE_SIZE;
    fill_pattern(buffers[i], VALUE_SIZE, 100 + i);
  }
  assert_int_equal(mooncake_store_put_from_ex(f->store, "pf", buffers[0], VALUE_SIZE, &c), 0);
  assert_value(f->store, "pf", 100);
  assert_int_equal(mooncake_store_batch_put_from_ex(f->store, keys, buffers, sizes, 3, &c,
                                                    results), 0);
  for (int i = 0; i < 3; ++i) assert_int_equal(results[i], 0);
  assert_int_equal(replica_daemon(g_cluster, "b1", 1) >= 0, 1);
  /* batch_upsert_from: replaces; the key named twice ends with its last value. */
  for (int i = 0; i < 4; ++i) fill_pattern(buffers[i], VALUE_SIZE, 200 + i);
  assert_int_equal(mooncake_store_batch_upsert_from(f->store, keys, buffers, sizes, 4, &c,
                                                    results), 0);
  for (int i = 0; i < 4; ++i) assert_int_equal(results[i], 0);
  assert_value(f->store, "b0", 203);
  assert_value(f->store, "b1", 201);
  assert_value(f->store, "b2", 202);
  /* A bad entry has its own code; a bad config gives every entry its code. */
  const char *bad_keys[2] = {"b1", ""};
  assert_int_equal(mooncake_store_batch_upsert_from(f->store, bad_keys, buffers, sizes, 2, &c,
                                                    results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(results[1], MOONCAKE_STORE_INVALID_PARAMS);
  c.dfs_replica_num = 1;
  assert_int_equal(mooncake_store_batch_upsert_from(f->store, keys, buffers, sizes, 2, &c,
                                                    results), 0);
  assert_int_equal(results[0], MOONCAKE_STORE_NOT_SUPPORTED);
  assert_int_equal(results[1], MOONCAKE_STORE_NOT_SUPPORTED);
  assert_int_equal(mooncake_store_batch_upsert_from(NULL, keys, buffers, sizes, 2, &c, results),
                   -1);
  assert_int_equal(mooncake_store_batch_upsert_from(f->store, keys, buffers, sizes, 0, &c,
                                                    results), 0);
  /* A value too large for the pool at once is upserted chunked, in the batch's order. */
  size_t big = 24u << 20;
  char *heap = malloc(big);
  memset(heap, 7, big);
  const char *big_keys[2] = {"big", "after-big"};
  void *big_buffers[2] = {heap, buffers[3]};
  size_t big_sizes[2] = {big, VALUE_SIZE};
  assert_int_equal(mooncake_store_batch_upsert_from(f->store, big_keys, big_buffers, big_sizes,
                                                    2, NULL, results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(results[1], 0);
  assert_int_equal(mooncake_store_get_size(f->store, "big"), (int64_t)big);
  assert_value(f->store, "after-big", 203);
  free(heap);
  mooncake_store_free(f->store, pool);
}

/* The older struct keeps working: with_soft_pin is ENABLE with the default TTL. */
static void test_old_config(void **state) {
  store_fixture *f = *state;
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), 300);
  mooncake_replicate_config_t old = {2, 1, 0, NULL, 0};
  assert_int_equal(mooncake_store_put(f->store, "old", value, sizeof(value), &old), 0);
  assert_value(f->store, "old", 300);
  assert_true(soft_pin_left("old") > 100000);
  assert_true(replica_daemon(g_cluster, "old", 1) >= 0);
  old.with_soft_pin = 0; /* an upsert without it drops the pin, as before */
  assert_int_equal(mooncake_store_upsert_from(f->store, "old", value, sizeof(value), &old), 0);
  assert_int_equal(soft_pin_left("old"), 0);
}

int main(void) {
  /* A placement seed: the test of prefer_alloc_in_same_node compares with where random
   * placement puts the same puts, reproducibly. */
  static const char *const master_flags[] = {"--default_kv_soft_pin_ttl", "200000",
                                             "--max_kv_soft_pin_ttl", "600000",
                                             "--placement_seed", "34", NULL};
  mc_cluster_options o = {0};
  o.daemons = 3;
  o.segment_size = 64u << 20;
  o.master_flags = master_flags;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_init_and_defaults, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_struct_size, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_replica_num, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_soft_pin_ttl_is_a_fixed_deadline, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_soft_pin_rules, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_upsert_soft_pin_actions, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_hard_pin, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_preferred_segments, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_prefer_alloc_in_same_node, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_unsupported_fields, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_ex_calls_and_batches, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_old_config, setup_store, store_fixture_teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
