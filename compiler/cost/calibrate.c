/* calibrate.c: reading build/plait-probe's measurements, fitting the machine's few numbers to
 * them, and writing them as a machine file. */
#include "cost/calibrate.h"

#include <stdlib.h>
#include <string.h>

static int add_sample(Sample *samples, int *count, double x, double seconds, const char *what,
                      Diag *d) {
  if (*count == CALIBRATE_MAX_SAMPLES)
    return diag(d, "the probe printed more than %d %s times", CALIBRATE_MAX_SAMPLES, what);
  if (!(seconds > 0) || !(x > 0))
    return diag(d, "the probe printed a %s time of %g s for %g; run plait calibrate again", what,
                seconds, x);
  samples[(*count)++] = (Sample){x, seconds};
  return 0;
}

static int read_line(const char *line, Probe *p, Diag *d) {
  double m, n, k, seconds, value;
  char word[32];
  if (sscanf(line, "gemm %lf %lf %lf %lf", &m, &n, &k, &seconds) == 4) {
    if (add_sample(p->gemm, &p->ngemm, 2 * m * n * k, seconds, "GEMM", d)) return -1;
    memcpy(p->gemm_shape[p->ngemm - 1], (double[3]){m, n, k}, sizeof p->gemm_shape[0]);
    return 0;
  }
  if (sscanf(line, "allreduce %lf %lf", &m, &seconds) == 2)
    return add_sample(p->allreduce, &p->nallreduce, m, seconds, "all-reduce", d);
  if (sscanf(line, "stream %lf %lf", &m, &seconds) == 2)
    return add_sample(p->stream, &p->nstream, m, seconds, "stream", d);
  if (sscanf(line, "attention %lf %lf", &m, &seconds) == 2)
    return add_sample(p->attention, &p->nattention, m, seconds, "attention", d);
  if (sscanf(line, "gelu_per_s %lf", &value) == 1) return p->gelu_per_s = value, 0;
  if (sscanf(line, "ranks %lf", &value) == 1) return p->ranks = (int)value, 0;
  if (sscanf(line, "cores %lf", &value) == 1) return p->cores = (int)value, 0;
  if (sscanf(line, "memory_bytes %lf", &value) == 1) return p->memory_bytes = value, 0;
  if (sscanf(line, "backend %31s", word) == 1)
    return snprintf(p->backend, sizeof p->backend, "%s", word), 0;
  return diag(d, "the probe printed an unknown line '%.60s'; rebuild plait (make)", line);
}

int calibrate_read(FILE *f, Probe *p, Diag *d) {
  char line[256];
  memset(p, 0, sizeof *p);
  while (fgets(line, sizeof line, f))
    if (read_line(line, p, d)) return -1;
  if (p->ranks < 1 || p->ngemm < 2 || p->nstream < 2 || p->nattention < 1 || !(p->gelu_per_s > 0) ||
      (p->ranks > 1 && p->nallreduce < 2))
    return diag(d,
                "the probe's measurements are incomplete (ranks %d, %d GEMM, %d stream, %d "
                "attention, %d all-reduce "
                "times); run build/plait-probe by hand to see why",
                p->ranks, p->ngemm, p->nstream, p->nattention, p->nallreduce);
  return 0;
}

/* seconds ≈ a·scale_a + c·scale_x·x, fitted in relative error (every size counts alike): the
 * normal equations of Σ((a·u + c·v) - 1)² with u = scale_a/t and v = scale_x·x/t; a held at 0
 * when the best fit would make it negative. */
static void fit_line(const Sample *s, int n, double scale_a, const double *scale_x, double *a,
                     double *c) {
  double uu = 0, uv = 0, vv = 0, u1 = 0, v1 = 0;
  for (int i = 0; i < n; i++) {
    double u = scale_a / s[i].seconds, v = scale_x[i] * s[i].x / s[i].seconds;
    uu += u * u, uv += u * v, vv += v * v, u1 += u, v1 += v;
  }
  double det = uu * vv - uv * uv;
  *a = det > 0 ? (u1 * vv - v1 * uv) / det : 0;
  *c = det > 0 ? (uu * v1 - uv * u1) / det : 0;
  if (*a < 0 || !(*c > 0)) *a = 0, *c = v1 / vv;
}

/* seconds ≈ x / rate, fitted in relative error: with u = x/t each sample's rate, the rate r that
 * makes Σ(u/r − 1)² least is Σu² / Σu. */
static double fit_rate(const Sample *s, int n) {
  double u1 = 0, uu = 0;
  for (int i = 0; i < n; i++) {
    double u = s[i].x / s[i].seconds;
    u1 += u, uu += u * u;
  }
  return uu / u1;
}

void calibrate_fit(const Probe *p, Fit *fit) {
  double ones[CALIBRATE_MAX_SAMPLES], ring[CALIBRATE_MAX_SAMPLES], per_flop, per_byte;
  for (int i = 0; i < CALIBRATE_MAX_SAMPLES; i++)
    ones[i] = 1, ring[i] = 2.0 * (p->ranks - 1) / p->ranks;
  fit_line(p->gemm, p->ngemm, 1, ones, &fit->gemm_overhead, &per_flop);
  fit->gemm_flops_per_s = 1 / per_flop;
  fit_line(p->stream, p->nstream, 1, ones, &fit->overhead, &per_byte);
  fit->stream_bytes_per_s = 1 / per_byte;
  fit->attention_flops_per_s = fit_rate(p->attention, p->nattention);
  if (p->ranks == 1) {
    fit->link_bandwidth = fit->stream_bytes_per_s, fit->link_latency = 0;
    return;
  }
  fit_line(p->allreduce, p->nallreduce, 2.0 * (p->ranks - 1), ring, &fit->link_latency, &per_byte);
  fit->link_bandwidth = 1 / per_byte;
}

