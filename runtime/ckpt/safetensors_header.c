/* safetensors_header.c: safetensors' dtypes, formatting a safetensors JSON header, and parsing
 * one strictly (a small JSON reader). */
#include "ckpt/safetensors_header.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/* ---- dtypes
 * -------------------------------------------------------------------------------------- */

static const struct {
  const char *name;
  int size;
} dtypes[CKPT_DTYPES] = {
    [CKPT_F32] = {"F32", 4},   [CKPT_F64] = {"F64", 8},         [CKPT_F16] = {"F16", 2},
    [CKPT_BF16] = {"BF16", 2}, [CKPT_F8_E4M3] = {"F8_E4M3", 1}, [CKPT_F8_E5M2] = {"F8_E5M2", 1},
    [CKPT_I8] = {"I8", 1},     [CKPT_U8] = {"U8", 1},           [CKPT_BOOL] = {"BOOL", 1},
    [CKPT_I16] = {"I16", 2},   [CKPT_U16] = {"U16", 2},         [CKPT_I32] = {"I32", 4},
    [CKPT_U32] = {"U32", 4},   [CKPT_I64] = {"I64", 8},         [CKPT_U64] = {"U64", 8},
};

const char *ckpt_dtype_name(CkptDtype dtype) {
  return dtype > 0 && dtype < CKPT_DTYPES ? dtypes[dtype].name : "?";
}
int ckpt_dtype_size(CkptDtype dtype) {
  return dtype > 0 && dtype < CKPT_DTYPES ? dtypes[dtype].size : 0;
}
int ckpt_dtype_readable(CkptDtype dtype) { return dtype >= CKPT_F32 && dtype <= CKPT_BF16; }

CkptDtype ckpt_dtype_named(const char *name) {
  for (int d = 1; d < CKPT_DTYPES; d++)
    if (strcmp(dtypes[d].name, name) == 0) return (CkptDtype)d;
  return 0;
}

/* ---- formatting
 * ---------------------------------------------------------------------------------- */

typedef struct {
  char *s;
  size_t len, cap;
  int failed; /* out of memory */
} Text;

static void put(Text *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->len + n > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n) cap *= 2;
    char *grown = realloc(t->s, cap);
    if (!grown) {
      t->failed = 1;
      return;
    }
    t->s = grown, t->cap = cap;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
}

static void putf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(Text *t, const char *fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  put(t, buf, (size_t)n);
}

/* A JSON string of prefix (plain text) and s, escaped as every JSON string plait writes
 * (escape.h). */
static void put_string(Text *t, const char *prefix, const char *s) {
  size_t n = strlen(prefix) + strlen(s);
  char *joined = malloc(n + 1), *escaped = malloc(ESCAPED_SIZE(n));
  if (joined && escaped) {
    snprintf(joined, n + 1, "%s%s", prefix, s);
    put(t, escaped, strlen(escape(ESC_JSON, joined, escaped, ESCAPED_SIZE(n))));
  } else {
    t->failed = 1;
  }
  free(joined);
  free(escaped);
}

/* The metadata object: the caller's entries, then a placeholder checksum per tensor whose
 * digits' offset in the text goes to checksum_at[i]. */
static void put_metadata(Text *t, const CkptSpec *tensors, int ntensors, const CkptMeta *meta,
                         int nmeta, size_t *checksum_at) {
  put(t, "\"__metadata__\":{", 16);
  for (int i = 0; i < nmeta; i++) {
    put_string(t, "", meta[i].key);
    put(t, ":", 1);
    put_string(t, "", meta[i].value);
    if (i + 1 < nmeta || ntensors) put(t, ",", 1);
  }
  for (int i = 0; i < ntensors; i++) {
    put_string(t, CKPT_CHECKSUM_PREFIX, tensors[i].name);
    put(t, ":\"", 2);
    checksum_at[i] = t->len;
    putf(t, "%0*d\"%s", CKPT_CHECKSUM_DIGITS, 0, i + 1 < ntensors ? "," : "");
  }
  put(t, "}}", 2);
}

