/* cudnn_sdpa.c: the operation graphs of cuDNN's fused attention, built descriptor by descriptor through
 * its backend API as cuDNN's own frontend builds them for cuDNN before 9.21 (whose native attention
 * operations have no causal mask), their execution plans, and running a plan over plait's buffers. */
#include "cudnn_sdpa.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ---- descriptors ----------------------------------------------------------------------------------- */

static int failed(const SdpaGraph *g) { return g->failed[0] != 0; }

/* cuDNN's status of `step` and its last message, as "step: STATUS (message)". */
static void describe_failure(const Cudnn *lib, cudnnStatus_t status, const char *step, char *out, size_t size) {
  char message[200] = "";
  lib->last_error(message, sizeof message);
  snprintf(out, size, "%s: %s%s%s%s", step, lib->error_string(status), *message ? " (" : "", message,
           *message ? ")" : "");
}

static void check(SdpaGraph *g, cudnnStatus_t status, const char *step) {
  if (status != CUDNN_STATUS_SUCCESS && !failed(g)) describe_failure(g->lib, status, step, g->failed, sizeof g->failed);
}

static cudnnBackendDescriptor_t create(SdpaGraph *g, cudnnBackendDescriptorType_t type, const char *step) {
  cudnnBackendDescriptor_t d = NULL;
  if (failed(g)) return NULL;
  if (g->owned_count == SDPA_MAX_DESCRIPTORS) {
    snprintf(g->failed, sizeof g->failed, "%s: more than %d descriptors", step, SDPA_MAX_DESCRIPTORS);
    return NULL;
  }
  check(g, g->lib->create_descriptor(type, &d), step);
  if (d) g->owned[g->owned_count++] = d;
  return failed(g) ? NULL : d;
}

static void set(SdpaGraph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *values, const char *step) {
  if (!failed(g)) check(g, g->lib->set_attribute(d, name, type, count, values), step);
}

static void set_descriptor(SdpaGraph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                           cudnnBackendDescriptor_t value, const char *step) {
  set(g, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, step);
}

static void finalize(SdpaGraph *g, cudnnBackendDescriptor_t d, const char *step) {
  if (!failed(g)) check(g, g->lib->finalize(d), step);
}

static void add_operation(SdpaGraph *g, cudnnBackendDescriptor_t op, const char *step) {
  if (failed(g)) return;
  if (g->op_count == SDPA_MAX_OPS) snprintf(g->failed, sizeof g->failed, "%s: more than %d operations", step,
                                            SDPA_MAX_OPS);
  else g->ops[g->op_count++] = op;
}

/* ---- tensors ----------------------------------------------------------------------------------------- */

typedef struct {
  int64_t dim[4], stride[4];
} Shape4;

/* [b, h, rows, cols] laid out densely. */
static Shape4 dense(int64_t b, int64_t h, int64_t rows, int64_t cols) {
  return (Shape4){{b, h, rows, cols}, {h * rows * cols, rows * cols, cols, 1}};
}

/* plait's [B, T, ·] rows read as [B, heads, T, D]: position t of head h at t·row + h·D. */
static Shape4 by_rows(const SdpaShape *s, int heads, int64_t row) {
  return (Shape4){{s->B, heads, s->T, s->D}, {s->T * row, s->D, row, 1}};
}

/* The same elements with the last two dims swapped: an operand read transposed, in place. */
static Shape4 transposed(Shape4 x) {
  return (Shape4){{x.dim[0], x.dim[1], x.dim[3], x.dim[2]}, {x.stride[0], x.stride[1], x.stride[3], x.stride[2]}};
}

enum { VIRTUAL = 1, BY_VALUE = 2 };

static cudnnBackendDescriptor_t tensor(SdpaGraph *g, int64_t uid, cudnnDataType_t type, Shape4 shape, int kind,
                                       const char *name) {
  cudnnBackendDescriptor_t t = create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, name);
  int64_t alignment = 16;
  bool is_virtual = kind & VIRTUAL, by_value = kind & BY_VALUE;
  set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, name);
  set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, shape.dim, name);
  set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, shape.stride, name);
  set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, name);
  set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, name);
  if (is_virtual) set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, name);
  if (by_value) set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, name);
  finalize(g, t, name);
  return t;
}

/* An intermediate that lives only inside the fused kernel. */
static cudnnBackendDescriptor_t temporary(SdpaGraph *g, cudnnDataType_t type, Shape4 shape, const char *name) {
  return tensor(g, g->next_uid++, type, shape, VIRTUAL, name);
}

