/* test_ckpt.c: checkpoints: round trips, box reads, every floating-point dtype read and written, every kind of bad file and its message,
 * replacement that leaves the old checkpoint whole when a write fails, checksums, the removal of
 * temporaries that interrupted writes left, and metadata values read strictly. Runs in the build's `real`
 * (tests/cli/runtime_f32.sh runs it against the float runtime too). */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt/safetensors.h"
#include "ckpt/safetensors_meta.h"

static char dir[] = "/tmp/plait-test-ckpt-XXXXXX";

static const char *in_dir(char *buf, const char *name) {
  snprintf(buf, 512, "%s/%s", dir, name);
  return buf;
}

/* The file's bytes (malloc'd), its size in *size; NULL when missing. */
static unsigned char *slurp(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *bytes = malloc((size_t)*size + 1);
  *size = (long)fread(bytes, 1, (size_t)*size, f);
  fclose(f);
  return bytes;
}

static void spill(const char *path, const void *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(bytes, 1, n, f);
  fclose(f);
}

/* A safetensors file by hand: the 8-byte length of json, json, then data. */
static void write_raw(const char *path, const char *json, const void *data, size_t nbytes) {
  size_t n = strlen(json);
  unsigned char *bytes = malloc(8 + n + nbytes);
  for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(bytes + 8, json, n);
  if (nbytes) memcpy(bytes + 8 + n, data, nbytes);
  spill(path, bytes, 8 + n + nbytes);
  free(bytes);
}

