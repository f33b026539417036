/* The client side of the SSD tier (issue 14, part api), against a real master and daemons:
 * mooncake_store_get_replica_desc and its batch form (argument rules, a capacity too small
 * reporting the count needed, misses, memory replicas on two daemons, batches the library
 * must split), and mooncake_store_set_ssd_offload (its modes; puts, upserts and batch puts
 * carrying it still store and read back the right bytes).
 *
 * Disk replicas end to end: each of those cases starts a cluster of its own, whose daemon
 * has an SSD tier (--ssd_path) and whose master offloads as the case needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (16u << 20)
#define VALUE_SIZE 4096

static mc_cluster *g_cluster; /* two daemons, memory only */

static int setup_store(void **state) {
  return store_fixture_setup(state, g_cluster, 0, POOL_SIZE);
}

/* Puts VALUE_SIZE bytes under key with replica_num replicas, steered to the first
 * replica_num daemons. */
static void put_steered(mooncake_store_t s, const mc_cluster *c, const char *key,
                        size_t replica_num, uint64_t seed) {
  static const int targets[] = {0, 1};
  placement p;
  steer(&p, c, targets, replica_num, replica_num);
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), seed);
  assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), &p.config), 0);
}

static int has_location(const mooncake_replica_desc_t *d, size_t n, const char *location) {
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(d[i].location, location) == 0) return 1;
  }
  return 0;
}

static void test_arguments(void **state) {
  store_fixture *f = *state;
  mooncake_replica_desc_t d[2];
  size_t n = 99;
  const char *keys[1] = {"k"};
  size_t counts[1];
  int results[1];
  assert_int_equal(mooncake_store_get_replica_desc(NULL, "k", d, 2, &n), -1);
  assert_int_equal(mooncake_store_get_replica_desc(f->store, NULL, d, 2, &n), -1);
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "k", d, 2, NULL), -1);
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "k", NULL, 2, &n), -1);
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "", d, 2, &n), -600);
  assert_int_equal(n, 0);
  char *long_key = malloc(MOONCAKE_STORE_MAX_KEY_LEN + 2);
  memset(long_key, 'k', MOONCAKE_STORE_MAX_KEY_LEN + 1);
  long_key[MOONCAKE_STORE_MAX_KEY_LEN + 1] = '\0';
  assert_int_equal(mooncake_store_get_replica_desc(f->store, long_key, d, 2, &n), -600);
  free(long_key);

  assert_int_equal(mooncake_store_batch_get_replica_desc(NULL, keys, 1, d, 2, counts, results), -1);
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, NULL, 1, d, 2, counts, results),
                   -1);
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, 1, NULL, 2, counts, results),
                   -1);
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, 1, d, 2, NULL, results), -1);
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, 1, d, 2, counts, NULL), -1);
  /* An empty batch writes nothing, whatever the pointers. */
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, NULL, 0, NULL, 0, NULL, NULL), 0);

  assert_int_equal(mooncake_store_set_ssd_offload(NULL, MOONCAKE_SSD_OFFLOAD_ON), -1);
  assert_int_equal(mooncake_store_set_ssd_offload(f->store, 3), -600);
  assert_int_equal(mooncake_store_set_ssd_offload(f->store, -1), -600);
  assert_int_equal(mooncake_store_set_ssd_offload(f->store, MOONCAKE_SSD_OFFLOAD_DEFAULT), 0);

  /* Not connected: -600, as every call on a closed handle. */
  mooncake_store_t closed = mooncake_store_create();
  assert_int_equal(mooncake_store_get_replica_desc(closed, "k", d, 2, &n), -600);
  assert_int_equal(mooncake_store_set_ssd_offload(closed, MOONCAKE_SSD_OFFLOAD_ON), 0);
  mooncake_store_destroy(closed);
}

static void test_unknown_key(void **state) {
  store_fixture *f = *state;
  mooncake_replica_desc_t d[2];
  size_t n = 99;
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "no-such-key", d, 2, &n), -704);
  assert_int_equal(n, 0);
  const char *keys[2] = {"no-such-key", "nor-this"};
  size_t counts[2] = {9, 9};
  int results[2] = {1, 1};
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, 2, d, 1, counts, results),
                   0);
  assert_int_equal(results[0], -704);
  assert_int_equal(results[1], -704);
  assert_int_equal(counts[0], 0);
  assert_int_equal(counts[1], 0);
}

