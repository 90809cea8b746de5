/* model.c: gpt2 (models/gpt2.lua) compiled by plait for tp 1 × pp 1 × dp 1, vpp 1, microbatch 1, global batch 1
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
  B = 1, T = 1024, Vp = 50304, C = 768, QDIM = 768, KVDIM = 768,
  HEADS = 12, FFN = 3072, V = 50257
};

/* Activations of one microbatch, in elements: what each stage keeps for its backward pass, and where
 * its output (the next stage's input) sits in that (64-bit: a large vocabulary's logits pass 2^31). */
#define EMBED_SAVED INT64_C(786432)
#define EMBED_OUTPUT INT64_C(0)
#define BLOCK_SAVED INT64_C(12615680)
#define BLOCK_OUTPUT INT64_C(11829248)
#define HEAD_SAVED INT64_C(52303872)
#define IO_ELEMS INT64_C(786432) /* the activation passed between layers and chunks */

/* embed forward of one microbatch: 2 calls; saved: 786432 elements kept for backward; tmp: scratch. */
static void embed_forward(Run *r, const int32_t *tokens, act_t *saved, act_t *tmp) {
  act_t *wte_rows = tmp + 0; /* [b, seq, hidden] 1×1024×768 */
  act_t *wpe_sum = saved + 0; /* [b, seq, hidden] 1×1024×768 */
  rt_embedding_forward(r, B*T, C, tokens, r->model_w[P_WTE], Vp, 0, wte_rows); /* models/gpt2.lua */
  ew_add(B*T*C, B*T*C, wte_rows, r->model_w[P_WPE], wpe_sum); /* wpe_sum = (wte_rows + wpe) (models/gpt2.lua) */
}

/* embed backward of one microbatch: 2 calls; saved: 786432 elements kept for backward; tmp: scratch. */
static void embed_backward(Run *r, const int32_t *tokens, act_t *saved, const act_t *dy, act_t *tmp) {
  (void)saved;
  (void)tmp;
  k_sum_rows(B, T*C, dy, r->model_g[P_WPE]);
  rt_embedding_backward(r, B*T, C, tokens, dy, Vp, 0, r->model_g[P_WTE]);
}

