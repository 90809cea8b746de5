/* comm_mpi.c: the MPI backend: this process is one rank of a job that mpirun or srun started.
 *
 * Every operation is a nonblocking MPI call polled until a deadline, so that any wait can time out.
 * Sums are not left to MPI's reductions, whose order depends on the algorithm MPI picks: an all-reduce
 * is an all-to-all of chunks, each member folds its chunk in member order, and an all-gather of the
 * folded chunks. Every member, and a run of the same plan with the local backend, gets the same bits,
 * for the traffic of a ring all-reduce (each rank sends and receives 2·(n−1)/n of the buffer).
 *
 * Nonblocking all-reduces run on a worker thread with communicators of their own (duplicates of the
 * groups), which needs MPI_THREAD_MULTIPLE; where the library gives less, they run at once inside
 * comm_allreduce_start. MPI moves an operation forward only inside MPI calls, so the worker keeps
 * testing its request while the rank computes. */
#include "comm_backend.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank's own calls and its worker's use separate communicators and scratch. */
enum { CHANNEL_RANK, CHANNEL_WORKER, CHANNELS };

typedef struct {
  MPI_Comm group[GROUP_COUNT];
  char *scratch[2];
  size_t scratch_room[2];
  int *layout[4];       /* send counts, send offsets, receive counts, receive offsets: one per member */
  const void **sources; /* the operands of a fold, one per member */
} MpiChannel;

typedef struct {
  int send, peer, tag;
  int64_t n;
  CommType type;
} MpiTransfer;

typedef struct {
  Comm comm; /* first: an MpiRank is its Comm */
  MpiChannel channel[CHANNELS];
  CommProcess process;
  int tag_ub;
  int in_p2p;
  MpiTransfer *transfers; /* posted in the current p2p group, with their requests */
  MPI_Request *requests;
  MPI_Status *statuses;
  int *completed;
  int ntransfers, transfers_room;
} MpiRank;

static MpiRank *mp_rank(Comm *c) { return (MpiRank *)c; }

static void mp_check(MpiRank *m, int rc, const char *call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length;
  MPI_Error_string(rc, text, &length);
  comm_fail(&m->comm, "%s failed: %s", call, text);
}

/* n as an MPI count, which is an int. */
static int mp_count(MpiRank *m, int64_t n, const char *op) {
  if (n > INT_MAX)
    comm_fail(&m->comm, "%s of %lld elements is more than MPI's counts hold (%d); split it", op, (long long)n,
              INT_MAX);
  return (int)n;
}

static MPI_Datatype mp_type(CommType type) {
  return comm_type_size(type) == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE;
}

/* Scratch buffer `which` of channel x with room for at least `bytes`. */
static void *mp_scratch(MpiRank *m, MpiChannel *x, int which, size_t bytes) {
  if (!x->scratch[which] || bytes > x->scratch_room[which]) {
    free(x->scratch[which]);
    x->scratch_room[which] = bytes > 4096 ? bytes : 4096;
    x->scratch[which] = malloc(x->scratch_room[which]);
    if (!x->scratch[which]) comm_fail(&m->comm, "no memory for %zu bytes of scratch", x->scratch_room[which]);
  }
  return x->scratch[which];
}

/* Tests at full speed for a while, then yields the core, then sleeps 20 µs between tests, so that a
 * long wait does not take a core from the ranks that compute. */
static void mp_pause(int tries) {
  if (tries < 100) return;
  if (tries < 1000) sched_yield();
  else nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
}

/* Polls a collective's request until it completes or the deadline passes. Processes cannot agree on
 * who reports a member that never came, so member k of the group waits 0.2·k s longer (k ≤ 10): the
 * first to give up usually ends the job before the others print a line of their own. */
static void mp_wait(MpiRank *m, MPI_Request *request, const char *op, GroupKind g) {
  int place = m->comm.group[g].rank < 10 ? m->comm.group[g].rank : 10;
  double deadline = clock_seconds() + m->comm.timeout + 0.2 * place;
  for (int tries = 0;; tries++) {
    int done;
    mp_check(m, MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (clock_seconds() > deadline) {
      char members[256];
      comm_describe_group(&m->comm, g, members, sizeof members);
      comm_fail(&m->comm, "%s on the %s group (%s) was not complete within %g s: a member never arrived; "
                "set PLAIT_COMM_TIMEOUT to wait longer", op, comm_group_name(g), members, m->comm.timeout);
    }
    mp_pause(tries);
  }
}

/* ---- collectives ------------------------------------------------------------------------------- */

/* Each member's chunk of buf (comm_chunk) to every member, in place; x->layout[0] and [1] are the
 * chunks' counts and offsets. */
static void mp_gather_chunks(MpiRank *m, MpiChannel *x, GroupKind g, void *buf, MPI_Datatype t,
                             const char *name) {
  MPI_Request request;
  mp_check(m, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, x->layout[0], x->layout[1],
                              t, x->group[g], &request), "MPI_Iallgatherv");
  mp_wait(m, &request, name, g);
}

