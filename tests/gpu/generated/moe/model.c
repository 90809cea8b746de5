/* model.c: moe (tests/cli/models/moe.lua) compiled by plait for tp 1 × pp 1 × dp 1, vpp 1, microbatch 4, global batch 16
 * (4 microbatches per pipeline), schedule 1f1b, recompute none, sequence parallel off, gradients reduced
 * during the backward. Generated: rebuild with plait build rather than editing. Sizes are one tensor-parallel
 * rank's. */
#include "device.h"
#include "fused.h"
#include "rt.h"
#include "profiled.h" /* under --profile, each runtime kernel's time, FLOPs and bytes */

/* Parameters at model scope (r->model_w[P_...]) and of each layer (r->layer_w[layer][L_...]). */
enum {
  P_WTE, P_LN_F_WEIGHT, P_LM_HEAD_WEIGHT
};
enum {
  L_ATTN_NORM_WEIGHT, L_ATTN_Q_WEIGHT, L_ATTN_K_WEIGHT, L_ATTN_V_WEIGHT,
  L_ATTN_PROJ_WEIGHT, L_MOE_NORM_WEIGHT, L_MOE_GATE_WEIGHT, L_MOE_EXPERTS_W1,
  L_MOE_EXPERTS_W3, L_MOE_EXPERTS_W2
};

/* The model's constants (r->constants[C_...]). */
enum {
  C_ONES_ONEXTOP2, C_ONES_TOP2XONE, C_ONES_ONEXEXPERTS, C_ONES_EXPERTSXONE
};

/* The model's dims, whole (a tensor split over TP ranks holds its dim / TP). */
enum {
  B = 4, T = 16, V = 256, C = 32, QDIM = 32, KVDIM = 32,
  HEADS = 2, EXPERTS = 4, TOP2 = 2, ONE = 1, ROUTED_TOP2 = 128, FFN = 24
};

/* Activations of one microbatch, in elements: what each stage keeps for its backward pass, and where
 * its output (the next stage's input) sits in that (64-bit: a large vocabulary's logits pass 2^31). */
#define EMBED_SAVED INT64_C(2048)
#define EMBED_OUTPUT INT64_C(0)
#define BLOCK_SAVED INT64_C(35936)
#define BLOCK_OUTPUT INT64_C(33888)
#define HEAD_SAVED INT64_C(18688)
#define IO_ELEMS INT64_C(2048) /* the activation passed between layers and chunks */

/* embed forward of one microbatch: 1 calls; saved: 2048 elements kept for backward; tmp: scratch. */
static void embed_forward(Run *r, const int32_t *tokens, act_t *saved, act_t *tmp) {
  (void)tmp;
  act_t *wte_rows = saved + 0; /* [b, seq, hidden] 4×16×32 */
  rt_embedding_forward(r, B*T, C, tokens, r->model_w[P_WTE], V, 0, wte_rows); /* tests/cli/models/moe.lua */
}

/* embed backward of one microbatch: 1 calls; saved: 2048 elements kept for backward; tmp: scratch. */
static void embed_backward(Run *r, const int32_t *tokens, act_t *saved, const act_t *dy, act_t *tmp) {
  (void)saved;
  (void)tmp;
  rt_embedding_backward(r, B*T, C, tokens, dy, V, 0, r->model_g[P_WTE]);
}

