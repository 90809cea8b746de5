/* test_kernels.c: the CPU kernels against plain reference code, finite differences and other thread counts. */
#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cpu/cpu.h"
#include "device.h"
#include "kernels.h"

/* Built against the fp64 runtime: `real` is double here. */
_Static_assert(sizeof(real) == sizeof(double), "test_kernels needs the fp64 runtime");

/* ---- helpers ----------------------------------------------------------------------------------- */

static uint64_t rng_state;

static double rng_uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / (double)(1ULL << 52) - 1;
}

static real *random_tensor(int64_t n) {
  real *x = malloc((size_t)(n ? n : 1) * sizeof(real));
  for (int64_t i = 0; i < n; i++) x[i] = rng_uniform();
  return x;
}

static real *copy_tensor(const real *x, int64_t n) {
  real *y = malloc((size_t)(n ? n : 1) * sizeof(real));
  memcpy(y, x, (size_t)n * sizeof(real));
  return y;
}

static double dot(const real *a, const real *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static double max_abs_diff(const real *a, const real *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
  return m;
}

/* Gradient check. A test gives L(x) = Σ w·out for fixed random weights w (its objective) and the analytic
 * gradient g = dL/dx from the backward kernel fed with dout = w. For each checked element the central
 * difference num = (L(x + h) − L(x − h)) / (the step actually taken), h = 1e-4, and
 *   err = |g − num| / max(|g| + |num|, 1e-3·S),   S = max_i |g_i| over the tensor:
 * a relative error, except that elements whose gradient is near zero are measured against 1e-3·S.
 * Rounding in L limits the difference to about 1e-16·|L|/h: with h = 1e-5, or a floor of 1e-6·S,
 * correct kernels measured up to 9e-7 on elements with |g| ~ 1e-5·S; with h = 1e-4 and this floor, at
 * most 1.1e-7 over eight seeds (the truncation error, ~h², stays below that).
 * Every element is checked when there are at most `samples`, otherwise `samples` random ones.
 * Returns the largest error. */
typedef double (*Objective)(void *ctx);

static double grad_check(Objective L, void *ctx, real *x, const real *g, int64_t n, int64_t samples) {
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(g[i]));
  for (int64_t s = 0; s < (n <= samples ? n : samples); s++) {
    int64_t i = n <= samples ? s : (int64_t)((rng_uniform() + 1) / 2 * n) % n;
    real saved = x[i];
    x[i] = saved + 1e-4;
    double up = L(ctx), hi = x[i];
    x[i] = saved - 1e-4;
    double down = L(ctx), lo = x[i];
    x[i] = saved;
    double num = (up - down) / (hi - lo);
    double err = fabs(g[i] - num) / fmax(fabs(g[i]) + fabs(num), 1e-3 * scale);
    worst = fmax(worst, err);
  }
  return worst;
}

enum { GRAD_SAMPLES = 48 };
static const double GRAD_TOL = 1e-6;

/* Runs fn(ctx) with 1, 2 and 3 threads; the outputs (out, n reals) must agree bit for bit. */
static int same_bits_across_threads(void (*fn)(void *ctx), void *ctx, real *out, int64_t n) {
  int threads = omp_get_max_threads(), same = 1;
  omp_set_num_threads(1);
  fn(ctx);
  real *first = copy_tensor(out, n);
  for (int t = 2; t <= 3; t++) {
    omp_set_num_threads(t);
    fn(ctx);
    same = same && memcmp(first, out, (size_t)n * sizeof(real)) == 0;
  }
  omp_set_num_threads(threads);
  free(first);
  return same;
}

/* ---- GEMM and row sums ------------------------------------------------------------------------- */

static void naive_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const real *A, const real *B,
                       double beta, real *C) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t p = 0; p < K; p++) s += (ta ? A[p * M + i] : A[i * K + p]) * (tb ? B[j * K + p] : B[p * N + j]);
      C[i * N + j] = alpha * s + beta * C[i * N + j];
    }
}

static void test_gemm_transposes(void) {
  int64_t sizes[][3] = {{5, 7, 3}, {33, 17, 29}, {1, 64, 130}};
  for (int z = 0; z < 3; z++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        int64_t M = sizes[z][0], N = sizes[z][1], K = sizes[z][2];
        real *A = random_tensor(M * K), *B = random_tensor(K * N), *C = random_tensor(M * N);
        real *want = copy_tensor(C, M * N);
        k_gemm(ta, tb, M, N, K, 0.7, A, B, 0.3, C);
        naive_gemm(ta, tb, M, N, K, 0.7, A, B, 0.3, want);
        double err = max_abs_diff(C, want, M * N);
        CHECK(err < 1e-12, "%ldx%ldx%ld trans_a=%d trans_b=%d: max error %g", (long)M, (long)N, (long)K, ta, tb, err);
        free(A), free(B), free(C), free(want);
      }
}

static void test_gemm_empty(void) {
  real A[4] = {1, 2, 3, 4}, B[4] = {1, 1, 1, 1}, C[4] = {1, 2, 3, 4};
  k_gemm(0, 0, 0, 2, 2, 1, A, B, 0, C); /* M = 0: nothing to write */
  k_gemm(0, 0, 2, 0, 2, 1, A, B, 0, C); /* N = 0 */
  CHECK(C[0] == 1 && C[3] == 4, "an empty product wrote C: %g %g", C[0], C[3]);
  k_gemm(0, 0, 2, 2, 0, 1, A, B, 0.5, C); /* K = 0: C = beta·C */
  CHECK(C[0] == 0.5 && C[1] == 1 && C[2] == 1.5 && C[3] == 2, "K = 0 with beta 0.5 gave %g %g %g %g", C[0], C[1],
        C[2], C[3]);
  C[1] = NAN;
  k_gemm(0, 0, 2, 2, 0, 1, A, B, 0, C);
  CHECK(C[0] == 0 && C[1] == 0, "K = 0 with beta 0 should clear C, gave %g %g", C[0], C[1]);
  C[2] = NAN;
  k_gemm(0, 0, 2, 2, 2, 1, A, B, 0, C);
  CHECK(C[0] == 3 && C[2] == 7, "beta 0 should ignore the old C, gave %g %g", C[0], C[2]);
}