/* An all-to-all of chunks, each member folding its own in member order; then, unless scatter, the
 * folded chunks gathered. */
static void mp_reduce_on(MpiRank *m, int channel, GroupKind g, void *buf, int64_t n, CommType type,
                         CommOp op, int scatter) {
  const char *name = channel == CHANNEL_RANK ? "all-reduce"
                     : scatter             ? "nonblocking reduce-scatter"
                                           : "nonblocking all-reduce";
  MpiChannel *x = &m->channel[channel];
  int size = m->comm.group[g].size, me = m->comm.group[g].rank;
  size_t bytes = comm_type_size(type);
  MPI_Datatype t = mp_type(type);
  MPI_Request request;
  int64_t lo, hi, mine_lo, mine_hi;
  mp_count(m, n + 16 * (int64_t)size, name); /* every offset and count below fits an int */
  comm_chunk(n, size, me, &mine_lo, &mine_hi);
  int mine = (int)(mine_hi - mine_lo);
  char *rows = mp_scratch(m, x, 0, (size_t)size * (size_t)mine * bytes);
  for (int k = 0; k < size; k++) { /* chunk k of buf goes to member k; row k of rows comes from member k */
    comm_chunk(n, size, k, &lo, &hi);
    x->layout[0][k] = (int)(hi - lo);
    x->layout[1][k] = (int)lo;
    x->layout[2][k] = mine;
    x->layout[3][k] = k * mine;
    x->sources[k] = rows + (size_t)k * (size_t)mine * bytes;
  }
  mp_check(m, MPI_Ialltoallv(buf, x->layout[0], x->layout[1], t, rows, x->layout[2], x->layout[3], t, x->group[g],
                             &request), "MPI_Ialltoallv");
  mp_wait(m, &request, name, g);
  comm_fold((char *)buf + mine_lo * (int64_t)bytes, x->sources, size, mine, type, op);
  if (!scatter) mp_gather_chunks(m, x, g, buf, t, name);
}

static void mp_allreduce(Comm *c, GroupKind g, void *buf, int64_t n, CommType type, CommOp op) {
  mp_reduce_on(mp_rank(c), CHANNEL_RANK, g, buf, n, type, op, 0);
}

static void mp_worker_reduce(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op, int scatter) {
  mp_reduce_on(mp_rank(c), CHANNEL_WORKER, g, buf, n, COMM_REAL, op, scatter);
}

static void mp_allgather_chunks(Comm *c, GroupKind g, void *buf, int64_t n, CommType type) {
  MpiRank *m = mp_rank(c);
  MpiChannel *x = &m->channel[CHANNEL_RANK];
  int64_t lo, hi;
  mp_count(m, n + 16 * (int64_t)c->group[g].size, "all-gather of chunks");
  for (int k = 0; k < c->group[g].size; k++) {
    comm_chunk(n, c->group[g].size, k, &lo, &hi);
    x->layout[0][k] = (int)(hi - lo);
    x->layout[1][k] = (int)lo;
  }
  mp_gather_chunks(m, x, g, buf, mp_type(type), "all-gather of chunks");
}

/* MPI gathers whole blocks [member][outer][inner]; with outer > 1 they are permuted into
 *   out[o][k][i] = block_k[o][i] */
static void mp_allgather(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type) {
  MpiRank *m = mp_rank(c);
  MpiChannel *x = &m->channel[CHANNEL_RANK];
  int size = c->group[g].size, block = mp_count(m, outer * inner, "all-gather");
  size_t e = comm_type_size(type);
  MPI_Datatype t = mp_type(type);
  char *blocks = outer == 1 ? out : mp_scratch(m, x, 0, e * (size_t)size * (size_t)block);
  MPI_Request request;
  mp_check(m, MPI_Iallgather(in, block, t, blocks, block, t, x->group[g], &request), "MPI_Iallgather");
  mp_wait(m, &request, "all-gather", g);
  if (outer == 1) return;
  for (int k = 0; k < size; k++)
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)out + (size_t)((o * size + k) * inner) * e, blocks + (size_t)(((int64_t)k * outer + o) * inner) * e,
             e * (size_t)inner);
}

