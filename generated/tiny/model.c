/* model.c: tiny (models/tiny.lua) compiled by plait for tp 1 × pp 1 × dp 1, vpp 1, microbatch 8, global batch 8
 * (1 microbatches per pipeline), schedule 1f1b, recompute none, sequence parallel off, gradients reduced
 * during the backward. Generated: rebuild with plait build rather than editing. Sizes are one tensor-parallel
 * rank's. */
#include "device.h"
#include "kernels.h"
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

/* Activations of one microbatch, in elements: what each stage keeps for its backward pass, and where
 * its output (the next stage's input) sits in that (64-bit: a large vocabulary's logits pass 2^31). */
#define EMBED_SAVED INT64_C(65536)
#define EMBED_OUTPUT INT64_C(0)
#define BLOCK_SAVED INT64_C(1056768)
#define BLOCK_OUTPUT INT64_C(991232)
#define HEAD_SAVED INT64_C(199680)
#define IO_ELEMS INT64_C(65536) /* the activation passed between layers and chunks */

/* embed forward of one microbatch: 2 calls; saved: 65536 elements kept for backward; tmp: scratch. */
static void embed_forward(Run *r, const int32_t *tokens, act_t *saved, act_t *tmp) {
  act_t *t0 = tmp + 0; /* [b, seq, hidden] 8×64×128 */
  act_t *t1 = saved + 0; /* [b, seq, hidden] 8×64×128 */
  rt_embedding_forward(r, 512, 128, tokens, r->model_w[P_WTE], 256, 0, t0); /* models/tiny.lua */
  ew_0(65536, 8192, t0, r->model_w[P_WPE], 8192, t1); /* models/tiny.lua */
}

/* embed backward of one microbatch: 2 calls; saved: 65536 elements kept for backward; tmp: scratch. */
static void embed_backward(Run *r, const int32_t *tokens, act_t *saved, const act_t *dy, act_t *tmp) {
  (void)saved;
  (void)tmp;
  k_sum_rows(8, 8192, dy, r->model_g[P_WPE]);
  rt_embedding_backward(r, 512, 128, tokens, dy, 256, 0, r->model_g[P_WTE]);
}

