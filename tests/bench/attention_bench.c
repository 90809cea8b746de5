/* attention_bench.c: the CPU attention kernels' time, forward and backward, on GPT-2 124M's shape at
 * llm.c's CPU setting (B=4, T=64, 12 heads of 64, causal) and on longer sequences with the options
 * (grouped-query, a window with capped scores, ALiBi, rope), against this machine's GEMM rate measured in
 * the same run. FLOPs as the profile counts them: 4·B·Hq·T²·D forward (half of it causal), twice that
 * backward. Prints one line a shape: ms a call forward and backward (the median of the repetitions),
 * GFLOP/s of both together and their share of the GEMM rate.
 * usage: attention_bench [SECONDS [SHAPE]] (each shape's time, 0.5 by default; only the shapes whose name
 * starts with SHAPE) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "cpu/cpu.h"
#include "device.h"
#include "kernels.h"
#include "profile.h"

enum { REPEATS_MAX = 1000 };

typedef struct {
  const char *name;
  AttnShape s;
} Case;

static const Case cases[] = {
    {"gpt2 B=4 T=64 H=12 D=64", {.B = 4, .T = 64, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1}},
    {"long B=1 T=1024 H=12 D=64", {.B = 1, .T = 1024, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1}},
    {"gqa B=1 T=1024 Hq=8 Hkv=2", {.B = 1, .T = 1024, .Hq = 8, .Hkv = 2, .D = 64, .causal = 1}},
    {"gqa B=4 T=64 Hq=8 Hkv=2", {.B = 4, .T = 64, .Hq = 8, .Hkv = 2, .D = 64, .causal = 1}},
    {"window 256 softcap 50 T=1024",
     {.B = 1, .T = 1024, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1, .window = 256, .softcap = 50}},
    {"alibi T=1024", {.B = 1, .T = 1024, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1, .alibi = 1, .heads_total = 12}},
    {"rope T=1024", {.B = 1, .T = 1024, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1, .rope = 1, .rope_theta = 1e4}},
    {"not causal B=4 T=64", {.B = 4, .T = 64, .Hq = 12, .Hkv = 12, .D = 64}},
};

static real *random_values(int64_t n, unsigned *seed) {
  real *x = cpu_alloc((size_t)n, sizeof(real), "bench tensors");
  for (int64_t i = 0; i < n; i++) x[i] = (real)rand_r(seed) / RAND_MAX - (real)0.5;
  return x;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, by_value);
  return t[n / 2];
}

/* The tensors of one shape: inputs and lse random, outputs overwritten. */
typedef struct {
  real *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv;
} Tensors;

static Tensors tensors_new(const AttnShape *s) {
  unsigned seed = 1;
  int64_t nq = s->B * s->T * s->Hq * s->D, nkv = s->B * s->T * s->Hkv * s->D;
  Tensors t = {random_values(nq, &seed), random_values(nkv, &seed), random_values(nkv, &seed),
               random_values(nq, &seed), random_values(nq, &seed), random_values(s->B * s->Hq * s->T, &seed),
               random_values(nq, &seed), random_values(nkv, &seed), random_values(nkv, &seed)};
  return t;
}

static void tensors_free(Tensors *t) {
  free(t->q), free(t->k), free(t->v), free(t->dout), free(t->out), free(t->lse), free(t->dq), free(t->dk);
  free(t->dv);
}

/* Forward and backward alternately until `seconds` pass (at least 3 times each, one untimed call first);
 * the median time of each in fwd_ms and bwd_ms. */
static void time_case(const AttnShape *s, double seconds, double *fwd_ms, double *bwd_ms) {
  static double fwd[REPEATS_MAX], bwd[REPEATS_MAX];
  Tensors t = tensors_new(s);
  k_attention_forward(s, t.q, t.k, t.v, t.out, t.lse);
  k_attention_backward(s, t.q, t.k, t.v, t.out, t.lse, t.dout, t.dq, t.dk, t.dv);
  int n = 0;
  for (double start = clock_seconds(); n < REPEATS_MAX && (n < 3 || clock_seconds() - start < seconds); n++) {
    double t0 = clock_seconds();
    k_attention_forward(s, t.q, t.k, t.v, t.out, t.lse);
    double t1 = clock_seconds();
    k_attention_backward(s, t.q, t.k, t.v, t.out, t.lse, t.dout, t.dq, t.dk, t.dv);
    fwd[n] = t1 - t0, bwd[n] = clock_seconds() - t1;
  }
  *fwd_ms = 1e3 * median(fwd, n), *bwd_ms = 1e3 * median(bwd, n);
  tensors_free(&t);
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5, peak = device_peak_flops();
  const char *only = argc > 2 ? argv[2] : "";
  printf("attention on %d threads; GEMM rate %.1f GFLOP/s\n", omp_get_max_threads(), peak / 1e9);
  printf("%-30s %9s %9s %9s %8s\n", "shape", "fwd ms", "bwd ms", "GFLOP/s", "of GEMM");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (strncmp(cases[i].name, only, strlen(only)) != 0) continue;
    double fwd, bwd, flops = 3 * profile_attention_flops(&cases[i].s);
    time_case(&cases[i].s, seconds, &fwd, &bwd);
    double rate = flops / ((fwd + bwd) / 1e3);
    printf("%-30s %9.3f %9.3f %9.1f %8.3f\n", cases[i].name, fwd, bwd, rate / 1e9, rate / peak);
  }
  return 0;
}