/* in[o][k][i] is packed into blocks [k][o][i] (already so when outer = 1), an all-to-all sends block k to
 * member k, and each member folds what it received in member order:
 *   out[o][i] = recv_0[o][i] + recv_1[o][i] + … */
static void mp_reducescatter(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner,
                             CommType type) {
  MpiRank *m = mp_rank(c);
  MpiChannel *x = &m->channel[CHANNEL_RANK];
  int size = c->group[g].size, block = mp_count(m, outer * inner, "reduce-scatter");
  size_t e = comm_type_size(type), all = e * (size_t)size * (size_t)block;
  MPI_Datatype t = mp_type(type);
  const void *send = in;
  if (outer > 1) {
    char *packed = mp_scratch(m, x, 1, all);
    for (int k = 0; k < size; k++)
      for (int64_t o = 0; o < outer; o++)
        memcpy(packed + (size_t)(((int64_t)k * outer + o) * inner) * e, (const char *)in + (size_t)((o * size + k) * inner) * e,
               e * (size_t)inner);
    send = packed;
  }
  char *received = mp_scratch(m, x, 0, all);
  MPI_Request request;
  mp_check(m, MPI_Ialltoall(send, block, t, received, block, t, x->group[g], &request), "MPI_Ialltoall");
  mp_wait(m, &request, "reduce-scatter", g);
  for (int64_t o = 0; o < outer; o++) {
    for (int k = 0; k < size; k++) x->sources[k] = received + (size_t)(((int64_t)k * outer + o) * inner) * e;
    comm_fold((char *)out + (size_t)(o * inner) * e, x->sources, size, inner, type, COMM_SUM);
  }
}

static void mp_broadcast(Comm *c, GroupKind g, void *buf, int64_t bytes, int root) {
  MpiRank *m = mp_rank(c);
  MPI_Request request;
  mp_check(m, MPI_Ibcast(buf, mp_count(m, bytes, "broadcast"), MPI_BYTE, root, m->channel[CHANNEL_RANK].group[g],
                         &request), "MPI_Ibcast");
  mp_wait(m, &request, "broadcast", g);
}

static void mp_barrier(Comm *c, GroupKind g) {
  MpiRank *m = mp_rank(c);
  MPI_Request request;
  mp_check(m, MPI_Ibarrier(m->channel[CHANNEL_RANK].group[g], &request), "MPI_Ibarrier");
  mp_wait(m, &request, "barrier", g);
}

/* ---- point to point: every transfer of a group in flight at once, checked as it completes ------- */

static void mp_check_in_p2p(MpiRank *m, const char *fn) {
  if (!m->in_p2p) comm_fail(&m->comm, "%s outside comm_p2p_start … comm_p2p_end", fn);
}

static void mp_p2p_start(Comm *c) {
  MpiRank *m = mp_rank(c);
  if (m->in_p2p) comm_fail(c, "comm_p2p_start inside a group already started; end it with comm_p2p_end first");
  m->in_p2p = 1;
  m->ntransfers = 0;
}

/* Records a transfer and returns the slot for its request. */
static MPI_Request *mp_post(MpiRank *m, int send, int peer, int64_t n, CommType type, int tag) {
  const char *fn = send ? "comm_send" : "comm_recv";
  mp_check_in_p2p(m, fn);
  if (tag < 0 || tag > m->tag_ub) comm_fail(&m->comm, "%s: tag %d is outside MPI's tags 0 … %d", fn, tag, m->tag_ub);
  mp_count(m, n, fn);
  if (m->ntransfers == m->transfers_room) {
    m->transfers_room = m->transfers_room ? 2 * m->transfers_room : 8;
    size_t room = (size_t)m->transfers_room;
    m->transfers = realloc(m->transfers, sizeof *m->transfers * room);
    m->requests = realloc(m->requests, sizeof *m->requests * room);
    m->statuses = realloc(m->statuses, sizeof *m->statuses * room);
    m->completed = realloc(m->completed, sizeof *m->completed * room);
  }
  m->transfers[m->ntransfers] = (MpiTransfer){.send = send, .peer = peer, .tag = tag, .n = n, .type = type};
  return &m->requests[m->ntransfers++];
}

static void mp_send(Comm *c, int peer, const void *buf, int64_t n, CommType type, int tag) {
  MpiRank *m = mp_rank(c);
  MPI_Request *request = mp_post(m, 1, peer, n, type, tag);
  mp_check(m, MPI_Isend(buf, (int)n, mp_type(type), peer, tag, m->channel[CHANNEL_RANK].group[GROUP_WORLD],
                        request), "MPI_Isend");
}