static void test_gemm_rate(void) {
  double rate = k_gemm_rate(128, 3);
  CHECK(isfinite(rate) && rate > 0, "k_gemm_rate(128, 3) = %g", rate);
  CHECK(k_gemm_rate(0, 3) == 0, "k_gemm_rate(0, 3) should be 0");
}

/* The threads of this process: the entries of /proc/self/task (-1 where it cannot be read). */
static int process_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* The start-up peak rate leaves no OpenMP team behind: one kept beside a rank's own made libgomp sleep
 * idle threads after a few spins (more threads than cores), and every kernel woke them through the
 * kernel. Run first, before any region of this process has made a team on the main thread. */
static void test_peak_leaves_no_threads(void) {
  int before = process_threads();
  double rate = device_peak_flops();
  int after = process_threads();
  /* the team's threads leave once the measuring thread has: give them up to 2 s */
  for (int wait = 0; wait < 200 && after > before; wait++) {
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    after = process_threads();
  }
  CHECK(isfinite(rate) && rate > 0, "device_peak_flops() = %g", rate);
  CHECK(before > 0 && after == before, "threads before the peak rate %d, after %d: its team should end with it", before,
        after);
}

typedef struct {
  int64_t rows, C;
  const real *x, *start;
  real *out;
} SumRows;

static void sum_rows_run(void *ctx) {
  SumRows *s = ctx;
  memcpy(s->out, s->start, (size_t)s->C * sizeof(real));
  k_sum_rows(s->rows, s->C, s->x, s->out);
}

static void test_sum_rows(void) {
  int64_t rows = 37, C = 150; /* three column blocks, the last partial */
  real *x = random_tensor(rows * C), *start = random_tensor(C), *out = malloc(C * sizeof(real));
  SumRows s = {rows, C, x, start, out};
  sum_rows_run(&s);
  double worst = 0;
  for (int64_t c = 0; c < C; c++) {
    double want = start[c];
    for (int64_t r = 0; r < rows; r++) want += x[r * C + c];
    worst = fmax(worst, fabs(out[c] - want));
  }
  CHECK(worst < 1e-12, "sum_rows max error %g", worst);
  CHECK(same_bits_across_threads(sum_rows_run, &s, out, C), "sum_rows differs across thread counts");
  free(x), free(start), free(out);
}

/* ---- norms ------------------------------------------------------------------------------------- */

typedef struct {
  int rms;
  int64_t rows, C;
  real *x, *w, *b, *weights, *y, *mean, *rstd;
  real *dx, *dw, *db; /* dw, db start from dw0, db0 (the kernels add) */
  const real *dw0, *db0;
} Norm;

static void norm_forward(Norm *n) {
  if (n->rms) k_rmsnorm_forward(n->rows, n->C, n->x, n->w, 1e-5, n->y, n->rstd);
  else k_layernorm_forward(n->rows, n->C, n->x, n->w, n->b, 1e-5, n->y, n->mean, n->rstd);
}

static double norm_objective(void *ctx) {
  Norm *n = ctx;
  norm_forward(n);
  return dot(n->weights, n->y, n->rows * n->C);
}

static void norm_backward(void *ctx) {
  Norm *n = ctx;
  norm_forward(n);
  memcpy(n->dw, n->dw0, (size_t)n->C * sizeof(real));
  memcpy(n->db, n->db0, (size_t)n->C * sizeof(real));
  if (n->rms) k_rmsnorm_backward(n->rows, n->C, n->x, n->w, n->rstd, n->weights, n->dx, n->dw);
  else k_layernorm_backward(n->rows, n->C, n->x, n->w, n->mean, n->rstd, n->weights, n->dx, n->dw, n->db);
}

static Norm norm_new(int rms, int64_t rows, int64_t C) {
  Norm n = {rms, rows, C, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  n.x = random_tensor(rows * C), n.w = random_tensor(C), n.b = random_tensor(C);
  n.weights = random_tensor(rows * C);
  n.y = random_tensor(rows * C), n.mean = random_tensor(rows), n.rstd = random_tensor(rows);
  n.dx = random_tensor(rows * C), n.dw = random_tensor(C), n.db = random_tensor(C);
  n.dw0 = random_tensor(C), n.db0 = random_tensor(C);
  for (int64_t i = 0; i < rows * C; i++) n.x[i] = 3 * n.x[i] + 0.5; /* an offset mean, a spread */
  return n;
}

static void norm_free(Norm *n) {
  free(n->x), free(n->w), free(n->b), free(n->weights), free(n->y), free(n->mean), free(n->rstd);
  free(n->dx), free(n->dw), free(n->db), free((void *)n->dw0), free((void *)n->db0);
}

/* Plain per-row formulas, for the forward check. */
static void norm_reference(const Norm *n, real *y) {
  for (int64_t r = 0; r < n->rows; r++) {
    const real *x = n->x + r * n->C;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < n->C; c++) mean += x[c] / n->C;
    for (int64_t c = 0; c < n->C; c++) var += (n->rms ? x[c] * x[c] : (x[c] - mean) * (x[c] - mean)) / n->C;
    for (int64_t c = 0; c < n->C; c++)
      y[r * n->C + c] = n->rms ? x[c] / sqrt(var + 1e-5) * n->w[c]
                               : (x[c] - mean) / sqrt(var + 1e-5) * n->w[c] + n->b[c];
  }
}

