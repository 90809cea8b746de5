/* profiled.h: the runtime kernels generated stage code calls, timed for DIR/train --profile.
 * Included by the generated program after rt.h: each kernel name below is also a macro of the same
 * name that runs the kernel and, when the run profiles (r->profile set: the stage function's Run is
 * `r`), adds its time, FLOPs and bytes to its kind. The fused elementwise kernels (the program's
 * own: ew_bias_add, ...) are not wrapped: the time between wrapped calls inside a stage is theirs.
 * tests/cli/profiled_wrappers.sh checks that every kernel of kernels.h is wrapped here, or named
 * there with why stage code does not call it. */
#ifndef PLAIT_PROFILED_H
#define PLAIT_PROFILED_H

#include "profile.h"
#include "rt.h"

#define PROFILED(kind, flops, bytes, call)                                   \
  do {                                                                       \
    double profile_started_ = r->profile ? profile_start(r->profile) : 0;   \
    call;                                                                    \
    if (r->profile) profile_add(r->profile, kind, profile_started_, flops, bytes); \
  } while (0)

#define PROFILE_ACT(n) ((double)(n) * sizeof(act_t))

/* Sizes as doubles: a large vocabulary's M·N passes 2^31. */
#define k_gemm(ta, tb, M, N, K, alpha, A, B, beta, C)                                                 \
  PROFILED(PROFILE_GEMM, 2.0 * (M) * (N) * (K),                                                       \
           PROFILE_ACT((double)(M) * (K) + (double)(K) * (N) + (double)(M) * (N)),                    \
           k_gemm(ta, tb, M, N, K, alpha, A, B, beta, C))
#define k_gemm_grad(ta, tb, M, N, K, A, B, C)                                                         \
  PROFILED(PROFILE_GEMM, 2.0 * (M) * (N) * (K),                                                       \
           PROFILE_ACT((double)(M) * (K) + (double)(K) * (N)) + 2.0 * (M) * (N) * sizeof(real),       \
           k_gemm_grad(ta, tb, M, N, K, A, B, C))
#define k_layernorm_forward(rows, C, x, w, b, eps, y, mean, rstd) \
  PROFILED(PROFILE_NORM, 0, PROFILE_ACT(2.0 * (rows) * (C)), k_layernorm_forward(rows, C, x, w, b, eps, y, mean, rstd))
#define k_layernorm_backward(rows, C, x, w, mean, rstd, dy, dx, dw, db) \
  PROFILED(PROFILE_NORM, 0, PROFILE_ACT(3.0 * (rows) * (C)),         \
           k_layernorm_backward(rows, C, x, w, mean, rstd, dy, dx, dw, db))
#define k_rmsnorm_forward(rows, C, x, w, eps, y, rstd) \
  PROFILED(PROFILE_NORM, 0, PROFILE_ACT(2.0 * (rows) * (C)), k_rmsnorm_forward(rows, C, x, w, eps, y, rstd))
#define k_rmsnorm_backward(rows, C, x, w, rstd, dy, dx, dw) \
  PROFILED(PROFILE_NORM, 0, PROFILE_ACT(3.0 * (rows) * (C)), k_rmsnorm_backward(rows, C, x, w, rstd, dy, dx, dw))
/* q, k, v and the output read or written once: 4·B·T·Hq·D elements at most (fewer kv heads read less). */
#define k_attention_forward(s, q, k, v, out, lse)                                                   \
  PROFILED(PROFILE_ATTENTION, profile_attention_flops(s),                                          \
           PROFILE_ACT(4.0 * (s)->B * (s)->T * (s)->Hq * (s)->D), k_attention_forward(s, q, k, v, out, lse))
#define k_attention_backward(s, q, k, v, out, lse, dout, dq, dk, dv)                                \
  PROFILED(PROFILE_ATTENTION, 2 * profile_attention_flops(s),                                      \
           PROFILE_ACT(9.0 * (s)->B * (s)->T * (s)->Hq * (s)->D),                                  \
           k_attention_backward(s, q, k, v, out, lse, dout, dq, dk, dv))
/* x read and y written once. */
#define k_rope(s, x, y)                                                                      \
  PROFILED(PROFILE_ROPE, 0, PROFILE_ACT(2.0 * (s)->B * (s)->T * (s)->heads * (s)->head_dim), \
           k_rope(s, x, y))
/* Variadic: the sizes and parts come as compound literals, whose commas are not an argument's. */
#define k_split(...) \
  PROFILED(PROFILE_SPLIT_CONCAT, 0, profile_split_bytes(__VA_ARGS__), k_split(__VA_ARGS__))
#define k_concat(...) \
  PROFILED(PROFILE_SPLIT_CONCAT, 0, profile_concat_bytes(__VA_ARGS__), k_concat(__VA_ARGS__))
/* A GEMM per expert: 2·rows·N·K in all; the rows, the experts' matrices and the result once. */
#define k_grouped_gemm(tb, E, counts, rows, N, K, A, W, C)                                  \
  PROFILED(PROFILE_GEMM, 2.0 * (rows) * (N) * (K),                                         \
           PROFILE_ACT((double)(rows) * (K) + (double)(E) * (K) * (N) +                     \
                       (double)(rows) * (N)),                                               \
           k_grouped_gemm(tb, E, counts, rows, N, K, A, W, C))
