/* schedule_read.re: the reader of the schedule text form (an re2c lexer and a small parser):
 * "rank R:" lines of actions, communication groups in braces, ranges, an optional header block. */
#include "schedule/schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "infile.h"

/* The grammar (docs/schedules.md):
 *   file    := [ "schedule" [word] {key "=" int} "{" ] { "rank" int ":" {item} } [ "}" ]
 *   item    := action | action ".." int | "{" transfer {transfer} "}"
 *   action  := int ("F"|"B"|"SEND_F"|"RECV_F"|"SEND_B"|"RECV_B") int
 *            | int ("REDUCE_GRAD"|"EMBED_REDUCE") | "STEP"
 * Whitespace and newlines separate; '#' starts a comment. With a header, reading stops at its
 * closing brace, and lines before the header are skipped, so a whole plan printed as text reads
 * back. */

typedef enum {
  T_END,
  T_BAD,
  T_RANK,
  T_SCHEDULE,
  T_SETTING,
  T_WORD,
  T_ACTION,
  T_OPEN,
  T_CLOSE
} Token;

typedef struct {
  const unsigned char *cursor, *token, *limit; /* *limit == 0 ends the text */
  const unsigned char *line_start;
  int line;
  ActionKind kind; /* of the last T_ACTION */
} Lexer;

static Token lex(Lexer *l) {
  for (;;) {
    const unsigned char *YYMARKER;
    l->token = l->cursor;
    /*!re2c
      re2c:define:YYCTYPE = "unsigned char";
      re2c:define:YYCURSOR = "l->cursor";
      re2c:yyfill:enable = 0;

      digits = [0-9]+;
      range  = ".." digits;
      ident  = [a-zA-Z_][a-zA-Z0-9_]*;

      "\x00"                      { return l->cursor - 1 == l->limit ? T_END : T_BAD; }
      [ \t\r]+ | "#" [^\n\x00]*   { continue; }
      "\n"                        { l->line++; l->line_start = l->cursor; continue; }
      "rank" [ \t]* digits [ \t]* ":" { return T_RANK; }
      "schedule"                  { return T_SCHEDULE; }
      ident "=" digits            { return T_SETTING; }
      digits "F" digits range?      { l->kind = ACTION_F; return T_ACTION; }
      digits "B" digits range?      { l->kind = ACTION_B; return T_ACTION; }
      digits "SEND_F" digits range? { l->kind = ACTION_SEND_F; return T_ACTION; }
      digits "RECV_F" digits range? { l->kind = ACTION_RECV_F; return T_ACTION; }
      digits "SEND_B" digits range? { l->kind = ACTION_SEND_B; return T_ACTION; }
      digits "RECV_B" digits range? { l->kind = ACTION_RECV_B; return T_ACTION; }
      digits "REDUCE_GRAD"          { l->kind = ACTION_REDUCE_GRAD; return T_ACTION; }
      digits "EMBED_REDUCE"         { l->kind = ACTION_EMBED_REDUCE; return T_ACTION; }
      "STEP"                        { l->kind = ACTION_STEP; return T_ACTION; }
      "{"                           { return T_OPEN; }
      "}"                           { return T_CLOSE; }
      [a-zA-Z0-9_]+                 { return T_WORD; }
      *                             { return T_BAD; }
    */
  }
}

typedef struct {
  const char *name;
  Lexer lex;
  Token tok;
  Diag *d;
  Schedule *s; /* its ranks grow as "rank R:" lines come; the sizes are set at the end */
  int actions;
  int header, header_line, header_column; /* header: a "schedule ... {" block is open */
  int pp, vpp, microbatches;               /* from the header; -1 when not given */
  int max_stage, max_microbatch;
} Reader;

static int column(const Reader *rd) { return (int)(rd->lex.token - rd->lex.line_start) + 1; }

