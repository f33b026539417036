/* The tensor section of the C ABI (include/mooncake_store.h, "tensors"): Mooncake's tensor
 * header and manifest checked byte by byte against the tables of docs/mooncake-api.md,
 * "Tensors" (each expected byte is written here from the table, not from the code under
 * test), decoding of hand-built objects and of every field the reader refuses, the uniform
 * split, and the keys of a split tensor's objects. No handle, so no cluster: these calls
 * are pure functions of their arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "include/mooncake_store.h"

/* Little-endian readers and writers of the expected bytes. */
static uint64_t le(const uint8_t *p, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= (uint64_t)p[at + i] << (8 * i);
  return v;
}
static void put_le(uint8_t *p, size_t at, size_t n, uint64_t v) {
  for (size_t i = 0; i < n; ++i) p[at + i] = (uint8_t)(v >> (8 * i));
}
static int64_t le64(const uint8_t *p, size_t at) { return (int64_t)le(p, at, 8); }
static int32_t le32(const uint8_t *p, size_t at) { return (int32_t)(uint32_t)le(p, at, 4); }

/* The table's offsets. */
enum {
  MAGIC = 0, VERSION = 4, HEADER_SIZE = 6, DTYPE = 8, NDIM = 12, LAYOUT = 16, FLAGS = 20,
  DATA_OFFSET = 24, DATA_BYTES = 32, GLOBAL_SHAPE = 40, LOCAL_SHAPE = 104, AXIS_COUNT = 168,
  AXES_RESERVED = 172, AXES = 176, AXIS_BYTES = 32
};

static void assert_errmsg_mentions(const char *what) {
  const char *msg = mooncake_store_errmsg(NULL);
  if (strstr(msg, what) == NULL) fail_msg("errmsg \"%s\" does not mention \"%s\"", msg, what);
}

static void test_dtype_sizes(void **state) {
  (void)state;
  static const size_t expected[MOONCAKE_DTYPE_COUNT] = {4, 8, 1, 1, 2, 2, 4, 4, 8, 8,
                                                         1, 2, 2, 1, 1};
  for (int32_t d = 0; d < MOONCAKE_DTYPE_COUNT; ++d) {
    assert_int_equal(mooncake_store_tensor_dtype_size(d), expected[d]);
  }
  assert_int_equal(mooncake_store_tensor_dtype_size(-1), 0);
  assert_int_equal(mooncake_store_tensor_dtype_size(MOONCAKE_DTYPE_COUNT), 0);
}

/* A FULL float32 tensor of shape (3, 4): every byte of the header. */
static void test_full_header_bytes(void **state) {
  (void)state;
  const int64_t shape[2] = {3, 4};
  mooncake_tensor_header_t h;
  assert_int_equal(mooncake_store_tensor_header_init(&h, MOONCAKE_DTYPE_FLOAT32, 2, shape), 0);
  assert_int_equal(h.data_offset, MOONCAKE_TENSOR_HEADER_SIZE);
  assert_int_equal(h.data_bytes, 48);
  uint8_t b[MOONCAKE_TENSOR_HEADER_SIZE];
  memset(b, 0xee, sizeof(b));
  assert_int_equal(mooncake_store_tensor_header_encode(&h, b, sizeof(b)), 0);

  const uint8_t magic[4] = {0x4e, 0x4f, 0x4f, 0x4d}; /* 0x4d4f4f4e, little-endian */
  assert_memory_equal(b + MAGIC, magic, 4);
  assert_int_equal(le(b, VERSION, 2), 1);
  assert_int_equal(le(b, HEADER_SIZE, 2), 304);
  assert_int_equal(le32(b, DTYPE), MOONCAKE_DTYPE_FLOAT32);
  assert_int_equal(le32(b, NDIM), 2);
  assert_int_equal(le32(b, LAYOUT), MOONCAKE_TENSOR_FULL);
  assert_int_equal(le32(b, FLAGS), 0);
  assert_int_equal(le(b, DATA_OFFSET, 8), 304);
  assert_int_equal(le(b, DATA_BYTES, 8), 48);
  for (int i = 0; i < 8; ++i) {
    int64_t want = i < 2 ? shape[i] : -1;
    assert_int_equal(le64(b, GLOBAL_SHAPE + 8 * i), want);
    assert_int_equal(le64(b, LOCAL_SHAPE + 8 * i), want);
  }
  assert_int_equal(le32(b, AXIS_COUNT), 0);
  assert_int_equal(le32(b, AXES_RESERVED), 0);
  for (size_t i = AXES; i < sizeof(b); ++i) assert_int_equal(b[i], 0);
}

