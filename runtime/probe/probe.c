/* probe.c: build/plait-probe, what `plait calibrate` runs: this machine measured as N ranks share it (the
 * runtime's own threads per rank, GEMM, elementwise functions and collectives), each rank timing the same
 * work at once, the median of several runs (the machine may be busy: what a training step meets). Prints
 * "key value" lines on stdout: GEMM seconds per shape, streaming seconds per size, attention (forward and
 * backward) seconds per shape, GeLUs per second, all-reduce seconds per size.
 *   plait-probe RANKS            (ranks as threads; under mpirun, one rank per process) */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "comm.h"
#include "cpu.h"
#include "device.h"
#include "ew_cpu.h"
#include "kernels.h"

/* Runs timed of each measurement; of a GEMM past BIG_GEMM_FLOPS (a tenth of a second or more), fewer. */
enum { REPEATS = 15, BIG_GEMM_REPEATS = 5, GELU_FLOATS = 1 << 20 };
#define BIG_GEMM_FLOPS 5e9

/* What a GEMM inside a training step finds in the core's cache: its activation operand was written by the
 * kernel just before (hot), while the weight (forward and input gradient) or the layer's saved input and
 * its gradient accumulator (weight gradient) were last touched a layer or a pass ago (cold). So each timed
 * call reads one copy of the hot operand and the next of several copies of the cold ones, together at
 * least COLD_BYTES. Measured on this project's 2-core hosts: every operand on one copy ran a third faster
 * than inside a step; every operand cold (tiny's 256×128×128 products at 85 GFLOP/s a rank, two ranks)
 * a quarter slower than the same products inside tiny's step (122 on average), which this split gives
 * (114 to 133). */
enum { COLD_BYTES = 32 << 20, MAX_COPIES = 256 };

static int64_t cold_copies(double bytes_per_copy) {
  double n = ceil(COLD_BYTES / bytes_per_copy);
  return n < 1 ? 1 : n > MAX_COPIES ? MAX_COPIES : (int64_t)n;
}

/* Training's products over 64 to 512 tokens, as GPT-2-shaped and smaller models run them: forward and
 * input-gradient products (the tokens an output side; op(B) = Bᵀ forward), weight gradients (the tokens
 * the inner size, op(A) = Aᵀ), GPT-2's LM head (a 154 MB table: out of cache however large the cache,
 * as in training; a 16384-entry one stayed in this host's 480 MB L3 between runs and ran 30% faster
 * than the same product cold), the halves of a 128-wide layer's products under tensor parallelism (a
 * 64-wide output: the plan took them at 74 GFLOP/s a rank from the 64-token products, they run at 106),
 * and squares. A product's rate follows its short side as well as its size (how often each packed
 * element is used): the plan takes the rate of the measured shapes like it. {M, N, K, trans_a, trans_b} */
#define TRAINING_SHAPES(t)                                                                                     \
  {t, 128, 128, 0, 1}, {t, 512, 128, 0, 1}, {t, 128, 512, 0, 0}, {t, 768, 768, 0, 1}, {t, 3072, 768, 0, 1},   \
      {t, 768, 3072, 0, 0}, {t, 50304, 768, 0, 1}, {128, 128, t, 1, 0}, {512, 128, t, 1, 0},                 \
      {768, 768, t, 1, 0}, {3072, 768, t, 1, 0}, {50304, 768, t, 1, 0}, {t, 64, 128, 0, 1}, {64, 128, t, 1, 0}
static const int64_t gemm_shapes[][5] = {TRAINING_SHAPES(64),  TRAINING_SHAPES(128), TRAINING_SHAPES(256),
                                         TRAINING_SHAPES(512), {64, 64, 64, 0, 0},   {256, 256, 256, 0, 0},
                                         {512, 512, 512, 0, 0}, {1024, 1024, 1024, 0, 0}, {2048, 768, 768, 0, 0}};

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of `repeats` (at most REPEATS) runs of `work`, every rank running it at once (a barrier
 * before each). */
static double median_of_n(Comm *c, int repeats, void (*work)(void *), void *arg) {
  double took[REPEATS];
  for (int r = 0; r < repeats; r++) {
    comm_barrier(c, GROUP_WORLD);
    double start = clock_seconds();
    work(arg);
    took[r] = clock_seconds() - start;
  }
  qsort(took, (size_t)repeats, sizeof *took, by_value);
  return took[repeats / 2];
}

static double median_of(Comm *c, void (*work)(void *), void *arg) { return median_of_n(c, REPEATS, work, arg); }

