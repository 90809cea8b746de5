/* test_comm_faults.c: failures on the local backend end the whole process at once, with status 1 and
 * one line on stderr naming the rank and the cause. Run with a scenario's name, it plays that scenario;
 * run without, it plays each in a child process of its own and checks status, time and stderr. */
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "comm.h"

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the scenarios, as rank main functions ----------------------------------------------------- */

static void all_reduce_world(Comm *c) {
  real x[16] = {0};
  comm_allreduce(c, GROUP_WORLD, x, 16, COMM_REAL, COMM_SUM);
}

static int rank_fails(Comm *c, void *arg) {
  (void)arg;
  if (comm_info(c)->rank == 2) comm_fail(c, "the data file is missing (on purpose)");
  all_reduce_world(c);
  return 0;
}

/* Every rank fails at once, from four OpenMP threads each: still one line. */
static int all_fail(Comm *c, void *arg) {
  (void)arg;
  comm_barrier(c, GROUP_WORLD);
#pragma omp parallel num_threads(4)
  comm_fail(c, "failing everywhere at once (on purpose)");
  return 0;
}

static int rank_absent(Comm *c, void *arg) {
  (void)arg;
  if (comm_info(c)->rank == 3) sleep(60);
  all_reduce_world(c);
  return 0;
}

static int worker_times_out(Comm *c, void *arg) {
  real x[8] = {0};
  (void)arg;
  if (comm_info(c)->dp_rank == 1) sleep(60);
  comm_wait(c, comm_allreduce_start(c, GROUP_DP, x, 8, COMM_SUM));
  return 0;
}

static void exchange(Comm *c, int64_t sent, int sent_tag, int64_t wanted, int wanted_tag) {
  real x[16] = {0};
  comm_p2p_start(c);
  if (comm_info(c)->rank == 0) comm_send(c, 1, x, sent, COMM_REAL, sent_tag);
  else comm_recv(c, 0, x, wanted, COMM_REAL, wanted_tag);
  comm_p2p_end(c);
}

static int tag_mismatch(Comm *c, void *arg) {
  (void)arg;
  exchange(c, 8, 5, 8, 6);
  comm_barrier(c, GROUP_WORLD);
  return 0;
}

static int size_mismatch(Comm *c, void *arg) {
  (void)arg;
  exchange(c, 9, 5, 8, 5);
  comm_barrier(c, GROUP_WORLD);
  return 0;
}

static int never_sent(Comm *c, void *arg) {
  real x[8];
  (void)arg;
  if (comm_info(c)->rank == 0) sleep(60);
  comm_p2p_start(c);
  comm_recv(c, 0, x, 8, COMM_REAL, 1);
  comm_p2p_end(c);
  return 0;
}

static int sender_returns(Comm *c, void *arg) {
  real x[8];
  (void)arg;
  if (comm_info(c)->rank == 0) return 0;
  comm_p2p_start(c);
  comm_recv(c, 0, x, 8, COMM_REAL, 1);
  comm_p2p_end(c);
  return 0;
}

static int never_received(Comm *c, void *arg) {
  real x[4] = {0};
  (void)arg;
  comm_p2p_start(c);
  if (comm_info(c)->rank == 0) comm_send(c, 1, x, 4, COMM_REAL, 3);
  comm_p2p_end(c);
  return 0;
}

static int returns_early(Comm *c, void *arg) {
  (void)arg;
  if (comm_info(c)->rank == 1) return 0;
  comm_barrier(c, GROUP_WORLD);
  return 0;
}

static int collectives_differ(Comm *c, void *arg) {
  real x[4] = {0}, y[8];
  (void)arg;
  if (comm_info(c)->rank == 0) comm_allreduce(c, GROUP_WORLD, x, 4, COMM_F64, COMM_SUM);
  else comm_allgather(c, GROUP_WORLD, x, y, 1, 4, COMM_REAL);
  return 0;
}

static int request_not_waited(Comm *c, void *arg) {
  real x[4] = {0};
  (void)arg;
  comm_allreduce_start(c, GROUP_WORLD, x, 4, COMM_SUM);
  return 0;
}

static int send_outside_group(Comm *c, void *arg) {
  real x[4] = {0};
  (void)arg;
  comm_send(c, 0, x, 4, COMM_REAL, 1);
  return 0;
}

static int nothing(Comm *c, void *arg) {
  (void)c;
  (void)arg;
  return 0;
}

typedef struct {
  const char *name;
  int tp, pp, dp;
  RankMain play;
  const char *timeout;  /* PLAIT_COMM_TIMEOUT for the child, or NULL */
  double min_s, max_s;  /* how long the child may take */
  const char *expected; /* the one line on stderr (POSIX extended regex) */
} Scenario;

