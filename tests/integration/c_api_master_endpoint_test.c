/* mooncake_store_setup's master_server_addr is compared with the daemon's --master as an
 * endpoint, not as a string (issue 17, part package), against a real master and daemon:
 * every spelling of the daemon's master (127.0.0.1:P, localhost:P, the inet_aton form
 * 127.1:P) connects and works; another port, another address, another family, the etcd
 * form against a fixed master, a host that does not resolve and malformed text are refused
 * with -600 and leave the handle unconnected (a later setup with the right master works). */
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

#define POOL_SIZE (4u << 20)

static mc_cluster *g_cluster;

/* host + ":" + port into buf. */
static const char *endpoint(char *buf, size_t n, const char *host, int port) {
  snprintf(buf, n, "%s:%d", host, port);
  return buf;
}

/* setup with master_server_addr master on a fresh handle; the handle's result code. When
 * it connected, a put and a get through it must work too. */
static int setup_with(const char *master) {
  mooncake_store_t s = mooncake_store_create();
  assert_non_null(s);
  int rc = mooncake_store_setup(s, "localhost", "P2PHANDSHAKE", 0, POOL_SIZE, "tcp", "", master);
  if (rc == 0) {
    char key[64], value[16] = "endpoint", out[16] = {0};
    snprintf(key, sizeof(key), "endpoint-%s", master);
    assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), NULL), 0);
    assert_int_equal(mooncake_store_get_into(s, key, out, sizeof(out)), (int)sizeof(value));
    assert_memory_equal(out, value, sizeof(value));
    assert_int_equal(mooncake_store_remove(s, key, 1), 0);
  } else {
    /* Refused before (or at) the handshake: the handle is not connected. */
    assert_int_equal(mooncake_store_health_check(s), 1);
  }
  mooncake_store_destroy(s);
  return rc;
}

static void test_spellings_of_the_daemons_master_connect(void **state) {
  (void)state;
  int port = mc_cluster_master_port(g_cluster);
  char buf[128];
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "127.0.0.1", port)), 0);
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "localhost", port)), 0);
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "127.1", port)), 0);
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "[127.0.0.1]", port)), 0);
  /* "" or NULL: no check, as before. */
  assert_int_equal(setup_with(""), 0);
  assert_int_equal(setup_with(NULL), 0);
}

static void test_other_masters_are_refused(void **state) {
  (void)state;
  int port = mc_cluster_master_port(g_cluster);
  char buf[128];
  /* Same address, another port: the daemon's transfer port is surely not the master's. */
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "127.0.0.1",
                                       mc_cluster_daemon_port(g_cluster))),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "10.255.255.1", port)),
                   MOONCAKE_STORE_INVALID_PARAMS);
  /* Another loopback address is another endpoint: the master listens on 127.0.0.1. */
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "127.0.0.2", port)),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "[::1]", port)),
                   MOONCAKE_STORE_INVALID_PARAMS);
  /* The daemon follows a fixed master, not etcd's leader. */
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "etcd://127.0.0.1", port)),
                   MOONCAKE_STORE_INVALID_PARAMS);
}

static void test_names_that_do_not_resolve_and_malformed_text_are_refused(void **state) {
  (void)state;
  int port = mc_cluster_master_port(g_cluster);
  char buf[128];
  /* .invalid never resolves (RFC 6761). */
  assert_int_equal(setup_with(endpoint(buf, sizeof(buf), "no-such-host.invalid", port)),
                   MOONCAKE_STORE_INVALID_PARAMS);
  static const char *const malformed[] = {"127.0.0.1", "localhost:", ":50051",
                                          "localhost:0", "localhost:70000", "localhost:5x",
                                          "etcd://", "etcd://127.0.0.1"};
  for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); ++i) {
    assert_int_equal(setup_with(malformed[i]), MOONCAKE_STORE_INVALID_PARAMS);
  }
}

/* A refused setup leaves the handle usable: the next one, naming the master, connects. */
static void test_refused_setup_then_right_master(void **state) {
  (void)state;
  int port = mc_cluster_master_port(g_cluster);
  char buf[128];
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_setup(s, "localhost", "P2PHANDSHAKE", 0, POOL_SIZE, "tcp", "",
                                        endpoint(buf, sizeof(buf), "127.0.0.2", port)),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_setup(s, "localhost", "P2PHANDSHAKE", 0, POOL_SIZE, "tcp", "",
                                        endpoint(buf, sizeof(buf), "localhost", port)),
                   0);
  assert_int_equal(mooncake_store_health_check(s), 0);
  mooncake_store_destroy(s);
}

int main(void) {
  g_cluster = mc_cluster_start(64u << 20);
  if (g_cluster == NULL) return 1;
  /* setup() has no socket argument: it finds the daemon through $MOONCAKE_SOCKET. */
  setenv("MOONCAKE_SOCKET", mc_cluster_socket(g_cluster), 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spellings_of_the_daemons_master_connect),
      cmocka_unit_test(test_other_masters_are_refused),
      cmocka_unit_test(test_names_that_do_not_resolve_and_malformed_text_are_refused),
      cmocka_unit_test(test_refused_setup_then_right_master),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
