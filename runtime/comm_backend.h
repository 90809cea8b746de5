/* comm_backend.h: what a communication backend implements (CommOps) and the helpers comm.c shares
 * with every backend: the rank grid, groups, deadlines, ordered reductions, failure, and the
 * background worker that runs nonblocking all-reduces. Not for generated programs: they use comm.h. */
#ifndef PLAIT_COMM_BACKEND_H
#define PLAIT_COMM_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>

#include "clock.h"
#include "comm.h"

/* One backend: the operations of comm.h after comm.c has checked the arguments. Collectives are only
 * called on groups of two or more members. */
typedef struct {
  const char *name;
  void (*allreduce)(Comm *c, GroupKind g, void *buf, int64_t n, CommType type, CommOp op);
  void (*allgather)(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type);
  void (*reducescatter)(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type);
  void (*broadcast)(Comm *c, GroupKind g, void *buf, int64_t bytes, int root);
  void (*barrier)(Comm *c, GroupKind g);
  void (*p2p_start)(Comm *c);
  void (*send)(Comm *c, int peer, const void *buf, int64_t n, CommType type, int tag);
  void (*recv)(Comm *c, int peer, void *buf, int64_t n, CommType type, int tag);
  void (*p2p_end)(Comm *c);
  /* scatter: only this member's chunk of the sum is wanted (comm_reducescatter_start) */
  CommRequest *(*reduce_start)(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op, int scatter);
  void (*allgather_chunks)(Comm *c, GroupKind g, void *buf, int64_t n, CommType type);
  void (*wait)(Comm *c, CommRequest *r);
  /* Ends every rank of the job once comm_fail has printed its line; NULL where ending this process
   * is enough (all ranks are its threads). */
  void (*abort)(Comm *c);
} CommOps;

typedef struct {
  int size, rank; /* members, and this rank's place among them */
  int *members;   /* world ranks in group order */
} CommGroup;

typedef struct CommWorker CommWorker;

/* What the ranks of one process share: whether one of them is already ending the job, and what must
 * be done before the process ends on a failure (comm_on_failure). Zeroed is ready. */
typedef struct {
  atomic_int failing;
  _Atomic(const CommFailureHook *) hook;
} CommProcess;

/* The part of a rank every backend shares; a backend's own rank struct starts with it. */
struct Comm {
  const CommOps *ops;
  RankInfo info;
  CommGroup group[GROUP_COUNT];
  double timeout;       /* seconds any wait may last (PLAIT_COMM_TIMEOUT) */
  CommProcess *process; /* shared by the ranks of this process */
  CommWorker *worker;   /* runs nonblocking all-reduces, for backends that use comm_worker_* */
};

/* The grid: rank = tp_r + tp·(dp_r + dp·pp_r), each TP group cut into GROUP_TP_COPIES of `copies`
 * consecutive ranks, each DP group into GROUP_EP of `ep` consecutive ranks. The world ranks of
 * the members of rank's group g, in group order, go to
 * members (room for the world); returns their count. */
typedef struct {
  int tp, pp, dp, copies;
  int ep; /* consecutive data-parallel ranks of a GROUP_EP (0 or 1: each its own) */
} CommGrid;
int comm_group_members(const CommGrid *grid, int rank, GroupKind g, int *members);
const char *comm_group_name(GroupKind g);

/* Fills the shared part of rank `rank` of the grid; comm_release frees what it allocated. */
void comm_init(Comm *c, const CommOps *ops, const CommGrid *grid, int rank, double timeout,
               CommProcess *process);
void comm_release(Comm *c);

size_t comm_type_size(CommType type);

/* dst[i] = src[0][i] ⊕ src[1][i] ⊕ … ⊕ src[count-1][i] for i < n, folded left to right (⊕ is + or max,
 * max propagating NaN), so that every caller who folds the same sources gets the same bits. dst may be
 * one of the sources. comm_fold_host folds host memory; comm_fold any buffer of a collective. */
void comm_fold(void *dst, const void *const *src, int count, int64_t n, CommType type, CommOp op);
void comm_fold_host(void *dst, const void *const *src, int count, int64_t n, CommType type, CommOp op);

/* The memory of a collective's buffers: host memory in the CPU build; in the CUDA build host memory or
 * the GPU's (told apart by the pointer; runtime/cuda/comm_memory.cu). comm_copy and comm_fold return
 * when their result is in place. comm_memory_ready waits until the kernels this thread queued have
 * written its buffers, before another rank reads them. */
void comm_copy(void *dst, const void *src, size_t bytes);
void comm_memory_ready(void);

/* Deadlines: clock_seconds() (CLOCK_MONOTONIC), which comm_cond_init makes the clock of a condition
 * variable; comm_cond_wait_until returns 1 once the deadline has passed (the lock is held again either way). */
void comm_cond_init(pthread_cond_t *cond);
int comm_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, double deadline);

/* "ranks 0 2 4" for the message of a failure in group g. */
void comm_describe_group(const Comm *c, GroupKind g, char *out, size_t size);

/* The background worker: one thread per rank performs the queued reductions (all-reduces, or their
 * reduce-scatter half) one at a time, in the order they were started, through run (which must use its
 * own communicators or slots so that it never meets the rank's own collectives). With threaded = 0
 * comm_worker_start runs the reduction at once. */
typedef void (*CommWorkerRun)(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op, int scatter);
CommWorker *comm_worker_new(Comm *c, CommWorkerRun run, int threaded);
void comm_worker_free(CommWorker *w);
/* Fails if nonblocking all-reduces started by this rank were never waited for. */
void comm_worker_check_idle(Comm *c);
/* comm_allreduce_start and comm_wait for backends that use the worker. */
CommRequest *comm_worker_start(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op, int scatter);
void comm_worker_wait(Comm *c, CommRequest *r);

/* The backends' launchers: fn runs once per rank; they return the process's exit status. */
int comm_local_launch(const CommGrid *grid, double timeout, RankMain fn, void *arg);
/* world and launcher ("mpirun -np", "srun -n", "mpiexec -n") come from the launcher's environment. */
int comm_mpi_launch(const CommGrid *grid, double timeout, int world, const char *launcher, RankMain fn,
                    void *arg);
/* The CUDA build's backend for processes: NCCL, its unique id broadcast over MPI when a launcher
 * started the process (world > 0), else over TCP from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. */
int comm_nccl_launch(const CommGrid *grid, double timeout, int world, const char *launcher, RankMain fn,
                     void *arg);

#endif
