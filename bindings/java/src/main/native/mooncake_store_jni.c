/*
 * JNI glue for org.mooncake.store.MooncakeStore: each native method is one or two calls of
 * include/mooncake_store.h. The Java side validates arguments, holds the handle's lifetime
 * (a read/write lock around every call) and turns codes into exceptions; this file only
 * converts arrays and buffers to C and back. Keys arrive as UTF-8 byte[] (checked for NUL in
 * Java) and are copied into NUL-terminated strings. No JNI critical sections are held across
 * library calls (they block on the daemon), so the GC is never stalled.
 *
 * The only exception raised here is OutOfMemoryError, when malloc or a JNI allocation fails.
 */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake_store.h"
#include "org_mooncake_store_MooncakeStore.h"

#define UNUSED(x) (void)(x)

_Static_assert(sizeof(jlong) == sizeof(int64_t), "jlong is int64_t");
_Static_assert(sizeof(jint) == sizeof(int), "jint is int");

static mooncake_store_t H(jlong h) { return (mooncake_store_t)(intptr_t)h; }

static void throw_oom(JNIEnv *env, const char *what) {
  jclass cls = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
  if (cls != NULL) (*env)->ThrowNew(env, cls, what);
}

/* A NUL-terminated copy of a Java byte[]; short ones live in the struct. */
typedef struct {
  char *str; /* NULL for a null array */
  char small[256];
} cstring;

/* 0, or -1 with OutOfMemoryError pending. */
static int cstring_init(JNIEnv *env, jbyteArray array, cstring *s) {
  s->str = NULL;
  if (array == NULL) return 0;
  jsize n = (*env)->GetArrayLength(env, array);
  char *p = (size_t)n < sizeof(s->small) ? s->small : malloc((size_t)n + 1);
  if (p == NULL) {
    throw_oom(env, "mooncake_store_jni: key copy");
    return -1;
  }
  (*env)->GetByteArrayRegion(env, array, 0, n, (jbyte *)p);
  p[n] = '\0';
  s->str = p;
  return 0;
}

static void cstring_free(cstring *s) {
  if (s->str != NULL && s->str != s->small) free(s->str);
}

/* Memory for n bytes that libmooncake_store moves without a copy: a block of the handle's
 * pool when one is free, else the C heap (the library then stages it through the pool). */
typedef struct {
  mooncake_store_t store;
  void *ptr;
  int pooled;
} scratch;

static int scratch_init(JNIEnv *env, mooncake_store_t store, size_t n, scratch *s) {
  s->store = store;
  s->pooled = 1;
  s->ptr = mooncake_store_alloc(store, n);
  if (s->ptr == NULL) {
    s->pooled = 0;
    s->ptr = malloc(n);
  }
  if (s->ptr == NULL) {
    throw_oom(env, "mooncake_store_jni: value buffer");
    return -1;
  }
  return 0;
}

static void scratch_free(scratch *s) {
  if (s->pooled) {
    mooncake_store_free(s->store, s->ptr);
  } else {
    free(s->ptr);
  }
}

/* The keys of a batch as one allocation: count pointers followed by the strings. A null
 * element stays NULL (the library reports -1 for that entry). */
static const char **keys_init(JNIEnv *env, jobjectArray keys, jsize count) {
  size_t bytes = (size_t)count * sizeof(char *);
  for (jsize i = 0; i < count; i++) {
    jbyteArray k = (jbyteArray)(*env)->GetObjectArrayElement(env, keys, i);
    if (k != NULL) {
      bytes += (size_t)(*env)->GetArrayLength(env, k) + 1;
      (*env)->DeleteLocalRef(env, k);
    }
  }
  const char **out = malloc(bytes > 0 ? bytes : 1);
  if (out == NULL) {
    throw_oom(env, "mooncake_store_jni: batch keys");
    return NULL;
  }
  char *next = (char *)(out + count);
  for (jsize i = 0; i < count; i++) {
    jbyteArray k = (jbyteArray)(*env)->GetObjectArrayElement(env, keys, i);
    out[i] = NULL;
    if (k != NULL) {
      jsize n = (*env)->GetArrayLength(env, k);
      (*env)->GetByteArrayRegion(env, k, 0, n, (jbyte *)next);
      next[n] = '\0';
      out[i] = next;
      next += n + 1;
      (*env)->DeleteLocalRef(env, k);
    }
  }
  return out;
}

/* The buffers of a batch: addresses (position applied) and sizes. A null or non-direct
 * element becomes NULL (the Java side has already given such entries their result). */
