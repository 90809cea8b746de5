/* kernel_check.c: every kernel of kernels.h and optim.h against the CPU's on fresh random inputs. One
 * source built twice: against the CPU reference runtime, `kernel_check-cpu SEED DIR` writes each case's
 * outputs to DIR; against the CUDA runtime, `kernel_check-cuda SEED DIR` computes the same cases on the
 * GPU and compares: ‖out − ref‖/‖ref‖ within the case's tolerance (1e-2 where operands or outputs are
 * bf16, 1e-5 on fp32 paths, 1e-4 on fp32 sums over many terms), NaN never passing. Inputs are drawn from
 * Philox by (SEED, name, index) and rounded to bf16 on both sides, so both compute from the same values.
 * Outputs are poisoned (all bits set: NaN) before each run and must come back fully written; outputs
 * that accumulate start from drawn values. Prints PASS/FAIL lines; exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "kernels.h"
#include "optim.h"
#include "philox.h"

typedef struct {
  uint64_t seed;
  const char *dir;
  int passed, failed;
  int attention_runs, attention_on_cudnn;
} Check;

#ifdef PLAIT_CUDA
static const int on_gpu = 1;
#else
static const int on_gpu = 0;
#endif

/* ---- values -------------------------------------------------------------------------------------- */

/* x rounded to the nearest bf16 (ties to even), as a float. */
static float round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, sizeof x);
  return x;
}

static act_t to_act(float x) {
#ifdef PLAIT_CUDA
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return (act_t)(u >> 16); /* x is already a bf16 value */
#else
  return x;
#endif
}

/* Value i of the tensor `name`: uniform in [lo, hi), rounded to bf16. */
static float draw(const Check *c, const char *name, int64_t i, double lo, double hi) {
  return round_bf16((float)(lo + (hi - lo) * philox_uniform(c->seed, philox_stream_of(name), (uint64_t)i)));
}

static void *poisoned(size_t bytes) {
  void *host = malloc(bytes), *dev = device_alloc(bytes, "a kernel check's output");
  memset(host, 0xff, bytes);
  device_upload(dev, host, bytes);
  free(host);
  return dev;
}

static act_t *act_input(const Check *c, const char *name, int64_t n, double lo, double hi) {
  act_t *host = malloc((size_t)n * sizeof *host), *dev = device_alloc((size_t)n * sizeof *dev, name);
  for (int64_t i = 0; i < n; i++) host[i] = to_act(draw(c, name, i, lo, hi));
  device_upload(dev, host, (size_t)n * sizeof *host);
  free(host);
  return dev;
}

static real *real_input(const Check *c, const char *name, int64_t n, double lo, double hi) {
  real *host = malloc((size_t)n * sizeof *host), *dev = device_alloc((size_t)n * sizeof *dev, name);
  for (int64_t i = 0; i < n; i++) host[i] = draw(c, name, i, lo, hi);
  device_upload(dev, host, (size_t)n * sizeof *host);
  free(host);
  return dev;
}

/* Token ids in [0, below), drawn. */
static int32_t *id_input(const Check *c, const char *name, int64_t n, int64_t below) {
  int32_t *host = malloc((size_t)n * sizeof *host), *dev = device_alloc((size_t)n * sizeof *dev, name);
  for (int64_t i = 0; i < n; i++) host[i] = (int32_t)philox_below(c->seed, philox_stream_of(name), (uint64_t)i, (uint64_t)below);
  device_upload(dev, host, (size_t)n * sizeof *host);
  free(host);
  return dev;
}

static act_t *act_output(int64_t n) { return poisoned((size_t)n * sizeof(act_t)); }
static real *real_output(int64_t n) { return poisoned((size_t)n * sizeof(real)); }

/* ---- checking -------------------------------------------------------------------------------------- */

/* The reference side writes the values; the GPU side compares them with the reference's. */
static void settle(Check *c, const char *name, const double *out, int64_t n, double tolerance) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.bin", c->dir, name);
  if (!on_gpu) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(out, sizeof *out, (size_t)n, f) == (size_t)n;
    if (f && fclose(f) != 0) ok = 0;
    for (int64_t i = 0; i < n && ok; i++) ok = !isnan(out[i]);
    if (ok) c->passed++, printf("PASS reference %s (%lld values)\n", name, (long long)n);
    else c->failed++, printf("FAIL reference %s: NaN, or %s could not be written\n", name, path);
    return;
  }
  double *ref = malloc((size_t)n * sizeof *ref), diff = 0, norm = 0;
  FILE *f = fopen(path, "rb");
  int got = f && fread(ref, sizeof *ref, (size_t)n, f) == (size_t)n;
  if (f) fclose(f);
  if (!got) {
    c->failed++, printf("FAIL %s: no reference in %s (run kernel_check-cpu first)\n", name, path);
    free(ref);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (isnan(out[i])) {
      c->failed++, printf("FAIL %s: element %lld of %lld is NaN (poison left unwritten, or computed)\n", name,
                          (long long)i, (long long)n);
      free(ref);
      return;
    }
    if (out[i] == ref[i]) { /* infinities too (the max of a vocabulary shard with no columns is -inf) */
      norm += isinf(ref[i]) ? 0 : ref[i] * ref[i];
      continue;
    }
    if (isinf(out[i]) || isinf(ref[i])) {
      c->failed++, printf("FAIL %s: element %lld is %g, the reference %g\n", name, (long long)i, out[i], ref[i]);
      free(ref);
      return;
    }
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  /* A reference of RMS under 1e-6 is rounding noise about an exact zero (dq and dk where every query sees one
   * key: one position, or a window of one): compared in absolute terms, as an all-zero one is. */
  double error = norm > 1e-12 * (double)n ? sqrt(diff / norm) : sqrt(diff);
  if (error <= tolerance) c->passed++, printf("PASS %s (relative error %.2e, limit %.0e)\n", name, error, tolerance);
  else c->failed++, printf("FAIL %s: relative error %.3e above %.0e\n", name, error, tolerance);
  free(ref);
}