/* block forward of one microbatch: 47 calls; saved: 35936 elements kept for backward; tmp: scratch. */
static void block_forward(Run *r, int layer, const act_t *x, act_t *saved, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  act_t *attn_norm = saved + 0; /* [b, seq, hidden] 4×16×32 */
  real *attn_norm_rstd = (real *)(saved + 2048); /* [b, seq] 4×16 */
  act_t *attn_q = saved + 2176; /* [b, seq, qdim] 4×16×32 */
  act_t *attn_k = saved + 4224; /* [b, seq, kvdim] 4×16×32 */
  act_t *attn_v = saved + 6272; /* [b, seq, kvdim] 4×16×32 */
  act_t *attn = saved + 8320; /* [b, seq, qdim] 4×16×32 */
  real *attn_lse = (real *)(saved + 10368); /* [b, heads, seq] 4×2×16 */
  act_t *attn_proj = tmp + 0; /* [b, seq, hidden] 4×16×32 */
  act_t *attn_proj_sum_ew = saved + 10624; /* [b, seq, hidden] 4×16×32 */
  act_t *moe_norm = saved + 12672; /* [b, seq, hidden] 4×16×32 */
  real *moe_norm_rstd = (real *)(saved + 14720); /* [b, seq] 4×16 */
  act_t *moe_gate_matmul = tmp + 0; /* [b, seq, experts] 4×16×4 */
  act_t *moe_gate_values = tmp + 256; /* [b, seq, top2] 4×16×2 */
  int32_t *moe_gate_indices = (int32_t *)(saved + 14848); /* [b, seq, top2] 4×16×2 */
  act_t *moe_gate_split = tmp + 384; /* [b, seq, top2.0] 4×16×1 */
  act_t *moe_gate_split_2 = tmp + 448; /* [b, seq, top2.1] 4×16×1 */
  act_t *ones_matmul = tmp + 448; /* [b, seq, top2] 4×16×2 */
  act_t *t26 = saved + 15104; /* [b, seq, top2] 4×16×2 */
  act_t *t27 = tmp + 448; /* [b, seq, top2] 4×16×2 */
  act_t *ones_matmul_2 = saved + 15232; /* [b, seq, one] 4×16×1 */
  act_t *ones_ew = tmp + 448; /* [b, seq, one] 4×16×1 */
  act_t *t31 = tmp + 512; /* [b, seq, top2.0] 4×16×1 */
  act_t *ones_matmul_3 = tmp + 384; /* [b, seq, top2] 4×16×2 */
  act_t *t33 = saved + 15296; /* [b, seq, top2] 4×16×2 */
  act_t *t34 = saved + 15424; /* [b, seq, top2] 4×16×2 */
  int32_t *moe_gate_slots_route = (int32_t *)(saved + 15552); /* [b, seq, top2] 4×16×2 */
  int32_t *moe_gate_counts_route = (int32_t *)(saved + 15808); /* [experts] 4 */
  act_t *t37 = saved + 15824; /* [routed_top2, hidden] 128×32 */
  act_t *moe_experts_grouped_matmul = saved + 19920; /* [routed_top2, ffn] 128×24 */
  act_t *moe_experts_grouped_matmul_2 = saved + 22992; /* [routed_top2, ffn] 128×24 */
  act_t *moe_experts_swiglu = saved + 26064; /* [routed_top2, ffn] 128×24 */
  act_t *moe_experts = saved + 29136; /* [routed_top2, hidden] 128×32 */
  act_t *moe = tmp + 384; /* [b, seq, hidden] 4×16×32 */
  int32_t *moe_gate_slots = (int32_t *)(tmp + 2432); /* [b, seq, top2] 4×16×2 */
  int32_t *moe_gate_counts = (int32_t *)(tmp + 2688); /* [experts] 4 */
  act_t *moe_gate_split_3 = tmp + 2432; /* [b, seq, top2.0] 4×16×1 */
  act_t *moe_gate_split_4 = tmp + 2496; /* [b, seq, top2.1] 4×16×1 */
  act_t *ones_matmul_4 = tmp + 2704; /* [b, seq, experts] 4×16×4 */
  act_t *t53 = saved + 33232; /* [b, seq, experts] 4×16×4 */
  act_t *t54 = tmp + 2704; /* [b, seq, experts] 4×16×4 */
  act_t *ones_matmul_5 = saved + 33488; /* [b, seq, one] 4×16×1 */
  act_t *ones_ew_2 = tmp + 256; /* [b, seq, one] 4×16×1 */
  act_t *t58 = saved + 33552; /* [b, seq, top2.0] 4×16×1 */
  act_t *ones_matmul_6 = tmp + 2432; /* [b, seq, experts] 4×16×4 */
  act_t *t60 = saved + 33616; /* [b, seq, experts] 4×16×4 */
  act_t *moe_gate_fractions = saved + 33872; /* [experts] 4 */
  act_t *moe_gate = tmp + 0; /* [b, seq, experts] 4×16×4 */
  act_t *ones_matmul_7 = tmp + 256; /* [b, seq, one] 4×16×1 */
  act_t *t67 = tmp + 320; /* [b, seq, top2.0] 4×16×1 */
  act_t *ones = tmp + 0; /* [b, seq, one] 4×16×1 */
  act_t *t69 = tmp + 2432; /* [b, seq, hidden] 4×16×32 */
  act_t *attn_proj_sum = saved + 33888; /* [b, seq, hidden] 4×16×32 */
  act_t *attn_q_k_v = tmp + 0; /* [b, seq, qdim+kvdim+kvdim] 4×16×96 */
  k_rmsnorm_forward(B*T, C, x, w[L_ATTN_NORM_WEIGHT], 1e-05, attn_norm, attn_norm_rstd); /* tests/cli/models/moe.lua:19 */
  /* one GEMM over attn.q+k+v.weight: 3 weights side by side in memory */
  k_gemm(GEMM_N, GEMM_T, B*T, (QDIM+KVDIM+KVDIM), C, 1, attn_norm, w[L_ATTN_Q_WEIGHT], GEMM_OVERWRITE, attn_q_k_v); /* tests/cli/models/moe.lua:19 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 0, attn_q_k_v, attn_q); /* tests/cli/models/moe.lua:19 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 1, attn_q_k_v, attn_k); /* tests/cli/models/moe.lua:19 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 2, attn_q_k_v, attn_v); /* tests/cli/models/moe.lua:19 */
  {
    const AttnShape shape = {.B = B, .T = T, .Hq = 2, .Hkv = 2, .D = 16, .causal = 1,
                             .rope = 1, .rope_theta = 10000};
    k_attention_forward(&shape, attn_q, attn_k, attn_v, attn, attn_lse);
  } /* tests/cli/models/moe.lua:19 */
  k_gemm(GEMM_N, GEMM_T, B*T, C, QDIM, 1, attn, w[L_ATTN_PROJ_WEIGHT], GEMM_OVERWRITE, attn_proj); /* tests/cli/models/moe.lua:19 */
  ew_add(B*T*C, B*T*C, x, attn_proj, attn_proj_sum_ew); /* attn_proj_sum_ew = (x + attn_proj) (tests/cli/models/moe.lua:19) */
  k_rmsnorm_forward(B*T, C, attn_proj_sum_ew, w[L_MOE_NORM_WEIGHT], 1e-05, moe_norm, moe_norm_rstd); /* tests/cli/models/moe.lua:20 */
  k_gemm(GEMM_N, GEMM_T, B*T, EXPERTS, C, 1, moe_norm, w[L_MOE_GATE_WEIGHT], GEMM_OVERWRITE, moe_gate_matmul); /* tests/cli/models/moe.lua:20 */
  k_topk(B*T, EXPERTS, 2, moe_gate_matmul, moe_gate_values, moe_gate_indices); /* tests/cli/models/moe.lua:20 */
  k_split(B*T, 1, 2, (const int64_t[]){1, 1}, 0, moe_gate_values, moe_gate_split); /* tests/cli/models/moe.lua:20 */
  k_split(B*T, 1, 2, (const int64_t[]){1, 1}, 1, moe_gate_values, moe_gate_split_2); /* tests/cli/models/moe.lua:20 */
  k_gemm(GEMM_N, GEMM_N, B*T, TOP2, 1, 1, moe_gate_split, r->constants[C_ONES_ONEXTOP2], GEMM_OVERWRITE, ones_matmul); /* tests/cli/models/moe.lua:20 */
  ew_1(B*T*TOP2, B*T*TOP2, moe_gate_values, ones_matmul, t26); /* t26 = (moe_gate_values - ones_matmul) (tests/cli/models/moe.lua:20) */
  ew_2(B*T*TOP2, B*T*TOP2, t26, t27); /* t27 = exp(t26) (tests/cli/models/moe.lua:20) */
  k_gemm(GEMM_N, GEMM_N, B*T, ONE, TOP2, 1, t27, r->constants[C_ONES_TOP2XONE], GEMM_OVERWRITE, ones_matmul_2); /* tests/cli/models/moe.lua:20 */
  ew_3(B*T*ONE, B*T*ONE, ones_matmul_2, ones_ew); /* ones_ew = log(ones_matmul_2) (tests/cli/models/moe.lua:20) */
  ew_add(B*T*1, B*T*1, moe_gate_split, ones_ew, t31); /* t31 = (moe_gate_split + ones_ew) (tests/cli/models/moe.lua:20) */
  k_gemm(GEMM_N, GEMM_N, B*T, TOP2, 1, 1, t31, r->constants[C_ONES_ONEXTOP2], GEMM_OVERWRITE, ones_matmul_3); /* tests/cli/models/moe.lua:20 */
  ew_1(B*T*TOP2, B*T*TOP2, moe_gate_values, ones_matmul_3, t33); /* t33 = (moe_gate_values - ones_matmul_3) (tests/cli/models/moe.lua:20) */
  ew_2(B*T*TOP2, B*T*TOP2, t33, t34); /* t34 = exp(t33) (tests/cli/models/moe.lua:20) */
  k_moe_route(B*T, TOP2, EXPERTS, 40, moe_gate_indices, t34, moe_gate_slots_route, moe_gate_counts_route);
  rt_expert_dropped(r, B*T*TOP2, EXPERTS, moe_gate_counts_route); /* tests/cli/models/moe.lua:20 */
  k_moe_dispatch(B*T, TOP2, C, moe_norm, moe_gate_slots_route, t37); /* tests/cli/models/moe.lua:20 */
  k_grouped_gemm(GEMM_T, EXPERTS, moe_gate_counts_route, ROUTED_TOP2, FFN, C, t37, w[L_MOE_EXPERTS_W1], moe_experts_grouped_matmul); /* tests/cli/models/moe.lua:20 */
  k_grouped_gemm(GEMM_T, EXPERTS, moe_gate_counts_route, ROUTED_TOP2, FFN, C, t37, w[L_MOE_EXPERTS_W3], moe_experts_grouped_matmul_2); /* tests/cli/models/moe.lua:20 */
  ew_swiglu(ROUTED_TOP2*FFN, ROUTED_TOP2*FFN, moe_experts_grouped_matmul_2, moe_experts_grouped_matmul, moe_experts_swiglu); /* moe_experts_swiglu = (silu(moe_experts_grouped_matmul) * moe_experts_grouped_matmul_2) (tests/cli/models/moe.lua:20) */
  k_grouped_gemm(GEMM_T, EXPERTS, moe_gate_counts_route, ROUTED_TOP2, C, FFN, moe_experts_swiglu, w[L_MOE_EXPERTS_W2], moe_experts); /* tests/cli/models/moe.lua:20 */
  k_moe_combine(B*T, TOP2, C, moe_experts, moe_gate_slots_route, t34, moe); /* tests/cli/models/moe.lua:20 */
  k_moe_route(B*T, TOP2, EXPERTS, 0, moe_gate_indices, NULL, moe_gate_slots, moe_gate_counts); /* tests/cli/models/moe.lua:20 */
  k_split(B*T, 1, 2, (const int64_t[]){1, 1}, 0, moe_gate_values, moe_gate_split_3); /* tests/cli/models/moe.lua:20 */
  k_split(B*T, 1, 2, (const int64_t[]){1, 1}, 1, moe_gate_values, moe_gate_split_4); /* tests/cli/models/moe.lua:20 */
  k_gemm(GEMM_N, GEMM_N, B*T, EXPERTS, 1, 1, moe_gate_split_3, r->constants[C_ONES_ONEXEXPERTS], GEMM_OVERWRITE, ones_matmul_4); /* tests/cli/models/moe.lua:20 */
  ew_1(B*T*EXPERTS, B*T*EXPERTS, moe_gate_matmul, ones_matmul_4, t53); /* t53 = (moe_gate_matmul - ones_matmul_4) (tests/cli/models/moe.lua:20) */
  ew_2(B*T*EXPERTS, B*T*EXPERTS, t53, t54); /* t54 = exp(t53) (tests/cli/models/moe.lua:20) */
  k_gemm(GEMM_N, GEMM_N, B*T, ONE, EXPERTS, 1, t54, r->constants[C_ONES_EXPERTSXONE], GEMM_OVERWRITE, ones_matmul_5); /* tests/cli/models/moe.lua:20 */
  ew_3(B*T*ONE, B*T*ONE, ones_matmul_5, ones_ew_2); /* ones_ew_2 = log(ones_matmul_5) (tests/cli/models/moe.lua:20) */
  ew_add(B*T*1, B*T*1, moe_gate_split_3, ones_ew_2, t58); /* t58 = (moe_gate_split_3 + ones_ew_2) (tests/cli/models/moe.lua:20) */
  k_gemm(GEMM_N, GEMM_N, B*T, EXPERTS, 1, 1, t58, r->constants[C_ONES_ONEXEXPERTS], GEMM_OVERWRITE, ones_matmul_6); /* tests/cli/models/moe.lua:20 */
  ew_1(B*T*EXPERTS, B*T*EXPERTS, moe_gate_matmul, ones_matmul_6, t60); /* t60 = (moe_gate_matmul - ones_matmul_6) (tests/cli/models/moe.lua:20) */
  k_moe_fractions(EXPERTS, moe_gate_counts, moe_gate_fractions); /* tests/cli/models/moe.lua:20 */
  ew_5(B*T*EXPERTS, EXPERTS, moe_gate_fractions, EXPERTS, t60, moe_gate); /* moe_gate = (exp(t60) * moe_gate_fractions) (tests/cli/models/moe.lua:20) */
  k_gemm(GEMM_N, GEMM_N, B*T, ONE, EXPERTS, 1, moe_gate, r->constants[C_ONES_EXPERTSXONE], GEMM_OVERWRITE, ones_matmul_7); /* tests/cli/models/moe.lua:20 */
  ew_6(B*T*1, B*T*1, t58, t67); /* t67 = ((t58 * t58) * 0.001) (tests/cli/models/moe.lua:20) */
  ew_7(B*T*ONE, B*T*ONE, t67, ones_matmul_7, ones); /* ones = ((ones_matmul_7 * 0.04) + t67) (tests/cli/models/moe.lua:20) */
  rt_loss_term(r, B*T*C, moe, t69, B*T*ONE, ones); /* tests/cli/models/moe.lua:20 */
  ew_add(B*T*C, B*T*C, attn_proj_sum_ew, t69, attn_proj_sum); /* attn_proj_sum = (attn_proj_sum_ew + t69) (tests/cli/models/moe.lua:20) */
}

