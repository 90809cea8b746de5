/* comm_checks.h: checks of the communication layer that every rank runs, whatever the backend; shared by
 * test_comm.c (local backend, many grids) and test_comm_mpi.c (one grid, under mpirun or not).
 * Each rank records what it found wrong in a Findings; the driver reports. */
#ifndef PLAIT_COMM_CHECKS_H
#define PLAIT_COMM_CHECKS_H

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "rank_findings.h"

static const char *const group_names[GROUP_COUNT] = {"world", "tp", "dp", "pp", "embed",
                                                     "tp copies", "ep", "ep dp"};

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- data: values that differ by rank and index, spread over magnitudes so that the order of a sum
 * shows in its bits ---------------------------------------------------------------------------------- */

static double sample(int rank, int64_t i, int salt) {
  uint64_t h = ((uint64_t)salt << 48) ^ ((uint64_t)rank << 32) ^ (uint64_t)i;
  h += 0x9e3779b97f4a7c15u; /* splitmix64 */
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
  h ^= h >> 31;
  double unit = (double)(h >> 11) * 0x1p-53 * 2 - 1;
  return ldexp(unit, (int)(h % 17) - 8);
}

static size_t type_bytes(CommType t) {
  return t == COMM_F32 ? sizeof(float) : t == COMM_F64 ? sizeof(double) : sizeof(real);
}

static void store(void *buf, CommType t, int64_t i, double v) {
  if (type_bytes(t) == sizeof(float)) ((float *)buf)[i] = (float)v;
  else ((double *)buf)[i] = v;
}

/* What the members' values at index i fold to, left to right in member order, in the precision of t. */
static void reference(void *out, CommType t, CommOp op, const int *members, int size, int64_t i, int salt) {
  if (type_bytes(t) == sizeof(float)) {
    float acc = (float)sample(members[0], i, salt);
    for (int k = 1; k < size; k++) {
      float x = (float)sample(members[k], i, salt);
      acc = op == COMM_SUM ? acc + x : x > acc ? x : acc;
    }
    *(float *)out = acc;
  } else {
    double acc = sample(members[0], i, salt);
    for (int k = 1; k < size; k++) {
      double x = sample(members[k], i, salt);
      acc = op == COMM_SUM ? acc + x : x > acc ? x : acc;
    }
    *(double *)out = acc;
  }
}

static void group_members(Comm *c, GroupKind g, int *members) {
  for (int i = 0; i < comm_group_size(c, g); i++) members[i] = comm_group_member(c, g, i);
}

/* Whether every member of g holds the same bytes: a hash of them, its max and min over the group. */
static int members_agree(Comm *c, GroupKind g, const void *buf, size_t bytes) {
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)buf)[i]) * 1099511628211u;
  double mine[2] = {(double)(h >> 12), -(double)(h >> 12)};
  comm_allreduce(c, g, mine, 2, COMM_F64, COMM_MAX);
  return mine[0] == -mine[1];
}

/* ---- the checks ------------------------------------------------------------------------------------ */

/* Every group against the grid rank = tp_r + tp·(dp_r + dp·pp_r), worked out from the coordinates. */
static void check_groups(Comm *c, Findings *f) {
  const RankInfo *in = comm_info(c);
  int tp = in->tp, dp = in->dp, pp = in->pp, ep = in->ep;
  EXPECT(f, c, in->world == tp * dp * pp, "world %d, grid %d·%d·%d", in->world, tp, pp, dp);
  EXPECT(f, c, in->rank == in->tp_rank + tp * (in->dp_rank + dp * in->pp_rank), "rank %d from (%d, %d, %d)", in->rank,
         in->tp_rank, in->dp_rank, in->pp_rank);
  for (int g = 0; g < GROUP_COUNT; g++) {
    int expected[4096], n = 0;
    for (int q = 0; q < in->world; q++) { /* world ranks in increasing order: the order of every axis */
      int t = q % tp, d = q / tp % dp, p = q / (tp * dp);
      int same_tp = t == in->tp_rank, same_dp = d == in->dp_rank, same_pp = p == in->pp_rank;
      int stage_end = in->pp_rank == 0 || in->pp_rank == pp - 1;
      int in_group = g == GROUP_WORLD                                   ? 1
                     : g == GROUP_TP                                    ? same_dp && same_pp
                     : g == GROUP_DP                                    ? same_tp && same_pp
                     : g == GROUP_PP                                    ? same_tp && same_dp
                     : g == GROUP_EP ? same_tp && same_pp && d / ep == in->dp_rank / ep
                     : g == GROUP_EP_DP ? same_tp && same_pp && d % ep == in->dp_rank % ep
                     : g == GROUP_TP_COPIES
                         ? same_dp && same_pp && t / in->tp_copies == in->tp_rank / in->tp_copies
                     : stage_end                                        ? same_tp && same_dp && (p == 0 || p == pp - 1)
                                                                        : q == in->rank;
      if (in_group) expected[n++] = q;
    }
    int size = comm_group_size(c, g);
    EXPECT(f, c, size == n, "%s group has %d members, expected %d", group_names[g], size, n);
    for (int i = 0; i < n && i < size; i++)
      EXPECT(f, c, comm_group_member(c, g, i) == expected[i], "%s group member %d is rank %d, expected %d",
             group_names[g], i, comm_group_member(c, g, i), expected[i]);
    int me = comm_group_rank(c, g);
    EXPECT(f, c, me >= 0 && me < size && comm_group_member(c, g, me) == in->rank, "%s group rank %d is not this rank",
           group_names[g], me);
  }
}

