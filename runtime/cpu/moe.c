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

/* A row of one expert by its priority: the larger first, a tie to the earlier row. */
typedef struct {
  double priority;
  int64_t row;
} RankedRow;

static int by_priority(const void *a, const void *b) {
  const RankedRow *x = a, *y = b;
  if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
  return (x->row > y->row) - (x->row < y->row);
}

/* kept[i] = 0 for the rows past an expert's capacity: of its rows (rows[0..n), in token order)
 * those of the smallest priority, or the latest without one. */
static void drop_past_capacity(int64_t n, const int64_t *rows, int64_t capacity,
                               const act_t *priority, RankedRow *ranked, char *kept) {
  for (int64_t i = 0; i < n; i++)
    ranked[i] = (RankedRow){priority ? priority[rows[i]] : 0, rows[i]};
  if (priority) qsort(ranked, (size_t)n, sizeof *ranked, by_priority);
  for (int64_t i = capacity; i < n; i++) kept[ranked[i].row] = 0;
}

/* Which rows each expert keeps under its capacity (all of them when capacity <= 0). */
static void keep_within_capacity(int64_t rows, int64_t E, int64_t capacity, const int32_t *indices,
                                 const act_t *priority, const int32_t *counts, char *kept) {
  for (int64_t i = 0; i < rows; i++) kept[i] = 1;
  if (capacity <= 0) return;
  int64_t *order = cpu_alloc((size_t)rows, sizeof *order, "the experts' rows");
  int64_t *first = cpu_alloc((size_t)E + 1, sizeof *first, "the experts' rows");
  RankedRow *ranked = cpu_alloc((size_t)rows, sizeof *ranked, "the experts' rows");
  for (int64_t e = 0; e < E; e++) first[e + 1] = first[e] + counts[e];
  int64_t *next = cpu_alloc((size_t)E, sizeof *next, "the experts' rows");
  memcpy(next, first, (size_t)E * sizeof *next);
  for (int64_t i = 0; i < rows; i++) order[next[indices[i]]++] = i;
  for (int64_t e = 0; e < E; e++)
    if (counts[e] > capacity)
      drop_past_capacity(counts[e], order + first[e], capacity, priority, ranked, kept);
  free(next);
  free(ranked);
  free(first);
  free(order);
}

/* A counting sort of the kept rows, stable: each expert's rows start after the earlier experts',
 * in token order. */
void k_moe_route(int64_t T, int64_t k, int64_t E, int64_t capacity, const int32_t *indices,
                 const act_t *priority, int32_t *slots, int32_t *counts) {
  int64_t *next = cpu_alloc((size_t)E, sizeof *next, "the experts' rows");
  char *kept = cpu_alloc((size_t)(T * k), 1, "the experts' rows");
  memset(counts, 0, (size_t)E * sizeof *counts);
  for (int64_t i = 0; i < T * k; i++) counts[indices[i]]++;
  keep_within_capacity(T * k, E, capacity, indices, priority, counts, kept);
  memset(counts, 0, (size_t)E * sizeof *counts);
  for (int64_t i = 0; i < T * k; i++) counts[indices[i]] += kept[i];
  for (int64_t e = 1; e < E; e++) next[e] = next[e - 1] + counts[e - 1];
  for (int64_t i = 0; i < T * k; i++) slots[i] = kept[i] ? (int32_t)next[indices[i]]++ : -1;
  free(kept);
  free(next);
}

/* The slots that are not -1: the rows 0 .. kept - 1 a route filled. */
static int64_t kept_rows(int64_t n, const int32_t *slots) {
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) kept += slots[i] >= 0;
  return kept;
}

/* Rows kept .. n - 1 of width D, which no slot names, as zeros. */
static void zero_unrouted(int64_t n, int64_t D, const int32_t *slots, act_t *rows) {
  int64_t kept = kept_rows(n, slots);
  memset(rows + kept * D, 0, (size_t)((n - kept) * D) * sizeof *rows);
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
      if (slots[t * k + j] >= 0)
        memcpy(rows + slots[t * k + j] * D, x + t * D, (size_t)D * sizeof *x);
  zero_unrouted(T * k, D, slots, rows);
}

void k_moe_combine(int64_t T, int64_t k, int64_t D, const act_t *rows, const int32_t *slots,
                   const act_t *weights, act_t *out) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; t++) {
    act_t *o = out + t * D;
    memset(o, 0, (size_t)D * sizeof *o);
    for (int64_t j = 0; j < k; j++) {
      if (slots[t * k + j] < 0) continue;
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
      if (slot < 0) {
        dweights[t * k + j] = 0;
        continue;
      }
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
  zero_unrouted(T * k, D, slots, drows);
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
