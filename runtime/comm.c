/* comm.c: the communication layer's front: comm_launch picks the backend, the rank grid and its groups,
 * argument checks, failure, and the helpers every backend shares (ordered reductions, deadlines, the
 * worker that runs nonblocking all-reduces). */
#include "comm_backend.h"
#include "escape.h"
#include "message.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_WORLD = 1 << 20 };

/* ---- the grid ---------------------------------------------------------------------------------- */

int comm_grid_rank(int tp, int dp, int tp_r, int dp_r, int pp_r) {
  return tp_r + tp * (dp_r + dp * pp_r);
}

int comm_group_members(const CommGrid *grid, int rank, GroupKind g, int *members) {
  int tp = grid->tp, pp = grid->pp, dp = grid->dp, copies = grid->copies;
  int ep = grid->ep > 1 ? grid->ep : 1;
  int tp_r = rank % tp, dp_r = rank / tp % dp, pp_r = rank / (tp * dp), n = 0;
  switch (g) {
  case GROUP_WORLD:
    for (int r = 0; r < tp * pp * dp; r++) members[n++] = r;
    break;
  case GROUP_TP:
    for (int t = 0; t < tp; t++) members[n++] = comm_grid_rank(tp, dp, t, dp_r, pp_r);
    break;
  case GROUP_DP:
    for (int d = 0; d < dp; d++) members[n++] = comm_grid_rank(tp, dp, tp_r, d, pp_r);
    break;
  case GROUP_PP:
    for (int p = 0; p < pp; p++) members[n++] = comm_grid_rank(tp, dp, tp_r, dp_r, p);
    break;
  case GROUP_EMBED: /* the first and last stages hold the tied embedding; a middle stage is alone */
    if (pp_r != 0 && pp_r != pp - 1) {
      members[n++] = rank;
    } else {
      members[n++] = comm_grid_rank(tp, dp, tp_r, dp_r, 0);
      if (pp > 1) members[n++] = comm_grid_rank(tp, dp, tp_r, dp_r, pp - 1);
    }
    break;
  case GROUP_TP_COPIES:
    for (int t = tp_r / copies * copies; t < (tp_r / copies + 1) * copies; t++)
      members[n++] = comm_grid_rank(tp, dp, t, dp_r, pp_r);
    break;
  case GROUP_EP:
    for (int d = dp_r / ep * ep; d < (dp_r / ep + 1) * ep; d++)
      members[n++] = comm_grid_rank(tp, dp, tp_r, d, pp_r);
    break;
  case GROUP_EP_DP:
    for (int d = dp_r % ep; d < dp; d += ep) members[n++] = comm_grid_rank(tp, dp, tp_r, d, pp_r);
    break;
  case GROUP_COUNT:
    break;
  }
  return n;
}

const char *comm_group_name(GroupKind g) {
  static const char *const names[GROUP_COUNT] = {"world", "tp",        "dp", "pp",
                                                 "embed", "tp copies", "ep", "ep dp"};
  return names[g];
}

void comm_init(Comm *c, const CommOps *ops, const CommGrid *grid, int rank, double timeout,
               CommProcess *process) {
  int tp = grid->tp, pp = grid->pp, dp = grid->dp, world = tp * pp * dp;
  c->ops = ops;
  c->info = (RankInfo){.world = world, .rank = rank, .tp = tp, .dp = dp, .pp = pp,
                       .tp_rank = rank % tp, .dp_rank = rank / tp % dp, .pp_rank = rank / (tp * dp),
                       .tp_copies = grid->copies, .ep = grid->ep > 1 ? grid->ep : 1};
  c->info.ep_rank = c->info.dp_rank % c->info.ep;
  c->timeout = timeout;
  c->process = process;
  c->worker = NULL;
  for (int g = 0; g < GROUP_COUNT; g++) {
    CommGroup *group = &c->group[g];
    group->members = malloc(sizeof(int) * (size_t)world);
    group->size = comm_group_members(grid, rank, (GroupKind)g, group->members);
    for (int i = 0; i < group->size; i++)
      if (group->members[i] == rank) group->rank = i;
  }
}

