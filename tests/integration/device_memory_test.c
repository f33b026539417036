/* Device memory through the C ABI (docs/libmc.md, "Device memory"), against a real master
 * and daemon. The CUDA driver is the library MOONCAKE_CUDA_DRIVER names (default
 * libcuda.so.1), which this test loads too, to make and read device memory:
 *
 *  - a driver (CTest: tests/integration/fake_cuda_driver.c, whose device memory is PROT_NONE to this
 *    process, so that a single dereference by the library kills the test with SIGSEGV; on a
 *    GPU machine, MOONCAKE_CUDA_DRIVER=libcuda.so.1 runs the same cases on real device
 *    memory, without the fake's call counts): puts, upserts, gets, batches mixing device,
 *    host and pool memory, values larger than the pool, ranged reads, registered device
 *    memory, copy_memory and memory_kind, pinned host memory, memory without a context,
 *    failed driver copies;
 *  - none (MOONCAKE_CUDA_DRIVER names no loadable library): memory that is not host memory
 *    (PROT_NONE) is refused with -600 and the message the header documents, read-only
 *    memory as a get's destination too; nothing crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (1u << 20) /* small: a 5 MiB value goes through it in chunks */
#define BIG (5u << 20)

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct fake_cuda_stats {
  uint64_t pointer_queries, to_host_copies, to_host_bytes, to_device_copies, to_device_bytes,
      on_device_copies, refused_copies, streams_created, primary_retains;
} fake_cuda_stats;

/* The driver's entry points the test uses (the real driver has them all), and the fake's. */
static struct {
  void *lib;
  CUresult (*init)(unsigned);
  CUresult (*device_get)(int *, int);
  CUresult (*primary_retain)(void **, int);
  CUresult (*set_current)(void *);
  CUresult (*alloc)(CUdeviceptr *, size_t);
  CUresult (*free_)(CUdeviceptr);
  CUresult (*host_alloc)(void **, size_t, unsigned);
  CUresult (*free_host)(void *);
  CUresult (*to_device)(CUdeviceptr, const void *, size_t);
  CUresult (*to_host)(void *, CUdeviceptr, size_t);
  /* NULL on the real driver */
  void (*stats)(fake_cuda_stats *);
  void (*fail_copies)(int);
  void *(*alloc_contextless)(size_t);
} cu;

static mc_cluster *g_cluster;

static int load_driver(void) {
  const char *path = getenv("MOONCAKE_CUDA_DRIVER");
  if (path == NULL || path[0] == '\0') path = "libcuda.so.1";
  cu.lib = strcmp(path, "none") == 0 ? NULL : dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (cu.lib == NULL) return 0;
#define SYM(field, name) *(void **)&cu.field = dlsym(cu.lib, name)
  SYM(init, "cuInit");
  SYM(device_get, "cuDeviceGet");
  SYM(primary_retain, "cuDevicePrimaryCtxRetain");
  SYM(set_current, "cuCtxSetCurrent");
  SYM(alloc, "cuMemAlloc_v2");
  SYM(free_, "cuMemFree_v2");
  SYM(host_alloc, "cuMemHostAlloc");
  SYM(free_host, "cuMemFreeHost");
  SYM(to_device, "cuMemcpyHtoD_v2");
  SYM(to_host, "cuMemcpyDtoH_v2");
  SYM(stats, "fake_cuda_stats_get");
  SYM(fail_copies, "fake_cuda_fail_copies");
  SYM(alloc_contextless, "fake_cuda_alloc_contextless");
#undef SYM
  return 1;
}

static fake_cuda_stats stats(void) {
  fake_cuda_stats s = {0};
  if (cu.stats != NULL) cu.stats(&s);
  return s;
}

/* n bytes of device memory holding fill_pattern(seed). */
static char *device_with(size_t n, uint64_t seed) {
  CUdeviceptr p = 0;
  assert_int_equal(cu.alloc(&p, n), 0);
  char *host = malloc(n);
  fill_pattern(host, n, seed);
  assert_int_equal(cu.to_device(p, host, n), 0);
  free(host);
  return (char *)(uintptr_t)p;
}

/* Whether n bytes of device memory at p hold fill_pattern(seed). */
static void assert_device_holds(const char *p, size_t n, uint64_t seed) {
  char *host = malloc(n);
  assert_int_equal(cu.to_host(host, (CUdeviceptr)(uintptr_t)p, n), 0);
  assert_int_equal(check_pattern(host, n, seed), -1);
  free(host);
}