static int temp_files_left(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

/* ---- a small model: a matrix, a vector, a scalar and a 3-D tensor ---------------------------------- */
enum { MODEL_TENSORS = 4 };
static const CkptSpec model_specs[MODEL_TENSORS] = {
    {"wte", 2, {3, 5}, 0}, {"h.0.ln.b", 1, {7}, 0}, {"scale", 0, {0}, 0}, {"h.0.attn.w", 3, {4, 5, 6}, 0}};
static real wte[15], bias[7], scale[1], attn[120];
static const real *const model_data[MODEL_TENSORS] = {wte, bias, scale, attn};
static const CkptMeta model_meta[] = {{"step", "1200"}, {"model", "gpt \"tiny\"\\ café\n"}, {"empty", ""}};

static void fill_model(real offset) {
  for (int i = 0; i < 15; i++) wte[i] = offset + (real)i / 7;
  for (int i = 0; i < 7; i++) bias[i] = offset - (real)i * 3;
  scale[0] = offset + (real)0.125;
  for (int i = 0; i < 120; i++) attn[i] = offset + (real)(i * i) / 1024;
}

static void save_model(const char *path, real offset) {
  CkptWriter w;
  fill_model(offset);
  CHECK(ckpt_save(&w, path, model_specs, model_data, MODEL_TENSORS, model_meta, 3) == 0, "save: %s", w.error);
}

static void test_round_trip(void) {
  char path[512];
  save_model(in_dir(path, "model.safetensors"), 0.5);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  CHECK(c.ntensors == MODEL_TENSORS, "%d tensors", c.ntensors);
  for (int i = 0; i < MODEL_TENSORS; i++) {
    const CkptSpec *s = &model_specs[i];
    const CkptTensor *t = ckpt_find(&c, s->name);
    CHECK(t && t->dtype == (sizeof(real) == 4 ? CKPT_F32 : CKPT_F64) && t->ndim == s->ndim, "tensor %s", s->name);
    real out[120];
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    CHECK(ckpt_read(&c, s->name, s->ndim, s->shape, out) == 0, "read %s: %s", s->name, c.error);
    CHECK(memcmp(out, model_data[i], sizeof(real) * (size_t)n) == 0, "tensor %s changed in the round trip", s->name);
  }
  CHECK(ckpt_meta(&c, "step") && strcmp(ckpt_meta(&c, "step"), "1200") == 0, "metadata step");
  CHECK(ckpt_meta(&c, "model") && strcmp(ckpt_meta(&c, "model"), model_meta[1].value) == 0,
        "metadata with escapes: '%s'", ckpt_meta(&c, "model") ? ckpt_meta(&c, "model") : "(none)");
  CHECK(ckpt_meta(&c, "empty") && ckpt_meta(&c, "empty")[0] == 0, "empty metadata value");
  CHECK(ckpt_meta(&c, "lr") == NULL, "a key that is not there");
  ckpt_close(&c);
  long size;
  unsigned char *bytes = slurp(path, &size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
  CHECK((8 + n) % 8 == 0 && bytes[8] == '{', "the data starts at byte %llu, not 8-aligned",
        (unsigned long long)(8 + n));
  free(bytes);
}

/* Boxes of the 3-D tensor equal the same elements of the whole. */
static void test_box_reads(void) {
  char path[512];
  save_model(in_dir(path, "boxes.safetensors"), 0);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  const int64_t shape[3] = {4, 5, 6};
  const int64_t boxes[][6] = {{0, 0, 0, 4, 5, 6}, {2, 0, 0, 2, 5, 6}, {0, 1, 0, 4, 2, 6},
                              {1, 2, 3, 2, 3, 3}, {3, 4, 5, 1, 1, 1}, {0, 0, 2, 4, 5, 2}};
  for (unsigned b = 0; b < sizeof boxes / sizeof *boxes; b++) {
    const int64_t *begin = boxes[b], *count = boxes[b] + 3;
    real out[120];
    CHECK(ckpt_read_box(&c, "h.0.attn.w", 3, shape, begin, count, out) == 0, "box %u: %s", b, c.error);
    int bad = 0, k = 0;
    for (int64_t i = 0; i < count[0]; i++)
      for (int64_t j = 0; j < count[1]; j++)
        for (int64_t l = 0; l < count[2]; l++, k++)
          bad += out[k] != attn[((begin[0] + i) * 5 + begin[1] + j) * 6 + begin[2] + l];
    CHECK(bad == 0, "box %u: %d elements differ", b, bad);
  }
  const int64_t wshape[2] = {3, 5}, wbegin[2] = {1, 2}, wcount[2] = {2, 3};
  real w[6];
  CHECK(ckpt_read_box(&c, "wte", 2, wshape, wbegin, wcount, w) == 0 && w[0] == wte[7] && w[5] == wte[14], "2-D box");
  ckpt_close(&c);
}

/* Data handed over in pieces that cross tensor boundaries gives the same file as whole tensors. */
static void test_streamed_write(void) {
  char whole[512], pieces[512];
  save_model(in_dir(whole, "whole.safetensors"), 2);
  real all[15 + 7 + 1 + 120];
  int64_t n = 0;
  for (int i = 0; i < MODEL_TENSORS; i++) {
    int64_t size = 1;
    for (int d = 0; d < model_specs[i].ndim; d++) size *= model_specs[i].shape[d];
    memcpy(all + n, model_data[i], sizeof(real) * (size_t)size);
    n += size;
  }
  CkptWriter w;
  CHECK(ckpt_write_begin(&w, in_dir(pieces, "pieces.safetensors"), model_specs, MODEL_TENSORS, model_meta, 3) == 0,
        "begin: %s", w.error);
  for (int64_t at = 0, step = 1; at < n; at += step, step = step * 2 + 1) {
    int64_t k = n - at < step ? n - at : step;
    CHECK(ckpt_write_data(&w, all + at, k) == 0, "data: %s", w.error);
  }
  CHECK(ckpt_write_end(&w) == 0, "end: %s", w.error);
  long a, b;
  unsigned char *x = slurp(whole, &a), *y = slurp(pieces, &b);
  CHECK(x && y && a == b && memcmp(x, y, (size_t)a) == 0, "the streamed file differs from the whole one");
  free(x), free(y);
}

/* Files of every floating-point dtype read converted to real (F16 and BF16 bits by hand: 1.5, -2.25,
 * 2^-24 and 65504 in F16; 1.5, -2.25, 2^-133 and 3·2^126 in BF16); a tensor of integers is in the
 * header but is not read. */
static void test_dtypes(void) {
  char path[512];
  float f32[4] = {1.5f, -2.25f, 3.0e-3f, 7.0f};
  double f64[4] = {1.0 / 3, -2.5, 1e-10, 123456.75};
  uint16_t f16[4] = {0x3E00, 0xC080, 0x0001, 0x7BFF}, bf16[4] = {0x3FC0, 0xC010, 0x0001, 0x7F40};
  int64_t i64[2] = {7, -7};
  unsigned char data[16 + 32 + 8 + 8 + 16];
  memcpy(data, f32, 16);
  memcpy(data + 16, f64, 32);
  memcpy(data + 48, f16, 8);
  memcpy(data + 56, bf16, 8);
  memcpy(data + 64, i64, 16);
  write_raw(in_dir(path, "dtypes.safetensors"),
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
            " \"b\" : { \"shape\" : [4], \"data_offsets\" : [16, 48], \"dtype\" : \"F64\" },"
            "\"c\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[48,56]},"
            "\"d\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[56,64]},"
            "\"n\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[64,80]} }  ",
            data, sizeof data);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  real a[4], b[4], h[4], g[4];
  const int64_t sa[2] = {2, 2}, sb[1] = {4}, sn[1] = {2};
  CHECK(ckpt_read(&c, "a", 2, sa, a) == 0 && ckpt_read(&c, "b", 1, sb, b) == 0 && ckpt_read(&c, "c", 1, sb, h) == 0 &&
            ckpt_read(&c, "d", 1, sb, g) == 0,
        "read: %s", c.error);
  const double want_f16[4] = {1.5, -2.25, 0x1p-24, 65504}, want_bf16[4] = {1.5, -2.25, 0x1p-133, 0x3p126};
  for (int i = 0; i < 4; i++) {
    CHECK(a[i] == (real)f32[i], "F32 element %d: %g", i, (double)a[i]);
    CHECK(b[i] == (real)f64[i], "F64 element %d: %g", i, (double)b[i]);
    CHECK(h[i] == (real)want_f16[i], "F16 element %d: %g", i, (double)h[i]);
    CHECK(g[i] == (real)want_bf16[i], "BF16 element %d: %g", i, (double)g[i]);
  }
  CHECK(c.nmeta == 0 && ckpt_find(&c, "a")->dtype == CKPT_F32 && ckpt_find(&c, "b")->dtype == CKPT_F64 &&
            ckpt_find(&c, "c")->dtype == CKPT_F16 && ckpt_find(&c, "d")->dtype == CKPT_BF16,
        "dtypes");
  char want[900];
  snprintf(want, sizeof want,
           "%s: tensor 'n' is I64; plait reads F32, F64, F16 and BF16, convert the checkpoint to one of them", path);
  CHECK(ckpt_read(&c, "n", 1, sn, a) == -1 && strcmp(c.error, want) == 0, "I64 read: '%s'", c.error);
  ckpt_close(&c);
}

/* A spec's dtype is what the file stores: each value rounded to it, read back as rounded. */
static void test_written_dtypes(void) {
  char path[512];
  static const CkptDtype kinds[4] = {CKPT_F32, CKPT_F64, CKPT_F16, CKPT_BF16};
  const real values[3] = {(real)(1.0 / 3), (real)-1000.5, (real)1e-3};
  /* 1/3, -1000.5 and 1e-3 rounded to nearest in each format */
  const double rounded[4][3] = {{(float)(real)(1.0 / 3), -1000.5, (float)(real)1e-3},
                                {(real)(1.0 / 3), -1000.5, (real)1e-3},
                                {0x1.554p-2, -1000.5, 0x1.064p-10},
                                {0x1.56p-2, -1000, 0x1.06p-10}};
  CkptSpec specs[4];
  const real *data[4] = {values, values, values, values};
  for (int k = 0; k < 4; k++) specs[k] = (CkptSpec){ckpt_dtype_name(kinds[k]), 1, {3}, kinds[k]};
  CkptWriter w;
  CHECK(ckpt_save(&w, in_dir(path, "written.safetensors"), specs, data, 4, NULL, 0) == 0, "save: %s", w.error);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  for (int k = 0; k < 4; k++) {
    real out[3];
    const int64_t shape[1] = {3};
    CHECK(ckpt_find(&c, specs[k].name) && ckpt_find(&c, specs[k].name)->dtype == kinds[k], "%s stored as another",
          specs[k].name);
    CHECK(ckpt_read(&c, specs[k].name, 1, shape, out) == 0, "read: %s", c.error);
    for (int i = 0; i < 3; i++)
      CHECK(out[i] == (real)rounded[k][i], "%s element %d: %a, want %a", specs[k].name, i, (double)out[i],
            rounded[k][i]);
  }
  ckpt_close(&c);
}

/* ckpt_open must fail with exactly "<path>: <expected>". */
static void expect_open_error(const char *path, const char *expected) {
  Ckpt c;
  char want[1200];
  snprintf(want, sizeof want, "%s: %s", path, expected);
  CHECK(ckpt_open(&c, path) == -1, "%s opened", path);
  CHECK(strcmp(c.error, want) == 0, "message\n  got  '%s'\n  want '%s'", c.error, want);
  CHECK(strchr(c.error, '\n') == NULL, "more than one line");
}

static void test_missing_and_foreign_files(void) {
  char path[512];
  expect_open_error(in_dir(path, "nothere.safetensors"),
                    "cannot open it (No such file or directory); give the path of a checkpoint file");
  expect_open_error(dir, "not a regular file (a directory); give the path of a checkpoint file");
  spill(in_dir(path, "text.safetensors"), "hello, this is a text file\n", 27);
  expect_open_error(path, "not a safetensors file (no JSON header after the 8-byte length); give a checkpoint file");
}

/* A good file cut at many points is "truncated" wherever the cut falls. */
static void test_truncated(void) {
  char good[512], cut[512];
  save_model(in_dir(good, "full.safetensors"), 1);
  long size;
  unsigned char *bytes = slurp(good, &size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
  long cuts[] = {0, 3, 7, 9, 40, (long)n + 7, (long)n + 8, (long)n + 9, (long)n + 100, size - 8, size - 1};
  in_dir(cut, "cut.safetensors");
  for (unsigned i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    spill(cut, bytes, (size_t)cuts[i]);
    Ckpt c;
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s: truncated: ", cut);
    CHECK(ckpt_open(&c, cut) == -1 && strncmp(c.error, prefix, strlen(prefix)) == 0, "cut at %ld of %ld: '%s'", cuts[i],
          size, c.error);
  }
  spill(cut, bytes, 5);
  expect_open_error(cut,
                    "truncated: 5 bytes, fewer than the 8 that start a safetensors file; the file was cut short, use "
                    "another checkpoint");
  spill(cut, bytes, 40);
  char want[300];
  snprintf(want, sizeof want,
           "truncated: the header needs %llu bytes but the file holds 32 after the length; the file "
           "was cut short, use another checkpoint",
           (unsigned long long)n);
  expect_open_error(cut, want);
  spill(cut, bytes, (size_t)size - 4);
  snprintf(want, sizeof want,
           "truncated: the tensors need %llu bytes of data but the file holds %llu; the file was "
           "cut short, use another checkpoint",
           (unsigned long long)(size - 8 - (long)n), (unsigned long long)(size - 12 - (long)n));
  expect_open_error(cut, want);
  free(bytes);
}

/* Headers that are not strict JSON, or miss the schema, each with its message. */
#define DAMAGED "; the file is damaged or not a checkpoint, use another one"

static void test_bad_headers(void) {
  static const struct {
    const char *json, *message;
  } cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}",
       "not a safetensors file: expected ',' or '}' at byte 53 of the header" DAMAGED},
      {"{a:1}", "not a safetensors file: expected a string at byte 1 of the header" DAMAGED},
      {"{\"a\" {}}", "not a safetensors file: expected ':' at byte 5 of the header" DAMAGED},
      {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", "not a safetensors file: tensor 'a' has no dtype" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", "not a safetensors file: tensor 'a' has no shape" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", "not a safetensors file: tensor 'a' has no data_offsets" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}",
       "not a safetensors file: tensor 'a' has an unknown field 'x'" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}",
       "not a safetensors file: tensor 'a' gives 'dtype' twice" DAMAGED},
      {"{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}",
       "tensor 'a' has dtype F4, which plait does not know (it reads F32, F64, F16 and BF16); convert the checkpoint "
       "to F32, F16 or BF16"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
       "not a safetensors file: tensor 'a' has 8 bytes of data_offsets but its shape and dtype need 12" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
       "not a safetensors file: tensor 'a' has data_offsets that are not [begin, end]" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
       "\"data_offsets\":[4,8]}}",
       "not a safetensors file: tensors 'a' and 'b' overlap" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       "not a safetensors file: bytes 0..4 before tensor 'a' belong to no tensor" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[0],"
       "\"data_offsets\":[8,8]}}",
       "not a safetensors file: tensor 'a' appears twice" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
       "not a safetensors file: expected a non-negative integer at byte 29 of the header" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}",
       "not a safetensors file: a number with a leading zero at byte 29 of the header" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}",
       "not a safetensors file: expected an integer at byte 30 of the header" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}",
       "not a safetensors file: too many numbers in a list at byte 45 of the header" DAMAGED},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x",
       "not a safetensors file: text after the closing '}' at byte 55 of the header" DAMAGED},
      {"{\"__metadata__\":{\"k\":1}}", "not a safetensors file: metadata 'k' is not a string" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", "not a safetensors file: metadata 'k' appears twice" DAMAGED},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", "not a safetensors file: __metadata__ appears twice" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"a\tb\"}}",
       "not a safetensors file: a control character in a string at byte 24 of the header" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"a\\qb\"}}",
       "not a safetensors file: an unknown escape in a string at byte 25 of the header" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"\\udc00\"}}",
       "not a safetensors file: a lone low surrogate at byte 28 of the header" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"\\u00\"}}",
       "not a safetensors file: a \\u escape without four hex digits at byte 26 of the header" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"\xff\"}}",
       "not a safetensors file: text that is not UTF-8 at byte 23 of the header" DAMAGED},
      {"{\"__metadata__\":{\"k\":\"abc}}",
       "not a safetensors file: an unterminated string at byte 27 of the header" DAMAGED},
      {"[]", "not a safetensors file (no JSON header after the 8-byte length); give a checkpoint file"},
  };
  char path[512];
  in_dir(path, "bad.safetensors");
  unsigned char data[8] = {0};
  for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
    write_raw(path, cases[i].json, data, 8);
    expect_open_error(path, cases[i].message);
  }
  write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "the well-formed header of the cases above is refused: %s", c.error);
  ckpt_close(&c);
  unsigned char more[12] = {0};
  write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", more, 12);
  expect_open_error(
      path,
      "not a safetensors file: 4 bytes follow the last tensor's data; the file is damaged, use another checkpoint");
  write_raw(path, "{\"a\\nb\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,1]}}", data, 1);
  expect_open_error(path, "tensor 'a?b' has dtype Q9, which plait does not know (it reads F32, F64, F16 and BF16); "
                          "convert the checkpoint to F32, F16 or BF16");
  write_raw(path, "{\"__metadata__\":{\"k\\u00e9\\ud83d\\ude00\":\"v\"}}", NULL, 0);
  CHECK(ckpt_open(&c, path) == 0, "escapes: %s", c.error);
  CHECK(c.nmeta == 1 && strcmp(c.meta[0].key, "k\xc3\xa9\xf0\x9f\x98\x80") == 0, "\\u escapes decode to UTF-8");
  ckpt_close(&c);
}

