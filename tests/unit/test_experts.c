/* test_experts.c: expert parallelism's exchange on the local backend (or under mpirun, as four
 * processes): uneven counts per rank and expert, a rank that sends an expert nothing and an expert
 * that receives no row; the rows land at their holders grouped by local expert, then by source,
 * nothing written past them; the reverse brings each row back to its place. The received rows'
 * count and the most of any rank; their buffers in the arena's room or of their own, kept. */
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "check.h"
#include "rank_findings.h"
#include "rt.h"

enum { EXPERTS = 4, ROUTED = 6, WIDTH = 3 };

/* Rows per expert that data-parallel rank r routes: each sums to ROUTED; expert 3 gets none,
 * rank 1 sends expert 0 nothing, rank 3 sends everything to expert 0. */
static const int32_t routed_counts[4][EXPERTS] = {{3, 1, 2, 0}, {0, 5, 1, 0}, {2, 2, 2, 0},
                                                  {6, 0, 0, 0}};

static double row_value(int world_rank, int64_t row, int64_t d) {
  return 1000.0 * (world_rank + 1) + 10.0 * row + (double)d;
}

/* The row `source` (an ep rank) routed as its j-th to global expert g. */
static double expected_value(Comm *c, int source, int64_t g, int64_t j, int64_t d) {
  int dp_rank = comm_info(c)->dp_rank / comm_info(c)->ep * comm_info(c)->ep + source;
  int64_t first = 0;
  for (int64_t f = 0; f < g; f++) first += routed_counts[dp_rank][f];
  return row_value(comm_group_member(c, GROUP_EP, source), first + j, d);
}

/* Checks the held rows: local expert e, then source, then that source's rows in order; returns
 * how many there are. */
static int64_t check_held(Comm *c, Findings *f, const act_t *held) {
  int ep = comm_info(c)->ep, me = comm_info(c)->ep_rank, dp_base = comm_info(c)->dp_rank - me;
  int64_t at = 0, local = EXPERTS / ep;
  for (int64_t e = 0; e < local; e++)
    for (int s = 0; s < ep; s++)
      for (int64_t j = 0; j < routed_counts[dp_base + s][me * local + e]; j++, at++)
        for (int64_t d = 0; d < WIDTH; d++)
          EXPECT(f, c, held[at * WIDTH + d] == expected_value(c, s, me * local + e, j, d),
                 "ep %d: held row %lld (expert %lld from %d) holds %g", ep, (long long)at,
                 (long long)e, s, (double)held[at * WIDTH + d]);
  for (int64_t i = at * WIDTH; i < (int64_t)ep * ROUTED * WIDTH; i++)
    EXPECT(f, c, held[i] == -1, "ep %d: element %lld past the held rows is %g", ep, (long long)i,
           (double)held[i]);
  return at;
}

/* The most rows any rank of this rank's ep group receives. */
static int64_t most_received(Comm *c) {
  int ep = comm_info(c)->ep, dp_base = comm_info(c)->dp_rank - comm_info(c)->ep_rank;
  int64_t most = 0, local = EXPERTS / ep;
  for (int holder = 0; holder < ep; holder++) {
    int64_t rows = 0;
    for (int s = 0; s < ep; s++)
      for (int64_t e = 0; e < local; e++) rows += routed_counts[dp_base + s][holder * local + e];
    if (rows > most) most = rows;
  }
  return most;
}

