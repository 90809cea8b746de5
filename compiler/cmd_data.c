/* cmd_data.c: `plait data --bytes FILE... -o OUT.bin [--val-fraction F] [--format
 * llmc|megatron]`: text to byte-level token files; and `plait data --tokenizer T.json [--merges
 * merges.txt] [--eot TOKEN] [--workers N] FILE... -o OUT.bin ...`: text to BPE token files.
 *
 * With --bytes, the files' bytes, concatenated in the order given, are the tokens (0..255). With
 * --tokenizer, each file is a document: its end-of-text token, then its text's ids (data_text.h);
 * the ids are written as uint16 when the vocabulary fits, else as 32-bit tokens. The last F of them
 * (default 0.1, rounded to the nearest token) go to the validation file, the rest to OUT.bin.
 * The validation file is OUT.bin with its ".bin" replaced by ".val.bin" (OUT.val.bin; a name
 * without ".bin" gets ".val.bin" appended). With F = 0 no validation file is written.
 *
 * --format megatron writes Megatron-LM indexed datasets instead (indexfile.h): -o names the
 * prefix OUT of OUT.bin and OUT.idx, the validation part is OUT.val.bin and OUT.val.idx, and each
 * input file is one document (the file the split falls in ends one part's last document and
 * begins the other's first).
 *
 * --vocab N names the model's vocabulary: an id that is not below N (a byte, or a token of the
 * tokenizer) is refused, naming the file and where in it, and nothing is written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "data_text.h"
#include "ir/diag.h"
#include "infile.h"
#include "indexfile.h"
#include "outfile.h"
#include "tokenfile.h"

typedef struct {
  const char **inputs; /* the files after --bytes, or the words that are not flags */
  int ninputs;
  int bytes;            /* --bytes given */
  const char *stray;    /* the first word outside --bytes */
  TextJob text;         /* --tokenizer, --merges, --eot, --workers */
  const char *output;
  double val_fraction;
  int64_t vocab; /* --vocab N: every id must be below it; 0 when not given */
  int megatron;  /* --format megatron */
  char val_output[4096];
} DataArgs;

/* Where one part's tokens go: a token file, or an indexed dataset. */
typedef struct {
  int megatron;
  TokenWriter tokens;
  IndexWriter index;
} Sink;

static int sink_begin(Sink *s, int megatron, const char *path, int token_bytes, Diag *d) {
  s->megatron = megatron;
  return megatron ? indexfile_begin(&s->index, path, token_bytes, d)
                  : tokenfile_begin(&s->tokens, path, token_bytes, d);
}

static int sink_write(Sink *s, const uint32_t *tokens, int64_t n, Diag *d) {
  return s->megatron ? indexfile_write(&s->index, tokens, n, d)
                     : tokenfile_write(&s->tokens, tokens, n, d);
}

static int sink_end_document(Sink *s, Diag *d) {
  return s->megatron ? indexfile_end_document(&s->index, d) : 0;
}

static int sink_finish(Sink *s, Diag *d) {
  return s->megatron ? indexfile_finish(&s->index, d) : tokenfile_finish(&s->tokens, d);
}

static void sink_abort(Sink *s) {
  if (s->megatron) indexfile_abort(&s->index);
  else tokenfile_abort(&s->tokens);
}

/* "OUT: N tokens" or, for an indexed dataset, "OUT.bin and OUT.idx: N tokens in D documents". */
static void sink_report(const Sink *s, const char *path, int64_t tokens) {
  if (s->megatron)
    printf("%s.bin and %s.idx: %lld tokens in %lld document%s", path, path, (long long)tokens,
           (long long)s->index.documents, s->index.documents == 1 ? "" : "s");
  else printf("%s: %lld tokens", path, (long long)tokens);
}

/* --bytes takes every following word that is not a flag. */
static int parse_bytes(int argc, char **argv, int *i, DataArgs *a, Diag *d) {
  int start = a->ninputs;
  a->bytes = 1;
  while (*i + 1 < argc && argv[*i + 1][0] != '-') a->inputs[a->ninputs++] = argv[++*i];
  return a->ninputs == start
             ? diag(d, "--bytes takes one or more text files, as in --bytes book.txt")
             : 0;
}

static int parse_workers(const char *text, int *out, Diag *d) {
  char *end;
  long n = text ? strtol(text, &end, 10) : 0;
  if (!text || end == text || *end || n < 1 || n > 256)
    return diag(d, "--workers takes a whole number from 1 to 256, as in --workers 4; not '%s'",
                text ? text : "");
  *out = (int)n;
  return 0;
}