static void check_norm(int rms) {
  Norm n = norm_new(rms, 5, 70); /* 70 columns: two column blocks */
  real *want = random_tensor(n.rows * n.C);
  norm_forward(&n);
  norm_reference(&n, want);
  double err = max_abs_diff(n.y, want, n.rows * n.C);
  CHECK(err < 1e-12, "forward max error %g", err);

  norm_backward(&n);
  real *dw = copy_tensor(n.dw, n.C), *db = copy_tensor(n.db, n.C);
  for (int64_t c = 0; c < n.C; c++) dw[c] -= n.dw0[c], db[c] -= n.db0[c];
  double ex = grad_check(norm_objective, &n, n.x, n.dx, n.rows * n.C, 1000);
  double ew = grad_check(norm_objective, &n, n.w, dw, n.C, 1000);
  CHECK(ex < GRAD_TOL, "dx relative error %g", ex);
  CHECK(ew < GRAD_TOL, "dw relative error %g", ew);
  if (!rms) {
    double eb = grad_check(norm_objective, &n, n.b, db, n.C, 1000);
    CHECK(eb < GRAD_TOL, "db relative error %g", eb);
  }
  free(dw), free(db), free(want);
  norm_free(&n);

  Norm big = norm_new(rms, 200, 300);
  CHECK(same_bits_across_threads(norm_backward, &big, big.dx, big.rows * big.C), "dx differs across thread counts");
  CHECK(same_bits_across_threads(norm_backward, &big, big.dw, big.C), "dw differs across thread counts");
  if (!rms) CHECK(same_bits_across_threads(norm_backward, &big, big.db, big.C), "db differs across thread counts");
  norm_free(&big);
}

static void test_layernorm(void) { check_norm(0); }
static void test_rmsnorm(void) { check_norm(1); }

/* ---- attention --------------------------------------------------------------------------------- */

typedef struct {
  AttnShape s;
  real *q, *k, *v, *out, *lse, *weights, *dq, *dk, *dv;
} Attention;

