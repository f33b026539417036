/* libfake_cuda.so: a stand-in for the CUDA driver (libcuda.so.1) that libmooncake_store
 * loads through MOONCAKE_CUDA_DRIVER, so that device memory can be tested on a machine
 * without a GPU (tests/integration/device_memory_test.c, bindings/python/tests/test_device_memory.py).
 *
 * "Device memory" is a region of one memfd mapped twice: the addresses handed out by
 * cuMemAlloc_v2 lie in a PROT_NONE view, so any access to them by the library (or the
 * test) dies with SIGSEGV, and only this driver's copies reach the bytes, through a
 * read-write shadow view. It behaves as the real driver does where the library depends on
 * it: nothing answers before cuInit (CUDA_ERROR_NOT_INITIALIZED), cuPointerGetAttributes
 * answers memory type 0 for unknown pointers, copies need the memory's context current and
 * a stream from cuStreamCreate, a range past an allocation is CUDA_ERROR_INVALID_VALUE.
 *
 * Only the entry points the library and the tests call are here (with the real driver's
 * names and signatures, so the tests run unchanged against libcuda.so.1 on a GPU machine),
 * plus fake_cuda_* functions for the tests alone: call counts, failures on demand, and
 * memory without a context (as cuMemCreate/cuMemMap's). FAKE_CUDA_INITIALIZED=1 in the
 * environment starts it initialized (for a benchmark of a process that never calls cuInit).
 *
 * Thread-safe: one mutex over the allocation table; counters are atomic. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef int CUdevice;

enum {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kInvalidDevice = 101,
  kInvalidContext = 201,
  kInvalidHandle = 400,
  kIllegalAddress = 700,
};

#define REGION_BYTES (512ull << 20)
#define MAX_ALLOCATIONS 4096

typedef struct {
  uint64_t offset, size; /* in the region */
  int contextless;       /* as cuMemMap's memory: no context, only a device */
  int host;              /* cuMemHostAlloc: pinned host memory, in the shadow view */
  int live;
} allocation;

/* What the tests read back (fake_cuda_stats). */
typedef struct fake_cuda_stats {
  uint64_t pointer_queries;   /* cuPointerGetAttributes calls */
  uint64_t to_host_copies;    /* cuMemcpyDtoHAsync_v2 */
  uint64_t to_host_bytes;
  uint64_t to_device_copies;  /* cuMemcpyHtoDAsync_v2 */
  uint64_t to_device_bytes;
  uint64_t on_device_copies;  /* cuMemcpyDtoDAsync_v2 */
  uint64_t refused_copies;    /* copies refused for a wrong context, stream or range */
  uint64_t streams_created;
  uint64_t primary_retains;
} fake_cuda_stats;

static int g_context_tag; /* the one device's primary context is &g_context_tag */
static CUcontext const kPrimary = &g_context_tag;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_ready;            /* the region is mapped; under g_mu */
static atomic_int g_initialized;
static char *g_device;         /* PROT_NONE view: the addresses handed out */
static char *g_shadow;         /* read-write view of the same pages */
static uint64_t g_next;        /* bump allocator; under g_mu */
static allocation g_allocations[MAX_ALLOCATIONS];
static int g_allocation_count; /* under g_mu */
static atomic_int g_fail_copies;

static _Atomic uint64_t s_queries, s_to_host, s_to_host_bytes, s_to_device, s_to_device_bytes,
    s_on_device, s_refused, s_streams, s_retains;

static __thread CUcontext t_current;
static __thread CUcontext t_stack[16];
static __thread int t_depth;

__attribute__((constructor)) static void fake_cuda_load(void) {
  const char *init = getenv("FAKE_CUDA_INITIALIZED");
  if (init != NULL && strcmp(init, "1") == 0) atomic_store(&g_initialized, 1);
}

/* Maps the region on first use; 0, or -1 when it cannot be. Under g_mu. */
static int ensure_region(void) {
  if (g_ready) return 0;
  int fd = memfd_create("fake-cuda-device", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)REGION_BYTES) != 0) return -1;
  g_device = mmap(NULL, REGION_BYTES, PROT_NONE, MAP_SHARED, fd, 0);
  g_shadow = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (g_device == MAP_FAILED || g_shadow == MAP_FAILED) return -1;
  g_ready = 1;
  return 0;
}

/* The live allocation holding [p, p + n), or NULL. Under g_mu. */
static allocation *find(uintptr_t p, uint64_t n) {
  if (!g_ready) return NULL;
  for (int i = 0; i < g_allocation_count; ++i) {
    allocation *a = &g_allocations[i];
    uintptr_t base = (uintptr_t)(a->host ? g_shadow : g_device) + a->offset;
    if (a->live && p >= base && p - base < a->size && n <= a->size - (p - base)) return a;
  }
  return NULL;
}

