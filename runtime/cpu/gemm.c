/* gemm.c: matrix products through OpenBLAS (or plain C loops when built with PLAIT_PLAIN_GEMM, for the
 * CPU reference of the GPU checks on machines without OpenBLAS), the machine's GEMM rate, and the row
 * sums of bias gradients. */
#ifndef PLAIT_PLAIN_GEMM
#include <cblas.h>
#endif

#include "clock.h"
#include "cpu.h"
#include "kernels.h"

/* Threads: OpenBLAS's OpenMP build (linked statically) runs its products on OpenMP threads, with its own
 * count (set per rank by cpu_gemm_threads); no kernel calls it from inside an OpenMP region. The OpenMP
 * thread count never changes a product's bits; OpenBLAS's count can: measured with OpenBLAS 0.3.21, one
 * thread and two or more give different bits on some shapes (1000×999×1001) and the same on the GPT-2
 * shapes tried (4096×768×768, 512×768×3072, 64×50304×768). */

#ifdef PLAIT_PLAIN_GEMM
/* C[i][j] = alpha·Σ_k op(A)[i][k]·op(B)[k][j] + beta·C[i][j] (beta = 0 ignores C), each row summed in
 * double in order of k. */
static void plain_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, real alpha, const real *A,
                       const real *B, real beta, real *C) {
#pragma omp parallel
  {
    double *row = cpu_alloc((size_t)N, sizeof(double), "a GEMM row");
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; i++) {
      memset(row, 0, (size_t)N * sizeof(double));
      for (int64_t k = 0; k < K; k++) {
        double a = trans_a ? A[k * M + i] : A[i * K + k];
        for (int64_t j = 0; j < N; j++) row[j] += a * (trans_b ? B[j * K + k] : B[k * N + j]);
      }
      for (int64_t j = 0; j < N; j++) C[i * N + j] = (real)(alpha * row[j] + (beta == 0 ? 0 : beta * C[i * N + j]));
    }
    free(row);
  }
}
#elif defined(PLAIT_REAL_DOUBLE)
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

/* C = beta·C when the inner dimension is empty (beta = 0 clears C, as BLAS does, even over NaNs). */
static void gemm_scale(int64_t M, int64_t N, real beta, real *C) {
#pragma omp parallel for
  for (int64_t i = 0; i < M * N; i++) C[i] = beta == 0 ? 0 : beta * C[i];
}

/* On the CPU activations are real: act_t and real name one type. */
void k_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, real alpha, const act_t *A, const act_t *B,
            real beta, act_t *C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    gemm_scale(M, N, beta, C);
    return;
  }
#ifdef PLAIT_PLAIN_GEMM
  plain_gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
#else
  /* Row-major: the leading dimension of a stored matrix is its number of columns. */
  GEMM(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)M,
       (blasint)N, (blasint)K, alpha, A, (blasint)(trans_a ? M : K), B, (blasint)(trans_b ? K : N), beta, C,
       (blasint)N);
#endif
}

void k_gemm_grad(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const act_t *A, const act_t *B, real *C) {
  k_gemm(trans_a, trans_b, M, N, K, 1, A, B, 1, C);
}

/* The fastest of `repeats` timed n×n×n products after one untimed one (threads started, pages touched):
 * 2·n³ floating-point operations over its time. 0 when n or repeats is not positive. */
double k_gemm_rate(int64_t n, int repeats) {
  if (n <= 0 || repeats <= 0) return 0;
  real *a = cpu_alloc((size_t)(3 * n * n), sizeof(real), "the GEMM rate");
  real *b = a + n * n, *c = b + n * n;
  for (int64_t i = 0; i < n * n; i++) {
    a[i] = (real)((i % 7) - 3) / 8;
    b[i] = (real)((i % 5) - 2) / 4;
  }
  k_gemm(0, 0, n, n, n, 1, a, b, 0, c);
  double best = INFINITY;
  for (int r = 0; r < repeats; r++) {
    double start = clock_seconds();
    k_gemm(0, 0, n, n, n, 1, a, b, 0, c);
    double took = clock_seconds() - start;
    if (took < best) best = took;
  }
  free(a);
  return best > 0 ? 2.0 * (double)n * (double)n * (double)n / best : 0;
}

/* One block of `width` columns from c0: out[c] = keep·out[c] + Σ_r x[r, c], the rows summed in order in
 * double, each column on its own (the same bits at any vector width). */
CPU_WIDE static void sum_rows_block(int64_t rows, int64_t C, int64_t c0, int64_t width, const real *x, real *out,
                                    int keep) {
  double sum[CPU_COLUMN_BLOCK] = {0};
  for (int64_t r = 0; r < rows; r++) {
    const real *row = x + r * C + c0;
#pragma omp simd
    for (int64_t c = 0; c < width; c++) sum[c] += row[c];
  }
  for (int64_t c = 0; c < width; c++) out[c0 + c] = (real)((keep ? out[c0 + c] : 0) + sum[c]);
}

/* out[c] = keep·out[c] + Σ_r x[r, c]: one block of columns per task. */
static void sum_rows(int64_t rows, int64_t C, const real *x, real *out, int keep) {
  int64_t blocks = (C + CPU_COLUMN_BLOCK - 1) / CPU_COLUMN_BLOCK;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; blk++) {
    int64_t c0 = blk * CPU_COLUMN_BLOCK;
    sum_rows_block(rows, C, c0, cpu_min(CPU_COLUMN_BLOCK, C - c0), x, out, keep);
  }
}

void k_sum_rows(int64_t rows, int64_t C, const act_t *x, real *out) { sum_rows(rows, C, x, out, 1); }
void k_sum_rows_act(int64_t rows, int64_t C, const act_t *x, act_t *out) { sum_rows(rows, C, x, out, 0); }