static void check_act(Check *c, const char *name, const act_t *dev, int64_t n, double tolerance) {
  act_t *host = malloc((size_t)n * sizeof *host);
  double *values = malloc((size_t)n * sizeof *values);
  device_download(host, dev, (size_t)n * sizeof *host);
  for (int64_t i = 0; i < n; i++) values[i] = act_value(host[i]);
  settle(c, name, values, n, tolerance);
  free(host);
  free(values);
}

static void check_real(Check *c, const char *name, const real *dev, int64_t n, double tolerance) {
  real *host = malloc((size_t)n * sizeof *host);
  double *values = malloc((size_t)n * sizeof *values);
  device_download(host, dev, (size_t)n * sizeof *host);
  for (int64_t i = 0; i < n; i++) values[i] = host[i];
  settle(c, name, values, n, tolerance);
  free(host);
  free(values);
}

static void check_value(Check *c, const char *name, double value, double tolerance) {
  settle(c, name, &value, 1, tolerance);
}

/* Whether two buffers of the backend hold the same bytes. */
static int same_bytes(const void *a, const void *b, size_t bytes) {
  char *x = malloc(bytes), *y = malloc(bytes);
  device_download(x, a, bytes);
  device_download(y, b, bytes);
  int same = memcmp(x, y, bytes) == 0;
  free(x), free(y);
  return same;
}

enum { BF16 = 0, FP32 = 1, SUMS = 2 };
static const double tolerance[] = {1e-2, 1e-5, 1e-4};

/* ---- cases ---------------------------------------------------------------------------------------- */

static void gemm_case(Check *c, int ta, int tb, int64_t M, int64_t N, int64_t K, real alpha, real beta) {
  char name[96];
  snprintf(name, sizeof name, "gemm_%c%c_%lldx%lldx%lld_b%g", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M,
           (long long)N, (long long)K, (double)beta);
  act_t *A = act_input(c, "gemm.A", M * K, -1, 1), *B = act_input(c, "gemm.B", K * N, -1, 1);
  act_t *C = beta == 0 ? act_output(M * N) : act_input(c, "gemm.C", M * N, -1, 1);
  k_gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
  check_act(c, name, C, M * N, tolerance[BF16]);
  real *G = real_input(c, "gemm.G", M * N, -1, 1);
  k_gemm_grad(ta, tb, M, N, K, A, B, G);
  snprintf(name, sizeof name, "gemm_grad_%c%c_%lldx%lldx%lld", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M,
           (long long)N, (long long)K);
  check_real(c, name, G, M * N, tolerance[SUMS]);
  device_free(A), device_free(B), device_free(C), device_free(G);
}

/* x starts `skew` elements into its buffer (1: not 16-byte aligned, the one-column path). */
static void sum_rows_case(Check *c, int64_t rows, int64_t C, int skew) {
  char name[64];
  act_t *buffer = act_input(c, "rows.x", rows * C + skew, -1, 1), *x = buffer + skew;
  act_t *sum = act_output(C);
  real *acc = real_input(c, "rows.acc", C, -1, 1);
  k_sum_rows(rows, C, x, acc);
  snprintf(name, sizeof name, "sum_rows_%lldx%lld_%d", (long long)rows, (long long)C, skew);
  check_real(c, name, acc, C, tolerance[SUMS]);
  k_sum_rows_act(rows, C, x, sum);
  snprintf(name, sizeof name, "sum_rows_act_%lldx%lld_%d", (long long)rows, (long long)C, skew);
  check_act(c, name, sum, C, tolerance[BF16]);
  device_free(buffer), device_free(sum), device_free(acc);
}

/* Forward, then backward from the forward's own statistics. */
static void norm_case(Check *c, int rms, int64_t rows, int64_t C) {
  char name[96];
  const char *kind = rms ? "rmsnorm" : "layernorm";
  act_t *x = act_input(c, "norm.x", rows * C, -2, 3), *w = act_input(c, "norm.w", C, 0.5, 1.5);
  act_t *b = act_input(c, "norm.b", C, -0.5, 0.5), *y = act_output(rows * C), *dy = act_input(c, "norm.dy", rows * C, -1, 1);
  act_t *dx = act_output(rows * C);
  real *mean = real_output(rows), *rstd = real_output(rows);
  real *dw = real_input(c, "norm.dw", C, -1, 1), *db = real_input(c, "norm.db", C, -1, 1);
  if (rms) k_rmsnorm_forward(rows, C, x, w, (real)1e-5, y, rstd);
  else k_layernorm_forward(rows, C, x, w, b, (real)1e-5, y, mean, rstd);
  snprintf(name, sizeof name, "%s_forward_y_%lldx%lld", kind, (long long)rows, (long long)C);
  check_act(c, name, y, rows * C, tolerance[BF16]);
  snprintf(name, sizeof name, "%s_forward_rstd_%lldx%lld", kind, (long long)rows, (long long)C);
  check_real(c, name, rstd, rows, tolerance[FP32]);
  if (!rms) {
    snprintf(name, sizeof name, "%s_forward_mean_%lldx%lld", kind, (long long)rows, (long long)C);
    check_real(c, name, mean, rows, tolerance[SUMS]);
  }
  if (rms) k_rmsnorm_backward(rows, C, x, w, rstd, dy, dx, dw);
  else k_layernorm_backward(rows, C, x, w, mean, rstd, dy, dx, dw, db);
  snprintf(name, sizeof name, "%s_backward_dx_%lldx%lld", kind, (long long)rows, (long long)C);
  check_act(c, name, dx, rows * C, tolerance[BF16]);
  snprintf(name, sizeof name, "%s_backward_dw_%lldx%lld", kind, (long long)rows, (long long)C);
  check_real(c, name, dw, C, tolerance[SUMS]);
  if (!rms) {
    snprintf(name, sizeof name, "%s_backward_db_%lldx%lld", kind, (long long)rows, (long long)C);
    check_real(c, name, db, C, tolerance[SUMS]);
  }
  device_free(x), device_free(w), device_free(b), device_free(y), device_free(dy), device_free(dx);
  device_free(mean), device_free(rstd), device_free(dw), device_free(db);
}

