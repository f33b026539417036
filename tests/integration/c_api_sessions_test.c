/* Put sessions and object groups of ABI 5 (issue 31, part groups) against a real master
 * and two daemons: mooncake_store_put_session_* -- a value reserved whole, written by
 * ranges over several calls (from the pool and from plain memory, to replicas on both
 * daemons), invisible until its end, then read back; every code of the calls; a revoke
 * freeing the key; a session its process abandons (killed) revoked by the daemon, its
 * space back -- and mooncake_put_config_t's group ids carried to the master through every
 * put path (single, batch, session, upsert), as the lease a read gives a whole group shows
 * it. Also mooncake_store_disk_read_count without an SSD tier. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (16u << 20)
#define SEGMENT_SIZE (64u << 20)
#define PAGE 4096
#define LAYERS 4

static mc_cluster *g_cluster;

static int setup_store(void **state) {
  return store_fixture_setup(state, g_cluster, 0, POOL_SIZE);
}

static int64_t write_one(mooncake_store_t s, const char *key, const void *src, uint64_t length,
                         uint64_t dst_offset) {
  mooncake_put_fragment_t f = {src, length, dst_offset};
  mooncake_session_write_t w = {key, &f, 1};
  int64_t result = 0;
  assert_int_equal(mooncake_store_put_session_write(s, &w, 1, &result), 0);
  return result;
}

static int end_one(mooncake_store_t s, const char *key) {
  int rc = 0;
  assert_int_equal(mooncake_store_put_session_end(s, &key, 1, &rc), 0);
  return rc;
}

static int revoke_one(mooncake_store_t s, const char *key) {
  int rc = 0;
  assert_int_equal(mooncake_store_put_session_revoke(s, &key, 1, &rc), 0);
  return rc;
}

static int start_one(mooncake_store_t s, const char *key, size_t size,
                     const mooncake_put_config_t *c) {
  int rc = 0;
  assert_int_equal(mooncake_store_put_session_start(s, &key, &size, 1, c, &rc), 0);
  return rc;
}

/* Three values of LAYERS pages, two replicas each (one per daemon), written a layer per
 * call -- layer by layer across keys, as vLLM's layer-wise saving does -- from the pool and
 * from plain memory alternately; nothing is readable before the end, everything after. */
static void test_layer_by_layer(void **state) {
  store_fixture *f = *state;
  const char *keys[3] = {"layers-0", "layers-1", "layers-2"};
  size_t sizes[3] = {PAGE * LAYERS, PAGE * LAYERS, PAGE * LAYERS};
  int rcs[3];
  mooncake_put_config_t c = default_put_config();
  c.replica_num = 2;
  assert_int_equal(mooncake_store_put_session_start(f->store, keys, sizes, 3, &c, rcs), 0);
  for (int i = 0; i < 3; ++i) assert_int_equal(rcs[i], 0);
  char *pooled = mooncake_store_alloc(f->store, 3 * PAGE * LAYERS);
  char *plain = malloc(3 * PAGE * LAYERS);
  assert_non_null(pooled);
  for (int i = 0; i < 3; ++i) {
    fill_pattern(pooled + i * PAGE * LAYERS, PAGE * LAYERS, 100 + i);
    memcpy(plain + i * PAGE * LAYERS, pooled + i * PAGE * LAYERS, PAGE * LAYERS);
  }
  for (int layer = LAYERS - 1; layer >= 0; --layer) {  /* any order */
    const char *from = layer % 2 == 0 ? pooled : plain;
    mooncake_put_fragment_t frags[3];
    mooncake_session_write_t writes[3];
    int64_t written[3];
    for (int i = 0; i < 3; ++i) {
      frags[i] = (mooncake_put_fragment_t){from + i * PAGE * LAYERS + layer * PAGE, PAGE,
                                           (uint64_t)layer * PAGE};
      writes[i] = (mooncake_session_write_t){keys[i], &frags[i], 1};
    }
    assert_int_equal(mooncake_store_put_session_write(f->store, writes, 3, written), 0);
    for (int i = 0; i < 3; ++i) assert_int_equal(written[i], PAGE);
    /* Still being written: not there for readers. */
    assert_int_equal(mooncake_store_is_exist(f->store, keys[0]), 0);
  }
  char got[PAGE * LAYERS];
  assert_int_equal(mooncake_store_get_into(f->store, keys[1], got, sizeof(got)), -703);
  assert_int_equal(mooncake_store_put_session_end(f->store, keys, 3, rcs), 0);
  for (int i = 0; i < 3; ++i) assert_int_equal(rcs[i], 0);
  /* Read from both daemons: each replica got every range. */
  mooncake_store_t other = connect_app(g_cluster, 1, POOL_SIZE);
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(mooncake_store_get_into(f->store, keys[i], got, sizeof(got)), sizeof(got));
    assert_int_equal(check_pattern(got, sizeof(got), 100 + i), -1);
    assert_int_equal(mooncake_store_get_into(other, keys[i], got, sizeof(got)), sizeof(got));
    assert_int_equal(check_pattern(got, sizeof(got), 100 + i), -1);
  }
  mooncake_store_destroy(other);
  free(plain);
  mooncake_store_free(f->store, pooled);
}

