/* test_optim.c: AdamW steps against values worked out by hand, decoupled decay, the gradient norm,
 * the clip coefficient and the learning-rate schedule. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "optim.h"

/* Tolerance of the build's `real`. */
static const double tol = sizeof(real) == 4 ? 2e-6 : 1e-12;

static int near(double got, double want, double scale) { return fabs(got - want) <= tol * scale; }

/* v made non-negative in place (Adam's second moment); returns v. */
static real *fabs_all(real *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) v[i] = fabs(v[i]);
  return v;
}

/* Two steps (the second with grad_scale 0.5) worked out by hand from the update rule; lr 0.01, decay on. */
static void test_adamw_two_steps(void) {
  AdamW opt = optim_adamw_default();
  real p[4] = {1.0, -2.0, 0.5, 0.0}, m[4] = {0}, v[4] = {0};
  real g1[4] = {0.1, -0.3, 2.0, 0.0}, g2[4] = {-0.2, 0.1, 1.0, 0.5};
  /* Step 1: m̂ = g, v̂ = g², so p -= 0.01·(g/(|g| + 1e-8) + 0.01·p). */
  const double p1[4] = {0.989900001, -1.98980000033333, 0.48995000005, 0};
  const double m1[4] = {0.01, -0.03, 0.2, 0}, v1[4] = {0.0005, 0.0045, 0.2, 0};
  /* Step 2 with g = 0.5·g2: m = 0.9·m + 0.1·g, v = 0.95·v + 0.05·g², corrections 1/0.19 and 1/0.0975. */
  const double p2[4] = {0.990327326736742, -1.98415041133272, 0.481501300198153, -0.00734959961250999};
  const double m2[4] = {-0.001, -0.022, 0.23, 0.025}, v2[4] = {0.000975, 0.0044, 0.2025, 0.003125};
  optim_adamw_step(&opt, 1, 0.01, 1, 1.0, 4, p, g1, m, v);
  for (int i = 0; i < 4; i++)
    CHECK(near(p[i], p1[i], 1) && near(m[i], m1[i], 1) && near(v[i], v1[i], 1), "step 1, element %d: p %.15g m %g v %g",
          i, (double)p[i], (double)m[i], (double)v[i]);
  optim_adamw_step(&opt, 2, 0.01, 1, 0.5, 4, p, g2, m, v);
  for (int i = 0; i < 4; i++)
    CHECK(near(p[i], p2[i], 1) && near(m[i], m2[i], 1) && near(v[i], v2[i], 1), "step 2, element %d: p %.15g m %g v %g",
          i, (double)p[i], (double)m[i], (double)v[i]);
  for (int i = 0; i < 4; i++)
    CHECK(g1[i] == 0 && g2[i] == 0, "the step clears its gradient: element %d holds %g and %g", i, (double)g1[i],
          (double)g2[i]);
}

/* With a zero gradient only the decay moves a parameter: p -= lr·wd·p when flagged, nothing otherwise. */
static void test_decay_flag(void) {
  AdamW opt = optim_adamw_default();
  real decayed[3] = {2, -4, 0}, kept[3] = {2, -4, 0}, m[3] = {0}, v[3] = {0};
  real zero[3] = {0};
  optim_adamw_step(&opt, 1, 0.1, 1, 1.0, 3, decayed, zero, m, v);
  optim_adamw_step(&opt, 1, 0.1, 0, 1.0, 3, kept, zero, m, v);
  CHECK(near(decayed[0], 1.998, 1) && near(decayed[1], -3.996, 1) && decayed[2] == 0, "decayed: %.15g %.15g",
        (double)decayed[0], (double)decayed[1]);
  CHECK(kept[0] == 2 && kept[1] == -4 && kept[2] == 0, "no decay moved the parameters: %g %g", (double)kept[0],
        (double)kept[1]);
  opt.weight_decay = 0.1;
  optim_adamw_step(&opt, 1, 0.1, 1, 1.0, 3, decayed, zero, m, v);
  CHECK(near(decayed[0], 1.998 * 0.99, 1), "weight decay 0.1: %.15g", (double)decayed[0]);
}

/* (i mod 5) - 2 squared sums to 10 per five: 100003 elements give 200005 exactly. */
static void test_norm_sq(void) {
  enum { N = 100003 };
  real *g = malloc(sizeof(real) * N);
  for (int i = 0; i < N; i++) g[i] = (real)(i % 5 - 2);
  CHECK(optim_norm_sq(N, g) == 200005, "Σg² = %.17g", optim_norm_sq(N, g));
  CHECK(optim_norm_sq(0, g) == 0, "empty buffer");
  /* Irregular values: the same bits on 1 and 2 threads. */
  for (int i = 0; i < N; i++) g[i] = (real)sin(i * 0.37) * (real)(1 + i % 13);
  omp_set_num_threads(1);
  double one = optim_norm_sq(N, g);
  omp_set_num_threads(2);
  double two = optim_norm_sq(N, g);
  CHECK(one == two, "1 thread %.17g, 2 threads %.17g", one, two);
  free(g);
}

/* The documented order, written out: blocks of 2^14 elements, each summed in 16 lanes (lane j takes
 * elements j, j + 16, ...) added in lane order then its tail, the block sums added in block order. */
static double norm_sq_reference(int64_t n, const real *g) {
  enum { BLOCK = 1 << 14, LANES = 16 };
  double total = 0;
  for (int64_t start = 0; start < n; start += BLOCK) {
    int64_t len = n - start < BLOCK ? n - start : BLOCK, whole = len / LANES * LANES;
    double lane[LANES] = {0}, sum = 0;
    for (int64_t i = 0; i < whole; i++) lane[i % LANES] += (double)g[start + i] * g[start + i];
    for (int j = 0; j < LANES; j++) sum += lane[j];
    for (int64_t i = whole; i < len; i++) sum += (double)g[start + i] * g[start + i];
    total += sum;
  }
  return total;
}