static CUresult allocate(uint64_t size, int contextless, int host, uintptr_t *out) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  if (!host && !contextless && t_current == NULL) return kInvalidContext;
  if (size == 0) return kInvalidValue;
  pthread_mutex_lock(&g_mu);
  CUresult r = kOutOfMemory;
  uint64_t rounded = (size + 4095) / 4096 * 4096;
  /* A page between allocations: a copy running past one is refused, not let through. */
  if (ensure_region() == 0 && g_allocation_count < MAX_ALLOCATIONS &&
      g_next + rounded + 4096 <= REGION_BYTES) {
    allocation *a = &g_allocations[g_allocation_count++];
    *a = (allocation){g_next, size, contextless, host, 1};
    g_next += rounded + 4096;
    *out = (uintptr_t)(host ? g_shadow : g_device) + a->offset;
    r = kSuccess;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

static CUresult release(uintptr_t p) {
  pthread_mutex_lock(&g_mu);
  allocation *a = find(p, 1);
  if (a != NULL) a->live = 0;
  pthread_mutex_unlock(&g_mu);
  return a != NULL ? kSuccess : kInvalidValue;
}

/* ---- the driver's entry points ------------------------------------------------------ */

CUresult cuInit(unsigned flags) {
  (void)flags;
  atomic_store(&g_initialized, 1);
  return kSuccess;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  if (ordinal != 0) return kInvalidDevice;
  *device = 0;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  atomic_fetch_add(&s_retains, 1);
  *context = kPrimary;
  return kSuccess;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  t_current = context;
  return kSuccess;
}

CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (context != kPrimary) return kInvalidContext;
  if (t_depth == 16) return kInvalidValue;
  t_stack[t_depth++] = t_current;
  t_current = context;
  return kSuccess;
}

CUresult cuCtxPopCurrent_v2(CUcontext *context) {
  if (t_depth == 0) return kInvalidContext;
  if (context != NULL) *context = t_current;
  t_current = t_stack[--t_depth];
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
  uintptr_t p = 0;
  CUresult r = allocate(bytes, 0, 0, &p);
  if (r == kSuccess) *dptr = (CUdeviceptr)p;
  return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { return release((uintptr_t)dptr); }

CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned flags) {
  (void)flags;
  uintptr_t p = 0;
  CUresult r = allocate(bytes, 0, 1, &p);
  if (r == kSuccess) *pp = (void *)p;
  return r;
}

CUresult cuMemFreeHost(void *p) { return release((uintptr_t)p); }

CUresult cuPointerGetAttributes(unsigned count, int *attributes, void **data, CUdeviceptr ptr) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  atomic_fetch_add(&s_queries, 1);
  pthread_mutex_lock(&g_mu);
  allocation *a = find((uintptr_t)ptr, 1);
  allocation found = a != NULL ? *a : (allocation){0};
  pthread_mutex_unlock(&g_mu);
  for (unsigned i = 0; i < count; ++i) {
    switch (attributes[i]) {
      case 1: /* CU_POINTER_ATTRIBUTE_CONTEXT */
        *(CUcontext *)data[i] = a != NULL && !found.contextless ? kPrimary : NULL;
        break;
      case 2: /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: 0 unknown, 1 host, 2 device */
        *(unsigned *)data[i] = a == NULL ? 0 : found.host ? 1 : 2;
        break;
      case 9: /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
        *(int *)data[i] = a != NULL ? 0 : -2;
        break;
      default:
        return kInvalidValue;
    }
  }
  return kSuccess;
}

typedef struct {
  unsigned magic;
  unsigned flags;
} fake_stream;
#define STREAM_MAGIC 0x57eau

CUresult cuStreamCreate(CUstream *stream, unsigned flags) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  if (t_current == NULL) return kInvalidContext;
  fake_stream *s = malloc(sizeof(*s));
  if (s == NULL) return kOutOfMemory;
  *s = (fake_stream){STREAM_MAGIC, flags};
  atomic_fetch_add(&s_streams, 1);
  *stream = s;
  return kSuccess;
}

CUresult cuStreamSynchronize(CUstream stream) {
  fake_stream *s = stream;
  return s != NULL && s->magic == STREAM_MAGIC ? kSuccess : kInvalidHandle;
}

/* The shadow address of device range [p, p + n) for a copy on stream, or NULL with *why.
 * The copy needs the memory's context current (any, for memory without one). */
static char *shadow_of(uintptr_t p, uint64_t n, CUstream stream, CUresult *why) {
  fake_stream *s = stream;
  if (stream != NULL && s->magic != STREAM_MAGIC) {
    *why = kInvalidHandle;
    return NULL;
  }
  pthread_mutex_lock(&g_mu);
  allocation *a = find(p, n);
  allocation found = a != NULL ? *a : (allocation){0};
  pthread_mutex_unlock(&g_mu);
  if (a == NULL || found.host) {
    *why = kInvalidValue;
    return NULL;
  }
  if (t_current != kPrimary) {
    *why = kInvalidContext;
    return NULL;
  }
  return g_shadow + (p - (uintptr_t)g_device);
}