static void test_lookup_errors(void) {
  char path[512], want[1200];
  save_model(in_dir(path, "lookup.safetensors"), 0);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  real out[120];
  const int64_t shape[2] = {5, 3}, right[2] = {3, 5}, begin[2] = {2, 0}, count[2] = {2, 5};
  CHECK(ckpt_read(&c, "wpe", 2, right, out) == -1, "a missing tensor was read");
  snprintf(want, sizeof want,
           "%s: no tensor named 'wpe'; the checkpoint was written for another model, load one of "
           "this model",
           path);
  CHECK(strcmp(c.error, want) == 0, "missing tensor: '%s'", c.error);
  CHECK(ckpt_read(&c, "wte", 2, shape, out) == -1, "a tensor of another shape was read");
  snprintf(want, sizeof want,
           "%s: tensor 'wte' has shape [3, 5] but the model expects [5, 3]; load a checkpoint of "
           "this model's configuration",
           path);
  CHECK(strcmp(c.error, want) == 0, "wrong shape: '%s'", c.error);
  const int64_t vec[1] = {15};
  CHECK(ckpt_read(&c, "wte", 1, vec, out) == -1 && strstr(c.error, "has shape [3, 5] but the model expects [15]"),
        "wrong rank: '%s'", c.error);
  CHECK(ckpt_read_box(&c, "wte", 2, right, begin, count, out) == -1, "a box past the end was read");
  snprintf(want, sizeof want, "%s: tensor 'wte': the box 2..4 on axis 0 lies outside its size 3; read within the shape",
           path);
  CHECK(strcmp(c.error, want) == 0, "box outside: '%s'", c.error);
  ckpt_close(&c);
}