/* The current token as the user wrote it, for messages. */
static void describe(const Reader *rd, char *buf, size_t size) {
  const unsigned char *p = rd->lex.token;
  if (rd->tok == T_END) {
    snprintf(buf, size, "the end of the file");
  } else if (*p < 0x20 || *p >= 0x7f) {
    snprintf(buf, size, "byte 0x%02x", *p);
  } else {
    size_t n = 0;
    while (p + n < rd->lex.limit && n < 24 && p[n] > 0x20 && p[n] < 0x7f) n++;
    snprintf(buf, size, "'%.*s'", (int)n, (const char *)p);
  }
}

static int error_here(Reader *rd, const char *what) {
  return diag(rd->d, "%s:%d:%d: %s", rd->name, rd->lex.line, column(rd), what);
}

static int expected(Reader *rd, const char *what) {
  char found[64];
  describe(rd, found, sizeof found);
  return diag(rd->d, "%s:%d:%d: expected %s, found %s", rd->name, rd->lex.line, column(rd), what,
              found);
}

static void next(Reader *rd) { rd->tok = lex(&rd->lex); }

/* Reads digits at *p (advancing it); -1 with a message when the number exceeds `limit`. */
static int number(Reader *rd, const unsigned char **p, int limit, const char *what, int *out) {
  long long v = 0;
  for (; **p >= '0' && **p <= '9'; (*p)++)
    if ((v = v * 10 + (**p - '0')) > limit) {
      char msg[128];
      snprintf(msg, sizeof msg, "%s is too large (at most %d)", what, limit);
      return error_here(rd, msg);
    }
  *out = (int)v;
  return 0;
}

/* The current T_ACTION token as an action and the last microbatch of its range (= its own
 * without one). */
static int decode(Reader *rd, Action *a, int *last) {
  const unsigned char *p = rd->lex.token;
  *a = (Action){.kind = rd->lex.kind, .stage = -1, .microbatch = -1, .peer = -1};
  *last = -1;
  if (a->kind == ACTION_STEP) return 0;
  long long stages = rd->vpp > 0 && rd->pp > 0 ? (long long)rd->pp * rd->vpp : SCHEDULE_MAX_PAIRS;
  int stage_limit = stages < SCHEDULE_MAX_PAIRS ? (int)stages - 1 : SCHEDULE_MAX_PAIRS;
  if (number(rd, &p, stage_limit, "the stage", &a->stage)) return -1;
  while ((*p >= 'A' && *p <= 'Z') || *p == '_') p++;
  if (a->kind == ACTION_REDUCE_GRAD || a->kind == ACTION_EMBED_REDUCE) return 0;
  int mb_limit = rd->microbatches > 0 ? rd->microbatches - 1 : SCHEDULE_MAX_MICROBATCHES - 1;
  if (number(rd, &p, mb_limit, "the microbatch", &a->microbatch)) return -1;
  *last = a->microbatch;
  /* a range */
  if (p < rd->lex.cursor && (p += 2, number(rd, &p, mb_limit, "the microbatch", last))) return -1;
  if (*last < a->microbatch)
    return error_here(rd, "the range runs backwards; write it as first..last");
  return 0;
}

static int push(Reader *rd, Action a) {
  if (++rd->actions > SCHEDULE_MAX_ACTIONS)
    return error_here(rd, "too many actions in one schedule");
  schedule_push(rd->s, rd->s->pp - 1, a);
  if (a.stage > rd->max_stage) rd->max_stage = a.stage;
  if (a.microbatch > rd->max_microbatch) rd->max_microbatch = a.microbatch;
  return 0;
}

/* "{" transfer {transfer} "}": one group, posted at once. */
static int parse_group(Reader *rd) {
  int n = 0;
  for (next(rd); rd->tok != T_CLOSE; next(rd), n++) {
    Action a;
    int last;
    if (rd->tok != T_ACTION || !schedule_is_p2p(rd->lex.kind))
      return expected(rd, "a SEND_F, RECV_F, SEND_B or RECV_B action or '}' in this group");
    if (decode(rd, &a, &last)) return -1;
    if (last != a.microbatch) return error_here(rd, "ranges are not allowed inside a group");
    a.joined = n > 0;
    if (push(rd, a)) return -1;
  }
  if (n == 0) return error_here(rd, "empty group '{}'; a group holds at least one send or receive");
  next(rd);
  return 0;
}