typedef struct {
  int64_t m, n, k;
  int trans_a, trans_b;  /* trans_a: a weight gradient, accumulated into C as the runtime accumulates it */
  act_t *hot;            /* A, and C unless it is a weight gradient's: one copy */
  act_t *cold;           /* copies of B, each followed by C for a weight gradient */
  int64_t cold_elems, copies, next;
} Gemm;

static void run_gemm(void *arg) {
  Gemm *g = arg;
  act_t *b = g->cold + g->next++ % g->copies * g->cold_elems;
  act_t *c = g->trans_a ? b + g->k * g->n : g->hot + g->m * g->k;
  k_gemm(g->trans_a, g->trans_b, g->m, g->n, g->k, 1, g->hot, b, g->trans_a ? 1 : 0, c);
}

static act_t *filled(int64_t elems) {
  act_t *x = cpu_alloc((size_t)elems, sizeof(act_t), "the probe's GEMM");
  for (int64_t e = 0; e < elems; e++) x[e] = (act_t)((e % 7) - 3) / 8;
  return x;
}

static void probe_gemms(Comm *c, int print) {
  for (unsigned i = 0; i < sizeof gemm_shapes / sizeof *gemm_shapes; i++) {
    const int64_t *shape = gemm_shapes[i];
    Gemm g = {shape[0], shape[1], shape[2], (int)shape[3], (int)shape[4], NULL, NULL, 0, 1, 0};
    g.cold_elems = g.k * g.n + (g.trans_a ? g.m * g.n : 0);
    g.copies = cold_copies((double)g.cold_elems * sizeof(act_t));
    g.hot = filled(g.m * g.k + g.m * g.n);
    g.cold = filled(g.copies * g.cold_elems);
    run_gemm(&g);
    double seconds = median_of_n(c, 2.0 * g.m * g.n * g.k > BIG_GEMM_FLOPS ? BIG_GEMM_REPEATS : REPEATS, run_gemm, &g);
    if (print) printf("gemm %lld %lld %lld %.9g\n", (long long)g.m, (long long)g.n, (long long)g.k, seconds);
    free(g.hot);
    free(g.cold);
  }
}

typedef struct {
  float *in, *out;
  int64_t n;
} Stream;

/* out = 0.5·in: one read and one write per element, on the rank's threads. */
static void run_stream(void *arg) {
  Stream *s = arg;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s->n; i++) s->out[i] = 0.5f * s->in[i];
}

/* out = gelu(in): the transformer's usual special function (one exp, as the runtime computes it), at the
 * vector width the generated kernels run it at. */
CPU_WIDE static void run_gelu(void *arg) {
  Stream *s = arg;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < s->n; i++) s->out[i] = rt_gelu(s->in[i]);
}

static void probe_gelu(Comm *c, int print) {
  Stream s = {cpu_alloc(2 * (size_t)GELU_FLOATS, sizeof(float), "the probe's GeLU"), 0, GELU_FLOATS};
  s.out = s.in + GELU_FLOATS;
  for (int64_t i = 0; i < GELU_FLOATS; i++) s.in[i] = (float)(i % 61) / 8 - 4;
  double seconds = median_of(c, run_gelu, &s);
  if (print) printf("gelu_per_s %.9g\n", GELU_FLOATS / seconds);
  free(s.in);
}

/* out = 0.5·in over 4 K to 4 M floats each way (32 KB to 32 MB moved): from the sizes that stay in
 * cache (a small model's activations) to those that stream from memory (weights, optimizer state). */
typedef struct {
  Stream copy;           /* the one timed next */
  float *all;            /* copies of in and out, one after another */
  int64_t copies, next;
} Streams;

static void run_streams(void *arg) {
  Streams *s = arg;
  s->copy.in = s->all + s->next++ % s->copies * 2 * s->copy.n, s->copy.out = s->copy.in + s->copy.n;
  run_stream(&s->copy);
}

static void probe_stream(Comm *c, int print) {
  for (int64_t n = 1 << 12; n <= 1 << 22; n *= 4) {
    Streams s = {{NULL, NULL, n}, NULL, cold_copies(2.0 * (double)n * sizeof(float)), 0};
    s.all = cpu_alloc((size_t)(2 * n * s.copies), sizeof(float), "the probe's stream");
    for (int64_t i = 0; i < 2 * n * s.copies; i++) s.all[i] = (float)(i % 13);
    run_streams(&s);
    double seconds = median_of(c, run_streams, &s);
    if (print) printf("stream %lld %.9g\n", (long long)(2 * n * (int64_t)sizeof(float)), seconds);
    free(s.all);
  }
}