/* block backward of one microbatch: 50 calls; saved: 35936 elements kept for backward; tmp: scratch. */
static void block_backward(Run *r, int layer, const act_t *x, act_t *saved, const act_t *dy, act_t *dx, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  real *const *g = r->layer_g[layer];
  act_t *attn_norm = saved + 0; /* [b, seq, hidden] 4×16×32 */
  real *attn_norm_rstd = (real *)(saved + 2048); /* [b, seq] 4×16 */
  act_t *attn_q = saved + 2176; /* [b, seq, qdim] 4×16×32 */
  act_t *attn_k = saved + 4224; /* [b, seq, kvdim] 4×16×32 */
  act_t *attn_v = saved + 6272; /* [b, seq, kvdim] 4×16×32 */
  act_t *attn = saved + 8320; /* [b, seq, qdim] 4×16×32 */
  real *attn_lse = (real *)(saved + 10368); /* [b, heads, seq] 4×2×16 */
  act_t *attn_proj_sum_ew = saved + 10624; /* [b, seq, hidden] 4×16×32 */
  act_t *moe_norm = saved + 12672; /* [b, seq, hidden] 4×16×32 */
  real *moe_norm_rstd = (real *)(saved + 14720); /* [b, seq] 4×16 */
  int32_t *moe_gate_indices = (int32_t *)(saved + 14848); /* [b, seq, top2] 4×16×2 */
  act_t *t26 = saved + 15104; /* [b, seq, top2] 4×16×2 */
  act_t *ones_matmul_2 = saved + 15232; /* [b, seq, one] 4×16×1 */
  act_t *t33 = saved + 15296; /* [b, seq, top2] 4×16×2 */
  act_t *t34 = saved + 15424; /* [b, seq, top2] 4×16×2 */
  int32_t *moe_gate_slots_route = (int32_t *)(saved + 15552); /* [b, seq, top2] 4×16×2 */
  int32_t *moe_gate_counts_route = (int32_t *)(saved + 15808); /* [experts] 4 */
  act_t *t37 = saved + 15824; /* [routed_top2, hidden] 128×32 */
  act_t *moe_experts_grouped_matmul = saved + 19920; /* [routed_top2, ffn] 128×24 */
  act_t *moe_experts_grouped_matmul_2 = saved + 22992; /* [routed_top2, ffn] 128×24 */
  act_t *moe_experts_swiglu = saved + 26064; /* [routed_top2, ffn] 128×24 */
  act_t *moe_experts = saved + 29136; /* [routed_top2, hidden] 128×32 */
  act_t *t53 = saved + 33232; /* [b, seq, experts] 4×16×4 */
  act_t *ones_matmul_5 = saved + 33488; /* [b, seq, one] 4×16×1 */
  act_t *t58 = saved + 33552; /* [b, seq, top2.0] 4×16×1 */
  act_t *t60 = saved + 33616; /* [b, seq, experts] 4×16×4 */
  act_t *moe_gate_fractions = saved + 33872; /* [experts] 4 */
  act_t *d_ones_loss_term_bwd = tmp + 0; /* [b, seq, one] 4×16×1 */
  act_t *d_t67 = tmp + 64; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_t65 = tmp + 128; /* [b, seq, one] 4×16×1 */
  act_t *d_moe_gate_matmul = tmp + 192; /* [b, seq, experts] 4×16×4 */
  act_t *d_t60 = tmp + 448; /* [b, seq, experts] 4×16×4 */
  act_t *d_t58 = tmp + 0; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_t58_2 = tmp + 128; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_ones_reduce = tmp + 0; /* [b, seq, one] 4×16×1 */
  act_t *d_ones_ew = tmp + 64; /* [b, seq, one] 4×16×1 */
  act_t *d_t54 = tmp + 448; /* [b, seq, experts] 4×16×4 */
  act_t *d_t53 = tmp + 704; /* [b, seq, experts] 4×16×4 */
  act_t *d_moe_gate_matmul_2 = tmp + 0; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_moe_gate_ew = tmp + 64; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_moe_gate_values_concat = tmp + 704; /* [b, seq, top2] 4×16×2 */
  act_t *d_moe_experts_combine_bwd = tmp + 832; /* [routed_top2, hidden] 128×32 */
  act_t *d_t34 = tmp + 0; /* [b, seq, top2] 4×16×2 */
  act_t *d_moe_experts_swiglu = tmp + 4928; /* [routed_top2, ffn] 128×24 */
  act_t *d_moe_experts = tmp + 832; /* [routed_top2, ffn] 128×24 */
  act_t *d_t37 = tmp + 8000; /* [routed_top2, hidden] 128×32 */
  act_t *d_t42 = tmp + 832; /* [routed_top2, ffn] 128×24 */
  act_t *d_t37_2 = tmp + 3904; /* [routed_top2, hidden] 128×32 */
  act_t *d_t37_3 = tmp + 12096; /* [routed_top2, hidden] 128×32 */
  act_t *d_moe_norm_combine = tmp + 832; /* [b, seq, hidden] 4×16×32 */
  act_t *d_t33 = tmp + 2880; /* [b, seq, top2] 4×16×2 */
  act_t *d_t31 = tmp + 128; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_ones_reduce_2 = tmp + 2880; /* [b, seq, one] 4×16×1 */
  act_t *d_ones = tmp + 2944; /* [b, seq, one] 4×16×1 */
  act_t *d_t27 = tmp + 3008; /* [b, seq, top2] 4×16×2 */
  act_t *d_t26 = tmp + 2880; /* [b, seq, top2] 4×16×2 */
  act_t *d_moe_gate_matmul_3 = tmp + 3136; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_moe_gate_ew_2 = tmp + 2880; /* [b, seq, top2.0] 4×16×1 */
  act_t *d_moe_gate_values_concat_2 = tmp + 3136; /* [b, seq, top2] 4×16×2 */
  act_t *d_moe_gate_values = tmp + 2880; /* [b, seq, top2] 4×16×2 */
  act_t *d_moe_gate_topk_bwd = tmp + 3008; /* [b, seq, experts] 4×16×4 */
  act_t *d_moe_gate = tmp + 3264; /* [b, seq, experts] 4×16×4 */
  act_t *d_moe_norm_matmul = tmp + 3520; /* [b, seq, hidden] 4×16×32 */
  act_t *d_moe_norm = tmp + 5568; /* [b, seq, hidden] 4×16×32 */
  act_t *d_attn_proj_sum_norm_bwd = tmp + 0; /* [b, seq, hidden] 4×16×32 */
  act_t *d_attn_proj_sum = tmp + 2048; /* [b, seq, hidden] 4×16×32 */
  act_t *d_attn = tmp + 0; /* [b, seq, qdim] 4×16×32 */
  act_t *d_attn_q = tmp + 4096; /* [b, seq, qdim] 4×16×32 */
  act_t *d_attn_k = tmp + 6144; /* [b, seq, kvdim] 4×16×32 */
  act_t *d_attn_v = tmp + 8192; /* [b, seq, kvdim] 4×16×32 */
  act_t *d_attn_q_k_v = tmp + 10240; /* [b, seq, qdim+kvdim+kvdim] 4×16×96 */
  act_t *d_attn_norm = tmp + 0; /* [b, seq, hidden] 4×16×32 */
  act_t *d_x = tmp + 4096; /* [b, seq, hidden] 4×16×32 */
  rt_loss_term_backward(r, B*T*ONE, d_ones_loss_term_bwd);
  k_sum_rows_act(1, B*T*1, d_ones_loss_term_bwd, d_t67);
  ew_8(B*T*ONE, B*T*ONE, d_ones_loss_term_bwd, d_t65); /* d_t65 = (d_ones_loss_term_bwd * 0.04) */
  k_gemm(GEMM_N, GEMM_T, B*T, EXPERTS, ONE, 1, d_t65, r->constants[C_ONES_EXPERTSXONE], GEMM_OVERWRITE, d_moe_gate_matmul);
  ew_9(B*T*EXPERTS, EXPERTS, t60, moe_gate_fractions, EXPERTS, d_moe_gate_matmul, d_t60); /* d_t60 = (-((d_moe_gate_matmul * moe_gate_fractions) * exp(t60))) */
  k_gemm(GEMM_N, GEMM_T, B*T, 1, EXPERTS, 1, d_t60, r->constants[C_ONES_ONEXEXPERTS], GEMM_OVERWRITE, d_t58);
  ew_10(B*T*1, B*T*1, d_t58, t58, d_t67, d_t58_2); /* d_t58_2 = ((((d_t67 * 0.001) * t58) + ((d_t67 * 0.001) * t58)) + d_t58) */
  k_sum_rows_act(1, B*T*ONE, d_t58_2, d_ones_reduce);
  ew_11(B*T*ONE, B*T*ONE, ones_matmul_5, d_ones_reduce, d_ones_ew); /* d_ones_ew = (d_ones_reduce / ones_matmul_5) */
  k_gemm(GEMM_N, GEMM_T, B*T, EXPERTS, ONE, 1, d_ones_ew, r->constants[C_ONES_EXPERTSXONE], GEMM_OVERWRITE, d_t54);
  ew_12(B*T*EXPERTS, B*T*EXPERTS, t53, d_t54, d_t53); /* d_t53 = (-(d_t54 * exp(t53))) */
  k_gemm(GEMM_N, GEMM_T, B*T, 1, EXPERTS, 1, d_t53, r->constants[C_ONES_ONEXEXPERTS], GEMM_OVERWRITE, d_moe_gate_matmul_2);
  ew_add(B*T*1, B*T*1, d_t58_2, d_moe_gate_matmul_2, d_moe_gate_ew); /* d_moe_gate_ew = (d_t58_2 + d_moe_gate_matmul_2) */
  k_concat(B*T, 1, 2, (const int64_t[]){1, 1}, (const act_t *[]){d_moe_gate_ew, NULL}, d_moe_gate_values_concat);
  k_moe_combine_backward(B*T, TOP2, C, moe_experts, moe_gate_slots_route, t34, dy, d_moe_experts_combine_bwd, d_t34);
  k_grouped_gemm(GEMM_N, EXPERTS, moe_gate_counts_route, ROUTED_TOP2, FFN, C, d_moe_experts_combine_bwd, w[L_MOE_EXPERTS_W2], d_moe_experts_swiglu);
  k_grouped_gemm_grad(EXPERTS, moe_gate_counts_route, ROUTED_TOP2, C, FFN, d_moe_experts_combine_bwd, moe_experts_swiglu, g[L_MOE_EXPERTS_W2]);
  ew_swiglu_2(ROUTED_TOP2*FFN, ROUTED_TOP2*FFN, d_moe_experts_swiglu, moe_experts_grouped_matmul, d_moe_experts); /* d_moe_experts = (d_moe_experts_swiglu * silu(moe_experts_grouped_matmul)) */
  k_grouped_gemm(GEMM_N, EXPERTS, moe_gate_counts_route, ROUTED_TOP2, C, FFN, d_moe_experts, w[L_MOE_EXPERTS_W3], d_t37);
  k_grouped_gemm_grad(EXPERTS, moe_gate_counts_route, ROUTED_TOP2, FFN, C, d_moe_experts, t37, g[L_MOE_EXPERTS_W3]);
  ew_swiglu_gate_backward(ROUTED_TOP2*FFN, ROUTED_TOP2*FFN, moe_experts_grouped_matmul, moe_experts_grouped_matmul_2, d_moe_experts_swiglu, d_t42); /* d_t42 = ((d_moe_experts_swiglu * moe_experts_grouped_matmul_2) * (sigmoid(moe_experts_grouped_matmul) * (1 + (moe_experts_grouped_matmul * (1 - sigmoid(moe_experts_grouped_matmul)))))) */
  k_grouped_gemm(GEMM_N, EXPERTS, moe_gate_counts_route, ROUTED_TOP2, C, FFN, d_t42, w[L_MOE_EXPERTS_W1], d_t37_2);
  k_grouped_gemm_grad(EXPERTS, moe_gate_counts_route, ROUTED_TOP2, FFN, C, d_t42, t37, g[L_MOE_EXPERTS_W1]);
  ew_add(ROUTED_TOP2*C, ROUTED_TOP2*C, d_t37, d_t37_2, d_t37_3); /* d_t37_3 = (d_t37 + d_t37_2) */
  k_moe_combine(B*T, TOP2, C, d_t37_3, moe_gate_slots_route, NULL, d_moe_norm_combine);
  ew_12(B*T*TOP2, B*T*TOP2, t33, d_t34, d_t33); /* d_t33 = (-(d_t34 * exp(t33))) */
  k_gemm(GEMM_N, GEMM_T, B*T, 1, TOP2, 1, d_t33, r->constants[C_ONES_ONEXTOP2], GEMM_OVERWRITE, d_t31);
  k_sum_rows_act(1, B*T*ONE, d_t31, d_ones_reduce_2);
  ew_11(B*T*ONE, B*T*ONE, ones_matmul_2, d_ones_reduce_2, d_ones); /* d_ones = (d_ones_reduce_2 / ones_matmul_2) */
  k_gemm(GEMM_N, GEMM_T, B*T, TOP2, ONE, 1, d_ones, r->constants[C_ONES_TOP2XONE], GEMM_OVERWRITE, d_t27);
  ew_12(B*T*TOP2, B*T*TOP2, t26, d_t27, d_t26); /* d_t26 = (-(d_t27 * exp(t26))) */
  k_gemm(GEMM_N, GEMM_T, B*T, 1, TOP2, 1, d_t26, r->constants[C_ONES_ONEXTOP2], GEMM_OVERWRITE, d_moe_gate_matmul_3);
  ew_add(B*T*1, B*T*1, d_t31, d_moe_gate_matmul_3, d_moe_gate_ew_2); /* d_moe_gate_ew_2 = (d_t31 + d_moe_gate_matmul_3) */
  k_concat(B*T, 1, 2, (const int64_t[]){1, 1}, (const act_t *[]){d_moe_gate_ew_2, NULL}, d_moe_gate_values_concat_2);
  ew_15(B*T*TOP2, B*T*TOP2, d_moe_gate_values_concat, d_moe_gate_values_concat_2, t33, d_t34, t26, d_t27, d_moe_gate_values); /* d_moe_gate_values = (((d_moe_gate_values_concat + (d_t34 * exp(t33))) + (d_t27 * exp(t26))) + d_moe_gate_values_concat_2) */
  k_topk_backward(B*T, EXPERTS, 2, moe_gate_indices, d_moe_gate_values, d_moe_gate_topk_bwd);
  ew_16(B*T*EXPERTS, EXPERTS, d_moe_gate_topk_bwd, t60, moe_gate_fractions, EXPERTS, d_moe_gate_matmul, t53, d_t54, d_moe_gate); /* d_moe_gate = ((((d_moe_gate_matmul * moe_gate_fractions) * exp(t60)) + (d_t54 * exp(t53))) + d_moe_gate_topk_bwd) */
  k_gemm(GEMM_N, GEMM_N, B*T, C, EXPERTS, 1, d_moe_gate, w[L_MOE_GATE_WEIGHT], GEMM_OVERWRITE, d_moe_norm_matmul);
  k_gemm_grad(GEMM_T, GEMM_N, EXPERTS, C, B*T, d_moe_gate, moe_norm, g[L_MOE_GATE_WEIGHT]);
  ew_add(B*T*C, B*T*C, d_moe_norm_combine, d_moe_norm_matmul, d_moe_norm); /* d_moe_norm = (d_moe_norm_combine + d_moe_norm_matmul) */
  k_rmsnorm_backward(B*T, C, attn_proj_sum_ew, w[L_MOE_NORM_WEIGHT], moe_norm_rstd, d_moe_norm, d_attn_proj_sum_norm_bwd, g[L_MOE_NORM_WEIGHT]);
  ew_add(B*T*C, B*T*C, dy, d_attn_proj_sum_norm_bwd, d_attn_proj_sum); /* d_attn_proj_sum = (dy + d_attn_proj_sum_norm_bwd) */
  k_gemm(GEMM_N, GEMM_N, B*T, QDIM, C, 1, d_attn_proj_sum, w[L_ATTN_PROJ_WEIGHT], GEMM_OVERWRITE, d_attn);
  k_gemm_grad(GEMM_T, GEMM_N, C, QDIM, B*T, d_attn_proj_sum, attn, g[L_ATTN_PROJ_WEIGHT]);
  {
    const AttnShape shape = {.B = B, .T = T, .Hq = 2, .Hkv = 2, .D = 16, .causal = 1,
                             .rope = 1, .rope_theta = 10000};
    k_attention_backward(&shape, attn_q, attn_k, attn_v, attn, attn_lse, d_attn, d_attn_q, d_attn_k, d_attn_v);
  }
  k_concat(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, (const act_t *[]){d_attn_q, d_attn_k, d_attn_v}, d_attn_q_k_v);
  /* the input's gradient through attn.q+k+v.weight in one GEMM (3 products summed) */
  k_gemm(GEMM_N, GEMM_N, B*T, C, (QDIM+KVDIM+KVDIM), 1, d_attn_q_k_v, w[L_ATTN_Q_WEIGHT], GEMM_OVERWRITE, d_attn_norm);
  /* dattn.q+k+v.weight: the gradients of 3 weights side by side, in one GEMM */
  k_gemm_grad(GEMM_T, GEMM_N, (QDIM+KVDIM+KVDIM), C, B*T, d_attn_q_k_v, attn_norm, g[L_ATTN_Q_WEIGHT]);
  k_rmsnorm_backward(B*T, C, x, w[L_ATTN_NORM_WEIGHT], attn_norm_rstd, d_attn_norm, d_x, g[L_ATTN_NORM_WEIGHT]);
  ew_add(B*T*C, B*T*C, d_attn_proj_sum, d_x, dx); /* dx = (d_attn_proj_sum + d_x) */
}

