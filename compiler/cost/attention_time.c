/* attention_time.c: which attention kernel a GPU program runs at a call and how long it takes,
 * from the kernel's rates measured by head size (docs/cost-model.md). */
#include "cost/attention_time.h"

/* runtime/cuda/attention_path.c's cudnn_refusal: cuDNN's graph takes bf16, heads of a multiple
 * of 8 up to 256 elements, and neither capped scores nor ALiBi. */
static int cudnn_takes(const Machine *m, const AttnAttr *a, double softcap) {
  return m->bf16 && softcap == 0 && !a->alibi && a->head_dim % 8 == 0 && a->head_dim <= 256;
}

AttentionKernel attention_kernel_of(const Machine *m, const AttnAttr *a, double softcap) {
  return m->attention == ATTENTION_CUDNN && cudnn_takes(m, a, softcap) ? KERNEL_CUDNN
                                                                       : KERNEL_PLAIT;
}

double attention_scores(double seq, int causal, double window) {
  if (!causal) return seq * seq;
  if (window <= 0 || window >= seq) return seq * seq / 2;
  return seq * window - window * window / 2;
}

KernelTime attention_kernel_time(const Machine *m, AttentionKernel k, double heads, double head_dim,
                                 double scores, int backward) {
  const AttentionRates *r = k == KERNEL_CUDNN ? &m->cudnn_attention : &m->plait_attention;
  const double *rates = backward ? r->backward : r->forward;
  double flops = 4 * heads * scores * head_dim * (backward ? 2 : 1);
  double compute = flops / kernel_interpolate_log(r->head_dim, rates, r->count, head_dim);
  return (KernelTime){compute + m->launch_overhead, flops, 0,
                      compute > m->launch_overhead ? BOUND_COMPUTE : BOUND_LATENCY};
}
