/* Issue 12, tenants: a real master and four real daemons. Tenants alice and bob use the
 * same key names on daemon 0 (and alice on daemon 1 too): neither sees, reads, removes,
 * batch-removes, regex-removes or removes-all the other's keys, the default tenant is a
 * third key space, and every value is intact afterwards. A tenant over its quota
 * (--tenant_quota) gets -1402 while another tenant's puts at the same time succeed, and
 * the master's per-tenant figures (GetStats) say what was put.
 *
 * Issue 32, attack 6: daemon 2 runs with --tenant_uids listing uid A (65534) for tenant
 * nobodys and uid B (65533) for beta. A child that setuid()s to A cannot claim a tenant
 * listed for other uids, nor one the flag does not list (where its puts would escape its
 * quota), nor the default tenant: naming none, it lands in nobodys. Each refusal is -1401,
 * and a flood of them writes a bounded number of log lines. Daemon 3 has the same list and
 * --tenant_roaming_uids A: there A may claim unlisted tenants again, B still not. And on a
 * cluster of its own, quotas are shares of memory: a tenant without a quota (and the
 * default tenant) fills the cluster past its watermark three times over, and every object
 * of a tenant within its quota survives, read back byte for byte, while the fillers lose
 * their oldest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define POOL (16 * MiB)
#define VALUE 4096
#define QUOTA_VALUE (64 * KiB)
#define QUOTA_VALUES 4 /* --tenant_quota capped=256KB holds exactly four */

enum { D0 = 0, D1 = 1, GUARDED_DAEMON = 2, ROAMING_DAEMON = 3 };

/* The unprivileged uids the children take: A is Debian's nobody; B needs no passwd entry. */
#define UID_A 65534
#define UID_B 65533

/* Daemon 2's policy: "guarded" only for root, "nobodys" for A, "beta" for B, and so each
 * of the three confined to its tenant. Everything a process of another uid needs to reach
 * the daemon at all is here too, in one place: if the daemon's admission of local uids
 * (--allowed_uids or the like) would refuse A or B, add its flag to this list. */
#define GUARDED_FLAGS                                                                  \
  "--tenant_uids", "guarded=0,nobodys=65534,beta=65533", "--socket_mode", "0666",     \
      "--allowed_uids", "65534,65533"
static const char *const kGuardedDaemonFlags[] = {GUARDED_FLAGS, NULL};
/* Daemon 3: the same, and A may roam. */
static const char *const kRoamingDaemonFlags[] = {GUARDED_FLAGS, "--tenant_roaming_uids",
                                                  "65534", NULL};

static mc_cluster *g_c;

static int setup(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--tenant_quota", "capped=256KB", NULL};
  mc_cluster_options opts = {2, 64 * MiB, 0, master_flags, NULL};
  g_c = mc_cluster_start_with(&opts);
  if (g_c == NULL) return -1;
  if (mc_cluster_add_daemon(g_c, kGuardedDaemonFlags) != GUARDED_DAEMON ||
      mc_cluster_await_daemon_at(g_c, GUARDED_DAEMON, 30000) != 0 ||
      mc_cluster_add_daemon(g_c, kRoamingDaemonFlags) != ROAMING_DAEMON ||
      mc_cluster_await_daemon_at(g_c, ROAMING_DAEMON, 30000) != 0) {
    return -1;
  }
  /* The child of the uid test must reach the sockets in the cluster's directory. */
  return chmod(mc_cluster_dir(g_c), 0755);
}

static int teardown(void **state) {
  (void)state;
  mc_cluster_stop(g_c);
  return 0;
}

/* A handle of tenant ("" or NULL: none named) on daemon i. */
static mooncake_store_t connect_as(int i, const char *tenant) {
  mooncake_store_t s = mooncake_store_create();
  assert_non_null(s);
  assert_int_equal(mooncake_store_set_tenant(s, tenant), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, i), POOL), 0);
  return s;
}