/* The old checkpoint must be byte for byte what it was, and no temporary file left. */
static void check_untouched(const char *path, const unsigned char *old, long old_size, const char *what) {
  long size;
  unsigned char *now = slurp(path, &size);
  CHECK(now && size == old_size && memcmp(now, old, (size_t)size) == 0, "%s: the old checkpoint changed", what);
  CHECK(temp_files_left() == 0, "%s: %d temporary files left", what, temp_files_left());
  free(now);
}

static void test_atomic_replacement(void) {
  char path[512], want[1200];
  save_model(in_dir(path, "live.safetensors"), 10);
  long old_size;
  unsigned char *old = slurp(path, &old_size);
  CkptWriter w;

  /* Given up half way. */
  fill_model(20);
  CHECK(ckpt_write_begin(&w, path, model_specs, MODEL_TENSORS, model_meta, 3) == 0, "begin: %s", w.error);
  CHECK(ckpt_write_data(&w, wte, 15) == 0, "data: %s", w.error);
  ckpt_write_abort(&w);
  check_untouched(path, old, old_size, "abort");

  /* Ended before every element came. */
  CHECK(ckpt_write_begin(&w, path, model_specs, MODEL_TENSORS, NULL, 0) == 0, "begin: %s", w.error);
  CHECK(ckpt_write_data(&w, wte, 15) == 0, "data: %s", w.error);
  CHECK(ckpt_write_end(&w) == -1, "an incomplete checkpoint was written");
  snprintf(want, sizeof want, "%s: tensor 'h.0.ln.b' is missing 7 elements; write every tensor in full", path);
  CHECK(strcmp(w.error, want) == 0, "incomplete: '%s'", w.error);
  check_untouched(path, old, old_size, "incomplete");

  /* The disk refuses the writes (a file size limit: works as root too). */
  struct rlimit saved, small;
  getrlimit(RLIMIT_FSIZE, &saved);
  small = saved;
  small.rlim_cur = 256;
  signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &small);
  int rc = ckpt_save(&w, path, model_specs, model_data, MODEL_TENSORS, model_meta, 3);
  setrlimit(RLIMIT_FSIZE, &saved);
  CHECK(rc == -1, "a write past the file size limit succeeded");
  snprintf(want, sizeof want,
           "%s: cannot write the checkpoint (File too large); check that its folder exists, is "
           "writable and has space",
           path);
  CHECK(strcmp(w.error, want) == 0, "file too large: '%s'", w.error);
  check_untouched(path, old, old_size, "file size limit");

  /* A final name so long that no temporary name fits beside it. */
  char long_name[300], long_path[600];
  memset(long_name, 'c', 250);
  long_name[250] = 0;
  snprintf(long_path, sizeof long_path, "%s/%s", dir, long_name);
  spill(long_path, old, (size_t)old_size);
  CHECK(ckpt_save(&w, long_path, model_specs, model_data, MODEL_TENSORS, NULL, 0) == -1, "a too-long name worked");
  CHECK(strstr(w.error, "cannot write the checkpoint (File name too long)") != NULL, "long name: '%s'", w.error);
  check_untouched(long_path, old, old_size, "long name");
  unlink(long_path);

  /* A folder that does not exist. */
  char nowhere[512];
  CHECK(ckpt_save(&w, in_dir(nowhere, "no/such/dir/x.safetensors"), model_specs, model_data, MODEL_TENSORS, NULL, 0) ==
            -1,
        "wrote into a missing folder");
  snprintf(want, sizeof want,
           "%s: cannot write the checkpoint (No such file or directory); check that its folder exists, "
           "is writable and has space",
           nowhere);
  CHECK(strcmp(w.error, want) == 0, "missing folder: '%s'", w.error);

  /* A write that succeeds replaces the old checkpoint. */
  save_model(path, 30);
  Ckpt c;
  real first;
  const int64_t one[1] = {1};
  CHECK(ckpt_open(&c, path) == 0 && ckpt_read(&c, "scale", 0, one, &first) == 0, "reopen: %s", c.error);
  CHECK(first == 30 + (real)0.125, "the new checkpoint holds %g", (double)first);
  ckpt_close(&c);
  CHECK(temp_files_left() == 0, "temporary files left after a good write");
  free(old);
}

