/* ckpt_check.c: reads every tensor of a checkpoint whole, so that each one's checksum is checked, and checks
 * that every value is finite; prints "step N, T tensors". Exits 1 naming the first thing wrong.
 * usage: ckpt_check FILE */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckpt/safetensors.h"

static int check_tensor(Ckpt *c, const CkptTensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  real *values = malloc((size_t)(n + 1) * sizeof *values);
  int status = ckpt_read(c, t->name, t->ndim, t->shape, values);
  for (int64_t i = 0; status == 0 && i < n; i++)
    if (!isfinite(values[i])) {
      snprintf(c->error, sizeof c->error, "%s: tensor '%s' holds %g at element %lld", c->path, t->name,
               (double)values[i], (long long)i);
      status = -1;
    }
  free(values);
  return status;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: ckpt_check FILE\n");
    return 2;
  }
  Ckpt c;
  int status = ckpt_open(&c, argv[1]);
  for (int i = 0; status == 0 && i < c.ntensors; i++) status = check_tensor(&c, &c.tensors[i]);
  if (status != 0) {
    fprintf(stderr, "ckpt_check: %s\n", c.error);
    return 1;
  }
  const char *step = ckpt_meta(&c, "step");
  printf("step %s, %d tensors\n", step ? step : "?", c.ntensors);
  ckpt_close(&c);
  return 0;
}