/* Each tenant's value of a key has its own seed: reading another's bytes fails the check. */
static uint64_t seed(const char *tenant, const char *key) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = tenant; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ '/') * 1099511628211ull;
  for (const char *p = key; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

static void put_value(mooncake_store_t s, const char *tenant, const char *key) {
  char value[VALUE];
  fill_pattern(value, sizeof(value), seed(tenant, key));
  assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), NULL), 0);
}

/* key reads back, through s, as tenant's value. */
static void assert_value(mooncake_store_t s, const char *tenant, const char *key) {
  char buf[VALUE];
  assert_int_equal(mooncake_store_get_into(s, key, buf, sizeof(buf)), VALUE);
  assert_int_equal(check_pattern(buf, sizeof(buf), seed(tenant, key)), -1);
  assert_int_equal(mooncake_store_is_exist(s, key), 1);
  assert_int_equal(mooncake_store_get_size(s, key), VALUE);
}

static void assert_missing(mooncake_store_t s, const char *key) {
  char buf[VALUE];
  assert_int_equal(mooncake_store_get_into(s, key, buf, sizeof(buf)),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_is_exist(s, key), 0);
  assert_int_equal(mooncake_store_get_size(s, key), MOONCAKE_STORE_OBJECT_NOT_FOUND);
}

static mc_cluster_tenant_stats tenant_stats(const char *tenant) {
  mc_cluster_tenant_stats t;
  assert_int_equal(mc_cluster_tenant_stats_get(g_c, tenant, &t), 0);
  return t;
}

/* ---- set_tenant --------------------------------------------------------------------- */

static void test_set_tenant_checks_the_id_and_the_moment(void **state) {
  (void)state;
  mooncake_store_t s = mooncake_store_create();
  char longest[65], over[66];
  memset(longest, 't', 64);
  longest[64] = '\0';
  memset(over, 't', 65);
  over[65] = '\0';
  assert_int_equal(mooncake_store_set_tenant(s, longest), 0);
  assert_int_equal(mooncake_store_set_tenant(s, "Team-7_prod.eu"), 0);
  assert_int_equal(mooncake_store_set_tenant(s, NULL), 0); /* none named */
  assert_int_equal(mooncake_store_set_tenant(s, ""), 0);
  const char *bad[] = {over, "a b", "a/b", "t\xc3\xa9", "a:b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    assert_int_equal(mooncake_store_set_tenant(s, bad[i]), MOONCAKE_STORE_INVALID_PARAMS);
  }
  assert_int_equal(mooncake_store_set_tenant(NULL, "a"), MOONCAKE_STORE_INTERNAL_ERROR);
  assert_int_equal(mooncake_store_set_tenant(s, "a"), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, D0), POOL), 0);
  assert_int_equal(mooncake_store_set_tenant(s, "b"), MOONCAKE_STORE_INVALID_PARAMS);
  /* Closed, it may be changed again for the next connect. */
  assert_int_equal(mooncake_store_close(s), 0);
  assert_int_equal(mooncake_store_set_tenant(s, "b"), 0);
  mooncake_store_destroy(s);
}

/* ---- isolation ---------------------------------------------------------------------- */

static const char *const kKeys[] = {"shared/1", "shared/2", "shared/3", "shared/4"};
#define KEYS (sizeof(kKeys) / sizeof(kKeys[0]))

/* The clients the isolation tests speak through: tenant alice at daemons 0 and 1, tenant
 * bob and the default tenant at daemon 0. */
typedef struct four_clients {
  mooncake_store_t alice, alice_on_1, bob, plain;
} four_clients;

static four_clients connect_four_clients(void) {
  four_clients c;
  c.alice = connect_as(D0, "alice");
  c.alice_on_1 = connect_as(D1, "alice");
  c.bob = connect_as(D0, "bob");
  c.plain = connect_as(D0, NULL);
  return c;
}

