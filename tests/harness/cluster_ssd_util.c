#include "tests/harness/cluster_ssd_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

mc_cluster_disk_stats disk_stats(const mc_cluster *c) {
  mc_cluster_disk_stats s;
  assert_int_equal(mc_cluster_disk_stats_get(c, &s), 0);
  return s;
}

void await_offloads_done(const mc_cluster *c, int64_t n, double timeout_s) {
  double until = now_seconds() + timeout_s;
  mc_cluster_disk_stats s = disk_stats(c);
  while (s.offloads_done < n && now_seconds() < until) {
    usleep(10 * 1000);
    s = disk_stats(c);
  }
  if (s.offloads_done < n) {
    fail_msg("%lld offloads done, not %lld, after %.0f s (queued %lld, failed %lld)",
             (long long)s.offloads_done, (long long)n, timeout_s, (long long)s.offloads_queued,
             (long long)s.offloads_failed);
  }
}

void put_series(mooncake_store_t s, const char *prefix, int first, int count, size_t size,
                const mooncake_replicate_config_t *config) {
  char *value = malloc(size);
  assert_non_null(value);
  char key[SSD_KEY_LEN];
  for (int i = first; i < first + count; ++i) {
    key_of(key, sizeof(key), prefix, i);
    fill_pattern(value, size, seed_of(prefix, i));
    int rc = mooncake_store_put(s, key, value, size, config);
    if (rc != 0) fail_msg("put %s: %d (%s)", key, rc, mooncake_store_strerror(rc));
  }
  free(value);
}

int64_t read_checked(mooncake_store_t s, const char *prefix, int i, size_t size) {
  char key[SSD_KEY_LEN];
  key_of(key, sizeof(key), prefix, i);
  char *out = malloc(size);
  assert_non_null(out);
  memset(out, 0, size);
  int64_t got = mooncake_store_get_into(s, key, out, size);
  if (got >= 0) {
    if (got != (int64_t)size) fail_msg("get %s: %lld bytes, not %zu", key, (long long)got, size);
    int64_t wrong = check_pattern(out, size, seed_of(prefix, i));
    if (wrong != -1) fail_msg("get %s: wrong byte at %lld", key, (long long)wrong);
  }
  free(out);
  return got;
}

int64_t read_checked_within(mooncake_store_t s, const char *prefix, int i, size_t size,
                            double timeout_s) {
  double until = now_seconds() + timeout_s;
  int64_t got = read_checked(s, prefix, i, size);
  while (got != (int64_t)size && now_seconds() < until) {
    usleep(20 * 1000);
    got = read_checked(s, prefix, i, size);
  }
  return got;
}

int reconciliations(const mc_cluster *c, int i) {
  return count_log_lines(mc_cluster_log_at(c, i), "reconciliation complete", NULL);
}

void await_reconciliation(const mc_cluster *c, int i, int before, double timeout_s) {
  double until = now_seconds() + timeout_s;
  while (reconciliations(c, i) <= before && now_seconds() < until) usleep(20 * 1000);
  if (reconciliations(c, i) <= before) {
    fail_msg("daemon %d completed no reconciliation in %.0f s", i, timeout_s);
  }
}

int kinds_of(const mc_cluster *c, const char *prefix, int i, int *memory, int *disk) {
  char key[SSD_KEY_LEN];
  key_of(key, sizeof(key), prefix, i);
  return mc_cluster_replica_kinds(c, key, memory, disk, NULL);
}
