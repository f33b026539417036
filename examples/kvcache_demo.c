/* kvcache_demo: what an inference engine does with the store, through the C ABI.
 *
 * "Engine A" prefills a prompt: it computes the KV cache of each block of 16 tokens and
 * puts it under a key that hashes the block's tokens chained to its prefix (the way vLLM
 * and LMCache name blocks). "Engine B" then receives a prompt sharing the first 3/4 of
 * those tokens: it asks which of its block keys exist, loads the longest cached prefix
 * into pool memory instead of recomputing it, and computes only the rest.
 *
 * With MOONCAKE_SOCKET_2 set, engine B runs on another "host": it talks to a second
 * mooncaked, and the blocks engine A wrote into its own host's memory reach it through the
 * daemons' transfer engine.
 *
 * Usage: MOONCAKE_SOCKET=/path/to/mooncaked.sock [MOONCAKE_SOCKET_2=...] kvcache_demo */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mooncake_store.h"

#define BLOCKS 64
#define TOKENS_PER_BLOCK 16
#define BLOCK_BYTES (256 * 1024) /* KV of 16 tokens for a small model, all layers */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* FNV-1a over the parent key's hash and the block's tokens: equal prefixes, equal keys. */
static uint64_t chain_hash(uint64_t parent, const int *tokens) {
  uint64_t h = parent ^ 1469598103934665603ull;
  for (int i = 0; i < TOKENS_PER_BLOCK; ++i) {
    h ^= (uint64_t)tokens[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* Stand-in for attention: deterministic bytes from the block hash. */
static void compute_kv(uint64_t h, unsigned char *out) {
  for (size_t i = 0; i < BLOCK_BYTES; i += 8) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    memcpy(out + i, &h, 8);
  }
}

static void block_keys(const int *tokens, char keys[BLOCKS][40], uint64_t hashes[BLOCKS]) {
  uint64_t h = 0;
  for (int b = 0; b < BLOCKS; ++b) {
    h = chain_hash(h, tokens + b * TOKENS_PER_BLOCK);
    hashes[b] = h;
    snprintf(keys[b], 40, "demo-model/kv/%016" PRIx64, h);
  }
}

static int check(int rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "%s failed: %d (%s)\n", what, rc, mooncake_store_strerror(rc));
    exit(1);
  }
  return rc;
}

int main(void) {
  int prompt_a[BLOCKS * TOKENS_PER_BLOCK], prompt_b[BLOCKS * TOKENS_PER_BLOCK];
  for (int i = 0; i < BLOCKS * TOKENS_PER_BLOCK; ++i) {
    prompt_a[i] = (i * 7919) % 32000;
    /* B shares A's first 48 blocks (a common system prompt and history), then diverges. */
    prompt_b[i] = i < 48 * TOKENS_PER_BLOCK ? prompt_a[i] : (i * 104729) % 32000;
  }

  mooncake_store_t engine_a = mooncake_store_create();
  mooncake_store_t engine_b = mooncake_store_create();
  check(mooncake_store_connect(engine_a, NULL, 64u << 20), "connect A");
  check(mooncake_store_connect(engine_b, getenv("MOONCAKE_SOCKET_2"), 64u << 20), "connect B");
  char host_a[64], host_b[64];
  check(mooncake_store_get_hostname(engine_a, host_a, sizeof(host_a)), "get_hostname A");
  check(mooncake_store_get_hostname(engine_b, host_b, sizeof(host_b)), "get_hostname B");
  printf("engine A on mooncaked %s, engine B on mooncaked %s\n", host_a, host_b);
  /* A keeps its blocks in its own host's memory, as an engine writing its KV would. */
  const char *here[] = {host_a};
  mooncake_replicate_config_t local = {1, 0, 0, here, 1};

  /* Engine A: prefill and publish every block, zero-copy from pool memory. */
  char keys[BLOCKS][40];
  uint64_t hashes[BLOCKS];
  block_keys(prompt_a, keys, hashes);
  unsigned char *kv = mooncake_store_alloc(engine_a, BLOCK_BYTES);
  double t0 = now_ms();
  for (int b = 0; b < BLOCKS; ++b) {
    compute_kv(hashes[b], kv);
    check(mooncake_store_put_from(engine_a, keys[b], kv, BLOCK_BYTES, &local), "put_from");
  }
  printf("engine A: prefilled %d blocks and stored %d MiB in %.1f ms\n", BLOCKS,
         BLOCKS * BLOCK_BYTES >> 20, now_ms() - t0);

  /* Engine B: find the longest cached prefix of its own prompt. */
  block_keys(prompt_b, keys, hashes);
  const char *key_ptrs[BLOCKS];
  int exists[BLOCKS];
  for (int b = 0; b < BLOCKS; ++b) key_ptrs[b] = keys[b];
  check(mooncake_store_batch_is_exist(engine_b, key_ptrs, BLOCKS, exists), "batch_is_exist");
  int hits = 0;
  while (hits < BLOCKS && exists[hits] == 1) ++hits;

  /* Load the hits in one batch, straight into pool memory. */
  unsigned char *dst = mooncake_store_alloc(engine_b, (size_t)hits * BLOCK_BYTES);
  void *bufs[BLOCKS];
  size_t sizes[BLOCKS];
  int64_t got[BLOCKS];
  for (int b = 0; b < hits; ++b) {
    bufs[b] = dst + (size_t)b * BLOCK_BYTES;
    sizes[b] = BLOCK_BYTES;
  }
  t0 = now_ms();
  check(mooncake_store_batch_get_into(engine_b, key_ptrs, bufs, sizes, (size_t)hits, got),
        "batch_get_into");
  double load_ms = now_ms() - t0;
  unsigned char *expect = malloc(BLOCK_BYTES);
  for (int b = 0; b < hits; ++b) {
    compute_kv(hashes[b], expect);
    if (got[b] != BLOCK_BYTES || memcmp(bufs[b], expect, BLOCK_BYTES) != 0) {
      fprintf(stderr, "block %d: wrong bytes (%" PRId64 ")\n", b, got[b]);
      return 1;
    }
  }
  printf("engine B: %d of %d blocks found in the store; loaded %d MiB%s in %.1f ms (%.2f GB/s), "
         "bytes verified\n",
         hits, BLOCKS, hits * BLOCK_BYTES >> 20,
         strcmp(host_a, host_b) != 0 ? " from engine A's host" : "", load_ms,
         (double)hits * BLOCK_BYTES / (load_ms / 1e3) / 1e9);
  printf("engine B: recomputes only the last %d blocks (%d tokens) of its prompt\n",
         BLOCKS - hits, (BLOCKS - hits) * TOKENS_PER_BLOCK);

  mooncake_store_free(engine_a, kv);
  mooncake_store_free(engine_b, dst);
  free(expect);
  mooncake_store_destroy(engine_a);
  mooncake_store_destroy(engine_b);
  return hits == 48 ? 0 : 1;
}
