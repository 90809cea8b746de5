/* ckpt_diff.c: compares the weights of two checkpoints (Adam state aside) as ‖a − b‖ / ‖b‖ over all of
 * them, and names the tensor whose own ‖a − b‖ / ‖b‖ is largest; exits 1 when the first is above LIMIT.
 * Why norms and not the largest element: a parameter whose gradient is zero by construction (the bias
 * of the keys: softmax ignores a constant added to every score) receives only rounding noise, which
 * Adam turns into full-size steps; such elements differ between any two summation orders.
 * usage: ckpt_diff A.safetensors B.safetensors LIMIT */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"

typedef struct {
  double diff, norm; /* Σ (a - b)², Σ b² */
} Sums;

static Sums compare(Ckpt *a, Ckpt *b, const CkptTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  real *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  if (ckpt_read(a, t->name, t->ndim, t->shape, x) || ckpt_read(b, t->name, t->ndim, t->shape, y)) {
    fprintf(stderr, "ckpt_diff: %s\n", a->error[0] ? a->error : b->error);
    exit(2);
  }
  Sums s = {0, 0};
  for (int64_t i = 0; i < n; i++) {
    double d = (double)x[i] - y[i];
    s.diff += d * d;
    s.norm += (double)y[i] * y[i];
  }
  free(x);
  free(y);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ckpt_diff A B LIMIT\n");
    return 2;
  }
  Ckpt a, b;
  if (ckpt_open(&a, argv[1]) || ckpt_open(&b, argv[2])) {
    fprintf(stderr, "ckpt_diff: %s\n", a.error[0] ? a.error : b.error);
    return 2;
  }
  Sums all = {0, 0};
  double worst = 0;
  const char *where = "";
  for (int i = 0; i < a.ntensors; i++) {
    if (strncmp(a.tensors[i].name, "adam.", 5) == 0) continue;
    Sums s = compare(&a, &b, &a.tensors[i]);
    all.diff += s.diff, all.norm += s.norm;
    double r = sqrt(s.diff / fmax(s.norm, 1e-300));
    if (r > worst || isnan(r)) worst = r, where = a.tensors[i].name;
  }
  double overall = sqrt(all.diff / fmax(all.norm, 1e-300));
  printf("‖a−b‖/‖b‖ %.3g over all weights (the most: %.3g, %s)\n", overall, worst, where);
  return overall <= atof(argv[3]) && !isnan(overall) ? 0 : 1;
}
