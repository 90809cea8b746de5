/* constants.c: the model's constants moved to the backend's memory once, when a rank starts: from
 * model.c, or, past CONSTANT_INLINE_ELEMS values, from constants.bin beside the program. */
#include "constants.h"

#include <stdio.h>
#include <stdlib.h>

#include "constants_file.h"
#include "device.h"
#include "kernels.h"
#include "message.h"

/* The values rounded to act_t on the device: through `real` where act_t is a separate type (bf16). */
static act_t *upload(const ConstantSpec *c, const double *given) {
  real *host = malloc((size_t)(c->count ? c->count : 1) * sizeof *host);
  if (!host) {
    fprintf(stderr, "plait: out of memory reading constant %s\n", c->name);
    exit(1);
  }
  for (int64_t i = 0; i < c->count; i++) host[i] = (real)given[i];
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

static int in_file(const Program *p) {
  for (int i = 0; i < p->nconstants; i++)
    if (!p->constants[i].values) return 1;
  return 0;
}

int constants_check(const Program *p, char *why, size_t len) {
  if (!in_file(p)) return 0;
  ConstantsFile cf;
  if (constants_file_open(&cf, why, len)) return -1;
  for (int i = 0; i < p->nconstants; i++) {
    const ConstantSpec *c = &p->constants[i];
    if (c->values) continue;
    double *values = constants_file_next(&cf, c->name, c->count, why, len);
    if (!values) return constants_file_close(&cf, 0, why, len), -1;
    free(values);
  }
  return constants_file_close(&cf, 1, why, len);
}

/* One line and the end of the process, for a file that changed since constants_check. */
static void refused(const char *why) {
  fprintf(stderr, "plait: %s\n", why);
  exit(1);
}

act_t **constants_upload(const Program *p) {
  if (p->nconstants <= 0) return NULL;
  char why[MESSAGE_TEXT];
  ConstantsFile cf = {0};
  if (in_file(p) && constants_file_open(&cf, why, sizeof why)) refused(why);
  act_t **buffers = calloc((size_t)p->nconstants, sizeof *buffers);
  for (int i = 0; i < p->nconstants; i++) {
    const ConstantSpec *c = &p->constants[i];
    double *read = c->values ? NULL : constants_file_next(&cf, c->name, c->count, why, sizeof why);
    if (!c->values && !read) refused(why);
    buffers[i] = upload(c, c->values ? c->values : read);
    free(read);
  }
  if (cf.file) constants_file_close(&cf, 0, why, sizeof why);
  return buffers;
}

void constants_free(const Program *p, act_t **constants) {
  if (!constants) return;
  for (int i = 0; i < p->nconstants; i++) device_free(constants[i]);
  free(constants);
}