/* Forward, then backward from the forward's own output and log-normalisers, on the kernels `choice`
 * gives the shape (the GPU's path is printed first and counted). */
static void attention_run(Check *c, const AttnShape *s, const char *tag, AttentionChoice choice) {
  char name[200];
  int64_t nq = s->B * s->T * s->Hq * s->D, nkv = s->B * s->T * s->Hkv * s->D;
  k_attention_choose(choice, 0);
  const char *path = k_attention_path(s);
  if (on_gpu) printf("attention %s on %s's kernels\n", tag, path);
  if (choice == ATTENTION_PLAIT && strcmp(path, "plait") != 0) /* a shape auto gave cuDNN, decided again */
    c->failed++, printf("FAIL attention_%s: --attention plait ran on %s's kernels\n", tag, path);
  c->attention_runs++, c->attention_on_cudnn += strcmp(path, "cuDNN") == 0;
  act_t *q = act_input(c, "attn.q", nq, -2, 2), *k = act_input(c, "attn.k", nkv, -2, 2);
  act_t *v = act_input(c, "attn.v", nkv, -1, 1), *dout = act_input(c, "attn.dout", nq, -1, 1);
  act_t *out = act_output(nq), *dq = act_output(nq), *dk = act_output(nkv), *dv = act_output(nkv);
  real *lse = real_output(s->B * s->Hq * s->T);
  k_attention_forward(s, q, k, v, out, lse);
  snprintf(name, sizeof name, "attention_forward_out_%s", tag);
  check_act(c, name, out, nq, tolerance[BF16]);
  snprintf(name, sizeof name, "attention_forward_lse_%s", tag);
  check_real(c, name, lse, s->B * s->Hq * s->T, tolerance[BF16]);
  k_attention_backward(s, q, k, v, out, lse, dout, dq, dk, dv);
  snprintf(name, sizeof name, "attention_backward_dq_%s", tag);
  check_act(c, name, dq, nq, tolerance[BF16]);
  snprintf(name, sizeof name, "attention_backward_dk_%s", tag);
  check_act(c, name, dk, nkv, tolerance[BF16]);
  snprintf(name, sizeof name, "attention_backward_dv_%s", tag);
  check_act(c, name, dv, nkv, tolerance[BF16]);
  /* plait's promise: the same bits on every run (no atomics, sums in a fixed order) */
  act_t *out2 = act_output(nq), *dq2 = act_output(nq), *dk2 = act_output(nkv), *dv2 = act_output(nkv);
  real *lse2 = real_output(s->B * s->Hq * s->T);
  k_attention_forward(s, q, k, v, out2, lse2);
  k_attention_backward(s, q, k, v, out2, lse2, dout, dq2, dk2, dv2);
  size_t q_bytes = (size_t)nq * sizeof(act_t), kv_bytes = (size_t)nkv * sizeof(act_t);
  size_t lse_bytes = (size_t)(s->B * s->Hq * s->T) * sizeof(real);
  int same = same_bytes(out, out2, q_bytes) && same_bytes(lse, lse2, lse_bytes) &&
             same_bytes(dq, dq2, q_bytes) && same_bytes(dk, dk2, kv_bytes) && same_bytes(dv, dv2, kv_bytes);
  snprintf(name, sizeof name, "attention_rerun_%s_%s", path, tag);
  if (same) c->passed++, printf("PASS %s (the same bits again)\n", name);
  else c->failed++, printf("FAIL %s: a second run gave other bits\n", name);
  device_free(q), device_free(k), device_free(v), device_free(dout), device_free(out);
  device_free(dq), device_free(dk), device_free(dv), device_free(lse);
  device_free(out2), device_free(dq2), device_free(dk2), device_free(dv2), device_free(lse2);
}

/* A shape with a sliding window, capped scores and a scale of one's own where asked, on the GPU both on
 * the kernels auto picks (cuDNN's where it serves the shape) and on plait's own. */
static void attention_case_with(Check *c, int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope,
                                int64_t window, double softcap, double scale, int alibi) {
  AttnShape s = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = causal, .rope = rope, .rope_theta = 10000,
                 .window = window, .softcap = softcap, .scale = scale, .alibi = alibi, .head0 = alibi ? Hq : 0,
                 .heads_total = 2 * Hq}; /* with ALiBi: the second of two ranks' heads */
  char tag[128];
  snprintf(tag, sizeof tag, "B%lld_T%lld_H%d_KV%d_D%d%s%s_w%lld_cap%g_scale%g%s", (long long)B, (long long)T, Hq, Hkv,
           D, causal ? "_causal" : "", rope ? "_rope" : "", (long long)window, softcap, scale, alibi ? "_alibi" : "");
  attention_run(c, &s, tag, ATTENTION_AUTO);
  if (on_gpu) attention_run(c, &s, tag, ATTENTION_PLAIT);
}

static void attention_case(Check *c, int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope) {
  attention_case_with(c, B, T, Hq, Hkv, D, causal, rope, 0, 0, 0, 0);
}

/* Rotary positions over part of each head, both pairings, scaled frequencies, and back. */
static void rope_case(Check *c, int64_t B, int64_t T, int heads, int D, int rotary, int interleaved,
                      RopeScalingKind scaling) {
  RopeShape s = {.B = B, .T = T, .heads = heads, .head_dim = D, .rotary = rotary, .interleaved = interleaved,
                 .theta = 10000, .scaling = scaling, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                 .original_positions = 64};
  char name[128];
  int64_t n = B * T * heads * D;
  act_t *x = act_input(c, "rope.x", n, -2, 2), *y = act_output(n), *back = act_output(n);
  k_rope(&s, x, y);
  snprintf(name, sizeof name, "rope_B%lld_T%lld_H%d_D%d_r%d_i%d_s%d", (long long)B, (long long)T, heads, D, rotary,
           interleaved, (int)scaling);
  check_act(c, name, y, n, tolerance[BF16]);
  s.inverse = 1;
  k_rope(&s, y, back);
  snprintf(name, sizeof name, "rope_inverse_B%lld_T%lld_H%d_D%d_r%d_i%d_s%d", (long long)B, (long long)T, heads, D,
           rotary, interleaved, (int)scaling);
  check_act(c, name, back, n, tolerance[BF16]);
  device_free(x), device_free(y), device_free(back);
}