static void test_memory_replicas_on_two_daemons(void **state) {
  store_fixture *f = *state;
  put_steered(f->store, g_cluster, "two-replicas", 2, 1);
  mooncake_replica_desc_t d[4];
  size_t n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "two-replicas", d, 4, &n), 0);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < n; ++i) {
    assert_int_equal(d[i].kind, MOONCAKE_REPLICA_MEMORY);
    assert_int_equal(d[i].status, MOONCAKE_REPLICA_COMPLETE);
    assert_int_equal(d[i].size, VALUE_SIZE);
  }
  assert_true(has_location(d, n, mc_cluster_name_at(g_cluster, 0)));
  assert_true(has_location(d, n, mc_cluster_name_at(g_cluster, 1)));
  /* The location is what get_hostname reports on the daemon holding the replica. */
  char hostname[MOONCAKE_STORE_LOCATION_SIZE];
  assert_int_equal(mooncake_store_get_hostname(f->store, hostname, sizeof(hostname)), 0);
  assert_true(has_location(d, n, hostname));

  /* Too small a capacity: -600, the count needed, nothing written. */
  mooncake_replica_desc_t one[1];
  memset(one, 0x5a, sizeof(one));
  n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "two-replicas", one, 1, &n), -600);
  assert_int_equal(n, 2);
  assert_int_equal(((unsigned char *)one)[0], 0x5a);
  n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "two-replicas", NULL, 0, &n), -600);
  assert_int_equal(n, 2);

  /* Listing reads no bytes, and the value is still right. */
  char out[VALUE_SIZE];
  assert_int_equal(mooncake_store_get_into(f->store, "two-replicas", out, sizeof(out)), VALUE_SIZE);
  assert_int_equal(check_pattern(out, sizeof(out), 1), -1);
}

/* The lease a listing takes (GetReplicaList grants one) is the documented one. */
static void test_listing_takes_the_read_lease(void **state) {
  store_fixture *f = *state;
  put_steered(f->store, g_cluster, "leased", 1, 2);
  mooncake_replica_desc_t d[2];
  size_t n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "leased", d, 2, &n), 0);
  assert_int_equal(mooncake_store_remove(f->store, "leased", 0), MOONCAKE_STORE_OBJECT_HAS_LEASE);
  assert_int_equal(mooncake_store_remove(f->store, "leased", 1), 0);
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "leased", d, 2, &n), -704);
}

static void test_batch(void **state) {
  store_fixture *f = *state;
  put_steered(f->store, g_cluster, "batch-two", 2, 3);
  put_steered(f->store, g_cluster, "batch-one", 1, 4);
  const char *keys[4] = {"batch-two", "batch-one", "batch-missing", ""};
  mooncake_replica_desc_t d[4 * 2];
  size_t counts[4];
  int results[4];
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, 4, d, 2, counts, results),
                   0);
  assert_int_equal(results[0], 0);
  assert_int_equal(counts[0], 2);
  assert_true(has_location(&d[0], 2, mc_cluster_name_at(g_cluster, 0)));
  assert_true(has_location(&d[0], 2, mc_cluster_name_at(g_cluster, 1)));
  assert_int_equal(results[1], 0);
  assert_int_equal(counts[1], 1);
  assert_string_equal(d[2].location, mc_cluster_name_at(g_cluster, 0)); /* key 1's room */
  assert_int_equal(d[2].kind, MOONCAKE_REPLICA_MEMORY);
  assert_int_equal(d[2].size, VALUE_SIZE);
  assert_int_equal(results[2], -704);
  assert_int_equal(counts[2], 0);
  assert_int_equal(results[3], -600);
  assert_int_equal(counts[3], 0);

  /* One descriptor per key: the key with two replicas alone reports -600 and 2. */
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, 2, d, 1, counts, results),
                   0);
  assert_int_equal(results[0], -600);
  assert_int_equal(counts[0], 2);
  assert_int_equal(results[1], 0);
  assert_int_equal(counts[1], 1);
  assert_string_equal(d[1].location, mc_cluster_name_at(g_cluster, 0));
}

/* More keys than one request carries (1024): the library splits them, and every key gets
 * its own answer in order. */