static void destroy_four_clients(four_clients *c) {
  mooncake_store_destroy(c->alice);
  mooncake_store_destroy(c->alice_on_1);
  mooncake_store_destroy(c->bob);
  mooncake_store_destroy(c->plain);
}

static void test_same_key_names_are_separate_objects(void **state) {
  (void)state;
  four_clients c = connect_four_clients();
  /* Only alice has shared/4, written through daemon 1. */
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    put_value(c.alice, "alice", kKeys[k]);
    put_value(c.bob, "bob", kKeys[k]);
    put_value(c.plain, "", kKeys[k]);
  }
  put_value(c.alice_on_1, "alice", kKeys[3]);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.alice, "alice", kKeys[k]);
    assert_value(c.alice_on_1, "alice", kKeys[k]); /* one tenant, any daemon */
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  assert_value(c.alice, "alice", kKeys[3]);
  assert_missing(c.bob, kKeys[3]);
  assert_missing(c.plain, kKeys[3]);
  /* The batch forms too. */
  int exist[KEYS];
  assert_int_equal(mooncake_store_batch_is_exist(c.bob, (const char **)kKeys, KEYS, exist), 0);
  assert_int_equal(exist[0] + exist[1] + exist[2], 3);
  assert_int_equal(exist[3], 0);
  char *bufs[KEYS];
  size_t sizes[KEYS];
  int64_t got[KEYS];
  for (size_t k = 0; k < KEYS; ++k) {
    bufs[k] = malloc(VALUE);
    sizes[k] = VALUE;
  }
  assert_int_equal(mooncake_store_batch_get_into(c.plain, (const char **)kKeys, (void **)bufs,
                                                 sizes, KEYS, got),
                   0);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_int_equal(got[k], VALUE);
    assert_int_equal(check_pattern(bufs[k], VALUE, seed("", kKeys[k])), -1);
  }
  assert_int_equal(got[3], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  for (size_t k = 0; k < KEYS; ++k) free(bufs[k]);
  /* What the master counts: alice 4, bob 3, the default tenant at least its 3. */
  assert_int_equal(tenant_stats("alice").objects, 4);
  assert_int_equal(tenant_stats("alice").bytes, 4 * VALUE);
  assert_int_equal(tenant_stats("bob").objects, 3);
  assert_int_equal(tenant_stats("bob").bytes, 3 * VALUE);
  assert_true(tenant_stats("").objects >= 3);
  destroy_four_clients(&c);
}