/* block forward of one microbatch: 16 calls; saved: 12615680 elements kept for backward; tmp: scratch. */
static void block_forward(Run *r, int layer, const act_t *x, act_t *saved, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  act_t *ln_1 = saved + 0; /* [b, seq, hidden] 1×1024×768 */
  real *ln_1_mean = (real *)(saved + 786432); /* [b, seq] 1×1024 */
  real *ln_1_rstd = (real *)(saved + 788480); /* [b, seq] 1×1024 */
  act_t *attn_q_split = tmp + 2359296; /* [b, seq, qdim] 1×1024×768 */
  act_t *attn_q = saved + 790528; /* [b, seq, qdim] 1×1024×768 */
  act_t *attn_k_split = tmp + 3145728; /* [b, seq, kvdim] 1×1024×768 */
  act_t *attn_k = saved + 1576960; /* [b, seq, kvdim] 1×1024×768 */
  act_t *attn_v_split = tmp + 3932160; /* [b, seq, kvdim] 1×1024×768 */
  act_t *attn_v = saved + 2363392; /* [b, seq, kvdim] 1×1024×768 */
  act_t *attn = saved + 3149824; /* [b, seq, qdim] 1×1024×768 */
  real *attn_lse = (real *)(saved + 3936256); /* [b, heads, seq] 1×12×1024 */
  act_t *attn_proj = tmp + 0; /* [b, seq, hidden] 1×1024×768 */
  act_t *attn_proj_residual = saved + 3960832; /* [b, seq, hidden] 1×1024×768 */
  act_t *ln_2 = saved + 4747264; /* [b, seq, hidden] 1×1024×768 */
  real *ln_2_mean = (real *)(saved + 5533696); /* [b, seq] 1×1024 */
  real *ln_2_rstd = (real *)(saved + 5535744); /* [b, seq] 1×1024 */
  act_t *mlp_fc = saved + 5537792; /* [b, seq, ffn] 1×1024×3072 */
  act_t *mlp_fc_gelu = saved + 8683520; /* [b, seq, ffn] 1×1024×3072 */
  act_t *mlp_proj = tmp + 0; /* [b, seq, hidden] 1×1024×768 */
  act_t *mlp_proj_residual = saved + 11829248; /* [b, seq, hidden] 1×1024×768 */
  act_t *attn_q_k_v = tmp + 0; /* [b, seq, qdim+kvdim+kvdim] 1×1024×2304 */
  k_layernorm_forward(B*T, C, x, w[L_LN_1_WEIGHT], w[L_LN_1_BIAS], 1e-05, ln_1, ln_1_mean, ln_1_rstd); /* models/gpt2.lua:10 */
  /* one GEMM over attn.q+k+v.weight: 3 weights side by side in memory */
  k_gemm(GEMM_N, GEMM_T, B*T, (QDIM+KVDIM+KVDIM), C, 1, ln_1, w[L_ATTN_Q_WEIGHT], GEMM_OVERWRITE, attn_q_k_v); /* models/gpt2.lua:10 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 0, attn_q_k_v, attn_q_split); /* models/gpt2.lua:10 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 1, attn_q_k_v, attn_k_split); /* models/gpt2.lua:10 */
  k_split(B*T, 1, 3, (const int64_t[]){QDIM, KVDIM, KVDIM}, 2, attn_q_k_v, attn_v_split); /* models/gpt2.lua:10 */
  ew_bias_add(B*T*QDIM, QDIM, attn_q_split, w[L_ATTN_Q_BIAS], QDIM, attn_q); /* attn_q = (attn_q_split + attn.q.bias) (models/gpt2.lua:10) */
  ew_bias_add(B*T*KVDIM, KVDIM, attn_k_split, w[L_ATTN_K_BIAS], KVDIM, attn_k); /* attn_k = (attn_k_split + attn.k.bias) (models/gpt2.lua:10) */
  ew_bias_add(B*T*KVDIM, KVDIM, attn_v_split, w[L_ATTN_V_BIAS], KVDIM, attn_v); /* attn_v = (attn_v_split + attn.v.bias) (models/gpt2.lua:10) */
  {
    const AttnShape shape = {.B = B, .T = T, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1};
    k_attention_forward(&shape, attn_q, attn_k, attn_v, attn, attn_lse);
  } /* models/gpt2.lua:10 */
  k_gemm(GEMM_N, GEMM_T, B*T, C, QDIM, 1, attn, w[L_ATTN_PROJ_WEIGHT], GEMM_OVERWRITE, attn_proj); /* models/gpt2.lua:10 */
  ew_residual_bias_add(B*T*C, C, x, attn_proj, w[L_ATTN_PROJ_BIAS], C, attn_proj_residual); /* attn_proj_residual = (x + (attn_proj + attn.proj.bias)) (models/gpt2.lua:10) */
  k_layernorm_forward(B*T, C, attn_proj_residual, w[L_LN_2_WEIGHT], w[L_LN_2_BIAS], 1e-05, ln_2, ln_2_mean, ln_2_rstd); /* models/gpt2.lua:11 */
  k_gemm(GEMM_N, GEMM_T, B*T, FFN, C, 1, ln_2, w[L_MLP_FC_WEIGHT], GEMM_OVERWRITE, mlp_fc); /* models/gpt2.lua:11 */
  ew_gelu_bias_add(B*T*FFN, FFN, mlp_fc, w[L_MLP_FC_BIAS], FFN, mlp_fc_gelu); /* mlp_fc_gelu = gelu((mlp_fc + mlp.fc.bias)) (models/gpt2.lua:11) */
  k_gemm(GEMM_N, GEMM_T, B*T, C, FFN, 1, mlp_fc_gelu, w[L_MLP_PROJ_WEIGHT], GEMM_OVERWRITE, mlp_proj); /* models/gpt2.lua:11 */
  ew_residual_bias_add(B*T*C, C, attn_proj_residual, mlp_proj, w[L_MLP_PROJ_BIAS], C, mlp_proj_residual); /* mlp_proj_residual = (attn_proj_residual + (mlp_proj + mlp.proj.bias)) (models/gpt2.lua:11) */
}