static void test_writer_errors(void) {
  char path[512], want[1200];
  CkptWriter w;
  const CkptSpec twice[2] = {{"a", 1, {2}, 0}, {"a", 1, {3}, 0}};
  CHECK(ckpt_write_begin(&w, in_dir(path, "twice.safetensors"), twice, 2, NULL, 0) == -1, "a name twice was accepted");
  snprintf(want, sizeof want, "%s: tensor 'a' is listed twice; give each tensor a name of its own", path);
  CHECK(strcmp(w.error, want) == 0, "twice: '%s'", w.error);
  const CkptSpec one[1] = {{"a", 1, {2}, 0}};
  real data[3] = {1, 2, 3};
  CHECK(ckpt_write_begin(&w, path, one, 1, NULL, 0) == 0, "begin: %s", w.error);
  CHECK(ckpt_write_data(&w, data, 3) == -1, "too much data was accepted");
  snprintf(want, sizeof want, "%s: 1 more elements than the tensors hold; write each tensor's elements once", path);
  CHECK(strcmp(w.error, want) == 0, "too much: '%s'", w.error);
  CHECK(temp_files_left() == 0 && access(path, F_OK) != 0, "a failed write left files");
  CHECK(ckpt_write_begin(&w, path, one, 1, NULL, 0) == 0 && ckpt_write_data(&w, data, 1) == 0, "begin: %s", w.error);
  snprintf(want, sizeof want, "%s: tensor 'a' is missing 1 elements; write every tensor in full", path);
  CHECK(ckpt_write_end(&w) == -1 && strcmp(w.error, want) == 0, "too little: '%s'", w.error);
  const CkptSpec integers[1] = {{"a", 1, {2}, CKPT_I64}};
  snprintf(want, sizeof want, "%s: tensor 'a' would be stored as I64; plait writes F32, F64, F16 or BF16", path);
  CHECK(ckpt_write_begin(&w, path, integers, 1, NULL, 0) == -1 && strcmp(w.error, want) == 0, "I64: '%s'", w.error);
  CHECK(temp_files_left() == 0 && access(path, F_OK) != 0, "a failed write left files");
}

