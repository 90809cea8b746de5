/* test_attention_time.c: the attention kernel a GPU program runs at a call, by the runtime's rules
 * (cuDNN where the machine assumes it, bf16, heads of a multiple of 8 up to 256, no softcap, no ALiBi),
 * the scores it computes (all, causal, a window's band), and its time from the kernel's rates by head
 * size. */
#include <math.h>
#include <string.h>

#include "cost/kernel_time.h"
#include "check.h"

static Machine h200(void) {
  Machine m;
  Diag d;
  if (machine_load("h200", &m, &d)) printf("h200: %s\n", d.msg);
  return m;
}

static void test_kernel_by_the_runtimes_rules(void) {
  Machine m = h200();
  AttnAttr a = {.heads = 12, .kv_heads = 12, .head_dim = 64, .causal = 1, .per_layer = -1};
  CHECK(m.attention == ATTENTION_CUDNN && attention_kernel_of(&m, &a, 0) == KERNEL_CUDNN, "GPT-2's heads on cuDNN");
  CHECK(attention_kernel_of(&m, &a, 50) == KERNEL_PLAIT, "capped scores: plait's kernels");
  AttnAttr alibi = a, odd = a, wide = a, widest = a;
  alibi.alibi = 1, odd.head_dim = 60, wide.head_dim = 256, widest.head_dim = 264;
  CHECK(attention_kernel_of(&m, &alibi, 0) == KERNEL_PLAIT, "ALiBi: plait's kernels");
  CHECK(attention_kernel_of(&m, &odd, 0) == KERNEL_PLAIT, "heads of 60: plait's kernels");
  CHECK(attention_kernel_of(&m, &wide, 0) == KERNEL_CUDNN, "heads of 256: cuDNN");
  CHECK(attention_kernel_of(&m, &widest, 0) == KERNEL_PLAIT, "heads of 264: plait's kernels");
  Machine fp16 = m, without = m;
  fp16.bf16 = 0, without.attention = ATTENTION_PLAIT;
  CHECK(attention_kernel_of(&fp16, &a, 0) == KERNEL_PLAIT, "not bf16: plait's kernels");
  CHECK(attention_kernel_of(&without, &a, 0) == KERNEL_PLAIT, "no cuDNN: plait's kernels");
}

static void test_scores(void) {
  CHECK(attention_scores(1024, 0, 0) == 1024.0 * 1024, "not causal: every pair");
  CHECK(attention_scores(1024, 1, 0) == 1024.0 * 1024 / 2, "causal: half the square");
  CHECK(attention_scores(1024, 1, 4096) == 1024.0 * 1024 / 2, "a window past the sequence: half the square");
  CHECK(attention_scores(1024, 1, 256) == 1024.0 * 256 - 256.0 * 256 / 2, "a window of 256: the band");
}

/* GPT-2's layer on cuDNN at heads of 64: the forward's FLOPs over half the square at the measured rate;
 * heads of 96 between 64's and 128's rates, linear in log head size; past the sizes measured, the
 * nearest's. */
static void test_time_from_the_rates(void) {
  Machine m = h200();
  double heads = 64 * 12, scores = attention_scores(1024, 1, 0), flops = 4 * heads * scores * 64;
  KernelTime f = attention_kernel_time(&m, KERNEL_CUDNN, heads, 64, scores, 0);
  KernelTime b = attention_kernel_time(&m, KERNEL_CUDNN, heads, 64, scores, 1);
  CHECK(f.flops == flops && fabs(f.seconds - flops / m.cudnn_attention.forward[0] - m.launch_overhead) < 1e-12,
        "forward %g FLOP in %g s", f.flops, f.seconds);
  CHECK(b.flops == 2 * flops && fabs(b.seconds - 2 * flops / m.cudnn_attention.backward[0] - m.launch_overhead) < 1e-12,
        "backward %g FLOP in %g s", b.flops, b.seconds);
  const AttentionRates *p = &m.plait_attention;
  double mid = p->forward[0] + (p->forward[1] - p->forward[0]) * log(96.0 / 64) / log(2);
  KernelTime at96 = attention_kernel_time(&m, KERNEL_PLAIT, heads, 96, scores, 0);
  CHECK(fabs(at96.flops / (at96.seconds - m.launch_overhead) / mid - 1) < 1e-9, "heads of 96: %g FLOP/s, expected %g",
        at96.flops / (at96.seconds - m.launch_overhead), mid);
  KernelTime at256 = attention_kernel_time(&m, KERNEL_PLAIT, heads, 256, scores, 1);
  CHECK(fabs(at256.flops / (at256.seconds - m.launch_overhead) / p->backward[1] - 1) < 1e-9, "heads of 256: 128's rate");
}

int main(void) {
  RUN(test_kernel_by_the_runtimes_rules);
  RUN(test_scores);
  RUN(test_time_from_the_rates);
  TEST_EXIT();
}