/* An fp32 number the call passes by value (a pointer to a host float in the variant pack). */
static cudnnBackendDescriptor_t scalar(SdpaGraph *g, int64_t uid, const char *name) {
  return tensor(g, uid, CUDNN_DATA_FLOAT, dense(1, 1, 1, 1), BY_VALUE, name);
}

/* ---- operations -------------------------------------------------------------------------------------- */

/* y = mode(x[, b][, t]) computed in `precision`; axis ≥ 0 is the pointwise descriptor's axis. */
static void pointwise(SdpaGraph *g, const char *name, cudnnPointwiseMode_t mode, cudnnDataType_t precision,
                      int64_t axis, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                      cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t pw = create(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name);
  set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, name);
  set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision, name);
  if (axis >= 0) set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, name);
  finalize(g, pw, name);
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, name);
  if (b) set_descriptor(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, name);
  if (t) set_descriptor(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, name);
  finalize(g, op, name);
  add_operation(g, op, name);
}

static void unary(SdpaGraph *g, const char *name, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                  cudnnBackendDescriptor_t y) {
  pointwise(g, name, mode, CUDNN_DATA_FLOAT, -1, x, NULL, NULL, y);
}

static void binary(SdpaGraph *g, const char *name, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
  pointwise(g, name, mode, CUDNN_DATA_FLOAT, -1, x, b, NULL, y);
}

/* C = A·B in fp32 over the leading (batch, head) dims; a B with fewer heads is shared by A's groups. */
static void matmul(SdpaGraph *g, const char *name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                   cudnnBackendDescriptor_t c) {
  cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t mm = create(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, name);
  set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32, name);
  finalize(g, mm, name);
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, name);
  finalize(g, op, name);
  add_operation(g, op, name);
}

/* y = x reduced by `how` over the dims where y has 1. */
static void reduction(SdpaGraph *g, const char *name, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                      cudnnBackendDescriptor_t y) {
  cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t rd = create(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name);
  set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32, name);
  set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, name);
  finalize(g, rd, name);
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd, name);
  finalize(g, op, name);
  add_operation(g, op, name);
}

/* y: the elements of x in y's layout (a transpose, or another data type). */
static void reshape(SdpaGraph *g, const char *name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x, name);
  set_descriptor(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y, name);
  finalize(g, op, name);
  add_operation(g, op, name);
}

/* ---- the pieces of attention ----------------------------------------------------------------------- */

static Shape4 scores_shape(const SdpaShape *s) { return dense(s->B, s->Hq, s->T, s->T); }
static Shape4 row_stats_shape(const SdpaShape *s) { return dense(s->B, s->Hq, s->T, 1); }

/* x where the query (row) sees the key (column), the fill elsewhere. Without a window: row ≥ column;
 * with one: column + window > row. */