static void device_free(char *p) { cu.free_((CUdeviceptr)(uintptr_t)p); }

static void assert_errmsg_has(mooncake_store_t s, const char *needle) {
  const char *msg = mooncake_store_errmsg(s);
  if (strstr(msg, needle) == NULL) fail_msg("errmsg \"%s\" lacks \"%s\"", msg, needle);
}

/* Memory of this process that is not host memory it may touch. */
static char *not_host_memory(size_t n) {
  char *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  return p;
}

static int setup(void **state) { return store_fixture_setup(state, g_cluster, 0, POOL_SIZE); }

static mooncake_store_t store_of(void **state) { return ((store_fixture *)*state)->store; }

/* ---- with a driver -------------------------------------------------------------------- */

/* Before anyone in the process initialized CUDA: host memory works, and memory that is not
 * host memory cannot be device memory either. Runs first. */
static void test_driver_not_initialized(void **state) {
  mooncake_store_t s = store_of(state);
  char *host = malloc(4096), *none = not_host_memory(4096);
  fill_pattern(host, 4096, 1);
  assert_int_equal(mooncake_store_put_from(s, "dev-uninit", host, 4096, NULL), 0);
  assert_int_equal(mooncake_store_put_from(s, "dev-uninit-none", none, 4096, NULL), -600);
  assert_errmsg_has(s, "is not host memory, and the CUDA driver");
  assert_errmsg_has(s, "is not initialized in this process");
  munmap(none, 4096);
  free(host);
  /* Now the application initializes CUDA, as a CUDA program has before it allocates. */
  int device = 0;
  void *context = NULL;
  assert_int_equal(cu.init(0), 0);
  assert_int_equal(cu.device_get(&device, 0), 0);
  assert_int_equal(cu.primary_retain(&context, device), 0);
  assert_int_equal(cu.set_current(context), 0);
}

static void test_put_and_get_device_memory(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 64 << 10;
  char *src = device_with(n, 2), *dst = device_with(n, 99), *host = calloc(1, n);
  fake_cuda_stats before = stats();
  assert_int_equal(mooncake_store_put_from(s, "dev-small", src, n, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "dev-small", host, n), (int64_t)n);
  assert_int_equal(check_pattern(host, n, 2), -1);
  assert_int_equal(mooncake_store_get_into(s, "dev-small", dst, n), (int64_t)n);
  assert_device_holds(dst, n, 2);
  /* upsert_from device memory replaces the value */
  char *other = device_with(n, 3);
  assert_int_equal(mooncake_store_upsert_from(s, "dev-small", other, n, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "dev-small", dst, n), (int64_t)n);
  assert_device_holds(dst, n, 3);
  if (cu.stats != NULL) {
    fake_cuda_stats after = stats();
    assert_int_equal(after.to_host_copies - before.to_host_copies, 2);  /* put, upsert */
    assert_int_equal(after.to_host_bytes - before.to_host_bytes, 2 * n);
    assert_int_equal(after.to_device_copies - before.to_device_copies, 2);  /* two gets */
    assert_int_equal(after.refused_copies, before.refused_copies);
  }
  device_free(src);
  device_free(dst);
  device_free(other);
  free(host);
}

/* Larger than the pool: device bytes go through staging chunks, both ways. */
static void test_value_larger_than_the_pool(void **state) {
  mooncake_store_t s = store_of(state);
  char *src = device_with(BIG, 4), *dst = device_with(BIG, 98);
  fake_cuda_stats before = stats();
  assert_int_equal(mooncake_store_put_from(s, "dev-big", src, BIG, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "dev-big", dst, BIG), (int64_t)BIG);
  assert_device_holds(dst, BIG, 4);
  if (cu.stats != NULL) {
    fake_cuda_stats after = stats();
    assert_true(after.to_host_copies - before.to_host_copies >= BIG / POOL_SIZE);
    assert_int_equal(after.to_host_bytes - before.to_host_bytes, BIG);
    assert_int_equal(after.to_device_bytes - before.to_device_bytes, BIG);
  }
  device_free(src);
  device_free(dst);
}