/* block forward of one microbatch: 16 calls; saved: 1056768 elements kept for backward; tmp: scratch. */
static void block_forward(Run *r, int layer, const act_t *x, act_t *saved, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  act_t *t0 = saved + 0; /* [b, seq, hidden] 8×64×128 */
  real *t1 = (real *)(saved + 65536); /* [b, seq] 8×64 */
  real *t2 = (real *)(saved + 66560); /* [b, seq] 8×64 */
  act_t *t3 = tmp + 196608; /* [b, seq, qdim] 8×64×128 */
  act_t *t4 = saved + 67584; /* [b, seq, qdim] 8×64×128 */
  act_t *t5 = tmp + 262144; /* [b, seq, kvdim] 8×64×128 */
  act_t *t6 = saved + 133120; /* [b, seq, kvdim] 8×64×128 */
  act_t *t7 = tmp + 327680; /* [b, seq, kvdim] 8×64×128 */
  act_t *t8 = saved + 198656; /* [b, seq, kvdim] 8×64×128 */
  act_t *t9 = saved + 264192; /* [b, seq, qdim] 8×64×128 */
  real *t10 = (real *)(saved + 329728); /* [b, heads, seq] 8×4×64 */
  act_t *t11 = tmp + 0; /* [b, seq, hidden] 8×64×128 */
  act_t *t13 = saved + 333824; /* [b, seq, hidden] 8×64×128 */
  act_t *t14 = saved + 399360; /* [b, seq, hidden] 8×64×128 */
  real *t15 = (real *)(saved + 464896); /* [b, seq] 8×64 */
  real *t16 = (real *)(saved + 465920); /* [b, seq] 8×64 */
  act_t *t17 = saved + 466944; /* [b, seq, ffn] 8×64×512 */
  act_t *t19 = saved + 729088; /* [b, seq, ffn] 8×64×512 */
  act_t *t20 = tmp + 0; /* [b, seq, hidden] 8×64×128 */
  act_t *t22 = saved + 991232; /* [b, seq, hidden] 8×64×128 */
  act_t *attn_q_k_v = tmp + 0; /* [b, seq, qdim+kvdim+kvdim] 8×64×384 */
  k_layernorm_forward(512, 128, x, w[L_LN_1_WEIGHT], w[L_LN_1_BIAS], 1e-05, t0, t1, t2); /* models/tiny.lua:10 */
  /* one GEMM over attn.q+k+v.weight: 3 weights side by side in memory */
  k_gemm(0, 1, 512, 384, 128, 1, t0, w[L_ATTN_Q_WEIGHT], 0, attn_q_k_v); /* models/tiny.lua:10 */
  k_split(512, 1, 3, (const int64_t[]){128, 128, 128}, 0, attn_q_k_v, t3); /* models/tiny.lua:10 */
  k_split(512, 1, 3, (const int64_t[]){128, 128, 128}, 1, attn_q_k_v, t5); /* models/tiny.lua:10 */
  k_split(512, 1, 3, (const int64_t[]){128, 128, 128}, 2, attn_q_k_v, t7); /* models/tiny.lua:10 */
  ew_0(65536, 128, t3, w[L_ATTN_Q_BIAS], 128, t4); /* models/tiny.lua:10 */
  ew_0(65536, 128, t5, w[L_ATTN_K_BIAS], 128, t6); /* models/tiny.lua:10 */
  ew_0(65536, 128, t7, w[L_ATTN_V_BIAS], 128, t8); /* models/tiny.lua:10 */
  {
    const AttnShape shape = {.B = 8, .T = 64, .Hq = 4, .Hkv = 4, .D = 32, .causal = 1};
    k_attention_forward(&shape, t4, t6, t8, t9, t10);
  } /* models/tiny.lua:10 */
  k_gemm(0, 1, 512, 128, 128, 1, t9, w[L_ATTN_PROJ_WEIGHT], 0, t11); /* models/tiny.lua:10 */
  ew_1(65536, 128, x, t11, w[L_ATTN_PROJ_BIAS], 128, t13); /* models/tiny.lua:10 */
  k_layernorm_forward(512, 128, t13, w[L_LN_2_WEIGHT], w[L_LN_2_BIAS], 1e-05, t14, t15, t16); /* models/tiny.lua:11 */
  k_gemm(0, 1, 512, 512, 128, 1, t14, w[L_MLP_FC_WEIGHT], 0, t17); /* models/tiny.lua:11 */
  ew_2(262144, 512, t17, w[L_MLP_FC_BIAS], 512, t19); /* models/tiny.lua:11 */
  k_gemm(0, 1, 512, 128, 512, 1, t19, w[L_MLP_PROJ_WEIGHT], 0, t20); /* models/tiny.lua:11 */
  ew_1(65536, 128, t13, t20, w[L_MLP_PROJ_BIAS], 128, t22); /* models/tiny.lua:11 */
}