static cudnnBackendDescriptor_t band(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t fill, cudnnBackendDescriptor_t window) {
  Shape4 scores = scores_shape(s);
  cudnnBackendDescriptor_t row = temporary(g, CUDNN_DATA_INT32, scores, "the row index");
  cudnnBackendDescriptor_t col = temporary(g, CUDNN_DATA_INT32, scores, "the column index");
  cudnnBackendDescriptor_t sees = temporary(g, CUDNN_DATA_BOOLEAN, scores, "the mask");
  cudnnBackendDescriptor_t y = temporary(g, CUDNN_DATA_FLOAT, scores, "the masked scores");
  pointwise(g, "the row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, x, NULL, NULL, row);
  pointwise(g, "the column index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, x, NULL, NULL, col);
  if (!window) {
    pointwise(g, "the causal mask", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, sees);
  } else {
    cudnnBackendDescriptor_t reach = temporary(g, CUDNN_DATA_FLOAT, scores, "column + window");
    pointwise(g, "column + window", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, 3, col, window, NULL, reach);
    pointwise(g, "the window's mask", CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, -1, reach, row, NULL, sees);
  }
  pointwise(g, "the masked scores", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, fill, sees, y);
  return y;
}

/* The scores masked causally and by the window, if any. */
static cudnnBackendDescriptor_t masked(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t x) {
  if (!s->causal) return x;
  cudnnBackendDescriptor_t fill = scalar(g, SDPA_MASKED, "the masked scores' value");
  x = band(g, s, x, fill, NULL);
  if (s->window > 0) x = band(g, s, x, fill, scalar(g, SDPA_WINDOW, "the window"));
  return x;
}

/* S = q·kᵀ·scale, masked. */
static cudnnBackendDescriptor_t scaled_scores(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t q,
                                              cudnnBackendDescriptor_t kt, cudnnBackendDescriptor_t scale) {
  cudnnBackendDescriptor_t raw = temporary(g, CUDNN_DATA_FLOAT, scores_shape(s), "q·kᵀ");
  cudnnBackendDescriptor_t scaled = temporary(g, CUDNN_DATA_FLOAT, scores_shape(s), "the scaled scores");
  matmul(g, "q·kᵀ", q, kt, raw);
  binary(g, "the scaled scores", CUDNN_POINTWISE_MUL, raw, scale, scaled);
  return scaled;
}

/* P = softmax(S) by rows, in bf16 for P·V; lse = max + log Σ exp(S − max). */
static cudnnBackendDescriptor_t softmax(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t scores,
                                        cudnnBackendDescriptor_t lse) {
  Shape4 all = scores_shape(s), rows = row_stats_shape(s);
  cudnnBackendDescriptor_t max = temporary(g, CUDNN_DATA_FLOAT, rows, "the rows' max");
  cudnnBackendDescriptor_t shifted = temporary(g, CUDNN_DATA_FLOAT, all, "S − max");
  cudnnBackendDescriptor_t exps = temporary(g, CUDNN_DATA_FLOAT, all, "exp(S − max)");
  cudnnBackendDescriptor_t sum = temporary(g, CUDNN_DATA_FLOAT, rows, "the rows' sum");
  cudnnBackendDescriptor_t log_sum = temporary(g, CUDNN_DATA_FLOAT, rows, "log of the sum");
  cudnnBackendDescriptor_t p = temporary(g, CUDNN_DATA_BFLOAT16, all, "the probabilities");
  reduction(g, "the rows' max", CUDNN_REDUCE_TENSOR_MAX, scores, max);
  binary(g, "S − max", CUDNN_POINTWISE_SUB, scores, max, shifted);
  unary(g, "exp(S − max)", CUDNN_POINTWISE_EXP, shifted, exps);
  reduction(g, "the rows' sum", CUDNN_REDUCE_TENSOR_ADD, exps, sum);
  unary(g, "log of the sum", CUDNN_POINTWISE_LOG, sum, log_sum);
  binary(g, "the log-sum-exp", CUDNN_POINTWISE_ADD, max, log_sum, lse);
  binary(g, "the probabilities", CUDNN_POINTWISE_DIV, exps, sum, p);
  return p;
}

static void forward(SdpaGraph *g, const SdpaShape *s) {
  cudnnBackendDescriptor_t q = tensor(g, SDPA_Q, CUDNN_DATA_BFLOAT16, by_rows(s, s->Hq, s->q_row), 0, "q");
  cudnnBackendDescriptor_t kt =
      tensor(g, SDPA_K, CUDNN_DATA_BFLOAT16, transposed(by_rows(s, s->Hkv, s->kv_row)), 0, "kᵀ");
  cudnnBackendDescriptor_t v = tensor(g, SDPA_V, CUDNN_DATA_BFLOAT16, by_rows(s, s->Hkv, s->kv_row), 0, "v");
  cudnnBackendDescriptor_t out =
      tensor(g, SDPA_O, CUDNN_DATA_BFLOAT16, by_rows(s, s->Hq, (int64_t)s->Hq * s->D), 0, "out");
  cudnnBackendDescriptor_t lse = tensor(g, SDPA_STATS, CUDNN_DATA_FLOAT, row_stats_shape(s), 0, "lse");
  cudnnBackendDescriptor_t scale = scalar(g, SDPA_SCALE, "the scale");
  cudnnBackendDescriptor_t p = softmax(g, s, masked(g, s, scaled_scores(g, s, q, kt, scale)), lse);
  matmul(g, "P·v", p, v, out);
}

/* out = a·b summed over the query heads that share a kv head (dK, dV of grouped-query attention). */
static void kv_head_product(SdpaGraph *g, const SdpaShape *s, const char *name, cudnnBackendDescriptor_t a,
                            cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out) {
  if (s->Hq == s->Hkv) {
    matmul(g, name, a, b, out);
    return;
  }
  cudnnBackendDescriptor_t every_head =
      temporary(g, CUDNN_DATA_BFLOAT16, dense(s->B, s->Hq, s->T, s->D), name);
  matmul(g, name, a, b, every_head);
  reduction(g, name, CUDNN_REDUCE_TENSOR_ADD, every_head, out);
}

/* Σ_e dO·O per row (the softmax's backward term), into the caller's fp32 scratch. */
static cudnnBackendDescriptor_t output_dot(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t dout,
                                          cudnnBackendDescriptor_t out) {
  int64_t T = s->T, D = s->D, H = s->Hq;
  Shape4 products = {{s->B, H, T, D}, {H * T * D, T * D, H * D, 1}};
  cudnnBackendDescriptor_t prod = temporary(g, CUDNN_DATA_FLOAT, products, "dO·O");
  cudnnBackendDescriptor_t rows = temporary(g, CUDNN_DATA_FLOAT, row_stats_shape(s), "Σ dO·O");
  cudnnBackendDescriptor_t sum = tensor(g, SDPA_SOFTMAX_SUM, CUDNN_DATA_FLOAT, row_stats_shape(s), 0, "Σ dO·O");
  binary(g, "dO·O", CUDNN_POINTWISE_MUL, dout, out, prod);
  reduction(g, "Σ dO·O", CUDNN_REDUCE_TENSOR_ADD, prod, rows);
  binary(g, "Σ dO·O", CUDNN_POINTWISE_MUL, rows, scalar(g, SDPA_ONE, "one"), sum);
  return sum;
}

/* dS = P·(dO·vᵀ − Σ dO·O)·scale. */
static cudnnBackendDescriptor_t score_gradient(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t dout,
                                              cudnnBackendDescriptor_t vt, cudnnBackendDescriptor_t p,
                                              cudnnBackendDescriptor_t sum, cudnnBackendDescriptor_t scale) {
  Shape4 all = scores_shape(s);
  cudnnBackendDescriptor_t dp = temporary(g, CUDNN_DATA_FLOAT, all, "dO·vᵀ");
  cudnnBackendDescriptor_t centred = temporary(g, CUDNN_DATA_FLOAT, all, "dP − Σ dO·O");
  cudnnBackendDescriptor_t weighted = temporary(g, CUDNN_DATA_FLOAT, all, "P·(dP − Σ dO·O)");
  cudnnBackendDescriptor_t ds = temporary(g, CUDNN_DATA_FLOAT, all, "dS");
  matmul(g, "dO·vᵀ", dout, vt, dp);
  binary(g, "dP − Σ dO·O", CUDNN_POINTWISE_SUB, dp, sum, centred);
  binary(g, "P·(dP − Σ dO·O)", CUDNN_POINTWISE_MUL, centred, p, weighted);
  binary(g, "dS", CUDNN_POINTWISE_MUL, weighted, scale, ds);
  return ds;
}

/* dq = dS·k, by its matmul, or through the fp32 accumulator. */
static void query_gradient(SdpaGraph *g, const SdpaShape *s, cudnnBackendDescriptor_t ds,
                           cudnnBackendDescriptor_t kt, cudnnBackendDescriptor_t dq, int accumulated) {
  cudnnBackendDescriptor_t k = temporary(g, CUDNN_DATA_FLOAT, by_rows(s, s->Hkv, s->kv_row), "k");
  reshape(g, "k", kt, k);
  if (!accumulated) {
    matmul(g, "dS·k", ds, k, dq);
    return;
  }
  cudnnBackendDescriptor_t sum =
      tensor(g, SDPA_DQ_SUM, CUDNN_DATA_FLOAT, dense(s->B, s->Hq, s->T, s->D), 0, "dq's fp32 sum");
  matmul(g, "dS·k", ds, k, sum);
  unary(g, "dq", CUDNN_POINTWISE_IDENTITY, sum, dq);
}

static void backward(SdpaGraph *g, const SdpaShape *s, int accumulated) {
  Shape4 q_rows = by_rows(s, s->Hq, s->q_row), kv_rows = by_rows(s, s->Hkv, s->kv_row);
  Shape4 out_rows = by_rows(s, s->Hq, (int64_t)s->Hq * s->D), all = scores_shape(s);
  cudnnBackendDescriptor_t q = tensor(g, SDPA_Q, CUDNN_DATA_BFLOAT16, q_rows, 0, "q");
  cudnnBackendDescriptor_t kt = tensor(g, SDPA_K, CUDNN_DATA_BFLOAT16, transposed(kv_rows), 0, "kᵀ");
  cudnnBackendDescriptor_t vt = tensor(g, SDPA_V, CUDNN_DATA_BFLOAT16, transposed(kv_rows), 0, "vᵀ");
  cudnnBackendDescriptor_t out = tensor(g, SDPA_O, CUDNN_DATA_BFLOAT16, out_rows, 0, "out");
  cudnnBackendDescriptor_t dout = tensor(g, SDPA_DO, CUDNN_DATA_BFLOAT16, out_rows, 0, "dout");
  cudnnBackendDescriptor_t lse = tensor(g, SDPA_STATS, CUDNN_DATA_FLOAT, row_stats_shape(s), 0, "lse");
  cudnnBackendDescriptor_t dq = tensor(g, SDPA_DQ, CUDNN_DATA_BFLOAT16, q_rows, 0, "dq");
  cudnnBackendDescriptor_t dk = tensor(g, SDPA_DK, CUDNN_DATA_BFLOAT16, kv_rows, 0, "dk");
  cudnnBackendDescriptor_t dv = tensor(g, SDPA_DV, CUDNN_DATA_BFLOAT16, kv_rows, 0, "dv");
  cudnnBackendDescriptor_t scale = scalar(g, SDPA_SCALE, "the scale");
  cudnnBackendDescriptor_t sum = output_dot(g, s, dout, out);
  cudnnBackendDescriptor_t centred = temporary(g, CUDNN_DATA_FLOAT, all, "S − lse");
  cudnnBackendDescriptor_t p = temporary(g, CUDNN_DATA_FLOAT, all, "P");
  cudnnBackendDescriptor_t pt = temporary(g, CUDNN_DATA_BFLOAT16, transposed(all), "Pᵀ");
  cudnnBackendDescriptor_t dst = temporary(g, CUDNN_DATA_BFLOAT16, transposed(all), "dSᵀ");
  binary(g, "S − lse", CUDNN_POINTWISE_SUB, scaled_scores(g, s, q, kt, scale), lse, centred);
  unary(g, "P", CUDNN_POINTWISE_EXP, masked(g, s, centred), p);
  reshape(g, "Pᵀ", p, pt);
  kv_head_product(g, s, "Pᵀ·dO", pt, dout, dv);
  cudnnBackendDescriptor_t ds = score_gradient(g, s, dout, vt, p, sum, scale);
  reshape(g, "dSᵀ", ds, dst);
  kv_head_product(g, s, "dSᵀ·q", dst, q, dk);
  query_gradient(g, s, ds, kt, dq, accumulated);
}

int sdpa_graph_build(SdpaGraph *g, const Cudnn *lib, const SdpaShape *s, SdpaPass pass) {
  memset(g, 0, sizeof *g);
  g->lib = lib;
  g->next_uid = SDPA_FIRST_VIRTUAL;
  if (pass == SDPA_FORWARD) forward(g, s);
  else backward(g, s, pass == SDPA_BACKWARD_ACCUMULATED);
  return failed(g);
}

void sdpa_graph_free(SdpaGraph *g) {
  for (int i = g->owned_count - 1; i >= 0; i--) g->lib->destroy_descriptor(g->owned[i]);
  g->owned_count = g->op_count = 0;
}

/* ---- plans ------------------------------------------------------------------------------------------- */

static cudnnBackendDescriptor_t operation_graph(SdpaGraph *g, cudnnHandle_t handle) {
  const char *step = "the operation graph";
  cudnnBackendDescriptor_t graph = create(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, step);
  set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, step);
  set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->op_count, g->ops, step);
  finalize(g, graph, step);
  return graph;
}