static int by_flops(const void *a, const void *b) {
  double x = ((const Sample *)a)->x, y = ((const Sample *)b)->x;
  return (x > y) - (x < y);
}

/* A rate curve `key = { { FLOPs, FLOP/s }, ... }` inside a section: each measured shape by FLOPs
 * (shapes of equal FLOPs averaged). */
static void write_rates(const Sample *samples, int n, const char *key, const char *comment,
                        FILE *f) {
  Sample sorted[CALIBRATE_MAX_SAMPLES];
  memcpy(sorted, samples, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, by_flops);
  fprintf(f, "    %s = {  -- %s\n", key, comment);
  for (int i = 0; i < n;) {
    int j = i;
    double seconds = 0;
    while (j < n && sorted[j].x == sorted[i].x) seconds += sorted[j++].seconds;
    fprintf(f, "      { %.6g, %.6g },\n", sorted[i].x, sorted[i].x * (j - i) / seconds);
    i = j;
  }
  fprintf(f, "    },\n");
}

void calibrate_write(const Probe *p, const Fit *fit, FILE *f) {
  fprintf(f,
          "-- This machine as plait calibrate measured it: %d rank%s (%s backend) sharing %d "
          "cores, each rank's\n"
          "-- GEMMs, streaming kernels, attention and all-reduces timed while every rank ran the "
          "same at once.\n",
          p->ranks, p->ranks == 1 ? "" : "s", p->backend, p->cores);
  fprintf(f, "-- A device is one rank's share of the machine: plan layouts of %d rank%s with it.\n",
          p->ranks, p->ranks == 1 ? "" : "s");
  fprintf(f, "return {\n  name = \"calibrated\",\n");
  fprintf(f,
          "  about = \"this machine, %d rank%s: %.3g GFLOP/s fp32 GEMMs, %.3g GB/s streaming, %.3g "
          "GFLOP/s attention, "
          "%.3g G special functions/s, %.3g GB/s all-reduce bus\",\n",
          p->ranks, p->ranks == 1 ? "" : "s", fit->gemm_flops_per_s / 1e9,
          fit->stream_bytes_per_s / 1e9, fit->attention_flops_per_s / 1e9, p->gelu_per_s / 1e9,
          fit->link_bandwidth / 1e9);
  fprintf(f, "  precision = \"fp32\",\n  device = {\n");
  fprintf(f,
          "    flops = { fp32 = %.6g },  -- one GEMM rate fitted to %d shapes (t = %.3g s + FLOPs "
          "/ rate)\n",
          fit->gemm_flops_per_s, p->ngemm, fit->gemm_overhead);
  fprintf(f, "    gemm_efficiency = 1,       -- the rate above is the measured ceiling\n");
  fprintf(f,
          "    gemm_tile = { 1, 1 },      -- no tile waves: one compute unit, the whole product\n");
  fprintf(f,
          "    gemm_rates = {  -- { M, N, K, FLOP/s } of each GEMM shape measured, the call "
          "included\n");
  for (int i = 0; i < p->ngemm; i++)
    fprintf(f, "      { %.0f, %.0f, %.0f, %.6g },\n", p->gemm_shape[i][0], p->gemm_shape[i][1],
            p->gemm_shape[i][2], p->gemm[i].x / p->gemm[i].seconds);
  fprintf(f, "    },\n");
  fprintf(f,
          "    memory_bandwidth = %.6g, -- bytes/s: out = 0.5·in from 32 KB to 32 MB, t = overhead "
          "+ bytes / rate\n",
          fit->stream_bytes_per_s);
  fprintf(f,
          "    memory_efficiency = 1,\n    memory = %.6g,       -- the machine's memory over its "
          "ranks\n",
          p->memory_bytes / p->ranks);
  fprintf(f,
          "    compute_units = 1,\n    launch_overhead = %.6g, -- seconds per kernel: the stream "
          "fit's overhead\n",
          fit->overhead);
  fprintf(f,
          "    special_rate = %.6g,    -- tanh, exp, ... per second: GeLUs over 4 MB, as the "
          "runtime computes them\n",
          p->gelu_per_s);
  fprintf(f,
          "  },\n  node = { devices = %d, link_bandwidth = %.6g, link_latency = %.6g }, -- "
          "all-reduce fit\n",
          p->ranks, fit->link_bandwidth, fit->link_latency);
  fprintf(f,
          "  network = { nics = 1, nic_bandwidth = %.6g, nic_latency = %.6g },     -- not crossed: "
          "one machine\n",
          fit->link_bandwidth, fit->link_latency);
  fprintf(f, "  kernels = {\n    attention = \"fused\", attention_dropout = 0,\n");
  write_rates(p->attention, p->nattention, "attention_rates",
              "{ FLOPs, FLOP/s } of the attention kernel, forward and backward, per shape measured",
              f);
  fprintf(f, "  },\n}\n");
}