static int buffers_init(JNIEnv *env, jobjectArray buffers, jintArray offsets, jintArray lengths,
                        jsize count, void ***buffers_out, size_t **sizes_out) {
  void **ptrs = malloc((size_t)count * sizeof(void *) + 1);
  size_t *sizes = malloc((size_t)count * sizeof(size_t) + 1);
  jint *offs = malloc((size_t)count * sizeof(jint) * 2 + 1);
  if (ptrs == NULL || sizes == NULL || offs == NULL) {
    free(ptrs);
    free(sizes);
    free(offs);
    throw_oom(env, "mooncake_store_jni: batch buffers");
    return -1;
  }
  jint *lens = offs + count;
  (*env)->GetIntArrayRegion(env, offsets, 0, count, offs);
  (*env)->GetIntArrayRegion(env, lengths, 0, count, lens);
  for (jsize i = 0; i < count; i++) {
    jobject b = (*env)->GetObjectArrayElement(env, buffers, i);
    char *base = b == NULL ? NULL : (*env)->GetDirectBufferAddress(env, b);
    ptrs[i] = base == NULL ? NULL : base + offs[i];
    sizes[i] = (size_t)lens[i];
    if (b != NULL) (*env)->DeleteLocalRef(env, b);
  }
  free(offs);
  *buffers_out = ptrs;
  *sizes_out = sizes;
  return 0;
}

/* Equal lengths are checked in Java; this only guards against a mismatch reaching C.
 * buffers NULL: a batch of keys only (offsets and lengths are not looked at). */
static int batch_count(JNIEnv *env, jobjectArray keys, jobjectArray buffers, jintArray offsets,
                       jintArray lengths, jarray results) {
  jsize n = (*env)->GetArrayLength(env, keys);
  if ((*env)->GetArrayLength(env, results) != n) return -1;
  if (buffers != NULL &&
      ((*env)->GetArrayLength(env, buffers) != n || (*env)->GetArrayLength(env, offsets) != n ||
       (*env)->GetArrayLength(env, lengths) != n)) {
    return -1;
  }
  return n;
}

/* The batch calls. */
enum batch_call { BATCH_PUT_FROM, BATCH_GET_INTO, BATCH_IS_EXIST };

/* Runs call on the arrays in C form and copies its results back when it succeeds. 0 for an
 * empty batch, INVALID_PARAMS for arrays of different lengths, INTERNAL_ERROR with
 * OutOfMemoryError pending. buffers, offsets and lengths are NULL for BATCH_IS_EXIST. */
static jint batch_call(JNIEnv *env, jlong h, enum batch_call call, jobjectArray keys,
                       jobjectArray buffers, jintArray offsets, jintArray lengths,
                       jarray results) {
  int count = batch_count(env, keys, buffers, offsets, lengths, results);
  if (count <= 0) return count < 0 ? MOONCAKE_STORE_INVALID_PARAMS : 0;
  void **ptrs = NULL;
  size_t *sizes = NULL;
  void *out = NULL;
  const char **k = keys_init(env, keys, count);
  if (k != NULL && (buffers == NULL ||
                    buffers_init(env, buffers, offsets, lengths, count, &ptrs, &sizes) == 0)) {
    out = malloc((size_t)count * (call == BATCH_GET_INTO ? sizeof(int64_t) : sizeof(jint)));
    if (out == NULL) throw_oom(env, "mooncake_store_jni: batch results");
  }
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if (out != NULL) {
    switch (call) {
      case BATCH_PUT_FROM:
        rc = mooncake_store_batch_put_from(H(h), k, ptrs, sizes, (size_t)count, NULL, out);
        break;
      case BATCH_GET_INTO:
        rc = mooncake_store_batch_get_into(H(h), k, ptrs, sizes, (size_t)count, out);
        break;
      case BATCH_IS_EXIST:
        rc = mooncake_store_batch_is_exist(H(h), k, (size_t)count, out);
        break;
    }
  }
  if (rc == 0 && call == BATCH_GET_INTO) {
    (*env)->SetLongArrayRegion(env, (jlongArray)results, 0, count, out);
  } else if (rc == 0) {
    (*env)->SetIntArrayRegion(env, (jintArray)results, 0, count, out);
  }
  free(out);
  free(sizes);
  free(ptrs);
  free(k);
  return rc;
}

/* The calls of one key (or socket path, or pattern), with at most a buffer and a number. */
enum key_call { SET_TENANT, CONNECT, PUT_FROM, GET_INTO, IS_EXIST, GET_SIZE, REMOVE,
                REMOVE_BY_REGEX };

/* Runs call with the key copied to a C string: INTERNAL_ERROR when the copy fails
 * (OutOfMemoryError pending). */
