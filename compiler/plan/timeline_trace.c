/* timeline_trace.c: a simulated iteration as Chrome trace-event JSON (Perfetto, chrome://tracing):
 * one process per rank, one thread each for compute, sends, receives and reductions; an action
 * ending in an all-gather (the weights' after the step, a scattered activation's in its node) says
 * how long in args.gather_us. */
#include "schedule/simulate.h"

enum { TRACK_COMPUTE, TRACK_SEND, TRACK_RECV, TRACK_REDUCE, TRACKS };

static const char *const track_names[TRACKS] = {"compute", "send", "receive", "reduce"};

static int track_of(ActionKind kind) {
  switch (kind) {
  case ACTION_SEND_F:
  case ACTION_SEND_B: return TRACK_SEND;
  case ACTION_RECV_F:
  case ACTION_RECV_B: return TRACK_RECV;
  case ACTION_REDUCE_GRAD:
  case ACTION_EMBED_REDUCE: return TRACK_REDUCE;
  case ACTION_F: case ACTION_B: case ACTION_STEP: case ACTION_KINDS: break;
  }
  return TRACK_COMPUTE;
}

static const char *category(ActionKind kind) {
  switch (kind) {
  case ACTION_F: return "forward";
  case ACTION_B: return "backward";
  case ACTION_STEP: return "optimizer";
  case ACTION_REDUCE_GRAD:
  case ACTION_EMBED_REDUCE: return "reduction";
  case ACTION_SEND_F:
  case ACTION_RECV_F:
  case ACTION_SEND_B:
  case ACTION_RECV_B:
  case ACTION_KINDS:
    break;
  }
  return "p2p";
}

static void write_names(const Schedule *s, FILE *f) {
  for (int r = 0; r < s->pp; r++) {
    fprintf(f,
            "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
            r ? ",\n" : "", r, r);
    fprintf(
        f,
        ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
        r, r);
    for (int k = 0; k < TRACKS; k++)
      fprintf(f,
              ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":"
              "\"%s\"}}",
              r, k, track_names[k]);
  }
}

/* Times in microseconds: the simulation's seconds times 1e6 (with unit costs, one unit shows as
 * one second). */
void timeline_trace_write(const Schedule *s, const Timeline *t, FILE *f) {
  fprintf(f, "{\"traceEvents\":[\n");
  write_names(s, f);
  for (int r = 0; r < s->pp; r++)
    for (int i = 0; i < s->rank[r].count; i++) {
      const Action *a = &s->rank[r].action[i];
      const Span *span = &t->span[r][i];
      char name[64];
      schedule_action_name(a, name, sizeof name);
      fprintf(f,
              ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
              "\"dur\":%.3f,"
              "\"args\":{\"step\":%d",
              name, category(a->kind), r, track_of(a->kind), span->start * 1e6,
              (span->end - span->start) * 1e6, i);
      if (span->gather > 0) fprintf(f, ",\"gather_us\":%.3f", span->gather * 1e6);
      fprintf(f, "}}");
    }
  fprintf(f, "\n],\"displayTimeUnit\":\"ms\"}\n");
}