static void check_allreduce(Comm *c, Findings *f) {
  static const CommType types[] = {COMM_REAL, COMM_F32, COMM_F64};
  static const int64_t sizes[] = {1, 37, 5003};
  int members[4096], salt = 0;
  char want[8];
  double *buf = malloc(sizeof(double) * 5003);
  for (int g = 0; g < GROUP_COUNT; g++)
    for (int t = 0; t < 3; t++)
      for (int op = COMM_SUM; op <= COMM_MAX; op++)
        for (int s = 0; s < 3; s++) {
          int64_t n = sizes[s];
          int size = comm_group_size(c, g), bad = 0;
          size_t bytes = type_bytes(types[t]);
          group_members(c, g, members);
          salt++;
          for (int64_t i = 0; i < n; i++) store(buf, types[t], i, sample(comm_info(c)->rank, i, salt));
          comm_allreduce(c, g, buf, n, types[t], op);
          for (int64_t i = 0; i < n; i++) {
            reference(want, types[t], op, members, size, i, salt);
            if (memcmp((char *)buf + i * (int64_t)bytes, want, bytes) != 0 && bad++ == 0)
              EXPECT(f, c, 0, "%s all-reduce (%s, %zu-byte, n = %lld): element %lld differs from the ordered fold",
                     group_names[g], op == COMM_SUM ? "sum" : "max", bytes, (long long)n, (long long)i);
          }
          EXPECT(f, c, members_agree(c, g, buf, (size_t)n * bytes), "%s all-reduce: members hold different bits",
                 group_names[g]);
        }
  free(buf);
}

/* A NaN from any member wins a max, wherever it stands in the order. */
static void check_max_nan(Comm *c, Findings *f) {
  for (int g = 0; g < GROUP_COUNT; g++) {
    int size = comm_group_size(c, g), me = comm_group_rank(c, g);
    float x32[3] = {1, 2, (float)me};
    double x64[3] = {1, 2, me};
    if (me == 0) x32[0] = NAN, x64[0] = NAN;
    if (me == size - 1) x32[1] = NAN, x64[1] = NAN;
    comm_allreduce(c, g, x32, 3, COMM_F32, COMM_MAX);
    comm_allreduce(c, g, x64, 3, COMM_F64, COMM_MAX);
    EXPECT(f, c, isnan(x32[0]) && isnan(x32[1]) && x32[2] == size - 1, "%s f32 max: %g %g %g", group_names[g],
           x32[0], x32[1], x32[2]);
    EXPECT(f, c, isnan(x64[0]) && isnan(x64[1]) && x64[2] == size - 1, "%s f64 max: %g %g %g", group_names[g],
           x64[0], x64[1], x64[2]);
  }
}

static const int64_t shapes[][2] = {{1, 5}, {3, 4}, {2, 700}}; /* outer, inner */