char *ckpt_header_format(const CkptSpec *tensors, int ntensors, const CkptMeta *meta, int nmeta,
                         CkptDtype native, size_t *checksum_at, size_t *len) {
  Text t = {0};
  uint64_t offset = 0;
  put(&t, "{", 1);
  for (int i = 0; i < ntensors; i++) {
    CkptDtype dtype = tensors[i].dtype ? tensors[i].dtype : native;
    uint64_t bytes = (uint64_t)ckpt_dtype_size(dtype);
    for (int d = 0; d < tensors[i].ndim; d++) bytes *= (uint64_t)tensors[i].shape[d];
    put_string(&t, "", tensors[i].name);
    putf(&t, ":{\"dtype\":\"%s\",\"shape\":[", ckpt_dtype_name(dtype));
    for (int d = 0; d < tensors[i].ndim; d++)
      putf(&t, "%s%lld", d ? "," : "", (long long)tensors[i].shape[d]);
    putf(&t, "],\"data_offsets\":[%llu,%llu]},", (unsigned long long)offset,
         (unsigned long long)(offset + bytes));
    offset += bytes;
  }
  put_metadata(&t, tensors, ntensors, meta, nmeta, checksum_at);
  while ((8 + t.len) % 8) put(&t, " ", 1);
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  *len = t.len;
  return t.s;
}

/* ---- parsing
 * ------------------------------------------------------------------------------------- */

static const char *const fix_damaged = "the file is damaged or not a checkpoint, use another one";

typedef struct {
  const char *text;
  size_t len, pos;
  char *pool; /* decoded strings, each NUL-terminated: never longer than their JSON text */
  size_t pool_used;
  int tensor_cap, meta_cap, have_meta;
  CkptHeader *h;
} Parser;

static int fail(Parser *p, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(Parser *p, const char *fix, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->h->error, sizeof p->h->error, fmt, ap);
  va_end(ap);
  p->h->fix = fix;
  return -1;
}