void comm_release(Comm *c) {
  for (int g = 0; g < GROUP_COUNT; g++) free(c->group[g].members);
}

void comm_describe_group(const Comm *c, GroupKind g, char *out, size_t size) {
  const CommGroup *group = &c->group[g];
  size_t used = (size_t)snprintf(out, size, "rank%s", group->size > 1 ? "s" : "");
  for (int i = 0; i < group->size && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, " %d", group->members[i]);
}

/* ---- launching --------------------------------------------------------------------------------- */

static int timeout_from_env(double *seconds) {
  const char *text = getenv("PLAIT_COMM_TIMEOUT");
  char *end;
  *seconds = 300;
  if (!text) return 0;
  errno = 0;
  *seconds = strtod(text, &end);
  if (end == text || *end || errno || !isfinite(*seconds) || *seconds <= 0) {
    fprintf(stderr, "plait: PLAIT_COMM_TIMEOUT is '%s'; set it to a positive number of seconds (default 300)\n",
            text);
    return -1;
  }
  return 0;
}

/* The world a launcher announced in this process's environment, and its command for n ranks; 0 when
 * no launcher started the process. OpenMPI's variables come first: mpirun inside a Slurm job passes
 * the job's SLURM_* variables on to its ranks. */
static int launcher_world(const char **command) {
  const char *size;
  if ((size = getenv("OMPI_COMM_WORLD_SIZE"))) {
    *command = "mpirun -np";
  } else if (getenv("SLURM_PROCID") && getenv("SLURM_STEP_ID") &&
             ((size = getenv("SLURM_STEP_NUM_TASKS")) || (size = getenv("SLURM_NTASKS")))) {
    *command = "srun -n";
  } else if ((size = getenv("PMI_SIZE"))) {
    *command = "mpiexec -n";
  } else {
    return 0;
  }
  return atoi(size) > 0 ? atoi(size) : 0;
}

int comm_launch(int tp, int pp, int dp, RankMain fn, void *arg) {
  return comm_launch_copies(tp, 1, pp, dp, fn, arg);
}

int comm_launch_copies(int tp, int tp_copies, int pp, int dp, RankMain fn, void *arg) {
  return comm_launch_experts(tp, tp_copies, pp, dp, 1, fn, arg);
}

int comm_launch_experts(int tp, int tp_copies, int pp, int dp, int ep, RankMain fn, void *arg) {
  double timeout;
  const char *command = NULL;
  const CommGrid grid = {.tp = tp, .pp = pp, .dp = dp, .copies = tp_copies, .ep = ep};
  if (tp < 1 || pp < 1 || dp < 1) {
    fprintf(stderr, "plait: the grid tp·pp·dp = %d·%d·%d has a size below 1; every size must be at least 1\n",
            tp, pp, dp);
    return 1;
  }
  if ((int64_t)tp * pp * dp > MAX_WORLD) {
    fprintf(stderr, "plait: the grid tp·pp·dp = %d·%d·%d has more than %d ranks; choose smaller sizes\n",
            tp, pp, dp, MAX_WORLD);
    return 1;
  }
  if (tp_copies < 1 || tp % tp_copies != 0) {
    fprintf(stderr, "plait: %d ranks holding each key/value head do not divide tp = %d\n", tp_copies,
            tp);
    return 1;
  }
  if (ep < 1 || dp % ep != 0) {
    fprintf(stderr, "plait: %d ranks sharing out the experts do not divide dp = %d\n", ep, dp);
    return 1;
  }
  if (timeout_from_env(&timeout) != 0) return 1;
  int world = launcher_world(&command);
  if (!comm_ranks_are_processes()) return comm_local_launch(&grid, timeout, fn, arg);
#ifdef PLAIT_CUDA
  return comm_nccl_launch(&grid, timeout, world, command, fn, arg);
#else
  return comm_mpi_launch(&grid, timeout, world, command, fn, arg);
#endif
}

