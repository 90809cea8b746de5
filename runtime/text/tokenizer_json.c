/* tokenizer_json.c: the two file formats a tokenizer comes in: Hugging Face's tokenizer.json and
 * GPT-2's vocab.json + merges.txt; what each section may hold, and the refusal of the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infile.h"
#include "text/json.h"
#include "text/tokenizer.h"

static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+"
                                   "| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char SUPPORTED[] = "plait reads byte-level BPE tokenizers (model BPE, pre_tokenizer "
                                "ByteLevel or Sequence of Split and ByteLevel, normalizer null, "
                                "NFC, NFD, NFKC, NFKD or a Sequence of them, decoder ByteLevel: "
                                "GPT-2, Llama 3, Qwen2 and their kind)";

/* The whole file, at most TOKENIZER_MAX_FILE bytes, NUL-terminated. */
static char *read_whole(const TokenizerSource *src, size_t *len) {
  char why[512];
  int fd = infile_fd(src->path, why, sizeof why);
  if (fd < 0) return tokenizer_fail(src, "%s; give the path of a tokenizer file", why), NULL;
  char *text = malloc(TOKENIZER_MAX_FILE + 1);
  size_t n = 0;
  ssize_t got = 1;
  while (text && n <= TOKENIZER_MAX_FILE && got > 0) {
    got = read(fd, text + n, TOKENIZER_MAX_FILE + 1 - n);
    if (got > 0) n += (size_t)got;
  }
  close(fd);
  if (!text) return tokenizer_fail(src, "out of memory"), NULL;
  if (got < 0 || n > TOKENIZER_MAX_FILE) {
    free(text);
    if (got < 0) return tokenizer_fail(src, "cannot read it; check the file"), NULL;
    return tokenizer_fail(src, "more than %d MiB, larger than any tokenizer file plait reads; "
                          "give the right file", TOKENIZER_MAX_FILE >> 20), NULL;
  }
  text[n] = 0;
  *len = n;
  return text;
}

static int parse_file(Json *j, const TokenizerSource *src) {
  size_t len;
  char *text = read_whole(src, &len), why[256];
  if (!text) return -1;
  int rc = json_parse(j, text, len, TOKENIZER_MAX_DEPTH, why, sizeof why);
  free(text);
  if (rc) return tokenizer_fail(src, "%s; give a tokenizer file as written by Hugging Face "
                                "tokenizers", why);
  return 0;
}

/* Member key of obj, of the kind wanted (-1: any); absent is -1 without a message when optional. */
static int member(const Json *j, const TokenizerSource *src, int32_t obj, const char *where,
                  const char *key, int kind, int optional, int32_t *out) {
  *out = json_member(j, obj, key);
  if (*out < 0)
    return optional ? 0 : tokenizer_fail(src, "%s has no \"%s\"; %s", where, key, SUPPORTED);
  JsonKind k = j->nodes[*out].kind;
  if (kind >= 0 && (int)k != kind && !(optional && k == JSON_NULL))
    return tokenizer_fail(src, "%s.%s is %s, not %s; fix the file", where, key, json_kind_name(k),
                          json_kind_name((JsonKind)kind));
  if (k == JSON_NULL) *out = -1;
  return 0;
}

/* An optional boolean member (false when absent or null). */
static int flag(const Json *j, const TokenizerSource *src, int32_t obj, const char *where,
                const char *key, int *out) {
  int32_t n;
  if (member(j, src, obj, where, key, JSON_BOOL, 1, &n)) return -1;
  *out = n >= 0 && j->nodes[n].boolean;
  return 0;
}

static int is_type(const Json *j, int32_t obj, const char *type) {
  int32_t n = json_member(j, obj, "type");
  return n >= 0 && j->nodes[n].kind == JSON_STRING && strcmp(json_text(j, n), type) == 0;
}

static const char *type_of(const Json *j, int32_t obj) {
  int32_t n = json_member(j, obj, "type");
  return n >= 0 && j->nodes[n].kind == JSON_STRING ? json_text(j, n) : "(no type)";
}

static int id_value(const Json *j, const TokenizerSource *src, int32_t n, const char *what,
                    int64_t *id) {
  double v = j->nodes[n].number;
  if (j->nodes[n].kind != JSON_NUMBER || v != floor(v) || v < 0 || v >= TOKENIZER_MAX_IDS)
    return tokenizer_fail(src, "%s has id %s%g, not a whole number in 0..%d; fix the file", what,
                          j->nodes[n].kind == JSON_NUMBER ? "" : "of the wrong type ",
                          j->nodes[n].kind == JSON_NUMBER ? v : 0, TOKENIZER_MAX_IDS - 1);
  *id = (int64_t)v;
  return 0;
}