/* --tokenizer, --merges, --eot, --workers: each takes one value; 1 when arg is none of them. */
static int parse_text_flag(const char *arg, const char *value, DataArgs *a, Diag *d) {
  static const char *const flags[] = {"--tokenizer", "--merges", "--eot", "--workers"};
  static const char *const examples[] = {"tokenizer.json", "merges.txt", "'<|endoftext|>'", "4"};
  for (int k = 0; k < 4; k++) {
    if (strcmp(arg, flags[k]) != 0) continue;
    if (!value) return diag(d, "%s takes a value, as in %s %s", arg, arg, examples[k]);
    if (k == 0) a->text.tokenizer = value;
    if (k == 1) a->text.merges = value;
    if (k == 2) a->text.eot = value;
    return k == 3 ? parse_workers(value, &a->text.workers, d) : 0;
  }
  return 1;
}

static int parse_vocab(const char *text, int64_t *out, Diag *d) {
  char *end;
  errno = 0;
  long long n = text ? strtoll(text, &end, 10) : 0;
  if (!text || end == text || *end || errno || n < 1 || n > INT32_MAX)
    return diag(d, "--vocab takes the model's vocabulary, a whole number from 1 to %d, as in "
                "--vocab 50257; not '%s'", INT32_MAX, text ? text : "");
  *out = n;
  return 0;
}

static int parse_fraction(const char *text, double *out, Diag *d) {
  char *end;
  errno = 0;
  double f = text ? strtod(text, &end) : 0;
  if (!text || end == text || *end || errno || !(f >= 0 && f < 1))
    return diag(d,
                "--val-fraction takes a number from 0 up to (not including) 1, as in "
                "--val-fraction 0.1; not '%s'",
                text ? text : "");
  *out = f;
  return 0;
}

/* Either --bytes FILE... or --tokenizer T FILE...; the rest only with --tokenizer. */
static int check_args(const DataArgs *a, Diag *d) {
  if (a->bytes && a->text.tokenizer)
    return diag(d, "--bytes and --tokenizer do not go together: choose byte tokens or the "
                "tokenizer's");
  if (!a->text.tokenizer && a->stray)
    return diag(d, "unexpected argument '%s'; input files follow --bytes", a->stray);
  if (!a->text.tokenizer && (a->text.merges || a->text.eot))
    return diag(d, "%s goes with --tokenizer; add --tokenizer FILE",
                a->text.merges ? "--merges" : "--eot");
  if (a->ninputs == 0)
    return diag(d, a->text.tokenizer
                       ? "data needs input files: plait data --tokenizer T.json FILE... -o OUT.bin"
                       : "data needs input files: plait data --bytes FILE... -o OUT.bin");
  if (!a->output) return diag(d, "data needs an output file: add -o OUT.bin");
  return 0;
}

static int parse_args(int argc, char **argv, DataArgs *a, Diag *d) {
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "--bytes") == 0) {
      if (parse_bytes(argc, argv, &i, a, d)) return -1;
    } else if (strcmp(arg, "-o") == 0) {
      if (!value) return diag(d, "-o takes the output file, as in -o data.bin");
      a->output = argv[++i];
    } else if (strcmp(arg, "--format") == 0) {
      if (!value || (strcmp(value, "llmc") != 0 && strcmp(value, "megatron") != 0))
        return diag(d, "--format takes llmc or megatron, as in --format megatron");
      a->megatron = strcmp(value, "megatron") == 0;
      i++;
    } else if (strcmp(arg, "--val-fraction") == 0) {
      if (parse_fraction(value, &a->val_fraction, d)) return -1;
      i++;
    } else if (strcmp(arg, "--vocab") == 0) {
      if (parse_vocab(value, &a->vocab, d)) return -1;
      i++;
    } else if (arg[0] == '-') {
      int rc = parse_text_flag(arg, value, a, d);
      if (rc < 0) return -1;
      if (rc > 0) return diag(d, "unknown flag %s; see plait help", arg);
      i++;
    } else {
      if (!a->stray) a->stray = arg;
      a->inputs[a->ninputs++] = arg;
    }
  }
  return check_args(a, d);
}

/* OUT.bin -> OUT.val.bin; any other name gets ".val.bin" appended. An indexed dataset's prefix
 * OUT (which must not end in .bin or .idx) gets ".val". */