enum { MOST_CONFIGS = 16 };

/* The engine configurations cuDNN's heuristics offer for the graph (mode A, else the fallback list), in
 * their order; returns their count. */
static int engine_configs(SdpaGraph *g, cudnnBackendDescriptor_t graph, cudnnBackendDescriptor_t *configs) {
  cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  for (int m = 0; m < 2 && !failed(g); m++) {
    const char *step = m == 0 ? "the engine heuristics" : "the fallback engine list";
    cudnnBackendDescriptor_t heur = create(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, step);
    set_descriptor(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, step);
    set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m], step);
    finalize(g, heur, step);
    int64_t count = 0;
    if (!failed(g))
      check(g, g->lib->get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                     NULL), step);
    if (count > MOST_CONFIGS) count = MOST_CONFIGS;
    for (int64_t i = 0; i < count; i++) configs[i] = create(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, step);
    if (count > 0 && !failed(g))
      check(g, g->lib->get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                     &count, configs), step);
    if (count > 0 && !failed(g)) return (int)count;
  }
  return 0;
}

/* Whether a configuration's engine notes that its results may vary from run to run. */
static int nondeterministic(SdpaGraph *g, cudnnBackendDescriptor_t config) {
  cudnnBackendDescriptor_t engine = create(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "the engine's notes");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (!engine || g->lib->get_attribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                       &engine) != CUDNN_STATUS_SUCCESS)
    return 1;
  if (g->lib->get_attribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                            CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) != CUDNN_STATUS_SUCCESS)
    return 1;
  for (int64_t i = 0; i < count; i++)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return 1;
  return 0;
}