static int read_vocab(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t vocab) {
  for (int32_t c = j->nodes[vocab].first; c >= 0; c = j->nodes[c].next) {
    char what[128];
    snprintf(what, sizeof what, "vocabulary token '%.64s'", json_key(j, c));
    int64_t id;
    if (id_value(j, src, c, what, &id) ||
        tokenizer_set(t, src, id, json_key(j, c), j->nodes[c].key_len))
      return -1;
  }
  return tokenizer_finish_vocab(t, src);
}

/* "a b" strings or ["a", "b"] pairs. */
static int read_merges(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t merges) {
  int64_t rank = 0;
  for (int32_t c = j->nodes[merges].first; c >= 0; c = j->nodes[c].next, rank++) {
    const JsonNode *n = &j->nodes[c];
    if (n->kind == JSON_STRING) {
      const char *s = json_text(j, c), *space = memchr(s, ' ', n->str_len);
      if (!space || memchr(space + 1, ' ', n->str_len - (size_t)(space + 1 - s)))
        return tokenizer_fail(src, "merge %lld ('%.64s') is not two tokens split by one space; "
                              "fix the file", (long long)rank + 1, s);
      if (tokenizer_add_merge(t, src, s, (size_t)(space - s), space + 1,
                              n->str_len - (size_t)(space + 1 - s)))
        return -1;
    } else if (n->kind == JSON_ARRAY && n->count == 2 &&
               j->nodes[n->first].kind == JSON_STRING &&
               j->nodes[j->nodes[n->first].next].kind == JSON_STRING) {
      int32_t a = n->first, b = j->nodes[a].next;
      if (tokenizer_add_merge(t, src, json_text(j, a), j->nodes[a].str_len, json_text(j, b),
                              j->nodes[b].str_len))
        return -1;
    } else {
      return tokenizer_fail(src, "merge %lld is %s, not \"a b\" nor [\"a\", \"b\"]; fix the file",
                            (long long)rank + 1, json_kind_name(n->kind));
    }
  }
  return 0;
}

/* The options of model BPE plait does not follow must be off. */
static int check_model_options(const Json *j, const TokenizerSource *src, int32_t model) {
  static const char *const off[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 3; i++) {
    int32_t n = json_member(j, model, off[i]);
    if (n >= 0 && j->nodes[n].kind != JSON_NULL &&
        !(j->nodes[n].kind == JSON_STRING && j->nodes[n].str_len == 0))
      return tokenizer_fail(src, "model.%s is set; %s", off[i], SUPPORTED);
  }
  int byte_fallback;
  if (flag(j, src, model, "model", "byte_fallback", &byte_fallback)) return -1;
  if (byte_fallback) return tokenizer_fail(src, "model.byte_fallback is true; %s", SUPPORTED);
  return 0;
}

static int read_model(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t root) {
  int32_t model, vocab, merges;
  if (member(j, src, root, "the file", "model", JSON_OBJECT, 0, &model)) return -1;
  if (!is_type(j, model, "BPE"))
    return tokenizer_fail(src, "model type %s is not supported; %s", type_of(j, model), SUPPORTED);
  if (check_model_options(j, src, model) ||
      flag(j, src, model, "model", "ignore_merges", &t->ignore_merges) ||
      member(j, src, model, "model", "vocab", JSON_OBJECT, 0, &vocab) ||
      member(j, src, model, "model", "merges", JSON_ARRAY, 0, &merges))
    return -1;
  return read_vocab(t, j, src, vocab) || read_merges(t, j, src, merges);
}

static int keep_or_fail(Tokenizer *t, const TokenizerSource *src, const char *s, size_t len,
                        TextRef *ref) {
  return tokenizer_keep(t, s, len, ref) ? tokenizer_fail(src, "out of memory") : 0;
}

static int byte_level_step(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t n) {
  PreStep *s = &t->steps[t->nsteps++];
  memset(s, 0, sizeof *s);
  int32_t use_regex = json_member(j, n, "use_regex");
  s->use_regex = use_regex < 0 || (j->nodes[use_regex].kind == JSON_BOOL &&
                                   j->nodes[use_regex].boolean);
  if (flag(j, src, n, "ByteLevel", "add_prefix_space", &s->add_prefix_space)) return -1;
  return keep_or_fail(t, src, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, &s->pattern);
}

