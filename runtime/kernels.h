/* kernels.h: the kernels generated programs call: GEMM, norms, attention, embedding, cross entropy and
 * the row sums of bias gradients; runtime/cpu/ implements them for the CPU (OpenMP, OpenBLAS), the CUDA
 * runtime for GPUs. All tensors are row-major and contiguous, in the backend's memory. Activations and
 * the weights compute reads are act_t; statistics (means, reciprocal deviations, log-normalisers) and
 * parameter gradients are real. Outputs are overwritten unless marked "+=": those accumulate
 * (parameter gradients). Deterministic: the same inputs give the same bits whatever the thread count
 * (on one machine: the CPU's vectorised loops take its vector width; k_gemm's bits are OpenBLAS's, see
 * runtime/cpu/gemm.c). */
#ifndef PLAIT_KERNELS_H
#define PLAIT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "real.h"
#include "rope.h"

/* The GEMMs' flags as generated code spells them: an operand as stored (GEMM_N) or transposed
 * (GEMM_T), and beta: C overwritten (GEMM_OVERWRITE) or added to (GEMM_ACCUMULATE). */
enum { GEMM_N = 0, GEMM_T = 1 };
enum { GEMM_OVERWRITE = 0, GEMM_ACCUMULATE = 1 };

/* C[M,N] = alpha·op(A)·op(B) + beta·C. op(A) is M×K: A is stored M×K, or K×M when trans_a.
 * op(B) is K×N: B is stored K×N, or N×K when trans_b. (OpenBLAS sgemm/dgemm.) */
void k_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, real alpha, const act_t *A, const act_t *B,
            real beta, act_t *C);
/* C[M,N] += op(A)·op(B) into a parameter gradient (a weight gradient: dW += dYᵀ·X). */
void k_gemm_grad(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const act_t *A, const act_t *B, real *C);

#if ACT_SEPARATE
/* dst = src rounded to act_t: the weights compute reads, after the master copies changed. */
void k_to_act(int64_t n, const real *src, act_t *dst);
#endif

/* This machine's GEMM rate in FLOP/s (2·M·N·K per product), measured on square products of size n: the
 * fastest of `repeats` timed products after an untimed one. 0 when n or repeats is not positive. */
double k_gemm_rate(int64_t n, int repeats);

/* out[C] += sum over rows of x[rows, C] (bias gradients). */
void k_sum_rows(int64_t rows, int64_t C, const act_t *x, real *out);
/* out[C] = sum over rows of x[rows, C] (the gradient of an activation broadcast over rows). */
void k_sum_rows_act(int64_t rows, int64_t C, const act_t *x, act_t *out);

/* Layer norm over each row of width C: y = (x - mean)·rstd·w + b, rstd = 1/sqrt(var + eps)
 * (var the biased variance). Saves mean[rows] and rstd[rows] for the backward pass. Without a weight
 * (w, b and, backward, dw and db NULL) the norm alone: y = (x - mean)·rstd. */
void k_layernorm_forward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const act_t *b, real eps, act_t *y,
                         real *mean, real *rstd);
/* dx = rstd·(w·dy - mean_C(w·dy) - x̂·mean_C(w·dy·x̂)), x̂ = (x - mean)·rstd; dw += Σ_rows dy·x̂; db += Σ_rows dy. */
void k_layernorm_backward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const real *mean, const real *rstd,
                          const act_t *dy, act_t *dx, real *dw, real *db);

/* RMS norm: y = x·rstd·w, rstd = 1/sqrt(mean_C(x²) + eps). Saves rstd[rows]. w NULL (and dw NULL
 * backward): no weight. */
void k_rmsnorm_forward(int64_t rows, int64_t C, const act_t *x, const act_t *w, real eps, act_t *y, real *rstd);
/* dx = rstd·(w·dy - x̂·mean_C(w·dy·x̂)), x̂ = x·rstd; dw += Σ_rows dy·x̂. */
void k_rmsnorm_backward(int64_t rows, int64_t C, const act_t *x, const act_t *w, const real *rstd, const act_t *dy,
                        act_t *dx, real *dw);

/* Attention over B sequences of T positions. q: [B, T, Hq·D]; k, v: [B, T, Hkv·D] (head h of q reads
 * kv head h / (Hq/Hkv): grouped-query attention; Hq is a multiple of Hkv, and D is even with rope);
 * out: [B, T, Hq·D]; lse: [B, Hq, T], the log of each softmax row's normaliser, kept for the backward
 * pass. Scores q·k·scale (scale 0: 1/sqrt(D)), capped to softcap·tanh(score/softcap) when softcap > 0
 * (Gemma-2); causal: position t sees t' ≤ t, and with a window w > 0 only t − w < t' ≤ t (sliding window:
 * Mistral, Gemma-2), and with alibi less slope_h·|t − t'|. With rope, q and k are first rotated: the pair (i, i + D/2) of position t turns by
 * the angle t·theta^(-2i/D) (the "rotate half" convention). No T×T matrix is stored. */
