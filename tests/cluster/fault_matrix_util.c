#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness/cluster_test_util.h"
#include "tests/cluster/fault_matrix_util.h"

#define MAGIC 0x31564d46u /* "FMV1" */
#define HEADER 16

const int fm_codes[8] = {-801, -703, -800, -900, -901, -1010, -1600, -707};

typedef struct fm_writer {
  fm_workload *w;
  int id;
  mooncake_store_t s;
  pthread_t thread;
  int64_t ops, acked; /* __atomic */
} fm_writer;

struct fm_workload {
  fm_options o;
  fm_key *keys;
  fm_writer writers[FM_MAX_WRITERS];
  placement steered;
  const mooncake_replicate_config_t *config;
  int stop; /* __atomic */
};

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t value_seed(int key, uint32_t version) {
  return mix64(((uint64_t)(uint32_t)key << 32) | version);
}

/* 1 to 16 KiB: a value of another size, or shifted, does not pass as this one. */
static size_t value_size(int key, uint32_t version) {
  return (size_t)1024 * (1 + value_seed(key, version) % 16);
}

static void key_name(char *out, size_t n, int key) { snprintf(out, n, "k%d", key); }

static void fill_value(unsigned char *buf, int key, uint32_t version) {
  size_t size = value_size(key, version);
  uint32_t head[4] = {MAGIC, (uint32_t)key, version, (uint32_t)size};
  memcpy(buf, head, HEADER);
  fill_pattern(buf + HEADER, size - HEADER, value_seed(key, version));
}

enum { IS_VALUE, IS_OTHER_KEY, IS_GARBAGE };

/* What got bytes of buf are: value(key, *version), another key's value, or garbage. */
static int decode(const unsigned char *buf, int64_t got, int key, uint32_t *version) {
  if (got < HEADER) return IS_GARBAGE;
  uint32_t head[4];
  memcpy(head, buf, HEADER);
  if (head[0] != MAGIC || head[3] != (uint32_t)got) return IS_GARBAGE;
  if (head[1] != (uint32_t)key) return IS_OTHER_KEY;
  if (head[2] == 0 || value_size(key, head[2]) != (size_t)got) return IS_GARBAGE;
  if (check_pattern(buf + HEADER, (size_t)got - HEADER, value_seed(key, head[2])) != -1) {
    return IS_GARBAGE;
  }
  *version = head[2];
  return IS_VALUE;
}

static void *writer_main(void *arg) {
  fm_writer *wr = arg;
  fm_workload *w = wr->w;
  unsigned char *buf = malloc(FM_MAX_VALUE);
  if (buf == NULL) return NULL;
  uint64_t rnd = mix64((uint64_t)wr->id + 1);
  int mine = (w->o.keys - wr->id + w->o.writers - 1) / w->o.writers;
  char name[32];
  while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
    rnd = mix64(rnd);
    int i = wr->id + w->o.writers * (int)(rnd % (uint64_t)mine);
    fm_key *k = &w->keys[i];
    key_name(name, sizeof(name), i);
    uint32_t v = ++k->next;
    int rc, remove = 0;
    if (v > 1 && (int)((rnd >> 32) % 100) < w->o.remove_percent) {
      remove = 1;
      rc = mooncake_store_remove(wr->s, name, 1);
      if (rc == MOONCAKE_STORE_OBJECT_NOT_FOUND) rc = 0; /* absent either way */
    } else {
      fill_value(buf, i, v);
      size_t size = value_size(i, v);
      int absent = (k->acked == 0 || k->acked_remove) && k->unsure_put == 0;
      rc = absent ? mooncake_store_put(wr->s, name, buf, size, w->config)
                  : mooncake_store_upsert_from(wr->s, name, buf, size, w->config);
    }
    if (rc == 0) {
      k->acked = v;
      k->acked_remove = (uint8_t)remove;
      if (!remove) k->acked_put = v;
      k->unsure_put = k->unsure_remove = 0;
      k->acked_at = now_seconds();
      __atomic_add_fetch(&wr->acked, 1, __ATOMIC_RELEASE);
    } else if (remove) {
      k->unsure_remove = v;
    } else {
      k->unsure_put = v;
    }
    __atomic_add_fetch(&wr->ops, 1, __ATOMIC_RELEASE);
  }
  free(buf);
  return NULL;
}