static const Scenario scenarios[] = {
  {"comm_fail_while_others_allreduce", 1, 1, 4, rank_fails, NULL, 0, 5,
   "^plait: rank 2: the data file is missing \\(on purpose\\)$"},
  {"comm_fail_from_every_thread_prints_once", 1, 1, 4, all_fail, NULL, 0, 5,
   "^plait: rank [0-3]: failing everywhere at once \\(on purpose\\)$"},
  {"absent_rank_times_out", 2, 1, 2, rank_absent, "2", 1.8, 10,
   "^plait: rank [0-2]: all-reduce on the world group \\(ranks 0 1 2 3\\): rank 3 never arrived within 2 s; "
   "set PLAIT_COMM_TIMEOUT to wait longer$"},
  {"nonblocking_allreduce_times_out", 1, 1, 2, worker_times_out, "1", 0.8, 10,
   "^plait: rank 0: nonblocking all-reduce on the dp group \\(ranks 0 1\\): rank 1 never arrived within 1 s; "
   "set PLAIT_COMM_TIMEOUT to wait longer$"},
  {"p2p_tag_mismatch", 1, 2, 1, tag_mismatch, NULL, 0, 5,
   "^plait: rank 1: receive from rank 0 expected tag 6 with 8 elements, found tag 5 with 8 elements$"},
  {"p2p_size_mismatch", 1, 2, 1, size_mismatch, NULL, 0, 5,
   "^plait: rank 1: receive from rank 0 expected tag 5 with 8 elements, found tag 5 with 9 elements$"},
  {"p2p_never_sent_times_out", 1, 2, 1, never_sent, "1", 0.8, 10,
   "^plait: rank 1: receive from rank 0 \\(tag 1, 8 elements\\): rank 0 sent nothing within 1 s; "
   "set PLAIT_COMM_TIMEOUT to wait longer$"},
  {"p2p_sender_returned", 1, 2, 1, sender_returns, NULL, 0, 5,
   "^plait: rank 1: receive from rank 0 \\(tag 1, 8 elements\\): rank 0 returned from its main function without "
   "sending it$"},
  {"p2p_never_received", 1, 2, 1, never_received, NULL, 0, 5,
   "^plait: rank 1: returned without receiving a message from rank 0 \\(tag 3, 4 elements\\)$"},
  {"rank_returns_while_others_wait", 1, 1, 2, returns_early, NULL, 0, 5,
   "^plait: rank 0: barrier on the world group \\(ranks 0 1\\): rank 1 returned from its main function without "
   "joining$"},
  {"different_collectives", 1, 1, 2, collectives_differ, NULL, 0, 5,
   "^plait: rank [01]: the members of the world group disagree: rank 0 calls all-reduce \\(sum, f64\\) of 4 elements, "
   "rank 1 calls all-gather of 1×4 elements$"},
  {"request_never_waited", 1, 1, 2, request_not_waited, NULL, 0, 5,
   "^plait: rank [01]: returned with 1 nonblocking all-reduce never waited for; call comm_wait on each$"},
  {"send_outside_p2p_group", 1, 1, 1, send_outside_group, NULL, 0, 5,
   "^plait: rank 0: comm_send outside comm_p2p_start … comm_p2p_end$"},
  {"bad_timeout_value", 1, 1, 1, nothing, "soon", 0, 5,
   "^plait: PLAIT_COMM_TIMEOUT is 'soon'; set it to a positive number of seconds \\(default 300\\)$"},
  {"bad_grid", 0, 1, 2, nothing, NULL, 0, 5,
   "^plait: the grid tp·pp·dp = 0·1·2 has a size below 1; every size must be at least 1$"},
};

enum { SCENARIOS = sizeof scenarios / sizeof scenarios[0] };

/* ---- the parent: each scenario in a child process ---------------------------------------------- */

/* Runs this program with the scenario's name, stderr into err_path; returns the wait status, or -1
 * when it had to be killed after max_s. */
static int run_child(const Scenario *s, const char *err_path, double *seconds) {
  double start = seconds_now();
  pid_t pid = fork();
  if (pid == 0) {
    int err = open(err_path, O_WRONLY | O_TRUNC), null = open("/dev/null", O_WRONLY);
    dup2(err, 2);
    dup2(null, 1);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    unsetenv("SLURM_PROCID");
    if (s->timeout) setenv("PLAIT_COMM_TIMEOUT", s->timeout, 1);
    else unsetenv("PLAIT_COMM_TIMEOUT");
    execl("/proc/self/exe", "test_comm_faults", s->name, (char *)NULL);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (seconds_now() - start > s->max_s + 5) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
  }
  *seconds = seconds_now() - start;
  return status;
}

static void scenario_test(void) {
  const Scenario *s = NULL;
  for (int i = 0; i < SCENARIOS; i++)
    if (strcmp(scenarios[i].name, test_run.name) == 0) s = &scenarios[i];
  char err_path[] = "/tmp/plait-comm-faults-XXXXXX", err[2048] = "";
  int fd = mkstemp(err_path);
  double seconds = 0;
  int status = run_child(s, err_path, &seconds);
  ssize_t got = read(fd, err, sizeof err - 1);
  err[got > 0 ? got : 0] = 0;
  close(fd);
  unlink(err_path);
  int lines = 0;
  for (char *p = err; *p; p++) lines += *p == '\n';
  if (lines == 1) err[strlen(err) - 1] = 0;
  regex_t pattern;
  regcomp(&pattern, s->expected, REG_EXTENDED | REG_NOSUB);
  CHECK(status != -1, "still running after %g s", s->max_s + 5);
  CHECK(status == -1 || (WIFEXITED(status) && WEXITSTATUS(status) == 1), "wait status %d, expected exit status 1",
        status);
  CHECK(status == -1 || (seconds >= s->min_s && seconds <= s->max_s), "took %.2f s, expected %g to %g s", seconds,
        s->min_s, s->max_s);
  CHECK(lines == 1, "%d lines on stderr: %s", lines, err);
  CHECK(regexec(&pattern, err, 0, NULL, 0) == 0, "stderr '%s' does not match '%s'", err, s->expected);
  regfree(&pattern);
}

int main(int argc, char **argv) {
  for (int i = 0; argc > 1 && i < SCENARIOS; i++)
    if (strcmp(argv[1], scenarios[i].name) == 0)
      return comm_launch(scenarios[i].tp, scenarios[i].pp, scenarios[i].dp, scenarios[i].play, NULL);
  if (argc > 1) {
    fprintf(stderr, "test_comm_faults: no scenario '%s'\n", argv[1]);
    return 2;
  }
  for (int i = 0; i < SCENARIOS; i++) run_test(scenarios[i].name, scenario_test);
  TEST_EXIT();
}
