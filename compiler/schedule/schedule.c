/* schedule.c: the schedule data (action lists per rank) and the generators: GPipe, 1F1B, and
 * Megatron-LM's interleaved 1F1B, each as compute-only lists. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const kind_names[ACTION_KINDS] = {
    "F", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD", "EMBED_REDUCE", "STEP"};

void *schedule_alloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "plait: out of memory\n");
    exit(1);
  }
  return p;
}

static int check_sizes(int pp, int vpp, int microbatches, Diag *d) {
  if (pp < 1 || pp > SCHEDULE_MAX_RANKS)
    return diag(d, "pp %d is out of range: 1 to %d pipeline ranks", pp, SCHEDULE_MAX_RANKS);
  if (vpp < 1) return diag(d, "vpp %d is out of range: at least 1 chunk per rank", vpp);
  if (microbatches < 1 || microbatches > SCHEDULE_MAX_MICROBATCHES)
    return diag(d, "%d microbatches is out of range: 1 to %d", microbatches,
                SCHEDULE_MAX_MICROBATCHES);
  if ((int64_t)pp * vpp * microbatches > SCHEDULE_MAX_PAIRS)
    return diag(d,
                "pp·vpp·microbatches = %d·%d·%d is too large: at most %d (stage, microbatch) pairs",
                pp, vpp, microbatches, SCHEDULE_MAX_PAIRS);
  return 0;
}

int schedule_init(Schedule *s, int pp, int vpp, int microbatches, Diag *d) {
  memset(s, 0, sizeof *s);
  if (check_sizes(pp, vpp, microbatches, d)) return -1;
  s->pp = pp;
  s->vpp = vpp;
  s->stages = pp * vpp;
  s->microbatches = microbatches;
  s->rank = schedule_alloc((size_t)pp, sizeof *s->rank);
  return 0;
}

int schedule_add_rank(Schedule *s) {
  ActionList *grown = realloc(s->rank, (size_t)(s->pp + 1) * sizeof *grown);
  if (!grown) {
    fprintf(stderr, "plait: out of memory\n");
    exit(1);
  }
  s->rank = grown;
  memset(&s->rank[s->pp], 0, sizeof *s->rank);
  return s->pp++;
}

int schedule_set_sizes(Schedule *s, int vpp, int microbatches, Diag *d) {
  if (check_sizes(s->pp, vpp, microbatches, d)) return -1;
  s->vpp = vpp;
  s->stages = s->pp * vpp;
  s->microbatches = microbatches;
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++)
      s->rank[r].action[i].peer = schedule_peer(s, &s->rank[r].action[i]);
  return 0;
}

void schedule_free(Schedule *s) {
  for (int r = 0; s->rank && r < s->pp; r++) free(s->rank[r].action);
  free(s->rank);
  memset(s, 0, sizeof *s);
}

void schedule_push(Schedule *s, int rank, Action a) {
  ActionList *l = &s->rank[rank];
  if (l->count == l->capacity) {
    int capacity = l->capacity ? 2 * l->capacity : 64;
    Action *grown = realloc(l->action, (size_t)capacity * sizeof *grown);
    if (!grown) {
      fprintf(stderr, "plait: out of memory\n");
      exit(1);
    }
    l->action = grown;
    l->capacity = capacity;
  }
  l->action[l->count++] = a;
}

int schedule_is_compute(ActionKind kind) { return kind == ACTION_F || kind == ACTION_B; }

int schedule_is_p2p(ActionKind kind) {
  return kind == ACTION_SEND_F || kind == ACTION_RECV_F || kind == ACTION_SEND_B ||
         kind == ACTION_RECV_B;
}

int schedule_has_p2p(const Schedule *s) {
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++)
      if (schedule_is_p2p(s->rank[r].action[i].kind)) return 1;
  return 0;
}

int schedule_peer(const Schedule *s, const Action *a) {
  int other;
  switch (a->kind) {
  case ACTION_SEND_F:
  case ACTION_RECV_B: other = a->stage + 1; break;
  case ACTION_RECV_F:
  case ACTION_SEND_B: other = a->stage - 1; break;
  case ACTION_EMBED_REDUCE: other = a->stage == 0 ? s->stages - 1 : 0; break;
  default: return -1;
  }
  return other < 0 || other >= s->stages ? -1 : other % s->pp;
}

const char *schedule_kind_name(ActionKind kind) { return kind_names[kind]; }

int schedule_action_name(const Action *a, char *buf, size_t size) {
  if (a->kind >= ACTION_KINDS) return snprintf(buf, size, "?");
  if (a->kind == ACTION_STEP) return snprintf(buf, size, "STEP");
  if (a->microbatch < 0) return snprintf(buf, size, "%d%s", a->stage, kind_names[a->kind]);
  return snprintf(buf, size, "%d%s%d", a->stage, kind_names[a->kind], a->microbatch);
}

static void push_compute(Schedule *s, int rank, ActionKind kind, int stage, int microbatch) {
  schedule_push(s, rank,
                (Action){.kind = kind, .stage = stage, .microbatch = microbatch, .peer = -1});
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* GPipe: every microbatch forward, then every microbatch backward, in order. */
static void generate_gpipe(Schedule *s) {
  for (int r = 0; r < s->pp; r++) {
    for (int j = 0; j < s->microbatches; j++) push_compute(s, r, ACTION_F, r, j);
    for (int j = 0; j < s->microbatches; j++) push_compute(s, r, ACTION_B, r, j);
  }
}