fm_workload *fm_workload_start(const mc_cluster *c, const fm_options *o) {
  assert_true(o->writers >= 1 && o->writers <= FM_MAX_WRITERS && o->ndaemons >= 1);
  assert_true(o->keys >= o->writers);
  fm_workload *w = calloc(1, sizeof(*w));
  assert_non_null(w);
  w->o = *o;
  w->keys = calloc((size_t)o->keys, sizeof(fm_key));
  assert_non_null(w->keys);
  if (o->target >= 0) {
    steer(&w->steered, c, &o->target, 1, 1);
    w->config = &w->steered.config;
  }
  for (int i = 0; i < o->writers; ++i) {
    fm_writer *wr = &w->writers[i];
    wr->w = w;
    wr->id = i;
    wr->s = connect_app(c, o->daemons[i % o->ndaemons], 8u << 20);
    assert_int_equal(pthread_create(&wr->thread, NULL, writer_main, wr), 0);
  }
  return w;
}

int64_t fm_ops(const fm_workload *w) {
  int64_t n = 0;
  for (int i = 0; i < w->o.writers; ++i) n += __atomic_load_n(&w->writers[i].ops, __ATOMIC_ACQUIRE);
  return n;
}

int64_t fm_acked_ops(const fm_workload *w) {
  int64_t n = 0;
  for (int i = 0; i < w->o.writers; ++i) {
    n += __atomic_load_n(&w->writers[i].acked, __ATOMIC_ACQUIRE);
  }
  return n;
}

void fm_await_ops(const fm_workload *w, int64_t n, double timeout_s) {
  int64_t goal = fm_acked_ops(w) + n;
  for (double until = now_seconds() + timeout_s; fm_acked_ops(w) < goal;) {
    if (now_seconds() > until) {
      fail_msg("the workload acknowledged %lld of %lld more operations in %.0f s",
               (long long)(fm_acked_ops(w) - goal + n), (long long)n, timeout_s);
    }
    usleep(5 * 1000);
  }
}

void fm_workload_signal_stop(fm_workload *w) { __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE); }

void fm_workload_stop(fm_workload *w, double timeout_s) {
  fm_workload_signal_stop(w);
  for (int i = 0; i < w->o.writers; ++i) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)timeout_s;
    if (pthread_timedjoin_np(w->writers[i].thread, NULL, &until) != 0) {
      fail_msg("writer %d did not end within %.0f s (an operation hung)", i, timeout_s);
    }
    mooncake_store_destroy(w->writers[i].s);
    w->writers[i].s = NULL;
  }
}

void fm_workload_free(fm_workload *w) {
  if (w == NULL) return;
  free(w->keys);
  free(w);
}

static void count_code(fm_verdict *v, int64_t code) {
  for (int i = 0; i < 8; ++i) {
    if (fm_codes[i] == code) {
      ++v->codes[i];
      return;
    }
  }
  ++v->other_code;
  v->other_code_value = (int)code;
}

/* An acknowledgement undone: inside the window or not. */
static void undone(fm_verdict *v, const fm_key *k, fm_window window) {
  if (k->acked_at < window.from || k->acked_at > window.to) ++v->undone_outside;
  double age = window.fault - k->acked_at;
  if (age > v->oldest_undone_s) v->oldest_undone_s = age;
}

/* The class of key i's read (got bytes of buf, or a code); 1 when the key should be put
 * again (nothing of it can be read). */
static int classify(fm_verdict *v, int i, const fm_key *k, const unsigned char *buf, int64_t got,
                    fm_window window) {
  if (got == MOONCAKE_STORE_OBJECT_NOT_FOUND) {
    if (k->acked != 0 && !k->acked_remove && k->unsure_remove <= k->acked) {
      ++v->lost;
      undone(v, k, window);
      return 1;
    }
    ++v->absent;
    return 0;
  }
  if (got < 0) return 1; /* counted by the caller */
  uint32_t version = 0;
  int what = decode(buf, got, i, &version);
  if (what == IS_VALUE && version > k->next) what = IS_GARBAGE;
  if (what != IS_VALUE) {
    ++v->wrong;
    if (what == IS_OTHER_KEY) ++v->wrong_other; else ++v->wrong_garbage;
    if (v->wrong <= 5) {
      uint32_t head[4] = {0, 0, 0, 0};
      if (got >= HEADER) memcpy(head, buf, HEADER);
      print_message("WRONG k%d (last acked op %u%s): %lld bytes, header key %u version %u\n", i,
                    k->acked, k->acked_remove ? " remove" : "", (long long)got, head[1], head[2]);
    }
    return 0;
  }
  if (version == k->acked && !k->acked_remove) {
    ++v->ok;
  } else if (version > k->acked) {
    ++v->inflight;
  } else {
    int *count = k->acked_remove ? &v->resurrected : &v->old;
    if (++*count <= 3) {
      print_message("%s k%d: read version %u, acknowledged last: %s %u, %.0f ms before the "
                    "fault\n", k->acked_remove ? "RESURRECTED" : "OLD", i, version,
                    k->acked_remove ? "remove" : "put", k->acked,
                    (window.fault - k->acked_at) * 1000);
    }
    undone(v, k, window);
  }
  return 0;
}