static void test_no_removal_reaches_another_tenant(void **state) {
  (void)state;
  four_clients c = connect_four_clients();
  /* Read by everyone first, so that every read cache holds the values a removal could
   * wrongly forget or keep. */
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  /* remove and batch_remove name alice's own keys only. */
  assert_int_equal(mooncake_store_remove(c.alice, kKeys[0], 1), 0);
  assert_int_equal(mooncake_store_remove(c.alice, kKeys[0], 1), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  const char *batch[] = {kKeys[1], "shared/absent"};
  int codes[2];
  assert_int_equal(mooncake_store_batch_remove(c.alice, batch, 2, 1, codes), 0);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  assert_missing(c.alice, kKeys[0]);
  assert_missing(c.alice_on_1, kKeys[1]);
  /* A pattern matching every key counts alice's only: shared/3 and shared/4. */
  assert_int_equal(mooncake_store_remove_by_regex(c.alice_on_1, "^shared/", 1), 2);
  /* Nor can a pattern spell another tenant's stored key. */
  assert_int_equal(mooncake_store_remove_by_regex(c.alice, "bob", 1), 0);
  assert_int_equal(mooncake_store_remove_by_regex(c.alice, "\\x00", 1), 0);
  for (size_t k = 0; k < KEYS; ++k) assert_missing(c.alice, kKeys[k]);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  /* remove_all: alice has nothing left to remove, bob loses his, the default tenant keeps
   * its keys through both. */
  put_value(c.alice, "alice", "mine");
  assert_int_equal(mooncake_store_remove_all(c.alice, 1), 1);
  assert_int_equal(mooncake_store_remove_all(c.bob, 1), 3);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_missing(c.bob, kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  assert_int_equal(tenant_stats("alice").objects, 0);
  assert_int_equal(tenant_stats("bob").objects, 0);
  /* And the default tenant's remove_all leaves a tenant's keys alone. */
  put_value(c.bob, "bob", kKeys[0]);
  assert_true(mooncake_store_remove_all(c.plain, 1) >= 3);
  assert_value(c.bob, "bob", kKeys[0]);
  assert_missing(c.plain, kKeys[0]);
  assert_int_equal(mooncake_store_remove(c.bob, kKeys[0], 1), 0);
  destroy_four_clients(&c);
}

/* ---- quota -------------------------------------------------------------------------- */

typedef struct other_puts {
  mooncake_store_t s;
  int ok;
  int done;
} other_puts;

#define OTHER_PUTS 24

static void *put_as_other(void *arg) {
  other_puts *o = arg;
  char *value = malloc(QUOTA_VALUE);
  fill_pattern(value, QUOTA_VALUE, 7);
  for (int i = 0; i < OTHER_PUTS; ++i) {
    char key[32];
    snprintf(key, sizeof(key), "other/%d", i);
    o->ok += mooncake_store_put(o->s, key, value, QUOTA_VALUE, NULL) == 0;
  }
  free(value);
  return NULL;
}

static void test_quota_refuses_one_tenant_only(void **state) {
  (void)state;
  mooncake_store_t capped = connect_as(D0, "capped");
  mooncake_store_t capped_on_1 = connect_as(D1, "capped");
  mooncake_store_t other = connect_as(D1, "uncapped");
  char *value = malloc(QUOTA_VALUE);
  fill_pattern(value, QUOTA_VALUE, 3);
  other_puts o = {other, 0, 0};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, put_as_other, &o), 0);
  /* Exactly its quota goes in, through either daemon; then every put is refused. */
  int accepted = 0, refused = 0;
  for (int i = 0; i < 3 * QUOTA_VALUES; ++i) {
    char key[32];
    snprintf(key, sizeof(key), "capped/%d", i);
    int rc = mooncake_store_put(i % 2 ? capped_on_1 : capped, key, value, QUOTA_VALUE, NULL);
    if (rc == 0) {
      ++accepted;
    } else {
      assert_int_equal(rc, MOONCAKE_STORE_QUOTA_EXCEEDED);
      ++refused;
    }
  }
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(accepted, QUOTA_VALUES);
  assert_int_equal(refused, 2 * QUOTA_VALUES);
  assert_int_equal(o.ok, OTHER_PUTS); /* the quota of one tenant is nobody else's */

  mc_cluster_tenant_stats t = tenant_stats("capped");
  assert_int_equal(t.objects, QUOTA_VALUES);
  assert_int_equal(t.bytes, QUOTA_VALUES * QUOTA_VALUE);
  assert_int_equal(t.quota_bytes, 256 * KiB);
  assert_int_equal(t.refused_puts, 2 * QUOTA_VALUES);
  t = tenant_stats("uncapped");
  assert_int_equal(t.objects, OTHER_PUTS);
  assert_int_equal(t.bytes, OTHER_PUTS * QUOTA_VALUE);
  assert_int_equal(t.quota_bytes, 0);
  assert_int_equal(t.refused_puts, 0);

  /* Room for one more after a removal: in a batch, the first entry fits, the second not. */
  assert_int_equal(mooncake_store_remove(capped, "capped/0", 1), 0);
  const char *keys[] = {"capped/batch-1", "capped/batch-2"};
  void *buffers[] = {value, value};
  size_t sizes[] = {QUOTA_VALUE, QUOTA_VALUE};
  int results[2];
  assert_int_equal(
      mooncake_store_batch_put_from(capped, keys, buffers, sizes, 2, NULL, results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(results[1], MOONCAKE_STORE_QUOTA_EXCEEDED);
  /* Two replicas count twice: one 64 KiB value needs 128 KiB of quota. */
  assert_int_equal(mooncake_store_remove_all(capped, 1), QUOTA_VALUES);
  mooncake_replicate_config_t two = {2, 0, 0, NULL, 0};
  for (int i = 0; i < QUOTA_VALUES / 2; ++i) {
    char key[32];
    snprintf(key, sizeof(key), "capped/two-%d", i);
    assert_int_equal(mooncake_store_put(capped, key, value, QUOTA_VALUE, &two), 0);
  }
  assert_int_equal(mooncake_store_put(capped, "capped/one-more", value, QUOTA_VALUE, NULL),
                   MOONCAKE_STORE_QUOTA_EXCEEDED);
  assert_int_equal(tenant_stats("capped").bytes, QUOTA_VALUES * QUOTA_VALUE);
  assert_int_equal(mooncake_store_remove_all(capped, 1), QUOTA_VALUES / 2);
  assert_int_equal(mooncake_store_remove_all(other, 1), OTHER_PUTS);
  assert_int_equal(tenant_stats("capped").bytes, 0);
  free(value);
  mooncake_store_destroy(capped);
  mooncake_store_destroy(capped_on_1);
  mooncake_store_destroy(other);
}

/* ---- who may claim a tenant (--tenant_uids, --tenant_roaming_uids) ----------------- */

/* In a child that has become uid: connects to daemon naming tenant (NULL: none) times
 * times (each handle closed before the next) and, if the last one worked, puts key.
 * Reports the last connect's (or the put's) code. */
static void child_connect_as(int fd, uid_t uid, int daemon, const char *tenant, const char *key,
                             int times) {
  int rc = -1;
  if (setgid(uid) == 0 && setuid(uid) == 0) {
    for (int i = 0; i < times; ++i) {
      mooncake_store_t s = mooncake_store_create();
      rc = mooncake_store_set_tenant(s, tenant);
      if (rc == 0) rc = mooncake_store_connect(s, mc_cluster_socket_at(g_c, daemon), MiB);
      if (rc == 0 && key != NULL && i + 1 == times) {
        char value[VALUE];
        fill_pattern(value, sizeof(value), seed("child", key));
        rc = mooncake_store_put(s, key, value, sizeof(value), NULL);
      }
      mooncake_store_destroy(s);
    }
  }
  if (write(fd, &rc, sizeof(rc)) != (ssize_t)sizeof(rc)) _exit(2);
  _exit(0);
}

/* What child_connect_as answered. */
static int as_uid_times(uid_t uid, int daemon, const char *tenant, const char *key, int times) {
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) child_connect_as(fds[1], uid, daemon, tenant, key, times);
  int rc = -12345;
  assert_int_equal(read(fds[0], &rc, sizeof(rc)), (ssize_t)sizeof(rc));
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return rc;
}

static int as_uid(uid_t uid, int daemon, const char *tenant, const char *key) {
  return as_uid_times(uid, daemon, tenant, key, 1);
}

static void test_listed_tenants_only_for_their_uids(void **state) {
  (void)state;
  if (geteuid() != 0) {
    skip(); /* setuid() needs root; ctest runs as root here */
  }
  /* Another uid cannot claim "guarded", and is told so at connect. */
  assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, "guarded", NULL),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, "beta", NULL), MOONCAKE_STORE_PERMISSION_DENIED);
  assert_true(count_log_lines(mc_cluster_log_at(g_c, GUARDED_DAEMON),
                              "may not claim tenant 'guarded'", NULL) >= 1);
  /* Naming none, it lands in the tenant listing its uid; naming that tenant works too. */
  int before = (int)tenant_stats("nobodys").objects;
  assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, NULL, "by-nobody"), 0);
  assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, "nobodys", "by-nobody-named"), 0);
  assert_int_equal(tenant_stats("nobodys").objects, before + 2);

  /* Root may claim "guarded", not "nobodys"; naming none, it is in "guarded". */
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(s, "nobodys"), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, GUARDED_DAEMON), POOL),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  mooncake_store_destroy(s);
  mooncake_store_t root = connect_as(GUARDED_DAEMON, NULL);
  mooncake_store_t guarded = connect_as(D0, "guarded"); /* daemon 0 lists nobody */
  put_value(root, "root", "by-root");
  char buf[VALUE];
  assert_int_equal(mooncake_store_get_into(guarded, "by-root", buf, sizeof(buf)), VALUE);
  assert_int_equal(check_pattern(buf, sizeof(buf), seed("root", "by-root")), -1);
  assert_int_equal(mooncake_store_remove_all(guarded, 1), 1);
  mooncake_store_destroy(root);
  mooncake_store_destroy(guarded);
}