/* A fused tensor taken apart by groups of parts of 3, 1 and 5 units and joined back, with a missing part as
 * zeros (units of 8: 16-byte copies; of 1: an element at a time). */
static void parts_case(Check *c, int64_t rows, int64_t groups, int64_t unit) {
  const int64_t sizes[3] = {3 * unit, unit, 5 * unit};
  char name[96], tag[64];
  int64_t period = 9 * unit, n = rows * groups * period;
  snprintf(tag, sizeof tag, "%lldx%lldx%lld", (long long)rows, (long long)groups, (long long)period);
  act_t *x = act_input(c, "parts.x", n, -1, 1), *joined = act_output(n), *lone = act_output(n);
  act_t *part[3];
  for (int i = 0; i < 3; i++) {
    part[i] = act_output(rows * groups * sizes[i]);
    k_split(rows, groups, 3, sizes, i, x, part[i]);
    snprintf(name, sizeof name, "split_%s_part%d", tag, i);
    check_act(c, name, part[i], rows * groups * sizes[i], tolerance[FP32]);
  }
  const act_t *all[3] = {part[0], part[1], part[2]}, *middle[3] = {NULL, part[1], NULL};
  k_concat(rows, groups, 3, sizes, all, joined);
  snprintf(name, sizeof name, "concat_%s", tag);
  check_act(c, name, joined, n, tolerance[FP32]);
  k_concat(rows, groups, 3, sizes, middle, lone);
  snprintf(name, sizeof name, "concat_one_part_%s", tag);
  check_act(c, name, lone, n, tolerance[FP32]);
  device_free(x), device_free(joined), device_free(lone);
  for (int i = 0; i < 3; i++) device_free(part[i]);
}

/* A shard of rows [row0, row0 + rows) of a small vocabulary, so that tokens repeat and some fall outside. */
static void embedding_case(Check *c, int64_t N, int64_t C, int64_t vocab, int64_t row0, int64_t rows) {
  char name[96];
  int32_t *ids = id_input(c, "embed.ids", N, vocab);
  act_t *table = act_input(c, "embed.table", rows * C, -1, 1), *out = act_output(N * C);
  act_t *dout = act_input(c, "embed.dout", N * C, -1, 1);
  real *dtable = real_input(c, "embed.dtable", rows * C, -1, 1);
  k_embedding_forward(N, C, ids, table, row0, rows, out);
  snprintf(name, sizeof name, "embedding_forward_%lldx%lld_rows%lld+%lld", (long long)N, (long long)C, (long long)row0,
           (long long)rows);
  check_act(c, name, out, N * C, tolerance[FP32]);
  k_embedding_backward(N, C, ids, dout, row0, rows, dtable);
  snprintf(name, sizeof name, "embedding_backward_%lldx%lld_rows%lld+%lld", (long long)N, (long long)C,
           (long long)row0, (long long)rows);
  check_real(c, name, dtable, rows * C, tolerance[SUMS]);
  device_free(ids), device_free(table), device_free(out), device_free(dout), device_free(dtable);
}

/* ---- a mixture of experts ------------------------------------------------------------------- */

/* Integers (indices, slots, counts), which must match exactly. */
static void check_ids(Check *c, const char *name, const int32_t *dev, int64_t n) {
  int32_t *host = malloc((size_t)n * sizeof *host);
  double *values = malloc((size_t)n * sizeof *values);
  device_download(host, dev, (size_t)n * sizeof *host);
  for (int64_t i = 0; i < n; i++) values[i] = host[i];
  settle(c, name, values, n, 0);
  free(host);
  free(values);
}

/* Router scores [T, E], drawn, but the last expert's far below the others: no token picks it
 * (k < E). */
static act_t *router_scores(const Check *c, int64_t T, int64_t E) {
  act_t *host = malloc((size_t)(T * E) * sizeof *host),
        *dev = device_alloc((size_t)(T * E) * sizeof *dev, "scores");
  for (int64_t i = 0; i < T * E; i++)
    host[i] = to_act(i % E == E - 1 ? -4.0f : draw(c, "moe.scores", i, -1, 1));
  device_upload(dev, host, (size_t)(T * E) * sizeof *host);
  free(host);
  return dev;
}

/* The kept rows: the sum of the route's counts. */
static int64_t kept_rows(int64_t E, const int32_t *counts) {
  int32_t *host = malloc((size_t)E * sizeof *host);
  device_download(host, counts, (size_t)E * sizeof *host);
  int64_t kept = 0;
  for (int64_t e = 0; e < E; e++) kept += host[e];
  free(host);
  return kept;
}

/* The experts' products over the routed rows [T·k, D]: C [kept, N] (W [E, D, N], then [E, N, D])
 * and the weight gradient of W [E, D, N] (accumulating onto drawn values). */
static void grouped_gemm_check(Check *c, const char *tag, int64_t n, int64_t E, int64_t D,
                               int64_t N, const int32_t *counts, const act_t *rows) {
  char name[96];
  int64_t kept = kept_rows(E, counts);
  act_t *W = act_input(c, "moe.W", E * D * N, -1, 1), *C = act_output(n * N);
  act_t *dC = act_input(c, "moe.dC", n * N, -1, 1);
  real *dW = real_input(c, "moe.dW", E * D * N, -1, 1);
  for (int trans_b = 0; trans_b < 2; trans_b++) {
    k_grouped_gemm(trans_b, E, counts, n, N, D, rows, W, C);
    snprintf(name, sizeof name, "moe_grouped_gemm_%c_%s", trans_b ? 'T' : 'N', tag);
    check_act(c, name, C, kept * N, tolerance[BF16]);
  }
  k_grouped_gemm_grad(E, counts, n, D, N, rows, dC, dW);
  snprintf(name, sizeof name, "moe_grouped_gemm_grad_%s", tag);
  check_real(c, name, dW, E * D * N, tolerance[SUMS]);
  device_free(W), device_free(C), device_free(dC), device_free(dW);
}