/* Receives take any tag: messages between two ranks then match in the order they were posted, and
 * the tag is checked when the message is in. */
static void mp_recv(Comm *c, int peer, void *buf, int64_t n, CommType type, int tag) {
  MpiRank *m = mp_rank(c);
  MPI_Request *request = mp_post(m, 0, peer, n, type, tag);
  mp_check(m, MPI_Irecv(buf, (int)n, mp_type(type), peer, MPI_ANY_TAG,
                        m->channel[CHANNEL_RANK].group[GROUP_WORLD], request), "MPI_Irecv");
}

static void mp_check_transfer(MpiRank *m, const MpiTransfer *t, MPI_Status *status, int errors_in_status) {
  int count = 0;
  if (errors_in_status && status->MPI_ERROR != MPI_SUCCESS) {
    if (!t->send && status->MPI_ERROR == MPI_ERR_TRUNCATE)
      comm_fail(&m->comm, "receive from rank %d expected tag %d with %lld elements, found tag %d with more elements",
                t->peer, t->tag, (long long)t->n, status->MPI_TAG);
    mp_check(m, status->MPI_ERROR, t->send ? "MPI_Isend" : "MPI_Irecv");
  }
  if (t->send) return;
  MPI_Get_count(status, mp_type(t->type), &count);
  if (status->MPI_TAG != t->tag || count != t->n)
    comm_fail(&m->comm, "receive from rank %d expected tag %d with %lld elements, found tag %d with %d elements",
              t->peer, t->tag, (long long)t->n, status->MPI_TAG, count);
}

static void mp_p2p_timeout(MpiRank *m) {
  for (int i = 0; i < m->ntransfers; i++) {
    const MpiTransfer *t = &m->transfers[i];
    if (m->requests[i] == MPI_REQUEST_NULL) continue;
    if (t->send)
      comm_fail(&m->comm, "send to rank %d (tag %d, %lld elements): rank %d took nothing within %g s; "
                "set PLAIT_COMM_TIMEOUT to wait longer", t->peer, t->tag, (long long)t->n, t->peer, m->comm.timeout);
    comm_fail(&m->comm, "receive from rank %d (tag %d, %lld elements): rank %d sent nothing within %g s; "
              "set PLAIT_COMM_TIMEOUT to wait longer", t->peer, t->tag, (long long)t->n, t->peer, m->comm.timeout);
  }
}

static void mp_p2p_end(Comm *c) {
  MpiRank *m = mp_rank(c);
  mp_check_in_p2p(m, "comm_p2p_end");
  double deadline = clock_seconds() + c->timeout;
  for (int left = m->ntransfers, tries = 0; left > 0; tries++) {
    int done;
    int rc = MPI_Testsome(m->ntransfers, m->requests, &done, m->completed, m->statuses);
    if (rc != MPI_ERR_IN_STATUS) mp_check(m, rc, "MPI_Testsome");
    for (int j = 0; j < done; j++)
      mp_check_transfer(m, &m->transfers[m->completed[j]], &m->statuses[j], rc == MPI_ERR_IN_STATUS);
    left -= done;
    if (left > 0 && clock_seconds() > deadline) mp_p2p_timeout(m);
    if (done == 0) mp_pause(tries);
  }
  m->ntransfers = 0;
  m->in_p2p = 0;
}