/* The escape of attack 6: a uid confined to its tenant named a tenant the flag does not
 * list and stored there, past its own tenant's quota. Now it is refused, its put lands
 * nowhere, and the default tenant is out of its reach too (naming none is its tenant). */
static void test_a_listed_uid_cannot_leave_its_tenants(void **state) {
  (void)state;
  if (geteuid() != 0) skip(); /* setuid() needs root; ctest runs as root here */
  const int64_t plain_before = tenant_stats("").objects;
  const int64_t nobodys_before = tenant_stats("nobodys").objects;
  assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, "elsewhere", "escaped"),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  assert_int_equal(as_uid(UID_B, GUARDED_DAEMON, "elsewhere", "escaped"),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  assert_int_equal(tenant_stats("elsewhere").objects, 0);
  assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, NULL, "not-default"), 0);
  assert_int_equal(tenant_stats("nobodys").objects, nobodys_before + 1);
  assert_int_equal(tenant_stats("").objects, plain_before);
  /* Root is listed (for "guarded") on this daemon: confined as well. */
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(s, "elsewhere"), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, GUARDED_DAEMON), POOL),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  mooncake_store_destroy(s);
  /* The log says which rule, and what to do. */
  assert_true(count_log_lines(mc_cluster_log_at(g_c, GUARDED_DAEMON),
                              "uid 65534 may not claim tenant 'elsewhere' (--tenant_uids "
                              "confines this uid to 'nobodys')",
                              "--tenant_roaming_uids") >= 1);

  /* Daemon 3 lets A roam: an unlisted tenant is A's to claim again (its default is still
   * nobodys, and a tenant listed for others still refused); B stays confined. */
  assert_int_equal(as_uid(UID_A, ROAMING_DAEMON, "elsewhere", "roamed"), 0);
  assert_int_equal(tenant_stats("elsewhere").objects, 1);
  assert_int_equal(as_uid(UID_A, ROAMING_DAEMON, NULL, "roamer-default"), 0);
  assert_int_equal(tenant_stats("nobodys").objects, nobodys_before + 2);
  assert_int_equal(as_uid(UID_A, ROAMING_DAEMON, "beta", NULL), MOONCAKE_STORE_PERMISSION_DENIED);
  assert_int_equal(as_uid(UID_B, ROAMING_DAEMON, "elsewhere", NULL),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  mooncake_store_t elsewhere = connect_as(D0, "elsewhere");
  assert_int_equal(mooncake_store_remove_all(elsewhere, 1), 1);
  mooncake_store_destroy(elsewhere);
}

