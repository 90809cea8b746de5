/* constants.c: the model's constants moved to the backend's memory once, when a rank starts. */
#include "constants.h"

#include <stdio.h>
#include <stdlib.h>

#include "device.h"
#include "kernels.h"

/* The values rounded to act_t on the device: through `real` where act_t is a separate type (bf16). */
static act_t *upload(const ConstantSpec *c) {
  real *host = malloc((size_t)(c->count ? c->count : 1) * sizeof *host);
  if (!host) {
    fprintf(stderr, "plait: out of memory reading constant %s\n", c->name);
    exit(1);
  }
  for (int64_t i = 0; i < c->count; i++) host[i] = (real)c->values[i];
  act_t *values = device_alloc((size_t)c->count * sizeof(act_t), "the model's constants");
#if ACT_SEPARATE
  real *staged = device_alloc((size_t)c->count * sizeof(real), "the model's constants");
  device_upload(staged, host, (size_t)c->count * sizeof(real));
  k_to_act(c->count, staged, values);
  device_free(staged);
#else
  device_upload(values, host, (size_t)c->count * sizeof(real));
#endif
  free(host);
  return values;
}

act_t **constants_upload(const Program *p) {
  if (p->nconstants == 0) return NULL;
  act_t **buffers = calloc((size_t)p->nconstants, sizeof *buffers);
  for (int i = 0; i < p->nconstants; i++) buffers[i] = upload(&p->constants[i]);
  return buffers;
}

void constants_free(const Program *p, act_t **constants) {
  if (!constants) return;
  for (int i = 0; i < p->nconstants; i++) device_free(constants[i]);
  free(constants);
}