/* block backward of one microbatch: 21 calls; saved: 12615680 elements kept for backward; tmp: scratch. */
static void block_backward(Run *r, int layer, const act_t *x, act_t *saved, const act_t *dy, act_t *dx, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  real *const *g = r->layer_g[layer];
  act_t *ln_1 = saved + 0; /* [b, seq, hidden] 1×1024×768 */
  real *ln_1_mean = (real *)(saved + 786432); /* [b, seq] 1×1024 */
  real *ln_1_rstd = (real *)(saved + 788480); /* [b, seq] 1×1024 */
  act_t *attn_q = saved + 790528; /* [b, seq, qdim] 1×1024×768 */
  act_t *attn_k = saved + 1576960; /* [b, seq, kvdim] 1×1024×768 */
  act_t *attn_v = saved + 2363392; /* [b, seq, kvdim] 1×1024×768 */
  act_t *attn = saved + 3149824; /* [b, seq, qdim] 1×1024×768 */
  real *attn_lse = (real *)(saved + 3936256); /* [b, heads, seq] 1×12×1024 */
  act_t *attn_proj_residual = saved + 3960832; /* [b, seq, hidden] 1×1024×768 */
  act_t *ln_2 = saved + 4747264; /* [b, seq, hidden] 1×1024×768 */
  real *ln_2_mean = (real *)(saved + 5533696); /* [b, seq] 1×1024 */
  real *ln_2_rstd = (real *)(saved + 5535744); /* [b, seq] 1×1024 */
  act_t *mlp_fc = saved + 5537792; /* [b, seq, ffn] 1×1024×3072 */
  act_t *mlp_fc_gelu = saved + 8683520; /* [b, seq, ffn] 1×1024×3072 */
  act_t *d_mlp_fc_gelu = tmp + 0; /* [b, seq, ffn] 1×1024×3072 */
  act_t *d_mlp_fc = tmp + 3145728; /* [b, seq, ffn] 1×1024×3072 */
  act_t *d_ln_2 = tmp + 0; /* [b, seq, hidden] 1×1024×768 */
  act_t *d_attn_proj_residual_norm_bwd = tmp + 786432; /* [b, seq, hidden] 1×1024×768 */
  act_t *d_attn_proj_residual = tmp + 0; /* [b, seq, hidden] 1×1024×768 */
  act_t *d_attn = tmp + 786432; /* [b, seq, qdim] 1×1024×768 */
  act_t *d_attn_q = tmp + 1572864; /* [b, seq, qdim] 1×1024×768 */
  act_t *d_attn_k = tmp + 2359296; /* [b, seq, kvdim] 1×1024×768 */
  act_t *d_attn_v = tmp + 3145728; /* [b, seq, kvdim] 1×1024×768 */
  act_t *d_attn_q_k_v = tmp + 3932160; /* [b, seq, qdim+kvdim+kvdim] 1×1024×2304 */
  act_t *d_ln_1 = tmp + 786432; /* [b, seq, hidden] 1×1024×768 */
  act_t *d_x = tmp + 1572864; /* [b, seq, hidden] 1×1024×768 */
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
    const AttnShape shape = {.B = B, .T = T, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1};
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

/* head forward of one microbatch: 3 calls; saved: 52303872 elements kept for backward; tmp: scratch. */
static void head_forward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *tmp) {
  (void)tmp;
  act_t *ln_f = saved + 0; /* [b, seq, hidden] 1×1024×768 */
  real *ln_f_mean = (real *)(saved + 786432); /* [b, seq] 1×1024 */
  real *ln_f_rstd = (real *)(saved + 788480); /* [b, seq] 1×1024 */
  act_t *logits = saved + 790528; /* [b, seq, vocab] 1×1024×50304 */
  real *lse = (real *)(saved + 52301824); /* [b, seq] 1×1024 */
  k_layernorm_forward(B*T, C, x, r->model_w[P_LN_F_WEIGHT], r->model_w[P_LN_F_BIAS], 1e-05, ln_f, ln_f_mean, ln_f_rstd); /* models/gpt2.lua */
  k_gemm(GEMM_N, GEMM_T, B*T, Vp, C, 1, ln_f, r->model_w[P_WTE], GEMM_OVERWRITE, logits); /* models/gpt2.lua */
  rt_xent_forward_grad(r, B*T, Vp, logits, targets, V, XENT_NO_IGNORE, lse); /* models/gpt2.lua */
}

/* head backward of one microbatch: 3 calls; saved: 52303872 elements kept for backward; tmp: scratch. */
static void head_backward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *dx, act_t *tmp) {
  (void)targets;
  act_t *ln_f = saved + 0; /* [b, seq, hidden] 1×1024×768 */
  real *ln_f_mean = (real *)(saved + 786432); /* [b, seq] 1×1024 */
  real *ln_f_rstd = (real *)(saved + 788480); /* [b, seq] 1×1024 */
  act_t *d_logits = saved + 790528; /* [b, seq, vocab] 1×1024×50304 */
  act_t *d_ln_f = tmp + 0; /* [b, seq, hidden] 1×1024×768 */
  /* the cross entropy's gradient: written over the logits by its forward */
  k_gemm(GEMM_N, GEMM_N, B*T, C, Vp, 1, d_logits, r->model_w[P_WTE], GEMM_OVERWRITE, d_ln_f);
  k_gemm_grad(GEMM_T, GEMM_N, Vp, C, B*T, d_logits, ln_f, r->model_g[P_WTE]);
  k_layernorm_backward(B*T, C, x, r->model_w[P_LN_F_WEIGHT], ln_f_mean, ln_f_rstd, d_ln_f, dx, r->model_g[P_LN_F_WEIGHT], r->model_g[P_LN_F_BIAS]);
}

/* Chunk 0, pipeline rank 0: embedding, layers 0-11, head. Its slot (one microbatch in flight) holds 204478464 elements:
 * the embedding's saved activations at 0,
 * each layer's saved activations from 786432,
 * the head's at 152174592,
 * (-1: none). */