/* The plan of one configuration, or NULL with why (the last configuration's reason is kept). */
static cudnnBackendDescriptor_t plan_of(SdpaGraph *g, cudnnBackendDescriptor_t config, char *why, size_t size) {
  const Cudnn *lib = g->lib;
  cudnnBackendDescriptor_t plan = create(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "the execution plan");
  if (!plan) return NULL;
  cudnnStatus_t status =
      lib->set_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config);
  if (status == CUDNN_STATUS_SUCCESS) status = lib->finalize(plan);
  if (status == CUDNN_STATUS_SUCCESS) return plan;
  describe_failure(lib, status, "the execution plan", why, size);
  return NULL;
}

static void workspace_of(SdpaPlan *p) {
  int64_t count = 0;
  p->workspace_bytes = 0;
  check(&p->graph, p->graph.lib->get_attribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                               1, &count, &p->workspace_bytes), "the plan's workspace");
}

/* The first configuration that finalizes a plan, skipping nondeterministic engines when `exact`. */
static int choose_plan(SdpaPlan *p, const cudnnBackendDescriptor_t *configs, int count, int exact, char *why,
                       size_t size) {
  snprintf(why, size, "no engine of cuDNN's heuristics takes the graph");
  for (int i = 0; i < count && !p->plan; i++) {
    int varies = nondeterministic(&p->graph, configs[i]);
    if (exact && varies) {
      snprintf(why, size, "every engine that takes the graph may give other bits on another run");
      continue;
    }
    p->plan = plan_of(&p->graph, configs[i], why, size);
    p->deterministic = !varies;
  }
  if (p->plan) workspace_of(p);
  return !p->plan || failed(&p->graph);
}

