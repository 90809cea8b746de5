/* schedule_write.c: writing the text form of a schedule: runs of one stage's forwards or
 * backwards as ranges (0F0..7), communication groups in braces, long rank lines wrapped. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

enum { LINE_WIDTH = 100 };

typedef struct {
  char *text;
  size_t len, capacity;
} Text;

static void append(Text *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n + 1 > t->capacity) {
    t->capacity = 2 * (t->len + n + 1);
    t->text = realloc(t->text, t->capacity);
    if (!t->text) {
      fprintf(stderr, "plait: out of memory\n");
      exit(1);
    }
  }
  memcpy(t->text + t->len, s, n + 1);
  t->len += n;
}

/* How many actions from `i` on continue one stage's run of forwards or backwards, microbatch by
 * microbatch. */
static int run_length(const Action *a, int count, int i) {
  int n = 1;
  if (!schedule_is_compute(a[i].kind)) return 1;
  while (i + n < count && a[i + n].kind == a[i].kind && a[i + n].stage == a[i].stage &&
         a[i + n].microbatch == a[i].microbatch + n)
    n++;
  return n;
}

/* The next item starting at a[i] (an action, a range, or a group) into t; returns how many
 * actions it holds. */
static int item(const Action *a, int count, int i, Text *t) {
  char name[64];
  int n = 1;
  t->len = 0;
  if (t->text) t->text[0] = 0;
  if (schedule_is_p2p(a[i].kind)) {
    while (i + n < count && schedule_is_p2p(a[i + n].kind) && a[i + n].joined) n++;
    if (n > 1) append(t, "{");
    for (int k = 0; k < n; k++) {
      schedule_action_name(&a[i + k], name, sizeof name);
      append(t, k ? " " : "");
      append(t, name);
    }
    if (n > 1) append(t, "}");
    return n;
  }
  n = run_length(a, count, i);
  if (n < 3) n = 1;
  schedule_action_name(&a[i], name, sizeof name);
  append(t, name);
  if (n > 1) {
    snprintf(name, sizeof name, "..%d", a[i].microbatch + n - 1);
    append(t, name);
  }
  return n;
}

/* The rank's actions, compute-only if asked. */
static Action *rank_actions(const Schedule *s, int rank, int options, int *count) {
  const ActionList *l = &s->rank[rank];
  Action *a = schedule_alloc((size_t)l->count, sizeof *a);
  *count = 0;
  for (int i = 0; i < l->count; i++)
    if (!(options & WRITE_COMPUTE_ONLY) || schedule_is_compute(l->action[i].kind))
      a[(*count)++] = l->action[i];
  return a;
}

/* Writes the rank's items, wrapping before LINE_WIDTH and continuing lines at `indent`. */
static void write_items(const Schedule *s, int rank, int options, FILE *f, int indent) {
  int count, column = indent;
  Action *a = rank_actions(s, rank, options, &count);
  Text t = {0};
  for (int i = 0; i < count;) {
    int first = i == 0;
    i += item(a, count, i, &t);
    if (!first && column + 1 + (int)t.len > LINE_WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      column = indent;
    } else if (!first) {
      fputc(' ', f);
      column++;
    }
    fputs(t.text, f);
    column += (int)t.len;
  }
  free(t.text);
  free(a);
}

void schedule_write_text(const Schedule *s, FILE *f, int options) {
  char prefix[32];
  int width = snprintf(prefix, sizeof prefix, "rank %d:", s->pp - 1);
  fprintf(f, "schedule pp=%d vpp=%d microbatches=%d {\n", s->pp, s->vpp, s->microbatches);
  for (int r = 0; r < s->pp; r++) {
    snprintf(prefix, sizeof prefix, "rank %d:", r);
    fprintf(f, "%-*s ", width, prefix);
    write_items(s, r, options, f, width + 1);
    fputc('\n', f);
  }
  fprintf(f, "}\n");
}