#define k_grouped_gemm_grad(E, counts, rows, M, N, A, B, C)                                 \
  PROFILED(PROFILE_GEMM, 2.0 * (rows) * (M) * (N),                                         \
           PROFILE_ACT((double)(rows) * ((M) + (N))) + 2.0 * (E) * (M) * (N) * sizeof(real), \
           k_grouped_gemm_grad(E, counts, rows, M, N, A, B, C))
/* Routing: each row of scores (or rows of width D) read once and its result written once. */
#define k_topk(rows, n, k, x, values, indices)                                   \
  PROFILED(PROFILE_ROUTING, 0, PROFILE_ACT((double)(rows) * ((n) + 2 * (k))), \
           k_topk(rows, n, k, x, values, indices))
#define k_topk_backward(rows, n, k, indices, dvalues, dx)                        \
  PROFILED(PROFILE_ROUTING, 0, PROFILE_ACT((double)(rows) * ((n) + 2 * (k))), \
           k_topk_backward(rows, n, k, indices, dvalues, dx))
#define k_moe_route(T, k, E, capacity, indices, priority, slots, counts) \
  PROFILED(PROFILE_ROUTING, 0, 8.0 * (T) * (k),                         \
           k_moe_route(T, k, E, capacity, indices, priority, slots, counts))
#define k_moe_fractions(E, counts, fractions) \
  PROFILED(PROFILE_ROUTING, 0, 8.0 * (E), k_moe_fractions(E, counts, fractions))
#define k_moe_dispatch(T, k, D, x, slots, rows)                                     \
  PROFILED(PROFILE_ROUTING, 0, PROFILE_ACT((double)(T) * (D) * (1 + (k))), \
           k_moe_dispatch(T, k, D, x, slots, rows))
#define k_moe_combine(T, k, D, rows, slots, weights, out)                 \
  PROFILED(PROFILE_ROUTING, 0, PROFILE_ACT((double)(T) * (D) * (1 + (k))), \
           k_moe_combine(T, k, D, rows, slots, weights, out))
#define k_moe_combine_backward(T, k, D, rows, slots, weights, dout, drows, dweights) \
  PROFILED(PROFILE_ROUTING, 0, PROFILE_ACT((double)(T) * (D) * (1 + 2 * (k))),       \
           k_moe_combine_backward(T, k, D, rows, slots, weights, dout, drows, dweights))
#define k_sum_rows(rows, C, x, out) \
  PROFILED(PROFILE_BIAS_SUMS, 0, PROFILE_ACT((double)(rows) * (C)), k_sum_rows(rows, C, x, out))
#define k_sum_rows_act(rows, C, x, out) \
  PROFILED(PROFILE_BIAS_SUMS, 0, PROFILE_ACT((double)(rows) * (C)), k_sum_rows_act(rows, C, x, out))
#define rt_embedding_forward(r, N, C, ids, table, rows, split, out) \
  PROFILED(PROFILE_EMBEDDING, 0, PROFILE_ACT(2.0 * (N) * (C)), rt_embedding_forward(r, N, C, ids, table, rows, split, out))
#define rt_embedding_backward(r, N, C, ids, dout, rows, split, dtable) \
  PROFILED(PROFILE_EMBEDDING, 0, PROFILE_ACT(3.0 * (N) * (C)),        \
           rt_embedding_backward(r, N, C, ids, dout, rows, split, dtable))
/* Cross entropy reads the logits twice forward (their max, then their exponentials' sum) and reads and
 * writes them once backward. */
#define rt_xent_forward(r, N, cols, logits, targets, vocab, ignore, split, lse)  \
  PROFILED(PROFILE_XENT, 0, PROFILE_ACT(2.0 * (N) * (cols)),                     \
           rt_xent_forward(r, N, cols, logits, targets, vocab, ignore, split, lse))
/* Forward and gradient at once: the logits read from memory once and written once (the later passes
 * over a row find it in cache). */
#define rt_xent_forward_grad(r, N, cols, logits, targets, vocab, ignore, lse) \
  PROFILED(PROFILE_XENT, 0, PROFILE_ACT(2.0 * (N) * (cols)),                \
           rt_xent_forward_grad(r, N, cols, logits, targets, vocab, ignore, lse))
#define rt_xent_backward(r, N, cols, logits, targets, vocab, ignore, split, lse) \
  PROFILED(PROFILE_XENT, 0, PROFILE_ACT(2.0 * (N) * (cols)),                     \
           rt_xent_backward(r, N, cols, logits, targets, vocab, ignore, split, lse))
#define rt_allreduce(r, in, out, n) PROFILED(PROFILE_COMM, 0, PROFILE_ACT(n), rt_allreduce(r, in, out, n))
#define rt_allgather(r, in, out, outer, inner) \
  PROFILED(PROFILE_COMM, 0, PROFILE_ACT((double)(outer) * (inner)), rt_allgather(r, in, out, outer, inner))
#define rt_reducescatter(r, in, out, outer, inner) \
  PROFILED(PROFILE_COMM, 0, PROFILE_ACT((double)(outer) * (inner)), rt_reducescatter(r, in, out, outer, inner))
#define rt_slice(r, in, out, outer, inner) \
  PROFILED(PROFILE_COMM, 0, PROFILE_ACT((double)(outer) * (inner)), rt_slice(r, in, out, outer, inner))

#endif
