/* model.c: gpt (models/gpt.lua) compiled by plait for tp 1 × pp 1 × dp 1, vpp 1, microbatch 8, global batch 8
 * (1 microbatches per pipeline), schedule 1f1b, recompute none, sequence parallel off, gradients reduced
 * during the backward. Generated: rebuild with plait build rather than editing. Sizes are one tensor-parallel
 * rank's. */
#include "device.h"
#include "fused.h"
#include "rt.h"
#include "profiled.h" /* under --profile, each runtime kernel's time, FLOPs and bytes */

/* Parameters at model scope (r->model_w[P_...]) and of each layer (r->layer_w[layer][L_...]). */
enum {
  P_WTE, P_WPE, P_LN_F_WEIGHT, P_LN_F_BIAS
};
enum {
  L_LN_1_WEIGHT, L_LN_1_BIAS, L_ATTN_Q_WEIGHT, L_ATTN_Q_BIAS,
  L_ATTN_K_WEIGHT, L_ATTN_K_BIAS, L_ATTN_V_WEIGHT, L_ATTN_V_BIAS,
  L_ATTN_PROJ_WEIGHT, L_ATTN_PROJ_BIAS, L_LN_2_WEIGHT, L_LN_2_BIAS,
  L_MLP_FC_WEIGHT, L_MLP_FC_BIAS, L_MLP_PROJ_WEIGHT, L_MLP_PROJ_BIAS
};

/* The model's dims, whole (a tensor split over TP ranks holds its dim / TP). */
enum {
  B = 8, T = 2048, V = 51200, C = 2048, QDIM = 2048, KVDIM = 2048,
  HEADS = 16, FFN = 8192
};

/* Activations of one microbatch, in elements: what each stage keeps for its backward pass, and where
 * its output (the next stage's input) sits in that (64-bit: a large vocabulary's logits pass 2^31). */
#define EMBED_SAVED INT64_C(33554432)
#define EMBED_OUTPUT INT64_C(0)
#define BLOCK_SAVED INT64_C(537526272)
#define BLOCK_OUTPUT INT64_C(503971840)
#define HEAD_SAVED INT64_C(872513536)
#define IO_ELEMS INT64_C(33554432) /* the activation passed between layers and chunks */

/* embed forward of one microbatch: 2 calls; saved: 33554432 elements kept for backward; tmp: scratch. */
static void embed_forward(Run *r, const int32_t *tokens, act_t *saved, act_t *tmp) {
  act_t *wte_rows = tmp + 0; /* [b, seq, hidden] 8×2048×2048 */
  act_t *wpe = saved + 0; /* [b, seq, hidden] 8×2048×2048 */
  rt_embedding_forward(r, B*T, C, tokens, r->model_w[P_WTE], V, 0, wte_rows); /* models/gpt.lua */
  ew_bias_add(B*T*C, T*C, wte_rows, r->model_w[P_WPE], T*C, wpe); /* wpe = (wte_rows + wpe) (models/gpt.lua) */
}

/* embed backward of one microbatch: 2 calls; saved: 33554432 elements kept for backward; tmp: scratch. */
static void embed_backward(Run *r, const int32_t *tokens, act_t *saved, const act_t *dy, act_t *tmp) {
  (void)saved;
  (void)tmp;
  k_sum_rows(B, T*C, dy, r->model_g[P_WPE]);
  rt_embedding_backward(r, B*T, C, tokens, dy, V, 0, r->model_g[P_WTE]);
}

