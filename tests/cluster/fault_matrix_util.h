/* The fault matrix's workload and checker (tests/cluster/fault_matrix_test.c; docs/durability.md,
 * "The fault matrix"). Writer threads put, upsert and remove keys k<i> through the C ABI;
 * every value's bytes are a function of (key, version): a 16-byte header (magic, key
 * index, version, size) and a fill seeded by both, and its size (1 to 16 KiB) depends on
 * both too. So a read tells "key i's version v" from "another key's bytes" and from
 * "garbage". Per key the writer that owns it (key i belongs to writer i % writers, so no
 * two writers race on a key) keeps the last acknowledged operation (a put of some version,
 * or a remove), when it was acknowledged, and the operations since whose outcome it does
 * not know (they failed, or were cut short: they may or may not have happened).
 *
 * After the fault and the recovery, the checker reads every key ever written and classes
 * it (fm_verdict). Only `wrong` -- bytes that are not this key's, served with code 0 -- is
 * a failure in every cell; how many keys may be lost, old or resurrected depends on what
 * the cell did, and the cell says so with an fm_window: the acknowledgements that may be
 * undone are those made within [from, to] (seconds of now_seconds()).
 *
 * Threads: the writers never assert (CMocka's assertions belong to the test's thread);
 * they count, and the test thread reads what they recorded once they are joined. */
#ifndef MOONCAKE_TESTS_FAULT_MATRIX_UTIL_H_
#define MOONCAKE_TESTS_FAULT_MATRIX_UTIL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"

#define FM_MAX_VALUE ((size_t)16 * 1024)
#define FM_MAX_WRITERS 8

/* What a writer knows of one key. Versions are the key's operation numbers (1, 2, ...):
 * a put of version v writes value(i, v); a remove also takes a number. */
typedef struct fm_key {
  uint32_t next;          /* the number the next operation takes (0: never touched) */
  uint32_t acked;         /* the last acknowledged operation's number (0: none) */
  uint8_t acked_remove;   /* ... and whether it was a remove */
  uint32_t acked_put;     /* the last acknowledged put's version (0: none) */
  uint32_t unsure_put;    /* the last put after `acked` whose outcome is unknown (0: none) */
  uint32_t unsure_remove; /* the same for a remove */
  double acked_at;        /* when `acked` was acknowledged */
} fm_key;

typedef struct fm_workload fm_workload;

typedef struct fm_options {
  int keys;     /* k0 .. k<keys-1> */
  int writers;  /* threads (<= FM_MAX_WRITERS) */
  /* The daemons the writers' handles are on: writer w on daemons[w % ndaemons]. */
  int daemons[4];
  int ndaemons;
  /* Every put and upsert steered to this daemon (preferred_segments); -1: the master
   * places. */
  int target;
  int remove_percent; /* of the operations (~10) */
} fm_options;

/* Connects the writers' handles (asserted) and starts them; they run until
 * fm_workload_stop. */
fm_workload *fm_workload_start(const mc_cluster *c, const fm_options *o);
/* Operations finished so far (acknowledged or not), over every writer. */
int64_t fm_ops(const fm_workload *w);
int64_t fm_acked_ops(const fm_workload *w);
/* Waits until n more operations have been acknowledged than when it was called, for
 * timeout_s at most: fails the test when they have not. */
void fm_await_ops(const fm_workload *w, int64_t n, double timeout_s);
/* Tells the writers to stop, without waiting. */
void fm_workload_signal_stop(fm_workload *w);
/* Stops the writers and joins them: fails the test when one has not ended within
 * timeout_s (a put that hung). Their handles are closed. */
void fm_workload_stop(fm_workload *w, double timeout_s);
void fm_workload_free(fm_workload *w);

/* The acknowledgements a cell's fault may undo: those made within [from, to]; a loss of
 * anything acknowledged outside it breaks the mode's promise. fault: when the fault struck
 * (ages of undone acknowledgements are counted back from it). */
typedef struct fm_window {
  double from, to;
  double fault;
} fm_window;

typedef struct fm_verdict {
  int keys;        /* keys ever written */
  int64_t ops, acked_ops;
  int expected;    /* keys whose last acknowledged operation is a put */
  int ok;          /* read the last acknowledged version */
  int inflight;    /* read a version whose put's outcome was unknown */
  int absent;      /* -704, and rightly so (removed, or never acknowledged) */
  int lost;        /* -704 although a put was acknowledged last */
  int old;         /* an older acknowledged version: an update lost */
  int resurrected; /* readable although its remove was acknowledged */
  int wrong;       /* code 0 with bytes not this key's: the hard failure */
  int wrong_other; /*   of which another key's value */
  int wrong_garbage; /*  of which no value at all (or a version never written) */
  int unreadable;  /* a put acknowledged last, and every read failed (not -704) */
  int undone_outside; /* lost + old + resurrected + unreadable acknowledged outside the window */
  double oldest_undone_s; /* the earliest undone acknowledgement, seconds before the fault */
  int stuck;       /* -800 on the first read and again after retrying for a while */
  int codes[8];    /* counts of the codes below, first read */
  int other_code;  /* the count of any other code; its last value in other_code_value */
  int other_code_value;
  int reput;       /* keys read as lost, stuck or failed and then put again */
  int reput_bad;   /* of which the put answered 0 but the new version does not read */
  int reput_failed; /* of which the put did not answer 0 */
  double seconds;  /* the cell's run, set by the cell before fm_report */
} fm_verdict;

/* The codes fm_verdict.codes counts, in its order. */
extern const int fm_codes[8];

/* Reads every key the workload (stopped) wrote through a handle on daemon `daemon` and
 * classes it. The keys that answer an error are read again for up to retry_s; -800 then
 * still is `stuck`. Then every key read as lost, stuck or failed is put again (a new version, plain
 * put) and read back: a store must take the put of a key it cannot serve. */
fm_verdict fm_check(const mc_cluster *c, int daemon, const fm_workload *w, fm_window window,
                    double retry_s);

/* One line: "cell=<cell> run=<run> acked=... lost=... wrong=... resurrected=... codes=..."
 * to stdout, and when $FAULT_MATRIX_CSV names a file, one CSV row appended to it (the
 * header first when the file is new), and the row kept for fm_print_table. */
void fm_report(const char *cell, int run, const fm_verdict *v, const char *bound);
/* The rows fm_report kept, as a markdown table on stdout. */
void fm_print_table(void);

/* $name as an integer, or fallback when unset. */
int fm_env_int(const char *name, int fallback);

#endif /* MOONCAKE_TESTS_FAULT_MATRIX_UTIL_H_ */