/* ---- checksums ------------------------------------------------------------------------------------ */

/* The checksum streamed in pieces of any size equals the one of all the bytes at once, and any one bit
 * flipped, anywhere (in the last partial word too), changes it. */
static void test_hash(void) {
  unsigned char bytes[61];
  for (int i = 0; i < 61; i++) bytes[i] = (unsigned char)(i * 37 + 11);
  uint64_t whole = ckpt_hash(bytes, sizeof bytes);
  for (size_t piece = 1; piece <= 9; piece++) {
    CkptHash h;
    ckpt_hash_begin(&h);
    for (size_t at = 0; at < sizeof bytes; at += piece)
      ckpt_hash_add(&h, bytes + at, sizeof bytes - at < piece ? sizeof bytes - at : piece);
    CHECK(ckpt_hash_end(&h) == whole, "pieces of %zu bytes give another checksum", piece);
  }
  int missed = 0;
  for (int bit = 0; bit < 8 * (int)sizeof bytes; bit++) {
    bytes[bit / 8] ^= (unsigned char)(1 << bit % 8);
    missed += ckpt_hash(bytes, sizeof bytes) == whole;
    bytes[bit / 8] ^= (unsigned char)(1 << bit % 8);
  }
  CHECK(missed == 0, "%d single-bit flips left the checksum as it was", missed);
  const unsigned char zeros[9] = {0};
  CHECK(ckpt_hash(zeros, 8) != ckpt_hash(zeros, 9) && ckpt_hash(zeros, 0) != ckpt_hash(zeros, 1), "lengths of zeros");
}