/* block forward of one microbatch: 16 calls; saved: 537526272 elements kept for backward; tmp: scratch. */
static void block_forward(Run *r, int layer, const act_t *x, act_t *saved, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  act_t *ln_1 = saved + 0; /* [b, seq, hidden] 8×2048×2048 */
  real *ln_1_mean = (real *)(saved + 33554432); /* [b, seq] 8×2048 */
  real *ln_1_rstd = (real *)(saved + 33587200); /* [b, seq] 8×2048 */
  act_t *attn_q_split = tmp + 100663296; /* [b, seq, qdim] 8×2048×2048 */
  act_t *attn_q = saved + 33619968; /* [b, seq, qdim] 8×2048×2048 */
  act_t *attn_k_split = tmp + 134217728; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *attn_k = saved + 67174400; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *attn_v_split = tmp + 167772160; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *attn_v = saved + 100728832; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *attn = saved + 134283264; /* [b, seq, qdim] 8×2048×2048 */
  real *attn_lse = (real *)(saved + 167837696); /* [b, heads, seq] 8×16×2048 */
  act_t *attn_proj = tmp + 0; /* [b, seq, hidden] 8×2048×2048 */
  act_t *attn_proj_residual = saved + 168361984; /* [b, seq, hidden] 8×2048×2048 */
  act_t *ln_2 = saved + 201916416; /* [b, seq, hidden] 8×2048×2048 */
  real *ln_2_mean = (real *)(saved + 235470848); /* [b, seq] 8×2048 */
  real *ln_2_rstd = (real *)(saved + 235503616); /* [b, seq] 8×2048 */
  act_t *mlp_fc = saved + 235536384; /* [b, seq, ffn] 8×2048×8192 */
  act_t *mlp_fc_gelu = saved + 369754112; /* [b, seq, ffn] 8×2048×8192 */
  act_t *mlp_proj = tmp + 0; /* [b, seq, hidden] 8×2048×2048 */
  act_t *mlp_proj_residual = saved + 503971840; /* [b, seq, hidden] 8×2048×2048 */
  act_t *attn_q_k_v = tmp + 0; /* [b, seq, qdim+kvdim+kvdim] 8×2048×6144 */
  k_layernorm_forward(B*T, C, x, w[L_LN_1_WEIGHT], w[L_LN_1_BIAS], 1e-05, ln_1, ln_1_mean, ln_1_rstd); /* models/gpt.lua:12 */
  /* one GEMM over attn.q+k+v.weight: 3 weights side by side in memory */
  k_gemm(GEMM_N, GEMM_T, B*T, (QDIM+KVDIM+KVDIM), C, 1, ln_1, w[L_ATTN_Q_WEIGHT], GEMM_OVERWRITE, attn_q_k_v); /* models/gpt.lua:12 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 0, attn_q_k_v, attn_q_split); /* models/gpt.lua:12 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 1, attn_q_k_v, attn_k_split); /* models/gpt.lua:12 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 2, attn_q_k_v, attn_v_split); /* models/gpt.lua:12 */
  ew_bias_add(B*T*QDIM, QDIM, attn_q_split, w[L_ATTN_Q_BIAS], QDIM, attn_q); /* attn_q = (attn_q_split + attn.q.bias) (models/gpt.lua:12) */
  ew_bias_add(B*T*KVDIM, KVDIM, attn_k_split, w[L_ATTN_K_BIAS], KVDIM, attn_k); /* attn_k = (attn_k_split + attn.k.bias) (models/gpt.lua:12) */
  ew_bias_add(B*T*KVDIM, KVDIM, attn_v_split, w[L_ATTN_V_BIAS], KVDIM, attn_v); /* attn_v = (attn_v_split + attn.v.bias) (models/gpt.lua:12) */
  {
    const AttnShape shape = {.B = B, .T = T, .Hq = 16, .Hkv = 16, .D = 128, .causal = 1};
    k_attention_forward(&shape, attn_q, attn_k, attn_v, attn, attn_lse);
  } /* models/gpt.lua:12 */
  k_gemm(GEMM_N, GEMM_T, B*T, C, QDIM, 1, attn, w[L_ATTN_PROJ_WEIGHT], GEMM_OVERWRITE, attn_proj); /* models/gpt.lua:12 */
  ew_residual_bias_add(B*T*C, C, x, attn_proj, w[L_ATTN_PROJ_BIAS], C, attn_proj_residual); /* attn_proj_residual = (x + (attn_proj + attn.proj.bias)) (models/gpt.lua:12) */
  k_layernorm_forward(B*T, C, attn_proj_residual, w[L_LN_2_WEIGHT], w[L_LN_2_BIAS], 1e-05, ln_2, ln_2_mean, ln_2_rstd); /* models/gpt.lua:13 */
  k_gemm(GEMM_N, GEMM_T, B*T, FFN, C, 1, ln_2, w[L_MLP_FC_WEIGHT], GEMM_OVERWRITE, mlp_fc); /* models/gpt.lua:13 */
  ew_gelu_bias_add(B*T*FFN, FFN, mlp_fc, w[L_MLP_FC_BIAS], FFN, mlp_fc_gelu); /* mlp_fc_gelu = gelu((mlp_fc + mlp.fc.bias)) (models/gpt.lua:13) */
  k_gemm(GEMM_N, GEMM_T, B*T, C, FFN, 1, mlp_fc_gelu, w[L_MLP_PROJ_WEIGHT], GEMM_OVERWRITE, mlp_proj); /* models/gpt.lua:13 */
  ew_residual_bias_add(B*T*C, C, attn_proj_residual, mlp_proj, w[L_MLP_PROJ_BIAS], C, mlp_proj_residual); /* mlp_proj_residual = (attn_proj_residual + (mlp_proj + mlp.proj.bias)) (models/gpt.lua:13) */
}