static int val_name(DataArgs *a, Diag *d) {
  size_t n = strlen(a->output);
  int bin = n > 4 && strcmp(a->output + n - 4, ".bin") == 0;
  if (a->megatron && (bin || (n > 4 && strcmp(a->output + n - 4, ".idx") == 0)))
    return diag(d, "with --format megatron, -o takes the prefix: -o %.*s writes %.*s.bin and "
                "%.*s.idx", (int)(n - 4), a->output, (int)(n - 4), a->output, (int)(n - 4),
                a->output);
  int stem = bin && !a->megatron ? (int)(n - 4) : (int)n;
  if (snprintf(a->val_output, sizeof a->val_output, "%.*s%s", stem, a->output,
               a->megatron ? ".val" : ".val.bin") >= (int)sizeof a->val_output)
    return diag(d, "-o %s: the name is too long", a->output);
  return 0;
}

/* The output (an indexed dataset's .bin and .idx) may not replace an input. */
static int check_output(const DataArgs *a, const char *path, Diag *d) {
  char bin[INDEXFILE_PATH], idx[INDEXFILE_PATH];
  if (!a->megatron) return outfile_check("-o", path, a->inputs, a->ninputs, d);
  if (indexfile_paths(path, bin, idx, d)) return -1;
  if (outfile_check("-o", bin, a->inputs, a->ninputs, d)) return -1;
  return outfile_check("-o", idx, a->inputs, a->ninputs, d);
}

/* The total size of the inputs; each must be a readable regular file (with --bytes, not all
 * empty). */
static int input_bytes(const DataArgs *a, int64_t *total, Diag *d) {
  *total = 0;
  for (int i = 0; i < a->ninputs; i++) {
    struct stat st;
    if (stat(a->inputs[i], &st) != 0)
      return diag(d, "cannot read '%s' (%s); check the path", a->inputs[i], strerror(errno));
    if (!S_ISREG(st.st_mode))
      return diag(d, "'%s' is not a regular file; give text files%s", a->inputs[i],
                  a->bytes ? " after --bytes" : "");
    *total += a->bytes ? st.st_size : 0;
  }
  if (a->bytes && *total == 0)
    return diag(d, "the input holds no bytes; give text files that are not empty");
  if (*total > TOKENFILE_MAX_TOKENS)
    return diag(d,
                "the input holds %lld bytes, more than the %d tokens a token file can count; give "
                "less text",
                (long long)*total, TOKENFILE_MAX_TOKENS);
  return 0;
}

/* Sends the tokens at global positions [pos, pos + n) to the training file below `split`, the
 * validation file from it on. */
static int route(Sink *train, Sink *val, int64_t split, int64_t pos, const uint32_t *tokens,
                 int64_t n, Diag *d) {
  int64_t to_train = pos >= split ? 0 : split - pos < n ? split - pos : n;
  if (to_train > 0 && sink_write(train, tokens, to_train, d)) return -1;
  if (n > to_train && sink_write(val, tokens + to_train, n - to_train, d)) return -1;
  return 0;
}

/* Refuses the first of n ids (the file's from position `at` on) that is not below the vocabulary
 * (no check when vocab is 0). */
static int check_ids(const DataArgs *a, const char *path, const uint32_t *ids, int64_t n,
                     int64_t at, Diag *d) {
  for (int64_t k = 0; a->vocab > 0 && k < n; k++)
    if (ids[k] >= a->vocab)
      return diag(d, "'%s': token %lld is id %u, not below the model's vocabulary %lld (--vocab); "
                  "give the model's own tokenizer, or a model of a larger vocabulary", path,
                  (long long)(at + k), ids[k], (long long)a->vocab);
  return 0;
}

/* Streams one input through route(), from global position *pos, and ends its document; refuses
 * a file that grew past `total`. */
static int copy_file(const DataArgs *a, const char *path, Sink *train, Sink *val, int64_t split,
                     int64_t total, int64_t *pos, Diag *d) {
  unsigned char bytes[65536];
  uint32_t tokens[sizeof bytes];
  char why[512];
  FILE *f = infile_open(path, why, sizeof why);
  if (!f) return diag(d, "'%s': %s; give text files after --bytes", path, why);
  int rc = 0;
  size_t n;
  int64_t start = *pos;
  while ((n = fread(bytes, 1, sizeof bytes, f)) > 0) {
    if (*pos + (int64_t)n > total) {
      rc = diag(d, "'%s' grew while it was copied; run plait data again", path);
      break;
    }
    for (size_t k = 0; k < n; k++) tokens[k] = bytes[k];
    if ((rc = check_ids(a, path, tokens, (int64_t)n, *pos - start, d)) != 0) break;
    if ((rc = route(train, val, split, *pos, tokens, (int64_t)n, d)) != 0) break;
    *pos += (int64_t)n;
  }
  if (rc == 0 && ferror(f))
    rc = diag(d, "cannot read '%s' (%s); check the file", path, strerror(errno));
  fclose(f);
  if (rc == 0) rc = sink_end_document(train, d);
  if (rc == 0) rc = sink_end_document(val, d);
  return rc;
}