/* One batch of device, host and pool buffers, put and read back into the other kinds. */
static void test_batches_mix_memory(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 8192;
  const char *keys[4] = {"dev-mix-0", "dev-mix-1", "dev-mix-2", "dev-mix-3"};
  char *host = malloc(n), *pool = mooncake_store_alloc(s, n);
  assert_non_null(pool);
  fill_pattern(host, n, 11);
  fill_pattern(pool, n, 12);
  char *dev0 = device_with(n, 10), *dev3 = device_with(n, 13);
  void *put[4] = {dev0, host, pool, dev3};
  size_t sizes[4] = {n, n, n, n};
  int put_results[4] = {1, 1, 1, 1};
  assert_int_equal(mooncake_store_batch_put_from(s, keys, put, sizes, 4, NULL, put_results), 0);
  for (int i = 0; i < 4; ++i) assert_int_equal(put_results[i], 0);
  /* Read back rotated: device 0 into host, host into device, pool into device, 3 into pool. */
  char *back_host = calloc(1, n), *back_dev1 = device_with(n, 90), *back_dev2 = device_with(n, 91);
  memset(pool, 0, n);
  void *get[4] = {back_host, back_dev1, back_dev2, pool};
  int64_t got[4];
  assert_int_equal(mooncake_store_batch_get_into(s, keys, get, sizes, 4, got), 0);
  for (int i = 0; i < 4; ++i) assert_int_equal(got[i], (int64_t)n);
  assert_int_equal(check_pattern(back_host, n, 10), -1);
  assert_device_holds(back_dev1, n, 11);
  assert_device_holds(back_dev2, n, 12);
  assert_int_equal(check_pattern(pool, n, 13), -1);
  mooncake_store_free(s, pool);
  free(host);
  free(back_host);
  device_free(dev0);
  device_free(dev3);
  device_free(back_dev1);
  device_free(back_dev2);
}

/* Registered device memory (vLLM registers its KV cache): located once, at registration. */
static void test_registered_device_memory(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t region = 1 << 20, n = 16384;
  char *kv = device_with(region, 20);
  assert_int_equal(mooncake_store_register_buffer(s, kv, region), 0);
  fake_cuda_stats before = stats();
  assert_int_equal(mooncake_store_memory_kind(s, kv + 100), MOONCAKE_MEMORY_CUDA);
  assert_int_equal(mooncake_store_put_from(s, "dev-reg", kv + 4096, n, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "dev-reg", kv + 65536, n), (int64_t)n);
  if (cu.stats != NULL) {  /* the driver was not asked again */
    assert_int_equal(stats().pointer_queries, before.pointer_queries);
  }
  char *host = malloc(n), *expect = malloc(region);
  fill_pattern(expect, region, 20);
  assert_int_equal(cu.to_host(host, (CUdeviceptr)(uintptr_t)(kv + 65536), n), 0);
  assert_memory_equal(host, expect + 4096, n);
  /* A size running past the registered range is refused, as for host memory. */
  assert_int_equal(mooncake_store_put_from(s, "dev-reg-past", kv + region - 10, 20, NULL), -600);
  assert_int_equal(mooncake_store_unregister_buffer(s, kv), 0);
  free(host);
  free(expect);
  device_free(kv);
}

static void test_ranges_into_device_memory(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 3 << 20; /* larger than the pool: the big fragment is chunked */
  char *value = malloc(n);
  fill_pattern(value, n, 30);
  assert_int_equal(mooncake_store_put(s, "dev-ranges", value, n, NULL), 0);
  char *dst = device_with(n, 31);
  const mooncake_range_t r[3] = {{0, 4096, 0}, {100, 2 << 20, 8192}, {n - 10, 10, 4096}};
  int64_t res[3];
  assert_int_equal(mooncake_store_get_ranges(s, "dev-ranges", dst, n, r, 3, res),
                   4096 + (2 << 20) + 10);
  char *host = malloc(n);
  assert_int_equal(cu.to_host(host, (CUdeviceptr)(uintptr_t)dst, n), 0);
  for (int i = 0; i < 3; ++i) {
    assert_memory_equal(host + r[i].dst_offset, value + r[i].src_offset, r[i].length);
  }
  free(host);
  free(value);
  device_free(dst);
}