/* A shard of a (8, 6) bfloat16 tensor: DP 1 of 2, then TP 2 of 3 along dim 1, PP stage 7.
 * The axes keep their order; each carries its index and, with a split, its local extent. */
static void test_shard_header_bytes(void **state) {
  (void)state;
  mooncake_tensor_header_t h;
  memset(&h, 0, sizeof(h));
  h.dtype = MOONCAKE_DTYPE_BFLOAT16;
  h.ndim = 2;
  h.layout = MOONCAKE_TENSOR_SHARD;
  h.global_shape[0] = 8;
  h.global_shape[1] = 6;
  h.local_shape[0] = 8;
  h.local_shape[1] = 2;
  h.axis_count = 3;
  h.axes[0] = (mooncake_tensor_axis_t){MOONCAKE_TENSOR_AXIS_DP, 1, 2, -1, -1, -1};
  h.axes[1] = (mooncake_tensor_axis_t){MOONCAKE_TENSOR_AXIS_TP, 2, 3, 1, -1, -1};
  h.axes[2] = (mooncake_tensor_axis_t){MOONCAKE_TENSOR_AXIS_PP, 0, 2, -1, -1, 7};
  h.data_offset = MOONCAKE_TENSOR_HEADER_SIZE;
  h.data_bytes = 8 * 2 * 2;
  uint8_t b[MOONCAKE_TENSOR_HEADER_SIZE];
  assert_int_equal(mooncake_store_tensor_header_encode(&h, b, sizeof(b)), 0);
  assert_int_equal(le32(b, LAYOUT), MOONCAKE_TENSOR_SHARD);
  assert_int_equal(le64(b, GLOBAL_SHAPE + 8), 6);
  assert_int_equal(le64(b, LOCAL_SHAPE + 8), 2);
  assert_int_equal(le32(b, AXIS_COUNT), 3);
  const int32_t want[3][6] = {{0, 0, 1, 2, -1, 0}, {1, 1, 2, 3, 1, 0}, {3, 2, 0, 2, -1, 7}};
  const int64_t extent[3] = {0, 2, 0};
  for (int a = 0; a < 3; ++a) {
    const size_t at = AXES + (size_t)a * AXIS_BYTES;
    for (int f = 0; f < 6; ++f) assert_int_equal(le32(b, at + 4 * (size_t)f), want[a][f]);
    assert_int_equal(le64(b, at + 24), extent[a]);
  }
  for (size_t i = AXES + 3 * AXIS_BYTES; i < sizeof(b); ++i) assert_int_equal(b[i], 0);

  mooncake_tensor_header_t back;
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 304 + 32, &back), 0);
  assert_int_equal(back.axis_count, 3);
  assert_int_equal(back.axes[2].stage_id, 7);
  assert_int_equal(back.axes[2].expert_id, -1);
  assert_int_equal(back.axes[1].split_dim, 1);
  assert_int_equal(back.local_shape[1], 2);
  assert_int_equal(back.local_shape[2], -1);
}

/* A header written here byte by byte from the table, as Mooncake's client writes it. */
static void build_header(uint8_t *b, int32_t dtype, int32_t ndim, const int64_t *shape,
                         uint64_t data_bytes) {
  memset(b, 0, MOONCAKE_TENSOR_HEADER_SIZE);
  put_le(b, MAGIC, 4, 0x4d4f4f4e);
  put_le(b, VERSION, 2, 1);
  put_le(b, HEADER_SIZE, 2, 304);
  put_le(b, DTYPE, 4, (uint32_t)dtype);
  put_le(b, NDIM, 4, (uint32_t)ndim);
  put_le(b, DATA_OFFSET, 8, 304);
  put_le(b, DATA_BYTES, 8, data_bytes);
  for (int i = 0; i < 8; ++i) {
    put_le(b, GLOBAL_SHAPE + 8 * (size_t)i, 8, (uint64_t)(i < ndim ? shape[i] : -1));
    put_le(b, LOCAL_SHAPE + 8 * (size_t)i, 8, (uint64_t)(i < ndim ? shape[i] : -1));
  }
}