/* Causal attention, forward then backward, as the runtime runs it: shapes {B, heads, T, head dim} from a
 * small model's to GPT-2's. FLOPs counted as the plan counts them: the two products of every head over
 * the whole T×T square, 4·B·H·T²·D forward and twice that backward. */
static const int64_t attention_shapes[][4] = {{4, 4, 64, 32}, {4, 12, 64, 64}, {1, 12, 256, 64}};

typedef struct {
  AttnShape shape;
  act_t *all;            /* copies of q, k, v, out, dout, dq, dk, dv, one after another */
  real *lse;             /* copies of lse */
  int64_t n, rows, copies, next; /* elements of each tensor and of lse; copies; the next one timed */
} Attention;

static void run_attention(void *arg) {
  Attention *a = arg;
  int64_t i = a->next++ % a->copies, n = a->n;
  act_t *q = a->all + i * 8 * n;
  real *lse = a->lse + i * a->rows;
  k_attention_forward(&a->shape, q, q + n, q + 2 * n, q + 3 * n, lse);
  k_attention_backward(&a->shape, q, q + n, q + 2 * n, q + 3 * n, lse, q + 4 * n, q + 5 * n, q + 6 * n, q + 7 * n);
}

static void probe_attention(Comm *c, int print) {
  for (unsigned i = 0; i < sizeof attention_shapes / sizeof *attention_shapes; i++) {
    const int64_t *shape = attention_shapes[i];
    Attention a = {.shape = {.B = shape[0], .T = shape[2], .Hq = (int)shape[1], .Hkv = (int)shape[1], .D = (int)shape[3],
                             .causal = 1, .heads_total = (int)shape[1]},
                   .n = shape[0] * shape[1] * shape[2] * shape[3], .rows = shape[0] * shape[1] * shape[2]};
    a.copies = cold_copies(8.0 * (double)a.n * sizeof(act_t));
    a.all = cpu_alloc((size_t)(8 * a.n * a.copies), sizeof(act_t), "the probe's attention");
    a.lse = cpu_alloc((size_t)(a.rows * a.copies), sizeof(real), "the probe's attention");
    for (int64_t e = 0; e < 8 * a.n * a.copies; e++) a.all[e] = (act_t)((e % 11) - 5) / 16;
    run_attention(&a);
    double seconds = median_of(c, run_attention, &a);
    double flops = 12.0 * (double)(shape[0] * shape[1]) * (double)(shape[2] * shape[2]) * (double)shape[3];
    if (print) printf("attention %.17g %.9g\n", flops, seconds);
    free(a.all);
    free(a.lse);
  }
}

typedef struct {
  Comm *comm;
  float *buf;
  int64_t n;
} Reduce;

static void run_allreduce(void *arg) {
  Reduce *r = arg;
  comm_allreduce(r->comm, GROUP_WORLD, r->buf, r->n, COMM_F32, COMM_SUM);
}

static void probe_allreduce(Comm *c, int print) {
  if (comm_info(c)->world == 1) return;
  for (int64_t n = 256; n <= (1 << 22); n *= 4) {
    Reduce r = {c, cpu_alloc((size_t)n, sizeof(float), "the probe's all-reduce"), n};
    for (int64_t i = 0; i < n; i++) r.buf[i] = 0;
    run_allreduce(&r);
    double seconds = median_of(c, run_allreduce, &r);
    if (print) printf("allreduce %lld %.9g\n", (long long)(n * sizeof(float)), seconds);
    free(r.buf);
  }
}

static int probe_rank(Comm *c, void *arg) {
  (void)arg;
  const RankInfo *info = comm_info(c);
  device_init(comm_device_index(c), comm_ranks_on_machine(info->world));
  int print = info->rank == 0;
  if (print)
    printf("ranks %d\nbackend %s\ncores %d\nmemory_bytes %.0f\n", info->world, comm_backend_name(c), (int)sysconf(_SC_NPROCESSORS_ONLN),
           (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
  probe_gemms(c, print);
  probe_stream(c, print);
  probe_attention(c, print);
  probe_gelu(c, print);
  probe_allreduce(c, print);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  int ranks = argc == 2 ? atoi(argv[1]) : 0;
  if (ranks < 1) {
    fprintf(stderr, "usage: plait-probe RANKS (this machine measured as RANKS ranks share it)\n");
    return 2;
  }
  device_share(comm_ranks_on_machine(ranks));
  return comm_launch(ranks, 1, 1, probe_rank, NULL);
}