/* Rows back to their tokens, weighted, and the gradients of that. */
static void combine_check(Check *c, const char *tag, int64_t T, int64_t k, int64_t D,
                          const int32_t *slots, const act_t *weights) {
  char name[96];
  act_t *rows = act_input(c, "moe.rows", T * k * D, -1, 1), *out = act_output(T * D);
  act_t *dout = act_input(c, "moe.dout", T * D, -1, 1), *drows = act_output(T * k * D);
  act_t *dweights = act_output(T * k);
  k_moe_combine(T, k, D, rows, slots, weights, out);
  snprintf(name, sizeof name, "moe_combine_%s", tag);
  check_act(c, name, out, T * D, tolerance[BF16]);
  k_moe_combine(T, k, D, rows, slots, NULL, out);
  snprintf(name, sizeof name, "moe_combine_unweighted_%s", tag);
  check_act(c, name, out, T * D, tolerance[BF16]);
  k_moe_combine_backward(T, k, D, rows, slots, weights, dout, drows, dweights);
  snprintf(name, sizeof name, "moe_combine_backward_drows_%s", tag);
  check_act(c, name, drows, T * k * D, tolerance[BF16]);
  snprintf(name, sizeof name, "moe_combine_backward_dweights_%s", tag);
  check_act(c, name, dweights, T * k, tolerance[BF16]);
  device_free(rows), device_free(out), device_free(dout), device_free(drows), device_free(dweights);
}

/* T tokens each to k of E experts (the last expert gets none) with rows of D, each expert keeping
 * at most `capacity` of them by their score (0: all): top-k and its gradient, the route, the
 * fractions, the dispatch, the experts' GEMMs over uneven counts, and the combine. */
static void moe_case(Check *c, int64_t T, int k, int64_t E, int64_t D, int64_t capacity) {
  char name[96], tag[64];
  int64_t n = T * k;
  snprintf(tag, sizeof tag, "%lldx%dof%lld_D%lld_cap%lld", (long long)T, k, (long long)E,
           (long long)D, (long long)capacity);
  act_t *scores = router_scores(c, T, E), *values = act_output(n), *dscores = act_output(T * E);
  act_t *dvalues = act_input(c, "moe.dvalues", n, -1, 1), *fractions = act_output(E);
  int32_t *indices = poisoned((size_t)n * sizeof *indices),
          *slots = poisoned((size_t)n * sizeof *slots);
  int32_t *counts = poisoned((size_t)E * sizeof *counts);
  k_topk(T, E, k, scores, values, indices);
  snprintf(name, sizeof name, "moe_topk_values_%s", tag);
  check_act(c, name, values, n, tolerance[FP32]);
  snprintf(name, sizeof name, "moe_topk_indices_%s", tag);
  check_ids(c, name, indices, n);
  k_topk_backward(T, E, k, indices, dvalues, dscores);
  snprintf(name, sizeof name, "moe_topk_backward_%s", tag);
  check_act(c, name, dscores, T * E, tolerance[FP32]);
  k_moe_route(T, k, E, capacity, indices, values, slots, counts);
  snprintf(name, sizeof name, "moe_route_slots_%s", tag);
  check_ids(c, name, slots, n);
  snprintf(name, sizeof name, "moe_route_counts_%s", tag);
  check_ids(c, name, counts, E);
  k_moe_fractions(E, counts, fractions);
  snprintf(name, sizeof name, "moe_fractions_%s", tag);
  check_act(c, name, fractions, E, tolerance[BF16]);
  act_t *x = act_input(c, "moe.x", T * D, -1, 1), *rows = act_output(n * D);
  k_moe_dispatch(T, k, D, x, slots, rows);
  snprintf(name, sizeof name, "moe_dispatch_%s", tag);
  check_act(c, name, rows, n * D, tolerance[FP32]);
  grouped_gemm_check(c, tag, n, E, D, 24, counts, rows);
  combine_check(c, tag, T, k, D, slots, values);
  device_free(scores), device_free(values), device_free(dscores), device_free(dvalues),
      device_free(fractions);
  device_free(indices), device_free(slots), device_free(counts), device_free(x), device_free(rows);
}

/* A cross entropy's row statistics, checked as STEP_max_TAG, STEP_sumexp_TAG, STEP_target_TAG, STEP_lse_TAG. */
static void check_xent_rows(Check *c, const char *step, const char *tag, int64_t N, const real *max, const real *sumexp,
                            const real *target, const real *lse) {
  const char *what[4] = {"max", "sumexp", "target", "lse"};
  const real *rows[4] = {max, sumexp, target, lse};
  for (int i = 0; i < 4; i++) {
    char name[160];
    snprintf(name, sizeof name, "%s_%s_%s", step, what[i], tag);
    check_real(c, name, rows[i], N, tolerance[i == 1 ? SUMS : FP32]);
  }
}

/* The three forward steps and the backward of one shard of columns [col0, col0 + cols), vocabulary
 * `vocab` (the rest padding), targets over the whole vocabulary with some rows ignored (target -1, and
 * the ignored id: every fifth row's target is 7, which the loss and the gradient take as ignored); over
 * whole rows, the forward that also takes the gradient. */