/* Where tensor `name`'s bytes start in the file at path. */
static long data_offset(const char *path, const char *name) {
  Ckpt c;
  if (ckpt_open(&c, path) != 0) return -1;
  long at = (long)(c.data - c.file.data) + (long)ckpt_find(&c, name)->begin;
  ckpt_close(&c);
  return at;
}

/* Every tensor's checksum is in the metadata, as 16 hex digits of its bytes; one bit flipped in a tensor's
 * data is refused when any box of it is read, naming the tensor, while the others still read. */
static void test_checksums(void) {
  char path[512], damaged[512], key[64], want[1200];
  save_model(in_dir(path, "summed.safetensors"), 3);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  for (int i = 0; i < MODEL_TENSORS; i++) {
    snprintf(key, sizeof key, "checksum.%s", model_specs[i].name);
    const CkptTensor *t = ckpt_find(&c, model_specs[i].name);
    char digits[17];
    snprintf(digits, sizeof digits, "%016llx", (unsigned long long)ckpt_hash(c.data + t->begin, t->end - t->begin));
    CHECK(ckpt_meta(&c, key) && strcmp(ckpt_meta(&c, key), digits) == 0, "%s is '%s', the bytes' is %s", key,
          ckpt_meta(&c, key) ? ckpt_meta(&c, key) : "(none)", digits);
  }
  ckpt_close(&c);
  long size;
  unsigned char *bytes = slurp(path, &size);
  const int64_t shape[3] = {4, 5, 6}, corner[3] = {3, 4, 5}, one[3] = {1, 1, 1};
  long at = data_offset(path, "h.0.attn.w") + (long)sizeof(real) * 119 + 3; /* in the last element, far from the box read */
  bytes[at] ^= 0x04;
  spill(in_dir(damaged, "damaged.safetensors"), bytes, (size_t)size);
  free(bytes);
  real out[120];
  CHECK(ckpt_open(&c, damaged) == 0, "open: %s", c.error);
  snprintf(want, sizeof want,
           "%s: tensor 'h.0.attn.w' does not match its checksum: the file is damaged; use another checkpoint", damaged);
  CHECK(ckpt_read_box(&c, "h.0.attn.w", 3, shape, corner, one, out) == -1 && strcmp(c.error, want) == 0,
        "a box of the damaged tensor: '%s'", c.error);
  const int64_t wshape[2] = {3, 5};
  CHECK(ckpt_read(&c, "wte", 2, wshape, out) == 0, "an undamaged tensor: %s", c.error);
  ckpt_close(&c);
}

/* A checksum that is not 16 hex digits is refused on open; files without checksums (of other writers)
 * read, and so does one whose checksum names a tensor it lacks. */
static void test_checksum_metadata(void) {
  char path[512];
  float data[2] = {1, 2};
  write_raw(in_dir(path, "bad_sum.safetensors"),
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"__metadata__\":{\"checksum.a\":\"12345\"}}",
            data, sizeof data);
  expect_open_error(path, "metadata checksum.a = '12345' is not 16 hex digits; the file is damaged, use another checkpoint");
  write_raw(in_dir(path, "no_sums.safetensors"),
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"__metadata__\":{\"checksum.gone\":\"00000000000000ff\"}}",
            data, sizeof data);
  Ckpt c;
  real out[2];
  const int64_t shape[1] = {2};
  CHECK(ckpt_open(&c, path) == 0 && ckpt_read(&c, "a", 1, shape, out) == 0 && out[1] == 2, "no checksums: %s", c.error);
  ckpt_close(&c);
}

