/* json.c: the bounded JSON reader: recursive descent over the text, depth-limited, strings decoded
 * (escapes and surrogate pairs) into a pool no larger than the text. */
#include "text/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/utf8.h"

typedef struct {
  Json *j;
  const unsigned char *s;
  size_t len, at;
  int max_depth;
  char *why;
  size_t size;
} Parser;

static int fail(Parser *p, const char *what) {
  snprintf(p->why, p->size, "not JSON at byte %zu: %s", p->at, what);
  return -1;
}

static void skip_space(Parser *p) {
  while (p->at < p->len && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' ||
                            p->s[p->at] == '\r'))
    p->at++;
}

static int32_t new_node(Parser *p, JsonKind kind) {
  Json *j = p->j;
  if (j->count == j->capacity) {
    int32_t more = j->capacity ? 2 * j->capacity : 256;
    JsonNode *bigger = realloc(j->nodes, (size_t)more * sizeof *bigger);
    if (!bigger) return -1;
    j->nodes = bigger, j->capacity = more;
  }
  JsonNode *n = &j->nodes[j->count];
  memset(n, 0, sizeof *n);
  n->kind = kind, n->first = n->next = -1;
  return j->count++;
}

static void put_utf8(Parser *p, uint32_t cp) {
  p->j->pool_len += (size_t)utf8_put(cp, (unsigned char *)p->j->pool + p->j->pool_len);
}

static int hex4(Parser *p, uint32_t *v) {
  *v = 0;
  for (int i = 0; i < 4; i++, p->at++) {
    unsigned c = p->at < p->len ? p->s[p->at] : 0;
    int d = c >= '0' && c <= '9' ? (int)c - '0' : c >= 'a' && c <= 'f' ? (int)c - 'a' + 10
          : c >= 'A' && c <= 'F' ? (int)c - 'A' + 10 : -1;
    if (d < 0) return fail(p, "\\u takes four hex digits");
    *v = *v << 4 | (uint32_t)d;
  }
  return 0;
}

/* \uXXXX, with a high surrogate followed by its low one. */
static int unicode_escape(Parser *p) {
  uint32_t cp, low;
  if (hex4(p, &cp)) return -1;
  if (cp >= 0xdc00 && cp < 0xe000) return fail(p, "a lone low surrogate escape");
  if (cp >= 0xd800 && cp < 0xdc00) {
    if (p->at + 2 > p->len || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u')
      return fail(p, "a high surrogate escape without its low one");
    p->at += 2;
    if (hex4(p, &low)) return -1;
    if (low < 0xdc00 || low >= 0xe000)
      return fail(p, "a high surrogate escape without its low one");
    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
  }
  put_utf8(p, cp);
  return 0;
}

static int escape_char(Parser *p) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  unsigned c = p->at < p->len ? p->s[p->at] : 0;
  p->at++;
  if (c == 'u') return unicode_escape(p);
  const char *hit = c ? strchr(from, (int)c) : NULL;
  if (!hit) return p->at--, fail(p, "an unknown escape");
  p->j->pool[p->j->pool_len++] = to[hit - from];
  return 0;
}

/* A string after its opening quote, into the pool; its place in *off, *len. */
static int string_body(Parser *p, uint32_t *off, uint32_t *len) {
  *off = (uint32_t)p->j->pool_len;
  for (;;) {
    if (p->at >= p->len) return fail(p, "a string that does not end");
    unsigned c = p->s[p->at];
    if (c == '"') break;
    if (c < 0x20) return fail(p, "a control character inside a string");
    if (c == '\\') {
      p->at++;
      if (escape_char(p)) return -1;
      continue;
    }
    uint32_t cp;
    int k = utf8_char(p->s + p->at, p->len - p->at, &cp);
    if (k == 0) return fail(p, "a byte that is not UTF-8");
    memcpy(p->j->pool + p->j->pool_len, p->s + p->at, (size_t)k);
    p->j->pool_len += (size_t)k, p->at += (size_t)k;
  }
  p->at++;
  *len = (uint32_t)(p->j->pool_len - *off);
  p->j->pool[p->j->pool_len++] = 0;
  return 0;
}

static int number(Parser *p, int32_t n) {
  size_t start = p->at;
  const unsigned char *s = p->s;
  if (p->at < p->len && s[p->at] == '-') p->at++;
  size_t digits = p->at;
  while (p->at < p->len && s[p->at] >= '0' && s[p->at] <= '9') p->at++;
  if (p->at == digits || (s[digits] == '0' && p->at - digits > 1))
    return p->at = start, fail(p, "a malformed number");
  if (p->at < p->len && s[p->at] == '.') {
    size_t f = ++p->at;
    while (p->at < p->len && s[p->at] >= '0' && s[p->at] <= '9') p->at++;
    if (p->at == f) return fail(p, "a number with no digits after '.'");
  }
  if (p->at < p->len && (s[p->at] == 'e' || s[p->at] == 'E')) {
    p->at++;
    if (p->at < p->len && (s[p->at] == '+' || s[p->at] == '-')) p->at++;
    size_t e = p->at;
    while (p->at < p->len && s[p->at] >= '0' && s[p->at] <= '9') p->at++;
    if (p->at == e) return fail(p, "a number with no digits in its exponent");
  }
  char copy[64];
  size_t k = p->at - start;
  if (k >= sizeof copy) return p->at = start, fail(p, "a number of more than 63 characters");
  memcpy(copy, s + start, k);
  copy[k] = 0;
  p->j->nodes[n].number = strtod(copy, NULL);
  if (!isfinite(p->j->nodes[n].number))
    return p->at = start, fail(p, "a number beyond a double's range");
  return 0;
}

