/* trace.c: gathering the recorded action times to rank 0 and writing them as trace events (put
 * in place whole, every write checked). */
#include "train/trace.h"
#include "message.h"

#include <stdio.h>
#include <stdlib.h>

enum { TRACK_COMPUTE, TRACK_SEND, TRACK_RECV, TRACK_REDUCE, TRACKS };
static const char *const track_names[TRACKS] = {"compute", "send", "receive", "reduce"};

static int track_of(int kind) {
  switch (kind) {
  case ACT_SEND_F: case ACT_SEND_B: return TRACK_SEND;
  case ACT_RECV_F: case ACT_RECV_B: return TRACK_RECV;
  case ACT_REDUCE_GRAD: case ACT_EMBED_REDUCE: return TRACK_REDUCE;
  default: return TRACK_COMPUTE;
  }
}

static const char *category(int kind) {
  switch (kind) {
  case ACT_FORWARD: return "forward";
  case ACT_BACKWARD: return "backward";
  case ACT_STEP: return "optimizer";
  case ACT_REDUCE_GRAD: case ACT_EMBED_REDUCE: return "reduction";
  default: return "p2p";
  }
}

/* The action's name as the plan writes it: 3F12, 2SEND_B5, 0REDUCE_GRAD, STEP. */
static void action_name(const Action *a, char *buf, int len) {
  static const char *const kinds[] = {"F",      "B",           "SEND_F",       "RECV_F", "SEND_B",
                                      "RECV_B", "REDUCE_GRAD", "EMBED_REDUCE", "STEP"};
  if (a->kind == ACT_STEP) snprintf(buf, len, "STEP");
  else if (a->microbatch < 0) snprintf(buf, len, "%d%s", a->chunk, kinds[a->kind]);
  else snprintf(buf, len, "%d%s%d", a->chunk, kinds[a->kind], a->microbatch);
}

/* Rank 0 receives pipeline rank p's times (2 doubles per action) from that rank's TP 0 of
 * replica 0. */
static double **gather_times(Trainer *t) {
  const Program *p = t->prog;
  const RankInfo *ri = comm_info(t->comm);
  int sender = ri->tp_rank == 0 && ri->dp_rank == 0;
  double **times = ri->rank == 0 ? calloc((size_t)p->pp, sizeof *times) : NULL;
  double *mine = NULL;
  if (sender) {
    mine = malloc((size_t)t->exec.nactions * 2 * sizeof *mine);
    for (int i = 0; i < t->exec.nactions; i++)
      mine[2 * i] = t->exec.times[i].start, mine[2 * i + 1] = t->exec.times[i].end;
  }
  for (int pp = 0; pp < p->pp; pp++) {
    int n = p->nactions[pp], from = comm_group_member(t->comm, GROUP_PP, pp);
    if (ri->rank == 0) times[pp] = malloc((size_t)n * 2 * sizeof **times);
    if (ri->rank == 0 && pp == 0) {
      for (int i = 0; i < 2 * n; i++) times[0][i] = mine[i];
      continue;
    }
    if (ri->rank != 0 && !(sender && ri->pp_rank == pp)) continue;
    comm_p2p_start(t->comm);
    if (ri->rank == 0) comm_recv(t->comm, from, times[pp], 2 * n, COMM_F64, 7);
    else comm_send(t->comm, 0, mine, 2 * n, COMM_F64, 7);
    comm_p2p_end(t->comm);
  }
  free(mine);
  return times;
}

/* Bubble as the plan defines it: (end of the last backward − busiest rank's forward and backward
 * time) over the latter, times from the iteration's first action. */
static double measured_bubble(const Program *p, double **times, double origin) {
  double flush = 0, busiest = 0;
  for (int r = 0; r < p->pp; r++) {
    double busy = 0;
    for (int i = 0; i < p->nactions[r]; i++) {
      int kind = p->actions[r][i].kind;
      if (kind != ACT_FORWARD && kind != ACT_BACKWARD) continue;
      busy += times[r][2 * i + 1] - times[r][2 * i];
      if (kind == ACT_BACKWARD && times[r][2 * i + 1] - origin > flush)
        flush = times[r][2 * i + 1] - origin;
    }
    busiest = busy > busiest ? busy : busiest;
  }
  return busiest > 0 ? (flush - busiest) / busiest : 0;
}

static void write_events(const Program *p, double **times, double origin, FILE *f) {
  fprintf(f, "{\"traceEvents\":[\n");
  for (int r = 0; r < p->pp; r++) {
    fprintf(f,
            "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
            r ? ",\n" : "", r, r);
    for (int k = 0; k < TRACKS; k++)
      fprintf(f,
              ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":"
              "\"%s\"}}",
              r, k, track_names[k]);
  }
  for (int r = 0; r < p->pp; r++)
    for (int i = 0; i < p->nactions[r]; i++) {
      const Action *a = &p->actions[r][i];
      char name[64];
      action_name(a, name, sizeof name);
      fprintf(f,
              ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
              "\"dur\":%.3f,\"args\":{\"step\":%d}}",
              name, category(a->kind), r, track_of(a->kind), (times[r][2 * i] - origin) * 1e6,
              (times[r][2 * i + 1] - times[r][2 * i]) * 1e6, i);
    }
  fprintf(f, "\n],\"displayTimeUnit\":\"ms\"}\n");
}

void trace_write(Trainer *t, const char *path) {
  const Program *p = t->prog;
  double **times = gather_times(t);
  if (comm_info(t->comm)->rank != 0) return;
  double origin = times[0][0];
  for (int r = 0; r < p->pp; r++) origin = times[r][0] < origin ? times[r][0] : origin;
  OutputFile out;
  char error[MESSAGE_TEXT];
  if (output_open(&out, "--trace", path, error, sizeof error) != 0) comm_fail(t->comm, "%s", error);
  write_events(p, times, origin, out.file);
  if (output_commit(&out, error, sizeof error) != 0) comm_fail(t->comm, "%s", error);
  printf("trace %s: measured bubble %.4f of the busiest rank's compute\n", path,
         measured_bubble(p, times, origin));
  for (int r = 0; r < p->pp; r++) free(times[r]);
  free(times);
}