/* The byte files, or the tokenizer's documents, through route(). */
static int copy_inputs(const DataArgs *a, const TextTokens *text, Sink *train, Sink *val,
                       int64_t split, int64_t total, Diag *d) {
  int64_t pos = 0;
  for (int i = 0; i < a->ninputs; i++) {
    if (!text) {
      if (copy_file(a, a->inputs[i], train, val, split, total, &pos, d)) return -1;
      continue;
    }
    const IdList *doc = &text->documents[i];
    if (check_ids(a, a->inputs[i], doc->ids, doc->count, 0, d)) return -1;
    if (route(train, val, split, pos, doc->ids, doc->count, d) || sink_end_document(train, d) ||
        sink_end_document(val, d))
      return -1;
    pos += doc->count;
  }
  if (pos != total)
    return diag(d, "the inputs shrank while they were copied; run plait data again");
  return 0;
}

static int write_outputs(const DataArgs *a, const TextTokens *text, int64_t total, Diag *d) {
  int64_t val_count = a->val_fraction > 0 ? llround((double)total * a->val_fraction) : 0;
  int64_t split = total - val_count;
  int token_bytes = text ? text->token_bytes : 2;
  if (a->val_fraction > 0 && (val_count == 0 || split == 0))
    return diag(d,
                "%lld %s split with --val-fraction %g leave a part empty; give more text or "
                "change --val-fraction",
                (long long)total, text ? "tokens" : "bytes", a->val_fraction);
  Sink train, val;
  memset(&train, 0, sizeof train);
  memset(&val, 0, sizeof val);
  val.megatron = a->megatron;
  int rc = check_output(a, a->output, d);
  if (rc == 0 && val_count > 0) rc = check_output(a, a->val_output, d);
  if (rc) return rc;
  rc = sink_begin(&train, a->megatron, a->output, token_bytes, d);
  if (rc == 0 && val_count > 0) rc = sink_begin(&val, a->megatron, a->val_output, token_bytes, d);
  if (rc == 0) rc = copy_inputs(a, text, &train, &val, split, total, d);
  if (rc == 0 && val_count > 0) rc = sink_finish(&val, d);
  if (rc == 0) rc = sink_finish(&train, d);
  sink_abort(&train);
  sink_abort(&val);
  if (rc) return rc;
  sink_report(&train, a->output, split);
  if (val_count > 0) printf("; "), sink_report(&val, a->val_output, val_count);
  printf("\n");
  return 0;
}

/* The tokenizer's ids of every document, then the files; refuses more tokens than a file counts. */
static int write_text(DataArgs *a, Diag *d) {
  TextTokens text;
  a->text.inputs = a->inputs, a->text.ninputs = a->ninputs;
  if (data_text_encode(&a->text, &text, d)) return -1;
  int rc = text.tokens > TOKENFILE_MAX_TOKENS
               ? diag(d, "the input makes %lld tokens, more than the %d a token file can count; "
                      "give less text", (long long)text.tokens, TOKENFILE_MAX_TOKENS)
               : write_outputs(a, &text, text.tokens, d);
  data_text_free(&text, a->ninputs);
  return rc;
}

int cmd_data(int argc, char **argv) {
  Diag d;
  DataArgs a = {.inputs = malloc(sizeof(char *) * (size_t)argc), .val_fraction = 0.1,
                .text = {.workers = 1}};
  int64_t total;
  int rc = a.inputs ? 0 : diag(&d, "out of memory");
  if (rc == 0) rc = parse_args(argc, argv, &a, &d);
  if (rc == 0) rc = val_name(&a, &d);
  if (rc == 0) rc = input_bytes(&a, &total, &d);
  if (rc == 0) rc = a.bytes ? write_outputs(&a, NULL, total, &d) : write_text(&a, &d);
  free(a.inputs);
  if (rc == 0) return 0;
  diag_print(d.msg);
  return 1;
}