static void test_copy_memory_and_kind(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 100000;
  char *host = malloc(n), *back = calloc(1, n), *pool = mooncake_store_alloc(s, 64);
  char *a = device_with(n, 40), *b = device_with(n, 41);
  assert_int_equal(mooncake_store_memory_kind(s, host), MOONCAKE_MEMORY_HOST);
  assert_int_equal(mooncake_store_memory_kind(s, pool), MOONCAKE_MEMORY_HOST);
  assert_int_equal(mooncake_store_memory_kind(s, a), MOONCAKE_MEMORY_CUDA);
  fill_pattern(host, n, 42);
  assert_int_equal(mooncake_store_copy_memory(s, a, host, n), 0);  /* host to device */
  assert_int_equal(mooncake_store_copy_memory(s, b, a, n), 0);     /* device to device */
  assert_int_equal(mooncake_store_copy_memory(s, back, b, n), 0);  /* device to host */
  assert_int_equal(check_pattern(back, n, 42), -1);
  assert_int_equal(mooncake_store_copy_memory(s, back, b, 0), 0);
  assert_int_equal(mooncake_store_copy_memory(s, NULL, b, n), -1);
  mooncake_store_free(s, pool);
  free(host);
  free(back);
  device_free(a);
  device_free(b);
}

/* Pinned host memory (cuMemHostAlloc) is host memory: no driver copies. */
static void test_pinned_host_memory(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 8192;
  void *pinned = NULL;
  assert_int_equal(cu.host_alloc(&pinned, n, 0), 0);
  fill_pattern(pinned, n, 50);
  assert_int_equal(mooncake_store_memory_kind(s, pinned), MOONCAKE_MEMORY_HOST);
  fake_cuda_stats before = stats();
  char *plain = malloc(n);
  fill_pattern(plain, n, 51);
  assert_int_equal(mooncake_store_put_from(s, "dev-pinned", pinned, n, NULL), 0);
  assert_int_equal(mooncake_store_put_from(s, "dev-plain", plain, n, NULL), 0);
  memset(pinned, 0, n);
  assert_int_equal(mooncake_store_get_into(s, "dev-plain", pinned, n), (int64_t)n);
  assert_int_equal(check_pattern(pinned, n, 51), -1);
  fake_cuda_stats after = stats();
  assert_int_equal(after.to_host_copies, before.to_host_copies);
  assert_int_equal(after.to_device_copies, before.to_device_copies);
  cu.free_host(pinned);
  free(plain);
}

/* Fake only: memory naming no context (cuMemMap's) is copied in its device's primary
 * context; a copy the driver fails is -800, and a put then stores nothing. */