static void test_decode_hand_built(void **state) {
  (void)state;
  const int64_t shape[3] = {2, 0, 5};
  uint8_t b[MOONCAKE_TENSOR_HEADER_SIZE];
  build_header(b, MOONCAKE_DTYPE_INT64, 3, shape, 0);
  mooncake_tensor_header_t h;
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 304, &h), 0);
  assert_int_equal(h.dtype, MOONCAKE_DTYPE_INT64);
  assert_int_equal(h.ndim, 3);
  assert_int_equal(h.layout, MOONCAKE_TENSOR_FULL);
  assert_int_equal(h.local_shape[2], 5);
  assert_int_equal(h.data_bytes, 0);
  assert_string_equal(mooncake_store_errmsg(NULL), "");

  /* A scalar: ndim 0, one element. object_size 0 takes the header's own. */
  build_header(b, MOONCAKE_DTYPE_FLOAT64, 0, NULL, 8);
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 0, &h), 0);
  assert_int_equal(h.ndim, 0);
  assert_int_equal(h.data_bytes, 8);
}

/* Each field Mooncake's reader refuses, refused here with -600 and named. */
static void test_decode_refusals(void **state) {
  (void)state;
  const int64_t shape[2] = {3, 4};
  uint8_t b[MOONCAKE_TENSOR_HEADER_SIZE];
  mooncake_tensor_header_t h;
  struct {
    size_t at, n;
    uint64_t value;
    const char *named;
  } cases[] = {
      {MAGIC, 4, 0x12345678, "magic"},
      {VERSION, 2, 2, "version"},
      {HEADER_SIZE, 2, 300, "header_size"},
      {DTYPE, 4, 15, "dtype"},
      {NDIM, 4, 9, "ndim"},
      {LAYOUT, 4, 2, "layout"},
      {AXIS_COUNT, 4, 5, "axis_count"},
      {DATA_OFFSET, 8, 200, "data_offset"},
      {DATA_BYTES, 8, 44, "data_bytes"},
      {GLOBAL_SHAPE + 16, 8, 7, "past ndim"},
      {LOCAL_SHAPE, 8, (uint64_t)-3, "negative"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    build_header(b, MOONCAKE_DTYPE_FLOAT32, 2, shape, 48);
    put_le(b, cases[i].at, cases[i].n, cases[i].value);
    assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 304 + 48, &h),
                     MOONCAKE_STORE_INVALID_PARAMS);
    assert_errmsg_mentions(cases[i].named);
  }
  /* An axis with its rank out of range, and one splitting a dimension the tensor lacks. */
  build_header(b, MOONCAKE_DTYPE_FLOAT32, 2, shape, 48);
  put_le(b, LAYOUT, 4, 1);
  put_le(b, AXIS_COUNT, 4, 1);
  put_le(b, AXES + 0, 4, MOONCAKE_TENSOR_AXIS_TP);
  put_le(b, AXES + 8, 4, 2);
  put_le(b, AXES + 12, 4, 2);
  put_le(b, AXES + 16, 4, 1);
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 352, &h), -600);
  assert_errmsg_mentions("rank 2 of size 2");
  put_le(b, AXES + 8, 4, 1);
  put_le(b, AXES + 16, 4, 2);
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 352, &h), -600);
  assert_errmsg_mentions("split_dim 2");
  put_le(b, AXES + 16, 4, 1);
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 352, &h), 0);

  /* The object's size must be the header's: a truncated or padded object is refused. */
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 351, &h), -600);
  assert_int_equal(mooncake_store_tensor_header_decode(b, sizeof(b), 353, &h), -600);
  /* Fewer than 304 bytes at hand, and NULLs. */
  assert_int_equal(mooncake_store_tensor_header_decode(b, 303, 352, &h), -600);
  assert_int_equal(mooncake_store_tensor_header_decode(NULL, 304, 352, &h), -1);
  assert_int_equal(mooncake_store_tensor_header_decode(b, 304, 352, NULL), -1);
}