static void check_allgather(Comm *c, Findings *f) {
  int members[4096];
  for (int g = 0; g < GROUP_COUNT; g++)
    for (int s = 0; s < 3; s++) {
      int64_t outer = shapes[s][0], inner = shapes[s][1];
      int size = comm_group_size(c, g), bad = 0;
      real *in = malloc(sizeof(real) * (size_t)(outer * inner)), *out = malloc(sizeof(real) * (size_t)(outer * size * inner));
      group_members(c, g, members);
      for (int64_t j = 0; j < outer * inner; j++) in[j] = (real)sample(comm_info(c)->rank, j, 100 + s);
      comm_allgather(c, g, in, out, outer, inner, COMM_REAL);
      for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < size; k++)
          for (int64_t i = 0; i < inner; i++)
            if (out[(o * size + k) * inner + i] != (real)sample(members[k], o * inner + i, 100 + s) && bad++ == 0)
              EXPECT(f, c, 0, "%s all-gather %lld×%lld: out[%lld][%d][%lld] is not member %d's in[%lld][%lld]",
                     group_names[g], (long long)outer, (long long)inner, (long long)o, k, (long long)i, k,
                     (long long)o, (long long)i);
      free(in);
      free(out);
    }
}

static void check_reducescatter(Comm *c, Findings *f) {
  int members[4096];
  for (int g = 0; g < GROUP_COUNT; g++)
    for (int s = 0; s < 3; s++) {
      int64_t outer = shapes[s][0], inner = shapes[s][1];
      int size = comm_group_size(c, g), me = comm_group_rank(c, g), bad = 0;
      real *in = malloc(sizeof(real) * (size_t)(outer * size * inner)), *out = malloc(sizeof(real) * (size_t)(outer * inner));
      group_members(c, g, members);
      for (int64_t j = 0; j < outer * size * inner; j++) in[j] = (real)sample(comm_info(c)->rank, j, 200 + s);
      comm_reducescatter(c, g, in, out, outer, inner, COMM_REAL);
      for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
          real want;
          reference(&want, COMM_REAL, COMM_SUM, members, size, (o * size + me) * inner + i, 200 + s);
          if (memcmp(&out[o * inner + i], &want, sizeof want) != 0 && bad++ == 0)
            EXPECT(f, c, 0, "%s reduce-scatter %lld×%lld: out[%lld][%lld] differs from the ordered sum",
                   group_names[g], (long long)outer, (long long)inner, (long long)o, (long long)i);
        }
      free(in);
      free(out);
    }
}

/* The two are each other's adjoint: Σ_ranks <allgather(x), y> = Σ_ranks <x, reducescatter(y)>. */
static void check_adjoint(Comm *c, Findings *f) {
  for (int g = 0; g < GROUP_COUNT; g++)
    for (int s = 0; s < 3; s++) {
      int64_t outer = shapes[s][0], inner = shapes[s][1], local = outer * inner;
      int size = comm_group_size(c, g), rank = comm_info(c)->rank;
      real *x = malloc(sizeof(real) * (size_t)local), *rx = malloc(sizeof(real) * (size_t)local);
      real *y = malloc(sizeof(real) * (size_t)(local * size)), *gx = malloc(sizeof(real) * (size_t)(local * size));
      for (int64_t j = 0; j < local; j++) x[j] = (real)sample(rank, j, 300 + s);
      for (int64_t j = 0; j < local * size; j++) y[j] = (real)sample(rank, j, 400 + s);
      comm_allgather(c, g, x, gx, outer, inner, COMM_REAL);
      comm_reducescatter(c, g, y, rx, outer, inner, COMM_REAL);
      double dots[2] = {0, 0}; /* <allgather(x), y>, <x, reducescatter(y)> */
      for (int64_t j = 0; j < local * size; j++) dots[0] += (double)gx[j] * (double)y[j];
      for (int64_t j = 0; j < local; j++) dots[1] += (double)x[j] * (double)rx[j];
      comm_allreduce(c, g, dots, 2, COMM_F64, COMM_SUM);
      EXPECT(f, c, fabs(dots[0] - dots[1]) <= 1e-5 * (fabs(dots[0]) + 1e-3),
             "%s group %lld×%lld: <allgather(x), y> = %.17g but <x, reducescatter(y)> = %.17g", group_names[g],
             (long long)outer, (long long)inner, dots[0], dots[1]);
      free(x);
      free(rx);
      free(y);
      free(gx);
    }
}