/* block backward of one microbatch: 21 calls; saved: 537526272 elements kept for backward; tmp: scratch. */
static void block_backward(Run *r, int layer, const act_t *x, act_t *saved, const act_t *dy, act_t *dx, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  real *const *g = r->layer_g[layer];
  act_t *ln_1 = saved + 0; /* [b, seq, hidden] 8×2048×2048 */
  real *ln_1_mean = (real *)(saved + 33554432); /* [b, seq] 8×2048 */
  real *ln_1_rstd = (real *)(saved + 33587200); /* [b, seq] 8×2048 */
  act_t *attn_q = saved + 33619968; /* [b, seq, qdim] 8×2048×2048 */
  act_t *attn_k = saved + 67174400; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *attn_v = saved + 100728832; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *attn = saved + 134283264; /* [b, seq, qdim] 8×2048×2048 */
  real *attn_lse = (real *)(saved + 167837696); /* [b, heads, seq] 8×16×2048 */
  act_t *attn_proj_residual = saved + 168361984; /* [b, seq, hidden] 8×2048×2048 */
  act_t *ln_2 = saved + 201916416; /* [b, seq, hidden] 8×2048×2048 */
  real *ln_2_mean = (real *)(saved + 235470848); /* [b, seq] 8×2048 */
  real *ln_2_rstd = (real *)(saved + 235503616); /* [b, seq] 8×2048 */
  act_t *mlp_fc = saved + 235536384; /* [b, seq, ffn] 8×2048×8192 */
  act_t *mlp_fc_gelu = saved + 369754112; /* [b, seq, ffn] 8×2048×8192 */
  act_t *d_mlp_fc_gelu = tmp + 0; /* [b, seq, ffn] 8×2048×8192 */
  act_t *d_mlp_fc = tmp + 134217728; /* [b, seq, ffn] 8×2048×8192 */
  act_t *d_ln_2 = tmp + 0; /* [b, seq, hidden] 8×2048×2048 */
  act_t *d_attn_proj_residual_norm_bwd = tmp + 33554432; /* [b, seq, hidden] 8×2048×2048 */
  act_t *d_attn_proj_residual = tmp + 0; /* [b, seq, hidden] 8×2048×2048 */
  act_t *d_attn = tmp + 33554432; /* [b, seq, qdim] 8×2048×2048 */
  act_t *d_attn_q = tmp + 67108864; /* [b, seq, qdim] 8×2048×2048 */
  act_t *d_attn_k = tmp + 100663296; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *d_attn_v = tmp + 134217728; /* [b, seq, kvdim] 8×2048×2048 */
  act_t *d_attn_q_k_v = tmp + 167772160; /* [b, seq, qdim+kvdim+kvdim] 8×2048×6144 */
  act_t *d_ln_1 = tmp + 33554432; /* [b, seq, hidden] 8×2048×2048 */
  act_t *d_x = tmp + 67108864; /* [b, seq, hidden] 8×2048×2048 */
  k_sum_rows(B*T, C, dy, g[L_MLP_PROJ_BIAS]);
  k_gemm(GEMM_N, GEMM_N, B*T, FFN, C, 1, dy, w[L_MLP_PROJ_WEIGHT], GEMM_OVERWRITE, d_mlp_fc_gelu);
  k_gemm_grad(GEMM_T, GEMM_N, C, FFN, B*T, dy, mlp_fc_gelu, g[L_MLP_PROJ_WEIGHT]);
  ew_gelu_bias_add_backward(B*T*FFN, FFN, d_mlp_fc_gelu, mlp_fc, w[L_MLP_FC_BIAS], FFN, d_mlp_fc); /* d_mlp_fc = (d_mlp_fc_gelu * gelu_grad((mlp_fc + mlp.fc.bias))) */
  k_sum_rows(B*T, FFN, d_mlp_fc, g[L_MLP_FC_BIAS]);
  k_gemm(GEMM_N, GEMM_N, B*T, C, FFN, 1, d_mlp_fc, w[L_MLP_FC_WEIGHT], GEMM_OVERWRITE, d_ln_2);
  k_gemm_grad(GEMM_T, GEMM_N, FFN, C, B*T, d_mlp_fc, ln_2, g[L_MLP_FC_WEIGHT]);
  k_layernorm_backward(B*T, C, attn_proj_residual, w[L_LN_2_WEIGHT], ln_2_mean, ln_2_rstd, d_ln_2, d_attn_proj_residual_norm_bwd, g[L_LN_2_WEIGHT], g[L_LN_2_BIAS]);
  ew_add(B*T*C, B*T*C, dy, d_attn_proj_residual_norm_bwd, d_attn_proj_residual); /* d_attn_proj_residual = (dy + d_attn_proj_residual_norm_bwd) */
  k_sum_rows(B*T, C, d_attn_proj_residual, g[L_ATTN_PROJ_BIAS]);
  k_gemm(GEMM_N, GEMM_N, B*T, QDIM, C, 1, d_attn_proj_residual, w[L_ATTN_PROJ_WEIGHT], GEMM_OVERWRITE, d_attn);
  k_gemm_grad(GEMM_T, GEMM_N, C, QDIM, B*T, d_attn_proj_residual, attn, g[L_ATTN_PROJ_WEIGHT]);
  {
    const AttnShape shape = {.B = B, .T = T, .Hq = 16, .Hkv = 16, .D = 128, .causal = 1};
    k_attention_backward(&shape, attn_q, attn_k, attn_v, attn, attn_lse, d_attn, d_attn_q, d_attn_k, d_attn_v);
  }
  k_sum_rows(B*T, KVDIM, d_attn_v, g[L_ATTN_V_BIAS]);
  k_sum_rows(B*T, KVDIM, d_attn_k, g[L_ATTN_K_BIAS]);
  k_sum_rows(B*T, QDIM, d_attn_q, g[L_ATTN_Q_BIAS]);
  k_concat(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, (const act_t *[]){d_attn_q, d_attn_k, d_attn_v}, d_attn_q_k_v);
  /* the input's gradient through attn.q+k+v.weight in one GEMM (3 products summed) */
  k_gemm(GEMM_N, GEMM_N, B*T, C, (QDIM+KVDIM+KVDIM), 1, d_attn_q_k_v, w[L_ATTN_Q_WEIGHT], GEMM_OVERWRITE, d_ln_1);
  /* dattn.q+k+v.weight: the gradients of 3 weights side by side, in one GEMM */
  k_gemm_grad(GEMM_T, GEMM_N, (QDIM+KVDIM+KVDIM), C, B*T, d_attn_q_k_v, ln_1, g[L_ATTN_Q_WEIGHT]);
  k_layernorm_backward(B*T, C, x, w[L_LN_1_WEIGHT], ln_1_mean, ln_1_rstd, d_ln_1, d_x, g[L_LN_1_WEIGHT], g[L_LN_1_BIAS]);
  ew_add(B*T*C, B*T*C, d_attn_proj_residual, d_x, dx); /* dx = (d_attn_proj_residual + d_x) */
}

