/* encode.c: the encoder's steps before the merges: UTF-8 repair, added tokens, normalizer,
 * pre-tokenizer. */
#include "encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/utf8.h"

enum { JIT_STACK_START = 32 << 10, JIT_STACK_MOST = 64 << 20 };

static const char *text_at(const Tokenizer *t, int32_t id) { return t->pool + t->text[id].off; }

static int32_t trie_node(AddedTrie *trie, unsigned char byte) {
  if (trie->count % 256 == 0) {
    struct TrieNode *bigger = realloc(trie->nodes, (size_t)(trie->count + 256) * sizeof *bigger);
    if (!bigger) return -1;
    trie->nodes = bigger;
  }
  trie->nodes[trie->count] = (struct TrieNode){-1, -1, -1, byte};
  return trie->count++;
}

/* The child of node (-1: the root) for byte, made when missing. */
static int32_t trie_step(AddedTrie *trie, int32_t node, unsigned char byte) {
  int32_t before = -1, c = node < 0 ? trie->root[byte] : trie->nodes[node].child;
  while (node >= 0 && c >= 0 && trie->nodes[c].byte != byte) before = c, c = trie->nodes[c].sibling;
  if (c >= 0) return c;
  int32_t made = trie_node(trie, byte);
  if (made < 0) return -1;
  if (node < 0) trie->root[byte] = made;
  else if (before < 0) trie->nodes[node].child = made;
  else trie->nodes[before].sibling = made;
  return made;
}

/* Puts added token i into its trie: a normalized token as the normalizer writes it. */
static int trie_add(Encoder *e, NormalizeBuffer *b, int32_t i) {
  const Tokenizer *t = e->tok;
  int normalized = t->added[i].normalized;
  AddedTrie *trie = &e->trie[normalized];
  const unsigned char *s;
  size_t len;
  if (normalize_text(b, normalized ? t->normal_form : UNICODE_FORM_NONE,
                     (const unsigned char *)text_at(t, t->added[i].id), t->text[t->added[i].id].len,
                     &s, &len))
    return -1;
  int32_t node = -1;
  for (size_t k = 0; k < len && (k == 0 || node >= 0); k++) node = trie_step(trie, node, s[k]);
  if (node < 0) return -1;
  trie->nodes[node].added = i;
  return 0;
}

static int build_tries(Encoder *e) {
  NormalizeBuffer b = {0};
  int rc = 0;
  for (int k = 0; k < 2; k++) memset(e->trie[k].root, 0xff, sizeof e->trie[k].root);
  for (int32_t i = 0; i < e->tok->nadded && rc == 0; i++) rc = trie_add(e, &b, i);
  normalize_free(&b);
  return rc;
}