/* GPUs: processes (a launcher's, or RANK and WORLD_SIZE set) talk through NCCL; else threads share a GPU. */
int comm_ranks_are_processes(void) {
  const char *command;
#ifdef PLAIT_CUDA
  if (getenv("WORLD_SIZE")) return 1;
#endif
  return launcher_world(&command) > 0;
}

/* ---- queries ----------------------------------------------------------------------------------- */

static void check_group(Comm *c, GroupKind g, const char *fn) {
  if ((int)g < 0 || g >= GROUP_COUNT) comm_fail(c, "%s: %d is not a group kind", fn, (int)g);
}

const RankInfo *comm_info(const Comm *c) { return &c->info; }

int comm_group_size(const Comm *c, GroupKind g) {
  check_group((Comm *)c, g, "comm_group_size");
  return c->group[g].size;
}

int comm_group_rank(const Comm *c, GroupKind g) {
  check_group((Comm *)c, g, "comm_group_rank");
  return c->group[g].rank;
}

int comm_group_member(const Comm *c, GroupKind g, int i) {
  check_group((Comm *)c, g, "comm_group_member");
  if (i < 0 || i >= c->group[g].size)
    comm_fail((Comm *)c, "comm_group_member: member %d of the %s group, which has %d", i, comm_group_name(g),
              c->group[g].size);
  return c->group[g].members[i];
}

const char *comm_backend_name(const Comm *c) { return c->ops->name; }