/* head forward of one microbatch: 3 calls; saved: 18688 elements kept for backward; tmp: scratch. */
static void head_forward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *tmp) {
  (void)tmp;
  act_t *ln_f = saved + 0; /* [b, seq, hidden] 4×16×32 */
  real *ln_f_rstd = (real *)(saved + 2048); /* [b, seq] 4×16 */
  act_t *logits = saved + 2176; /* [b, seq, vocab] 4×16×256 */
  real *lse = (real *)(saved + 18560); /* [b, seq] 4×16 */
  k_rmsnorm_forward(B*T, C, x, r->model_w[P_LN_F_WEIGHT], 1e-05, ln_f, ln_f_rstd); /* tests/cli/models/moe.lua */
  k_gemm(GEMM_N, GEMM_T, B*T, V, C, 1, ln_f, r->model_w[P_LM_HEAD_WEIGHT], GEMM_OVERWRITE, logits); /* tests/cli/models/moe.lua */
  rt_xent_forward_grad(r, B*T, V, logits, targets, V, XENT_NO_IGNORE, lse); /* tests/cli/models/moe.lua */
}

/* head backward of one microbatch: 3 calls; saved: 18688 elements kept for backward; tmp: scratch. */
static void head_backward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *dx, act_t *tmp) {
  (void)targets;
  act_t *ln_f = saved + 0; /* [b, seq, hidden] 4×16×32 */
  real *ln_f_rstd = (real *)(saved + 2048); /* [b, seq] 4×16 */
  act_t *d_logits = saved + 2176; /* [b, seq, vocab] 4×16×256 */
  act_t *d_ln_f = tmp + 0; /* [b, seq, hidden] 4×16×32 */
  /* the cross entropy's gradient: written over the logits by its forward */
  k_gemm(GEMM_N, GEMM_N, B*T, C, V, 1, d_logits, r->model_w[P_LM_HEAD_WEIGHT], GEMM_OVERWRITE, d_ln_f);
  k_gemm_grad(GEMM_T, GEMM_N, V, C, B*T, d_logits, ln_f, r->model_g[P_LM_HEAD_WEIGHT]);
  k_rmsnorm_backward(B*T, C, x, r->model_w[P_LN_F_WEIGHT], ln_f_rstd, d_ln_f, dx, r->model_g[P_LN_F_WEIGHT]);
}

