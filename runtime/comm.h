/* comm.h: the communication interface generated programs use, whatever carries it: threads in one
 * process (local, the default), MPI processes (under mpirun or srun), or NCCL on GPUs.
 * Ranks form the grid rank = tp_r + tp·(dp_r + dp·pp_r), the data-parallel ranks cut into expert
 * groups of ep consecutive ones; the groups below are built eagerly, in this
 * fixed order, on every rank. No call returns an error: a failure anywhere ends the whole job with one
 * line naming the rank and the cause (comm_fail), and a wait that outlasts the timeout is a failure.
 * The members of a group make the same collective calls in the same order (the local backend checks
 * that they agree on the call and its sizes). */
#ifndef PLAIT_COMM_H
#define PLAIT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "real.h"

typedef enum {
  GROUP_WORLD,
  GROUP_TP,    /* same dp_r and pp_r: tensor-parallel peers */
  GROUP_DP,    /* same tp_r and pp_r: data-parallel replicas */
  GROUP_PP,    /* same tp_r and dp_r: the pipeline, in pp_r order */
  GROUP_EMBED, /* same tp_r and dp_r, pp_r 0 and pp - 1: holders of a tied embedding (one rank when pp = 1;
                  a middle stage is a group of its own, so its collectives on it do nothing) */
  /* same dp_r and pp_r, same tp_r / tp_copies: the TP ranks holding the same piece of a parameter
     split into fewer pieces than tp (key/value heads fewer than tp); one rank when tp_copies = 1 */
  GROUP_TP_COPIES,
  /* same tp_r and pp_r, same dp_r / ep: the ranks a mixture of experts spreads its experts over */
  GROUP_EP,
  /* same tp_r and pp_r, same dp_r mod ep: the data-parallel replicas of the same experts */
  GROUP_EP_DP,
  GROUP_COUNT
} GroupKind;

typedef enum { COMM_SUM, COMM_MAX } CommOp;
typedef enum { COMM_REAL, COMM_ACT, COMM_F32, COMM_F64 } CommType; /* real, act_t (activations), float, double */

typedef struct {
  int world, rank;
  int tp, dp, pp;
  int tp_rank, dp_rank, pp_rank;
  int tp_copies; /* consecutive TP ranks that form a GROUP_TP_COPIES */
  int ep, ep_rank; /* data-parallel ranks that share out the experts, and this rank's place there */
} RankInfo;

typedef struct Comm Comm;
typedef struct CommRequest CommRequest;

/* Runs fn once per rank of a tp·pp·dp grid and returns the process's exit status. Under a launcher
 * (mpirun, srun, mpiexec: OMPI_COMM_WORLD_SIZE, SLURM_PROCID with SLURM_STEP_ID, or PMI_SIZE in the
 * environment) this process is one rank and the launcher's world must be tp·pp·dp; otherwise the
 * ranks are threads of this process.
 * PLAIT_COMM_TIMEOUT (seconds, default 300) bounds every wait.
 * fn returns 0, or a status for the process (threads: the first non-zero one in rank order); errors
 * go through comm_fail. A bad grid, timeout or world size is refused with one line and status 1.
 * Under mpirun, -q keeps mpirun's own banners off stderr, and with them its line naming a rank that a
 * signal killed ("process rank N ... exited on signal 9"): leave -q out to learn which rank died. */
typedef int (*RankMain)(Comm *c, void *arg);
int comm_launch(int tp, int pp, int dp, RankMain fn, void *arg);
/* The same with GROUP_TP_COPIES of tp_copies consecutive TP ranks (tp_copies divides tp). */
int comm_launch_copies(int tp, int tp_copies, int pp, int dp, RankMain fn, void *arg);
/* The same with GROUP_EP of ep consecutive data-parallel ranks (ep divides dp). */
int comm_launch_experts(int tp, int tp_copies, int pp, int dp, int ep, RankMain fn, void *arg);

const RankInfo *comm_info(const Comm *c);
int comm_group_size(const Comm *c, GroupKind g);
int comm_group_rank(const Comm *c, GroupKind g);
/* The world rank of grid point (tp_r, dp_r, pp_r): tp_r + tp·(dp_r + dp·pp_r). */
int comm_grid_rank(int tp, int dp, int tp_r, int dp_r, int pp_r);
/* The world rank of member i of this rank's group g. */
int comm_group_member(const Comm *c, GroupKind g, int i);
const char *comm_backend_name(const Comm *c); /* "local" or "mpi" */
/* Whether comm_launch runs this process as one rank of a job a launcher started (mpirun, srun, mpiexec;
 * in the CUDA build also RANK and WORLD_SIZE for NCCL), rather than every rank as its threads. */
int comm_ranks_are_processes(void);
/* How many ranks of a world of `world` share this machine: all of them when they are threads of this
 * process; under a launcher, the ranks it put on this node. Known before comm_launch. */