typedef struct {
  int64_t B, T;
  int Hq, Hkv, D;
  int causal, rope;
  double rope_theta;
  int64_t window;
  double softcap, scale;
  int alibi;              /* scores less slope_h·|t − t'| (ALiBi: BLOOM, MPT), head h = head0 + local head */
  int head0, heads_total; /* this rank's first head and every rank's heads, for the slopes */
} AttnShape;

/* ALiBi's slope of head h of H: 2^(−8(h+1)/n) for h < n, n the largest power of 2 not above H, then the
 * odd powers of 2^(−4/n) for the heads past n (Press et al. 2022, as BLOOM computes them). */
double attention_alibi_slope(int H, int h);

/* Which attention kernels a GPU program runs (DIR/train --attention): cuDNN's fused attention for the
 * shapes it serves and plait's own for the others (auto), cuDNN's or the job ends with the reason
 * (cudnn), plait's own (plait). The CPU has plait's alone: auto and plait run it, cudnn is refused. */
typedef enum { ATTENTION_AUTO, ATTENTION_CUDNN, ATTENTION_PLAIT } AttentionChoice;
/* 0 when this program can run the choice; else 1 with why (the CPU has no cuDNN; a GPU program found no
 * cuDNN it can use). */
int k_attention_available(AttentionChoice choice, char *why, size_t size);
/* The choice of this rank's thread; `report` prints, once per shape, which kernels run it. */
void k_attention_choose(AttentionChoice choice, int report);
/* "cuDNN" or "plait": which kernels run a call of this shape (deciding it now if not yet decided). */
const char *k_attention_path(const AttnShape *s);

void k_attention_forward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, act_t *out, real *lse);
/* dq, dk, dv are overwritten (dk, dv summed over the query heads that share a kv head). */
void k_attention_backward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, const act_t *out,
                          const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv);

/* Rotary positions (rope.h) over x and y [B, T, heads·head_dim] (y may be x). */
void k_rope(const RopeShape *s, const act_t *x, act_t *y);

/* The last dim as `groups` runs of parts, [g0: p0 p1 …][g1: p0 p1 …]…, over `rows` leading positions
 * (a fused q, k, v laid out by head). k_split: y = part `part` of every group, [rows, groups·sizes[part]].
 * k_concat: y = the parts joined group by group, [rows, groups·Σ sizes], from parts[i] of
 * [rows, groups·sizes[i]]; a NULL part is zeros (a split's gradient). */
void k_split(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, int part, const act_t *x, act_t *y);
void k_concat(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, const act_t *const *parts, act_t *y);

/* Mixture of experts (runtime/cpu/moe.c; the CUDA backend refuses them at build time). Each of T
 * tokens picks k of E experts; its k routed rows lie at slots[t·k + j] of T·k rows grouped by
 * expert (stable: by expert, then token order), counts[e] of them for expert e. k_topk: values and
 * indices of the k largest of each row of x [rows, n], largest first, a tie to the lower index (as
 * torch.topk on the CPU). k_topk_backward: dx [rows, n] = dvalues at the indices, 0 elsewhere. */
void k_topk(int64_t rows, int64_t n, int k, const act_t *x, act_t *values, int32_t *indices);
void k_topk_backward(int64_t rows, int64_t n, int k, const int32_t *indices, const act_t *dvalues,
                     act_t *dx);
/* slots [T, k] and counts [E] of the experts' indices [T, k] (each in [0, E)). With capacity > 0
 * each expert keeps at most `capacity` of its rows: those of the largest priority [T, k] (a tie, or
 * priority NULL, to the earlier token); a dropped row's slot is -1, and the kept rows fill rows
 * 0 .. Σ counts - 1, grouped by expert, in token order within each. */
void k_moe_route(int64_t T, int64_t k, int64_t E, int64_t capacity, const int32_t *indices,
                 const act_t *priority, int32_t *slots, int32_t *counts);
/* fractions[e] = counts[e] / Σ counts (0 when no rows at all). */
void k_moe_fractions(int64_t E, const int32_t *counts, act_t *fractions);
/* rows[slots[t, j]] = x[t] for each of its k slots (rows [T·k, D]); a slot of -1 (dropped) takes
 * nothing, and the rows no slot names (those past Σ counts) are zeros. */
