/*
 * JNI glue for org.mooncake.store.Tensor: Mooncake's tensor header encoded and decoded by the
 * C ABI (mooncake_store_tensor_header_*), which needs no handle. The Java side checks the data
 * against the shape and builds the objects; this file only converts arrays. A refusal's
 * reason is the calling thread's mooncake_store_errmsg(NULL), which Java reads at once
 * (nLastError) on the same thread.
 *
 * The only exception raised here is OutOfMemoryError, when a JNI allocation fails.
 */
#include <jni.h>
#include <stdint.h>
#include <string.h>

#include "mooncake_store.h"
#include "org_mooncake_store_Tensor.h"

#define UNUSED(x) (void)(x)

JNIEXPORT jlong JNICALL Java_org_mooncake_store_Tensor_nDtypeSize(JNIEnv *env, jclass cls,
                                                                    jint dtype) {
  UNUSED(env);
  UNUSED(cls);
  return (jlong)mooncake_store_tensor_dtype_size(dtype);
}

/* header_init for (dtype, shape), then its 304 bytes into out; dataBytes[0] = the elements'
 * bytes the shape takes. */
JNIEXPORT jint JNICALL Java_org_mooncake_store_Tensor_nEncode(JNIEnv *env, jclass cls, jint dtype,
                                                              jlongArray shape,
                                                              jlongArray dataBytes,
                                                              jbyteArray out) {
  UNUSED(cls);
  jsize ndim = (*env)->GetArrayLength(env, shape);
  int64_t dims[MOONCAKE_TENSOR_MAX_DIMS];
  /* More dimensions than the layout holds: init refuses ndim itself (it reads no shape). */
  if (ndim <= MOONCAKE_TENSOR_MAX_DIMS) {
    (*env)->GetLongArrayRegion(env, shape, 0, ndim, (jlong *)dims);
  }
  mooncake_tensor_header_t header;
  int rc = mooncake_store_tensor_header_init(&header, dtype, (int32_t)ndim, dims);
  if (rc != 0) return rc;
  jlong bytes = (jlong)header.data_bytes;
  (*env)->SetLongArrayRegion(env, dataBytes, 0, 1, &bytes);
  uint8_t encoded[MOONCAKE_TENSOR_HEADER_SIZE];
  rc = mooncake_store_tensor_header_encode(&header, encoded, sizeof(encoded));
  if (rc != 0) return rc;
  (*env)->SetByteArrayRegion(env, out, 0, MOONCAKE_TENSOR_HEADER_SIZE, (const jbyte *)encoded);
  return 0;
}

/* The header of the object's bytes: meta = {dtype, ndim}, shape = local_shape (8),
 * data = {data_offset, data_bytes}. */
JNIEXPORT jint JNICALL Java_org_mooncake_store_Tensor_nDecode(JNIEnv *env, jclass cls,
                                                              jbyteArray object, jintArray meta,
                                                              jlongArray shape, jlongArray data) {
  UNUSED(cls);
  jsize n = (*env)->GetArrayLength(env, object);
  uint8_t prefix[MOONCAKE_TENSOR_HEADER_SIZE];
  jsize have = n < (jsize)sizeof(prefix) ? n : (jsize)sizeof(prefix);
  (*env)->GetByteArrayRegion(env, object, 0, have, (jbyte *)prefix);
  mooncake_tensor_header_t header;
  int rc = mooncake_store_tensor_header_decode(prefix, (size_t)have, (uint64_t)n, &header);
  if (rc != 0) return rc;
  jint m[2] = {header.dtype, header.ndim};
  (*env)->SetIntArrayRegion(env, meta, 0, 2, m);
  (*env)->SetLongArrayRegion(env, shape, 0, MOONCAKE_TENSOR_MAX_DIMS,
                             (const jlong *)header.local_shape);
  jlong d[2] = {(jlong)header.data_offset, (jlong)header.data_bytes};
  (*env)->SetLongArrayRegion(env, data, 0, 2, d);
  return 0;
}

JNIEXPORT jbyteArray JNICALL Java_org_mooncake_store_Tensor_nLastError(JNIEnv *env, jclass cls) {
  UNUSED(cls);
  const char *text = mooncake_store_errmsg(NULL);
  jsize n = (jsize)strlen(text);
  jbyteArray out = (*env)->NewByteArray(env, n);
  if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, n, (const jbyte *)text);
  return out;
}
