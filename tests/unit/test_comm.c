/* test_comm.c: the communication layer on the local backend over many grids: groups against the grid
 * formula, collectives against ordered serial references, point to point, nonblocking all-reduce,
 * barriers. */
#include "check.h"
#include "comm_checks.h"

typedef void (*RankCheck)(Comm *c, Findings *f);

typedef struct {
  RankCheck check;
  Findings findings;
} Job;

static int run_check(Comm *c, void *arg) {
  Job *job = arg;
  job->check(c, &job->findings);
  return 0;
}

/* tp, pp, dp, the TP ranks of a GROUP_TP_COPIES (key/value heads held by several ranks), and the
 * DP ranks of a GROUP_EP (experts spread over them) */
static const int grids[][5] = {{1, 1, 1, 1, 1}, {2, 1, 1, 1, 1}, {1, 2, 1, 1, 1}, {1, 1, 2, 1, 1},
                               {2, 2, 1, 1, 1}, {2, 2, 2, 1, 1}, {1, 4, 1, 1, 1}, {4, 1, 1, 2, 1},
                               {4, 2, 1, 4, 1}, {2, 1, 2, 2, 1}, {1, 1, 4, 1, 2}, {2, 2, 2, 1, 2}};

/* Runs check on every rank of every grid. */
static void over_grids(RankCheck check) {
  for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++) {
    int tp = grids[i][0], pp = grids[i][1], dp = grids[i][2];
    Job job = {.check = check, .findings = {.lock = PTHREAD_MUTEX_INITIALIZER}};
    int status = comm_launch_experts(tp, grids[i][3], pp, dp, grids[i][4], run_check, &job);
    CHECK(status == 0, "tp=%d pp=%d dp=%d: comm_launch returned %d", tp, pp, dp, status);
    CHECK(job.findings.failures == 0, "tp=%d pp=%d dp=%d: %d failures, first %s", tp, pp, dp, job.findings.failures,
          job.findings.first);
  }
}

static void check_backend(Comm *c, Findings *f) {
  EXPECT(f, c, strcmp(comm_backend_name(c), "local") == 0, "backend %s", comm_backend_name(c));
}
static void ring_pp(Comm *c, Findings *f) { check_p2p_ring(c, f, GROUP_PP); }
static void ring_world(Comm *c, Findings *f) { check_p2p_ring(c, f, GROUP_WORLD); }
static void nonblocking_dp(Comm *c, Findings *f) { check_nonblocking(c, f, GROUP_DP); }
static void nonblocking_world(Comm *c, Findings *f) { check_nonblocking(c, f, GROUP_WORLD); }
static void chunks_dp(Comm *c, Findings *f) { check_scatter_gather_chunks(c, f, GROUP_DP); }
static void chunks_world(Comm *c, Findings *f) { check_scatter_gather_chunks(c, f, GROUP_WORLD); }
static void barrier_world(Comm *c, Findings *f) { check_barrier(c, f, GROUP_WORLD); }
static void barrier_pp(Comm *c, Findings *f) { check_barrier(c, f, GROUP_PP); }

static void test_backend_is_local(void) { over_grids(check_backend); }
static void test_groups(void) { over_grids(check_groups); }
static void test_allreduce(void) { over_grids(check_allreduce); }
static void test_max_propagates_nan(void) { over_grids(check_max_nan); }
static void test_allgather(void) { over_grids(check_allgather); }
static void test_reducescatter(void) { over_grids(check_reducescatter); }
static void test_allgather_reducescatter_adjoint(void) { over_grids(check_adjoint); }
static void test_broadcast(void) { over_grids(check_broadcast); }
static void test_p2p_ring_pp(void) { over_grids(ring_pp); }
static void test_p2p_ring_world(void) { over_grids(ring_world); }
static void test_p2p_pairs_in_order(void) { over_grids(check_p2p_pairs); }
static void test_nonblocking_dp(void) { over_grids(nonblocking_dp); }
static void test_nonblocking_world(void) { over_grids(nonblocking_world); }
static void test_reducescatter_then_allgather_chunks_dp(void) { over_grids(chunks_dp); }
static void test_reducescatter_then_allgather_chunks_world(void) { over_grids(chunks_world); }
static void test_barrier_world(void) { over_grids(barrier_world); }
static void test_barrier_pp(void) { over_grids(barrier_pp); }

int main(void) {
  RUN(test_backend_is_local);
  RUN(test_groups);
  RUN(test_allreduce);
  RUN(test_max_propagates_nan);
  RUN(test_allgather);
  RUN(test_reducescatter);
  RUN(test_allgather_reducescatter_adjoint);
  RUN(test_broadcast);
  RUN(test_p2p_ring_pp);
  RUN(test_p2p_ring_world);
  RUN(test_p2p_pairs_in_order);
  RUN(test_nonblocking_dp);
  RUN(test_nonblocking_world);
  RUN(test_reducescatter_then_allgather_chunks_dp);
  RUN(test_reducescatter_then_allgather_chunks_world);
  RUN(test_barrier_world);
  RUN(test_barrier_pp);
  TEST_EXIT();
}