static Attention attention_new(int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope) {
  Attention a = {{.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = causal, .rope = rope, .rope_theta = 10000.0},
                 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t nq = B * T * Hq * D, nkv = B * T * Hkv * D;
  a.q = random_tensor(nq), a.k = random_tensor(nkv), a.v = random_tensor(nkv);
  for (int64_t i = 0; i < nq; i++) a.q[i] *= 2; /* peakier softmax rows */
  a.out = random_tensor(nq), a.lse = random_tensor(B * Hq * T), a.weights = random_tensor(nq);
  a.dq = random_tensor(nq), a.dk = random_tensor(nkv), a.dv = random_tensor(nkv);
  return a;
}

static void attention_free(Attention *a) {
  free(a->q), free(a->k), free(a->v), free(a->out), free(a->lse), free(a->weights);
  free(a->dq), free(a->dk), free(a->dv);
}

/* Rotates row x (D values, position t) plainly: pair (i, i + D/2) by the angle t·theta^(−2i/D). */
static void reference_rope(const AttnShape *s, int64_t t, real *x) {
  for (int i = 0; i < s->D / 2; i++) {
    double angle = t * pow(s->rope_theta, -2.0 * i / s->D), a = x[i], b = x[i + s->D / 2];
    x[i] = a * cos(angle) - b * sin(angle);
    x[i + s->D / 2] = b * cos(angle) + a * sin(angle);
  }
}

/* Whether query t sees key u: every key, or causally u ≤ t within the window. */
static int reference_sees(const AttnShape *s, int64_t t, int64_t u) {
  return !s->causal || (u <= t && (s->window == 0 || u > t - s->window));
}

/* A score as the shape asks: q·k·scale (1/√D by default), capped by c·tanh(s/c). */
static double reference_score(const AttnShape *s, const real *q, const real *k) {
  double x = dot(q, k, s->D) * (s->scale > 0 ? s->scale : 1 / sqrt(s->D));
  return s->softcap > 0 ? s->softcap * tanh(x / s->softcap) : x;
}

/* Attention with an explicit T×T score matrix per head. */
static void reference_attention(const Attention *a, real *out, real *lse) {
  const AttnShape *s = &a->s;
  int D = s->D;
  int64_t T = s->T;
  real *scores = malloc((size_t)(T * T) * sizeof(real));
  real *qr = malloc((size_t)(T * D) * sizeof(real)), *kr = malloc((size_t)(T * D) * sizeof(real));
  for (int64_t b = 0; b < s->B; b++)
    for (int h = 0; h < s->Hq; h++) {
      int g = h / (s->Hq / s->Hkv);
      for (int64_t t = 0; t < T; t++) {
        memcpy(qr + t * D, a->q + ((b * T + t) * s->Hq + h) * D, D * sizeof(real));
        memcpy(kr + t * D, a->k + ((b * T + t) * s->Hkv + g) * D, D * sizeof(real));
        if (s->rope) reference_rope(s, t, qr + t * D), reference_rope(s, t, kr + t * D);
      }
      for (int64_t t = 0; t < T; t++) {
        double top = -INFINITY, sum = 0;
        for (int64_t u = 0; u < T; u++) {
          scores[t * T + u] = reference_score(s, qr + t * D, kr + u * D);
          if (s->alibi) scores[t * T + u] -= attention_alibi_slope(s->heads_total, s->head0 + h) * fabs((double)(t - u));
          if (reference_sees(s, t, u)) top = fmax(top, scores[t * T + u]);
        }
        for (int64_t u = 0; u < T; u++) {
          scores[t * T + u] = reference_sees(s, t, u) ? exp(scores[t * T + u] - top) : 0;
          sum += scores[t * T + u];
        }
        real *o = out + ((b * T + t) * s->Hq + h) * D;
        for (int e = 0; e < D; e++) {
          double acc = 0;
          for (int64_t u = 0; u < T; u++) acc += scores[t * T + u] / sum * a->v[((b * T + u) * s->Hkv + g) * D + e];
          o[e] = acc;
        }
        lse[(b * s->Hq + h) * T + t] = top + log(sum);
      }
    }
  free(scores), free(qr), free(kr);
}

static double attention_objective(void *ctx) {
  Attention *a = ctx;
  k_attention_forward(&a->s, a->q, a->k, a->v, a->out, a->lse);
  return dot(a->weights, a->out, a->s.B * a->s.T * a->s.Hq * a->s.D);
}

static void attention_backward(void *ctx) {
  Attention *a = ctx;
  k_attention_forward(&a->s, a->q, a->k, a->v, a->out, a->lse);
  k_attention_backward(&a->s, a->q, a->k, a->v, a->out, a->lse, a->weights, a->dq, a->dk, a->dv);
}

static const char *attention_name(const AttnShape *s) {
  static char name[160];
  snprintf(name, sizeof name, "B=%ld T=%ld Hq=%d Hkv=%d D=%d%s%s window=%ld softcap=%g scale=%g", (long)s->B,
           (long)s->T, s->Hq, s->Hkv, s->D, s->causal ? " causal" : "", s->rope ? " rope" : "", (long)s->window,
           s->softcap, s->scale);
  return name;
}

/* The options of Mistral and Gemma-2: a sliding window, capped scores, a scale of one's own. */
typedef struct {
  int64_t window;
  double softcap, scale;
  int alibi, head0, heads_total; /* ALiBi's slopes of heads head0.. of heads_total (a tensor-parallel rank's) */
} AttnOptions;

static const AttnOptions plain = {0, 0, 0, 0, 0, 0};

static void set_options(AttnShape *s, AttnOptions o) {
  s->window = o.window, s->softcap = o.softcap, s->scale = o.scale;
  s->alibi = o.alibi, s->head0 = o.head0, s->heads_total = o.heads_total;
}

static void check_attention_forward_with(int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope,
                                         AttnOptions o) {
  Attention a = attention_new(B, T, Hq, Hkv, D, causal, rope);
  set_options(&a.s, o);
  int64_t n = B * T * Hq * D;
  real *out = random_tensor(n), *lse = random_tensor(B * Hq * T);
  k_attention_forward(&a.s, a.q, a.k, a.v, a.out, a.lse);
  reference_attention(&a, out, lse);
  double eo = max_abs_diff(a.out, out, n), el = max_abs_diff(a.lse, lse, B * Hq * T);
  CHECK(eo < 1e-12 && el < 1e-12, "%s: out error %g, lse error %g", attention_name(&a.s), eo, el);
  free(out), free(lse);
  attention_free(&a);
}

static void check_attention_forward(int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope) {
  check_attention_forward_with(B, T, Hq, Hkv, D, causal, rope, plain);
}

static void test_attention_forward(void) {
  for (int causal = 0; causal < 2; causal++)
    for (int rope = 0; rope < 2; rope++) {
      check_attention_forward(2, 70, 4, 2, 16, causal, rope); /* several query and key tiles */
      check_attention_forward(1, 3, 2, 2, 64, causal, rope);  /* one partial tile */
    }
  check_attention_forward(2, 65, 3, 1, 5, 1, 0); /* odd head size, three query heads on one kv head */
  /* windows shorter than a tile, across tiles and of one key; capped scores; a scale of one's own */
  const AttnOptions options[] = {{5, 0, 0, 0, 0, 0},   {40, 0, 0, 0, 0, 0},  {1, 0, 0, 0, 0, 0},
                                 {0, 0.5, 0, 0, 0, 0}, {0, 0, 0.3, 0, 0, 0}, {37, 0.7, 0.2, 0, 0, 0},
                                 {0, 0, 0, 1, 0, 4},   {0, 0, 0, 1, 2, 6}}; /* ALiBi: all heads; a rank's 4 of 6 */
  for (size_t i = 0; i < sizeof options / sizeof *options; i++) {
    check_attention_forward_with(2, 150, 4, 2, 16, 1, 1, options[i]);
    if (options[i].window == 0) check_attention_forward_with(1, 70, 2, 1, 8, 0, 0, options[i]);
  }
}

static void check_attention_grads_with(int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope,
                                       AttnOptions o) {
  Attention a = attention_new(B, T, Hq, Hkv, D, causal, rope);
  set_options(&a.s, o);
  attention_backward(&a);
  int64_t nq = B * T * Hq * D, nkv = B * T * Hkv * D;
  real *dq = copy_tensor(a.dq, nq), *dk = copy_tensor(a.dk, nkv), *dv = copy_tensor(a.dv, nkv);
  double eq = grad_check(attention_objective, &a, a.q, dq, nq, GRAD_SAMPLES);
  double ek = grad_check(attention_objective, &a, a.k, dk, nkv, GRAD_SAMPLES);
  double ev = grad_check(attention_objective, &a, a.v, dv, nkv, GRAD_SAMPLES);
  CHECK(eq < GRAD_TOL && ek < GRAD_TOL && ev < GRAD_TOL, "%s: relative errors dq %g dk %g dv %g",
        attention_name(&a.s), eq, ek, ev);
  free(dq), free(dk), free(dv);
  attention_free(&a);
}

static void check_attention_grads(int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope) {
  check_attention_grads_with(B, T, Hq, Hkv, D, causal, rope, plain);
}

static void test_attention_grads(void) {
  for (int causal = 0; causal < 2; causal++)
    for (int rope = 0; rope < 2; rope++) {
      check_attention_grads(1, 5, 4, 2, 4, causal, rope);   /* every element */
      check_attention_grads(2, 70, 4, 2, 8, causal, rope);  /* several tiles, sampled */
    }
  check_attention_grads(1, 33, 2, 2, 6, 1, 1); /* one kv head per query head */
  check_attention_grads(1, 41, 3, 1, 5, 1, 0); /* odd head size and sequence length */
  check_attention_grads_with(1, 5, 4, 2, 4, 1, 1, (AttnOptions){2, 0.8, 0.4, 0, 0, 0});  /* every element */
  check_attention_grads_with(2, 150, 4, 2, 8, 1, 0, (AttnOptions){37, 0, 0, 0, 0, 0});   /* windows across tiles */
  check_attention_grads_with(1, 70, 2, 1, 8, 0, 1, (AttnOptions){0, 0.6, 0.5, 0, 0, 0}); /* not causal, capped */
  check_attention_grads_with(1, 70, 4, 2, 8, 1, 0, (AttnOptions){0, 0, 0, 1, 4, 8});     /* ALiBi, heads 4-7 of 8 */
  check_attention_grads_with(1, 40, 3, 3, 8, 0, 0, (AttnOptions){0, 0, 0, 1, 0, 3});     /* ALiBi, 3 heads, both ways */
}

/* BLOOM's slopes: 8 heads 2^-1 … 2^-8; 6 heads 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3. */
static void test_alibi_slopes(void) {
  double six[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  int ok = 1;
  for (int h = 0; h < 8; h++) ok &= attention_alibi_slope(8, h) == pow(2.0, -(h + 1));
  for (int h = 0; h < 6; h++) ok &= attention_alibi_slope(6, h) == six[h];
  CHECK(ok, "ALiBi slopes differ from BLOOM's");
}

static void test_attention_threads(void) {
  Attention a = attention_new(2, 150, 4, 2, 16, 1, 1);
  int64_t nq = 2 * 150 * 4 * 16, nkv = nq / 2;
  CHECK(same_bits_across_threads(attention_backward, &a, a.out, nq), "out differs across thread counts");
  CHECK(same_bits_across_threads(attention_backward, &a, a.lse, 2 * 4 * 150), "lse differs across thread counts");
  CHECK(same_bits_across_threads(attention_backward, &a, a.dq, nq), "dq differs across thread counts");
  CHECK(same_bits_across_threads(attention_backward, &a, a.dk, nkv), "dk differs across thread counts");
  CHECK(same_bits_across_threads(attention_backward, &a, a.dv, nkv), "dv differs across thread counts");
  attention_free(&a);
}

/* ---- rotary positions -------------------------------------------------------------------------- */

/* Frequency i as transformers' Llama-3 rule states it: by wavelength, kept above original/high, divided
 * by factor below original/low, in between smoothed with (original/wavelength − low)/(high − low). */
static double reference_frequency(const RopeShape *s, int i) {
  double f = 1 / pow(s->theta, 2.0 * i / s->rotary);
  if (s->scaling == ROPE_SCALING_LINEAR) return f / s->factor;
  if (s->scaling != ROPE_SCALING_LLAMA3) return f;
  double wavelength = 2 * M_PI / f, smooth = (s->original_positions / wavelength - s->low_freq_factor) /
                                              (s->high_freq_factor - s->low_freq_factor);
  if (wavelength > s->original_positions / s->low_freq_factor) return f / s->factor;
  if (wavelength < s->original_positions / s->high_freq_factor) return f;
  return (1 - smooth) * f / s->factor + smooth * f;
}

/* y = x with each head's pairs turned, written from the definition element by element. */
static void reference_rotary(const RopeShape *s, const real *x, real *y) {
  int64_t width = (int64_t)s->heads * s->head_dim;
  memcpy(y, x, (size_t)(s->B * s->T * width) * sizeof(real));
  for (int64_t p = 0; p < s->B * s->T; p++)
    for (int h = 0; h < s->heads; h++)
      for (int i = 0; i < s->rotary / 2; i++) {
        int64_t base = p * width + (int64_t)h * s->head_dim;
        int64_t a = base + (s->interleaved ? 2 * i : i), b = base + (s->interleaved ? 2 * i + 1 : i + s->rotary / 2);
        double angle = (double)(p % s->T) * reference_frequency(s, i) * (s->inverse ? -1 : 1);
        y[a] = x[a] * cos(angle) - x[b] * sin(angle);
        y[b] = x[b] * cos(angle) + x[a] * sin(angle);
      }
}

static void check_rope(RopeShape s) {
  int64_t n = s.B * s.T * s.heads * s.head_dim;
  real *x = random_tensor(n), *y = random_tensor(n), *want = random_tensor(n), *back = random_tensor(n);
  k_rope(&s, x, y);
  reference_rotary(&s, x, want);
  s.inverse = 1;
  k_rope(&s, y, back);
  double ey = max_abs_diff(y, want, n), eb = max_abs_diff(back, x, n);
  CHECK(ey < 1e-12 && eb < 1e-12, "rope rotary %d of %d, interleaved %d, scaling %d: error %g, turned back %g",
        s.rotary, s.head_dim, s.interleaved, (int)s.scaling, ey, eb);
  free(x), free(y), free(want), free(back);
}

/* Whole and partial heads, both pairings, every scaling (Llama 3's three bands reached with a short
 * original length), and turning back restores x. */
static void test_rope(void) {
  RopeShape s = {.B = 2, .T = 40, .heads = 3, .head_dim = 16, .rotary = 16, .theta = 10000, .factor = 1};
  check_rope(s);
  s.rotary = 6, s.interleaved = 1;
  check_rope(s);
  s.interleaved = 0, s.scaling = ROPE_SCALING_LINEAR, s.factor = 4;
  check_rope(s);
  s.rotary = 16, s.scaling = ROPE_SCALING_LLAMA3, s.factor = 8, s.low_freq_factor = 1, s.high_freq_factor = 4;
  s.original_positions = 64;
  check_rope(s);
  double freq[8];
  rope_frequencies(&s, freq);
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < 8; i++) {
    double plain = pow(s.theta, -2.0 * i / s.rotary);
    kept += freq[i] == plain, divided += fabs(freq[i] - plain / 8) < 1e-15 * plain;
    blended += freq[i] < plain && freq[i] > plain / 8;
  }
  CHECK(kept && divided && blended, "llama3 bands: %d kept, %d divided, %d blended", kept, divided, blended);
}

/* ---- embedding --------------------------------------------------------------------------------- */

typedef struct {
  int64_t N, C, row0, rows;
  int32_t *ids;
  real *table, *out, *weights, *dtable;
  const real *dtable0;
} Embedding;

static double embedding_objective(void *ctx) {
  Embedding *e = ctx;
  k_embedding_forward(e->N, e->C, e->ids, e->table, e->row0, e->rows, e->out);
  return dot(e->weights, e->out, e->N * e->C);
}

static void embedding_backward(void *ctx) {
  Embedding *e = ctx;
  memcpy(e->dtable, e->dtable0, (size_t)(e->rows * e->C) * sizeof(real));
  k_embedding_backward(e->N, e->C, e->ids, e->weights, e->row0, e->rows, e->dtable);
}

static void test_embedding(void) {
  /* The shard holds rows 3..7 of a vocabulary of 12; ids repeat and fall on both sides of it. */
  int32_t ids[] = {3, 0, 7, 5, 11, 3, 8, 2, 5, 5, 4, 3, 9};
  Embedding e = {13, 70, 3, 5, ids, 0, 0, 0, 0, 0};
  e.table = random_tensor(e.rows * e.C), e.out = random_tensor(e.N * e.C), e.weights = random_tensor(e.N * e.C);
  e.dtable = random_tensor(e.rows * e.C), e.dtable0 = random_tensor(e.rows * e.C);
  embedding_objective(&e);
  int wrong = 0;
  for (int64_t n = 0; n < e.N; n++)
    for (int64_t c = 0; c < e.C; c++) {
      int64_t row = ids[n] - e.row0;
      real want = row >= 0 && row < e.rows ? e.table[row * e.C + c] : 0;
      wrong += e.out[n * e.C + c] != want;
    }
  CHECK(wrong == 0, "forward: %d wrong elements", wrong);
  embedding_backward(&e);
  for (int64_t i = 0; i < e.rows * e.C; i++) e.dtable[i] -= e.dtable0[i];
  double err = grad_check(embedding_objective, &e, e.table, e.dtable, e.rows * e.C, 1000);
  CHECK(err < GRAD_TOL, "dtable relative error %g", err);
  CHECK(same_bits_across_threads(embedding_backward, &e, e.dtable, e.rows * e.C), "dtable differs across threads");
  free(e.table), free(e.out), free(e.weights), free(e.dtable), free((void *)e.dtable0);
}

/* ---- cross entropy ----------------------------------------------------------------------------- */

enum { XN = 6, XVOCAB = 11, XCOLS = 16, XIGNORE = 9 }; /* columns 11..15 are padding; target 9 is ignored */

typedef struct {
  real logits[XN * XCOLS], grad[XN * XCOLS];
  int32_t targets[XN];
  real scale;
} Xent;

/* The three steps and the backward pass over one shard of columns [col0, col0 + cols) of x->logits,
 * with the all-reduces between steps done by hand over `shards` equal shards. Returns the loss; the
 * gradient lands in x->grad. */
static double xent_sharded(Xent *x, int shards) {
  int64_t cols = XCOLS / shards;
  real part[4][XN * XCOLS], max[4][XN], sumexp[4][XN], target[4][XN], lse[XN];
  real all_max[XN], all_sumexp[XN], all_target[XN];
  for (int r = 0; r < shards; r++) {
    for (int64_t n = 0; n < XN; n++) memcpy(part[r] + n * cols, x->logits + n * XCOLS + r * cols, cols * sizeof(real));
    k_xent_max(XN, cols, part[r], r * cols, XVOCAB, max[r]);
  }
  for (int n = 0; n < XN; n++) {
    all_max[n] = -INFINITY;
    for (int r = 0; r < shards; r++) all_max[n] = fmax(all_max[n], max[r][n]);
  }
  for (int r = 0; r < shards; r++)
    k_xent_sums(XN, cols, part[r], r * cols, XVOCAB, x->targets, all_max, sumexp[r], target[r]);
  for (int n = 0; n < XN; n++) {
    all_sumexp[n] = all_target[n] = 0;
    for (int r = 0; r < shards; r++) all_sumexp[n] += sumexp[r][n], all_target[n] += target[r][n];
  }
  double loss = k_xent_loss(XN, x->targets, XIGNORE, all_max, all_sumexp, all_target, x->scale, lse);
  for (int r = 0; r < shards; r++) {
    k_xent_backward(XN, cols, part[r], r * cols, XVOCAB, x->targets, XIGNORE, lse, x->scale);
    for (int64_t n = 0; n < XN; n++) memcpy(x->grad + n * XCOLS + r * cols, part[r] + n * cols, cols * sizeof(real));
  }
  return loss;
}

static double xent_objective(void *ctx) { return xent_sharded(ctx, 1); }

static Xent xent_new(void) {
  Xent x = {{0}, {0}, {3, 10, XIGNORE, 0, 7, -1}, 1.0 / 4}; /* four rows count; row 2 is ignored, row 5 has none */
  for (int i = 0; i < XN * XCOLS; i++) /* padding columns hold large values, which must not count */
    x.logits[i] = i % XCOLS < XVOCAB ? 3 * rng_uniform() : 50 + i;
  return x;
}

static void test_xent(void) {
  Xent x = xent_new();
  double loss = xent_sharded(&x, 1), want = 0;
  for (int n = 0; n < XN; n++) {
    if (x.targets[n] < 0 || x.targets[n] == XIGNORE) continue;
    double sum = 0;
    for (int j = 0; j < XVOCAB; j++) sum += exp(x.logits[n * XCOLS + j]);
    want += log(sum) - x.logits[n * XCOLS + x.targets[n]];
  }
  want *= x.scale;
  CHECK(fabs(loss - want) < 1e-12, "loss %.15g, by hand %.15g", loss, want);

  real grad[XN * XCOLS];
  memcpy(grad, x.grad, sizeof grad);
  int nonzero = 0;
  for (int n = 0; n < XN; n++)
    for (int j = 0; j < XCOLS; j++)
      nonzero += (j >= XVOCAB || x.targets[n] < 0 || x.targets[n] == XIGNORE) && grad[n * XCOLS + j] != 0;
  CHECK(nonzero == 0, "%d gradients of padding, ignored rows or rows without a target are not zero", nonzero);
  double err = grad_check(xent_objective, &x, x.logits, grad, XN * XCOLS, 1000);
  CHECK(err < GRAD_TOL, "dlogits relative error %g", err);

  /* Two and four column shards (the last one all padding) give the single-shard loss and gradient. */
  for (int shards = 2; shards <= 4; shards *= 2) {
    double sharded = xent_sharded(&x, shards);
    CHECK(fabs(sharded - loss) < 1e-13, "%d shards: loss %.17g, one shard %.17g", shards, sharded, loss);
    double gerr = max_abs_diff(x.grad, grad, XN * XCOLS);
    CHECK(gerr < 1e-15, "%d shards: gradient differs by %g", shards, gerr);
  }
  real max[XN];
  k_xent_max(XN, 4, x.logits, 12, XVOCAB, max);
  CHECK(isinf(max[0]) && max[0] < 0, "a shard of padding only should have max -inf, got %g", max[0]);
}

static void xent_run(void *ctx) { xent_sharded(ctx, 1); }

static void test_xent_threads(void) {
  Xent x = xent_new();
  CHECK(same_bits_across_threads(xent_run, &x, x.grad, XN * XCOLS), "dlogits differ across thread counts");
}

/* The forward that also takes the gradient, over unsplit logits: the steps' max, target and lse, their
 * loss, and their gradient (to rounding: e/Σe rather than exp(z − lse)); the same bits at any thread count. */
static double xent_fused(Xent *x) {
  real max[XN], sumexp[XN], target[XN], lse[XN];
  memcpy(x->grad, x->logits, sizeof x->grad);
  return k_xent_forward_grad(XN, XCOLS, x->grad, XVOCAB, x->targets, XIGNORE, x->scale, max, sumexp, target, lse);
}

static void xent_fused_run(void *ctx) { xent_fused(ctx); }

static void test_xent_forward_grad(void) {
  Xent steps = xent_new(), fused = steps;
  double loss = xent_sharded(&steps, 1), fused_loss = xent_fused(&fused);
  CHECK(fused_loss == loss, "loss %.17g, by the steps %.17g", fused_loss, loss);
  double gerr = max_abs_diff(fused.grad, steps.grad, XN * XCOLS);
  CHECK(gerr < 1e-15, "gradient differs from the steps' by %g", gerr);
  int nonzero = 0;
  for (int n = 0; n < XN; n++)
    for (int j = 0; j < XCOLS; j++)
      nonzero += (j >= XVOCAB || fused.targets[n] < 0 || fused.targets[n] == XIGNORE) && fused.grad[n * XCOLS + j] != 0;
  CHECK(nonzero == 0, "%d gradients of padding, ignored rows or rows without a target are not zero", nonzero);
  CHECK(same_bits_across_threads(xent_fused_run, &fused, fused.grad, XN * XCOLS), "dlogits differ across thread counts");
}

/* ---- the float exp ----------------------------------------------------------------------------- */

/* The float kernels' exp against the C library's in double: within 1.5 ulp of the float nearest e^x on
 * [-86, 88.7] (a wrong coefficient or reduction costs many), 0 below e^-86, inf above e^88.72, NaN kept. */
static void test_expf(void) {
  double worst = 0, at = 0;
  for (int i = 0; i <= 2000000; i++) {
    float x = -86.0f + (float)(174.7 * i / 2000000);
    double e = exp((double)x);
    float nearest = (float)e, ulp = nextafterf(nearest, INFINITY) - nearest;
    double err = fabs(cpu_expf(x) - e) / ulp;
    if (err > worst) worst = err, at = x;
  }
  CHECK(worst <= 1.5, "cpu_expf is %.3f ulp off at %g", worst, at);
  CHECK(cpu_expf(-87) == 0 && cpu_expf(-INFINITY) == 0, "tiny results should flush to 0");
  CHECK(isinf(cpu_expf(89)) && isinf(cpu_expf(INFINITY)), "large arguments should give inf");
  CHECK(isnan(cpu_expf(NAN)), "NaN should stay NaN");
  CHECK(cpu_expf(0) == 1, "e^0 = %g", cpu_expf(0));
}

/* Top-k: largest first, a tie to the lower index (torch.topk on the CPU: [1, 3, 3, 0] -> 3 at 1, 3
 * at 2); its backward puts the values' gradient back where they came from. */
static void test_topk(void) {
  const real x[8] = {1, 3, 3, 0, -2, 5, -2, 4};
  real values[4], dx[8];
  int32_t indices[4];
  k_topk(2, 4, 2, x, values, indices);
  CHECK(indices[0] == 1 && indices[1] == 2 && values[0] == 3 && values[1] == 3, "row 0: %d %d",
        indices[0], indices[1]);
  CHECK(indices[2] == 1 && indices[3] == 3 && values[2] == 5 && values[3] == 4, "row 1: %d %d",
        indices[2], indices[3]);
  const real dvalues[4] = {10, 20, 30, 40};
  k_topk_backward(2, 4, 2, indices, dvalues, dx);
  const real want[8] = {0, 10, 20, 0, 0, 30, 0, 40};
  CHECK(memcmp(dx, want, sizeof dx) == 0, "dx: %g %g %g %g", dx[0], dx[1], dx[2], dx[3]);
}

/* Routing 3 tokens, 2 experts each, over 4 experts (expert 3 gets none): rows grouped by expert,
 * then by token; dispatch and combine move rows there and back; one GEMM per expert, the empty one
 * skipped. */
static void test_moe_routing(void) {
  const int32_t indices[6] = {2, 0, 0, 1, 2, 1};
  int32_t slots[6], counts[4];
  k_moe_route(3, 2, 4, 0, indices, NULL, slots, counts);
  const int32_t want_slots[6] = {4, 0, 1, 2, 5, 3}, want_counts[4] = {2, 2, 2, 0};
  CHECK(memcmp(slots, want_slots, sizeof slots) == 0 &&
            memcmp(counts, want_counts, sizeof counts) == 0,
        "slots %d %d %d %d %d %d", slots[0], slots[1], slots[2], slots[3], slots[4], slots[5]);
  const real x[6] = {1, 2, 3, 4, 5, 6}, weights[6] = {0.5, 0.25, 1, 2, -1, 3};
  real rows[12], out[6], w[4 * 2 * 2], expert_rows[12];
  k_moe_dispatch(3, 2, 2, x, slots, rows);
  CHECK(rows[0] == 1 && rows[2] == 3 && rows[8] == 1 && rows[10] == 5, "rows %g %g %g %g", rows[0],
        rows[2], rows[8], rows[10]);
  for (int i = 0; i < 16; i++) w[i] = i / 4 + 1; /* expert e's matrix is (e + 1) everywhere */
  k_grouped_gemm(GEMM_N, 4, counts, 6, 2, 2, rows, w, expert_rows);
  k_moe_combine(3, 2, 2, expert_rows, slots, weights, out);
  /* token 0: 0.5·3·(1+2) + 0.25·1·(1+2); token 2: -1·3·(5+6) + 3·2·(5+6) */
  CHECK(fabs(out[0] - 5.25) < 1e-12 && fabs(out[4] - 33) < 1e-12, "out %g %g", out[0], out[4]);
}

/* Four tokens of top-2 over 3 experts, 4 of their 8 rows to expert 0, at most 2 an expert: by
 * priority expert 0 keeps tokens 1 and 2 (token 0's 0.5 the smallest; 0.75 thrice: the earlier
 * kept), by position tokens 0 and 1; the rows dropped are -1, the kept ones packed from row 0, and
 * dispatch and the combine's backward leave the rows past them zero. */
static void test_moe_capacity(void) {
  const int32_t indices[8] = {0, 1, 2, 0, 0, 1, 0, 2};
  const real priority[8] = {0.5, 0.5, 0.25, 0.75, 0.75, 0.25, 0.75, 0.25};
  int32_t slots[8], counts[3];
  k_moe_route(4, 2, 3, 2, indices, priority, slots, counts);
  /* expert 0: tokens 1 and 2 (0.75, before token 3's 0.75); expert 1: tokens 0, 2; expert 2:
   * tokens 1, 3 */
  const int32_t by_priority[8] = {-1, 2, 4, 0, 1, 3, -1, 5}, kept[3] = {2, 2, 2};
  CHECK(memcmp(slots, by_priority, sizeof slots) == 0 && memcmp(counts, kept, sizeof kept) == 0,
        "priority: %d %d %d %d %d %d %d %d", slots[0], slots[1], slots[2], slots[3], slots[4],
        slots[5], slots[6], slots[7]);
  k_moe_route(4, 2, 3, 2, indices, NULL, slots, counts);
  const int32_t by_position[8] = {0, 2, 4, 1, -1, 3, -1, 5};
  CHECK(memcmp(slots, by_position, sizeof slots) == 0 && memcmp(counts, kept, sizeof kept) == 0,
        "position: %d %d %d %d %d %d %d %d", slots[0], slots[1], slots[2], slots[3], slots[4],
        slots[5], slots[6], slots[7]);
  real x[4], rows[8], out[4], drows[8], dweights[8];
  for (int i = 0; i < 4; i++) x[i] = i + 1;
  for (int i = 0; i < 8; i++) rows[i] = drows[i] = NAN;
  k_moe_dispatch(4, 2, 1, x, slots, rows);
  CHECK(rows[0] == 1 && rows[1] == 2 && rows[5] == 4 && rows[6] == 0 && rows[7] == 0,
        "rows %g %g %g %g %g", rows[0], rows[1], rows[5], rows[6], rows[7]);
  k_moe_combine(4, 2, 1, rows, slots, priority, out);
  CHECK(out[2] == 0.25 * 3 && out[3] == 0.25 * 4, "out %g %g", out[2], out[3]);
  const real dout[4] = {1, 1, 1, 1};
  k_moe_combine_backward(4, 2, 1, rows, slots, priority, dout, drows, dweights);
  CHECK(dweights[6] == 0 && dweights[7] == 4 && drows[6] == 0 && drows[7] == 0,
        "dweights %g %g drows %g %g", dweights[6], dweights[7], drows[6], drows[7]);
}

int main(void) {
  rng_state = 20240520;
  RUN(test_peak_leaves_no_threads);
  RUN(test_gemm_transposes);
  RUN(test_gemm_empty);
  RUN(test_gemm_rate);
  RUN(test_sum_rows);
  RUN(test_layernorm);
  RUN(test_rmsnorm);
  RUN(test_attention_forward);
  RUN(test_attention_grads);
  RUN(test_attention_threads);
  RUN(test_alibi_slopes);
  RUN(test_rope);
  RUN(test_embedding);
  RUN(test_xent);
  RUN(test_xent_threads);
  RUN(test_xent_forward_grad);
  RUN(test_expf);
  RUN(test_topk);
  RUN(test_moe_routing);
  RUN(test_moe_capacity);
  TEST_EXIT();
}