/* A peer can be refused at will, as often as it likes: the refusals share the daemon's
 * throttle (a burst of five lines, then one a second, the next line counting those left
 * out), so 200 of them write a handful of lines. */
#define FLOOD 200

static void test_refusals_are_logged_throttled(void **state) {
  (void)state;
  if (geteuid() != 0) skip(); /* setuid() needs root; ctest runs as root here */
  const char *log = mc_cluster_log_at(g_c, GUARDED_DAEMON);
  const int before = count_log_lines(log, "may not claim tenant 'flooded'", NULL);
  const double t0 = now_seconds();
  assert_int_equal(as_uid_times(UID_A, GUARDED_DAEMON, "flooded", NULL, FLOOD),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  const double seconds = now_seconds() - t0;
  const int lines = count_log_lines(log, "may not claim tenant 'flooded'", NULL) - before;
  printf("%d refusals in %.1f s wrote %d log lines\n", FLOOD, seconds, lines);
  /* What the throttle allows in that time, whatever the machine's speed. */
  assert_true(lines <= 5 + (int)seconds + 1);
  assert_true(lines < FLOOD / 4);
  /* Those left out are counted: the next line the throttle lets through says how many.
   * Refused once more until it comes (a second at most, on an idle machine). */
  const double deadline = now_seconds() + 60;
  while (count_log_lines(log, "more refused since the last such line", "flooded") < 1) {
    assert_true(now_seconds() < deadline);
    assert_int_equal(as_uid(UID_A, GUARDED_DAEMON, "flooded", NULL),
                     MOONCAKE_STORE_PERMISSION_DENIED);
  }
}

/* ---- eviction: quotas are shares of memory ------------------------------------------- */

#define SHARE_SEGMENT (16 * MiB) /* per daemon: 32 MiB in all */
#define SHARE_OBJ (64 * KiB)
#define SHARE_BATCH 64
#define SHARE_BATCHES ((int)(3 * 2 * SHARE_SEGMENT / (SHARE_BATCH * SHARE_OBJ))) /* 24 */
#define BETA_OBJECTS 32 /* 2 MiB: half of beta's quota, a sixteenth of the memory */
#define SHARE_KEY_LEN 32

static void share_key(char *out, const char *prefix, int i) {
  snprintf(out, SHARE_KEY_LEN, "%s-%05d", prefix, i);
}

static void test_fillers_never_evict_a_tenant_within_its_quota(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--tenant_quota", "beta=4MB", NULL};
  mc_cluster_options opts = {2, SHARE_SEGMENT, 0, master_flags, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  /* beta writes first: before, its objects were the oldest, and went first. */
  mooncake_store_t beta = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(beta, "beta"), 0);
  assert_int_equal(mooncake_store_connect(beta, mc_cluster_socket_at(c, 0), 4 * MiB), 0);
  char *value = malloc(SHARE_OBJ);
  char key[SHARE_KEY_LEN];
  for (int i = 0; i < BETA_OBJECTS; ++i) {
    share_key(key, "beta", i);
    fill_pattern(value, SHARE_OBJ, seed("beta", key));
    assert_int_equal(mooncake_store_put(beta, key, value, SHARE_OBJ, NULL), 0);
  }
  /* Two fillers without a quota, a named tenant and the default one, take turns writing
   * three times the memory through the other daemon. */
  mooncake_store_t fillers[2];
  fillers[0] = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(fillers[0], "filler"), 0);
  fillers[1] = mooncake_store_create();
  for (int f = 0; f < 2; ++f) {
    assert_int_equal(
        mooncake_store_connect(fillers[f], mc_cluster_socket_at(c, 1), 2 * SHARE_BATCH * SHARE_OBJ),
        0);
  }
  char *area = mooncake_store_alloc(fillers[0], SHARE_BATCH * SHARE_OBJ);
  char *area_plain = mooncake_store_alloc(fillers[1], SHARE_BATCH * SHARE_OBJ);
  assert_non_null(area);
  assert_non_null(area_plain);
  char names[SHARE_BATCH][SHARE_KEY_LEN];
  const char *keys[SHARE_BATCH];
  void *bufs[SHARE_BATCH];
  size_t sizes[SHARE_BATCH];
  for (int r = 0; r < SHARE_BATCHES; ++r) {
    const int f = r % 2;
    char *base = f == 0 ? area : area_plain;
    for (int j = 0; j < SHARE_BATCH; ++j) {
      share_key(names[j], "fill", r * SHARE_BATCH + j);
      keys[j] = names[j];
      bufs[j] = base + (size_t)j * SHARE_OBJ;
      sizes[j] = SHARE_OBJ;
      fill_pattern(bufs[j], SHARE_OBJ, (uint64_t)(r * SHARE_BATCH + j));
    }
    int results[SHARE_BATCH];
    assert_int_equal(mooncake_store_batch_put_from(fillers[f], keys, bufs, sizes, SHARE_BATCH,
                                                   NULL, results),
                     0);
    for (int j = 0; j < SHARE_BATCH; ++j) assert_int_equal(results[j], 0);
  }
  mc_cluster_eviction_stats e;
  assert_int_equal(mc_cluster_eviction_stats_get(c, &e), 0);
  printf("%lld rounds evicted %lld objects\n", (long long)e.rounds, (long long)e.evicted_objects);
  assert_true(e.rounds >= 3);
  assert_true(e.evicted_objects >= SHARE_BATCHES * SHARE_BATCH / 2);
  /* Every one of beta's objects, with its bytes, through either daemon. */
  mooncake_store_t beta_on_1 = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(beta_on_1, "beta"), 0);
  assert_int_equal(mooncake_store_connect(beta_on_1, mc_cluster_socket_at(c, 1), 4 * MiB), 0);
  for (int i = 0; i < BETA_OBJECTS; ++i) {
    share_key(key, "beta", i);
    memset(value, 0, SHARE_OBJ);
    assert_int_equal(mooncake_store_get_into(i % 2 ? beta_on_1 : beta, key, value, SHARE_OBJ),
                     SHARE_OBJ);
    assert_int_equal(check_pattern(value, SHARE_OBJ, seed("beta", key)), -1);
  }
  mc_cluster_tenant_stats t;
  assert_int_equal(mc_cluster_tenant_stats_get(c, "beta", &t), 0);
  assert_int_equal(t.objects, BETA_OBJECTS);
  assert_int_equal(t.bytes, BETA_OBJECTS * SHARE_OBJ);
  /* The fillers lost their oldest (each key is in one of the two tenants); their newest
   * read back. */
  share_key(key, "fill", 0);
  assert_int_equal(mooncake_store_is_exist(fillers[0], key), 0);
  share_key(key, "fill", SHARE_BATCH);
  assert_int_equal(mooncake_store_is_exist(fillers[1], key), 0);
  share_key(key, "fill", SHARE_BATCHES * SHARE_BATCH - 1);
  assert_int_equal(mooncake_store_get_into(fillers[1], key, value, SHARE_OBJ), SHARE_OBJ);
  assert_int_equal(check_pattern(value, SHARE_OBJ, (uint64_t)(SHARE_BATCHES * SHARE_BATCH - 1)),
                   -1);
  free(value);
  mooncake_store_destroy(beta);
  mooncake_store_destroy(beta_on_1);
  for (int f = 0; f < 2; ++f) mooncake_store_destroy(fillers[f]);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_tenant_checks_the_id_and_the_moment),
      cmocka_unit_test(test_same_key_names_are_separate_objects),
      cmocka_unit_test(test_no_removal_reaches_another_tenant),
      cmocka_unit_test(test_quota_refuses_one_tenant_only),
      cmocka_unit_test(test_listed_tenants_only_for_their_uids),
      cmocka_unit_test(test_a_listed_uid_cannot_leave_its_tenants),
      cmocka_unit_test(test_refusals_are_logged_throttled),
      cmocka_unit_test(test_fillers_never_evict_a_tenant_within_its_quota),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