/* block backward of one microbatch: 21 calls; saved: 1056768 elements kept for backward; tmp: scratch. */
static void block_backward(Run *r, int layer, const act_t *x, act_t *saved, const act_t *dy, act_t *dx, act_t *tmp) {
  act_t *const *w = r->layer_w[layer];
  real *const *g = r->layer_g[layer];
  act_t *t0 = saved + 0; /* [b, seq, hidden] 8×64×128 */
  real *t1 = (real *)(saved + 65536); /* [b, seq] 8×64 */
  real *t2 = (real *)(saved + 66560); /* [b, seq] 8×64 */
  act_t *t4 = saved + 67584; /* [b, seq, qdim] 8×64×128 */
  act_t *t6 = saved + 133120; /* [b, seq, kvdim] 8×64×128 */
  act_t *t8 = saved + 198656; /* [b, seq, kvdim] 8×64×128 */
  act_t *t9 = saved + 264192; /* [b, seq, qdim] 8×64×128 */
  real *t10 = (real *)(saved + 329728); /* [b, heads, seq] 8×4×64 */
  act_t *t13 = saved + 333824; /* [b, seq, hidden] 8×64×128 */
  act_t *t14 = saved + 399360; /* [b, seq, hidden] 8×64×128 */
  real *t15 = (real *)(saved + 464896); /* [b, seq] 8×64 */
  real *t16 = (real *)(saved + 465920); /* [b, seq] 8×64 */
  act_t *t17 = saved + 466944; /* [b, seq, ffn] 8×64×512 */
  act_t *t19 = saved + 729088; /* [b, seq, ffn] 8×64×512 */
  act_t *dt19 = tmp + 0; /* [b, seq, ffn] 8×64×512 */
  act_t *dt19_46 = tmp + 262144; /* [b, seq, ffn] 8×64×512 */
  act_t *dt14 = tmp + 0; /* [b, seq, hidden] 8×64×128 */
  act_t *dt13 = tmp + 65536; /* [b, seq, hidden] 8×64×128 */
  act_t *dt13_53 = tmp + 0; /* [b, seq, hidden] 8×64×128 */
  act_t *dt9 = tmp + 65536; /* [b, seq, qdim] 8×64×128 */
  act_t *dt4 = tmp + 131072; /* [b, seq, qdim] 8×64×128 */
  act_t *dt6 = tmp + 196608; /* [b, seq, kvdim] 8×64×128 */
  act_t *dt8 = tmp + 262144; /* [b, seq, kvdim] 8×64×128 */
  act_t *dattn_q_k_v = tmp + 327680; /* [b, seq, qdim+kvdim+kvdim] 8×64×384 */
  act_t *dt0 = tmp + 65536; /* [b, seq, hidden] 8×64×128 */
  act_t *dx_66 = tmp + 131072; /* [b, seq, hidden] 8×64×128 */
  k_sum_rows(512, 128, dy, g[L_MLP_PROJ_BIAS]);
  k_gemm(0, 0, 512, 512, 128, 1, dy, w[L_MLP_PROJ_WEIGHT], 0, dt19);
  k_gemm_grad(1, 0, 128, 512, 512, dy, t19, g[L_MLP_PROJ_WEIGHT]);
  ew_3(262144, 512, dt19, t17, w[L_MLP_FC_BIAS], 512, dt19_46);
  k_sum_rows(512, 512, dt19_46, g[L_MLP_FC_BIAS]);
  k_gemm(0, 0, 512, 128, 512, 1, dt19_46, w[L_MLP_FC_WEIGHT], 0, dt14);
  k_gemm_grad(1, 0, 512, 128, 512, dt19_46, t14, g[L_MLP_FC_WEIGHT]);
  k_layernorm_backward(512, 128, t13, w[L_LN_2_WEIGHT], t15, t16, dt14, dt13, g[L_LN_2_WEIGHT], g[L_LN_2_BIAS]);
  ew_4(65536, 65536, dy, dt13, dt13_53);
  k_sum_rows(512, 128, dt13_53, g[L_ATTN_PROJ_BIAS]);
  k_gemm(0, 0, 512, 128, 128, 1, dt13_53, w[L_ATTN_PROJ_WEIGHT], 0, dt9);
  k_gemm_grad(1, 0, 128, 128, 512, dt13_53, t9, g[L_ATTN_PROJ_WEIGHT]);
  {
    const AttnShape shape = {.B = 8, .T = 64, .Hq = 4, .Hkv = 4, .D = 32, .causal = 1};
    k_attention_backward(&shape, t4, t6, t8, t9, t10, dt9, dt4, dt6, dt8);
  }
  k_sum_rows(512, 128, dt8, g[L_ATTN_V_BIAS]);
  k_sum_rows(512, 128, dt6, g[L_ATTN_K_BIAS]);
  k_sum_rows(512, 128, dt4, g[L_ATTN_Q_BIAS]);
  k_concat(512, 1, 3, (const int64_t[]){128, 128, 128}, (const act_t *[]){dt4, dt6, dt8}, dattn_q_k_v);
  /* the input's gradient through attn.q+k+v.weight in one GEMM (3 products summed) */
  k_gemm(0, 0, 512, 128, 384, 1, dattn_q_k_v, w[L_ATTN_Q_WEIGHT], 0, dt0);
  /* dattn.q+k+v.weight: the gradients of 3 weights side by side, in one GEMM */
  k_gemm_grad(1, 0, 384, 128, 512, dattn_q_k_v, t0, g[L_ATTN_Q_WEIGHT]);
  k_layernorm_backward(512, 128, x, w[L_LN_1_WEIGHT], t1, t2, dt0, dx_66, g[L_LN_1_WEIGHT], g[L_LN_1_BIAS]);
  ew_4(65536, 65536, dt13_53, dx_66, dx);
}

