/* Copy and move tasks and client names (issue 31) against a real master and two daemons:
 * a client named by setup's local_hostname lends memory under that name (get_hostname
 * answers it; a host without a port gets one held from 12300..14300; another process's
 * name, or a daemon's, is refused with -102), and a copy or a move between memory lent at
 * daemon 0 and memory at daemon 1 runs on the daemon holding the source, crosses the
 * transfer port, and leaves readable bytes where the replica descriptors say they are.
 * Creation's codes follow Mooncake's (-704, -600), and an unknown task answers -704. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (16u << 20)
#define LENT (8u << 20)
#define VALUE_SIZE (256u << 10)

static mc_cluster *g_cluster; /* two daemons with 8 MiB of their own */

/* A store set up on daemon i under local_hostname, lending LENT bytes; NULL when refused
 * (*rc says why). */
static mooncake_store_t named_store(int i, const char *local_hostname, int *rc) {
  mooncake_store_t s = mooncake_store_create();
  assert_non_null(s);
  setenv("MOONCAKE_SOCKET", mc_cluster_socket_at(g_cluster, i), 1);
  *rc = mooncake_store_setup(s, local_hostname, "P2PHANDSHAKE", LENT, POOL_SIZE, "tcp", "", "");
  if (*rc != 0) {
    mooncake_store_destroy(s);
    return NULL;
  }
  return s;
}

static void put_at(mooncake_store_t s, const char *key, const char *segment) {
  char *value = malloc(VALUE_SIZE);
  assert_non_null(value);
  fill_pattern(value, VALUE_SIZE, (uint64_t)strlen(key));
  mooncake_put_config_t c;
  assert_int_equal(mooncake_store_put_config_init(&c), 0);
  c.preferred_segment = segment;
  assert_int_equal(mooncake_store_put_ex(s, key, value, VALUE_SIZE, &c), 0);
  free(value);
}

/* The task's final state, polled (a task runs on its daemon's next round). */
static mooncake_task_info_t await_task(mooncake_store_t s, mooncake_task_id_t id) {
  mooncake_task_info_t info;
  for (double deadline = now_seconds() + 60; now_seconds() < deadline; usleep(20 * 1000)) {
    assert_int_equal(mooncake_store_query_task(s, id, &info), 0);
    if (info.status == MOONCAKE_TASK_SUCCESS || info.status == MOONCAKE_TASK_FAILED) return info;
  }
  fail_msg("task %llu-%llu did not end within 60 s", (unsigned long long)id.high,
           (unsigned long long)id.low);
  return info;
}

/* The key's replica locations, sorted into out (at most 4); their number. */
static size_t locations(mooncake_store_t s, const char *key, char out[4][MOONCAKE_STORE_LOCATION_SIZE]) {
  mooncake_replica_desc_t d[4];
  size_t n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(s, key, d, 4, &n), 0);
  for (size_t i = 0; i < n; ++i) strcpy(out[i], d[i].location);
  for (size_t i = 0; i + 1 < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (strcmp(out[i], out[j]) > 0) {
        char t[MOONCAKE_STORE_LOCATION_SIZE];
        strcpy(t, out[i]);
        strcpy(out[i], out[j]);
        strcpy(out[j], t);
      }
    }
  }
  return n;
}

/* The key's value read through s matches what put_at wrote. */
static void assert_value(mooncake_store_t s, const char *key) {
  char *out = malloc(VALUE_SIZE);
  assert_non_null(out);
  assert_int_equal(mooncake_store_get_into(s, key, out, VALUE_SIZE), VALUE_SIZE);
  assert_int_equal(check_pattern(out, VALUE_SIZE, (uint64_t)strlen(key)), -1);
  free(out);
}

/* Clears key's replica on segment once no lease runs on it (the cluster's 1 s). */
static void clear_on(mooncake_store_t s, const char *key, const char *segment) {
  const char *keys[1] = {key};
  int code = 0;
  for (double deadline = now_seconds() + 10; now_seconds() < deadline; usleep(50 * 1000)) {
    assert_int_equal(mooncake_store_batch_replica_clear(s, keys, 1, segment, &code), 0);
    if (code != MOONCAKE_STORE_OBJECT_HAS_LEASE) break;
  }
  assert_int_equal(code, 0);
}