/* Split {pattern: {Regex: ...}, behavior: Isolated, invert: false}. */
static int split_step(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t n) {
  int32_t pattern, regex, behavior;
  int invert;
  if (member(j, src, n, "Split", "pattern", JSON_OBJECT, 0, &pattern) ||
      member(j, src, n, "Split", "behavior", JSON_STRING, 0, &behavior) ||
      flag(j, src, n, "Split", "invert", &invert))
    return -1;
  regex = json_member(j, pattern, "Regex");
  if (regex < 0 || j->nodes[regex].kind != JSON_STRING)
    return tokenizer_fail(src, "a Split whose pattern is not {\"Regex\": ...}; %s", SUPPORTED);
  if (strcmp(json_text(j, behavior), "Isolated") != 0 || invert)
    return tokenizer_fail(src, "a Split with behavior %s%s; plait reads behavior Isolated, invert "
                          "false", json_text(j, behavior), invert ? " and invert true" : "");
  PreStep *s = &t->steps[t->nsteps++];
  memset(s, 0, sizeof *s);
  s->split = 1;
  return keep_or_fail(t, src, json_text(j, regex), j->nodes[regex].str_len, &s->pattern);
}

/* ByteLevel, or Sequence of Splits ending with ByteLevel. */
static int read_pre_tokenizer(Tokenizer *t, const Json *j, const TokenizerSource *src,
                              int32_t root) {
  int32_t pre, list;
  if (member(j, src, root, "the file", "pre_tokenizer", JSON_OBJECT, 1, &pre)) return -1;
  if (pre >= 0 && is_type(j, pre, "ByteLevel")) return byte_level_step(t, j, src, pre);
  if (pre < 0 || !is_type(j, pre, "Sequence"))
    return tokenizer_fail(src, "pre_tokenizer %s is not supported; %s",
                          pre < 0 ? "null" : type_of(j, pre), SUPPORTED);
  if (member(j, src, pre, "pre_tokenizer", "pretokenizers", JSON_ARRAY, 0, &list)) return -1;
  for (int32_t c = j->nodes[list].first; c >= 0; c = j->nodes[c].next) {
    int last = j->nodes[c].next < 0;
    if (t->nsteps == TOKENIZER_MAX_STEPS)
      return tokenizer_fail(src, "more than %d pre-tokenizer steps; %s", TOKENIZER_MAX_STEPS,
                            SUPPORTED);
    if (last && is_type(j, c, "ByteLevel")) return byte_level_step(t, j, src, c);
    if (last || !is_type(j, c, "Split"))
      return tokenizer_fail(src, "pre_tokenizer step %s is not supported%s; %s", type_of(j, c),
                            last ? " last (ByteLevel ends the sequence)" : "", SUPPORTED);
    if (split_step(t, j, src, c)) return -1;
  }
  return tokenizer_fail(src, "an empty pre_tokenizer Sequence; %s", SUPPORTED);
}

static int read_added(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t root) {
  int32_t list, content, id_node;
  if (member(j, src, root, "the file", "added_tokens", JSON_ARRAY, 1, &list)) return -1;
  for (int32_t c = list < 0 ? -1 : j->nodes[list].first; c >= 0; c = j->nodes[c].next) {
    AddedToken a = {0};
    int64_t id;
    int single_word;
    if (j->nodes[c].kind != JSON_OBJECT)
      return tokenizer_fail(src, "added_tokens holds %s, not an object; fix the file",
                            json_kind_name(j->nodes[c].kind));
    if (member(j, src, c, "an added token", "content", JSON_STRING, 0, &content) ||
        member(j, src, c, "an added token", "id", JSON_NUMBER, 0, &id_node) ||
        id_value(j, src, id_node, "an added token", &id) ||
        flag(j, src, c, "an added token", "special", &a.special) ||
        flag(j, src, c, "an added token", "lstrip", &a.lstrip) ||
        flag(j, src, c, "an added token", "rstrip", &a.rstrip) ||
        flag(j, src, c, "an added token", "normalized", &a.normalized) ||
        flag(j, src, c, "an added token", "single_word", &single_word))
      return -1;
    if (single_word)
      return tokenizer_fail(src, "added token '%.64s' is single_word; plait reads added tokens "
                            "without single_word", json_text(j, content));
    if (tokenizer_add_token(t, src, id, json_text(j, content), j->nodes[content].str_len, &a))
      return -1;
  }
  return 0;
}