/* head forward of one microbatch: 3 calls; saved: 199680 elements kept for backward; tmp: scratch. */
static void head_forward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *tmp) {
  (void)tmp;
  act_t *t0 = saved + 0; /* [b, seq, hidden] 8×64×128 */
  real *t1 = (real *)(saved + 65536); /* [b, seq] 8×64 */
  real *t2 = (real *)(saved + 66560); /* [b, seq] 8×64 */
  act_t *t3 = saved + 67584; /* [b, seq, vocab] 8×64×256 */
  real *t5 = (real *)(saved + 198656); /* [b, seq] 8×64 */
  k_layernorm_forward(512, 128, x, r->model_w[P_LN_F_WEIGHT], r->model_w[P_LN_F_BIAS], 1e-05, t0, t1, t2); /* models/tiny.lua */
  k_gemm(0, 1, 512, 256, 128, 1, t0, r->model_w[P_WTE], 0, t3); /* models/tiny.lua */
  rt_xent_forward_grad(r, 512, 256, t3, targets, 256, XENT_NO_IGNORE, t5); /* models/tiny.lua */
}

/* head backward of one microbatch: 3 calls; saved: 199680 elements kept for backward; tmp: scratch. */
static void head_backward(Run *r, const act_t *x, const int32_t *targets, act_t *saved, act_t *dx, act_t *tmp) {
  (void)targets;
  act_t *t0 = saved + 0; /* [b, seq, hidden] 8×64×128 */
  real *t1 = (real *)(saved + 65536); /* [b, seq] 8×64 */
  real *t2 = (real *)(saved + 66560); /* [b, seq] 8×64 */
  act_t *dt3 = saved + 67584; /* [b, seq, vocab] 8×64×256 */
  act_t *dt0 = tmp + 0; /* [b, seq, hidden] 8×64×128 */
  /* the cross entropy's gradient: written over the logits by its forward */
  k_gemm(0, 0, 512, 128, 256, 1, dt3, r->model_w[P_WTE], 0, dt0);
  k_gemm_grad(1, 0, 256, 128, 512, dt3, t0, r->model_g[P_WTE]);
  k_layernorm_backward(512, 128, x, r->model_w[P_LN_F_WEIGHT], t1, t2, dt0, dx, r->model_g[P_LN_F_WEIGHT], r->model_g[P_LN_F_BIAS]);
}

/* Chunk 0, pipeline rank 0: embedding, layers 0-3, head. Its slot (one microbatch in flight) holds 4492288 elements:
 * the embedding's saved activations at 0,
 * each layer's saved activations from 65536,
 * the head's at 4292608,
 * (-1: none). */
static void chunk_0_forward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  embed_forward(r, tokens, slot + 0, r->scratch);
  const act_t *x = slot + 0 + EMBED_OUTPUT;
  for (int i = 0; i < 4; i++) {
    act_t *saved = slot + 65536 + (int64_t)i * BLOCK_SAVED;
    block_forward(r, 0 + i, x, saved, r->scratch);
    x = saved + BLOCK_OUTPUT;
  }
  head_forward(r, x, targets, slot + 4292608, r->scratch);
}