static int value(Parser *p, int depth, int32_t *out);

static int literal(Parser *p, const char *word, JsonKind kind, int boolean, int32_t *out) {
  size_t k = strlen(word);
  if (p->len - p->at < k || memcmp(p->s + p->at, word, k) != 0)
    return fail(p, "expected a value (an object, array, string, number, true, false or null)");
  p->at += k;
  if ((*out = new_node(p, kind)) < 0) return fail(p, "out of memory");
  p->j->nodes[*out].boolean = boolean;
  return 0;
}

/* Links child after *last under parent. */
static void append(Json *j, int32_t parent, int32_t *last, int32_t child) {
  if (*last < 0) j->nodes[parent].first = child;
  else j->nodes[*last].next = child;
  *last = child;
  j->nodes[parent].count++;
}

static int array(Parser *p, int depth, int32_t n) {
  int32_t last = -1, child;
  skip_space(p);
  if (p->at < p->len && p->s[p->at] == ']') return p->at++, 0;
  for (;;) {
    if (value(p, depth + 1, &child)) return -1;
    append(p->j, n, &last, child);
    skip_space(p);
    if (p->at < p->len && p->s[p->at] == ',') { p->at++; continue; }
    if (p->at < p->len && p->s[p->at] == ']') return p->at++, 0;
    return fail(p, "expected ',' or ']' in an array");
  }
}

static int object(Parser *p, int depth, int32_t n) {
  int32_t last = -1, child;
  uint32_t key, key_len;
  skip_space(p);
  if (p->at < p->len && p->s[p->at] == '}') return p->at++, 0;
  for (;;) {
    skip_space(p);
    if (p->at >= p->len || p->s[p->at] != '"') return fail(p, "expected a member's key (a string)");
    p->at++;
    if (string_body(p, &key, &key_len)) return -1;
    skip_space(p);
    if (p->at >= p->len || p->s[p->at] != ':') return fail(p, "expected ':' after a key");
    p->at++;
    if (value(p, depth + 1, &child)) return -1;
    p->j->nodes[child].key = key, p->j->nodes[child].key_len = key_len;
    append(p->j, n, &last, child);
    skip_space(p);
    if (p->at < p->len && p->s[p->at] == ',') { p->at++; continue; }
    if (p->at < p->len && p->s[p->at] == '}') return p->at++, 0;
    return fail(p, "expected ',' or '}' in an object");
  }
}

static int value(Parser *p, int depth, int32_t *out) {
  skip_space(p);
  if (p->at >= p->len) return fail(p, "the text ends where a value should be");
  unsigned c = p->s[p->at];
  if (c == 't') return literal(p, "true", JSON_BOOL, 1, out);
  if (c == 'f') return literal(p, "false", JSON_BOOL, 0, out);
  if (c == 'n') return literal(p, "null", JSON_NULL, 0, out);
  JsonKind kind = c == '{' ? JSON_OBJECT : c == '[' ? JSON_ARRAY : c == '"' ? JSON_STRING
                : JSON_NUMBER;
  if (kind == JSON_NUMBER && c != '-' && (c < '0' || c > '9'))
    return fail(p, "expected a value (an object, array, string, number, true, false or null)");
  if ((kind == JSON_OBJECT || kind == JSON_ARRAY) && depth >= p->max_depth) {
    char what[64];
    snprintf(what, sizeof what, "arrays and objects nested more than %d deep", p->max_depth);
    return fail(p, what);
  }
  if ((*out = new_node(p, kind)) < 0) return fail(p, "out of memory");
  if (kind == JSON_NUMBER) return number(p, *out);
  p->at++;
  if (kind == JSON_STRING) {
    uint32_t off, len;
    if (string_body(p, &off, &len)) return -1;
    p->j->nodes[*out].str = off, p->j->nodes[*out].str_len = len;
    return 0;
  }
  return kind == JSON_OBJECT ? object(p, depth, *out) : array(p, depth, *out);
}

int json_parse(Json *j, const char *text, size_t len, int max_depth, char *why, size_t size) {
  memset(j, 0, sizeof *j);
  Parser p = {j, (const unsigned char *)text, len, 0, max_depth, why, size};
  int32_t root;
  if (len >= UINT32_MAX) return fail(&p, "the text is too long");
  j->pool = malloc(len + 1);
  if (!j->pool) return fail(&p, "out of memory");
  int rc = value(&p, 0, &root);
  if (rc == 0) {
    skip_space(&p);
    if (p.at < len) rc = fail(&p, "more text after the value");
  }
  if (rc) json_free(j);
  return rc;
}

void json_free(Json *j) {
  free(j->nodes);
  free(j->pool);
  memset(j, 0, sizeof *j);
}

int32_t json_member(const Json *j, int32_t obj, const char *key) {
  if (obj < 0 || j->nodes[obj].kind != JSON_OBJECT) return -1;
  size_t k = strlen(key);
  for (int32_t c = j->nodes[obj].first; c >= 0; c = j->nodes[c].next)
    if (j->nodes[c].key_len == k && memcmp(j->pool + j->nodes[c].key, key, k) == 0) return c;
  return -1;
}

const char *json_text(const Json *j, int32_t node) { return j->pool + j->nodes[node].str; }

const char *json_key(const Json *j, int32_t node) { return j->pool + j->nodes[node].key; }

const char *json_kind_name(JsonKind kind) {
  static const char *const names[] = {"null", "a boolean", "a number", "a string", "an array",
                                      "an object"};
  return names[kind];
}