static void check_broadcast(Comm *c, Findings *f) {
  static const int64_t sizes[] = {37, 20000};
  for (int g = 0; g < GROUP_COUNT; g++)
    for (int s = 0; s < 2; s++)
      for (int root = 0; root < comm_group_size(c, g); root++) {
        unsigned char *buf = malloc((size_t)sizes[s]);
        int from = comm_group_member(c, g, root), bad = 0;
        for (int64_t i = 0; i < sizes[s]; i++) buf[i] = (unsigned char)(comm_info(c)->rank * 31 + i * 7);
        comm_broadcast(c, g, buf, sizes[s], root);
        for (int64_t i = 0; i < sizes[s]; i++)
          if (buf[i] != (unsigned char)(from * 31 + i * 7) && bad++ == 0)
            EXPECT(f, c, 0, "%s broadcast of %lld bytes from member %d: byte %lld differs", group_names[g],
                   (long long)sizes[s], root, (long long)i);
        free(buf);
      }
}

/* Around the ring of group g, both directions in one p2p group: to the next member (tag 1) and the
 * previous (tag 2); with two members both neighbours are the same rank, with one it is this rank. */
static void check_p2p_ring(Comm *c, Findings *f, GroupKind g) {
  enum { N = 3000 };
  int size = comm_group_size(c, g), me = comm_group_rank(c, g), rank = comm_info(c)->rank;
  int next = comm_group_member(c, g, (me + 1) % size), prev = comm_group_member(c, g, (me + size - 1) % size);
  real *out_next = malloc(sizeof(real) * N), *out_prev = malloc(sizeof(real) * N);
  real *from_prev = malloc(sizeof(real) * N), *from_next = malloc(sizeof(real) * N);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      out_next[i] = (real)sample(rank, i, 500 + round);
      out_prev[i] = (real)sample(rank, i, 600 + round);
    }
    comm_p2p_start(c);
    comm_send(c, next, out_next, N, COMM_REAL, 1);
    comm_send(c, prev, out_prev, N, COMM_REAL, 2);
    comm_recv(c, prev, from_prev, N, COMM_REAL, 1);
    comm_recv(c, next, from_next, N, COMM_REAL, 2);
    comm_p2p_end(c);
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += from_prev[i] != (real)sample(prev, i, 500 + round) || from_next[i] != (real)sample(next, i, 600 + round);
    EXPECT(f, c, bad == 0, "%s ring round %d: %d elements differ", group_names[g], round, bad);
  }
  free(out_next);
  free(out_prev);
  free(from_prev);
  free(from_next);
}

/* Ranks 2k and 2k+1 swap many messages of many sizes (one empty) in one p2p group; they must arrive
 * in the order they were posted. */
static void check_p2p_pairs(Comm *c, Findings *f) {
  enum { MESSAGES = 40 };
  int rank = comm_info(c)->rank, peer = rank ^ 1;
  if (peer >= comm_info(c)->world) return;
  real *out[MESSAGES], *in[MESSAGES];
  int64_t n[MESSAGES];
  comm_p2p_start(c);
  for (int m = 0; m < MESSAGES; m++) {
    n[m] = m == 7 ? 0 : m == 20 ? 100000 : m * 13 % 97 + 1;
    out[m] = malloc(sizeof(real) * (size_t)(n[m] + 1));
    in[m] = malloc(sizeof(real) * (size_t)(n[m] + 1));
    for (int64_t i = 0; i < n[m]; i++) out[m][i] = (real)sample(rank, i, 700 + m);
    comm_send(c, peer, out[m], n[m], COMM_REAL, 1000 + m);
    comm_recv(c, peer, in[m], n[m], COMM_REAL, 1000 + m);
  }
  comm_p2p_end(c);
  for (int m = 0; m < MESSAGES; m++) {
    int bad = 0;
    for (int64_t i = 0; i < n[m]; i++) bad += in[m][i] != (real)sample(peer, i, 700 + m);
    EXPECT(f, c, bad == 0, "message %d from rank %d: %d of %lld elements differ", m, peer, bad, (long long)n[m]);
    free(out[m]);
    free(in[m]);
  }
}

/* Buckets all-reduced on the worker while the rank runs blocking collectives and computes. Member 0
 * of g then watches its own buffer, calling nothing, until the sum lands in it: proof that the
 * all-reduce moves while the rank does not call the communication layer. */