int encoder_build(Encoder *e, const Tokenizer *t, const char *path, char *why, size_t size) {
  memset(e, 0, sizeof *e);
  e->tok = t;
  if (bpe_build(&e->bpe, t) || build_tries(e)) {
    snprintf(why, size, "out of memory reading the tokenizer %s", path);
    return encoder_free(e), -1;
  }
  for (int i = 0; i < t->nsteps; i++) {
    if (!t->steps[i].split && !t->steps[i].use_regex) continue;
    int code;
    PCRE2_SIZE at;
    e->step_re[i] = pcre2_compile((PCRE2_SPTR)(t->pool + t->steps[i].pattern.off),
                                  t->steps[i].pattern.len, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
    if (!e->step_re[i]) {
      unsigned char message[256];
      pcre2_get_error_message(code, message, sizeof message);
      snprintf(why, size, "%s: the pre-tokenizer's pattern does not compile at offset %zu (%s); "
               "fix the file", path, (size_t)at, (const char *)message);
      return encoder_free(e), -1;
    }
    pcre2_jit_compile(e->step_re[i], PCRE2_JIT_COMPLETE); /* without the JIT: interpreted */
  }
  return 0;
}

void encoder_free(Encoder *e) {
  bpe_free(&e->bpe);
  for (int i = 0; i < TOKENIZER_MAX_STEPS; i++) pcre2_code_free(e->step_re[i]);
  for (int k = 0; k < 2; k++) free(e->trie[k].nodes);
  memset(e, 0, sizeof *e);
}

int encode_worker_init(EncodeWorker *w, const Encoder *e) {
  memset(w, 0, sizeof *w);
  w->e = e;
  w->match = pcre2_match_data_create(2, NULL);
  w->context = pcre2_match_context_create(NULL);
  w->stack = pcre2_jit_stack_create(JIT_STACK_START, JIT_STACK_MOST, NULL);
  if (bpe_worker_init(&w->bpe, &e->bpe) || !w->match || !w->context || !w->stack) return -1;
  pcre2_jit_stack_assign(w->context, NULL, w->stack);
  return 0;
}

void encode_worker_free(EncodeWorker *w) {
  bpe_worker_free(&w->bpe);
  normalize_free(&w->normalized);
  pcre2_match_data_free(w->match);
  pcre2_match_context_free(w->context);
  pcre2_jit_stack_free(w->stack);
  free(w->repaired);
  free(w->prefixed);
  memset(w, 0, sizeof *w);
}

static int fail(EncodeWorker *w, const char *what) {
  snprintf(w->why, w->why_size, "%s", what);
  return -1;
}

static int grow(unsigned char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  unsigned char *bigger = realloc(*buf, need);
  if (!bigger) return -1;
  *buf = bigger, *cap = need;
  return 0;
}

static int run_steps(EncodeWorker *w, int step, const unsigned char *s, size_t len, IdList *out);

/* Each match of re over s[0..len) and each gap between matches, in order, through step + 1
 * (Split's Isolated behaviour; empty pieces dropped). */
static int split_on(EncodeWorker *w, const pcre2_code *re, int step, const unsigned char *s,
                    size_t len, IdList *out) {
  size_t at = 0, done = 0;
  while (at < len) {
    int rc = pcre2_match(re, s, len, at, PCRE2_NO_UTF_CHECK, w->match, w->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return fail(w, "the pre-tokenizer's pattern failed on the text (PCRE2 could not "
                            "match it: a piece too long for its stack); split the text");
    const PCRE2_SIZE *v = pcre2_get_ovector_pointer(w->match);
    if (v[0] > done && run_steps(w, step + 1, s + done, v[0] - done, out)) return -1;
    if (v[1] > v[0] && run_steps(w, step + 1, s + v[0], v[1] - v[0], out)) return -1;
    done = v[1] > done ? v[1] : done;
    if (v[1] > v[0]) at = v[1];
    else {
      uint32_t cp;
      int k = utf8_char(s + v[1], len - v[1], &cp);
      at = v[1] + (size_t)(k > 0 ? k : 1);
    }
  }
  return done < len ? run_steps(w, step + 1, s + done, len - done, out) : 0;
}

/* ByteLevel: a space put first when asked, its pattern's split when asked, then the merges. */
static int byte_level(EncodeWorker *w, int step, const unsigned char *s, size_t len, IdList *out) {
  const PreStep *p = &w->e->tok->steps[step];
  if (p->add_prefix_space && s[0] != ' ') {
    if (grow(&w->prefixed, &w->prefixed_cap, len + 1)) return fail(w, "out of memory");
    w->prefixed[0] = ' ';
    memcpy(w->prefixed + 1, s, len);
    s = w->prefixed, len++;
  }
  if (w->e->step_re[step]) return split_on(w, w->e->step_re[step], step, s, len, out);
  return bpe_word(&w->bpe, s, len, out) ? fail(w, "out of memory") : 0;
}

static int run_steps(EncodeWorker *w, int step, const unsigned char *s, size_t len, IdList *out) {
  const Tokenizer *t = w->e->tok;
  if (len == 0) return 0;
  if (step == t->nsteps) return bpe_word(&w->bpe, s, len, out) ? fail(w, "out of memory") : 0;
  if (t->steps[step].split) return split_on(w, w->e->step_re[step], step, s, len, out);
  return byte_level(w, step, s, len, out);
}

/* The longest added token starting at s[0..len): its index, its length in *n; -1 when none. */
static int32_t added_at(const AddedTrie *trie, const unsigned char *s, size_t len, size_t *n) {
  int32_t node = trie->root[s[0]], found = -1;
  for (size_t k = 1; node >= 0; k++) {
    if (trie->nodes[node].added >= 0) found = trie->nodes[node].added, *n = k;
    if (k == len) break;
    node = trie->nodes[node].child;
    while (node >= 0 && trie->nodes[node].byte != s[k]) node = trie->nodes[node].sibling;
  }
  return found;
}

/* Where the white space that ends s[from..end) begins. */
static size_t space_run_start(const unsigned char *s, size_t from, size_t end) {
  size_t start = from;
  for (size_t at = from; at < end;) {
    uint32_t cp;
    int k = utf8_char(s + at, end - at, &cp);
    at += (size_t)(k > 0 ? k : 1);
    if (k <= 0 || !utf8_is_space(cp)) start = at;
  }
  return start;
}

/* The length of the white space that begins s[0..len). */
static size_t space_run(const unsigned char *s, size_t len) {
  size_t at = 0;
  while (at < len) {
    uint32_t cp;
    int k = utf8_char(s + at, len - at, &cp);
    if (k <= 0 || !utf8_is_space(cp)) break;
    at += (size_t)k;
  }
  return at;
}

/* Pass k of the added tokens over s[0..len): matches become their ids, the text between them
 * goes to pass k + 1, and after the last pass to the pre-tokenizer. The normalized tokens' pass
 * reads the text as the normalizer writes it. */
static int split_added(EncodeWorker *w, int k, const unsigned char *s, size_t len, IdList *out) {
  const Tokenizer *t = w->e->tok;
  if (k == 1 && normalize_text(&w->normalized, t->normal_form, s, len, &s, &len))
    return fail(w, "out of memory");
  if (k == 2 || !w->e->trie[k].nodes) return k == 2 ? run_steps(w, 0, s, len, out)
                                                     : split_added(w, k + 1, s, len, out);
  size_t done = 0;
  for (size_t at = 0; at < len;) {
    size_t n;
    int32_t a = added_at(&w->e->trie[k], s + at, len - at, &n);
    if (a < 0) {
      at++;
      continue;
    }
    size_t start = t->added[a].lstrip ? space_run_start(s, done, at) : at, stop = at + n;
    if (t->added[a].rstrip) stop += space_run(s + stop, len - stop);
    if (start > done && split_added(w, k + 1, s + done, start - done, out)) return -1;
    if (idlist_push(out, (uint32_t)t->added[a].id)) return fail(w, "out of memory");
    done = at = stop;
  }
  return done < len ? split_added(w, k + 1, s + done, len - done, out) : 0;
}

int encode_text(EncodeWorker *w, const unsigned char *text, size_t len, IdList *out, char *why,
                size_t size) {
  w->why = why, w->why_size = size;
  if (utf8_valid_prefix(text, len) < len) {
    if (grow(&w->repaired, &w->repaired_cap, 3 * len)) return fail(w, "out of memory");
    len = utf8_repair(text, len, w->repaired);
    text = w->repaired;
  }
  return split_added(w, 0, text, len, out);
}