static int exchange_rank(Comm *c, void *arg) {
  Findings *f = arg;
  const RankInfo *in = comm_info(c);
  Run run = {.comm = c};
  int32_t all[4 * EXPERTS], local[EXPERTS];
  act_t rows[ROUTED * WIDTH], back[ROUTED * WIDTH], held[4 * ROUTED * WIDTH];
  for (int64_t i = 0; i < ROUTED * WIDTH; i++)
    rows[i] = (act_t)row_value(in->rank, i / WIDTH, i % WIDTH);
  for (size_t i = 0; i < sizeof held / sizeof *held; i++) held[i] = -1;
  rt_expert_counts(&run, EXPERTS, routed_counts[in->dp_rank], all, local);
  for (int64_t e = 0; e < EXPERTS / in->ep; e++) {
    int32_t sum = 0;
    for (int s = 0; s < in->ep; s++)
      sum += routed_counts[in->dp_rank - in->ep_rank + s][in->ep_rank * EXPERTS / in->ep + e];
    EXPECT(f, c, local[e] == sum, "ep %d: local expert %lld counts %d rows, expected %d", in->ep,
           (long long)e, local[e], sum);
  }
  int64_t received = rt_expert_held(&run, EXPERTS, all);
  rt_expert_send(&run, EXPERTS, WIDTH, all, rows, held);
  EXPECT(f, c, check_held(c, f, held) == received, "ep %d: rt_expert_held says %lld rows",
         in->ep, (long long)received);
  EXPECT(f, c, run.expert_rows.most == most_received(c), "ep %d: the most rows %lld, not %lld",
         in->ep, (long long)run.expert_rows.most, (long long)most_received(c));
  for (int64_t i = 0; i < (int64_t)in->ep * ROUTED * WIDTH; i++) held[i] *= 2;
  rt_expert_return(&run, EXPERTS, WIDTH, all, held, back);
  for (int64_t i = 0; i < ROUTED * WIDTH; i++)
    EXPECT(f, c, back[i] == 2 * rows[i], "ep %d: element %lld came back as %g, not %g", in->ep,
           (long long)i, (double)back[i], (double)(2 * rows[i]));
  return 0;
}

static void over_ep(int tp, int dp, int ep) {
  Findings f = {.lock = PTHREAD_MUTEX_INITIALIZER};
  int status = comm_launch_experts(tp, 1, 1, dp, ep, exchange_rank, &f);
  CHECK(status == 0, "tp %d dp %d ep %d: comm_launch_experts returned %d", tp, dp, ep, status);
  CHECK(f.failures == 0, "tp %d dp %d ep %d: %d failures, first %s", tp, dp, ep, f.failures,
        f.first);
}

static void test_exchange_ep2(void) { over_ep(1, 2, 2); }
static void test_exchange_ep2_of_dp4(void) { over_ep(1, 4, 2); }
static void test_exchange_ep4(void) { over_ep(1, 4, 4); }
static void test_exchange_beside_tp(void) { over_ep(2, 2, 2); }

/* Rows within the arena's room stay in place; more go to a buffer of the place and room, the same
 * one next time, grown when more are needed; another room at the same place has its own. */
static void test_row_buffers(void) {
  Run run = {0};
  act_t arena[64];
  CHECK(rt_expert_rows(&run, arena, 32, 32) == arena, "32 elements fit a room of 32");
  act_t *own = rt_expert_rows(&run, arena, 32, 40);
  CHECK(own != arena && run.expert_rows.count == 1, "40 elements get a buffer of their own");
  own[39] = 7;
  CHECK(rt_expert_rows(&run, arena, 32, 36) == own && own[39] == 7, "the buffer is kept");
  act_t *grown = rt_expert_rows(&run, arena, 32, 400);
  grown[399] = 1;
  CHECK(run.expert_rows.buffers[0].elems == 400, "the buffer grows to 400 elements");
  CHECK(rt_expert_rows(&run, arena, 16, 40) != grown && run.expert_rows.count == 2,
        "a room of 16 at the same place has its own buffer");
  rt_expert_rows_free(&run);
  CHECK(run.expert_rows.count == 0, "freed");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "mpi") == 0) { /* one grid, four processes under mpirun */
    Findings f = {.lock = PTHREAD_MUTEX_INITIALIZER};
    int status = comm_launch_experts(1, 1, 1, 4, 2, exchange_rank, &f);
    if (f.failures) printf("FAIL rank: %s\n", f.first);
    return status || f.failures;
  }
  RUN(test_exchange_ep2);
  RUN(test_exchange_ep2_of_dp4);
  RUN(test_exchange_ep4);
  RUN(test_exchange_beside_tp);
  RUN(test_row_buffers);
  TEST_EXIT();
}