/* head forward of one microbatch: 3 calls; saved: 872513536 elements kept for backward; tmp: scratch. */
static void head_forward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *tmp) {
  (void)tmp;
  act_t *ln_f = saved + 0; /* [b, seq, hidden] 8×2048×2048 */
  real *ln_f_mean = (real *)(saved + 33554432); /* [b, seq] 8×2048 */
  real *ln_f_rstd = (real *)(saved + 33587200); /* [b, seq] 8×2048 */
  act_t *logits = saved + 33619968; /* [b, seq, vocab] 8×2048×51200 */
  real *lse = (real *)(saved + 872480768); /* [b, seq] 8×2048 */
  k_layernorm_forward(B*T, C, x, r->model_w[P_LN_F_WEIGHT], r->model_w[P_LN_F_BIAS], 1e-05, ln_f, ln_f_mean, ln_f_rstd); /* models/gpt.lua */
  k_gemm(GEMM_N, GEMM_T, B*T, V, C, 1, ln_f, r->model_w[P_WTE], GEMM_OVERWRITE, logits); /* models/gpt.lua */
  rt_xent_forward_grad(r, B*T, V, logits, targets, V, XENT_NO_IGNORE, lse); /* models/gpt.lua */
}

/* head backward of one microbatch: 3 calls; saved: 872513536 elements kept for backward; tmp: scratch. */
static void head_backward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *dx, act_t *tmp) {
  (void)targets;
  act_t *ln_f = saved + 0; /* [b, seq, hidden] 8×2048×2048 */
  real *ln_f_mean = (real *)(saved + 33554432); /* [b, seq] 8×2048 */
  real *ln_f_rstd = (real *)(saved + 33587200); /* [b, seq] 8×2048 */
  act_t *d_logits = saved + 33619968; /* [b, seq, vocab] 8×2048×51200 */
  act_t *d_ln_f = tmp + 0; /* [b, seq, hidden] 8×2048×2048 */
  /* the cross entropy's gradient: written over the logits by its forward */
  k_gemm(GEMM_N, GEMM_N, B*T, C, V, 1, d_logits, r->model_w[P_WTE], GEMM_OVERWRITE, d_ln_f);
  k_gemm_grad(GEMM_T, GEMM_N, V, C, B*T, d_logits, ln_f, r->model_g[P_WTE]);
  k_layernorm_backward(B*T, C, x, r->model_w[P_LN_F_WEIGHT], ln_f_mean, ln_f_rstd, d_ln_f, dx, r->model_g[P_LN_F_WEIGHT], r->model_g[P_LN_F_BIAS]);
}

