/* kernel_time.c: the time of one kernel on a machine (a roofline per kernel, with wave
 * quantisation of GEMM tiles over the compute units), of one collective (α–β ring), and of a GPU
 * program's attention: which kernel runs a call and its rate by head size (docs/cost-model.md). */
#include "cost/kernel_time.h"

#include <math.h>

static const char *const bound_names[BOUNDS] = {"compute", "quantisation", "memory", "latency",
                                                "communication"};

const char *kernel_bound_name(Bound b) { return bound_names[b]; }

static double max2(double a, double b) { return a > b ? a : b; }

/* A GEMM computes its output in tiles, one tile per compute unit at a time, each tile's K loop
 * at the unit's share of the ceiling rate: the time is whole waves of tiles. Libraries pick a
 * smaller tile when it wastes less; the tiles tried are the machine's largest, then halved in
 * rows, then in both (smaller ones would wait on their operands: too few FLOPs per byte loaded). */
static double gemm_compute_seconds(const Machine *m, double batch, double M, double N, double K) {
  static const double shrink[][2] = {{1, 1}, {2, 1}, {2, 2}};
  double unit_rate = m->peak_flops * m->gemm_efficiency / m->compute_units, best = INFINITY;
  for (unsigned i = 0; i < sizeof shrink / sizeof *shrink; i++) {
    double tm = fmax(1, floor(m->gemm_tile_m / shrink[i][0])),
           tn = fmax(1, floor(m->gemm_tile_n / shrink[i][1]));
    double waves = ceil(batch * ceil(M / tm) * ceil(N / tn) / m->compute_units);
    best = fmin(best, waves * 2 * tm * tn * K / unit_rate);
  }
  return best;
}

double kernel_interpolate_log(const double *x, const double *y, int n, double at) {
  if (at <= x[0]) return y[0];
  if (at >= x[n - 1]) return y[n - 1];
  int i = 1;
  while (x[i] < at) i++;
  double x0 = log(x[i - 1]), x1 = log(x[i]), f = (log(at) - x0) / (x1 - x0);
  return y[i - 1] + f * (y[i] - y[i - 1]);
}

double kernel_rate_at(const RateCurve *c, double flops) {
  return kernel_interpolate_log(c->flops, c->rate, c->n, flops);
}

/* The part a product's short side plays: 1 when it is the inner size K (a weight gradient summed
 * over the tokens), 0 when it is an output side (forward and input-gradient products over the
 * tokens). */
static int short_inner(double M, double N, double K) { return K <= M && K <= N; }

static double short_side(double M, double N, double K) { return fmin(fmin(M, N), K); }

static double shape_size(const GemmRates *g, int i) { return g->m[i] * g->n[i] * g->k[i]; }

/* A measured rate for an M×N×K product: among the measured shapes whose short side plays the
 * same part (all of them if none does) and is nearest in log to this one's, the rate linear in
 * log FLOPs between the two nearest sizes, the nearest size's beyond them. A product's rate on a
 * CPU follows how often each packed element is used (its short side) and its size, not its size
 * alone: 128 × 50304 × 768 (an LM head over 128 tokens) runs at three quarters of the rate of a
 * square product of its FLOPs. */
double kernel_gemm_rate(const GemmRates *g, double M, double N, double K) {
  int inner = short_inner(M, N, K), any_same = 0, in_group[MACHINE_GEMM_SHAPES];
  for (int i = 0; i < g->count; i++) any_same |= short_inner(g->m[i], g->n[i], g->k[i]) == inner;
  double side = short_side(M, N, K), nearest = -1, size = M * N * K;
  for (int i = 0; i < g->count; i++) {
    in_group[i] = !any_same || short_inner(g->m[i], g->n[i], g->k[i]) == inner;
    double s = short_side(g->m[i], g->n[i], g->k[i]);
    if (in_group[i] && (nearest < 0 || fabs(log(s / side)) < fabs(log(nearest / side))))
      nearest = s;
  }
  int below = -1, above = -1; /* the nearest sizes of that group below and above this product's */
  for (int i = 0; i < g->count; i++) {
    if (!in_group[i] || short_side(g->m[i], g->n[i], g->k[i]) != nearest) continue;
    double f = shape_size(g, i);
    if (f <= size && (below < 0 || f > shape_size(g, below))) below = i;
    if (f >= size && (above < 0 || f < shape_size(g, above))) above = i;
  }
  if (below < 0 || above < 0 || below == above) return g->rate[below < 0 ? above : below];
  double x = log(size / shape_size(g, below)) / log(shape_size(g, above) / shape_size(g, below));
  return g->rate[below] + x * (g->rate[above] - g->rate[below]);
}

/* With measured rates the call's time is its FLOPs at the rate measured for its shape (the
 * measurement holds the call's overhead); otherwise whole waves of tiles at the ceiling, plus
 * the launch. */
