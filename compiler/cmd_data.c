/* cmd_data.c: `plait data --bytes FILE... -o OUT.bin [--val-fraction F]`: text to byte-level
 * token files.
 *
 * The files' bytes, concatenated in the order given, are the tokens (0..255). The last F of them
 * (default 0.1, rounded to the nearest token) go to the validation file, the rest to OUT.bin.
 * The validation file is OUT.bin with its ".bin" replaced by ".val.bin" (OUT.val.bin; a name
 * without ".bin" gets ".val.bin" appended). With F = 0 no validation file is written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "ir/diag.h"
#include "infile.h"
#include "outfile.h"
#include "tokenfile.h"

typedef struct {
  const char **inputs; /* the files after --bytes */
  int ninputs;
  const char *output;
  double val_fraction;
  char val_output[4096];
} DataArgs;

/* --bytes takes every following word that is not a flag. */
static int parse_bytes(int argc, char **argv, int *i, DataArgs *a, Diag *d) {
  int start = a->ninputs;
  while (*i + 1 < argc && argv[*i + 1][0] != '-') a->inputs[a->ninputs++] = argv[++*i];
  return a->ninputs == start
             ? diag(d, "--bytes takes one or more text files, as in --bytes book.txt")
             : 0;
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

static int parse_args(int argc, char **argv, DataArgs *a, Diag *d) {
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "--bytes") == 0) {
      if (parse_bytes(argc, argv, &i, a, d)) return -1;
    } else if (strcmp(arg, "-o") == 0) {
      if (!value) return diag(d, "-o takes the output file, as in -o data.bin");
      a->output = argv[++i];
    } else if (strcmp(arg, "--val-fraction") == 0) {
      if (parse_fraction(value, &a->val_fraction, d)) return -1;
      i++;
    } else if (arg[0] == '-') {
      return diag(d, "unknown flag %s; see plait help", arg);
    } else {
      return diag(d, "unexpected argument '%s'; input files follow --bytes", arg);
    }
  }
  if (a->ninputs == 0)
    return diag(d, "data needs input files: plait data --bytes FILE... -o OUT.bin");
  if (!a->output) return diag(d, "data needs an output file: add -o OUT.bin");
  return 0;
}

/* OUT.bin -> OUT.val.bin; any other name gets ".val.bin" appended. */
static int val_name(DataArgs *a, Diag *d) {
  size_t n = strlen(a->output);
  int stem = n > 4 && strcmp(a->output + n - 4, ".bin") == 0 ? (int)(n - 4) : (int)n;
  if (snprintf(a->val_output, sizeof a->val_output, "%.*s.val.bin", stem, a->output) >=
      (int)sizeof a->val_output)
    return diag(d, "-o %s: the name is too long", a->output);
  return 0;
}

/* The total size of the inputs; each must be a readable regular file. */
static int input_bytes(const DataArgs *a, int64_t *total, Diag *d) {
  *total = 0;
  for (int i = 0; i < a->ninputs; i++) {
    struct stat st;
    if (stat(a->inputs[i], &st) != 0)
      return diag(d, "cannot read '%s' (%s); check the path", a->inputs[i], strerror(errno));
    if (!S_ISREG(st.st_mode))
      return diag(d, "'%s' is not a regular file; give text files after --bytes", a->inputs[i]);
    *total += st.st_size;
  }
  if (*total == 0) return diag(d, "the input holds no bytes; give text files that are not empty");
  if (*total > TOKENFILE_MAX_TOKENS)
    return diag(d,
                "the input holds %lld bytes, more than the %d tokens a token file can count; give "
                "less text",
                (long long)*total, TOKENFILE_MAX_TOKENS);
  return 0;
}

/* Sends the tokens at global positions [pos, pos + n) to the training file below `split`, the
 * validation file from it on. */
static int route(TokenWriter *train, TokenWriter *val, int64_t split, int64_t pos,
                 const uint16_t *tokens, int64_t n, Diag *d) {
  int64_t to_train = pos >= split ? 0 : split - pos < n ? split - pos : n;
  if (to_train > 0 && tokenfile_write(train, tokens, to_train, d)) return -1;
  if (n > to_train && tokenfile_write(val, tokens + to_train, n - to_train, d)) return -1;
  return 0;
}