/* Several ranges of one key in one call, and a range larger than the pool (staged in
 * chunks). On daemon 0: its space stays held for the lease of the read below, and the
 * dying client's test needs daemon 1's. */
static void test_many_ranges_and_large_values(void **state) {
  store_fixture *f = *state;
  const size_t big = 3 * POOL_SIZE;  /* larger than the pool: staged */
  char *value = malloc(big);
  fill_pattern(value, big, 7);
  mooncake_put_config_t c = default_put_config();
  c.preferred_segment = mc_cluster_name_at(g_cluster, 0);
  assert_int_equal(start_one(f->store, "large", big, &c), 0);
  mooncake_put_fragment_t halves[2] = {{value + big / 2, big / 2, big / 2},
                                       {value, big / 2, 0}};
  mooncake_session_write_t w = {"large", halves, 2};
  int64_t written = 0;
  assert_int_equal(mooncake_store_put_session_write(f->store, &w, 1, &written), 0);
  assert_int_equal(written, big);
  assert_int_equal(end_one(f->store, "large"), 0);
  char *got = malloc(big);
  assert_int_equal(mooncake_store_get_into(f->store, "large", got, big), big);
  assert_int_equal(check_pattern(got, big, 7), -1);
  assert_int_equal(mooncake_store_remove(f->store, "large", 1), 0);
  free(got);
  free(value);
}

/* A batch larger than the requests kept in flight (starts, writes from plain memory
 * staged through the pool, ends): every key's answer in its place. */
static void test_many_keys(void **state) {
  store_fixture *f = *state;
  enum { N = 200 };
  static char names[N][32];
  const char *keys[N];
  size_t sizes[N];
  int rcs[N];
  char *values = malloc((size_t)N * 2 * PAGE);
  mooncake_put_fragment_t frags[N][2];
  mooncake_session_write_t writes[N];
  int64_t written[N];
  for (int i = 0; i < N; ++i) {
    snprintf(names[i], sizeof(names[i]), "many-%d", i);
    keys[i] = names[i];
    sizes[i] = 2 * PAGE;
    fill_pattern(values + (size_t)i * 2 * PAGE, 2 * PAGE, 1000 + i);
    frags[i][0] = (mooncake_put_fragment_t){values + (size_t)i * 2 * PAGE + PAGE, PAGE, PAGE};
    frags[i][1] = (mooncake_put_fragment_t){values + (size_t)i * 2 * PAGE, PAGE, 0};
    writes[i] = (mooncake_session_write_t){keys[i], frags[i], 2};
  }
  assert_int_equal(mooncake_store_put_session_start(f->store, keys, sizes, N, NULL, rcs), 0);
  for (int i = 0; i < N; ++i) assert_int_equal(rcs[i], 0);
  assert_int_equal(mooncake_store_put_session_write(f->store, writes, N, written), 0);
  for (int i = 0; i < N; ++i) assert_int_equal(written[i], 2 * PAGE);
  assert_int_equal(mooncake_store_put_session_end(f->store, keys, N, rcs), 0);
  for (int i = 0; i < N; ++i) assert_int_equal(rcs[i], 0);
  char got[2 * PAGE];
  for (int i = 0; i < N; i += 37) {
    assert_int_equal(mooncake_store_get_into(f->store, keys[i], got, sizeof(got)), sizeof(got));
    assert_int_equal(check_pattern(got, sizeof(got), 1000 + i), -1);
  }
  free(values);
}

/* Every code: a stored key (-705), a second session for a key (-600, also twice in one
 * batch), no session (-600 for write, end and revoke), a range past the value (-600,
 * nothing written), bad sizes and keys, NULL arguments (-1), an empty batch (0). */