static void test_large_batch_is_split(void **state) {
  store_fixture *f = *state;
  enum { KEYS = 2500 };
  char(*names)[32] = calloc(KEYS, sizeof(*names));
  const char **keys = calloc(KEYS, sizeof(*keys));
  for (int i = 0; i < KEYS; ++i) {
    snprintf(names[i], sizeof(names[i]), "split-%d", i);
    keys[i] = names[i];
  }
  /* Every 500th key exists, on either side of each split. */
  for (int i = 0; i < KEYS; i += 500) put_steered(f->store, g_cluster, keys[i], 1, (uint64_t)i);
  put_steered(f->store, g_cluster, keys[1023], 1, 1023);
  put_steered(f->store, g_cluster, keys[1024], 1, 1024);
  mooncake_replica_desc_t *d = calloc(KEYS, sizeof(*d));
  size_t *counts = calloc(KEYS, sizeof(*counts));
  int *results = calloc(KEYS, sizeof(*results));
  assert_int_equal(mooncake_store_batch_get_replica_desc(f->store, keys, KEYS, d, 1, counts, results),
                   0);
  for (int i = 0; i < KEYS; ++i) {
    int present = i % 500 == 0 || i == 1023 || i == 1024;
    if (results[i] != (present ? 0 : -704)) fail_msg("key %d: result %d", i, results[i]);
    assert_int_equal(counts[i], present ? 1 : 0);
    if (present) assert_string_equal(d[i].location, mc_cluster_name_at(g_cluster, 0));
  }
  free(results);
  free(counts);
  free(d);
  free(keys);
  free(names);
}

/* Every put path carries the offload choice; without an SSD tier anywhere it changes
 * nothing: the values are stored and read back, and every replica is a memory one. */
static void test_offload_modes_store_as_before(void **state) {
  store_fixture *f = *state;
  static const int modes[] = {MOONCAKE_SSD_OFFLOAD_ON, MOONCAKE_SSD_OFFLOAD_OFF,
                              MOONCAKE_SSD_OFFLOAD_DEFAULT};
  char value[VALUE_SIZE], out[VALUE_SIZE];
  for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); ++m) {
    assert_int_equal(mooncake_store_set_ssd_offload(f->store, modes[m]), 0);
    char key[32], upserted[32], batch_key[32];
    snprintf(key, sizeof(key), "offload-%zu", m);
    snprintf(upserted, sizeof(upserted), "offload-up-%zu", m);
    snprintf(batch_key, sizeof(batch_key), "offload-batch-%zu", m);
    fill_pattern(value, sizeof(value), 100 + m);
    assert_int_equal(mooncake_store_put(f->store, key, value, sizeof(value), NULL), 0);
    assert_int_equal(mooncake_store_upsert_from(f->store, upserted, value, sizeof(value), NULL), 0);
    const char *keys[1] = {batch_key};
    void *buffers[1] = {value};
    size_t sizes[1] = {sizeof(value)};
    int results[1] = {1};
    assert_int_equal(mooncake_store_batch_put_from(f->store, keys, buffers, sizes, 1, NULL, results),
                     0);
    assert_int_equal(results[0], 0);
    const char *all[3] = {key, upserted, batch_key};
    for (int k = 0; k < 3; ++k) {
      memset(out, 0, sizeof(out));
      assert_int_equal(mooncake_store_get_into(f->store, all[k], out, sizeof(out)), VALUE_SIZE);
      assert_int_equal(check_pattern(out, sizeof(out), 100 + m), -1);
      mooncake_replica_desc_t d[4];
      size_t n = 0;
      assert_int_equal(mooncake_store_get_replica_desc(f->store, all[k], d, 4, &n), 0);
      assert_int_equal(n, 1);
      assert_int_equal(d[0].kind, MOONCAKE_REPLICA_MEMORY);
    }
  }
  /* A value larger than the pool goes through the staged put, which carries it too. */
  assert_int_equal(mooncake_store_set_ssd_offload(f->store, MOONCAKE_SSD_OFFLOAD_ON), 0);
  size_t big = 2 * POOL_SIZE;
  char *large = malloc(big), *back = malloc(big);
  fill_pattern(large, big, 7);
  assert_int_equal(mooncake_store_put(f->store, "offload-staged", large, big, NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "offload-staged", back, big), (int64_t)big);
  assert_int_equal(check_pattern(back, big, 7), -1);
  free(large);
  free(back);
}

/* ---- disk replicas ----------------------------------------------------------------- */

/* One daemon with an SSD tier under the cluster's directory; master_flags as given. */
static mc_cluster *start_ssd_cluster(const char *const *master_flags) {
  static const char *const daemon_flags[] = {"--ssd_path", "{dir}/ssd", "--ssd_capacity", "256MB",
                                             NULL};
  mc_cluster_options o = {0};
  o.daemons = 1;
  o.segment_size = 128u << 20;
  o.master_flags = master_flags;
  o.daemon_flags = daemon_flags;
  return mc_cluster_start_with(&o);
}