/* Chunk 0, pipeline rank 0: embedding, layers 0-1, head. Its slot (one microbatch in flight) holds 92608 elements:
 * the embedding's saved activations at 0,
 * each layer's saved activations from 2048,
 * the head's at 73920,
 * (-1: none). */
static void chunk_0_forward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  embed_forward(r, tokens, slot + 0, r->scratch);
  const act_t *x = slot + 0 + EMBED_OUTPUT;
  for (int i = 0; i < 2; i++) {
    act_t *saved = slot + 2048 + (int64_t)i * BLOCK_SAVED;
    block_forward(r, 0 + i, x, saved, r->scratch);
    x = saved + BLOCK_OUTPUT;
  }
  head_forward(r, x, targets, slot + 73920, r->scratch);
}

static void chunk_0_backward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  const act_t *input = slot + 0 + EMBED_OUTPUT;
  const act_t *x = slot + 2048 + (int64_t)1 * BLOCK_SAVED + BLOCK_OUTPUT;
  head_backward(r, x, targets, slot + 73920, r->grad_a, r->scratch);
  const act_t *dy = r->grad_a;
  for (int i = 1; i >= 0; i--) {
    act_t *saved = slot + 2048 + (int64_t)i * BLOCK_SAVED;
    const act_t *layer_input = i > 0 ? saved - BLOCK_SAVED + BLOCK_OUTPUT : input;
    act_t *dx = dy == r->grad_a ? r->grad_b : r->grad_a;
    block_backward(r, 0 + i, layer_input, saved, dy, dx, r->scratch);
    rt_layer_backward_done(r, 0 + i); /* its gradients may be final: reduce them meanwhile */
    dy = dx;
  }
  embed_backward(r, tokens, slot + 0, dy, r->scratch);
}

