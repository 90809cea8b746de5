/* profile.c: DIR/train --profile: time, FLOPs and bytes by kind of work, and the table printed at the end. */
#include "profile.h"

#include <string.h>

#include "clock.h"
#include "device.h"

static const char *const kind_names[PROFILE_KINDS] = {
    "gemm",      "attention", "norm", "elementwise", "rope",      "split_concat",
    "bias_sums", "embedding", "xent", "optimizer",   "grad_norm", "comm",
    "routing"};

/* Work the device may still be running is finished before the clock is read (a no-op on the CPU). */
static double now(void) {
  device_sync();
  return clock_seconds();
}

void profile_stage_begin(Profile *p) { p->last_stop = now(); }

void profile_stage_end(Profile *p, double bytes) {
  p->seconds[PROFILE_ELEMENTWISE] += now() - p->last_stop;
  p->bytes[PROFILE_ELEMENTWISE] += bytes;
  p->last_stop = 0;
}

double profile_start(Profile *p) {
  double start = now();
  if (p->last_stop > 0) p->seconds[PROFILE_ELEMENTWISE] += start - p->last_stop;
  return start;
}

void profile_add(Profile *p, ProfileKind kind, double start, double flops, double bytes) {
  double stop = now();
  p->seconds[kind] += stop - start;
  p->flops[kind] += flops;
  p->bytes[kind] += bytes;
  if (p->last_stop > 0) p->last_stop = stop;
}

void profile_step(Profile *p, double seconds) {
  if (!p->warmed_up) {
    memset(p, 0, sizeof *p);
    p->warmed_up = 1;
    return;
  }
  p->step_seconds += seconds;
  p->steps++;
}

double profile_attention_flops(const AttnShape *s) {
  double full = 4.0 * (double)s->B * (double)s->Hq * (double)s->T * (double)s->T * s->D;
  return s->causal ? full / 2 : full;
}

double profile_split_bytes(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, int part,
                           const act_t *x, const act_t *y) {
  (void)nparts, (void)x, (void)y;
  return 2.0 * (double)rows * (double)groups * (double)sizes[part] * sizeof(act_t);
}

double profile_concat_bytes(int64_t rows, int64_t groups, int nparts, const int64_t *sizes,
                            const act_t *const *parts, const act_t *y) {
  (void)y;
  double elems = 0;
  for (int i = 0; i < nparts; i++) elems += (double)sizes[i] * (parts[i] ? 2 : 1);
  return elems * (double)rows * (double)groups * sizeof(act_t);
}

/* GEMMs and attention are rated in FLOP/s, the rest in bytes/s. */
static int rated_by_flops(int kind) { return kind == PROFILE_GEMM || kind == PROFILE_ATTENTION; }

static void print_table(const Profile *p, FILE *out) {
  double steps = (double)p->steps, step_ms = 1e3 * p->step_seconds / steps, counted = 0;
  fprintf(out, "profile over %lld steps after the first: %.1f ms a step\n", (long long)p->steps, step_ms);
  fprintf(out, "  %-12s %9s %7s %12s %10s\n", "kind", "ms/step", "share", "per step", "rate");
  for (int k = 0; k < PROFILE_KINDS; k++) {
    double ms = 1e3 * p->seconds[k] / steps, amount = (rated_by_flops(k) ? p->flops[k] : p->bytes[k]) / steps;
    counted += ms;
    if (ms <= 0) continue;
    fprintf(out, "  %-12s %9.2f %6.1f%% %9.3f %s", kind_names[k], ms, 100 * ms / step_ms, amount / 1e9,
            rated_by_flops(k) ? "GF" : "GB");
    if (amount > 0) fprintf(out, " %6.1f %s\n", amount / (ms / 1e3) / 1e9, rated_by_flops(k) ? "GFLOP/s" : "GB/s");
    else fprintf(out, "\n");
  }
  fprintf(out, "  %-12s %9.2f %6.1f%%\n", "other", step_ms - counted, 100 * (step_ms - counted) / step_ms);
}

static void print_json(const Profile *p, FILE *json) {
  double steps = (double)p->steps;
  fprintf(json, "{\"profile_steps\": %lld, \"step_ms\": %.17g", (long long)p->steps, 1e3 * p->step_seconds / steps);
  for (int k = 0; k < PROFILE_KINDS; k++)
    fprintf(json, ", \"%s\": {\"ms\": %.17g, \"flops\": %.17g, \"bytes\": %.17g}", kind_names[k],
            1e3 * p->seconds[k] / steps, p->flops[k] / steps, p->bytes[k] / steps);
  fprintf(json, "}\n");
}

void profile_print(const Profile *p, FILE *out, FILE *json) {
  if (p->steps <= 0) {
    fprintf(out, "profile: no step after the first to report\n");
    return;
  }
  print_table(p, out);
  if (json) print_json(p, json);
}