/* Polls until key has a disk replica (10 s at most); its descriptor in *disk. 1 if found. */
static int await_disk_replica(mooncake_store_t s, const char *key, mooncake_replica_desc_t *disk) {
  for (double deadline = now_seconds() + 10;;) {
    mooncake_replica_desc_t d[4];
    size_t n = 0;
    if (mooncake_store_get_replica_desc(s, key, d, 4, &n) == 0) {
      for (size_t i = 0; i < n; ++i) {
        if (d[i].kind == MOONCAKE_REPLICA_DISK) {
          *disk = d[i];
          return 1;
        }
      }
    }
    if (now_seconds() > deadline) return 0;
    usleep(100 * 1000);
  }
}

/* key's replicas are one, in memory: it was not offloaded. */
static void assert_memory_only(mooncake_store_t s, const char *key) {
  mooncake_replica_desc_t d[4];
  size_t n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(s, key, d, 4, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(d[0].kind, MOONCAKE_REPLICA_MEMORY);
}

/* --enable_offload on the master: a default put gains a disk replica on its daemon. */
static void test_ssd_master_offload_shows_disk_replica(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--enable_offload", NULL};
  mc_cluster *c = start_ssd_cluster(master_flags);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, POOL_SIZE);
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), 11);
  assert_int_equal(mooncake_store_put(s, "to-disk", value, sizeof(value), NULL), 0);
  mooncake_replica_desc_t disk;
  assert_true(await_disk_replica(s, "to-disk", &disk));
  assert_string_equal(disk.location, mc_cluster_name_at(c, 0));
  assert_int_equal(disk.size, VALUE_SIZE);
  assert_int_equal(disk.status, MOONCAKE_REPLICA_COMPLETE);
  /* The batch form shows both kinds. */
  const char *keys[1] = {"to-disk"};
  mooncake_replica_desc_t d[4];
  size_t counts[1];
  int results[1];
  assert_int_equal(mooncake_store_batch_get_replica_desc(s, keys, 1, d, 4, counts, results), 0);
  assert_int_equal(results[0], 0);
  int kinds = 0;
  for (size_t i = 0; i < counts[0]; ++i) kinds |= 1 << d[i].kind;
  assert_int_equal(kinds, (1 << MOONCAKE_REPLICA_MEMORY) | (1 << MOONCAKE_REPLICA_DISK));
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

/* No --enable_offload: the handle's ON asks for it per put, and only its puts get one. */
static void test_ssd_handle_offload_on(void **state) {
  (void)state;
  mc_cluster *c = start_ssd_cluster(NULL);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, POOL_SIZE);
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), 12);
  assert_int_equal(mooncake_store_put(s, "stays-in-memory", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_set_ssd_offload(s, MOONCAKE_SSD_OFFLOAD_ON), 0);
  assert_int_equal(mooncake_store_put(s, "asked-for-disk", value, sizeof(value), NULL), 0);
  mooncake_replica_desc_t disk;
  assert_true(await_disk_replica(s, "asked-for-disk", &disk));
  assert_string_equal(disk.location, mc_cluster_name_at(c, 0));
  /* The other put had as long to be offloaded, and was not asked to be. */
  assert_memory_only(s, "stays-in-memory");
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

/* --enable_offload, but the handle's OFF: its puts stay in memory. */
static void test_ssd_handle_offload_off(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--enable_offload", NULL};
  mc_cluster *c = start_ssd_cluster(master_flags);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, POOL_SIZE);
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), 13);
  assert_int_equal(mooncake_store_set_ssd_offload(s, MOONCAKE_SSD_OFFLOAD_OFF), 0);
  assert_int_equal(mooncake_store_put(s, "kept-off-disk", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_set_ssd_offload(s, MOONCAKE_SSD_OFFLOAD_DEFAULT), 0);
  assert_int_equal(mooncake_store_put(s, "offloaded", value, sizeof(value), NULL), 0);
  mooncake_replica_desc_t disk;
  assert_true(await_disk_replica(s, "offloaded", &disk)); /* the offloader ran meanwhile */
  assert_memory_only(s, "kept-off-disk");
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

int main(void) {
  mc_cluster_options o = {0};
  o.daemons = 2;
  o.segment_size = 128u << 20;
  /* A read must finish inside its lease (-707 otherwise): 10 s, so that a loaded machine's
   * staged read of twice the pool does (the 1 s default is not a subject here). */
  o.lease_ms = 10000;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_arguments, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_unknown_key, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_memory_replicas_on_two_daemons, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_listing_takes_the_read_lease, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_batch, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_large_batch_is_split, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_offload_modes_store_as_before, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test(test_ssd_master_offload_shows_disk_replica),
      cmocka_unit_test(test_ssd_handle_offload_on),
      cmocka_unit_test(test_ssd_handle_offload_off),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
