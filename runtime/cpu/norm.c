/* norm.c: layer norm and RMS norm over the rows of a matrix, forward and backward. */
#include "cpu.h"
#include "kernels.h"

/* Sums along a row are split across vector lanes in an order fixed by this machine's vector width,
 * never by the number of threads; rows go to threads. A norm without a weight (or bias) reads a row of
 * ones (or zeros) in its place: the same bits as leaving the factor out, and loops with no test per
 * element, which vectorise (a NULL test inside made them scalar: 2 ns an element). */

/* A norm's weight and bias, or rows of ones and zeros standing for them. */
typedef struct {
  const real *w, *b;
  real *unit; /* [2C]: C ones, then C zeros; NULL when the norm has what the pass uses */
} NormWeights;

static NormWeights norm_weights(int64_t C, const real *w, const real *b, int uses_bias) {
  NormWeights n = {w, b, NULL};
  if (w && (b || !uses_bias)) return n;
  n.unit = cpu_alloc(2 * (size_t)C, sizeof(real), "a norm's unit weights");
  for (int64_t c = 0; c < C; c++) n.unit[c] = 1;
  n.w = w ? w : n.unit, n.b = b ? b : n.unit + C;
  return n;
}

/* Σ_c x[c], in double. */
CPU_WIDE static double norm_sum(int64_t C, const real *x) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; c++) sum += x[c];
  return sum;
}

/* Σ_c x[c]², in double. */
CPU_WIDE static double norm_sum_squares(int64_t C, const real *x) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; c++) sum += (double)x[c] * x[c];
  return sum;
}

/* Σ_c (x[c] − mean)², in double. */
CPU_WIDE static double norm_square_deviations(int64_t C, const real *x, double mean) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; c++) sum += (x[c] - mean) * (x[c] - mean);
  return sum;
}

/* y = (x − mean)·rstd·w + b, in double, rounded once. */
CPU_WIDE static void norm_apply(int64_t C, const real *x, double mean, double rstd, const real *w, const real *b,
                                real *y) {
#pragma omp simd
  for (int64_t c = 0; c < C; c++) y[c] = (real)((x[c] - mean) * rstd * w[c] + b[c]);
}

/* Per row: mean = Σx/C, var = Σ(x − mean)²/C (a second pass, free of cancellation), rstd = 1/sqrt(var + eps),
 * y = (x − mean)·rstd·w + b. */
void k_layernorm_forward(int64_t rows, int64_t C, const real *x, const real *w, const real *b, real eps, real *y,
                         real *mean, real *rstd) {
  NormWeights n = norm_weights(C, w, b, 1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const real *xr = x + r * C;
    double m = norm_sum(C, xr) / C;
    double rs = 1 / sqrt(norm_square_deviations(C, xr, m) / C + eps);
    norm_apply(C, xr, m, rs, n.w, n.b, y + r * C);
    mean[r] = (real)m;
    rstd[r] = (real)rs;
  }
  free(n.unit);
}

/* Per row: rstd = 1/sqrt(Σx²/C + eps), y = x·rstd·w. */
void k_rmsnorm_forward(int64_t rows, int64_t C, const real *x, const real *w, real eps, real *y, real *rstd) {
  NormWeights n = norm_weights(C, w, NULL, 1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const real *xr = x + r * C;
    double rs = 1 / sqrt(norm_sum_squares(C, xr) / C + eps);
    norm_apply(C, xr, 0, rs, n.w, n.b, y + r * C);
    rstd[r] = (real)rs;
  }
  free(n.unit);
}

/* One row of dx, with g = w·dy and x̂ = (x − mean)·rstd:
 *   dx = rstd·(g − mean_C(g) − x̂·mean_C(g·x̂))   (layer norm; the RMS norm has mean 0 and no mean_C(g) term),
 * both means in double. */
CPU_WIDE static void norm_row_grad(int64_t C, const real *x, const real *w, const real *dy, real mean, real rstd,
                                   int centred, real *dx) {
  double sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
  for (int64_t c = 0; c < C; c++) {
    real g = w[c] * dy[c];
    sum_g += g;
    sum_gx += g * ((x[c] - mean) * rstd);
  }
  real mean_g = centred ? (real)(sum_g / C) : 0, mean_gx = (real)(sum_gx / C);
#pragma omp simd
  for (int64_t c = 0; c < C; c++) dx[c] = rstd * (w[c] * dy[c] - mean_g - (x[c] - mean) * rstd * mean_gx);
}

/* dw[c] += Σ_r dy·x̂ and, when db is given, db[c] += Σ_r dy, with x̂ = (x − mean)·rstd (mean NULL: 0).
 * One block of columns per task, rows in order, sums in double: the bits do not depend on threads. */
CPU_WIDE static void norm_param_block(int64_t rows, int64_t C, int64_t c0, int64_t width, const real *x,
                                      const real *mean, const real *rstd, const real *dy, real *dw, real *db) {
  double sum_w[CPU_COLUMN_BLOCK] = {0}, sum_b[CPU_COLUMN_BLOCK] = {0};
  for (int64_t r = 0; r < rows; r++) {
    const real *xr = x + r * C + c0, *dyr = dy + r * C + c0;
    real m = mean ? mean[r] : 0, rs = rstd[r];
#pragma omp simd
    for (int64_t c = 0; c < width; c++) {
      sum_w[c] += dyr[c] * ((xr[c] - m) * rs);
      sum_b[c] += dyr[c];
    }
  }
  for (int64_t c = 0; c < width; c++) {
    dw[c0 + c] = (real)(dw[c0 + c] + sum_w[c]);
    if (db) db[c0 + c] = (real)(db[c0 + c] + sum_b[c]);
  }
}

static void norm_param_grads(int64_t rows, int64_t C, const real *x, const real *mean, const real *rstd,
                             const real *dy, real *dw, real *db) {
  if (!dw) return; /* a norm without weight (and bias) */
  int64_t blocks = (C + CPU_COLUMN_BLOCK - 1) / CPU_COLUMN_BLOCK;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; blk++) {
    int64_t c0 = blk * CPU_COLUMN_BLOCK;
    norm_param_block(rows, C, c0, cpu_min(CPU_COLUMN_BLOCK, C - c0), x, mean, rstd, dy, dw, db);
  }
}

void k_layernorm_backward(int64_t rows, int64_t C, const real *x, const real *w, const real *mean, const real *rstd,
                          const real *dy, real *dx, real *dw, real *db) {
  NormWeights n = norm_weights(C, w, NULL, 0);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) norm_row_grad(C, x + r * C, n.w, dy + r * C, mean[r], rstd[r], 1, dx + r * C);
  free(n.unit);
  norm_param_grads(rows, C, x, mean, rstd, dy, dw, db);
}

void k_rmsnorm_backward(int64_t rows, int64_t C, const real *x, const real *w, const real *rstd, const real *dy,
                        real *dx, real *dw) {
  NormWeights n = norm_weights(C, w, NULL, 0);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) norm_row_grad(C, x + r * C, n.w, dy + r * C, 0, rstd[r], 0, dx + r * C);
  free(n.unit);
  norm_param_grads(rows, C, x, NULL, rstd, dy, dw, NULL);
}