KernelTime kernel_gemm(const Machine *m, double batch, double M, double N, double K,
                       double c_bytes) {
  KernelTime k;
  k.flops = 2 * batch * M * N * K;
  k.bytes = batch * ((M * K + K * N) * m->activation_bytes + M * N * c_bytes);
  if (m->gemm_rates.count > 0) {
    double measured = k.flops / kernel_gemm_rate(&m->gemm_rates, M, N, K);
    double memory = k.bytes / (m->memory_bandwidth * m->memory_efficiency);
    k.seconds = max2(measured, memory);
    k.bound = memory > measured ? BOUND_MEMORY : BOUND_COMPUTE;
    return k;
  }
  double ideal = k.flops / (m->peak_flops * m->gemm_efficiency);
  double compute = gemm_compute_seconds(m, batch, M, N, K);
  double memory = k.bytes / (m->memory_bandwidth * m->memory_efficiency);
  k.seconds = max2(compute, memory) + m->launch_overhead;
  if (m->launch_overhead > max2(compute, memory)) k.bound = BOUND_LATENCY;
  else if (memory > compute) k.bound = BOUND_MEMORY;
  else k.bound = compute > 1.2 * ideal ? BOUND_QUANTISATION : BOUND_COMPUTE;
  return k;
}

KernelTime kernel_stream(const Machine *m, MemoryKind kind, double bytes) {
  double share = kind == MEMORY_COPY ? 1 : m->kind_efficiency[kind];
  double memory = bytes / (m->memory_bandwidth * m->memory_efficiency * share);
  return (KernelTime){memory + m->launch_overhead, 0, bytes,
                      m->launch_overhead > memory ? BOUND_LATENCY : BOUND_MEMORY};
}

KernelTime kernel_elementwise(const Machine *m, MemoryKind kind, double bytes, double specials) {
  KernelTime k = kernel_stream(m, kind, bytes);
  double compute = m->special_rate > 0 ? specials / m->special_rate : 0;
  if (compute + m->launch_overhead <= k.seconds) return k;
  return (KernelTime){compute + m->launch_overhead, 0, bytes, BOUND_COMPUTE};
}

void kernel_add(KernelTime *a, KernelTime b) {
  if (b.seconds > a->seconds) a->bound = b.bound;
  a->seconds += b.seconds, a->flops += b.flops, a->bytes += b.bytes;
}

Link kernel_group_link(const Machine *m, int stride, int n) {
  if ((double)stride * n <= m->devices_per_node || n <= 1)
    return (Link){m->link_bandwidth, m->link_latency, 0, n};
  double members_per_node = fmax(1, floor(m->devices_per_node / stride));
  double groups_per_node = m->devices_per_node / members_per_node;
  double share = m->nics * m->nic_bandwidth / groups_per_node;
  return (Link){fmin(m->link_bandwidth, share), m->nic_latency, 1, members_per_node};
}

Link kernel_p2p_link(const Machine *m, int distance) {
  if (distance < m->devices_per_node) return (Link){m->link_bandwidth, m->link_latency, 0, 2};
  double share = m->nics * m->nic_bandwidth / m->devices_per_node;
  return (Link){share, m->nic_latency, 1, 1};
}

static KernelTime timed(double latency, double moved, double bandwidth) {
  return (KernelTime){latency + moved / bandwidth, 0, moved,
                      latency > moved / bandwidth ? BOUND_LATENCY : BOUND_COMMUNICATION};
}

/* Ring all-reduce: 2(n-1) steps each moving 1/n of the tensor; all-gather and reduce-scatter
 * n-1. The bus bandwidth is what nccl-tests reports as busbw: time = steps · α + steps/n · bytes
 * / busbw. An all-reduce across nodes may run as NCCL's double binary tree instead, which NCCL's
 * tuner (src/graph/tuning.cc) times as 2·((ranks per node − 1) + log2 nodes) steps of latency
 * and the tensor at half of 0.92 of the ring's bus bandwidth; it picks whichever is faster, and
 * so does the plan: the tree for small tensors over many nodes, the ring for gradients. */
KernelTime kernel_collective(const Link *link, RingKind kind, double bytes, int n) {
  if (n <= 1) return (KernelTime){0, 0, 0, BOUND_COMMUNICATION};
  double steps = kind == RING_ALLREDUCE ? 2.0 * (n - 1) : n - 1.0;
  KernelTime ring = timed(steps * link->latency, steps / n * bytes, link->bandwidth);
  if (kind != RING_ALLREDUCE || !link->inter_node) return ring;
  double nodes = ceil(n / link->members_per_node);
  double tree_steps = 2 * ((link->members_per_node - 1) + ceil(log2(nodes)));
  KernelTime tree = timed(tree_steps * link->latency, 2 * bytes, 0.92 * link->bandwidth);
  return tree.seconds < ring.seconds ? tree : ring;
}

KernelTime kernel_p2p(const Link *link, double bytes) {
  double wire = bytes / link->bandwidth;
  return (KernelTime){link->latency + wire, 0, bytes,
                      link->latency > wire ? BOUND_LATENCY : BOUND_COMMUNICATION};
}

/* ---- attention on a GPU ------------------------------------------------------------------- */

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