static int64_t key_call(JNIEnv *env, jlong h, jbyteArray key, enum key_call call, char *buf,
                        jlong n) {
  cstring k;
  if (cstring_init(env, key, &k) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  int64_t rc = MOONCAKE_STORE_INTERNAL_ERROR;
  switch (call) {
    case SET_TENANT: rc = mooncake_store_set_tenant(H(h), k.str); break;
    case CONNECT: rc = mooncake_store_connect(H(h), k.str, (uint64_t)n); break;
    case PUT_FROM: rc = mooncake_store_put_from(H(h), k.str, buf, (size_t)n, NULL); break;
    case GET_INTO: rc = mooncake_store_get_into(H(h), k.str, buf, (size_t)n); break;
    case IS_EXIST: rc = mooncake_store_is_exist(H(h), k.str); break;
    case GET_SIZE: rc = mooncake_store_get_size(H(h), k.str); break;
    case REMOVE: rc = mooncake_store_remove(H(h), k.str, (int)n); break;
    case REMOVE_BY_REGEX: rc = mooncake_store_remove_by_regex(H(h), k.str, (int)n); break;
  }
  cstring_free(&k);
  return rc;
}

/* key_call on the bytes at a direct buffer's position (offset): INVALID_PARAMS for a
 * buffer without an address. */
static int64_t buffer_call(JNIEnv *env, jlong h, jbyteArray key, enum key_call call,
                           jobject buffer, jint offset, jint length) {
  char *base = (*env)->GetDirectBufferAddress(env, buffer);
  if (base == NULL) return MOONCAKE_STORE_INVALID_PARAMS;
  return key_call(env, h, key, call, base + offset, length);
}

/* status[0] = code, for the calls that return an object or NULL. */
static void set_status(JNIEnv *env, jintArray status, int64_t code) {
  jint c = (jint)code;
  (*env)->SetIntArrayRegion(env, status, 0, 1, &c);
}

/* ---- lifecycle -------------------------------------------------------------------------- */

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nCreate(JNIEnv *env, jclass cls) {
  UNUSED(env);
  UNUSED(cls);
  return (jlong)(intptr_t)mooncake_store_create();
}

JNIEXPORT void JNICALL Java_org_mooncake_store_MooncakeStore_nDestroy(JNIEnv *env, jclass cls,
                                                                       jlong h) {
  UNUSED(env);
  UNUSED(cls);
  mooncake_store_destroy(H(h));
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nSetTenant(JNIEnv *env, jclass cls,
                                                                         jlong h,
                                                                         jbyteArray tenant_id) {
  UNUSED(cls);
  return (jint)key_call(env, h, tenant_id, SET_TENANT, NULL, 0);
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nConnect(JNIEnv *env, jclass cls,
                                                                       jlong h,
                                                                       jbyteArray socket_path,
                                                                       jlong local_buffer_size) {
  UNUSED(cls);
  return (jint)key_call(env, h, socket_path, CONNECT, NULL, local_buffer_size);
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nClose(JNIEnv *env, jclass cls,
                                                                     jlong h) {
  UNUSED(env);
  UNUSED(cls);
  return mooncake_store_close(H(h));
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nHealthCheck(JNIEnv *env,
                                                                           jclass cls, jlong h) {
  UNUSED(env);
  UNUSED(cls);
  return mooncake_store_health_check(H(h));
}

JNIEXPORT jstring JNICALL Java_org_mooncake_store_MooncakeStore_nGetHostname(
    JNIEnv *env, jclass cls, jlong h, jint capacity, jintArray status) {
  UNUSED(cls);
  char *buf = malloc((size_t)capacity);
  if (buf == NULL) {
    throw_oom(env, "mooncake_store_jni: hostname");
    return NULL;
  }
  int rc = mooncake_store_get_hostname(H(h), buf, (size_t)capacity);
  jstring out = NULL;
  if (rc == 0) {
    out = (*env)->NewStringUTF(env, buf); /* "host:port" is ASCII */
  } else {
    set_status(env, status, rc);
  }
  free(buf);
  return out;
}

JNIEXPORT jstring JNICALL Java_org_mooncake_store_MooncakeStore_nStrerror(JNIEnv *env,
                                                                          jclass cls,
                                                                          jint code) {
  UNUSED(cls);
  return (*env)->NewStringUTF(env, mooncake_store_strerror(code)); /* ASCII */
}

/* mooncake_store_errmsg's bytes: Java decodes them as UTF-8 (a socket path may be any bytes,
 * which NewStringUTF's modified UTF-8 would not take). */
JNIEXPORT jbyteArray JNICALL Java_org_mooncake_store_MooncakeStore_nErrmsg(JNIEnv *env,
                                                                           jclass cls, jlong h) {
  UNUSED(cls);
  const char *text = mooncake_store_errmsg(H(h));
  jsize n = (jsize)strlen(text);
  jbyteArray out = (*env)->NewByteArray(env, n);
  if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, n, (const jbyte *)text);
  return out;
}

/* ---- pool memory ------------------------------------------------------------------------ */

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nAlloc(JNIEnv *env, jclass cls,
                                                                      jlong h, jlong size) {
  UNUSED(env);
  UNUSED(cls);
  return (jlong)(intptr_t)mooncake_store_alloc(H(h), (size_t)size);
}

JNIEXPORT void JNICALL Java_org_mooncake_store_MooncakeStore_nFree(JNIEnv *env, jclass cls,
                                                                    jlong h, jlong address) {
  UNUSED(env);
  UNUSED(cls);
  mooncake_store_free(H(h), (void *)(intptr_t)address);
}

JNIEXPORT jobject JNICALL Java_org_mooncake_store_MooncakeStore_nWrap(JNIEnv *env, jclass cls,
                                                                       jlong address,
                                                                       jlong size) {
  UNUSED(cls);
  return (*env)->NewDirectByteBuffer(env, (void *)(intptr_t)address, size);
}

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nAddress(JNIEnv *env, jclass cls,
                                                                        jobject buffer) {
  UNUSED(cls);
  return (jlong)(intptr_t)(*env)->GetDirectBufferAddress(env, buffer);
}

/* ---- put -------------------------------------------------------------------------------- */

/* Copies the array straight into a pool block when one is free, so the put itself moves
 * no bytes on this side (one copy in all, as for a C caller's put). */
JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nPut(JNIEnv *env, jclass cls,
                                                                   jlong h, jbyteArray key,
                                                                   jbyteArray value) {
  UNUSED(cls);
  jsize n = (*env)->GetArrayLength(env, value);
  cstring k;
  if (cstring_init(env, key, &k) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  int rc;
  if (n == 0) {
    static const char empty[1] = {0};
    rc = mooncake_store_put(H(h), k.str, empty, 0, NULL); /* the library's verdict: -600 */
  } else {
    scratch s;
    if (scratch_init(env, H(h), (size_t)n, &s) != 0) {
      cstring_free(&k);
      return MOONCAKE_STORE_INTERNAL_ERROR;
    }
    (*env)->GetByteArrayRegion(env, value, 0, n, (jbyte *)s.ptr);
    rc = mooncake_store_put_from(H(h), k.str, s.ptr, (size_t)n, NULL);
    scratch_free(&s);
  }
  cstring_free(&k);
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nPutFrom(JNIEnv *env, jclass cls,
                                                                       jlong h, jbyteArray key,
                                                                       jobject buffer,
                                                                       jint offset, jint length) {
  UNUSED(cls);
  return (jint)buffer_call(env, h, key, PUT_FROM, buffer, offset, length);
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchPutFrom(
    JNIEnv *env, jclass cls, jlong h, jobjectArray keys, jobjectArray buffers,
    jintArray offsets, jintArray lengths, jintArray results) {
  UNUSED(cls);
  return batch_call(env, h, BATCH_PUT_FROM, keys, buffers, offsets, lengths, results);
}

/* ---- get -------------------------------------------------------------------------------- */

/* get_size, then get_into a pool block (the daemon writes it directly), then one copy into
 * the new array. The value may change between the two calls (upsert): a buffer that has
 * become too small (-600) means ask again. NULL with status[0] = code on a miss or error. */
JNIEXPORT jbyteArray JNICALL Java_org_mooncake_store_MooncakeStore_nGet(JNIEnv *env, jclass cls,
                                                                         jlong h, jbyteArray key,
                                                                         jintArray status) {
  UNUSED(cls);
  enum { kAttempts = 8 };
  cstring k;
  if (cstring_init(env, key, &k) != 0) return NULL;
  jbyteArray out = NULL;
  int64_t code = MOONCAKE_STORE_INVALID_PARAMS;
  for (int attempt = 0; attempt < kAttempts; attempt++) {
    int64_t size = mooncake_store_get_size(H(h), k.str);
    if (size < 0) {
      code = size;
      break;
    }
    if (size == 0 || size > INT32_MAX - 8) { /* the largest Java array */
      code = MOONCAKE_STORE_BUFFER_OVERFLOW;
      break;
    }
    scratch s;
    if (scratch_init(env, H(h), (size_t)size, &s) != 0) {
      cstring_free(&k);
      return NULL;
    }
    int64_t n = mooncake_store_get_into(H(h), k.str, s.ptr, (size_t)size);
    if (n > 0) {
      out = (*env)->NewByteArray(env, (jsize)n);
      if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, (jsize)n, (const jbyte *)s.ptr);
      scratch_free(&s);
      cstring_free(&k);
      return out; /* NULL only with OutOfMemoryError pending */
    }
    scratch_free(&s);
    code = n;
    if (n != MOONCAKE_STORE_INVALID_PARAMS) break;
  }
  cstring_free(&k);
  set_status(env, status, code);
  return NULL;
}

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nGetInto(JNIEnv *env, jclass cls,
                                                                        jlong h, jbyteArray key,
                                                                        jobject buffer,
                                                                        jint offset, jint length) {
  UNUSED(cls);
  return buffer_call(env, h, key, GET_INTO, buffer, offset, length);
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchGetInto(
    JNIEnv *env, jclass cls, jlong h, jobjectArray keys, jobjectArray buffers,
    jintArray offsets, jintArray lengths, jlongArray results) {
  UNUSED(cls);
  return batch_call(env, h, BATCH_GET_INTO, keys, buffers, offsets, lengths, results);
}

/* ---- query and remove ------------------------------------------------------------------- */

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nIsExist(JNIEnv *env, jclass cls,
                                                                       jlong h, jbyteArray key) {
  UNUSED(cls);
  return (jint)key_call(env, h, key, IS_EXIST, NULL, 0);
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchIsExist(JNIEnv *env,
                                                                            jclass cls, jlong h,
                                                                            jobjectArray keys,
                                                                            jintArray results) {
  UNUSED(cls);
  return batch_call(env, h, BATCH_IS_EXIST, keys, NULL, NULL, NULL, results);
}

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nGetSize(JNIEnv *env, jclass cls,
                                                                        jlong h, jbyteArray key) {
  UNUSED(cls);
  return key_call(env, h, key, GET_SIZE, NULL, 0);
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nRemove(JNIEnv *env, jclass cls,
                                                                      jlong h, jbyteArray key,
                                                                      jboolean force) {
  UNUSED(cls);
  return (jint)key_call(env, h, key, REMOVE, NULL, force ? 1 : 0);
}

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nRemoveByRegex(JNIEnv *env,
                                                                              jclass cls, jlong h,
                                                                              jbyteArray pattern,
                                                                              jboolean force) {
  UNUSED(cls);
  return key_call(env, h, pattern, REMOVE_BY_REGEX, NULL, force ? 1 : 0);
}

JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nRemoveAll(JNIEnv *env, jclass cls,
                                                                          jlong h,
                                                                          jboolean force) {
  UNUSED(env);
  UNUSED(cls);
  return mooncake_store_remove_all(H(h), force ? 1 : 0);
}

/* ---- replicas and the SSD tier ------------------------------------------------------------- */

/* Copies n descriptors into the Java arrays from index at. 0, or -1 with an exception
 * pending. */
static int put_replicas(JNIEnv *env, const mooncake_replica_desc_t *d, size_t n, jsize at,
                        jintArray kinds, jintArray statuses, jlongArray sizes,
                        jobjectArray locations) {
  for (size_t i = 0; i < n; i++) {
    jsize j = at + (jsize)i;
    jint kind = d[i].kind, status = d[i].status;
    jlong size = (jlong)d[i].size;
    (*env)->SetIntArrayRegion(env, kinds, j, 1, &kind);
    (*env)->SetIntArrayRegion(env, statuses, j, 1, &status);
    (*env)->SetLongArrayRegion(env, sizes, j, 1, &size);
    jstring location = (*env)->NewStringUTF(env, d[i].location); /* "host:port" is ASCII */
    if (location == NULL) return -1;
    (*env)->SetObjectArrayElement(env, locations, j, location);
    (*env)->DeleteLocalRef(env, location);
  }
  return 0;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nGetReplicaDesc(
    JNIEnv *env, jclass cls, jlong h, jbyteArray key, jint capacity, jintArray kinds,
    jintArray statuses, jlongArray sizes, jobjectArray locations, jintArray count) {
  UNUSED(cls);
  cstring k;
  if (cstring_init(env, key, &k) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  mooncake_replica_desc_t *d = malloc((size_t)capacity * sizeof(*d) + 1);
  if (d == NULL) {
    cstring_free(&k);
    throw_oom(env, "mooncake_store_jni: replica descriptors");
    return MOONCAKE_STORE_INTERNAL_ERROR;
  }
  size_t n = 0;
  int rc = mooncake_store_get_replica_desc(H(h), k.str, d, (size_t)capacity, &n);
  cstring_free(&k);
  jint needed = (jint)n;
  (*env)->SetIntArrayRegion(env, count, 0, 1, &needed);
  if (rc == 0 && put_replicas(env, d, n, 0, kinds, statuses, sizes, locations) != 0) {
    rc = MOONCAKE_STORE_INTERNAL_ERROR;
  }
  free(d);
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchGetReplicaDesc(
    JNIEnv *env, jclass cls, jlong h, jobjectArray keys, jint capacity_per_key, jintArray kinds,
    jintArray statuses, jlongArray sizes, jobjectArray locations, jintArray counts,
    jintArray results) {
  UNUSED(cls);
  jsize count = (*env)->GetArrayLength(env, keys);
  if (count == 0) return 0;
  const char **k = keys_init(env, keys, count);
  if (k == NULL) return MOONCAKE_STORE_INTERNAL_ERROR;
  size_t room = (size_t)count * (size_t)capacity_per_key;
  mooncake_replica_desc_t *d = malloc(room * sizeof(*d) + 1);
  size_t *n = malloc((size_t)count * sizeof(*n));
  int *r = malloc((size_t)count * sizeof(*r));
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if (d == NULL || n == NULL || r == NULL) {
    throw_oom(env, "mooncake_store_jni: replica descriptors");
  } else {
    rc = mooncake_store_batch_get_replica_desc(H(h), k, (size_t)count, d,
                                               (size_t)capacity_per_key, n, r);
  }
  for (jsize i = 0; rc == 0 && i < count; i++) {
    jint needed = (jint)n[i], result = r[i];
    (*env)->SetIntArrayRegion(env, counts, i, 1, &needed);
    (*env)->SetIntArrayRegion(env, results, i, 1, &result);
    if (r[i] == 0 && put_replicas(env, d + (size_t)i * (size_t)capacity_per_key, n[i],
                                  i * capacity_per_key, kinds, statuses, sizes,
                                  locations) != 0) {
      rc = MOONCAKE_STORE_INTERNAL_ERROR;
    }
  }
  free(r);
  free(n);
  free(d);
  free(k);
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nSetSsdOffload(JNIEnv *env,
                                                                             jclass cls, jlong h,
                                                                             jint mode) {
  UNUSED(env);
  UNUSED(cls);
  return mooncake_store_set_ssd_offload(H(h), mode);
}

/* ---- ranged reads ------------------------------------------------------------------------ */

/* The fragments of one get as the C ABI takes them, from three long[] of n each; NULL with
 * OutOfMemoryError pending (or for n 0: nothing to hold). */
static mooncake_range_t *ranges_init(JNIEnv *env, jlongArray src, jlongArray len,
                                     jlongArray dst, jsize n) {
  if (n == 0) return NULL;
  mooncake_range_t *r = malloc((size_t)n * sizeof(*r));
  jlong *tmp = malloc((size_t)n * 3 * sizeof(jlong));
  if (r == NULL || tmp == NULL) {
    free(r);
    free(tmp);
    throw_oom(env, "mooncake_store_jni: ranges");
    return NULL;
  }
  (*env)->GetLongArrayRegion(env, src, 0, n, tmp);
  (*env)->GetLongArrayRegion(env, len, 0, n, tmp + n);
  (*env)->GetLongArrayRegion(env, dst, 0, n, tmp + 2 * n);
  for (jsize k = 0; k < n; k++) {
    r[k].src_offset = (uint64_t)tmp[k];
    r[k].length = (uint64_t)tmp[n + k];
    r[k].dst_offset = (uint64_t)tmp[2 * n + k];
  }
  free(tmp);
  return r;
}

/* get_ranges on the bytes at a direct buffer's position (offset, length of them); the
 * fragments' results go to results. Equal array lengths are checked in Java. */
JNIEXPORT jlong JNICALL Java_org_mooncake_store_MooncakeStore_nGetRanges(
    JNIEnv *env, jclass cls, jlong h, jbyteArray key, jobject buffer, jint offset, jint length,
    jlongArray src, jlongArray len, jlongArray dst, jlongArray results) {
  UNUSED(cls);
  char *base = (*env)->GetDirectBufferAddress(env, buffer);
  if (base == NULL) return MOONCAKE_STORE_INVALID_PARAMS;
  jsize n = (*env)->GetArrayLength(env, results);
  mooncake_range_t *r = ranges_init(env, src, len, dst, n);
  int64_t *out = n > 0 ? malloc((size_t)n * sizeof(int64_t)) : NULL;
  cstring k = {0};
  int64_t rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if ((n == 0 || (r != NULL && out != NULL)) && cstring_init(env, key, &k) == 0) {
    rc = mooncake_store_get_ranges(H(h), k.str, base + offset, (size_t)length, r, (size_t)n,
                                   out);
    if (n > 0) (*env)->SetLongArrayRegion(env, results, 0, n, out);
    cstring_free(&k);
  } else if (n > 0 && out == NULL) {
    throw_oom(env, "mooncake_store_jni: range results");
  }
  free(out);
  free(r);
  return rc;
}

/* batch_get_ranges: entry i is keys[i], buffers[i] at offsets[i] (lengths[i] bytes), the
 * fragments src[i], len[i], dst[i], their results into results[i], the get's into totals[i].
 * A null or non-direct buffer was refused in Java already. */
JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchGetRanges(
    JNIEnv *env, jclass cls, jlong h, jobjectArray keys, jobjectArray buffers, jintArray offsets,
    jintArray lengths, jobjectArray src, jobjectArray len, jobjectArray dst, jobjectArray results,
    jlongArray totals) {
  UNUSED(cls);
  jsize count = (*env)->GetArrayLength(env, keys);
  if (count == 0) return 0;
  void **ptrs = NULL;
  size_t *sizes = NULL;
  const char **k = keys_init(env, keys, count);
  mooncake_ranged_get_t *gets = calloc((size_t)count, sizeof(*gets));
  int64_t *sums = malloc((size_t)count * sizeof(int64_t));
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  int ok = k != NULL;
  if (ok && (gets == NULL || sums == NULL)) {
    throw_oom(env, "mooncake_store_jni: batch ranges");
    ok = 0;
  }
  ok = ok && buffers_init(env, buffers, offsets, lengths, count, &ptrs, &sizes) == 0;
  for (jsize i = 0; ok && i < count; i++) {
    jlongArray s = (*env)->GetObjectArrayElement(env, src, i);
    jlongArray l = (*env)->GetObjectArrayElement(env, len, i);
    jlongArray d = (*env)->GetObjectArrayElement(env, dst, i);
    jsize n = (*env)->GetArrayLength(env, l);
    gets[i].key = k[i];
    gets[i].buffer = ptrs[i];
    gets[i].buffer_size = sizes[i];
    gets[i].range_count = (size_t)n;
    gets[i].ranges = ranges_init(env, s, l, d, n);
    gets[i].results_out = n > 0 ? malloc((size_t)n * sizeof(int64_t)) : NULL;
    ok = n == 0 || (gets[i].ranges != NULL && gets[i].results_out != NULL);
    if (!ok && gets[i].ranges != NULL) throw_oom(env, "mooncake_store_jni: range results");
    (*env)->DeleteLocalRef(env, s);
    (*env)->DeleteLocalRef(env, l);
    (*env)->DeleteLocalRef(env, d);
  }
  if (ok) rc = mooncake_store_batch_get_ranges(H(h), gets, (size_t)count, sums);
  if (rc == 0) {
    (*env)->SetLongArrayRegion(env, totals, 0, count, sums);
    for (jsize i = 0; i < count; i++) {
      if (gets[i].range_count == 0) continue;
      jlongArray r = (*env)->GetObjectArrayElement(env, results, i);
      (*env)->SetLongArrayRegion(env, r, 0, (jsize)gets[i].range_count, gets[i].results_out);
      (*env)->DeleteLocalRef(env, r);
    }
  }
  for (jsize i = 0; gets != NULL && i < count; i++) {
    free((void *)gets[i].ranges);
    free(gets[i].results_out);
  }
  free(gets);
  free(sums);
  free(sizes);
  free(ptrs);
  free(k);
  return rc;
}

/* ---- put configuration, version 4 ------------------------------------------------------- */

/* A mooncake_put_config_t from PutConfig's flattened form (PutConfig.java): scalars
 * [replica_num, nof_replica_num, dfs_replica_num, soft_pin_ttl_ms, soft_pin_action,
 * has_soft_pin_ttl, with_hard_pin, prefer_alloc_in_same_node, data_type], lists
 * [preferred_segments, preferred_nof_segments, group_ids] (byte[][] each, group_ids may be
 * null), singles [preferred_segment, host_id] (byte[] or null). Nothing validated here: the
 * library does that. */
typedef struct {
  mooncake_put_config_t c;
  const char **lists[3];
  cstring singles[2];
} put_config;

static void put_config_free(put_config *p) {
  for (int i = 0; i < 3; i++) free(p->lists[i]);
  for (int i = 0; i < 2; i++) cstring_free(&p->singles[i]);
}

/* 0, or -1 with OutOfMemoryError pending (everything freed). */
static int put_config_init(JNIEnv *env, jlongArray scalars, jobjectArray lists,
                           jobjectArray singles, put_config *p) {
  memset(p, 0, sizeof(*p));
  mooncake_store_put_config_init(&p->c);
  jlong v[9];
  (*env)->GetLongArrayRegion(env, scalars, 0, 9, v);
  p->c.replica_num = (size_t)v[0];
  p->c.nof_replica_num = (size_t)v[1];
  p->c.dfs_replica_num = (size_t)v[2];
  p->c.soft_pin_ttl_ms = (uint64_t)v[3];
  p->c.soft_pin_action = (int32_t)v[4];
  p->c.has_soft_pin_ttl = (int32_t)v[5];
  p->c.with_hard_pin = (int32_t)v[6];
  p->c.prefer_alloc_in_same_node = (int32_t)v[7];
  p->c.data_type = (int32_t)v[8];
  size_t counts[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    jobjectArray list = (jobjectArray)(*env)->GetObjectArrayElement(env, lists, i);
    if (list == NULL) continue;
    jsize n = (*env)->GetArrayLength(env, list);
    p->lists[i] = keys_init(env, list, n);
    (*env)->DeleteLocalRef(env, list);
    if (p->lists[i] == NULL) {
      put_config_free(p);
      return -1;
    }
    counts[i] = (size_t)n;
  }
  p->c.preferred_segments = counts[0] > 0 ? p->lists[0] : NULL;
  p->c.preferred_segments_count = counts[0];
  p->c.preferred_nof_segments = counts[1] > 0 ? p->lists[1] : NULL;
  p->c.preferred_nof_segments_count = counts[1];
  p->c.group_ids = counts[2] > 0 ? p->lists[2] : NULL;
  p->c.group_ids_count = counts[2];
  for (int i = 0; i < 2; i++) {
    jbyteArray s = (jbyteArray)(*env)->GetObjectArrayElement(env, singles, i);
    int rc = cstring_init(env, s, &p->singles[i]);
    if (s != NULL) (*env)->DeleteLocalRef(env, s);
    if (rc != 0) {
      put_config_free(p);
      return -1;
    }
  }
  p->c.preferred_segment = p->singles[0].str;
  p->c.host_id = p->singles[1].str;
  return 0;
}

/* put_ex / upsert_from_ex of a byte[] value, copied into a pool block when one is free. */
JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nPutEx(
    JNIEnv *env, jclass cls, jlong h, jbyteArray key, jbyteArray value, jlongArray scalars,
    jobjectArray lists, jobjectArray singles, jboolean upsert) {
  UNUSED(cls);
  jsize n = (*env)->GetArrayLength(env, value);
  put_config p;
  if (put_config_init(env, scalars, lists, singles, &p) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  cstring k;
  if (cstring_init(env, key, &k) != 0) {
    put_config_free(&p);
    return MOONCAKE_STORE_INTERNAL_ERROR;
  }
  static char empty[1] = {0};
  scratch s = {H(h), empty, -1};
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if (n == 0 || scratch_init(env, H(h), (size_t)n, &s) == 0) {
    if (n > 0) (*env)->GetByteArrayRegion(env, value, 0, n, (jbyte *)s.ptr);
    rc = upsert ? mooncake_store_upsert_from_ex(H(h), k.str, s.ptr, (size_t)n, &p.c)
                : mooncake_store_put_ex(H(h), k.str, s.ptr, (size_t)n, &p.c);
    if (n > 0) scratch_free(&s);
  }
  cstring_free(&k);
  put_config_free(&p);
  return rc;
}

/* put_from_ex / upsert_from_ex of a direct buffer's bytes at offset. */
JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nPutFromEx(
    JNIEnv *env, jclass cls, jlong h, jbyteArray key, jobject buffer, jint offset, jint length,
    jlongArray scalars, jobjectArray lists, jobjectArray singles, jboolean upsert) {
  UNUSED(cls);
  char *base = (*env)->GetDirectBufferAddress(env, buffer);
  if (base == NULL) return MOONCAKE_STORE_INVALID_PARAMS;
  put_config p;
  if (put_config_init(env, scalars, lists, singles, &p) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  cstring k;
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if (cstring_init(env, key, &k) == 0) {
    rc = upsert ? mooncake_store_upsert_from_ex(H(h), k.str, base + offset, (size_t)length, &p.c)
                : mooncake_store_put_from_ex(H(h), k.str, base + offset, (size_t)length, &p.c);
    cstring_free(&k);
  }
  put_config_free(&p);
  return rc;
}

/* batch_put_from_ex / batch_upsert_from; the arrays as for nBatchPutFrom. */
JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchPutFromEx(
    JNIEnv *env, jclass cls, jlong h, jobjectArray keys, jobjectArray buffers, jintArray offsets,
    jintArray lengths, jintArray results, jlongArray scalars, jobjectArray lists,
    jobjectArray singles, jboolean upsert) {
  UNUSED(cls);
  int count = batch_count(env, keys, buffers, offsets, lengths, results);
  if (count <= 0) return count < 0 ? MOONCAKE_STORE_INVALID_PARAMS : 0;
  put_config p;
  if (put_config_init(env, scalars, lists, singles, &p) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  void **ptrs = NULL;
  size_t *sizes = NULL;
  jint *out = NULL;
  const char **k = keys_init(env, keys, count);
  if (k != NULL && buffers_init(env, buffers, offsets, lengths, count, &ptrs, &sizes) == 0) {
    out = malloc((size_t)count * sizeof(jint));
    if (out == NULL) throw_oom(env, "mooncake_store_jni: batch results");
  }
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if (out != NULL) {
    rc = upsert ? mooncake_store_batch_upsert_from(H(h), k, ptrs, sizes, (size_t)count, &p.c, out)
                : mooncake_store_batch_put_from_ex(H(h), k, ptrs, sizes, (size_t)count, &p.c, out);
  }
  if (rc == 0) (*env)->SetIntArrayRegion(env, results, 0, count, out);
  free(out);
  free(sizes);
  free(ptrs);
  free(k);
  put_config_free(&p);
  return rc;
}
/* ---- segments and replica clearing ------------------------------------------------------- */

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nBatchReplicaClear(
    JNIEnv *env, jclass cls, jlong h, jobjectArray keys, jbyteArray segment_name,
    jintArray results) {
  UNUSED(cls);
  jsize count = (*env)->GetArrayLength(env, keys);
  if (count == 0) return 0;
  if ((*env)->GetArrayLength(env, results) != count) return MOONCAKE_STORE_INVALID_PARAMS;
  cstring name;
  if (cstring_init(env, segment_name, &name) != 0) return MOONCAKE_STORE_INTERNAL_ERROR;
  const char **k = keys_init(env, keys, count);
  jint *out = malloc((size_t)count * sizeof(jint));
  int rc = MOONCAKE_STORE_INTERNAL_ERROR;
  if (k != NULL && out != NULL) {
    rc = mooncake_store_batch_replica_clear(H(h), k, (size_t)count, name.str, (int *)out);
    if (rc == 0) (*env)->SetIntArrayRegion(env, results, 0, count, out);
  } else if (out == NULL) {
    throw_oom(env, "mooncake_store_jni: batch results");
  }
  free(out);
  free(k);
  cstring_free(&name);
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nMountSegment(
    JNIEnv *env, jclass cls, jlong h, jobject buffer, jint offset, jint length, jlongArray id) {
  UNUSED(cls);
  char *base = (*env)->GetDirectBufferAddress(env, buffer);
  if (base == NULL) return MOONCAKE_STORE_INVALID_PARAMS;
  uint64_t segment = 0;
  int rc = mooncake_store_mount_segment(H(h), base + offset, (uint64_t)length, &segment);
  if (rc == 0) {
    jlong v = (jlong)segment;
    (*env)->SetLongArrayRegion(env, id, 0, 1, &v);
  }
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nAllocateAndMountSegment(
    JNIEnv *env, jclass cls, jlong h, jlong size, jlongArray out) {
  UNUSED(cls);
  uint64_t segment = 0, allocated = 0;
  int rc = mooncake_store_allocate_and_mount_segment(H(h), (uint64_t)size, &segment, &allocated);
  if (rc == 0) {
    jlong v[2] = {(jlong)segment, (jlong)allocated};
    (*env)->SetLongArrayRegion(env, out, 0, 2, v);
  }
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nUnmountSegment(
    JNIEnv *env, jclass cls, jlong h, jlong segment_id, jlongArray out) {
  UNUSED(cls);
  uint64_t moved = 0, dropped = 0;
  int rc = mooncake_store_unmount_segment(H(h), (uint64_t)segment_id, &moved, &dropped);
  if (rc == 0) {
    jlong v[2] = {(jlong)moved, (jlong)dropped};
    (*env)->SetLongArrayRegion(env, out, 0, 2, v);
  }
  return rc;
}

JNIEXPORT jint JNICALL Java_org_mooncake_store_MooncakeStore_nUnmountLocalDiskSegment(
    JNIEnv *env, jclass cls, jlong h) {
  UNUSED(env);
  UNUSED(cls);
  return mooncake_store_unmount_local_disk_segment(H(h));
}