fm_verdict fm_check(const mc_cluster *c, int daemon, const fm_workload *w, fm_window window,
                    double retry_s) {
  fm_verdict v;
  memset(&v, 0, sizeof(v));
  v.ops = fm_ops(w);
  v.acked_ops = fm_acked_ops(w);
  mooncake_store_t s = connect_app(c, daemon, 8u << 20);
  unsigned char *buf = malloc(FM_MAX_VALUE);
  unsigned char *value = malloc(FM_MAX_VALUE);
  char *again = calloc((size_t)w->o.keys, 1);
  int64_t *first = calloc((size_t)w->o.keys, sizeof(int64_t)); /* a failed first read's code */
  assert_true(buf != NULL && value != NULL && again != NULL && first != NULL);
  char name[32];
  int failing = 0;
  for (int i = 0; i < w->o.keys; ++i) {
    const fm_key *k = &w->keys[i];
    if (k->next == 0) continue;
    ++v.keys;
    if (k->acked != 0 && !k->acked_remove) ++v.expected;
    key_name(name, sizeof(name), i);
    int64_t got = mooncake_store_get_into(s, name, buf, FM_MAX_VALUE);
    if (got < 0 && got != MOONCAKE_STORE_OBJECT_NOT_FOUND) {
      count_code(&v, got);
      first[i] = got;
      ++failing;
    } else {
      again[i] = (char)classify(&v, i, k, buf, got, window);
    }
  }
  /* The keys that failed, read again in rounds for retry_s (a daemon may still be
   * re-attaching); what still fails then is unreadable, and -800 twice is stuck. */
  double until = now_seconds() + retry_s;
  for (int round = 0; failing > 0; ++round) {
    int last = now_seconds() >= until;
    if (round > 0 && !last) usleep(100 * 1000);
    for (int i = 0; i < w->o.keys; ++i) {
      if (first[i] == 0) continue;
      const fm_key *k = &w->keys[i];
      key_name(name, sizeof(name), i);
      int64_t got = mooncake_store_get_into(s, name, buf, FM_MAX_VALUE);
      if (got >= 0 || got == MOONCAKE_STORE_OBJECT_NOT_FOUND) {
        again[i] = (char)classify(&v, i, k, buf, got, window);
      } else if (last) {
        if (first[i] == MOONCAKE_STORE_TRANSFER_FAIL && got == MOONCAKE_STORE_TRANSFER_FAIL) {
          ++v.stuck;
        }
        if (k->acked != 0 && !k->acked_remove) {
          ++v.unreadable;
          undone(&v, k, window);
        }
        again[i] = 1;
      } else {
        continue;
      }
      first[i] = 0;
      --failing;
    }
  }
  /* Keys that cannot be read take a new put, and must then read it. */
  for (int i = 0; i < w->o.keys; ++i) {
    if (!again[i]) continue;
    ++v.reput;
    uint32_t version = w->keys[i].next + 1;
    key_name(name, sizeof(name), i);
    fill_value(value, i, version);
    int rc = mooncake_store_put(s, name, value, value_size(i, version), w->config);
    if (rc != 0) {
      ++v.reput_failed;
      continue;
    }
    int64_t got = mooncake_store_get_into(s, name, buf, FM_MAX_VALUE);
    uint32_t read = 0;
    if (got < 0 || decode(buf, got, i, &read) != IS_VALUE || read != version) ++v.reput_bad;
  }
  free(first);
  free(again);
  free(value);
  free(buf);
  mooncake_store_destroy(s);
  return v;
}

/* ---- the table -------------------------------------------------------------------------- */

#define MAX_ROWS 256
typedef struct row {
  char cell[48];
  int run;
  fm_verdict v;
  char bound[96];
} row;
static row rows[MAX_ROWS];
static int nrows;