static void test_codes(void **state) {
  store_fixture *f = *state;
  char page[PAGE];
  fill_pattern(page, sizeof(page), 3);
  assert_int_equal(mooncake_store_put(f->store, "stored", page, sizeof(page), NULL), 0);
  assert_int_equal(start_one(f->store, "stored", PAGE, NULL), MOONCAKE_STORE_OBJECT_ALREADY_EXISTS);
  const char *twice[2] = {"twice", "twice"};
  size_t sizes[2] = {PAGE, PAGE};
  int rcs[2];
  assert_int_equal(mooncake_store_put_session_start(f->store, twice, sizes, 2, NULL, rcs), 0);
  assert_int_equal(rcs[0], 0);
  assert_int_equal(rcs[1], MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(start_one(f->store, "twice", PAGE, NULL), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(write_one(f->store, "twice", page, PAGE, 1), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(write_one(f->store, "twice", page, PAGE, 0), PAGE);
  assert_int_equal(write_one(f->store, "none", page, PAGE, 0), MOONCAKE_STORE_INVALID_PARAMS);
  assert_string_equal(mooncake_store_errmsg(f->store), "");  /* a batch's entry: call is 0 */
  assert_int_equal(end_one(f->store, "none"), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(revoke_one(f->store, "none"), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(end_one(f->store, "twice"), 0);
  assert_int_equal(end_one(f->store, "twice"), MOONCAKE_STORE_INVALID_PARAMS);  /* ended */
  assert_int_equal(start_one(f->store, "zero", 0, NULL), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(start_one(f->store, "", PAGE, NULL), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_put_session_start(f->store, NULL, sizes, 1, NULL, rcs), -1);
  assert_int_equal(mooncake_store_put_session_start(f->store, NULL, NULL, 0, NULL, NULL), 0);
  assert_int_equal(mooncake_store_put_session_write(f->store, NULL, 1, NULL), -1);
  assert_int_equal(mooncake_store_put_session_end(f->store, twice, 1, NULL), -1);
  assert_int_equal(mooncake_store_put_session_end(NULL, twice, 1, rcs), -1);
}

/* A revoked session publishes nothing and frees its key: a put of it then stores. */
static void test_revoke(void **state) {
  store_fixture *f = *state;
  char page[PAGE];
  fill_pattern(page, sizeof(page), 9);
  assert_int_equal(start_one(f->store, "revoked", PAGE, NULL), 0);
  assert_int_equal(write_one(f->store, "revoked", page, PAGE, 0), PAGE);
  assert_int_equal(revoke_one(f->store, "revoked"), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "revoked", page, PAGE), -704);
  assert_int_equal(write_one(f->store, "revoked", page, PAGE, 0), MOONCAKE_STORE_INVALID_PARAMS);
  fill_pattern(page, sizeof(page), 10);
  assert_int_equal(mooncake_store_put(f->store, "revoked", page, sizeof(page), NULL), 0);
  char got[PAGE];
  assert_int_equal(mooncake_store_get_into(f->store, "revoked", got, PAGE), PAGE);
  assert_int_equal(check_pattern(got, PAGE, 10), -1);
}

/* A process holding a session dies (SIGKILL, no close): the daemon revokes its put at
 * once. The key is never readable, and the reserved space -- most of daemon 1's segment
 * -- comes back, so that a value needing it fits there. */
static void test_dying_client_session_revoked(void **state) {
  store_fixture *f = *state;
  const size_t reserved = SEGMENT_SIZE - (8u << 20);
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) {
    mooncake_store_t s = connect_app(g_cluster, 0, POOL_SIZE);
    mooncake_put_config_t c = default_put_config();
    c.preferred_segment = mc_cluster_name_at(g_cluster, 1);
    int rc = start_one(s, "abandoned", reserved, &c);
    char page[PAGE];
    memset(page, 'a', sizeof(page));
    if (rc == 0) rc = write_one(s, "abandoned", page, PAGE, 0) == PAGE ? 0 : 1;
    char ok = rc == 0 ? 'y' : 'n';
    if (write(fds[1], &ok, 1) != 1) _exit(2);
    pause();  /* killed here, its session open */
    _exit(3);
  }
  char ok = 0;
  assert_int_equal(read(fds[0], &ok, 1), 1);
  close(fds[0]);
  assert_int_equal(ok, 'y');
  char page[PAGE];
  int64_t early = mooncake_store_get_into(f->store, "abandoned", page, sizeof(page));
  assert_true(early == -703);  /* reserved, being written */
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  assert_true(WIFSIGNALED(status));
  /* The daemon notices the closed socket on its own thread: the key goes soon after. */
  assert_int_equal(poll_until_missing(f->store, "abandoned", PAGE, 10.0), -704);
  size_t n = reserved;
  char *value = malloc(n);
  fill_pattern(value, n, 11);
  mooncake_put_config_t c = default_put_config();
  c.preferred_segment = mc_cluster_name_at(g_cluster, 1);
  assert_int_equal(mooncake_store_put_ex(f->store, "after-the-crash", value, n, &c), 0);
  assert_int_equal(replica_daemon(g_cluster, "after-the-crash", 0), 1);
  assert_int_equal(mooncake_store_remove(f->store, "after-the-crash", 1), 0);
  free(value);
}

/* close() ends the handle's sessions: the daemon revokes them, and a later write or end of
 * them, once connected again, has no session (-600). */
static void test_close_revokes(void **state) {
  (void)state;
  mooncake_store_t s = connect_app(g_cluster, 0, POOL_SIZE);
  assert_int_equal(start_one(s, "closed", PAGE, NULL), 0);
  assert_int_equal(mooncake_store_close(s), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_cluster, 0), POOL_SIZE), 0);
  assert_int_equal(end_one(s, "closed"), MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(poll_until_missing(s, "closed", PAGE, 10.0), -704);
  mooncake_store_destroy(s);
}

/* Group ids reach the master through every put path: a read of one member leases the
 * others (a remove without force answers -706), never an ungrouped key; an upsert naming
 * another group is -600. */
static void test_group_ids_reach_the_master(void **state) {
  store_fixture *f = *state;
  char page[PAGE];
  fill_pattern(page, sizeof(page), 5);
  /* Batch: one id per key. */
  const char *keys[3] = {"g-batch-0", "g-batch-1", "g-batch-2"};
  void *bufs[3] = {page, page, page};
  size_t sizes[3] = {PAGE, PAGE, PAGE};
  const char *ids[3] = {"batch-group", "batch-group", ""};
  int rcs[3];
  mooncake_put_config_t c = default_put_config();
  c.group_ids = ids;
  c.group_ids_count = 3;
  assert_int_equal(mooncake_store_batch_put_from_ex(f->store, keys, bufs, sizes, 3, &c, rcs), 0);
  for (int i = 0; i < 3; ++i) assert_int_equal(rcs[i], 0);
  c.group_ids_count = 2;  /* not one per key: every entry's -600 */
  const char *more[3] = {"g-more-0", "g-more-1", "g-more-2"};
  assert_int_equal(mooncake_store_batch_put_from_ex(f->store, more, bufs, sizes, 3, &c, rcs), 0);
  for (int i = 0; i < 3; ++i) assert_int_equal(rcs[i], MOONCAKE_STORE_INVALID_PARAMS);
  char got[PAGE];
  assert_int_equal(mooncake_store_get_into(f->store, keys[0], got, PAGE), PAGE);
  assert_int_equal(mooncake_store_remove(f->store, keys[1], 0), MOONCAKE_STORE_OBJECT_HAS_LEASE);
  assert_int_equal(mooncake_store_remove(f->store, keys[2], 0), 0);
  /* Single put and session, one group. */
  const char *one[1] = {"mixed"};
  c = default_put_config();
  c.group_ids = one;
  c.group_ids_count = 1;
  assert_int_equal(mooncake_store_put_ex(f->store, "g-single", page, PAGE, &c), 0);
  assert_int_equal(start_one(f->store, "g-session", PAGE, &c), 0);
  assert_int_equal(write_one(f->store, "g-session", page, PAGE, 0), PAGE);
  assert_int_equal(end_one(f->store, "g-session"), 0);
  assert_int_equal(mooncake_store_put(f->store, "g-plain", page, PAGE, NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "g-session", got, PAGE), PAGE);
  assert_int_equal(mooncake_store_remove(f->store, "g-single", 0), MOONCAKE_STORE_OBJECT_HAS_LEASE);
  assert_int_equal(mooncake_store_remove(f->store, "g-plain", 0), 0);
  /* An object stays in its group. */
  const char *other[1] = {"another"};
  c.group_ids = other;
  assert_int_equal(mooncake_store_upsert_from_ex(f->store, "g-single", page, PAGE, &c),
                   MOONCAKE_STORE_INVALID_PARAMS);
  c.group_ids = NULL;
  c.group_ids_count = 0;
  assert_int_equal(mooncake_store_upsert_from_ex(f->store, "g-single", page, PAGE, &c), 0);
}

/* No SSD tier: no read is served from one. Not connected: -600. */
static void test_disk_read_count(void **state) {
  store_fixture *f = *state;
  char page[PAGE];
  fill_pattern(page, sizeof(page), 1);
  assert_int_equal(mooncake_store_put(f->store, "counted", page, PAGE, NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "counted", page, PAGE), PAGE);
  assert_int_equal(mooncake_store_disk_read_count(f->store), 0);
  mooncake_store_t unconnected = mooncake_store_create();
  assert_int_equal(mooncake_store_disk_read_count(unconnected), MOONCAKE_STORE_INVALID_PARAMS);
  mooncake_store_destroy(unconnected);
}

int main(void) {
  mc_cluster_options o = {0};
  o.daemons = 2;
  o.segment_size = SEGMENT_SIZE;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_layer_by_layer, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_many_ranges_and_large_values, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_many_keys, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_codes, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_revoke, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_dying_client_session_revoked, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test(test_close_revokes),
      cmocka_unit_test_setup_teardown(test_group_ids_reach_the_master, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_disk_read_count, setup_store, store_fixture_teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
