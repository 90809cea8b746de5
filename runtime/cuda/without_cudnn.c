/* without_cudnn.c: attention for a CUDA build made where cuDNN's headers are missing (the Makefile takes
 * this file instead of attention_path.c and the cuDNN files): plait's kernels run every shape, and
 * --attention cudnn is refused with the way to get cuDNN's. */
#include "gpu.h"

#include <stdio.h>

int k_attention_available(AttentionChoice choice, char *why, size_t size) {
  if (choice != ATTENTION_CUDNN) return 0;
  snprintf(why, size, "this program was built without cuDNN's headers (cudnn_graph.h); install cuDNN's development "
           "files and rebuild, or run --attention auto");
  return 1;
}

void k_attention_choose(AttentionChoice choice, int report) { (void)choice, (void)report; }

const char *k_attention_path(const AttnShape *s) {
  (void)s;
  return "plait";
}

void gpu_attention_free(GpuContext *c) { (void)c; }

void k_attention_forward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, act_t *out, real *lse) {
  plait_attention_forward(s, q, k, v, out, lse);
}

void k_attention_backward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, const act_t *out,
                          const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv) {
  plait_attention_backward(s, q, k, v, out, lse, dout, dq, dk, dv);
}