/* Whether the next copy is to fail (fake_cuda_fail_copies). */
static int failing(void) {
  int left = atomic_load(&g_fail_copies);
  while (left > 0 && !atomic_compare_exchange_weak(&g_fail_copies, &left, left - 1)) {
  }
  return left > 0;
}

static CUresult to_host(void *dst, CUdeviceptr src, size_t n, CUstream stream, int count) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  CUresult why = kSuccess;
  char *from = shadow_of((uintptr_t)src, n, stream, &why);
  if (from == NULL) {
    atomic_fetch_add(&s_refused, count);
    return why;
  }
  if (count && failing()) return kIllegalAddress;
  memcpy(dst, from, n);
  atomic_fetch_add(&s_to_host, count);
  atomic_fetch_add(&s_to_host_bytes, count ? n : 0);
  return kSuccess;
}

static CUresult to_device(CUdeviceptr dst, const void *src, size_t n, CUstream stream,
                          int count) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  CUresult why = kSuccess;
  char *to = shadow_of((uintptr_t)dst, n, stream, &why);
  if (to == NULL) {
    atomic_fetch_add(&s_refused, count);
    return why;
  }
  if (count && failing()) return kIllegalAddress;
  memcpy(to, src, n);
  atomic_fetch_add(&s_to_device, count);
  atomic_fetch_add(&s_to_device_bytes, count ? n : 0);
  return kSuccess;
}

/* The library's copies (asynchronous on its streams; counted) and the tests' own
 * synchronous ones (not counted). */
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream) {
  if (stream == NULL) return kInvalidHandle; /* the library always names its stream */
  return to_host(dst, src, n, stream, 1);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream) {
  if (stream == NULL) return kInvalidHandle;
  return to_device(dst, src, n, stream, 1);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  if (!atomic_load(&g_initialized)) return kNotInitialized;
  if (stream == NULL) return kInvalidHandle;
  CUresult why = kSuccess;
  char *to = shadow_of((uintptr_t)dst, n, stream, &why);
  char *from = to != NULL ? shadow_of((uintptr_t)src, n, stream, &why) : NULL;
  if (from == NULL) {
    atomic_fetch_add(&s_refused, 1);
    return why;
  }
  if (failing()) return kIllegalAddress;
  memmove(to, from, n);
  atomic_fetch_add(&s_on_device, 1);
  return kSuccess;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  return to_host(dst, src, n, NULL, 0);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  return to_device(dst, src, n, NULL, 0);
}

CUresult cuGetErrorName(CUresult error, const char **out) {
  switch (error) {
    case kSuccess: *out = "CUDA_SUCCESS"; break;
    case kInvalidValue: *out = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *out = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kNotInitialized: *out = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case kInvalidDevice: *out = "CUDA_ERROR_INVALID_DEVICE"; break;
    case kInvalidContext: *out = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case kInvalidHandle: *out = "CUDA_ERROR_INVALID_HANDLE"; break;
    case kIllegalAddress: *out = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    default: *out = NULL; return kInvalidValue;
  }
  return kSuccess;
}

CUresult cuGetErrorString(CUresult error, const char **out) {
  switch (error) {
    case kInvalidValue: *out = "invalid argument"; break;
    case kInvalidContext: *out = "invalid device context"; break;
    case kIllegalAddress: *out = "an illegal memory access was encountered"; break;
    default: return cuGetErrorName(error, out);
  }
  return kSuccess;
}

/* ---- for the tests alone --------------------------------------------------------------- */

void fake_cuda_stats_get(fake_cuda_stats *out) {
  out->pointer_queries = atomic_load(&s_queries);
  out->to_host_copies = atomic_load(&s_to_host);
  out->to_host_bytes = atomic_load(&s_to_host_bytes);
  out->to_device_copies = atomic_load(&s_to_device);
  out->to_device_bytes = atomic_load(&s_to_device_bytes);
  out->on_device_copies = atomic_load(&s_on_device);
  out->refused_copies = atomic_load(&s_refused);
  out->streams_created = atomic_load(&s_streams);
  out->primary_retains = atomic_load(&s_retains);
}

/* The next n copies of the library fail with CUDA_ERROR_ILLEGAL_ADDRESS. */
void fake_cuda_fail_copies(int n) { atomic_store(&g_fail_copies, n); }

/* Device memory whose CU_POINTER_ATTRIBUTE_CONTEXT is NULL (as cuMemMap's): the library
 * must copy in the primary context of its device. NULL when none is left. */
void *fake_cuda_alloc_contextless(size_t bytes) {
  uintptr_t p = 0;
  return allocate(bytes, 1, 0, &p) == kSuccess ? (void *)p : NULL;
}