/* The form of a Unicode normalizer (NFC, NFD, NFKC, NFKD); UNICODE_FORM_NONE for another. */
static UnicodeForm unicode_form(const Json *j, int32_t n) {
  static const struct {
    const char *type;
    UnicodeForm form;
  } forms[] = {{"NFC", UNICODE_NFC}, {"NFD", UNICODE_NFD}, {"NFKC", UNICODE_NFKC},
               {"NFKD", UNICODE_NFKD}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
    if (is_type(j, n, forms[i].type)) return forms[i].form;
  return UNICODE_FORM_NONE;
}

/* null, a Unicode normalizer, or a Sequence of them. The forms of a sequence, applied in turn, are
 * one form: with compatibility mappings when one has them, composed when the last composes. */
static int read_normalizer(Tokenizer *t, const Json *j, const TokenizerSource *src, int32_t root) {
  int32_t n, list;
  if (member(j, src, root, "the file", "normalizer", JSON_OBJECT, 1, &n)) return -1;
  if (n < 0) return 0;
  if (!is_type(j, n, "Sequence")) {
    t->normal_form = unicode_form(j, n);
    return t->normal_form ? 0 : tokenizer_fail(src, "normalizer %s is not supported; %s",
                                               type_of(j, n), SUPPORTED);
  }
  if (member(j, src, n, "normalizer", "normalizers", JSON_ARRAY, 0, &list)) return -1;
  for (int32_t c = j->nodes[list].first; c >= 0; c = j->nodes[c].next) {
    UnicodeForm form = unicode_form(j, c);
    if (!form)
      return tokenizer_fail(src, "normalizer step %s is not supported; %s", type_of(j, c),
                            SUPPORTED);
    t->normal_form = (UnicodeForm)(UNICODE_NFD | (form & UNICODE_COMPOSE) |
                                   ((form | t->normal_form) & UNICODE_COMPAT));
  }
  return 0;
}

static int check_decoder(const Json *j, const TokenizerSource *src, int32_t root) {
  int32_t decoder = json_member(j, root, "decoder");
  if (decoder < 0 || !is_type(j, decoder, "ByteLevel"))
    return tokenizer_fail(src, "decoder %s is not supported; %s",
                          decoder < 0 ? "(none)" : type_of(j, decoder), SUPPORTED);
  return 0;
}

int tokenizer_read_hf(Tokenizer *t, const TokenizerSource *src) {
  Json j;
  if (parse_file(&j, src)) return -1;
  int rc = j.nodes[0].kind == JSON_OBJECT ? 0
           : tokenizer_fail(src, "the file is %s, not an object; give a tokenizer.json",
                            json_kind_name(j.nodes[0].kind));
  if (rc == 0) rc = read_model(t, &j, src, 0);
  if (rc == 0) rc = read_normalizer(t, &j, src, 0);
  if (rc == 0) rc = check_decoder(&j, src, 0);
  if (rc == 0) rc = read_pre_tokenizer(t, &j, src, 0);
  if (rc == 0) rc = read_added(t, &j, src, 0);
  json_free(&j);
  return rc;
}

/* merges.txt: "#version" lines skipped, then one "a b" a line. */
static int read_merges_txt(Tokenizer *t, const TokenizerSource *src) {
  size_t len;
  char *text = read_whole(src, &len);
  if (!text) return -1;
  int rc = 0;
  long line = 0;
  for (char *at = text; rc == 0 && at < text + len; line++) {
    char *end = memchr(at, '\n', (size_t)(text + len - at));
    if (!end) end = text + len;
    if (end > at && end[-1] == '\r') end--;
    size_t n = (size_t)(end - at);
    char *space = memchr(at, ' ', n);
    if (strncmp(at, "#version", 8) == 0) {
    } else if (!space || memchr(space + 1, ' ', (size_t)(end - space - 1)) || space == at ||
               space + 1 == end) {
      rc = tokenizer_fail(src, "line %ld is not two tokens split by one space; fix the file",
                          line + 1);
    } else {
      rc = tokenizer_add_merge(t, src, at, (size_t)(space - at), space + 1,
                               (size_t)(end - space - 1));
    }
    at = memchr(at, '\n', (size_t)(text + len - at));
    at = at ? at + 1 : text + len;
  }
  free(text);
  return rc;
}

int tokenizer_read_gpt2(Tokenizer *t, const TokenizerSource *src, const char *merges_path) {
  Json j;
  if (parse_file(&j, src)) return -1;
  int rc = j.nodes[0].kind == JSON_OBJECT ? 0
           : tokenizer_fail(src, "the file is %s, not an object of token: id; give GPT-2's "
                            "vocab.json", json_kind_name(j.nodes[0].kind));
  if (rc == 0) rc = read_vocab(t, &j, src, 0);
  json_free(&j);
  TokenizerSource merges = {merges_path, src->why, src->size};
  if (rc == 0) rc = read_merges_txt(t, &merges);
  if (rc == 0) {
    t->steps[0] = (PreStep){0, {0, 0}, 0, 1};
    t->nsteps = 1;
    rc = keep_or_fail(t, src, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, &t->steps[0].pattern);
  }
  int64_t eot = rc == 0 ? tokenizer_vocab_id(t, "<|endoftext|>", 13) : -1;
  AddedToken special = {.special = 1, .normalized = 1};
  if (eot >= 0) rc = tokenizer_add_token(t, src, eot, "<|endoftext|>", 13, &special);
  return rc;
}
