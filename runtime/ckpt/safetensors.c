/* safetensors.c: writing checkpoints through a temporary file, with a checksum of every tensor,
 * and reading them: the header and boxes of tensors, each checked against its checksum. */
#include "ckpt/safetensors.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors_header.h"
#include "half.h"
#include "message.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "checkpoints store the machine's bytes as little-endian");

#define REAL_DTYPE (sizeof(real) == 4 ? CKPT_F32 : CKPT_F64)

static int64_t elements(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* "[2, 3]" */
static const char *shape_text(char *buf, size_t len, int ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < ndim && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (used < len) snprintf(buf + used, len - used, "]");
  return buf;
}

/* ---- writing
 * ------------------------------------------------------------------------------------ */

static int writer_fail(CkptWriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets "<path>: <message>", drops the temporary file, returns -1. */
static int writer_fail(CkptWriter *w, const char *fmt, ...) {
  int n = snprintf(w->error, sizeof w->error, "%s: ", w->path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->error + n, sizeof w->error - (size_t)n, fmt, ap);
  va_end(ap);
  ckpt_write_abort(w);
  return -1;
}

static int writer_io_fail(CkptWriter *w) {
  return writer_fail(
      w,
      "cannot write the checkpoint (%s); check that its folder exists, is writable and has space",
      strerror(errno));
}

static int check_specs(CkptWriter *w, const CkptSpec *tensors, int ntensors) {
  for (int i = 0; i < ntensors; i++) {
    const CkptSpec *t = &tensors[i];
    if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0)
      return writer_fail(w,
                         "tensor %d has no usable name ('%s'); give each tensor a name of its own",
                         i, t->name ? t->name : "");
    if (t->dtype && !ckpt_dtype_readable(t->dtype))
      return writer_fail(w, "tensor '%s' would be stored as %s; plait writes F32, F64, F16 or BF16",
                         t->name, ckpt_dtype_name(t->dtype));
    if (t->ndim < 0 || t->ndim > CKPT_MAX_DIMS)
      return writer_fail(w, "tensor '%s' has %d axes; a checkpoint holds 0 to %d", t->name, t->ndim,
                         CKPT_MAX_DIMS);
    for (int d = 0; d < t->ndim; d++)
      if (t->shape[d] < 0)
        return writer_fail(w, "tensor '%s' has a negative size on axis %d", t->name, d);
    for (int k = 0; k < i; k++)
      if (strcmp(tensors[k].name, t->name) == 0)
        return writer_fail(w, "tensor '%s' is listed twice; give each tensor a name of its own",
                           t->name);
  }
  return 0;
}

/* Creates the temporary file beside the final one: from the template, else PATH.tmp.XXXXXX. */
static int open_temp(CkptWriter *w, const char *template) {
  int n = template ? snprintf(w->temp, sizeof w->temp, "%s", template)
                   : snprintf(w->temp, sizeof w->temp, "%s.tmp.XXXXXX", w->path);
  if (n >= (int)sizeof w->temp) {
    w->temp[0] = 0;
    errno = ENAMETOOLONG;
    return writer_io_fail(w);
  }
  int fd = mkstemp(w->temp);
  if (fd < 0) {
    w->temp[0] = 0;
    return writer_io_fail(w);
  }
  fchmod(fd, 0644); /* mkstemp makes the file private; a checkpoint is for every user to read */
  w->file = fdopen(fd, "wb");
  if (!w->file) {
    close(fd);
    return writer_io_fail(w);
  }
  return 0;
}

/* The writer's own copy of the list: names, shapes and dtypes, for counting and encoding the
 * data. */
static int keep_specs(CkptWriter *w, const CkptSpec *tensors, int ntensors) {
  size_t names = 0;
  for (int i = 0; i < ntensors; i++) names += strlen(tensors[i].name) + 1;
  w->tensors = malloc(sizeof *w->tensors * (size_t)ntensors + names + 1);
  if (!w->tensors) return writer_fail(w, "out of memory while writing the header");
  char *text = (char *)(w->tensors + ntensors);
  for (int i = 0; i < ntensors; i++) {
    w->tensors[i] = tensors[i];
    w->tensors[i].name = strcpy(text, tensors[i].name);
    text += strlen(text) + 1;
  }
  w->ntensors = ntensors, w->current = -1, w->left = 0;
  return 0;
}

int ckpt_write_begin(CkptWriter *w, const char *path, const CkptSpec *tensors, int ntensors,
                     const CkptMeta *meta, int nmeta) {
  return ckpt_write_begin_as(w, path, NULL, tensors, ntensors, meta, nmeta);
}

int ckpt_write_begin_as(CkptWriter *w, const char *path, const char *temp, const CkptSpec *tensors,
                        int ntensors, const CkptMeta *meta, int nmeta) {
  memset(w, 0, sizeof *w);
  w->path = path;
  if (check_specs(w, tensors, ntensors) != 0) return -1;
  w->checksum_at = malloc(sizeof *w->checksum_at * (size_t)(ntensors + 1));
  w->header = w->checksum_at ? ckpt_header_format(tensors, ntensors, meta, nmeta, REAL_DTYPE,
                                                  w->checksum_at, &w->header_len)
                             : NULL;
  if (!w->header) return writer_fail(w, "out of memory while writing the header");
  unsigned char length[8];
  for (int i = 0; i < 8; i++) length[i] = (unsigned char)((uint64_t)w->header_len >> (8 * i));
  if (open_temp(w, temp) != 0) return -1;
  if (fwrite(length, 8, 1, w->file) != 1 || fwrite(w->header, w->header_len, 1, w->file) != 1)
    return writer_io_fail(w);
  return keep_specs(w, tensors, ntensors);
}

/* The finished tensor's checksum, as hex digits in its place in the header. */
static void record_checksum(CkptWriter *w) {
  char digits[CKPT_CHECKSUM_DIGITS + 1];
  snprintf(digits, sizeof digits, "%016llx", (unsigned long long)ckpt_hash_end(&w->hash));
  memcpy(w->header + w->checksum_at[w->current], digits, CKPT_CHECKSUM_DIGITS);
}

/* Moves on past finished tensors (and empty ones) to the one the next element belongs to. */
static void next_tensor(CkptWriter *w) {
  while (w->left == 0 && w->current < w->ntensors) {
    if (w->current >= 0) record_checksum(w);
    w->current++;
    if (w->current < w->ntensors)
      w->left = elements(w->tensors[w->current].ndim, w->tensors[w->current].shape);
    ckpt_hash_begin(&w->hash);
  }
}

/* n elements of data in `dtype`'s bytes. */
static void encode(const real *data, int64_t n, CkptDtype dtype, unsigned char *out) {
  for (int64_t i = 0; i < n; i++) {
    if (dtype == CKPT_F32) {
      float x = (float)data[i];
      memcpy(out + 4 * i, &x, 4);
    } else if (dtype == CKPT_F64) {
      double x = data[i];
      memcpy(out + 8 * i, &x, 8);
    } else {
      uint16_t x = dtype == CKPT_F16 ? half_f16_bits(data[i]) : half_bf16_bits(data[i]);
      memcpy(out + 2 * i, &x, 2);
    }
  }
}

/* Up to `n` elements of the current tensor, encoded a block at a time. */
static int write_run(CkptWriter *w, const real *data, int64_t n) {
  enum { BLOCK = 4096 };
  unsigned char bytes[BLOCK * 8];
  CkptDtype dtype = w->tensors[w->current].dtype ? w->tensors[w->current].dtype : REAL_DTYPE;
  int size = ckpt_dtype_size(dtype);
  for (int64_t done = 0; done < n; done += BLOCK) {
    int64_t count = n - done < BLOCK ? n - done : BLOCK;
    encode(data + done, count, dtype, bytes);
    ckpt_hash_add(&w->hash, bytes, (size_t)(size * count));
    if (fwrite(bytes, (size_t)size, (size_t)count, w->file) != (size_t)count)
      return writer_io_fail(w);
  }
  w->left -= n;
  return 0;
}

int ckpt_write_data(CkptWriter *w, const real *data, int64_t n) {
  if (!w->file)
    return writer_fail(w, "the checkpoint is not open for writing; begin it with ckpt_write_begin");
  if (n < 0) return writer_fail(w, "a negative count of elements (%lld)", (long long)n);
  while (n > 0) {
    next_tensor(w);
    if (w->current == w->ntensors)
      return writer_fail(
          w, "%lld more elements than the tensors hold; write each tensor's elements once",
          (long long)n);
    int64_t run = n < w->left ? n : w->left;
    if (write_run(w, data, run) != 0) return -1;
    data += run, n -= run;
  }
  return 0;
}

/* The folder that holds path ("dir/", or "." for a bare name). */
static void folder_of(const char *path, char *folder, size_t len) {
  const char *slash = strrchr(path, '/');
  snprintf(folder, len, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
}

/* Makes the rename itself durable: a sync of the folder that holds the file. */
static int sync_folder(const char *path) {
  char folder[4096];
  folder_of(path, folder, sizeof folder);
  int fd = open(folder, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -1;
  /* EINVAL: a file system that cannot sync folders */
  int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1;
  close(fd);
  return rc;
}

int ckpt_write_end(CkptWriter *w) {
  if (!w->file)
    return writer_fail(w, "the checkpoint is not open for writing; begin it with ckpt_write_begin");
  next_tensor(w);
  if (w->current < w->ntensors)
    return writer_fail(w, "tensor '%s' is missing %lld elements; write every tensor in full",
                       w->tensors[w->current].name, (long long)w->left);
  if (fseek(w->file, 8, SEEK_SET) != 0 || fwrite(w->header, w->header_len, 1, w->file) != 1 ||
      fflush(w->file) != 0 || fsync(fileno(w->file)) != 0)
    return writer_io_fail(w);
  int closed = fclose(w->file);
  w->file = NULL;
  if (closed != 0 || rename(w->temp, w->path) != 0) return writer_io_fail(w);
  w->temp[0] = 0;
  if (sync_folder(w->path) != 0) return writer_io_fail(w);
  ckpt_write_abort(w); /* frees what is left */
  return 0;
}

void ckpt_write_abort(CkptWriter *w) {
  if (w->file) fclose(w->file);
  w->file = NULL;
  free(w->tensors);
  free(w->header);
  free(w->checksum_at);
  w->tensors = NULL, w->header = NULL, w->checksum_at = NULL;
  if (w->temp[0]) unlink(w->temp);
  w->temp[0] = 0;
}

int ckpt_save(CkptWriter *w, const char *path, const CkptSpec *tensors, const real *const *data,
              int ntensors, const CkptMeta *meta, int nmeta) {
  if (ckpt_write_begin(w, path, tensors, ntensors, meta, nmeta) != 0) return -1;
  for (int i = 0; i < ntensors; i++)
    if (ckpt_write_data(w, data[i], elements(tensors[i].ndim, tensors[i].shape)) != 0) return -1;
  return ckpt_write_end(w);
}

/* ---- reading
 * ------------------------------------------------------------------------------------ */

static int reader_fail(Ckpt *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets "<path>: <message>" and returns -1. Control characters (a name read from a damaged file
 * may hold any) become '?', so the message stays one line. */
static int reader_fail(Ckpt *c, const char *fmt, ...) {
  int n = snprintf(c->error, sizeof c->error, "%s: ", c->path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error + n, sizeof c->error - (size_t)n, fmt, ap);
  va_end(ap);
  for (unsigned char *ch = (unsigned char *)c->error; *ch; ch++)
    if (*ch < 0x20) *ch = '?';
  return -1;
}

static int map_file(Ckpt *c) {
  char why[MESSAGE_TEXT];
  if (mapped_open(&c->file, c->path, why, sizeof why) != 0)
    return reader_fail(c, "%s; give the path of a checkpoint file", why);
  if (c->file.size < 8)
    return reader_fail(
        c,
        "truncated: %lld bytes, fewer than the 8 that start a safetensors file; the file was cut "
        "short, use another checkpoint",
        (long long)c->file.size);
  return 0;
}

/* The header's length, checked against the file: a header that runs past the end is a cut file,
 * bytes that do not open a JSON object are not a safetensors file. */
static int header_length(Ckpt *c, uint64_t *len) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | c->file.data[i];
  int json = c->file.size > 8 && c->file.data[8] == '{';
  if (c->file.size > 8 && !json)
    return reader_fail(
        c,
        "not a safetensors file (no JSON header after the 8-byte length); give a checkpoint file");
  if (n > c->file.size - 8)
    return reader_fail(
        c,
        "truncated: the header needs %llu bytes but the file holds %llu after the length; the file "
        "was cut short, use another checkpoint",
        (unsigned long long)n, (unsigned long long)(c->file.size - 8));
  *len = n;
  return 0;
}

/* The data region must hold exactly the tensors' bytes. */
static int check_data_size(Ckpt *c, const CkptHeader *h, uint64_t header_len) {
  uint64_t have = c->file.size - 8 - header_len;
  if (have < h->data_bytes)
    return reader_fail(
        c,
        "truncated: the tensors need %llu bytes of data but the file holds %llu; the file was cut "
        "short, use another checkpoint",
        (unsigned long long)h->data_bytes, (unsigned long long)have);
  if (have > h->data_bytes)
    return reader_fail(c,
                       "not a safetensors file: %llu bytes follow the last tensor's data; the file "
                       "is damaged, use "
                       "another checkpoint",
                       (unsigned long long)(have - h->data_bytes));
  return 0;
}

static int by_name(const void *key, const void *tensor) {
  return strcmp((const char *)key, ((const CkptTensor *)tensor)->name);
}

static CkptTensor *tensor_named(const Ckpt *c, const char *name) {
  return c->ntensors ? bsearch(name, c->tensors, (size_t)c->ntensors, sizeof *c->tensors, by_name)
                     : NULL;
}

/* Each tensor's checksum from the metadata: 16 hex digits, or the file is damaged. */
static int read_checksums(Ckpt *c) {
  size_t prefix = strlen(CKPT_CHECKSUM_PREFIX);
  for (int i = 0; i < c->nmeta; i++) {
    const CkptMeta *m = &c->meta[i];
    CkptTensor *t = strncmp(m->key, CKPT_CHECKSUM_PREFIX, prefix) == 0
                        ? tensor_named(c, m->key + prefix)
                        : NULL;
    if (!t) continue;
    if (strlen(m->value) != CKPT_CHECKSUM_DIGITS ||
        strspn(m->value, "0123456789abcdefABCDEF") != CKPT_CHECKSUM_DIGITS)
      return reader_fail(
          c,
          "metadata %s = '%.40s' is not %d hex digits; the file is damaged, use another checkpoint",
          m->key, m->value, CKPT_CHECKSUM_DIGITS);
    t->checksum = strtoull(m->value, NULL, 16);
    t->has_checksum = 1;
  }
  return 0;
}

int ckpt_open(Ckpt *c, const char *path) {
  memset(c, 0, sizeof *c);
  c->path = path;
  uint64_t len = 0;
  if (map_file(c) != 0 || header_length(c, &len) != 0) {
    ckpt_close(c);
    return -1;
  }
  CkptHeader h;
  if (ckpt_header_parse((const char *)c->file.data + 8, (size_t)len, &h) != 0) {
    reader_fail(c, "%s; %s", h.error, h.fix);
    ckpt_close(c);
    return -1;
  }
  c->tensors = h.tensors, c->ntensors = h.ntensors;
  c->meta = h.meta, c->nmeta = h.nmeta;
  c->strings = h.strings;
  c->data = c->file.data + 8 + len;
  if (check_data_size(c, &h, len) != 0 || read_checksums(c) != 0) {
    ckpt_close(c);
    return -1;
  }
  return 0;
}

void ckpt_close(Ckpt *c) {
  mapped_close(&c->file);
  free(c->tensors);
  free(c->meta);
  free(c->strings);
  c->tensors = NULL, c->meta = NULL, c->strings = NULL;
  c->ntensors = c->nmeta = 0;
}

static CkptTensor *find(Ckpt *c, const char *name) {
  CkptTensor *t = tensor_named(c, name);
  if (!t)
    reader_fail(c,
                "no tensor named '%s'; the checkpoint was written for another model, load one of "
                "this model",
                name);
  return t;
}

const CkptTensor *ckpt_find(Ckpt *c, const char *name) { return find(c, name); }

const char *ckpt_meta(const Ckpt *c, const char *key) {
  for (int i = 0; i < c->nmeta; i++)
    if (strcmp(c->meta[i].key, key) == 0) return c->meta[i].value;
  return NULL;
}

static int check_shape(Ckpt *c, const CkptTensor *t, int ndim, const int64_t *shape) {
  int same = t->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (same) return 0;
  char have[256], want[256];
  return reader_fail(
      c,
      "tensor '%s' has shape %s but the model expects %s; load a checkpoint of this model's "
      "configuration",
      t->name, shape_text(have, sizeof have, t->ndim, t->shape),
      shape_text(want, sizeof want, ndim, shape));
}

static int check_readable(Ckpt *c, const CkptTensor *t) {
  if (ckpt_dtype_readable(t->dtype)) return 0;
  return reader_fail(c,
                     "tensor '%s' is %s; plait reads F32, F64, F16 and BF16, convert the "
                     "checkpoint to one of them",
                     t->name, ckpt_dtype_name(t->dtype));
}

static int check_box(Ckpt *c, const CkptTensor *t, const int64_t *begin, const int64_t *count) {
  for (int d = 0; d < t->ndim; d++)
    if (begin[d] < 0 || count[d] < 0 || begin[d] + count[d] > t->shape[d])
      return reader_fail(
          c,
          "tensor '%s': the box %lld..%lld on axis %d lies outside its size %lld; read within the "
          "shape",
          t->name, (long long)begin[d], (long long)(begin[d] + count[d]), d,
          (long long)t->shape[d]);
  return 0;
}

/* out[i] = (real) the i-th stored element from src, for n elements (src may be unaligned). */
static void convert(const unsigned char *src, CkptDtype dtype, int64_t n, real *out) {
  for (int64_t i = 0; i < n; i++) {
    if (dtype == CKPT_F32) {
      float x;
      memcpy(&x, src + 4 * i, 4);
      out[i] = (real)x;
    } else if (dtype == CKPT_F64) {
      double x;
      memcpy(&x, src + 8 * i, 8);
      out[i] = (real)x;
    } else {
      uint16_t x;
      memcpy(&x, src + 2 * i, 2);
      out[i] = (real)(dtype == CKPT_F16 ? half_f16_value(x) : half_bf16_value(x));
    }
  }
}

/* The box is read as rows: every axis but the last fixed, a contiguous run along the last. */
static void read_rows(const Ckpt *c, const CkptTensor *t, const int64_t *begin,
                      const int64_t *count, real *out) {
  const unsigned char *base = c->data + t->begin;
  int last = t->ndim - 1, size = ckpt_dtype_size(t->dtype);
  int64_t width = t->ndim ? count[last] : 1, rows = t->ndim ? elements(last, count) : 1;
  for (int64_t r = 0; r < rows; r++) {
    int64_t index = t->ndim ? begin[last] : 0, stride = t->ndim ? t->shape[last] : 1, rest = r;
    for (int d = last - 1; d >= 0; d--) {
      index += (begin[d] + rest % count[d]) * stride;
      rest /= count[d];
      stride *= t->shape[d];
    }
    convert(base + index * size, t->dtype, width, out + r * width);
  }
}

/* The whole tensor's bytes against its checksum, once per open file. */
static int verify(Ckpt *c, CkptTensor *t) {
  if (!t->has_checksum || t->verified) return 0;
  if (ckpt_hash(c->data + t->begin, t->end - t->begin) != t->checksum)
    return reader_fail(
        c, "tensor '%s' does not match its checksum: the file is damaged; use another checkpoint",
        t->name);
  t->verified = 1;
  return 0;
}

/* Every value read is finite: a NaN or an infinity is named with its place in the tensor ([i,
 * j]). */
static int check_finite(Ckpt *c, const CkptTensor *t, const int64_t *begin, const int64_t *count,
                        const real *out) {
  int64_t n = elements(t->ndim, count), i = 0;
  while (i < n && isfinite(out[i])) i++;
  if (i == n) return 0;
  char place[256];
  int64_t at[CKPT_MAX_DIMS], rest = i;
  for (int d = t->ndim - 1; d >= 0; d--) {
    at[d] = begin[d] + rest % count[d];
    rest /= count[d];
  }
  return reader_fail(
      c,
      "tensor '%s' holds %s at %s: its values are damaged; use another checkpoint, or repair the "
      "tensor where it was made",
      t->name, isnan(out[i]) ? "a NaN" : "an infinity",
      shape_text(place, sizeof place, t->ndim, at));
}

int ckpt_read_box(Ckpt *c, const char *name, int ndim, const int64_t *shape, const int64_t *begin,
                  const int64_t *count, real *out) {
  CkptTensor *t = find(c, name);
  if (!t || check_shape(c, t, ndim, shape) != 0 || check_readable(c, t) != 0 ||
      check_box(c, t, begin, count) != 0 || verify(c, t) != 0)
    return -1;
  read_rows(c, t, begin, count, out);
  return check_finite(c, t, begin, count, out);
}

int ckpt_read(Ckpt *c, const char *name, int ndim, const int64_t *shape, real *out) {
  int64_t zero[CKPT_MAX_DIMS] = {0};
  return ckpt_read_box(c, name, ndim, shape, zero, shape, out);
}