static void test_contextless_memory_and_failed_copies(void **state) {
  if (cu.alloc_contextless == NULL) skip();
  mooncake_store_t s = store_of(state);
  const size_t n = 4096;
  char *p = cu.alloc_contextless(n);
  assert_non_null(p);
  char *host = malloc(n);
  fill_pattern(host, n, 60);
  assert_int_equal(cu.to_device((CUdeviceptr)(uintptr_t)p, host, n), 0);
  assert_int_equal(mooncake_store_put_from(s, "dev-ctxless", p, n, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "dev-ctxless", p, n), (int64_t)n);
  assert_device_holds(p, n, 60);
  assert_true(stats().primary_retains >= 2); /* the test's own, and the library's */

  char *dev = device_with(n, 61);
  cu.fail_copies(1);
  assert_int_equal(mooncake_store_put_from(s, "dev-failed", dev, n, NULL), -800);
  assert_errmsg_has(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_int_equal(mooncake_store_is_exist(s, "dev-failed"), 0);
  cu.fail_copies(1);
  assert_int_equal(mooncake_store_get_into(s, "dev-ctxless", dev, n), -800);
  assert_errmsg_has(s, "the CUDA driver's copy of 4096 bytes");
  /* A range past its allocation: the driver refuses the copy, nothing is read there. */
  assert_int_equal(mooncake_store_put_from(s, "dev-past", dev + n - 100, 200, NULL), -800);
  assert_errmsg_has(s, "CUDA_ERROR_INVALID_VALUE");
  free(host);
  device_free(dev);
}

/* ---- without a driver ------------------------------------------------------------------ */

static void test_not_host_memory_is_refused(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 8192;
  char *none = not_host_memory(n), *host = malloc(n);
  fill_pattern(host, n, 70);
  assert_int_equal(mooncake_store_put_from(s, "nodrv-put", none, n, NULL), -600);
  assert_errmsg_has(s, "is not host memory and no CUDA driver is loaded");
  assert_int_equal(mooncake_store_put(s, "nodrv-put", none, n, NULL), -600);
  assert_int_equal(mooncake_store_upsert_from(s, "nodrv-put", none, n, NULL), -600);
  assert_int_equal(mooncake_store_is_exist(s, "nodrv-put"), 0);
  assert_int_equal(mooncake_store_put_from(s, "nodrv-host", host, n, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "nodrv-host", none, n), -600);
  assert_errmsg_has(s, "buffer at 0x");
  assert_int_equal(mooncake_store_register_buffer(s, none, n), -600);
  assert_int_equal(mooncake_store_memory_kind(s, none), -600);
  assert_int_equal(mooncake_store_memory_kind(s, host), MOONCAKE_MEMORY_HOST);
  assert_int_equal(mooncake_store_copy_memory(s, host, none, n), -600);
  assert_int_equal(mooncake_store_copy_memory(s, none, host, n), -600);
  mooncake_range_t r[2] = {{0, 100, 0}, {100, 100, 100}};
  int64_t res[2];
  assert_int_equal(mooncake_store_get_ranges(s, "nodrv-host", none, n, r, 2, res), -600);
  assert_int_equal(res[0], -600);
  assert_int_equal(res[1], -600);
  /* A batch: the other entries go ahead; the message names the refused one. */
  const char *keys[3] = {"nodrv-b0", "nodrv-b1", "nodrv-b2"};
  void *bufs[3] = {host, none, host};
  size_t sizes[3] = {n, n, n};
  int put_results[3];
  assert_int_equal(mooncake_store_batch_put_from(s, keys, bufs, sizes, 3, NULL, put_results), 0);
  assert_int_equal(put_results[0], 0);
  assert_int_equal(put_results[1], -600);
  assert_int_equal(put_results[2], 0);
  assert_errmsg_has(s, "entry 1: buffer at");
  int64_t got[3];
  assert_int_equal(mooncake_store_batch_get_into(s, keys, bufs, sizes, 3, got), 0);
  assert_int_equal(got[0], (int64_t)n);
  assert_int_equal(got[1], -600);
  assert_int_equal(got[2], (int64_t)n);
  munmap(none, n);
  free(host);
}

/* Read-only memory: a put may read it, a get may not write it. */
static void test_read_only_memory(void **state) {
  mooncake_store_t s = store_of(state);
  const size_t n = 4096;
  char *ro = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(ro != MAP_FAILED);
  fill_pattern(ro, n, 80);
  assert_int_equal(mprotect(ro, n, PROT_READ), 0);
  assert_int_equal(mooncake_store_put_from(s, "nodrv-ro", ro, n, NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "nodrv-ro", ro, n), -600);
  assert_errmsg_has(s, "is read-only memory");
  assert_int_equal(mooncake_store_copy_memory(s, ro, ro, n), -600);
  munmap(ro, n);
}

/* memory_kind and copy_memory need no connection. */
static void test_without_a_connection(void **state) {
  (void)state;
  mooncake_store_t s = mooncake_store_create();
  char host[64] = "abc", back[64] = {0};
  assert_int_equal(mooncake_store_memory_kind(s, host), MOONCAKE_MEMORY_HOST);
  assert_int_equal(mooncake_store_copy_memory(s, back, host, sizeof(host)), 0);
  assert_string_equal(back, "abc");
  assert_int_equal(mooncake_store_memory_kind(NULL, host), -1);
  mooncake_store_destroy(s);
}

int main(void) {
  int with_driver = load_driver();
  printf("device_memory_test: %s\n",
         with_driver ? (cu.stats != NULL ? "the fake CUDA driver" : "a real CUDA driver")
                     : "no CUDA driver");
  g_cluster = mc_cluster_start(256u << 20);
  if (g_cluster == NULL) return 1;
#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, store_fixture_teardown)
  const struct CMUnitTest driver_tests[] = {
      CASE(test_driver_not_initialized), CASE(test_put_and_get_device_memory),
      CASE(test_value_larger_than_the_pool), CASE(test_batches_mix_memory),
      CASE(test_registered_device_memory), CASE(test_ranges_into_device_memory),
      CASE(test_copy_memory_and_kind), CASE(test_pinned_host_memory),
      CASE(test_contextless_memory_and_failed_copies),
  };
  const struct CMUnitTest no_driver_tests[] = {
      CASE(test_not_host_memory_is_refused), CASE(test_read_only_memory),
      cmocka_unit_test(test_without_a_connection),
  };
#undef CASE
  int failed = with_driver ? cmocka_run_group_tests(driver_tests, NULL, NULL)
                           : cmocka_run_group_tests(no_driver_tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