static void xent_case(Check *c, int64_t N, int64_t cols, int64_t col0, int64_t vocab) {
  char name[128], tag[64];
  snprintf(tag, sizeof tag, "%lldx%lld_col%lld_vocab%lld", (long long)N, (long long)cols, (long long)col0, (long long)vocab);
  act_t *logits = act_input(c, "xent.logits", N * cols, -4, 4);
  int32_t *host = malloc((size_t)N * sizeof *host), *targets = device_alloc((size_t)N * sizeof *targets, "targets");
  for (int64_t n = 0; n < N; n++)
    host[n] = n % 7 == 3 ? -1 : n % 5 == 1 && vocab > 7 ? 7
            : (int32_t)philox_below(c->seed, philox_stream_of("xent.targets"), (uint64_t)n, (uint64_t)vocab);
  device_upload(targets, host, (size_t)N * sizeof *host);
  real *max = real_output(N), *sumexp = real_output(N), *target = real_output(N), *lse = real_output(N);
  k_xent_max(N, cols, logits, col0, vocab, max);
  k_xent_sums(N, cols, logits, col0, vocab, targets, max, sumexp, target);
  double loss = k_xent_loss(N, targets, 7, max, sumexp, target, (real)(1.0 / N), lse);
  snprintf(name, sizeof name, "xent_loss_%s", tag);
  check_value(c, name, loss, tolerance[SUMS]);
  check_xent_rows(c, "xent", tag, N, max, sumexp, target, lse);
  k_xent_backward(N, cols, logits, col0, vocab, targets, 7, lse, (real)(1.0 / N));
  snprintf(name, sizeof name, "xent_backward_%s", tag);
  check_act(c, name, logits, N * cols, tolerance[BF16]);
  if (col0 == 0 && cols >= vocab) {
    act_t *fused = act_input(c, "xent.logits", N * cols, -4, 4);
    real *stats = real_output(4 * N);
    loss = k_xent_forward_grad(N, cols, fused, vocab, targets, 7, (real)(1.0 / N), stats, stats + N, stats + 2 * N,
                               stats + 3 * N);
    snprintf(name, sizeof name, "xent_forward_grad_loss_%s", tag);
    check_value(c, name, loss, tolerance[SUMS]);
    snprintf(name, sizeof name, "xent_forward_grad_%s", tag);
    check_act(c, name, fused, N * cols, tolerance[BF16]);
    check_xent_rows(c, "xent_forward_grad", tag, N, stats, stats + N, stats + 2 * N, stats + 3 * N);
    device_free(fused), device_free(stats);
  }
  free(host);
  device_free(logits), device_free(targets), device_free(max), device_free(sumexp), device_free(target), device_free(lse);
}

static void optim_case(Check *c, int64_t n) {
  AdamW opt = optim_adamw_default();
  real *param = real_input(c, "adam.param", n, -1, 1), *grad = real_input(c, "adam.grad", n, -0.1, 0.1);
  real *m = real_input(c, "adam.m", n, -0.01, 0.01), *v = real_input(c, "adam.v", n, 0, 1e-4);
  check_value(c, "norm_sq", optim_norm_sq(n, grad), tolerance[FP32]); /* before the step clears the gradient */
  optim_adamw_step(&opt, 3, 1e-3, 1, 0.7, n, param, grad, m, v);
  check_real(c, "adamw_param", param, n, tolerance[FP32]);
  check_real(c, "adamw_m", m, n, tolerance[FP32]);
  check_real(c, "adamw_v", v, n, tolerance[FP32]);
  check_real(c, "adamw_grad_cleared", grad, n, tolerance[FP32]);
  device_free(param), device_free(grad), device_free(m), device_free(v);
}

/* The compute copy optim_adamw_many writes on the GPU must be each new weight rounded to nearest
 * even (the CPU has no such copy). */
static void check_refreshed(Check *c, const real *param, const act_t *w, int64_t n) {
#ifdef PLAIT_CUDA
  real *p = malloc((size_t)n * sizeof *p);
  act_t *back = malloc((size_t)n * sizeof *back);
  device_download(p, param, (size_t)n * sizeof *p);
  device_download(back, w, (size_t)n * sizeof *back);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += act_value(back[i]) != round_bf16(p[i]);
  if (wrong == 0) c->passed++, printf("PASS adamw_many_w (%lld weights rounded)\n", (long long)n);
  else c->failed++, printf("FAIL adamw_many_w: %lld of %lld not rounded\n", (long long)wrong,
                           (long long)n);
  free(p), free(back);
#else
  (void)c, (void)param, (void)w, (void)n;
#endif
}

/* Tensors of odd sizes side by side in one buffer (most not 16-byte aligned; one empty), with and
 * without decay: the norm over them all, then one AdamW step over them all. */
static void optim_many_case(Check *c) {
  enum { COUNT = 7 };
  const int64_t sizes[COUNT] = {100003, 1, 17, 0, 16389, 40000, 8};
  int64_t n = 0, at[COUNT];
  for (int i = 0; i < COUNT; i++) at[i] = n, n += sizes[i];
  real *param = real_input(c, "many.param", n, -1, 1);
  real *grad = real_input(c, "many.grad", n, -0.1, 0.1);
  real *m = real_input(c, "many.m", n, -0.01, 0.01), *v = real_input(c, "many.v", n, 0, 1e-4);
  act_t *w = on_gpu ? act_output(n) : NULL;
  const real *g[COUNT];
  AdamwTensor t[COUNT];
  for (int i = 0; i < COUNT; i++) {
    g[i] = grad + at[i];
    t[i] = (AdamwTensor){sizes[i], i % 2, param + at[i], grad + at[i], m + at[i], v + at[i],
                         w ? w + at[i] : NULL};
  }
  check_value(c, "norm_sq_many", optim_norm_sq_many(COUNT, sizes, g), tolerance[FP32]);
  AdamW opt = optim_adamw_default();
  optim_adamw_many(&opt, 5, 2e-3, 0.9, COUNT, t);
  check_real(c, "adamw_many_param", param, n, tolerance[FP32]);
  check_real(c, "adamw_many_m", m, n, tolerance[FP32]);
  check_real(c, "adamw_many_v", v, n, tolerance[FP32]);
  check_real(c, "adamw_many_grad_cleared", grad, n, tolerance[FP32]);
  if (w) check_refreshed(c, param, w, n), device_free(w);
  device_free(param), device_free(grad), device_free(m), device_free(v);
}