int comm_ranks_on_machine(int world);
/* How many consecutive world ranks share a node (node of rank r: r / that): PLAIT_RANKS_PER_NODE
 * when set (to lay out nodes on one machine, as a launcher would), else comm_ranks_on_machine.
 * Returns -1 with one line in error when the variable is not a whole number dividing the world (or
 * one at least its size: one node). */
int comm_ranks_per_node(int world, char *error, size_t len);
/* The device this rank computes on: 0 for ranks that are threads, else the rank's place on its node. */
int comm_device_index(const Comm *c);

/* In place over n elements; every member gets the same bits: each element is folded over the members
 * in group order, ((x_0 ⊕ x_1) ⊕ x_2) ⊕ …, by every backend (so an MPI run matches a local one). */
void comm_allreduce(Comm *c, GroupKind g, void *buf, int64_t n, CommType type, CommOp op);

/* Gathers along an axis: in is [outer][inner] on each member; out is [outer][size·inner], member r's
 * block at out[o·size·inner + r·inner]. With outer = 1 this is the plain concatenation. in and out
 * must not overlap (here and in comm_reducescatter). */
void comm_allgather(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type);

/* The adjoint of comm_allgather: in is [outer][size·inner]; out[o·inner + i] is the sum over members
 * of their in[o·size·inner + r·inner + i], r this rank's place in the group (summed in group order). */
void comm_reducescatter(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type);

void comm_broadcast(Comm *c, GroupKind g, void *buf, int64_t bytes, int root);
void comm_barrier(Comm *c, GroupKind g);

/* Point to point between world ranks, in groups: every send and receive posted between p2p_start and
 * p2p_end is in flight at once, and p2p_end returns when all are complete. Messages between a pair of
 * ranks match in the order they were posted (tag: a check that both sides agree on what moves; a tag
 * or size that differs is a failure). Send and receive buffers belong to the layer until p2p_end.
 * Sends and receives outside p2p_start … p2p_end are failures. */
void comm_p2p_start(Comm *c);
void comm_send(Comm *c, int peer, const void *buf, int64_t n, CommType type, int tag);
void comm_recv(Comm *c, int peer, void *buf, int64_t n, CommType type, int tag);
void comm_p2p_end(Comm *c);

/* A nonblocking all-reduce (data-parallel gradient buckets), progressing while the caller computes:
 * a worker thread per rank runs the started all-reduces one at a time, in the order they were started
 * (the same on every member), apart from the rank's own collectives. buf belongs to the layer until
 * comm_wait, which frees the request; a rank must wait for every request before fn returns. */
CommRequest *comm_allreduce_start(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op);
/* The first half of that all-reduce (the distributed optimizer's gradient buckets): after
 * comm_wait, this member's chunk of buf (comm_chunk(n, size, rank)) holds the sum, with the bits
 * the all-reduce gives it; the rest of buf is unspecified. */
CommRequest *comm_reducescatter_start(Comm *c, GroupKind g, real *buf, int64_t n);
void comm_wait(Comm *c, CommRequest *r);

/* The second half, blocking and in place: each member's chunk of buf goes to every member. */
void comm_allgather_chunks(Comm *c, GroupKind g, void *buf, int64_t n, CommType type);
/* Elements [lo, hi) of n that member `part` of `parts` owns in the two calls above (and folds in an
 * all-reduce): chunks of whole cache lines, the last one shorter or empty. */
void comm_chunk(int64_t n, int parts, int part, int64_t *lo, int64_t *hi);

/* Ends the whole job: prints "plait: rank R: <message>" on stderr and makes every rank exit non-zero
 * (status 1). Callable from any thread; when several threads fail at once only the first prints. */
_Noreturn void comm_fail(Comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a failure every rank finds at once (a loss or gradient norm all ranks share): rank 0
 * reports it, so the job prints one line. */
_Noreturn void comm_fail_all(Comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a failure every rank knows of, found by rank `speaker` (its message broadcast to all):
 * that rank reports it, "plait: rank R: <message>", or "plait: <message>" when name_rank is 0 and the
 * message names the ranks itself; the others give it time to end the job. */
_Noreturn void comm_fail_from(Comm *c, int speaker, int name_rank, const char *message);

/* What must happen before a failure ends this process: fn(arg) runs once, in the thread that failed,
 * whichever rank of the process it is. fn may run while the thread that set it is anywhere, so it
 * should only make system calls on what it owns (rank 0 puts the run's log in place). The hook must
 * outlive its setting; comm_on_failure(c, NULL) clears it. */
typedef struct {
  void (*fn)(void *arg);
  void *arg;
} CommFailureHook;
void comm_on_failure(Comm *c, const CommFailureHook *hook);

#endif