/* A write removes nothing but its own temporary: files that look like another write's temporaries stay
 * (a folder's own temporaries are own_folder's to remove, by their mark). */
static void test_write_removes_nothing_else(void) {
  char path[512], name[512];
  const char *kept[] = {"stale.safetensors.tmp.Ab3xY9", "stale.safetensors.tmp.backup", "stale.safetensors.tmp.Ab3xY",
                        "other.safetensors.tmp.Ab3xY9", "stale.safetensors.tmp"};
  for (size_t i = 0; i < 5; i++) spill(in_dir(name, kept[i]), "x", 1);
  save_model(in_dir(path, "stale.safetensors"), 1);
  for (size_t i = 0; i < 5; i++) {
    CHECK(access(in_dir(name, kept[i]), F_OK) == 0, "%s was removed", kept[i]);
    unlink(name);
  }
}

/* Metadata values read strictly: whole numbers are digits only and within their range (2^64 - 1 is, 2^64
 * is not), real numbers finite and from their floor, words from their list; each refusal is one line
 * naming the key and the value, and a key that is not there is told apart. */
static void test_metadata_values(void) {
  char path[512], error[1024];
  static const CkptMeta meta[] = {{"max", "18446744073709551615"}, {"over", "18446744073709551616"}, {"plus", "+1"},
                                  {"space", " 1"}, {"empty", ""}, {"ten", "10"}, {"rate", "3e-4"}, {"nan", "nan"},
                                  {"lines", "a\nb"}, {"word", "weights"}};
  CkptWriter w;
  CHECK(ckpt_save(&w, in_dir(path, "meta.safetensors"), NULL, NULL, 0, meta, 10) == 0, "save: %s", w.error);
  Ckpt c;
  CHECK(ckpt_open(&c, path) == 0, "open: %s", c.error);
  uint64_t whole = 0;
  double real_value = 0;
  int which = -1;
  CHECK(ckpt_meta_whole(&c, "max", 0, UINT64_MAX, &whole, error, sizeof error) == 0 && whole == UINT64_MAX, "2^64 - 1");
  const char *refused[] = {"over", "plus", "space", "empty", "rate"};
  for (int i = 0; i < 5; i++)
    CHECK(ckpt_meta_whole(&c, refused[i], 0, UINT64_MAX, &whole, error, sizeof error) == -1, "'%s' read as whole",
          ckpt_meta(&c, refused[i]));
  CHECK(ckpt_meta_whole(&c, "ten", 11, 20, &whole, error, sizeof error) == -1 &&
            strstr(error, "metadata ten = '10' is not a whole number from 11 to 20; the file is damaged") != NULL,
        "below the range: '%s'", error);
  CHECK(ckpt_meta_whole(&c, "absent", 0, 1, &whole, error, sizeof error) == 1, "an absent key");
  CHECK(ckpt_meta_real(&c, "rate", 0, &real_value, error, sizeof error) == 0 && real_value == 3e-4, "3e-4");
  CHECK(ckpt_meta_real(&c, "nan", 0, &real_value, error, sizeof error) == -1, "nan read as a number");
  CHECK(ckpt_meta_real(&c, "lines", 0, &real_value, error, sizeof error) == -1 && strchr(error, '\n') == NULL,
        "a value with a line break makes a message of two lines");
  const char *const words[] = {"weights", "weights and optimizer"};
  CHECK(ckpt_meta_word(&c, "word", words, 2, &which, error, sizeof error) == 0 && which == 0, "a known word");
  CHECK(ckpt_meta_word(&c, "ten", words, 2, &which, error, sizeof error) == -1 &&
            strstr(error, "metadata ten = '10' is not 'weights' or 'weights and optimizer'; ") != NULL,
        "an unknown word: '%s'", error);
  ckpt_close(&c);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  RUN(test_round_trip);
  RUN(test_box_reads);
  RUN(test_streamed_write);
  RUN(test_dtypes);
  RUN(test_written_dtypes);
  RUN(test_missing_and_foreign_files);
  RUN(test_truncated);
  RUN(test_bad_headers);
  RUN(test_lookup_errors);
  RUN(test_atomic_replacement);
  RUN(test_writer_errors);
  RUN(test_hash);
  RUN(test_checksums);
  RUN(test_checksum_metadata);
  RUN(test_write_removes_nothing_else);
  RUN(test_metadata_values);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  TEST_EXIT();
}