/* Malformed JSON: what was expected, and where. */
static int syntax(Parser *p, const char *what) {
  return fail(p, fix_damaged, "not a safetensors file: %s at byte %zu of the header", what, p->pos);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void skip_space(Parser *p) {
  while (p->pos < p->len && is_space(p->text[p->pos])) p->pos++;
}

/* Consumes ch (after spaces) when it is next. */
static int take(Parser *p, char ch) {
  skip_space(p);
  if (p->pos < p->len && p->text[p->pos] == ch) {
    p->pos++;
    return 1;
  }
  return 0;
}

static int expect(Parser *p, char ch, const char *what) {
  return take(p, ch) ? 0 : syntax(p, what);
}

static int hex4(Parser *p, unsigned *code) {
  *code = 0;
  for (int i = 0; i < 4; i++, p->pos++) {
    char c = p->pos < p->len ? p->text[p->pos] : 0;
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return syntax(p, "a \\u escape without four hex digits");
    *code = *code << 4 | (unsigned)v;
  }
  return 0;
}

/* A code point as UTF-8: a lead byte that marks the length, then 6 bits per continuation byte. */
static void put_utf8(char **dst, unsigned code) {
  static const unsigned char lead[] = {0x00, 0xC0, 0xE0, 0xF0};
  int extra = code < 0x80 ? 0 : code < 0x800 ? 1 : code < 0x10000 ? 2 : 3;
  unsigned char *d = (unsigned char *)*dst;
  d[0] = (unsigned char)(lead[extra] | code >> (6 * extra));
  for (int i = 1; i <= extra; i++)
    d[i] = (unsigned char)(0x80 | (code >> (6 * (extra - i)) & 0x3F));
  *dst += extra + 1;
}

/* \uXXXX, with a surrogate pair for code points above 0xFFFF; the 'u' is consumed. */
static int unicode_escape(Parser *p, char **dst) {
  unsigned code, low;
  if (hex4(p, &code)) return -1;
  if (code >= 0xDC00 && code <= 0xDFFF) return syntax(p, "a lone low surrogate");
  if (code >= 0xD800 && code <= 0xDBFF) {
    if (p->pos + 2 > p->len || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u')
      return syntax(p, "a high surrogate without its low half");
    p->pos += 2;
    if (hex4(p, &low)) return -1;
    if (low < 0xDC00 || low > 0xDFFF) return syntax(p, "a high surrogate without its low half");
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  }
  if (code == 0) return syntax(p, "\\u0000 in a string");
  put_utf8(dst, code);
  return 0;
}

static int escaped_char(Parser *p, char **dst) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  char c = p->pos < p->len ? p->text[p->pos++] : 0;
  if (c == 'u') return unicode_escape(p, dst);
  const char *at = c ? strchr(from, c) : NULL;
  if (!at) return syntax(p, "an unknown escape in a string");
  *(*dst)++ = to[at - from];
  return 0;
}

/* A multi-byte UTF-8 sequence whose lead byte is at pos - 1: copied when well formed. */
static int utf8_sequence(Parser *p, unsigned char lead, char **dst) {
  int more = lead >= 0xC2 && lead <= 0xDF   ? 1
             : lead >= 0xE0 && lead <= 0xEF ? 2
             : lead >= 0xF0 && lead <= 0xF4 ? 3
                                            : -1;
  if (more < 0 || p->pos + (size_t)more > p->len) return syntax(p, "text that is not UTF-8");
  *(*dst)++ = (char)lead;
  for (int i = 0; i < more; i++) {
    unsigned char c = (unsigned char)p->text[p->pos++];
    if ((c & 0xC0) != 0x80) return syntax(p, "text that is not UTF-8");
    *(*dst)++ = (char)c;
  }
  return 0;
}

static int parse_string(Parser *p, const char **out) {
  if (expect(p, '"', "expected a string")) return -1;
  char *dst = p->pool + p->pool_used;
  *out = dst;
  for (;;) {
    if (p->pos >= p->len) return syntax(p, "an unterminated string");
    unsigned char c = (unsigned char)p->text[p->pos++];
    if (c == '"') break;
    if (c < 0x20) return syntax(p, "a control character in a string");
    if (c == '\\') {
      if (escaped_char(p, &dst)) return -1;
    } else if (c >= 0x80) {
      if (utf8_sequence(p, c, &dst)) return -1;
    } else {
      *dst++ = (char)c;
    }
  }
  *dst++ = 0;
  p->pool_used = (size_t)(dst - p->pool);
  return 0;
}

static int is_digit(Parser *p, size_t at) {
  return at < p->len && p->text[at] >= '0' && p->text[at] <= '9';
}

/* A non-negative integer below 2^62 (shapes and offsets). */
static int parse_count(Parser *p, uint64_t *out) {
  skip_space(p);
  if (!is_digit(p, p->pos)) return syntax(p, "expected a non-negative integer");
  if (p->text[p->pos] == '0' && is_digit(p, p->pos + 1))
    return syntax(p, "a number with a leading zero");
  uint64_t v = 0;
  while (is_digit(p, p->pos)) {
    v = v * 10 + (uint64_t)(p->text[p->pos++] - '0');
    if (v >= (uint64_t)1 << 62) return syntax(p, "a number too large");
  }
  char next = p->pos < p->len ? p->text[p->pos] : 0;
  if (next == '.' || next == 'e' || next == 'E') return syntax(p, "expected an integer");
  *out = v;
  return 0;
}

/* [n, n, ...] with at most max entries. */
static int parse_counts(Parser *p, uint64_t *values, int max, int *n) {
  *n = 0;
  if (expect(p, '[', "expected '['")) return -1;
  if (take(p, ']')) return 0;
  do {
    if (*n == max) return syntax(p, "too many numbers in a list");
    if (parse_count(p, &values[(*n)++])) return -1;
  } while (take(p, ','));
  return expect(p, ']', "expected ',' or ']'");
}

/* {"key": value, ...}: member() parses each value. */
typedef int (*MemberFn)(Parser *p, const char *key, void *ctx);

static int parse_object(Parser *p, MemberFn member, void *ctx) {
  if (expect(p, '{', "expected '{'")) return -1;
  if (take(p, '}')) return 0;
  do {
    const char *key;
    if (parse_string(p, &key) || expect(p, ':', "expected ':'") || member(p, key, ctx)) return -1;
  } while (take(p, ','));
  return expect(p, '}', "expected ',' or '}'");
}

/* A tensor's fields as they are read. */
typedef struct {
  CkptTensor t;
  int have_dtype, have_shape, have_offsets;
} TensorFields;

static int tensor_dtype(Parser *p, TensorFields *f) {
  const char *dtype;
  if (parse_string(p, &dtype)) return -1;
  f->t.dtype = ckpt_dtype_named(dtype);
  if (!f->t.dtype)
    return fail(
        p, "convert the checkpoint to F32, F16 or BF16",
        "tensor '%s' has dtype %s, which plait does not know (it reads F32, F64, F16 and BF16)",
        f->t.name, dtype);
  return 0;
}

static int tensor_field(Parser *p, const char *key, void *ctx) {
  TensorFields *f = ctx;
  uint64_t values[CKPT_MAX_DIMS];
  int n, *seen = strcmp(key, "dtype") == 0          ? &f->have_dtype
                 : strcmp(key, "shape") == 0        ? &f->have_shape
                 : strcmp(key, "data_offsets") == 0 ? &f->have_offsets
                                                    : NULL;
  if (!seen)
    return fail(p, fix_damaged, "not a safetensors file: tensor '%s' has an unknown field '%s'",
                f->t.name, key);
  if (*seen)
    return fail(p, fix_damaged, "not a safetensors file: tensor '%s' gives '%s' twice", f->t.name,
                key);
  *seen = 1;
  if (seen == &f->have_dtype) return tensor_dtype(p, f);
  if (parse_counts(p, values, CKPT_MAX_DIMS, &n)) return -1;
  if (seen == &f->have_shape) {
    f->t.ndim = n;
    for (int d = 0; d < n; d++) f->t.shape[d] = (int64_t)values[d];
    return 0;
  }
  if (n != 2 || values[1] < values[0])
    return fail(p, fix_damaged,
                "not a safetensors file: tensor '%s' has data_offsets that are not [begin, end]",
                f->t.name);
  f->t.begin = values[0], f->t.end = values[1];
  return 0;
}

/* Every field present, and the offsets hold exactly shape·dtype bytes. */
static int check_tensor(Parser *p, const TensorFields *f) {
  const char *missing = !f->have_dtype     ? "dtype"
                        : !f->have_shape   ? "shape"
                        : !f->have_offsets ? "data_offsets"
                                           : NULL;
  if (missing)
    return fail(p, fix_damaged, "not a safetensors file: tensor '%s' has no %s", f->t.name,
                missing);
  uint64_t bytes = (uint64_t)ckpt_dtype_size(f->t.dtype);
  for (int d = 0; d < f->t.ndim; d++) {
    uint64_t dim = (uint64_t)f->t.shape[d];
    if (dim && bytes > ((uint64_t)1 << 62) / dim)
      return fail(p, fix_damaged, "not a safetensors file: tensor '%s' is too large", f->t.name);
    bytes *= dim;
  }
  if (f->t.end - f->t.begin != bytes)
    return fail(
        p, fix_damaged,
        "not a safetensors file: tensor '%s' has %llu bytes of data_offsets but its shape and "
        "dtype need %llu",
        f->t.name, (unsigned long long)(f->t.end - f->t.begin), (unsigned long long)bytes);
  return 0;
}

static int add_tensor(Parser *p, const CkptTensor *t) {
  CkptHeader *h = p->h;
  if (h->ntensors == p->tensor_cap) {
    int cap = p->tensor_cap ? 2 * p->tensor_cap : 64;
    CkptTensor *grown = realloc(h->tensors, sizeof *grown * (size_t)cap);
    if (!grown) return fail(p, "free some memory", "out of memory reading the header");
    h->tensors = grown, p->tensor_cap = cap;
  }
  h->tensors[h->ntensors++] = *t;
  return 0;
}

static int parse_tensor(Parser *p, const char *name) {
  TensorFields f = {.t = {.name = name}};
  if (parse_object(p, tensor_field, &f) || check_tensor(p, &f)) return -1;
  return add_tensor(p, &f.t);
}

static int meta_entry(Parser *p, const char *key, void *ctx) {
  CkptHeader *h = p->h;
  (void)ctx;
  const char *value;
  skip_space(p);
  if (p->pos < p->len && p->text[p->pos] != '"')
    return fail(p, fix_damaged, "not a safetensors file: metadata '%s' is not a string", key);
  if (parse_string(p, &value)) return -1;
  for (int i = 0; i < h->nmeta; i++)
    if (strcmp(h->meta[i].key, key) == 0)
      return fail(p, fix_damaged, "not a safetensors file: metadata '%s' appears twice", key);
  if (h->nmeta == p->meta_cap) {
    int cap = p->meta_cap ? 2 * p->meta_cap : 16;
    CkptMeta *grown = realloc(h->meta, sizeof *grown * (size_t)cap);
    if (!grown) return fail(p, "free some memory", "out of memory reading the header");
    h->meta = grown, p->meta_cap = cap;
  }
  h->meta[h->nmeta++] = (CkptMeta){key, value};
  return 0;
}

static int top_member(Parser *p, const char *key, void *ctx) {
  (void)ctx;
  if (strcmp(key, "__metadata__") != 0) return parse_tensor(p, key);
  if (p->have_meta++)
    return fail(p, fix_damaged, "not a safetensors file: __metadata__ appears twice");
  return parse_object(p, meta_entry, NULL);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const CkptTensor *)a)->name, ((const CkptTensor *)b)->name);
}