static void mp_abort(Comm *c) {
  (void)c;
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static const CommOps mpi_ops = {
  .name = "mpi",
  .allreduce = mp_allreduce,
  .allgather = mp_allgather,
  .reducescatter = mp_reducescatter,
  .broadcast = mp_broadcast,
  .barrier = mp_barrier,
  .p2p_start = mp_p2p_start,
  .send = mp_send,
  .recv = mp_recv,
  .p2p_end = mp_p2p_end,
  .reduce_start = comm_worker_start,
  .allgather_chunks = mp_allgather_chunks,
  .wait = comm_worker_wait,
  .abort = mp_abort,
};

/* ---- the rank ---------------------------------------------------------------------------------- */

/* The groups, split from the world in the fixed order of GroupKind (every rank makes the same calls),
 * then duplicated in the same order for the worker. A group's color is its first member. */
static void mp_groups_new(MpiRank *m) {
  for (int g = 0; g < GROUP_COUNT; g++) {
    const CommGroup *group = &m->comm.group[g];
    mp_check(m, MPI_Comm_split(MPI_COMM_WORLD, group->members[0], group->rank, &m->channel[CHANNEL_RANK].group[g]),
             "MPI_Comm_split");
  }
  for (int g = 0; g < GROUP_COUNT; g++)
    mp_check(m, MPI_Comm_dup(m->channel[CHANNEL_RANK].group[g], &m->channel[CHANNEL_WORKER].group[g]),
             "MPI_Comm_dup");
}

static MpiRank *mp_rank_new(const CommGrid *grid, int rank, double timeout, int threaded) {
  MpiRank *m = calloc(1, sizeof *m);
  int *tag_ub, found;
  comm_init(&m->comm, &mpi_ops, grid, rank, timeout, &m->process);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  m->tag_ub = found ? *tag_ub : 32767;
  for (int ch = 0; ch < CHANNELS; ch++) {
    MpiChannel *x = &m->channel[ch];
    for (int i = 0; i < 4; i++) x->layout[i] = malloc(sizeof(int) * (size_t)m->comm.info.world);
    x->sources = malloc(sizeof(void *) * (size_t)m->comm.info.world);
  }
  mp_groups_new(m);
  m->comm.worker = comm_worker_new(&m->comm, mp_worker_reduce, threaded);
  return m;
}

static void mp_rank_free(MpiRank *m) {
  comm_worker_free(m->comm.worker);
  for (int ch = 0; ch < CHANNELS; ch++) {
    MpiChannel *x = &m->channel[ch];
    for (int g = 0; g < GROUP_COUNT; g++) MPI_Comm_free(&x->group[g]);
    for (int i = 0; i < 2; i++) free(x->scratch[i]);
    for (int i = 0; i < 4; i++) free(x->layout[i]);
    free(x->sources);
  }
  free(m->transfers);
  free(m->requests);
  free(m->statuses);
  free(m->completed);
  comm_release(&m->comm);
  free(m);
}

/* Processes of one job that run different programs may not even agree on the grid: before any group is
 * split from grids that differ, the lowest rank whose grid is not rank 0's says so (the others stay
 * quiet) and every process returns 0. Blocking calls: every process has just called MPI_Init. */
static int mp_grids_agree(int rank, int tp, int pp, int dp) {
  int mine[3] = {tp, pp, dp}, first[3] = {tp, pp, dp}, lowest;
  MPI_Bcast(first, 3, MPI_INT, 0, MPI_COMM_WORLD);
  int differs = memcmp(mine, first, sizeof mine) != 0 ? rank : INT_MAX;
  MPI_Allreduce(&differs, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (lowest == INT_MAX) return 1;
  if (rank == lowest)
    fprintf(stderr, "plait: rank %d runs another program than rank 0 (a grid of tp·pp·dp = %d·%d·%d against %d·%d·%d); "
            "launch one program on every rank\n", rank, tp, pp, dp, first[0], first[1], first[2]);
  return 0;
}

/* The world MPI sees must be the one the launcher announced and the one the plan needs; rank 0 says
 * why not (the others stay quiet) and every rank returns 1. */
static int mp_world_fits(int size, int rank, int tp, int pp, int dp, int world, const char *launcher) {
  if (size != world) {
    if (rank == 0)
      fprintf(stderr, "plait: the launcher started %d rank%s but MPI sees a world of %d; start the job with this "
              "MPI library's launcher, or give srun its PMI (srun --mpi=pmix)\n", world, world > 1 ? "s" : "", size);
    return 0;
  }
  if (size != tp * pp * dp) {
    if (rank == 0)
      fprintf(stderr, "plait: the launcher started %d rank%s but the plan needs tp·pp·dp = %d·%d·%d = %d; run %s %d\n",
              size, size > 1 ? "s" : "", tp, pp, dp, tp * pp * dp, launcher, tp * pp * dp);
    return 0;
  }
  return 1;
}

int comm_mpi_launch(const CommGrid *grid, double timeout, int world, const char *launcher, RankMain fn,
                    void *arg) {
  int provided, size, rank, tp = grid->tp, pp = grid->pp, dp = grid->dp;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* errors become comm_fail (groups inherit it) */
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!mp_grids_agree(rank, tp, pp, dp) || !mp_world_fits(size, rank, tp, pp, dp, world, launcher)) {
    MPI_Finalize();
    return 1;
  }
  MpiRank *m = mp_rank_new(grid, rank, timeout, provided == MPI_THREAD_MULTIPLE);
  int status = fn(&m->comm, arg);
  comm_worker_check_idle(&m->comm);
  if (m->in_p2p) comm_fail(&m->comm, "returned between comm_p2p_start and comm_p2p_end");
  mp_rank_free(m);
  MPI_Finalize();
  return status;
}
