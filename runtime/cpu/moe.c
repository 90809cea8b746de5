/* moe.c: a mixture of experts' kernels on the CPU: top-k, the routing of tokens to their experts'
 * rows and back, and a GEMM per expert over its rows. */
#include "cpu.h"
#include "kernels.h"

/* The k largest of row x[n], largest first; a tie goes to the lower index. */
static void topk_row(int64_t n, int k, const act_t *x, act_t *values, int32_t *indices) {
  for (int j = 0; j < k; j++) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++) {
      int taken = 0;
      for (int p = 0; p < j && !taken; p++) taken = indices[p] == i;
      if (!taken && (best < 0 || x[i] > x[best])) best = i;
    }
    indices[j] = (int32_t)best;
    values[j] = x[best];
  }
}

void k_topk(int64_t rows, int64_t n, int k, const act_t *x, act_t *values, int32_t *indices) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) topk_row(n, k, x + r * n, values + r * k, indices + r * k);
}

void k_topk_backward(int64_t rows, int64_t n, int k, const int32_t *indices, const act_t *dvalues,
                     act_t *dx) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    memset(dx + r * n, 0, (size_t)n * sizeof *dx);
    for (int j = 0; j < k; j++) dx[r * n + indices[r * k + j]] += dvalues[r * k + j];
  }
}

/* A counting sort, stable: each expert's rows start after the earlier experts', in token order. */
void k_moe_route(int64_t T, int64_t k, int64_t E, const int32_t *indices, int32_t *slots,
                 int32_t *counts) {
  int64_t *next = cpu_alloc((size_t)E, sizeof *next, "the experts' rows");
  memset(counts, 0, (size_t)E * sizeof *counts);
  for (int64_t i = 0; i < T * k; i++) counts[indices[i]]++;
  for (int64_t e = 1; e < E; e++) next[e] = next[e - 1] + counts[e - 1];
  for (int64_t i = 0; i < T * k; i++) slots[i] = (int32_t)next[indices[i]]++;
  free(next);
}

void k_moe_fractions(int64_t E, const int32_t *counts, act_t *fractions) {
  int64_t rows = 0;
  for (int64_t e = 0; e < E; e++) rows += counts[e];
  for (int64_t e = 0; e < E; e++) fractions[e] = (act_t)(rows ? (double)counts[e] / rows : 0.0);
}

void k_moe_dispatch(int64_t T, int64_t k, int64_t D, const act_t *x, const int32_t *slots,
                    act_t *rows) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < k; j++)
      memcpy(rows + slots[t * k + j] * D, x + t * D, (size_t)D * sizeof *x);
}

void k_moe_combine(int64_t T, int64_t k, int64_t D, const act_t *rows, const int32_t *slots,
                   const act_t *weights, act_t *out) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; t++) {
    act_t *o = out + t * D;
    memset(o, 0, (size_t)D * sizeof *o);
    for (int64_t j = 0; j < k; j++) {
      const act_t *row = rows + slots[t * k + j] * D;
      real w = weights ? weights[t * k + j] : 1;
      for (int64_t d = 0; d < D; d++) o[d] += w * row[d];
    }
  }
}

void k_moe_combine_backward(int64_t T, int64_t k, int64_t D, const act_t *rows,
                            const int32_t *slots, const act_t *weights, const act_t *dout,
                            act_t *drows, act_t *dweights) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < k; j++) {
      int64_t slot = slots[t * k + j];
      const act_t *row = rows + slot * D, *g = dout + t * D;
      act_t *drow = drows + slot * D;
      real w = weights[t * k + j];
      double dot = 0;
      for (int64_t d = 0; d < D; d++) {
        drow[d] = w * g[d];
        dot += (double)row[d] * g[d];
      }
      dweights[t * k + j] = (real)dot;
    }
}

void k_grouped_gemm(int trans_b, int64_t E, const int32_t *counts, int64_t rows, int64_t N,
                    int64_t K, const act_t *A, const act_t *W, act_t *C) {
  int64_t first = 0;
  for (int64_t e = 0; e < E && first < rows; first += counts[e], e++)
    if (counts[e] > 0)
      k_gemm(0, trans_b, counts[e], N, K, 1, A + first * K, W + e * K * N, 0, C + first * N);
}

void k_grouped_gemm_grad(int64_t E, const int32_t *counts, int64_t rows, int64_t M, int64_t N,
                         const act_t *A, const act_t *B, real *C) {
  int64_t first = 0;
  for (int64_t e = 0; e < E && first < rows; first += counts[e], e++)
    if (counts[e] > 0)
      k_gemm_grad(1, 0, M, N, counts[e], A + first * M, B + first * N, C + e * M * N);
}