static int parse_item(Reader *rd) {
  Action a;
  int last;
  if (rd->tok == T_OPEN) return parse_group(rd);
  if (decode(rd, &a, &last)) return -1;
  for (int j = a.microbatch; j <= last; j++) {
    a.microbatch = j;
    if (push(rd, a)) return -1;
  }
  next(rd);
  return 0;
}

static int parse_rank(Reader *rd) {
  const unsigned char *p = rd->lex.token + 4;
  int rank;
  while (*p == ' ' || *p == '\t') p++;
  if (number(rd, &p, SCHEDULE_MAX_RANKS - 1, "the rank", &rank)) return -1;
  if (rank != rd->s->pp) {
    char msg[96];
    snprintf(msg, sizeof msg, "expected 'rank %d:' here (ranks are listed in order from 0)",
             rd->s->pp);
    return error_here(rd, msg);
  }
  schedule_add_rank(rd->s);
  for (next(rd); rd->tok == T_ACTION || rd->tok == T_OPEN;)
    if (parse_item(rd)) return -1;
  return 0;
}

/* "schedule" [name] {key=value} "{" */
static int parse_header(Reader *rd) {
  rd->header_line = rd->lex.line;
  rd->header_column = column(rd);
  next(rd);
  if (rd->tok == T_WORD) next(rd);
  for (; rd->tok == T_SETTING; next(rd)) {
    const unsigned char *p = rd->lex.token,
                        *eq = (const unsigned char *)strchr((const char *)p, '=');
    size_t len = (size_t)(eq - p);
    int *field = len == 2 && !memcmp(p, "pp", 2)               ? &rd->pp
                 : len == 3 && !memcmp(p, "vpp", 3)            ? &rd->vpp
                 : len == 12 && !memcmp(p, "microbatches", 12) ? &rd->microbatches
                                                               : NULL;
    if (!field) return expected(rd, "pp=, vpp= or microbatches= in the schedule header");
    p = eq + 1;
    if (number(rd, &p, SCHEDULE_MAX_PAIRS, "the value", field)) return -1;
    if (*field < 1) return error_here(rd, "header values must be at least 1");
  }
  if (rd->tok != T_OPEN)
    return expected(rd, "'{' to open the schedule (or pp=, vpp=, microbatches=)");
  rd->header = 1;
  next(rd);
  return 0;
}

static int parse(Reader *rd) {
  next(rd);
  if (rd->tok == T_SCHEDULE && parse_header(rd)) return -1;
  while (rd->tok != T_END) {
    if (rd->tok == T_CLOSE && rd->header) return 0;
    if (rd->tok != T_RANK)
      return expected(rd, rd->s->pp ? "an action such as 0F3, '{' or 'rank N:'"
                                    : "'rank 0:' or a 'schedule {' header");
    if (parse_rank(rd)) return -1;
  }
  if (rd->header)
    return diag(rd->d, "%s:%d:%d: the schedule block opened here is not closed with '}'", rd->name,
                rd->header_line, rd->header_column);
  return 0;
}

/* Sizes from the header, or from the ranks listed and the largest stage and microbatch. */
static int finish(Reader *rd) {
  int pp = rd->s->pp;
  if (pp == 0)
    return diag(rd->d, "%s: the schedule lists no ranks; start with 'rank 0:'", rd->name);
  if (rd->pp > 0 && rd->pp != pp)
    return diag(rd->d, "%s:%d:%d: the header says pp=%d but %d ranks are listed", rd->name,
                rd->header_line, rd->header_column, rd->pp, pp);
  if (rd->max_stage < 0 || rd->max_microbatch < 0)
    return diag(rd->d, "%s: the schedule has no forward or backward actions", rd->name);
  int vpp = rd->vpp > 0 ? rd->vpp : rd->max_stage / pp + 1;
  if (rd->max_stage >= (long long)pp * vpp)
    return diag(rd->d, "%s:%d:%d: the header says vpp=%d, but stage %d needs vpp %d on %d ranks",
                rd->name, rd->header_line, rd->header_column, vpp, rd->max_stage,
                rd->max_stage / pp + 1, pp);
  Diag sizes;
  if (schedule_set_sizes(rd->s, vpp,
                         rd->microbatches > 0 ? rd->microbatches : rd->max_microbatch + 1, &sizes))
    return diag(rd->d, "%s: %s", rd->name, sizes.msg);
  return 0;
}