#ifdef PLAIT_CUDA
/* The bf16 copy of master weights must be each value rounded to nearest even: compared with the host's
 * rounding (the CPU has no such copy). */
static void to_act_case(Check *c, int64_t n) {
  real *host = malloc((size_t)n * sizeof *host), *src = device_alloc((size_t)n * sizeof *src, "master weights");
  act_t *dst = act_output(n), *back = malloc((size_t)n * sizeof *back);
  for (int64_t i = 0; i < n; i++)
    host[i] = (real)(4 * philox_uniform(c->seed, philox_stream_of("to_act"), (uint64_t)i) - 2);
  device_upload(src, host, (size_t)n * sizeof *host);
  k_to_act(n, src, dst);
  device_download(back, dst, (size_t)n * sizeof *back);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += act_value(back[i]) != round_bf16(host[i]);
  if (wrong == 0) c->passed++, printf("PASS to_act (%lld values rounded to nearest even)\n", (long long)n);
  else c->failed++, printf("FAIL to_act: %lld of %lld values not rounded to nearest even\n", (long long)wrong, (long long)n);
  free(host), free(back);
  device_free(src), device_free(dst);
}
#endif

/* On a GPU where a cuDNN can be used, some of the attention cases must have run on it. */
static void attention_cudnn_coverage(Check *c) {
  char why[1024];
  if (!on_gpu) return;
  int usable = k_attention_available(ATTENTION_CUDNN, why, sizeof why) == 0;
  printf("attention: %d of %d runs on cuDNN's kernels%s%s\n", c->attention_on_cudnn, c->attention_runs,
         usable ? "" : "; cuDNN cannot be used: ", usable ? "" : why);
  if (usable && c->attention_on_cudnn == 0) c->failed++, printf("FAIL attention: no case ran on cuDNN\n");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SEED DIR\n", argv[0]);
    return 2;
  }
  Check c = {.seed = strtoull(argv[1], NULL, 10), .dir = argv[2]};
  device_init(0, 1);
  printf("kernel check on %s, seed %llu\n", device_name(), (unsigned long long)c.seed);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) gemm_case(&c, ta, tb, 192, 160, 96, 1, 0);
  gemm_case(&c, 0, 1, 77, 130, 52, 0.5f, 1);
  gemm_case(&c, 1, 0, 64, 48, 600, 1, 0);
  sum_rows_case(&c, 300, 200, 0);
  sum_rows_case(&c, 1000, 768, 0);
  sum_rows_case(&c, 129, 37, 0);    /* 37 columns: a column a thread */
  sum_rows_case(&c, 4099, 776, 0);  /* 97 vectors: a slice of one; chunks of 24 rows, the last 19 */
  sum_rows_case(&c, 3001, 45, 0);   /* a column a thread, a slice and a part; a last chunk of 1 */
  sum_rows_case(&c, 7, 20000, 0);   /* fewer rows than a block's lanes: one chunk, 79 slices */
  sum_rows_case(&c, 1031, 264, 1);  /* a multiple of 8 columns, x not 16-byte aligned */
  norm_case(&c, 0, 256, 768);
  norm_case(&c, 0, 100, 100);
  norm_case(&c, 1, 200, 512);
  norm_case(&c, 1, 33, 36);
  norm_case(&c, 0, 41, 2048); /* rows held in registers, 8 vectors a lane */
  norm_case(&c, 1, 19, 2304); /* rows too wide to hold: read again each pass */
  norm_case(&c, 0, 1000, 1000); /* fused backward: lanes past the row's end, a short last chunk */
  norm_case(&c, 1, 300, 1544);  /* fused backward, 7 of 8 vectors a lane held, chunks of 64 rows */
  norm_case(&c, 0, 5000, 768);  /* GPT-2's width: 79 chunks, unequal runs of the final sums */
  norm_case(&c, 0, 3, 64);      /* fewer rows than warps: warps without a row */
  attention_case(&c, 2, 128, 4, 4, 64, 1, 0);
  attention_case(&c, 1, 100, 4, 2, 32, 1, 1);
  attention_case(&c, 2, 64, 2, 1, 128, 0, 1);
  attention_case(&c, 1, 80, 2, 2, 16, 0, 0);
  attention_case(&c, 1, 192, 2, 2, 128, 1, 1);
  attention_case(&c, 1, 1, 2, 1, 16, 1, 1);  /* one position */
  attention_case(&c, 1, 65, 4, 1, 64, 0, 1); /* four query heads to a kv head, one tile and a row */
  attention_case(&c, 1, 70, 8, 2, 16, 1, 1);
  attention_case_with(&c, 2, 200, 4, 2, 64, 1, 1, 70, 0, 0, 0);    /* a sliding window across tiles */
  attention_case_with(&c, 1, 130, 2, 1, 128, 1, 0, 5, 0, 0, 0);    /* a window shorter than a tile */
  attention_case_with(&c, 1, 100, 4, 2, 32, 1, 1, 0, 1.5, 0.1, 0); /* capped scores, a scale of one's own */
  attention_case_with(&c, 1, 90, 2, 2, 16, 0, 0, 0, 2.0, 0, 0);    /* capped, not causal */
  attention_case_with(&c, 1, 150, 4, 4, 64, 1, 0, 0, 0, 0, 1);     /* ALiBi, a second rank's heads */
  attention_case(&c, 1, 70, 2, 1, 256, 1, 1);                       /* heads of 256 (Gemma): the plain kernel */
  attention_case(&c, 2, 40, 4, 2, 80, 0, 1);                        /* heads of 80 (Phi-2), not causal */
  attention_case_with(&c, 1, 90, 2, 2, 48, 1, 0, 20, 3.0, 0.2, 1); /* 48 wide: window, cap, scale, ALiBi */
  /* the edges of the tiles (attention.cu's Plan): partial last tiles of every size, the chunks of the
   * capped or ALiBi forward, heads of 96, ALiBi without causality, windows of one key, of one tile, across */
  attention_case(&c, 1, 97, 4, 2, 96, 1, 1);                        /* heads of 96, causal */
  attention_case_with(&c, 1, 190, 2, 2, 96, 0, 0, 0, 3.0, 0, 1);   /* 96, capped, ALiBi, not causal */
  attention_case_with(&c, 1, 140, 4, 4, 80, 1, 0, 33, 0, 0, 1);    /* 80: window, ALiBi */
  attention_case_with(&c, 1, 255, 2, 1, 64, 1, 1, 40, 0, 0, 0);    /* a key tile and a chunk short */
  attention_case_with(&c, 1, 129, 4, 1, 64, 1, 0, 0, 2.0, 0, 1);   /* one past a tile, capped, ALiBi */
  attention_case_with(&c, 1, 100, 2, 2, 64, 0, 0, 0, 0, 0, 1);     /* ALiBi not causal: |t − t'| */
  attention_case_with(&c, 1, 257, 4, 1, 128, 1, 0, 100, 0, 0, 0);  /* 128: window across tiles */
  attention_case_with(&c, 1, 300, 2, 1, 128, 1, 0, 10, 2.5, 0, 0); /* 128 capped: the small chunks */
  attention_case_with(&c, 1, 33, 2, 2, 128, 0, 1, 0, 1.0, 0, 1);   /* 128: rope, cap, ALiBi */
  attention_case_with(&c, 1, 64, 4, 4, 128, 1, 0, 1, 0, 0, 0);     /* a window of one key */
  attention_case_with(&c, 2, 160, 2, 1, 32, 1, 0, 64, 0, 0, 0);    /* a window of one tile */
  attention_case_with(&c, 1, 70, 2, 2, 16, 0, 1, 0, 0, 0, 1);      /* 16: rope, ALiBi, not causal */
  attention_case(&c, 1, 50, 2, 1, 20, 1, 1);                        /* 20: plain kernels, Δ's scalar loop */
  attention_case(&c, 1, 1024, 4, 4, 64, 1, 0);                      /* GPT-2's heads over its sequence */
  attention_case_with(&c, 1, 640, 8, 2, 128, 1, 1, 200, 0, 0, 0);  /* Llama-like: grouped, rope, a window */
  attention_case(&c, 1, 203, 4, 2, 128, 1, 0);                      /* 128: the forward's 32-key chunks, odd T */
  attention_case_with(&c, 2, 161, 4, 1, 128, 1, 0, 40, 0, 0, 0);    /* 128: a window inside a key tile */
  attention_case_with(&c, 1, 250, 4, 2, 128, 1, 1, 33, 0, 0.05, 0); /* 128: grouped, rope, window, scale */
  attention_case_with(&c, 1, 97, 4, 2, 128, 1, 0, 20, 0, 0, 0);    /* 128: dQ's 32-key chunks, a window in one */
  attention_case_with(&c, 1, 161, 2, 1, 128, 0, 1, 0, 2.0, 0, 1);  /* 128: dQ's chunks of one key, cap, ALiBi */
  attention_cudnn_coverage(&c);
  rope_case(&c, 2, 100, 4, 64, 64, 0, ROPE_SCALING_NONE);
  rope_case(&c, 1, 70, 3, 80, 32, 0, ROPE_SCALING_NONE); /* Phi-2's partial rotary */
  rope_case(&c, 1, 50, 2, 64, 64, 1, ROPE_SCALING_LINEAR);
  rope_case(&c, 2, 90, 2, 128, 128, 0, ROPE_SCALING_LLAMA3);
  parts_case(&c, 100, 4, 8);
  parts_case(&c, 7, 1, 8);
  parts_case(&c, 33, 3, 1);
  embedding_case(&c, 300, 64, 50, 0, 50);
  embedding_case(&c, 500, 96, 120, 40, 60);
  embedding_case(&c, 1000, 64, 3, 0, 3);     /* each row's positions over many chunks of 64 */
  embedding_case(&c, 777, 36, 5, 2, 3);      /* 36 columns: no 16-byte rows; ids on both sides of the shard */
  embedding_case(&c, 4099, 768, 5000, 0, 5000);
  embedding_case(&c, 1, 8, 4, 1, 2);         /* one position */
  xent_case(&c, 64, 300, 0, 300);
  xent_case(&c, 70, 300, 100, 350);
  xent_case(&c, 16, 64, 400, 350); /* a shard of padding only: the tiny model's vocabulary at tp 4 */
  xent_case(&c, 33, 1004, 0, 1001);          /* rows of 1004: every row starts at another 16-byte offset */
  xent_case(&c, 31, 512, 0, 500);            /* aligned rows, padding */
  xent_case(&c, 9, 256, 256, 500);           /* an aligned shard, part padding */
  xent_case(&c, 5, 50304, 0, 50257);         /* GPT-2's rows: one pass through shared memory */
  xent_case(&c, 3, 120001, 0, 119999);       /* rows too long for shared memory: the steps one by one */
  moe_case(&c, 40, 2, 8, 64, 0);
  moe_case(&c, 40, 2, 8, 64, 6);   /* a small capacity: the busy experts drop rows by score */
  moe_case(&c, 13, 1, 4, 20, 2);   /* rows of 20: one column a thread; top-1 */
  moe_case(&c, 3, 1, 8, 16, 0);    /* fewer tokens than experts */
  moe_case(&c, 700, 4, 16, 96, 0); /* a few sort tiles */
  moe_case(&c, 700, 4, 16, 96, 100);
  optim_case(&c, 100003);
  optim_many_case(&c);
#ifdef PLAIT_CUDA
  to_act_case(&c, 65537);
#endif
  printf("kernel check: %d passed, %d failed\n", c.passed, c.failed);
  return c.failed ? 1 : 0;
}