/* Whole blocks are read several at once and the rest one at a time: the bits are the order above's, for
 * sizes with whole groups of blocks, a group and a few blocks more, and a tail. */
static void test_norm_sq_blocks(void) {
  const int64_t sizes[] = {3 * 16384 + 7, 8 * 16384, 9 * 16384 + 100, 13 * 16384 + 1};
  real *g = malloc(sizeof(real) * (13 * 16384 + 1));
  for (int64_t i = 0; i < 13 * 16384 + 1; i++) g[i] = (real)sin((double)i * 0.113) * (real)(1 + i % 7);
  for (int k = 0; k < 4; k++) {
    double got = optim_norm_sq(sizes[k], g), want = norm_sq_reference(sizes[k], g);
    CHECK(got == want, "n %lld: %.17g, the block order gives %.17g", (long long)sizes[k], got, want);
  }
  free(g);
}

/* The list forms give each tensor exactly what the one-tensor calls give it, and the norm the
 * tensors' norms added in order. */
static void test_many(void) {
  enum { COUNT = 4, N = 40000 };
  const int64_t n[COUNT] = {16384 * 2 + 5, 0, 3, 7000};
  real *g = malloc(sizeof(real) * N), *state[2][4];
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < 4; k++) state[s][k] = malloc(sizeof(real) * N);
  for (int i = 0; i < N; i++) {
    g[i] = (real)sin(i * 0.29) * (real)(1 + i % 11);
    for (int s = 0; s < 2; s++)
      for (int k = 0; k < 4; k++) state[s][k][i] = (real)cos(i * 0.1 + k) * (k == 3 ? 1e-3 : 1);
  }
  const real *grads[COUNT];
  AdamwTensor many[COUNT];
  double want = 0;
  int64_t at = 0;
  AdamW opt = optim_adamw_default();
  for (int i = 0; i < COUNT; i++) {
    grads[i] = g + at, want += optim_norm_sq(n[i], g + at);
    real **a = state[0], **b = state[1];
    real *va = fabs_all(a[3] + at, n[i]), *vb = fabs_all(b[3] + at, n[i]);
    many[i] = (AdamwTensor){n[i], i % 2, a[0] + at, a[1] + at, a[2] + at, va, NULL};
    optim_adamw_step(&opt, 4, 1e-3, i % 2, 0.8, n[i], b[0] + at, b[1] + at, b[2] + at, vb);
    at += n[i];
  }
  double got = optim_norm_sq_many(COUNT, n, grads);
  CHECK(got == want, "the list's norm %.17g, the tensors' %.17g", got, want);
  optim_adamw_many(&opt, 4, 1e-3, 0.8, COUNT, many);
  for (int k = 0; k < 4; k++)
    CHECK(memcmp(state[0][k], state[1][k], sizeof(real) * N) == 0, "stream %d differs", k);
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < 4; k++) free(state[s][k]);
  free(g);
}

static void test_clip_coef(void) {
  CHECK(optim_clip_coef(0.5, 1.0) == 1, "below the limit: %g", optim_clip_coef(0.5, 1.0));
  CHECK(optim_clip_coef(0, 1.0) == 1, "zero gradient");
  CHECK(fabs(optim_clip_coef(2, 1.0) - 1 / 2.000001) < 1e-15, "norm 2: %.17g", optim_clip_coef(2, 1.0));
  CHECK(fabs(optim_clip_coef(1, 1.0) - 1 / 1.000001) < 1e-15, "norm 1: %.17g", optim_clip_coef(1, 1.0));
  CHECK(fabs(optim_clip_coef(10, 5.0) - 5 / 10.000001) < 1e-15, "max 5, norm 10: %.17g", optim_clip_coef(10, 5.0));
}

/* lr_max 6e-4, warm-up 100, total 1100, lr_min 6e-5. */
static void test_schedule(void) {
  LrSchedule s = optim_schedule(6e-4, 100, 1100);
  const struct {
    int64_t step;
    double lr;
  } points[] = {
      {0, 0},                      /* warm-up starts at 0 */
      {50, 3e-4},                  /* half way up */
      {99, 5.94e-4},               /* the last warm-up step */
      {100, 6e-4},                 /* warm-up ends at the peak */
      {350, 5.209188309203679e-4}, /* a quarter down: 6e-5 + 5.4e-4·(1 + cos(π/4))/2 */
      {600, 3.3e-4},               /* mid-cosine: half way between the peak and the floor */
      {1100, 6e-5},                /* the end: lr_min = 0.1·lr_max */
      {5000, 6e-5},                /* constant after */
  };
  CHECK(s.lr_min == 0.1 * 6e-4, "lr_min %g", s.lr_min);
  for (unsigned i = 0; i < sizeof points / sizeof *points; i++)
    CHECK(fabs(optim_lr(&s, points[i].step) - points[i].lr) < 1e-15, "step %lld: %.17g, expected %.17g",
          (long long)points[i].step, optim_lr(&s, points[i].step), points[i].lr);
  LrSchedule flat = optim_schedule(1e-3, 0, 10);
  CHECK(optim_lr(&flat, 0) == 1e-3, "no warm-up starts at the peak: %g", optim_lr(&flat, 0));
}

int main(void) {
  RUN(test_adamw_two_steps);
  RUN(test_decay_flag);
  RUN(test_norm_sq);
  RUN(test_norm_sq_blocks);
  RUN(test_many);
  RUN(test_clip_coef);
  RUN(test_schedule);
  TEST_EXIT();
}