static void check_nonblocking(Comm *c, Findings *f, GroupKind g) {
  enum { BUCKETS = 4 };
  static const int64_t sizes[BUCKETS] = {100000, 1, 4099, 20000};
  int members[4096], size = comm_group_size(c, g), rank = comm_info(c)->rank;
  real *bucket[BUCKETS], want;
  CommRequest *request[BUCKETS];
  group_members(c, g, members);
  for (int b = 0; b < BUCKETS; b++) {
    bucket[b] = malloc(sizeof(real) * (size_t)sizes[b]);
    for (int64_t i = 0; i < sizes[b]; i++) bucket[b][i] = (real)sample(rank, i, 800 + b);
    request[b] = comm_allreduce_start(c, g, bucket[b], sizes[b], COMM_SUM);
    real other[64];
    for (int i = 0; i < 64; i++) other[i] = (real)i;
    comm_allreduce(c, GROUP_TP, other, 64, COMM_REAL, COMM_SUM); /* the rank's own collectives go on */
  }
  int64_t last = sizes[0] - 1;
  reference(&want, COMM_REAL, COMM_SUM, members, size, last, 800);
  if (comm_group_rank(c, g) == 0 && size > 1) {
    /* Reads the buffer while the worker writes it, on purpose (ThreadSanitizer reports it). */
    volatile real *watched = &bucket[0][last];
    double give_up = seconds_now() + 30;
    while (*watched != want && seconds_now() < give_up) sched_yield();
    EXPECT(f, c, *watched == want, "%s group: the nonblocking all-reduce made no progress while the rank computed",
           group_names[g]);
  }
  for (int b = BUCKETS - 1; b >= 0; b--) {
    comm_wait(c, request[b]);
    int bad = 0;
    for (int64_t i = 0; i < sizes[b]; i++) {
      reference(&want, COMM_REAL, COMM_SUM, members, size, i, 800 + b);
      bad += memcmp(&bucket[b][i], &want, sizeof want) != 0;
    }
    EXPECT(f, c, bad == 0, "%s group bucket %d: %d of %lld elements differ from the ordered sum", group_names[g], b,
           bad, (long long)sizes[b]);
    free(bucket[b]);
  }
}

/* The distributed optimizer's halves of an all-reduce: a nonblocking reduce-scatter leaves each
 * member its chunk (comm_chunk) with the bits of the ordered sum, the rest of its buffer as it was
 * or anything; an all-gather of chunks then gives every member the whole sum. Sizes with empty and
 * short last chunks. */
static void check_scatter_gather_chunks(Comm *c, Findings *f, GroupKind g) {
  enum { BUCKETS = 4 };
  static const int64_t sizes[BUCKETS] = {1, 17, 4099, 100000};
  int members[4096], size = comm_group_size(c, g), me = comm_group_rank(c, g);
  int rank = comm_info(c)->rank;
  real *bucket[BUCKETS], want;
  CommRequest *request[BUCKETS];
  group_members(c, g, members);
  for (int b = 0; b < BUCKETS; b++) {
    bucket[b] = malloc(sizeof(real) * (size_t)sizes[b]);
    for (int64_t i = 0; i < sizes[b]; i++) bucket[b][i] = (real)sample(rank, i, 900 + b);
    request[b] = comm_reducescatter_start(c, g, bucket[b], sizes[b]);
  }
  for (int b = 0; b < BUCKETS; b++) {
    int64_t lo, hi;
    int bad = 0;
    comm_wait(c, request[b]);
    comm_chunk(sizes[b], size, me, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
      reference(&want, COMM_REAL, COMM_SUM, members, size, i, 900 + b);
      bad += memcmp(&bucket[b][i], &want, sizeof want) != 0;
    }
    comm_allgather_chunks(c, g, bucket[b], sizes[b], COMM_REAL);
    for (int64_t i = 0; i < sizes[b]; i++) {
      reference(&want, COMM_REAL, COMM_SUM, members, size, i, 900 + b);
      bad += memcmp(&bucket[b][i], &want, sizeof want) != 0;
    }
    EXPECT(f, c, bad == 0,
           "%s group bucket of %lld: %d elements differ from the ordered sum after the "
           "reduce-scatter and the all-gather of chunks",
           group_names[g], (long long)sizes[b], bad);
    free(bucket[b]);
  }
}

/* The last member of g arrives 200 ms late: nobody may leave the barrier before it. */
static void check_barrier(Comm *c, Findings *f, GroupKind g) {
  int size = comm_group_size(c, g);
  comm_barrier(c, g);
  double start = seconds_now();
  if (comm_group_rank(c, g) == size - 1) nanosleep(&(struct timespec){.tv_nsec = 200000000}, NULL);
  comm_barrier(c, g);
  double waited = seconds_now() - start;
  EXPECT(f, c, size == 1 || waited >= 0.1, "%s barrier: left after %.3f s, before its last member arrived",
         group_names[g], waited);
}

#endif