static int by_offset(const void *a, const void *b) {
  const CkptTensor *x = *(const CkptTensor *const *)a, *y = *(const CkptTensor *const *)b;
  return x->begin != y->begin ? (x->begin > y->begin) - (x->begin < y->begin)
                              : (x->end > y->end) - (x->end < y->end);
}

/* The tensors in offset order must tile [0, data_bytes): each begins where the one before ends. */
static int check_tiling(Parser *p) {
  CkptHeader *h = p->h;
  const CkptTensor **order = malloc(sizeof *order * (size_t)(h->ntensors + 1));
  if (!order) return fail(p, "free some memory", "out of memory reading the header");
  for (int i = 0; i < h->ntensors; i++) order[i] = &h->tensors[i];
  qsort(order, (size_t)h->ntensors, sizeof *order, by_offset);
  uint64_t at = 0;
  int rc = 0;
  for (int i = 0; i < h->ntensors && rc == 0; i++) {
    if (order[i]->begin < at)
      rc = fail(p, fix_damaged, "not a safetensors file: tensors '%s' and '%s' overlap",
                order[i - 1]->name, order[i]->name);
    else if (order[i]->begin > at)
      rc = fail(p, fix_damaged,
                "not a safetensors file: bytes %llu..%llu before tensor '%s' belong to no tensor",
                (unsigned long long)at, (unsigned long long)order[i]->begin, order[i]->name);
    at = order[i]->end;
  }
  free(order);
  h->data_bytes = at;
  return rc;
}