static void test_names(void **state) {
  (void)state;
  int rc = 0;
  mooncake_store_t a = named_store(0, "ta.example:10001", &rc);
  assert_non_null(a);
  char name[MOONCAKE_STORE_LOCATION_SIZE];
  assert_int_equal(mooncake_store_get_hostname(a, name, sizeof(name)), 0);
  assert_string_equal(name, "ta.example:10001");
  /* Its lent memory carries the name. */
  put_at(a, "named", "ta.example:10001");
  char at[4][MOONCAKE_STORE_LOCATION_SIZE];
  assert_int_equal(locations(a, "named", at), 1);
  assert_string_equal(at[0], "ta.example:10001");
  /* Another process may not take it, at either daemon; nor may a client take a daemon's. */
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) {
    int code = 0;
    mooncake_store_t other = named_store(1, "ta.example:10001", &code);
    char msg[64] = "";
    if (other == NULL) {
      snprintf(msg, sizeof(msg), "%d", code);
    } else {
      snprintf(msg, sizeof(msg), "took it");
    }
    if (write(fds[1], msg, strlen(msg) + 1) < 0) _exit(2);
    _exit(0);
  }
  char got[64] = "";
  assert_true(read(fds[0], got, sizeof(got)) > 0);
  close(fds[0]);
  waitpid(child, NULL, 0);
  assert_string_equal(got, "-102");
  mooncake_store_t c = mooncake_store_create();
  setenv("MOONCAKE_SOCKET", mc_cluster_socket_at(g_cluster, 1), 1);
  assert_int_equal(mooncake_store_setup(c, mc_cluster_name_at(g_cluster, 0), "P2PHANDSHAKE",
                                        LENT, POOL_SIZE, "tcp", "", ""),
                   MOONCAKE_STORE_SEGMENT_ALREADY_EXISTS);
  assert_non_null(strstr(mooncake_store_errmsg(c), "local_hostname"));
  mooncake_store_destroy(c);
  /* A host without a port gets one of 12300..14300, held while the store is set up. */
  mooncake_store_t b = named_store(1, "localhost", &rc);
  assert_non_null(b);
  assert_int_equal(mooncake_store_get_hostname(b, name, sizeof(name)), 0);
  assert_int_equal(strncmp(name, "localhost:", 10), 0);
  int port = atoi(name + 10);
  assert_true(port >= 12300 && port <= 14300);
  /* The same process lends more under its name, at the same daemon. */
  mooncake_store_t a2 = named_store(0, "ta.example:10001", &rc);
  assert_non_null(a2);
  assert_int_equal(mooncake_store_close(a2), 0);
  mooncake_store_destroy(a2);
  assert_int_equal(mooncake_store_close(b), 0);
  mooncake_store_destroy(b);
  assert_int_equal(mooncake_store_close(a), 0);
  mooncake_store_destroy(a);
}

static void test_task_codes(void **state) {
  (void)state;
  int rc = 0;
  mooncake_store_t a = named_store(0, "codes:1", &rc);
  assert_non_null(a);
  put_at(a, "here", "codes:1");
  mooncake_task_id_t id = {7, 7};
  const char *unknown[1] = {"nobody:1"};
  const char *mine[1] = {"codes:1"};
  assert_int_equal(mooncake_store_create_copy_task(a, "missing", mine, 1, &id),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_create_copy_task(a, "here", unknown, 1, &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_create_copy_task(a, "here", mine, 0, &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_create_copy_task(a, "here", NULL, 1, &id), -1);
  assert_int_equal(mooncake_store_create_move_task(a, "missing", "codes:1", "nobody:1", &id),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_create_move_task(a, "here", "codes:1", "codes:1", &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_create_move_task(a, "here", "codes:1", "nobody:1", &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(id.high, 7); /* nothing written on a refusal */
  mooncake_task_info_t info;
  mooncake_task_id_t none = {1, 2};
  assert_int_equal(mooncake_store_query_task(a, none, &info), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_close(a), 0);
  mooncake_store_destroy(a);
}

static void test_copy_and_move_across_daemons(void **state) {
  (void)state;
  int rc = 0;
  mooncake_store_t a = named_store(0, "xa:1", &rc);
  mooncake_store_t b = named_store(1, "xb:2", &rc);
  assert_non_null(a);
  assert_non_null(b);
  const char *daemon1 = mc_cluster_name_at(g_cluster, 1);
  /* Copy: daemon 0 writes the value into memory lent at daemon 1. */
  put_at(a, "copied", "xa:1");
  const char *to_b[1] = {"xb:2"};
  mooncake_task_id_t id;
  assert_int_equal(mooncake_store_create_copy_task(b, "copied", to_b, 1, &id), 0);
  mooncake_task_info_t info = await_task(b, id);
  assert_int_equal(info.status, MOONCAKE_TASK_SUCCESS);
  assert_int_equal(info.type, MOONCAKE_TASK_REPLICA_COPY);
  assert_string_equal(info.message, "Task completed successfully");
  assert_true(info.last_updated_at_ms_epoch >= info.created_at_ms_epoch);
  assert_true(info.assigned_client.low != 0);
  char at[4][MOONCAKE_STORE_LOCATION_SIZE];
  assert_int_equal(locations(b, "copied", at), 2);
  assert_string_equal(at[0], "xa:1");
  assert_string_equal(at[1], "xb:2");
  /* The copy's bytes alone: the source replica cleared, the value read from daemon 1. */
  clear_on(a, "copied", "xa:1");
  assert_value(a, "copied");
  /* Move: the replica in memory lent at daemon 0 goes to daemon 1's own, and the source
   * with it. */
  put_at(a, "moved", "xa:1");
  assert_int_equal(mooncake_store_create_move_task(a, "moved", "xa:1", daemon1, &id), 0);
  info = await_task(a, id);
  assert_int_equal(info.status, MOONCAKE_TASK_SUCCESS);
  assert_int_equal(info.type, MOONCAKE_TASK_REPLICA_MOVE);
  assert_int_equal(locations(a, "moved", at), 1);
  assert_string_equal(at[0], daemon1);
  assert_value(b, "moved");
  /* Another tenant does not see the task. */
  mooncake_store_t other = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(other, "someone"), 0);
  assert_int_equal(mooncake_store_connect(other, mc_cluster_socket_at(g_cluster, 0), POOL_SIZE), 0);
  assert_int_equal(mooncake_store_query_task(other, id, &info), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  mooncake_store_destroy(other);
  assert_int_equal(mooncake_store_close(a), 0);
  assert_int_equal(mooncake_store_close(b), 0);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
}

int main(void) {
  mc_cluster_options o = {0};
  o.daemons = 2;
  o.segment_size = 8u << 20;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_task_codes),
      cmocka_unit_test(test_copy_and_move_across_daemons),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