static const ParamSpec model_params[] = {
  /* name, axes, shape, shape without padding, TP split axis, init, std, decay, TP-summed gradient,
     read by the embedding, read by the head, trained, place in memory, TP ranks sharing a piece,
     experts spread over ep ranks */
  {"wte", 2, {256, 32}, {256, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 0, 1, 0, 1, 0},
  {"ln_f.weight", 1, {32}, {32}, -1, INIT_ONE, 0.02, 0, 0, 0, 1, 1, 1, 1, 0},
  {"lm_head.weight", 2, {256, 32}, {256, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 1, 1, 2, 1, 0},
};

static const ParamSpec block_params[] = {
  /* name, axes, shape, shape without padding, TP split axis, init, std, decay, TP-summed gradient,
     read by the embedding, read by the head, trained, place in memory, TP ranks sharing a piece,
     experts spread over ep ranks */
  {"attn_norm.weight", 1, {32}, {32}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 0, 1, 0},
  {"attn.q.weight", 2, {32, 32}, {32, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 1, 1, 0},
  {"attn.k.weight", 2, {32, 32}, {32, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 2, 1, 0},
  {"attn.v.weight", 2, {32, 32}, {32, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 3, 1, 0},
  {"attn.proj.weight", 2, {32, 32}, {32, 32}, -1, INIT_NORMAL_DIST, 0.01, 1, 0, 0, 0, 1, 4, 1, 0},
  {"moe_norm.weight", 1, {32}, {32}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 5, 1, 0},
  {"moe.gate.weight", 2, {4, 32}, {4, 32}, -1, INIT_NORMAL_DIST, 0.5, 1, 0, 0, 0, 1, 6, 1, 0},
  {"moe.experts.w1", 3, {4, 24, 32}, {4, 24, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 7, 1, 0},
  {"moe.experts.w3", 3, {4, 24, 32}, {4, 24, 32}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 8, 1, 0},
  {"moe.experts.w2", 3, {4, 32, 24}, {4, 32, 24}, -1, INIT_NORMAL_DIST, 0.01, 1, 0, 0, 0, 1, 9, 1, 0},
};

/* ones.onextop2 [one, top2] (tests/cli/models/moe.lua:20) */
static const double constant_0[2] = {
  1, 1
};

/* ones.top2xone [top2, one] (tests/cli/models/moe.lua:20) */
static const double constant_1[2] = {
  1, 1
};

/* ones.onexexperts [one, experts] (tests/cli/models/moe.lua:20) */
static const double constant_2[4] = {
  1, 1, 1, 1
};

/* ones.expertsxone [experts, one] (tests/cli/models/moe.lua:20) */
static const double constant_3[4] = {
  1, 1, 1, 1
};

static const ConstantSpec constants[] = {
  {"ones.onextop2", 2, constant_0},
  {"ones.top2xone", 2, constant_1},
  {"ones.onexexperts", 4, constant_2},
  {"ones.expertsxone", 4, constant_3},
  {NULL, 0, NULL},
};

static const ChunkSpec chunks[] = {
  /* first layer, layers, embed, head, slot elements, input, output, gradient received, gradient sent,
     elements of fused elementwise kernels forward and backward, functions */
  {0, 2, 1, 1, 92608, -1, -1, -1, -1, 52608, 116224, chunk_0_forward, chunk_0_backward},
};

/* The plan: each pipeline rank's actions in order (schedule 1f1b, 4 microbatches). Fields: kind, joined
 * (posted in one group with the action before it), chunk, microbatch, peer rank, the slot of the
 * chunk's activations it uses, the slot of the neighbouring chunk on this rank it reads or writes. */
static const Action rank_0[] = {
  {ACT_FORWARD, 0, 0, 0, -1, 0, -1}, /* 0F0 */
  {ACT_BACKWARD, 0, 0, 0, -1, 0, -1}, /* 0B0 */
  {ACT_FORWARD, 0, 0, 1, -1, 0, -1}, /* 0F1 */
  {ACT_BACKWARD, 0, 0, 1, -1, 0, -1}, /* 0B1 */
  {ACT_FORWARD, 0, 0, 2, -1, 0, -1}, /* 0F2 */
  {ACT_BACKWARD, 0, 0, 2, -1, 0, -1}, /* 0B2 */
  {ACT_FORWARD, 0, 0, 3, -1, 0, -1}, /* 0F3 */
  {ACT_BACKWARD, 0, 0, 3, -1, 0, -1}, /* 0B3 */
  {ACT_REDUCE_GRAD, 0, 0, -1, -1, -1, -1}, /* 0REDUCE_GRAD */
  {ACT_STEP, 0, -1, -1, -1, -1, -1}, /* STEP */
};
static const Action *const actions[] = {rank_0};
static const int nactions[] = {10};
/* Activation slots per chunk: the most microbatches in flight through it at once. */
static const int slots[] = {1};
/* What the plan holds on each pipeline rank (one TP rank's share): parameter elements, each with its
 * gradient and Adam state, and activation elements. */
static const RankFootprint footprints[] = {{43424, 113088}};

/* The model's configuration (tests/cli/models/moe.lua after --set), which checkpoints record. */
static const ConfigItem config[] = {
  {"aux_loss", "0.01"},
  {"bias", "false"},
  {"capacity_factor", "1.25"},
  {"drop_policy", "probs"},
  {"experts", "4"},
  {"ffn", "24"},
  {"heads", "2"},
  {"hidden", "32"},
  {"layers", "2"},
  {"norm", "rmsnorm"},
  {"positions", "rope"},
  {"renormalize", "true"},
  {"routed_scale", "1.0"},
  {"router_score", "softmax"},
  {"router_std", "0.5"},
  {"seq", "16"},
  {"shared_ffn", "0"},
  {"tied", "false"},
  {"topk", "2"},
  {"vocab", "256"},
  {"z_loss", "0.001"},
};

const Program plait_program = {
  .name = "moe", .source = "tests/cli/models/moe.lua",
  .tp = 1, .pp = 1, .vpp = 1, .dp = 1, .mbs = 4, .gbs = 16, .microbatches = 4,
  .seq = 16, .hidden = 32, .layers = 2,
  .vocab = 256, .vocab_padded = 256,
  .constants = constants, .nconstants = 4,
  .recompute = 0, .sequence_parallel = 0, .grad_reduce_after = 0, .masked_lm = 0,
  .config = config, .nconfig = 21,
  .model_params = model_params, .nmodel_params = 3,
  .block_params = block_params, .nblock_params = 10,
  .chunks = chunks, .nchunks = 1,
  .actions = actions, .nactions = nactions, .slots = slots, .footprints = footprints,
  .scratch_elems = 16384, .recompute_elems = 0, .io_elems = IO_ELEMS,
  .logits_offset = 76096, .logits_cols = 256,
  .flops_per_iteration = 42905600,
};