/* PipeDream-Flush (1F1B): rank r runs min(pp - r - 1, m) forwards, then alternates one forward and
 * one backward, then drains the remaining backwards. */
static void generate_1f1b(Schedule *s) {
  int m = s->microbatches;
  for (int r = 0; r < s->pp; r++) {
    int warmup = min_int(s->pp - r - 1, m);
    for (int j = 0; j < warmup; j++) push_compute(s, r, ACTION_F, r, j);
    for (int j = 0; j < m - warmup; j++) {
      push_compute(s, r, ACTION_F, r, warmup + j);
      push_compute(s, r, ACTION_B, r, j);
    }
    for (int j = m - warmup; j < m; j++) push_compute(s, r, ACTION_B, r, j);
  }
}

/* Megatron-LM's interleaved order: step k takes microbatches in groups of pp through chunk 0, then
 * chunk 1, ...; backward steps walk the chunks in reverse. Chunk c of rank r is stage c·pp + r. */
static int interleaved_microbatch(int pp, int vpp, int step) {
  return step / (pp * vpp) * pp + step % pp;
}

static int interleaved_stage(int pp, int vpp, int rank, int step, int backward) {
  int chunk = step % (pp * vpp) / pp;
  return (backward ? vpp - 1 - chunk : chunk) * pp + rank;
}

static void push_interleaved(Schedule *s, int rank, ActionKind kind, int step) {
  push_compute(s, rank, kind, interleaved_stage(s->pp, s->vpp, rank, step, kind == ACTION_B),
               interleaved_microbatch(s->pp, s->vpp, step));
}

/* Rank r warms up with min(2(pp - r - 1) + (vpp - 1)·pp, vpp·m) forwards, then pairs forward step
 * k + warmup with backward step k, then drains the remaining backwards. */
static void generate_interleaved(Schedule *s) {
  int total = s->vpp * s->microbatches;
  for (int r = 0; r < s->pp; r++) {
    int warmup = min_int(2 * (s->pp - r - 1) + (s->vpp - 1) * s->pp, total);
    for (int k = 0; k < warmup; k++) push_interleaved(s, r, ACTION_F, k);
    for (int k = 0; k < total - warmup; k++) {
      push_interleaved(s, r, ACTION_F, k + warmup);
      push_interleaved(s, r, ACTION_B, k);
    }
    for (int k = total - warmup; k < total; k++) push_interleaved(s, r, ACTION_B, k);
  }
}

static int generate_named(const char *name, int pp, int vpp, int m, Schedule *s, Diag *d) {
  int interleaved = strcmp(name, "interleaved") == 0;
  if (!interleaved && vpp > 1)
    return diag(d,
                "%s runs one chunk per rank, but vpp is %d; use --schedule interleaved or --vpp 1",
                name, vpp);
  if (interleaved && vpp > 1 && m % pp != 0)
    return diag(
        d,
        "interleaved needs the number of microbatches (%d) to be a multiple of pp (%d); use %d "
        "microbatches, or --schedule 1f1b",
        m, pp, (m / pp + 1) * pp);
  if (schedule_init(s, pp, vpp, m, d)) return -1;
  if (strcmp(name, "gpipe") == 0) generate_gpipe(s);
  else if (interleaved && vpp > 1) generate_interleaved(s);
  else generate_1f1b(s); /* interleaved with one chunk per rank is 1F1B, as in Megatron-LM */
  return 0;
}

static int read_sized(const char *path, int pp, int vpp, int m, Schedule *s, Diag *d) {
  if (schedule_read_file(path, s, d)) return -1;
  if (pp == 0) return 0;
  const char *what = s->pp != pp             ? "ranks"
                     : s->stages != pp * vpp ? "stages"
                     : s->microbatches != m  ? "microbatches"
                                             : NULL;
  if (!what) return 0;
  int has = s->pp != pp ? s->pp : s->stages != pp * vpp ? s->stages : s->microbatches;
  int want = s->pp != pp ? pp : s->stages != pp * vpp ? pp * vpp : m;
  schedule_free(s);
  return diag(d,
              "schedule file %s has %d %s but the layout needs %d (pp %d, vpp %d, %d microbatches)",
              path, has, what, want, pp, vpp, m);
}

int schedule_generate(const char *name, int pp, int vpp, int microbatches, Schedule *s, Diag *d) {
  memset(s, 0, sizeof *s);
  if (strcmp(name, "gpipe") == 0 || strcmp(name, "1f1b") == 0 || strcmp(name, "interleaved") == 0)
    return generate_named(name, pp, vpp, microbatches, s, d);
  if (access(name, F_OK) != 0 && !strchr(name, '.') && !strchr(name, '/'))
    return diag(
        d, "unknown schedule '%s'; use gpipe, 1f1b, interleaved, or a schedule file (.txt or .csv)",
        name);
  return read_sized(name, pp, vpp, microbatches, s, d);
}

void schedule_peak_inflight(const Schedule *s, int *per_stage) {
  int *inflight = schedule_alloc((size_t)s->stages, sizeof *inflight);
  memset(per_stage, 0, (size_t)s->stages * sizeof *per_stage);
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++) {
      const Action *a = &s->rank[r].action[i];
      if (a->kind == ACTION_F && ++inflight[a->stage] > per_stage[a->stage])
        per_stage[a->stage] = inflight[a->stage];
      if (a->kind == ACTION_B) inflight[a->stage]--;
    }
  free(inflight);
}