int comm_ranks_on_machine(int world) {
  static const char *const local_size[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE", NULL};
  const char *command;
  if (!launcher_world(&command)) return world;
  for (int i = 0; local_size[i]; i++)
    if (getenv(local_size[i]) && atoi(getenv(local_size[i])) > 0) return atoi(getenv(local_size[i]));
  return 1;
}

int comm_ranks_per_node(int world, char *error, size_t len) {
  const char *text = getenv("PLAIT_RANKS_PER_NODE");
  if (!text) return comm_ranks_on_machine(world);
  char *end;
  long n = strtol(text, &end, 10);
  if (*text && !*end && n >= 1 && (n >= world || world % n == 0)) return n < world ? (int)n : world;
  char shown[ESCAPED_SIZE(64)];
  snprintf(error, len,
           "PLAIT_RANKS_PER_NODE=%s does not divide the %d ranks of the job into nodes; give a "
           "whole number that divides %d, or unset it",
           escape(ESC_TEXT, text, shown, sizeof shown), world, world);
  return -1;
}

/* Ranks that are threads share device 0; a process started by a launcher takes the one of its rank on
 * the node (OpenMPI's, Slurm's or torchrun-style LOCAL_RANK). */
int comm_device_index(const Comm *c) {
  static const char *const local_rank[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK", NULL};
  if (strcmp(c->ops->name, "local") == 0) return 0;
  for (int i = 0; local_rank[i]; i++)
    if (getenv(local_rank[i])) return atoi(getenv(local_rank[i]));
  return 0;
}

/* ---- collectives: checks, then the backend (a group of one needs no communication) ------------- */

static void check_count(Comm *c, const char *fn, const char *what, int64_t n) {
  if (n < 0) comm_fail(c, "%s: %s is %lld; it must not be negative", fn, what, (long long)n);
}

void comm_allreduce(Comm *c, GroupKind g, void *buf, int64_t n, CommType type, CommOp op) {
  check_group(c, g, "comm_allreduce");
  check_count(c, "comm_allreduce", "the element count", n);
  if (c->group[g].size > 1) c->ops->allreduce(c, g, buf, n, type, op);
}

void comm_allgather(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type) {
  check_group(c, g, "comm_allgather");
  check_count(c, "comm_allgather", "outer", outer);
  check_count(c, "comm_allgather", "inner", inner);
  if (c->group[g].size > 1) c->ops->allgather(c, g, in, out, outer, inner, type);
  else comm_copy(out, in, comm_type_size(type) * (size_t)(outer * inner));
}

void comm_reducescatter(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type) {
  check_group(c, g, "comm_reducescatter");
  check_count(c, "comm_reducescatter", "outer", outer);
  check_count(c, "comm_reducescatter", "inner", inner);
  if (c->group[g].size > 1) c->ops->reducescatter(c, g, in, out, outer, inner, type);
  else comm_copy(out, in, comm_type_size(type) * (size_t)(outer * inner));
}

void comm_broadcast(Comm *c, GroupKind g, void *buf, int64_t bytes, int root) {
  check_group(c, g, "comm_broadcast");
  check_count(c, "comm_broadcast", "the byte count", bytes);
  if (root < 0 || root >= c->group[g].size)
    comm_fail(c, "comm_broadcast: root %d is not a member of the %s group, which has %d", root, comm_group_name(g),
              c->group[g].size);
  if (c->group[g].size > 1) c->ops->broadcast(c, g, buf, bytes, root);
}

void comm_barrier(Comm *c, GroupKind g) {
  check_group(c, g, "comm_barrier");
  if (c->group[g].size > 1) c->ops->barrier(c, g);
}

/* ---- point to point ---------------------------------------------------------------------------- */

static void check_peer(Comm *c, const char *fn, int peer, int64_t n) {
  if (peer < 0 || peer >= c->info.world)
    comm_fail(c, "%s: peer %d is not a rank of this world of %d", fn, peer, c->info.world);
  check_count(c, fn, "the element count", n);
}

void comm_p2p_start(Comm *c) { c->ops->p2p_start(c); }

void comm_send(Comm *c, int peer, const void *buf, int64_t n, CommType type, int tag) {
  check_peer(c, "comm_send", peer, n);
  c->ops->send(c, peer, buf, n, type, tag);
}

void comm_recv(Comm *c, int peer, void *buf, int64_t n, CommType type, int tag) {
  check_peer(c, "comm_recv", peer, n);
  c->ops->recv(c, peer, buf, n, type, tag);
}

void comm_p2p_end(Comm *c) { c->ops->p2p_end(c); }

/* ---- nonblocking all-reduce -------------------------------------------------------------------- */

CommRequest *comm_allreduce_start(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op) {
  check_group(c, g, "comm_allreduce_start");
  check_count(c, "comm_allreduce_start", "the element count", n);
  return c->ops->reduce_start(c, g, buf, n, op, 0);
}

CommRequest *comm_reducescatter_start(Comm *c, GroupKind g, real *buf, int64_t n) {
  check_group(c, g, "comm_reducescatter_start");
  check_count(c, "comm_reducescatter_start", "the element count", n);
  return c->ops->reduce_start(c, g, buf, n, COMM_SUM, 1);
}

void comm_allgather_chunks(Comm *c, GroupKind g, void *buf, int64_t n, CommType type) {
  check_group(c, g, "comm_allgather_chunks");
  check_count(c, "comm_allgather_chunks", "the element count", n);
  if (c->group[g].size > 1) c->ops->allgather_chunks(c, g, buf, n, type);
}

void comm_wait(Comm *c, CommRequest *r) { c->ops->wait(c, r); }

/* ---- failure ----------------------------------------------------------------------------------- */

void comm_on_failure(Comm *c, const CommFailureHook *hook) { atomic_store(&c->process->hook, hook); }

static _Noreturn void fail_with(Comm *c, const char *message, int name_rank) {
  if (atomic_exchange(&c->process->failing, 1))
    for (;;) pause(); /* another thread of this process is already ending the job */
  fflush(stdout);
  if (name_rank) fprintf(stderr, "plait: rank %d: ", c->info.rank);
  else fprintf(stderr, "plait: ");
  escape_write(ESC_TEXT, message, stderr); /* a message may quote a checkpoint's text */
  fprintf(stderr, "\n");
  fflush(stderr);
  const CommFailureHook *hook = atomic_load(&c->process->hook);
  if (hook) hook->fn(hook->arg);
  if (c->ops->abort) c->ops->abort(c);
  _exit(1);
}

_Noreturn void comm_fail(Comm *c, const char *fmt, ...) {
  char message[MESSAGE_TEXT];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  fail_with(c, message, 1);
}

/* The speaker speaks for everyone; the others give it time to end the job, and speak only if it does not. */
_Noreturn void comm_fail_from(Comm *c, int speaker, int name_rank, const char *message) {
  if (c->info.rank != speaker) {
    double deadline = clock_seconds() + 10;
    while (clock_seconds() < deadline) usleep(10000);
  }
  fail_with(c, message, name_rank);
}

_Noreturn void comm_fail_all(Comm *c, const char *fmt, ...) {
  char message[MESSAGE_TEXT];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  comm_fail_from(c, 0, 1, message);
}

/* ---- helpers for the backends ------------------------------------------------------------------ */

size_t comm_type_size(CommType type) {
  return type == COMM_F32 ? sizeof(float) : type == COMM_F64 ? sizeof(double) : type == COMM_ACT ? sizeof(act_t) : sizeof(real);
}

void comm_chunk(int64_t n, int parts, int part, int64_t *lo, int64_t *hi) {
  int64_t chunk = (n + parts - 1) / parts;
  chunk = (chunk + 15) / 16 * 16; /* whole cache lines for both float and double */
  *lo = part * chunk < n ? part * chunk : n;
  *hi = *lo + chunk < n ? *lo + chunk : n;
}

/* The fold of comm_fold for one element type T, a block at a time so that each block of the
 * accumulator stays in L1 while every source is added to it:
 *   acc = src[0];  acc = acc ⊕ src[j] for j = 1 … count-1;  dst = acc
 * max is written so that a NaN in any source wins. */
#define DEFINE_FOLD(name, T)                                                                         \
  static void name(T *dst, const void *const *src, int count, int64_t n, CommOp op) {                \
    enum { BLOCK = 2048 };                                                                           \
    T acc[BLOCK];                                                                                    \
    for (int64_t b = 0; b < n; b += BLOCK) {                                                         \
      int64_t m = n - b < BLOCK ? n - b : BLOCK;                                                     \
      memcpy(acc, (const T *)src[0] + b, sizeof(T) * (size_t)m);                                     \
      for (int j = 1; j < count; j++) {                                                              \
        const T *x = (const T *)src[j] + b;                                                          \
        if (op == COMM_SUM)                                                                          \
          for (int64_t i = 0; i < m; i++) acc[i] += x[i];                                            \
        else                                                                                         \
          for (int64_t i = 0; i < m; i++) acc[i] = x[i] > acc[i] || x[i] != x[i] ? x[i] : acc[i];    \
      }                                                                                              \
      memcpy(dst + b, acc, sizeof(T) * (size_t)m);                                                   \
    }                                                                                                \
  }
DEFINE_FOLD(fold_f32, float)
DEFINE_FOLD(fold_f64, double)

void comm_fold_host(void *dst, const void *const *src, int count, int64_t n, CommType type, CommOp op) {
  if (comm_type_size(type) == sizeof(float)) fold_f32(dst, src, count, n, op);
  else fold_f64(dst, src, count, n, op);
}

#ifndef PLAIT_CUDA
/* The CPU build: every buffer is host memory, written by the time a rank calls the layer. */
void comm_fold(void *dst, const void *const *src, int count, int64_t n, CommType type, CommOp op) {
  comm_fold_host(dst, src, count, n, type, op);
}

void comm_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void comm_memory_ready(void) {}
#endif

void comm_cond_init(pthread_cond_t *cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

int comm_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, double deadline) {
  double whole = floor(deadline);
  struct timespec t = {.tv_sec = (time_t)whole, .tv_nsec = (long)((deadline - whole) * 1e9)};
  return pthread_cond_timedwait(cond, lock, &t) == ETIMEDOUT;
}

/* ---- the worker for nonblocking all-reduces ---------------------------------------------------- */

struct CommRequest {
  CommRequest *next; /* in the worker's queue */
  GroupKind group;
  real *buf;
  int64_t n;
  CommOp op;
  int scatter; /* the reduce-scatter half alone */
  int done;
};

struct CommWorker {
  Comm *comm;
  CommWorkerRun run;
  int threaded;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t queued, finished;
  CommRequest *head, *tail; /* started, not yet performed */
  int outstanding;          /* started, not yet waited for */
  int64_t performed;        /* all-reduces the thread has completed */
  int stop;
};

static void *worker_main(void *arg) {
  CommWorker *w = arg;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->head && !w->stop) pthread_cond_wait(&w->queued, &w->lock);
    CommRequest *r = w->head;
    if (!r) break;
    w->head = r->next;
    if (!w->head) w->tail = NULL;
    pthread_mutex_unlock(&w->lock);
    w->run(w->comm, r->group, r->buf, r->n, r->op, r->scatter);
    pthread_mutex_lock(&w->lock);
    r->done = 1;
    w->performed++;
    pthread_cond_broadcast(&w->finished);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

CommWorker *comm_worker_new(Comm *c, CommWorkerRun run, int threaded) {
  CommWorker *w = calloc(1, sizeof *w);
  w->comm = c;
  w->run = run;
  w->threaded = threaded;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->queued, NULL);
  comm_cond_init(&w->finished);
  int err = threaded ? pthread_create(&w->thread, NULL, worker_main, w) : 0;
  if (err) comm_fail(c, "cannot start the thread that runs nonblocking all-reduces: %s", strerror(err));
  return w;
}

void comm_worker_free(CommWorker *w) {
  if (w->threaded) {
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_signal(&w->queued);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
  }
  pthread_cond_destroy(&w->queued);
  pthread_cond_destroy(&w->finished);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

void comm_worker_check_idle(Comm *c) {
  if (c->worker->outstanding > 0)
    comm_fail(c, "returned with %d nonblocking all-reduce%s never waited for; call comm_wait on each",
              c->worker->outstanding, c->worker->outstanding > 1 ? "s" : "");
}

CommRequest *comm_worker_start(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op, int scatter) {
  CommWorker *w = c->worker;
  CommRequest *r = calloc(1, sizeof *r);
  *r = (CommRequest){.group = g, .buf = buf, .n = n, .op = op, .scatter = scatter};
  w->outstanding++;
  if (!w->threaded || c->group[g].size == 1) {
    if (c->group[g].size > 1) w->run(c, g, buf, n, op, scatter);
    r->done = 1;
    return r;
  }
  pthread_mutex_lock(&w->lock);
  if (w->tail) w->tail->next = r;
  else w->head = r;
  w->tail = r;
  pthread_cond_signal(&w->queued);
  pthread_mutex_unlock(&w->lock);
  return r;
}

/* The worker's own waits have deadlines and name who is missing; this one only catches a worker that
 * stops making progress, so it gives the worker a second more and starts over each time a request
 * ahead of r completes. */
void comm_worker_wait(Comm *c, CommRequest *r) {
  CommWorker *w = c->worker;
  pthread_mutex_lock(&w->lock);
  int64_t performed = w->performed;
  double deadline = clock_seconds() + c->timeout + 1;
  while (!r->done) {
    if (comm_cond_wait_until(&w->finished, &w->lock, deadline))
      comm_fail(c, "a nonblocking all-reduce of %lld elements on the %s group was not done after %g s; "
                "set PLAIT_COMM_TIMEOUT to wait longer", (long long)r->n, comm_group_name(r->group), c->timeout);
    if (w->performed != performed) {
      performed = w->performed;
      deadline = clock_seconds() + c->timeout + 1;
    }
  }
  pthread_mutex_unlock(&w->lock);
  w->outstanding--;
  free(r);
}
