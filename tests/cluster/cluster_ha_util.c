#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cluster/cluster_ha_util.h"
#include "tests/harness/cluster_test_util.h"

uint64_t ha_seed(int id, int k) { return ((uint64_t)(id + 1) << 32) | (uint64_t)k; }

void ha_key(char *out, size_t n, const char *prefix, int id, int k) {
  snprintf(out, n, "%s-%d-%d", prefix, id, k);
}

static void *load_main(void *arg) {
  ha_load *l = arg;
  char *v = malloc(HA_VALUE_SIZE), *out = malloc(HA_VALUE_SIZE);
  char key[64];
  unsigned pick = (unsigned)l->id * 7919u + 1;
  for (int k = 0; k < HA_LOAD_MAX_PUTS && !l->stop; ++k) {
    ha_key(key, sizeof(key), l->prefix, l->id, k);
    fill_pattern(v, HA_VALUE_SIZE, ha_seed(l->id, k));
    double t0 = now_seconds();
    l->started[k] = t0;
    l->puts = k + 1;
    int rc = mooncake_store_put(l->store, key, v, HA_VALUE_SIZE, NULL);
    double t1 = now_seconds();
    l->ended[k] = t1;
    if (t1 - t0 > l->max_put_s) l->max_put_s = t1 - t0;
    if (rc == 0) {
      l->ack[k] = 1;
      ++l->acked;
      if (l->mark > 0 && t0 >= l->mark) ++l->acked_after_mark;
    } else {
      ++l->failed;
      l->last_error = rc;
    }
    /* An earlier acknowledged object, read back (the newest half the time). */
    pick = pick * 1103515245u + 12345u;
    int j = (pick >> 16) % 2 == 0 ? k : (int)((pick >> 8) % (unsigned)(k + 1));
    while (j >= 0 && !l->ack[j]) --j;
    if (j >= 0) {
      ha_key(key, sizeof(key), l->prefix, l->id, j);
      memset(out, 0, HA_VALUE_SIZE);
      int64_t got = mooncake_store_get_into(l->store, key, out, HA_VALUE_SIZE);
      if (got == (int64_t)HA_VALUE_SIZE && check_pattern(out, HA_VALUE_SIZE, ha_seed(l->id, j)) == -1) {
        ++l->reads_ok;
      } else if (got >= 0) {
        ++l->reads_wrong;
      } else {
        ++l->reads_failed;
      }
    }
    if (l->pause_ms > 0) usleep((useconds_t)l->pause_ms * 1000);
  }
  free(v);
  free(out);
  l->done = 1;
  return NULL;
}

void ha_load_start(ha_load *l, const mc_cluster *c, int daemon, int id, const char *prefix,
                   int pause_ms) {
  memset(l, 0, sizeof(*l));
  l->store = connect_app(c, daemon, 8u << 20);
  l->daemon = daemon;
  l->id = id;
  l->prefix = prefix;
  l->pause_ms = pause_ms;
  assert_int_equal(pthread_create(&l->thread, NULL, load_main, l), 0);
}

void ha_load_mark(ha_load *loads, int n, double when) {
  for (int i = 0; i < n; ++i) loads[i].mark = when;
}

void ha_load_await_acks(ha_load *loads, int n, int acks, double timeout_s) {
  double until = now_seconds() + timeout_s;
  for (;;) {
    int all = 1;
    for (int i = 0; i < n; ++i) {
      int got = loads[i].mark > 0 ? loads[i].acked_after_mark : loads[i].acked;
      if (got < acks) all = 0;
    }
    if (all) return;
    if (now_seconds() > until) {
      for (int i = 0; i < n; ++i) {
        print_message("load %d (daemon %d): %d puts, %d acked (%d after the mark), %d failed "
                      "(last %d)\n",
                      i, loads[i].daemon, loads[i].puts, loads[i].acked,
                      loads[i].acked_after_mark, loads[i].failed, loads[i].last_error);
      }
      fail_msg("the loads did not reach %d acknowledged puts in %.0f s", acks, timeout_s);
    }
    usleep(20 * 1000);
  }
}

void ha_load_stop(ha_load *loads, int n, double timeout_s) {
  for (int i = 0; i < n; ++i) loads[i].stop = 1;
  double until = now_seconds() + timeout_s;
  for (int i = 0; i < n; ++i) {
    while (!loads[i].done) {
      if (now_seconds() > until) {
        fail_msg("load %d: its put or get %d has not returned %.0f s after the stop", i,
                 loads[i].puts - 1, timeout_s);
      }
      usleep(10 * 1000);
    }
    pthread_join(loads[i].thread, NULL);
    mooncake_store_destroy(loads[i].store);
    loads[i].store = NULL;
  }
}

ha_verdict ha_verify(const mc_cluster *c, int daemon, const ha_load *loads, int n,
                     double timeout_s) {
  ha_verdict v = {0, 0, 0, 0};
  mooncake_store_t s = connect_app(c, daemon, 8u << 20);
  char *out = malloc(HA_VALUE_SIZE);
  char key[64];
  double until = now_seconds() + timeout_s;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < loads[i].puts && k < HA_LOAD_MAX_PUTS; ++k) {
      if (!loads[i].ack[k]) continue;
      ++v.acked;
      ha_key(key, sizeof(key), loads[i].prefix, loads[i].id, k);
      int64_t got;
      for (;;) {
        memset(out, 0, HA_VALUE_SIZE);
        got = mooncake_store_get_into(s, key, out, HA_VALUE_SIZE);
        if (got >= 0 || now_seconds() > until) break;
        usleep(50 * 1000);
      }
      if (got < 0) {
        ++v.lost;
        v.last_code = (int)got;
        print_message("acknowledged %s not read back: %lld (%s)\n", key, (long long)got,
                      mooncake_store_strerror((int)got));
      } else if (got != (int64_t)HA_VALUE_SIZE ||
                 check_pattern(out, HA_VALUE_SIZE, ha_seed(loads[i].id, k)) != -1) {
        ++v.wrong;
        print_message("acknowledged %s read back with other bytes (%lld)\n", key, (long long)got);
      }
    }
  }
  free(out);
  mooncake_store_destroy(s);
  return v;
}

double ha_first_put(mooncake_store_t s, const char *prefix, double since, double timeout_s) {
  char *v = malloc(HA_VALUE_SIZE);
  char key[64];
  double took = -1;
  for (int k = 0; now_seconds() < since + timeout_s; ++k) {
    snprintf(key, sizeof(key), "%s-%d", prefix, k);
    fill_pattern(v, HA_VALUE_SIZE, (uint64_t)k);
    if (mooncake_store_put(s, key, v, HA_VALUE_SIZE, NULL) == 0) {
      took = now_seconds() - since;
      break;
    }
    usleep(10 * 1000);
  }
  free(v);
  return took;
}