void k_moe_dispatch(int64_t T, int64_t k, int64_t D, const act_t *x, const int32_t *slots,
                    act_t *rows);
/* out[t] = Σ_j weights[t, j]·rows[slots[t, j]], j in order (weights NULL: each 1), over the slots
 * that are not -1. */
void k_moe_combine(int64_t T, int64_t k, int64_t D, const act_t *rows, const int32_t *slots,
                   const act_t *weights, act_t *out);
/* drows[slots[t, j]] = weights[t, j]·dout[t]; dweights[t, j] = rows[slots[t, j]]·dout[t]; for a
 * dropped slot (-1) dweights[t, j] = 0, and the rows no slot names are zeros. */
void k_moe_combine_backward(int64_t T, int64_t k, int64_t D, const act_t *rows,
                            const int32_t *slots, const act_t *weights, const act_t *dout,
                            act_t *drows, act_t *dweights);
/* C [rows, N] = A [rows, K] · op(W[e]) over each expert's rows (counts, in expert order, summing to
 * rows): W [E, K, N], or [E, N, K] when trans_b. An expert of no rows is skipped. */
void k_grouped_gemm(int trans_b, int64_t E, const int32_t *counts, int64_t rows, int64_t N,
                    int64_t K, const act_t *A, const act_t *W, act_t *C);
/* C[e] [M, N] += A_eᵀ·B_e over expert e's rows of A [rows, M] and B [rows, N] (its weight
 * gradient). */
void k_grouped_gemm_grad(int64_t E, const int32_t *counts, int64_t rows, int64_t M, int64_t N,
                         const act_t *A, const act_t *B, real *C);

/* Embedding over a shard of the table holding rows [row0, row0 + rows) of the whole vocabulary:
 * out[n, :] = table[ids[n] - row0, :] for ids in the shard, 0 for the others (summed over the shards
 * by an all-reduce). */
void k_embedding_forward(int64_t N, int64_t C, const int32_t *ids, const act_t *table, int64_t row0, int64_t rows,
                         act_t *out);
/* dtable[ids[n] - row0, :] += dout[n, :] for ids in the shard; deterministic (no atomics). */
void k_embedding_backward(int64_t N, int64_t C, const int32_t *ids, const act_t *dout, int64_t row0, int64_t rows,
                          real *dtable);

/* Softmax cross entropy over N rows of logits split by columns: this shard holds columns
 * [col0, col0 + cols) of each row, and columns at or beyond `vocab` (padding) are left out. Rows whose
 * target is below 0 (nothing to predict there) or equals `ignore` count for nothing. Three steps, with
 * the tensor-parallel all-reduces between them done by the caller (nothing when there is one shard):
 *   1. max[n] = max of the row's valid local logits (-inf when none)          -> all-reduce MAX
 *   2. sumexp[n] = Σ exp(z - max[n]) over valid local columns; target[n] = z[n, t_n] when this shard
 *      holds t_n, else 0                                                         -> all-reduce SUM of both
 *   3. lse[n] = max[n] + log(sumexp[n]); returns scale·Σ_n (lse[n] - target[n]) over the rows that count. */
void k_xent_max(int64_t N, int64_t cols, const act_t *logits, int64_t col0, int64_t vocab, real *max);
void k_xent_sums(int64_t N, int64_t cols, const act_t *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                 const real *max, real *sumexp, real *target);
/* lse[n] is written for every row, those that do not count included. */
double k_xent_loss(int64_t N, const int32_t *targets, int64_t ignore, const real *max, const real *sumexp,
                   const real *target, real scale, real *lse);
/* In place over the logits: dz = scale·(softmax(z) - onehot(t)) for valid columns, 0 for padding and
 * for rows that do not count. No second copy of the logits. */
void k_xent_backward(int64_t N, int64_t cols, act_t *logits, int64_t col0, int64_t vocab, const int32_t *targets,
                     int64_t ignore, const real *lse, real scale);
/* Steps 1 to 3 and the gradient at once, over whole rows (no vocabulary split), each row while it is in
 * cache: max, then e = exp(z − max) written over the row as Σe is taken, then dz = scale·(e/Σe − onehot(t))
 * (every column 0 on rows that do not count); max, sumexp, target and lse as the steps write them, and the
 * loss returned. The gradient differs from k_xent_backward's exp(z − lse) by rounding alone. */
double k_xent_forward_grad(int64_t N, int64_t cols, act_t *logits, int64_t vocab, const int32_t *targets,
                           int64_t ignore, real scale, real *max, real *sumexp, real *target, real *lse);

#endif