/* Chunk 0, pipeline rank 0: embedding, layers 0-23, head. Its slot (one microbatch in flight) holds 13806698496 elements:
 * the embedding's saved activations at 0,
 * each layer's saved activations from 33554432,
 * the head's at 12934184960,
 * (-1: none). */
static void chunk_0_forward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  embed_forward(r, tokens, slot + 0, r->scratch);
  const act_t *x = slot + 0 + EMBED_OUTPUT;
  for (int i = 0; i < 24; i++) {
    act_t *saved = slot + 33554432 + (int64_t)i * BLOCK_SAVED;
    block_forward(r, 0 + i, x, saved, r->scratch);
    x = saved + BLOCK_OUTPUT;
  }
  head_forward(r, x, targets, slot + 12934184960, r->scratch);
}

static void chunk_0_backward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  const act_t *input = slot + 0 + EMBED_OUTPUT;
  const act_t *x = slot + 33554432 + (int64_t)23 * BLOCK_SAVED + BLOCK_OUTPUT;
  head_backward(r, x, targets, slot + 12934184960, r->grad_a, r->scratch);
  const act_t *dy = r->grad_a;
  for (int i = 23; i >= 0; i--) {
    act_t *saved = slot + 33554432 + (int64_t)i * BLOCK_SAVED;
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
  {"wte", 2, {51200, 2048}, {51200, 2048}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 1, 1, 0, 1, 0},
  {"wpe", 2, {2048, 2048}, {2048, 2048}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 0, 1, 1, 1, 0},
  {"ln_f.weight", 1, {2048}, {2048}, -1, INIT_ONE, 0.02, 0, 0, 0, 1, 1, 2, 1, 0},
  {"ln_f.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 1, 1, 3, 1, 0},
};

static const ParamSpec block_params[] = {
  /* name, axes, shape, shape without padding, TP split axis, init, std, decay, TP-summed gradient,
     read by the embedding, read by the head, trained, place in memory, TP ranks sharing a piece,
     experts spread over ep ranks */
  {"ln_1.weight", 1, {2048}, {2048}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 0, 1, 0},
  {"ln_1.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 1, 1, 0},
  {"attn.q.weight", 2, {2048, 2048}, {2048, 2048}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 2, 1, 0},
  {"attn.q.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 5, 1, 0},
  {"attn.k.weight", 2, {2048, 2048}, {2048, 2048}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 3, 1, 0},
  {"attn.k.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 6, 1, 0},
  {"attn.v.weight", 2, {2048, 2048}, {2048, 2048}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 4, 1, 0},
  {"attn.v.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 7, 1, 0},
  {"attn.proj.weight", 2, {2048, 2048}, {2048, 2048}, -1, INIT_NORMAL_DIST, 0.00288675135, 1, 0, 0, 0, 1, 8, 1, 0},
  {"attn.proj.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 9, 1, 0},
  {"ln_2.weight", 1, {2048}, {2048}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 10, 1, 0},
  {"ln_2.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 11, 1, 0},
  {"mlp.fc.weight", 2, {8192, 2048}, {8192, 2048}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 12, 1, 0},
  {"mlp.fc.bias", 1, {8192}, {8192}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 13, 1, 0},
  {"mlp.proj.weight", 2, {2048, 8192}, {2048, 8192}, -1, INIT_NORMAL_DIST, 0.00288675135, 1, 0, 0, 0, 1, 14, 1, 0},
  {"mlp.proj.bias", 1, {2048}, {2048}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 15, 1, 0},
};

static const ChunkSpec chunks[] = {
  /* first layer, layers, embed, head, slot elements, input, output, gradient received, gradient sent,
     elements of fused elementwise kernels forward and backward, functions */
  {0, 24, 1, 1, 13806698496, -1, -1, -1, -1, 16173236224, 14495514624, chunk_0_forward, chunk_0_backward},
};

/* The plan: each pipeline rank's actions in order (schedule 1f1b, 1 microbatches). Fields: kind, joined
 * (posted in one group with the action before it), chunk, microbatch, peer rank, the slot of the
 * chunk's activations it uses, the slot of the neighbouring chunk on this rank it reads or writes. */
static const Action rank_0[] = {
  {ACT_FORWARD, 0, 0, 0, -1, 0, -1}, /* 0F0 */
  {ACT_BACKWARD, 0, 0, 0, -1, 0, -1}, /* 0B0 */
  {ACT_REDUCE_GRAD, 0, 0, -1, -1, -1, -1}, /* 0REDUCE_GRAD */
  {ACT_STEP, 0, -1, -1, -1, -1, -1}, /* STEP */
};
static const Action *const actions[] = {rank_0};
static const int nactions[] = {4};
/* Activation slots per chunk: the most microbatches in flight through it at once. */
static const int slots[] = {1};
/* What the plan holds on each pipeline rank (one TP rank's share): parameter elements, each with its
 * gradient and Adam state, and activation elements. */
static const RankFootprint footprints[] = {{1317654528, 14142242816}};

/* The model's configuration (models/gpt.lua after --set), which checkpoints record. */
static const ConfigItem config[] = {
  {"dropout", "0.0"},
  {"ffn", "8192"},
  {"heads", "16"},
  {"hidden", "2048"},
  {"layers", "24"},
  {"seq", "2048"},
  {"vocab", "51200"},
};

const Program plait_program = {
  .name = "gpt", .source = "models/gpt.lua",
  .tp = 1, .pp = 1, .vpp = 1, .dp = 1, .mbs = 8, .gbs = 8, .microbatches = 1,
  .seq = 2048, .hidden = 2048, .layers = 24,
  .vocab = 51200, .vocab_padded = 51200,
  .recompute = 0, .sequence_parallel = 0, .grad_reduce_after = 0, .masked_lm = 0,
  .config = config, .nconfig = 7,
  .model_params = model_params, .nmodel_params = 4,
  .block_params = block_params, .nblock_params = 16,
  .chunks = chunks, .nchunks = 1,
  .actions = actions, .nactions = nactions, .slots = slots, .footprints = footprints,
  .scratch_elems = 268435456, .recompute_elems = 0, .io_elems = IO_ELEMS,
  .logits_offset = 12967804928, .logits_cols = 51200,
  .flops_per_iteration = 148846386610176,
};