/* With a "schedule" header line, reading starts there: what precedes it belongs to a printed
 * plan. */
static const char *header_line(const char *text, size_t len, int *line) {
  const char *p = text, *end = text + len;
  for (*line = 1; p < end; (*line)++) {
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\t')) q++;
    if (end - q > 8 && memcmp(q, "schedule", 8) == 0 &&
        (q[8] == ' ' || q[8] == '\t' || q[8] == '{'))
      return p;
    p = memchr(p, '\n', (size_t)(end - p));
    if (!p) break;
    p++;
  }
  *line = 1;
  return text;
}

int schedule_read_text(const char *name, const char *text, size_t len, Schedule *s, Diag *d) {
  char *copy = schedule_alloc(len + 1, 1);
  int line;
  memcpy(copy, text, len);
  const char *start = header_line(copy, len, &line);
  Reader rd = {.name = name, .s = s, .d = d, .pp = -1, .vpp = -1, .microbatches = -1};
  rd.max_stage = rd.max_microbatch = -1;
  rd.lex = (Lexer){.cursor = (const unsigned char *)start,
                   .limit = (const unsigned char *)copy + len,
                   .line_start = (const unsigned char *)start,
                   .line = line};
  memset(s, 0, sizeof *s);
  int status = parse(&rd) || finish(&rd) ? -1 : 0;
  if (status) schedule_free(s);
  free(copy);
  return status;
}

int schedule_read_action(const char *text, size_t len, Action *a) {
  char copy[64];
  Diag ignored;
  int last;
  if (len == 0 || len >= sizeof copy) return -1;
  memcpy(copy, text, len);
  copy[len] = 0;
  Reader rd = {.name = "", .s = NULL, .d = &ignored, .pp = -1, .vpp = -1, .microbatches = -1};
  rd.lex = (Lexer){.cursor = (const unsigned char *)copy,
                   .limit = (const unsigned char *)copy + len,
                   .line_start = (const unsigned char *)copy,
                   .line = 1};
  next(&rd);
  if (rd.tok != T_ACTION || rd.lex.token != (const unsigned char *)copy ||
      rd.lex.cursor != rd.lex.limit)
    return -1;
  if (decode(&rd, a, &last) || last != a->microbatch) return -1;
  return 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

int schedule_read_file(const char *path, Schedule *s, Diag *d) {
  char why[512];
  FILE *f = infile_open(path, why, sizeof why);
  char *text = NULL;
  size_t len = 0, capacity = 0;
  memset(s, 0, sizeof *s);
  if (!f) return diag(d, "schedule file %s: %s; give a schedule file (.txt or .csv)", path, why);
  for (;;) {
    if (len == capacity) {
      capacity = capacity ? 2 * capacity : 1 << 16;
      text = realloc(text, capacity);
      if (!text) {
        fprintf(stderr, "plait: out of memory\n");
        exit(1);
      }
    }
    size_t got = fread(text + len, 1, capacity - len, f);
    len += got;
    if (got == 0) break;
  }
  int failed = ferror(f);
  fclose(f);
  int status = failed ? diag(d, "cannot read schedule file %s", path)
               : ends_with(path, ".csv") ? schedule_csv_read(path, text, len, s, d)
                                         : schedule_read_text(path, text, len, s, d);
  free(text);
  return status;
}
