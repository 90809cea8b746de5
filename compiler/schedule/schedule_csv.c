/* schedule_csv.c: PyTorch's CSV form of a schedule: one row per rank, one action per cell, empty
 * cells idle; consecutive sends and receives on a row form one group. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  Diag *d;
  Schedule *s; /* a rank per row; the sizes are set at the end */
  int actions, max_stage, max_microbatch;
} CsvReader;

static void trim(const char **begin, const char **end) {
  while (*begin < *end && (**begin == ' ' || **begin == '\t')) (*begin)++;
  while (*end > *begin && ((*end)[-1] == ' ' || (*end)[-1] == '\t' || (*end)[-1] == '\r')) (*end)--;
  if (*end - *begin >= 2 && **begin == '"' && (*end)[-1] == '"') (*begin)++, (*end)--;
}

static int unsupported(const char *begin, const char *end) {
  const char *p = begin;
  while (p < end && *p >= '0' && *p <= '9') p++;
  return p > begin && p < end &&
         (*p == 'I' || *p == 'W' ||
          (end - p >= 7 && (!memcmp(p, "UNSHARD", 7) || !memcmp(p, "RESHARD", 7))));
}

static int cell_error(CsvReader *c, int line, const char *line_start, const char *begin,
                      const char *end) {
  int col = (int)(begin - line_start) + 1, n = end - begin > 24 ? 24 : (int)(end - begin);
  if (unsupported(begin, end))
    return diag(c->d,
                "%s:%d:%d: '%.*s': split backward (I, W) and FSDP actions (UNSHARD, RESHARD) are "
                "not supported; use B",
                c->name, line, col, n, begin);
  return diag(c->d,
              "%s:%d:%d: expected an action such as 0F3, 1SEND_F2 or 0REDUCE_GRAD, found '%.*s'",
              c->name, line, col, n, begin);
}

static int read_row(CsvReader *c, int line, const char *begin, const char *end) {
  int rank = schedule_add_rank(c->s), previous_p2p = 0;
  for (const char *cell = begin; cell <= end;) {
    const char *comma = memchr(cell, ',', (size_t)(end - cell)), *stop = comma ? comma : end,
               *b = cell, *e = stop;
    trim(&b, &e);
    cell = stop + 1;
    if (b == e) continue;
    Action a;
    if (schedule_read_action(b, (size_t)(e - b), &a)) return cell_error(c, line, begin, b, e);
    if (++c->actions > SCHEDULE_MAX_ACTIONS)
      return diag(c->d, "%s:%d: too many actions in one schedule", c->name, line);
    a.joined = schedule_is_p2p(a.kind) && previous_p2p;
    previous_p2p = schedule_is_p2p(a.kind);
    schedule_push(c->s, rank, a);
    if (a.stage > c->max_stage) c->max_stage = a.stage;
    if (a.microbatch > c->max_microbatch) c->max_microbatch = a.microbatch;
  }
  return 0;
}

static int only_space(const char *p, const char *end) {
  for (; p < end; p++)
    if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') return 0;
  return 1;
}

static int read_rows(CsvReader *c, const char *text, size_t len) {
  const char *p = text, *end = text + len;
  for (int line = 1; p < end; line++) {
    const char *newline = memchr(p, '\n', (size_t)(end - p)), *stop = newline ? newline : end;
    const char *b = p, *e = stop;
    trim(&b, &e);
    if (b == e && only_space(stop, end)) break;
    if (b == e)
      return diag(c->d, "%s:%d:1: empty row; the CSV holds one row of actions per rank", c->name,
                  line);
    if (c->s->pp == SCHEDULE_MAX_RANKS)
      return diag(c->d, "%s:%d:1: too many rows (at most %d ranks)", c->name, line,
                  SCHEDULE_MAX_RANKS);
    if (memchr(p, 0, (size_t)(stop - p)))
      return diag(c->d, "%s:%d:1: the row holds a zero byte; is this a CSV file?", c->name, line);
    if (read_row(c, line, p, stop)) return -1;
    p = stop + 1;
  }
  if (c->s->pp == 0)
    return diag(c->d, "%s: the CSV file is empty; it needs one row of actions per rank", c->name);
  if (c->max_stage < 0 || c->max_microbatch < 0)
    return diag(c->d, "%s: the schedule has no forward or backward actions", c->name);
  return 0;
}

int schedule_csv_read(const char *name, const char *text, size_t len, Schedule *s, Diag *d) {
  CsvReader c = {.name = name, .d = d, .s = s, .max_stage = -1, .max_microbatch = -1};
  Diag sizes;
  memset(s, 0, sizeof *s);
  int status = read_rows(&c, text, len);
  if (!status && schedule_set_sizes(s, c.max_stage / s->pp + 1, c.max_microbatch + 1, &sizes))
    status = diag(d, "%s: %s", name, sizes.msg);
  if (status) schedule_free(s);
  return status;
}

void schedule_csv_write(const Schedule *s, FILE *f, int options) {
  for (int r = 0; r < s->pp; r++) {
    int first = 1;
    for (int i = 0; i < s->rank[r].count; i++) {
      const Action *a = &s->rank[r].action[i];
      char name[64];
      if ((options & WRITE_COMPUTE_ONLY) && !schedule_is_compute(a->kind)) continue;
      schedule_action_name(a, name, sizeof name);
      fprintf(f, "%s%s", first ? "" : ",", name);
      first = 0;
    }
    fputc('\n', f);
  }
}