static void codes_text(const fm_verdict *v, char *out, size_t n) {
  size_t at = 0;
  out[0] = '\0';
  for (int i = 0; i < 8 && at < n; ++i) {
    if (v->codes[i] == 0) continue;
    at += (size_t)snprintf(out + at, n - at, "%s%d:%d", at ? "," : "", fm_codes[i], v->codes[i]);
  }
  if (v->other_code && at < n) {
    at += (size_t)snprintf(out + at, n - at, "%s%d:%d", at ? "," : "", v->other_code_value,
                           v->other_code);
  }
  if (at == 0) snprintf(out, n, "-");
}

/* The figures of a row, named as the summary line and the CSV header name them. */
typedef struct field {
  const char *name;
  long long value;
} field;

static int row_fields(const fm_verdict *v, field *out) {
  const field all[] = {
      {"keys", v->keys},         {"ops", v->ops},
      {"acked", v->acked_ops},   {"expected", v->expected},
      {"ok", v->ok},             {"inflight", v->inflight},
      {"absent", v->absent},     {"lost", v->lost},
      {"old", v->old},           {"resurrected", v->resurrected},
      {"unreadable", v->unreadable}, {"wrong", v->wrong},
      {"wrong_other_key", v->wrong_other}, {"wrong_garbage", v->wrong_garbage},
      {"undone_outside", v->undone_outside},
      {"oldest_undone_ms", (long long)(v->oldest_undone_s * 1000)},
      {"stuck", v->stuck},       {"reput", v->reput},
      {"reput_bad", v->reput_bad}, {"reput_failed", v->reput_failed},
      {"ms", (long long)(v->seconds * 1000)},
  };
  int n = (int)(sizeof(all) / sizeof(all[0]));
  memcpy(out, all, sizeof(all));
  return n;
}

void fm_report(const char *cell, int run, const fm_verdict *v, const char *bound) {
  char codes[160];
  codes_text(v, codes, sizeof(codes));
  field f[32];
  int n = row_fields(v, f);
  printf("cell=%s run=%d", cell, run);
  for (int i = 0; i < n; ++i) printf(" %s=%lld", f[i].name, f[i].value);
  printf(" codes=%s bound=\"%s\"\n", codes, bound);
  fflush(stdout);
  if (nrows < MAX_ROWS) {
    row *r = &rows[nrows++];
    snprintf(r->cell, sizeof(r->cell), "%s", cell);
    r->run = run;
    r->v = *v;
    snprintf(r->bound, sizeof(r->bound), "%s", bound);
  }
  const char *csv = getenv("FAULT_MATRIX_CSV");
  if (csv == NULL || csv[0] == '\0') return;
  int fresh = access(csv, F_OK) != 0;
  FILE *out = fopen(csv, "a");
  if (out == NULL) {
    print_message("cannot append to %s\n", csv);
    return;
  }
  if (fresh) {
    fprintf(out, "cell,run");
    for (int i = 0; i < n; ++i) fprintf(out, ",%s", f[i].name);
    fprintf(out, ",codes,bound\n");
  }
  fprintf(out, "%s,%d", cell, run);
  for (int i = 0; i < n; ++i) fprintf(out, ",%lld", f[i].value);
  fprintf(out, ",\"%s\",\"%s\"\n", codes, bound);
  fclose(out);
}

void fm_print_table(void) {
  if (nrows == 0) return;
  printf("\n| cell | run | acked ops | expected | ok | in flight | lost | old | resurrected | "
         "unreadable | **wrong** | stuck | codes | re-put bad | bound |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < nrows; ++i) {
    const row *r = &rows[i];
    char codes[160];
    codes_text(&r->v, codes, sizeof(codes));
    printf("| %s | %d | %lld | %d | %d | %d | %d | %d | %d | %d | **%d** | %d | %s | %d | %s |\n",
           r->cell, r->run, (long long)r->v.acked_ops, r->v.expected, r->v.ok, r->v.inflight,
           r->v.lost, r->v.old, r->v.resurrected, r->v.unreadable, r->v.wrong, r->v.stuck, codes, r->v.reput_bad,
           r->bound);
  }
  fflush(stdout);
}

int fm_env_int(const char *name, int fallback) {
  const char *text = getenv(name);
  return text != NULL && text[0] != '\0' ? atoi(text) : fallback;
}