int sdpa_plan_build(SdpaPlan *p, const Cudnn *lib, cudnnHandle_t handle, const SdpaShape *s, SdpaPass pass,
                    char *why, size_t size) {
  cudnnBackendDescriptor_t configs[MOST_CONFIGS];
  memset(p, 0, sizeof *p);
  sdpa_graph_build(&p->graph, lib, s, pass);
  cudnnBackendDescriptor_t graph = operation_graph(&p->graph, handle);
  int count = engine_configs(&p->graph, graph, configs);
  if (!failed(&p->graph) && choose_plan(p, configs, count, pass == SDPA_BACKWARD, why, size) == 0) return 0;
  if (failed(&p->graph)) snprintf(why, size, "%s", p->graph.failed);
  sdpa_plan_free(p);
  return 1;
}

void sdpa_plan_free(SdpaPlan *p) {
  sdpa_graph_free(&p->graph);
  p->plan = NULL;
}

int sdpa_plan_run(const SdpaPlan *p, cudnnHandle_t handle, int count, const int64_t *uids, void *const *pointers,
                  void *workspace, char *why, size_t size) {
  const Cudnn *lib = p->graph.lib;
  cudnnBackendDescriptor_t pack = NULL;
  cudnnStatus_t status = lib->create_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (status == CUDNN_STATUS_SUCCESS)
    status = lib->set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
  if (status == CUDNN_STATUS_SUCCESS)
    status = lib->set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, pointers);
  if (status == CUDNN_STATUS_SUCCESS)
    status = lib->set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (status == CUDNN_STATUS_SUCCESS) status = lib->finalize(pack);
  if (status == CUDNN_STATUS_SUCCESS) status = lib->execute(handle, p->plan, pack);
  if (status != CUDNN_STATUS_SUCCESS) describe_failure(lib, status, "running the plan", why, size);
  if (pack) lib->destroy_descriptor(pack);
  return status != CUDNN_STATUS_SUCCESS;
}