static void chunk_0_backward(Run *r, act_t *slot, const int32_t *tokens, const int32_t *targets) {
  (void)tokens, (void)targets;
  const act_t *input = slot + 0 + EMBED_OUTPUT;
  const act_t *x = slot + 65536 + (int64_t)3 * BLOCK_SAVED + BLOCK_OUTPUT;
  head_backward(r, x, targets, slot + 4292608, r->grad_a, r->scratch);
  const act_t *dy = r->grad_a;
  for (int i = 3; i >= 0; i--) {
    act_t *saved = slot + 65536 + (int64_t)i * BLOCK_SAVED;
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
     read by the embedding, read by the head, trained, place in memory */
  {"wte", 2, {256, 128}, {256, 128}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 1, 1, 0},
  {"wpe", 2, {64, 128}, {64, 128}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 1, 0, 1, 1},
  {"ln_f.weight", 1, {128}, {128}, -1, INIT_ONE, 0.02, 0, 0, 0, 1, 1, 2},
  {"ln_f.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 1, 1, 3},
};

static const ParamSpec block_params[] = {
  /* name, axes, shape, shape without padding, TP split axis, init, std, decay, TP-summed gradient,
     read by the embedding, read by the head, trained, place in memory */
  {"ln_1.weight", 1, {128}, {128}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 0},
  {"ln_1.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 1},
  {"attn.q.weight", 2, {128, 128}, {128, 128}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 2},
  {"attn.q.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 5},
  {"attn.k.weight", 2, {128, 128}, {128, 128}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 3},
  {"attn.k.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 6},
  {"attn.v.weight", 2, {128, 128}, {128, 128}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 4},
  {"attn.v.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 7},
  {"attn.proj.weight", 2, {128, 128}, {128, 128}, -1, INIT_NORMAL_DIST, 0.00707106781, 1, 0, 0, 0, 1, 8},
  {"attn.proj.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 9},
  {"ln_2.weight", 1, {128}, {128}, -1, INIT_ONE, 0.02, 0, 0, 0, 0, 1, 10},
  {"ln_2.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 11},
  {"mlp.fc.weight", 2, {512, 128}, {512, 128}, -1, INIT_NORMAL_DIST, 0.02, 1, 0, 0, 0, 1, 12},
  {"mlp.fc.bias", 1, {512}, {512}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 13},
  {"mlp.proj.weight", 2, {128, 512}, {128, 512}, -1, INIT_NORMAL_DIST, 0.00707106781, 1, 0, 0, 0, 1, 14},
  {"mlp.proj.bias", 1, {128}, {128}, -1, INIT_ZERO, 0.02, 0, 0, 0, 0, 1, 15},
};

static const ChunkSpec chunks[] = {
  /* first layer, layers, embed, head, slot elements, input, output, gradient received, gradient sent,
     elements of fused elementwise kernels forward and backward, functions */
  {0, 4, 1, 1, 4492288, -1, -1, -1, -1, 5373952, 4718592, chunk_0_forward, chunk_0_backward},
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
static const RankFootprint footprints[] = {{834304, 5147648}};

/* The model's configuration (models/tiny.lua after --set), which checkpoints record. */
static const ConfigItem config[] = {
  {"dropout", "0.0"},
  {"ffn", "512"},
  {"heads", "4"},
  {"hidden", "128"},
  {"layers", "4"},
  {"seq", "64"},
  {"vocab", "256"},
};

const Program plait_program = {
  .name = "tiny", .source = "models/tiny.lua",
  .tp = 1, .pp = 1, .vpp = 1, .dp = 1, .mbs = 8, .gbs = 8, .microbatches = 1,
  .seq = 64, .hidden = 128, .layers = 4,
  .vocab = 256, .vocab_padded = 256,
  .recompute = 0, .sequence_parallel = 0, .grad_reduce_after = 0, .masked_lm = 0,
  .config = config, .nconfig = 7,
  .model_params = model_params, .nmodel_params = 4,
  .block_params = block_params, .nblock_params = 16,
  .chunks = chunks, .nchunks = 1,
  .actions = actions, .nactions = nactions, .slots = slots, .footprints = footprints,
  .scratch_elems = 524288, .recompute_elems = 0, .io_elems = IO_ELEMS,
  .logits_offset = 4360192, .logits_cols = 256,
  .flops_per_iteration = 2717908992,
};