static void chunk_0_forward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  embed_forward(r, tokens, slot + 0, r->scratch);
  const act_t *x = slot + 0 + EMBED_OUTPUT;
  for (int i = 0; i < 12; i++) {
    act_t *saved = slot + 786432 + (int64_t)i * BLOCK_SAVED;
    block_forward(r, 0 + i, x, saved, r->scratch);
    x = saved + BLOCK_OUTPUT;
  }
  head_forward(r, x, targets, slot + 152174592, r->scratch);
}

static void chunk_0_backward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  const act_t *input = slot + 0 + EMBED_OUTPUT;
  const act_t *x = slot + 786432 + (int64_t)11 * BLOCK_SAVED + BLOCK_OUTPUT;
  head_backward(r, x, targets, slot + 152174592, r->grad_a, r->scratch);
  const act_t *dy = r->grad_a;
  for (int i = 11; i >= 0; i--) {
    act_t *saved = slot + 786432 + (int64_t)i * BLOCK_SAVED;
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
  {"wte", 2, {50304, 768}, {50257, 768}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 1, 1, 0, 1, 0},
  {"wpe", 2, {1024, 768}, {1024, 768}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 0, 1, 1, 1, 0},
  {"ln_f.weight", 1, {768}, {768}, -1, INIT_ONE, 0.02, 0, 0, 0, 1, 1, 2, 1, 0},
  {"ln_f.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 1, 1, 3, 1, 0},
};

static const ParamSpec block_params[] = {
  /* name, axes, shape, shape without padding, TP split axis, init, std, decay, TP-summed gradient,
     read by the embedding, read by the head, trained, place in memory, TP ranks sharing a piece,
     experts spread over ep ranks */
  {"ln_1.weight", 1, {768}, {768}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 0, 1, 0},
  {"ln_1.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 1, 1, 0},
  {"attn.q.weight", 2, {768, 768}, {768, 768}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 2, 1, 0},
  {"attn.q.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 5, 1, 0},
  {"attn.k.weight", 2, {768, 768}, {768, 768}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 3, 1, 0},
  {"attn.k.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 6, 1, 0},
  {"attn.v.weight", 2, {768, 768}, {768, 768}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 4, 1, 0},
  {"attn.v.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 7, 1, 0},
  {"attn.proj.weight", 2, {768, 768}, {768, 768}, -1, INIT_NORMAL_DIST, 0.0040824829, 1, 0, 0, 0, 1, 8, 1, 0},
  {"attn.proj.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 9, 1, 0},
  {"ln_2.weight", 1, {768}, {768}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 10, 1, 0},
  {"ln_2.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 11, 1, 0},
  {"mlp.fc.weight", 2, {3072, 768}, {3072, 768}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 12, 1, 0},
  {"mlp.fc.bias", 1, {3072}, {3072}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 13, 1, 0},
  {"mlp.proj.weight", 2, {768, 3072}, {768, 3072}, -1, INIT_NORMAL_DIST, 0.0040824829, 1, 0, 0, 0, 1, 14, 1, 0},
  {"mlp.proj.bias", 1, {768}, {768}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 15, 1, 0},
};

static const ChunkSpec chunks[] = {
  /* first layer, layers, embed, head, slot elements, input, output, gradient received, gradient sent,
     elements of fused elementwise kernels forward and backward, functions */
  {0, 12, 1, 1, 204478464, -1, -1, -1, -1, 191102976, 169869312, chunk_0_forward, chunk_0_backward},
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
static const RankFootprint footprints[] = {{124475904, 212342784}};

/* The model's configuration (models/gpt2.lua after --set), which checkpoints record. */
static const ConfigItem config[] = {
  {"dropout", "0.0"},
  {"ffn", "3072"},
  {"heads", "12"},
  {"hidden", "768"},
  {"layers", "12"},
  {"seq", "1024"},
  {"vocab", "50257"},
};

const Program plait_program = {
  .name = "gpt2", .source = "models/gpt2.lua",
  .tp = 1, .pp = 1, .vpp = 1, .dp = 1, .mbs = 1, .gbs = 1, .microbatches = 1,
  .seq = 1024, .hidden = 768, .layers = 12,
  .vocab = 50257, .vocab_padded = 50304,
  .recompute = 0, .sequence_parallel = 0, .grad_reduce_after = 0, .masked_lm = 0,
  .config = config, .nconfig = 7,
  .model_params = model_params, .nmodel_params = 4,
  .block_params = block_params, .nblock_params = 16,
  .chunks = chunks, .nchunks = 1,
  .actions = actions, .nactions = nactions, .slots = slots, .footprints = footprints,
  .scratch_elems = 6291456, .recompute_elems = 0, .io_elems = IO_ELEMS,
  .logits_offset = 152965120, .logits_cols = 50304,
  .flops_per_iteration = 875166695424,
};