/* Streams one input through route(), from global position *pos; refuses a file that grew past
 * `total`. */
static int copy_file(const char *path, TokenWriter *train, TokenWriter *val, int64_t split,
                     int64_t total, int64_t *pos, Diag *d) {
  unsigned char bytes[65536];
  uint16_t tokens[sizeof bytes];
  char why[512];
  FILE *f = infile_open(path, why, sizeof why);
  if (!f) return diag(d, "'%s': %s; give text files after --bytes", path, why);
  int rc = 0;
  size_t n;
  while ((n = fread(bytes, 1, sizeof bytes, f)) > 0) {
    if (*pos + (int64_t)n > total) {
      rc = diag(d, "'%s' grew while it was copied; run plait data again", path);
      break;
    }
    for (size_t k = 0; k < n; k++) tokens[k] = bytes[k];
    if ((rc = route(train, val, split, *pos, tokens, (int64_t)n, d)) != 0) break;
    *pos += (int64_t)n;
  }
  if (rc == 0 && ferror(f))
    rc = diag(d, "cannot read '%s' (%s); check the file", path, strerror(errno));
  fclose(f);
  return rc;
}

static int copy_inputs(const DataArgs *a, TokenWriter *train, TokenWriter *val, int64_t split,
                       int64_t total, Diag *d) {
  int64_t pos = 0;
  for (int i = 0; i < a->ninputs; i++)
    if (copy_file(a->inputs[i], train, val, split, total, &pos, d)) return -1;
  if (pos != total)
    return diag(d, "the inputs shrank while they were copied; run plait data again");
  return 0;
}

static int write_outputs(const DataArgs *a, int64_t total, Diag *d) {
  int64_t val_count = a->val_fraction > 0 ? llround((double)total * a->val_fraction) : 0;
  int64_t split = total - val_count;
  if (a->val_fraction > 0 && (val_count == 0 || split == 0))
    return diag(d,
                "%lld bytes split with --val-fraction %g leave a part empty; give more text or "
                "change --val-fraction",
                (long long)total, a->val_fraction);
  TokenWriter train, val;
  memset(&val, 0, sizeof val);
  int rc = outfile_check("-o", a->output, a->inputs, a->ninputs, d);
  if (rc == 0 && val_count > 0) rc = outfile_check("-o", a->val_output, a->inputs, a->ninputs, d);
  if (rc) return rc;
  rc = tokenfile_begin(&train, a->output, d);
  if (rc == 0 && val_count > 0) rc = tokenfile_begin(&val, a->val_output, d);
  if (rc == 0) rc = copy_inputs(a, &train, &val, split, total, d);
  if (rc == 0 && val_count > 0) rc = tokenfile_finish(&val, d);
  if (rc == 0) rc = tokenfile_finish(&train, d);
  tokenfile_abort(&train);
  tokenfile_abort(&val);
  if (rc == 0 && val_count > 0)
    printf("%s: %lld tokens; %s: %lld tokens\n", a->output, (long long)split, a->val_output,
           (long long)val_count);
  else if (rc == 0)
    printf("%s: %lld tokens\n", a->output, (long long)split);
  return rc;
}

int cmd_data(int argc, char **argv) {
  Diag d;
  DataArgs a = {.inputs = malloc(sizeof(char *) * (size_t)argc), .val_fraction = 0.1};
  int64_t total;
  int rc = a.inputs ? 0 : diag(&d, "out of memory");
  if (rc == 0) rc = parse_args(argc, argv, &a, &d);
  if (rc == 0) rc = val_name(&a, &d);
  if (rc == 0) rc = input_bytes(&a, &total, &d);
  if (rc == 0) rc = write_outputs(&a, total, &d);
  free(a.inputs);
  if (rc == 0) return 0;
  diag_print(d.msg);
  return 1;
}