static void test_encode_refusals(void **state) {
  (void)state;
  const int64_t shape[2] = {3, 4};
  const int64_t negative[2] = {3, -4};
  mooncake_tensor_header_t h;
  uint8_t b[MOONCAKE_TENSOR_HEADER_SIZE];
  assert_int_equal(mooncake_store_tensor_header_init(&h, 99, 2, shape), -600);
  assert_errmsg_mentions("dtype 99");
  assert_int_equal(mooncake_store_tensor_header_init(&h, 0, 9, shape), -600);
  assert_int_equal(mooncake_store_tensor_header_init(&h, 0, 2, negative), -600);
  assert_int_equal(mooncake_store_tensor_header_init(&h, 0, 2, NULL), -1);
  assert_int_equal(mooncake_store_tensor_header_init(&h, 0, 2, shape), 0);
  h.data_bytes = 47; /* not the elements' bytes: it would not decode */
  assert_int_equal(mooncake_store_tensor_header_encode(&h, b, sizeof(b)), -600);
  assert_errmsg_mentions("data_bytes");
  h.data_bytes = 48;
  assert_int_equal(mooncake_store_tensor_header_encode(&h, b, 303), -600);
  assert_int_equal(mooncake_store_tensor_header_encode(&h, b, sizeof(b)), 0);
}

static void test_manifest(void **state) {
  (void)state;
  mooncake_tensor_manifest_t m;
  memset(&m, 0, sizeof(m));
  m.dtype = MOONCAKE_DTYPE_FLOAT16;
  m.ndim = 3;
  m.split_dim = 2;
  m.shard_count = 4;
  m.global_shape[0] = 8;
  m.global_shape[1] = 12;
  m.global_shape[2] = 16;
  uint8_t b[MOONCAKE_TENSOR_MANIFEST_SIZE];
  memset(b, 0xee, sizeof(b));
  assert_int_equal(mooncake_store_tensor_manifest_encode(&m, b, sizeof(b)), 0);
  const uint8_t magic[4] = {0x4e, 0x41, 0x4d, 0x57}; /* 0x574d414e, little-endian */
  assert_memory_equal(b, magic, 4);
  assert_int_equal(le(b, 4, 2), 1);
  assert_int_equal(le(b, 6, 2), 96);
  assert_int_equal(le32(b, 8), MOONCAKE_DTYPE_FLOAT16);
  assert_int_equal(le32(b, 12), 3);
  assert_int_equal(le32(b, 16), 2);
  assert_int_equal(le32(b, 20), 4);
  assert_int_equal(le32(b, 24), 0); /* reserved */
  assert_int_equal(le32(b, 28), 0); /* alignment of the shape */
  const int64_t want[8] = {8, 12, 16, -1, -1, -1, -1, -1};
  for (int i = 0; i < 8; ++i) assert_int_equal(le64(b, 32 + 8 * (size_t)i), want[i]);

  mooncake_tensor_manifest_t back;
  assert_int_equal(mooncake_store_tensor_manifest_decode(b, sizeof(b), &back), 0);
  assert_int_equal(back.shard_count, 4);
  assert_int_equal(back.global_shape[2], 16);
  put_le(b, 16, 4, 3); /* split_dim past ndim */
  assert_int_equal(mooncake_store_tensor_manifest_decode(b, sizeof(b), &back), -600);
  assert_errmsg_mentions("split_dim");
  put_le(b, 16, 4, 2);
  put_le(b, 20, 4, 0);
  assert_int_equal(mooncake_store_tensor_manifest_decode(b, sizeof(b), &back), -600);
  assert_int_equal(mooncake_store_tensor_manifest_decode(b, 95, &back), -600);
  m.shard_count = 0;
  assert_int_equal(mooncake_store_tensor_manifest_encode(&m, b, sizeof(b)), -600);
}

static void test_shard_range(void **state) {
  (void)state;
  int64_t start = -1, extent = -1;
  assert_int_equal(mooncake_store_tensor_shard_range(12, 2, 4, &start, &extent), 0);
  assert_int_equal(start, 6);
  assert_int_equal(extent, 3);
  assert_int_equal(mooncake_store_tensor_shard_range(0, 1, 2, &start, &extent), 0);
  assert_int_equal(extent, 0);
  assert_int_equal(mooncake_store_tensor_shard_range(10, 0, 4, &start, &extent), -600);
  assert_errmsg_mentions("uniform");
  assert_int_equal(mooncake_store_tensor_shard_range(12, 4, 4, &start, &extent), -600);
  assert_int_equal(mooncake_store_tensor_shard_range(12, 0, 0, &start, &extent), -600);
  assert_int_equal(mooncake_store_tensor_shard_range(12, 0, 4, NULL, &extent), -1);
}

