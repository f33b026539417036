#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/harness/restore_test_util.h"

void snap_path(char *out, size_t n, mc_cluster *c, const char *name, const char *file) {
  snprintf(out, n, "%s/snap/snapshots/%s%s%s", mc_cluster_dir(c), name, file ? "/" : "",
           file ? file : "");
}

void take_snapshot(mc_cluster *c, char *name, size_t n, int64_t *objects) {
  int64_t sequence = 0, count = 0;
  assert_int_equal(mc_cluster_master_snapshot(c, &sequence, &count), 0);
  if (objects != NULL) *objects = count;
  char path[512];
  snprintf(path, sizeof(path), "%s/snap/latest", mc_cluster_dir(c));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(name, (int)n, f));
  fclose(f);
  name[strcspn(name, "\n")] = '\0';
  char dir[512];
  snap_path(dir, sizeof(dir), c, name, "descriptor");
  assert_int_equal(access(dir, F_OK), 0);
}

void corrupt(mc_cluster *c, const char *name, enum corruption how) {
  char path[512];
  snap_path(path, sizeof(path), c, name, how == DELETE_MANIFEST ? "manifest" : "metadata");
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(st.st_size > 16);
  if (how == DELETE_MANIFEST) {
    assert_int_equal(unlink(path), 0);
  } else if (how == TRUNCATE_HALF) {
    assert_int_equal(truncate(path, st.st_size / 2), 0);
  } else {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, st.st_size / 2, SEEK_SET), 0);
    int byte = fgetc(f);
    assert_true(byte != EOF);
    assert_int_equal(fseek(f, st.st_size / 2, SEEK_SET), 0);
    assert_true(fputc(byte ^ 0x5a, f) != EOF);
    assert_int_equal(fclose(f), 0);
  }
}

/* The path of the newest <seq>.log of <dir>/snap/oplog (names are zero-padded sequences,
 * so the greatest name is the newest file). */
static void newest_log(mc_cluster *c, char *out, size_t n) {
  char dir[512], newest[256] = "";
  snprintf(dir, sizeof(dir), "%s/snap/oplog", mc_cluster_dir(c));
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".log") == 0 && strcmp(e->d_name, newest) > 0) {
      snprintf(newest, sizeof(newest), "%s", e->d_name);
    }
  }
  closedir(d);
  assert_true(newest[0] != '\0');
  snprintf(out, n, "%s/%s", dir, newest);
}

off_t oplog_written_end(mc_cluster *c) {
  char path[1024];
  newest_log(c, path, sizeof(path));
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  off_t end = 0, at = 0;
  for (int ch; (ch = fgetc(f)) != EOF; ++at) {
    if (ch != 0) end = at + 1;
  }
  fclose(f);
  return end;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Header: "MCOPLOG1" | first seq u64 | version u32 | CRC u32 (24 bytes). Frame: length
 * u32 | seq u64 | payload | CRC u32. A head of zeros ends the records. */
oplog_frames oplog_frames_read(mc_cluster *c) {
  oplog_frames out;
  memset(&out, 0, sizeof(out));
  newest_log(c, out.path, sizeof(out.path));
  FILE *f = fopen(out.path, "rb");
  assert_non_null(f);
  struct stat st;
  assert_int_equal(fstat(fileno(f), &st), 0);
  unsigned char *bytes = malloc((size_t)st.st_size + 1);
  assert_non_null(bytes);
  assert_int_equal(fread(bytes, 1, (size_t)st.st_size, f), (size_t)st.st_size);
  fclose(f);
  assert_true(st.st_size >= 24);
  assert_memory_equal(bytes, "MCOPLOG1", 8);
  int cap = 1024;
  out.offset = malloc(sizeof(off_t) * (size_t)cap);
  out.length = malloc(sizeof(uint32_t) * (size_t)cap);
  assert_true(out.offset != NULL && out.length != NULL);
  for (off_t at = 24; at + 12 <= st.st_size;) {
    uint32_t len = le32(bytes + at);
    uint64_t seq = le64(bytes + at + 4);
    if (len == 0 && seq == 0) break;
    uint32_t total = 12 + len + 4;
    if (at + (off_t)total > st.st_size) break;
    if (out.count == cap) {
      cap *= 2;
      out.offset = realloc(out.offset, sizeof(off_t) * (size_t)cap);
      out.length = realloc(out.length, sizeof(uint32_t) * (size_t)cap);
      assert_true(out.offset != NULL && out.length != NULL);
    }
    out.offset[out.count] = at;
    out.length[out.count] = total;
    ++out.count;
    at += total;
  }
  free(bytes);
  return out;
}

void oplog_frames_free(oplog_frames *f) {
  free(f->offset);
  free(f->length);
  f->offset = NULL;
  f->length = NULL;
  f->count = 0;
}