/* Sorted by name for lookups; a name twice is an error. */
static int sort_names(Parser *p) {
  CkptHeader *h = p->h;
  if (h->ntensors > 1) qsort(h->tensors, (size_t)h->ntensors, sizeof *h->tensors, by_name);
  for (int i = 1; i < h->ntensors; i++)
    if (strcmp(h->tensors[i - 1].name, h->tensors[i].name) == 0)
      return fail(p, fix_damaged, "not a safetensors file: tensor '%s' appears twice",
                  h->tensors[i].name);
  return 0;
}

static int parse_header(Parser *p) {
  if (parse_object(p, top_member, NULL)) return -1;
  skip_space(p);
  if (p->pos != p->len) return syntax(p, "text after the closing '}'");
  return sort_names(p) || check_tiling(p) ? -1 : 0;
}

int ckpt_header_parse(const char *text, size_t len, CkptHeader *h) {
  memset(h, 0, sizeof *h);
  Parser p = {.text = text, .len = len, .h = h, .pool = malloc(len + 1)};
  h->strings = p.pool;
  if (!p.pool) return fail(&p, "free some memory", "out of memory reading the header");
  if (parse_header(&p) == 0) return 0;
  free(h->tensors);
  free(h->meta);
  free(h->strings);
  h->tensors = NULL, h->meta = NULL, h->strings = NULL;
  h->ntensors = h->nmeta = 0;
  return -1;
}