static void test_keys(void **state) {
  (void)state;
  char out[256];
  const mooncake_tensor_axis_t tp = {MOONCAKE_TENSOR_AXIS_TP, 3, 4, 1, -1, -1};
  assert_int_equal(mooncake_store_tensor_key(MOONCAKE_TENSOR_KEY_SHARD, "w", &tp, 1, out,
                                             sizeof(out)),
                   (int64_t)strlen("w_tp_3"));
  assert_string_equal(out, "w_tp_3");

  /* Given PP, TP, EP, DP: written DP, TP, EP, PP. */
  const mooncake_tensor_axis_t axes[4] = {
      {MOONCAKE_TENSOR_AXIS_PP, 0, 2, -1, -1, 7},
      {MOONCAKE_TENSOR_AXIS_TP, 1, 4, 2, -1, -1},
      {MOONCAKE_TENSOR_AXIS_EP, 1, 2, -1, 11, -1},
      {MOONCAKE_TENSOR_AXIS_DP, 0, 2, -1, -1, -1},
  };
  assert_true(mooncake_store_tensor_key(MOONCAKE_TENSOR_KEY_SHARD, "w", axes, 4, out,
                                        sizeof(out)) > 0);
  assert_string_equal(out, "w__dp_0of2__tp_1of4_sd2__ep_1of2_eid11__pp_0of2_sid7");
  assert_true(mooncake_store_tensor_key(MOONCAKE_TENSOR_KEY_SHARD, "w", axes + 2, 1, out,
                                        sizeof(out)) > 0);
  assert_string_equal(out, "w__ep_1of2_eid11");

  assert_true(mooncake_store_tensor_key(MOONCAKE_TENSOR_KEY_WRITER_SHARD, "w", &tp, 1, out,
                                        sizeof(out)) > 0);
  assert_string_equal(out, "w__writer_3of4_sd1");
  assert_true(mooncake_store_tensor_key(MOONCAKE_TENSOR_KEY_WRITER_MANIFEST, "w", NULL, 0, out,
                                        sizeof(out)) > 0);
  assert_string_equal(out, "w__writer_manifest");
  assert_true(mooncake_store_tensor_key(MOONCAKE_TENSOR_KEY_PARALLELISM_MANIFEST, "w", NULL, 0,
                                        out, sizeof(out)) > 0);
  assert_string_equal(out, "w__parallelism_manifest");

  /* Refusals: two axes of one kind, a rank out of range, no room, an unknown kind. */
  const mooncake_tensor_axis_t twice[2] = {tp, tp};
  assert_int_equal(mooncake_store_tensor_key(0, "w", twice, 2, out, sizeof(out)), -600);
  assert_errmsg_mentions("two tp axes");
  const mooncake_tensor_axis_t bad = {MOONCAKE_TENSOR_AXIS_TP, 4, 4, 1, -1, -1};
  assert_int_equal(mooncake_store_tensor_key(0, "w", &bad, 1, out, sizeof(out)), -600);
  assert_int_equal(mooncake_store_tensor_key(0, "w", &tp, 1, out, 6), -600);
  assert_string_equal(out, "");
  assert_int_equal(mooncake_store_tensor_key(0, "w", &tp, 1, out, 7), 6);
  assert_int_equal(mooncake_store_tensor_key(9, "w", &tp, 1, out, sizeof(out)), -600);
  assert_int_equal(mooncake_store_tensor_key(0, "w", NULL, 1, out, sizeof(out)), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_sizes),      cmocka_unit_test(test_full_header_bytes),
      cmocka_unit_test(test_shard_header_bytes), cmocka_unit_test(test_decode_hand_built),
      cmocka_unit_test(test_decode_refusals),  cmocka_unit_test(test_encode_refusals),
      cmocka_unit_test(test_manifest),         cmocka_unit_test(test_shard_range),
      cmocka_unit_test(test_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
