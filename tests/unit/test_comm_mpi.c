/* test_comm_mpi.c: the communication layer under whatever backend starts it, on the grid
 * tp·pp·dp = 2·2·1: under mpirun -np 4 the MPI backend (tests/cli/comm_mpi.sh runs it so), run directly
 * the local backend. With an argument it plays a failure for comm_mpi.sh: fail, kill, tag, timeout. */
#include <signal.h>
#include <unistd.h>

#include "comm_checks.h"

typedef void (*RankCheck)(Comm *c, Findings *f);

static void check_backend(Comm *c, Findings *f) {
  const char *expected = getenv("OMPI_COMM_WORLD_SIZE") ? "mpi" : "local";
  EXPECT(f, c, strcmp(comm_backend_name(c), expected) == 0, "backend %s, expected %s", comm_backend_name(c), expected);
}
static void ring_pp(Comm *c, Findings *f) { check_p2p_ring(c, f, GROUP_PP); }
static void ring_world(Comm *c, Findings *f) { check_p2p_ring(c, f, GROUP_WORLD); }
static void nonblocking_world(Comm *c, Findings *f) { check_nonblocking(c, f, GROUP_WORLD); }
static void nonblocking_pp(Comm *c, Findings *f) { check_nonblocking(c, f, GROUP_PP); }
static void chunks_world(Comm *c, Findings *f) { check_scatter_gather_chunks(c, f, GROUP_WORLD); }
static void barrier_world(Comm *c, Findings *f) { check_barrier(c, f, GROUP_WORLD); }

static const struct {
  const char *name;
  RankCheck check;
} checks[] = {
  {"backend", check_backend},
  {"groups", check_groups},
  {"allreduce_ordered_bits", check_allreduce},
  {"max_propagates_nan", check_max_nan},
  {"allgather", check_allgather},
  {"reducescatter", check_reducescatter},
  {"adjoint", check_adjoint},
  {"broadcast", check_broadcast},
  {"p2p_ring_pp", ring_pp},
  {"p2p_ring_world", ring_world},
  {"p2p_pairs_in_order", check_p2p_pairs},
  {"nonblocking_world", nonblocking_world},
  {"nonblocking_pp", nonblocking_pp},
  {"reducescatter_then_allgather_chunks", chunks_world},
  {"barrier", barrier_world},
};

/* Every rank runs every check; rank 0 prints PASS or FAIL (the name starts with the backend's) with
 * the count over all ranks, and a failing rank its first finding. */
static int run_checks(Comm *c, void *arg) {
  int failed = 0;
  (void)arg;
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    Findings f = {.lock = PTHREAD_MUTEX_INITIALIZER};
    checks[i].check(c, &f);
    double failures = f.failures;
    comm_allreduce(c, GROUP_WORLD, &failures, 1, COMM_F64, COMM_SUM);
    if (f.failures) printf("     %s: %s\n", checks[i].name, f.first);
    if (comm_info(c)->rank == 0) {
      if (failures) printf("FAIL %s_%s: %g failures over all ranks\n", comm_backend_name(c), checks[i].name, failures);
      else printf("PASS %s_%s\n", comm_backend_name(c), checks[i].name);
    }
    fflush(stdout);
    failed += failures > 0;
  }
  return failed > 0;
}

/* ---- failures played for comm_mpi.sh: rank 2 (or 1, or 3) goes wrong while the others all-reduce -- */

static void all_reduce_world(Comm *c) {
  real x[16] = {0};
  comm_allreduce(c, GROUP_WORLD, x, 16, COMM_REAL, COMM_SUM);
}

static int play_fail(Comm *c, void *arg) {
  (void)arg;
  if (comm_info(c)->rank == 2) comm_fail(c, "stopping on purpose");
  all_reduce_world(c);
  return 0;
}

static int play_kill(Comm *c, void *arg) {
  (void)arg;
  if (comm_info(c)->rank == 1) raise(SIGKILL);
  all_reduce_world(c);
  return 0;
}

static int play_tag(Comm *c, void *arg) {
  real x[8] = {0};
  (void)arg;
  if (comm_info(c)->rank < 2) {
    comm_p2p_start(c);
    if (comm_info(c)->rank == 0) comm_send(c, 1, x, 8, COMM_REAL, 5);
    else comm_recv(c, 0, x, 8, COMM_REAL, 6);
    comm_p2p_end(c);
  }
  all_reduce_world(c);
  return 0;
}

static int play_timeout(Comm *c, void *arg) {
  (void)arg;
  if (comm_info(c)->rank == 3) sleep(60);
  all_reduce_world(c);
  return 0;
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    RankMain play;
  } plays[] = {{"fail", play_fail}, {"kill", play_kill}, {"tag", play_tag}, {"timeout", play_timeout}};
  if (argc < 2) return comm_launch(2, 2, 1, run_checks, NULL);
  for (size_t i = 0; i < sizeof plays / sizeof plays[0]; i++)
    if (strcmp(argv[1], plays[i].name) == 0) return comm_launch(2, 2, 1, plays[i].play, NULL);
  fprintf(stderr, "test_comm_mpi: unknown failure '%s'; use fail, kill, tag or timeout\n", argv[1]);
  return 2;
}
