/* xent.c: softmax cross entropy over logits split by columns (vocabulary-parallel), forward and backward. */
#include "cpu.h"
#include "kernels.h"

/* The columns of this shard that are real vocabulary entries (the rest is padding): [0, valid). */
static int64_t xent_valid(int64_t cols, int64_t col0, int64_t vocab) {
  return col0 >= vocab ? 0 : cpu_min(cols, vocab - col0);
}

/* The row helpers run once per row over the whole vocabulary shard: vectorised (exp included), their
 * sums split across vector lanes in an order fixed by this machine's vector width, never by threads. */

CPU_WIDE static real xent_row_max(int64_t valid, const real *z) {
  real m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < valid; j++) m = z[j] > m ? z[j] : m;
  return m;
}

CPU_WIDE static double xent_row_sumexp(int64_t valid, const real *z, real max) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; j++) sum += cpu_exp(z[j] - max);
  return sum;
}

/* e_j = exp(z_j − max) written over z_j; returns Σ_j e_j in double (summed as xent_row_sumexp sums). */
CPU_WIDE static double xent_row_exp(int64_t valid, real *z, real max) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; j++) {
    real e = cpu_exp(z[j] - max);
    z[j] = e;
    sum += e;
  }
  return sum;
}

CPU_WIDE static void xent_row_scale(int64_t valid, real *z, real mul) {
#pragma omp simd
  for (int64_t j = 0; j < valid; j++) z[j] *= mul;
}

CPU_WIDE static void xent_row_grad(int64_t valid, real *z, real lse, real scale) {
#pragma omp simd
  for (int64_t j = 0; j < valid; j++) z[j] = scale * cpu_exp(z[j] - lse);
}

/* max[n] = max_j z[n, j] over valid local columns; -inf when the shard holds none. */
void k_xent_max(int64_t N, int64_t cols, const real *logits, int64_t col0, int64_t vocab, real *max) {
  int64_t valid = xent_valid(cols, col0, vocab);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) max[n] = xent_row_max(valid, logits + n * cols);
}

/* sumexp[n] = Σ_j exp(z[n, j] − max[n]) over valid local columns, in double; target[n] = z[n, t_n]
 * when this shard holds column t_n, else 0 (the all-reduce adds the owner's value to zeros). */
void k_xent_sums(int64_t N, int64_t cols, const real *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                 const real *max, real *sumexp, real *target) {
  int64_t valid = xent_valid(cols, col0, vocab);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const real *z = logits + n * cols;
    int64_t t = (int64_t)targets[n] - col0;
    sumexp[n] = (real)xent_row_sumexp(valid, z, max[n]);
    target[n] = t >= 0 && t < valid ? z[t] : 0;
  }
}

/* A row counts when its target is a token (0 or more) and not the ignored id: -1 marks a position with
 * nothing to predict (masked-LM data off the mask, evaluation past the file's end). */
static int xent_counts(int32_t target, int64_t ignore) { return target >= 0 && target != ignore; }

/* lse[n] = max[n] + log(sumexp[n]) for every row; the loss scale·Σ_n (lse[n] − target[n]) over the rows
 * that count, summed in row order in double. */
double k_xent_loss(int64_t N, const int32_t *targets, int64_t ignore, const real *max, const real *sumexp,
                   const real *target, real scale, real *lse) {
  double loss = 0;
  for (int64_t n = 0; n < N; n++) {
    double row_lse = max[n] + log((double)sumexp[n]);
    lse[n] = (real)row_lse;
    if (xent_counts(targets[n], ignore)) loss += row_lse - target[n];
  }
  return scale * loss;
}

/* In place: z[n, j] ← scale·(exp(z − lse[n]) − [col0 + j = t_n]) on valid columns, 0 on padding and on
 * rows that do not count. */
void k_xent_backward(int64_t N, int64_t cols, real *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                     int64_t ignore, const real *lse, real scale) {
  int64_t valid = xent_valid(cols, col0, vocab);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    real *z = logits + n * cols;
    int64_t t = (int64_t)targets[n] - col0, kept = xent_counts(targets[n], ignore) ? valid : 0;
    xent_row_grad(kept, z, lse[n], scale);
    if (kept && t >= 0 && t < valid) z[t] -= scale;
    memset(z + kept, 0, (size_t)(cols - kept) * sizeof(real));
  }
}

/* Row n of k_xent_forward_grad: three passes over one row of the logits (a 50k vocabulary's row is 200 KB:
 * in L2 after the first), so the logits come from memory once and go back once. */
static void xent_row_forward_grad(int64_t n, int64_t cols, real *z, int64_t valid, const int32_t *targets,
                                  int64_t ignore, real scale, real *max, real *sumexp, real *target, real *lse) {
  int64_t t = targets[n];
  max[n] = xent_row_max(valid, z);
  target[n] = t >= 0 && t < valid ? z[t] : 0;
  sumexp[n] = (real)xent_row_exp(valid, z, max[n]);
  lse[n] = (real)(max[n] + log((double)sumexp[n]));
  if (xent_counts(targets[n], ignore)) {
    xent_row_scale(valid, z, scale / sumexp[n]);
    if (t >= 0 && t < valid) z[t] -= scale;
  } else {
    memset(z, 0, (size_t)valid * sizeof(real));
  }
  memset(z + valid, 0, (size_t)(cols - valid) * sizeof(real));
}

double k_xent_forward_grad(int64_t N, int64_t cols, real *logits, int64_t vocab, const int32_t *targets,
                           int64_t ignore, real scale, real *max, real *sumexp, real *target, real *lse) {
  int64_t valid = xent_valid(cols, 0, vocab);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++)
    xent_row_forward_grad(n, cols, logits + n * cols, valid, targets, ignore, scale, max, sumexp, target, lse);
  return k_xent_loss(N, targets, ignore, max, sumexp, target, scale, lse);
}
