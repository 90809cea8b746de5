/* comm_local.c: the local backend: every rank is a thread of this process. Collectives meet in shared
 * memory (each member publishes its buffers, a barrier, each reads the others'); messages go through a
 * mailbox per receiving rank, copied on send so that a send never blocks. In the CUDA build the ranks
 * share one GPU and their buffers are device memory: copies and folds go through comm_copy and
 * comm_fold, and a member's kernels have written its buffers before it publishes them. */
#include "comm_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank's own collectives and its worker's (nonblocking all-reduces) meet in separate places, so
 * that the two never mix even when they use the same group at the same time. */
enum { CHANNEL_RANK, CHANNEL_WORKER, CHANNELS };

/* What a member brings to a collective. Members must agree on `what` and on the barrier they are at
 * (`step`); the last to arrive at a barrier checks. */
typedef struct {
  const char *op; /* "all-reduce" */
  char what[96];  /* "all-reduce (sum, f32) of 1024 elements" */
  int step;       /* barriers of this collective entered so far */
  const void *in;
  void *out;
} LocalCall;

/* Where the members of one group meet on one channel. */
typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t changed; /* a barrier completed, or a rank returned from its main function */
  int size;
  int waiting;            /* members inside the current barrier */
  int64_t generation;     /* barriers completed */
  int64_t *entered;       /* entered[i]: barriers member i has entered (to name who is missing) */
  LocalCall *call;        /* call[i]: member i's current collective */
} LocalGroup;

typedef struct LocalMessage {
  struct LocalMessage *next;
  int from, tag;
  int64_t n;
  size_t bytes;
  _Alignas(16) unsigned char data[];
} LocalMessage;

/* Messages sent to one rank, in the order they were sent. */
typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t arrived; /* a message arrived, or a rank returned from its main function */
  LocalMessage *head, *tail;
} LocalMailbox;

typedef struct {
  int peer, tag;
  int64_t n;
  size_t bytes;
  void *buf;
} LocalRecv;

typedef struct LocalWorld LocalWorld;

typedef struct {
  Comm comm; /* first: a LocalRank is its Comm */
  LocalWorld *world;
  LocalGroup *meet[CHANNELS][GROUP_COUNT];
  const void **sources[CHANNELS]; /* the operands of a fold, one per member */
  int in_p2p;
  LocalRecv *recvs; /* posted in the current p2p group */
  int nrecvs, recvs_room;
  atomic_int finished; /* its main function returned */
  int status;
  RankMain fn;
  void *arg;
  pthread_t thread;
} LocalRank;

struct LocalWorld {
  int size;
  LocalRank *ranks;
  LocalGroup *groups[CHANNELS][GROUP_COUNT]; /* indexed by the world rank of the group's first member */
  LocalMailbox *mailbox;                     /* indexed by the receiving rank */
  CommProcess process;
};

static LocalRank *local_rank(Comm *c) { return (LocalRank *)c; }

/* ---- meeting: barriers that name who is missing ------------------------------------------------ */

/* Called before each wait in a barrier of group g: fails when the deadline has passed or when a member
 * still missing has returned from its main function (it will never come). */
static void local_check_missing(LocalRank *r, LocalGroup *m, GroupKind g, const char *op, int timed_out) {
  const CommGroup *group = &r->comm.group[g];
  char missing[256] = "", members[256];
  int nmissing = 0, returned = -1;
  size_t used = 0;
  for (int i = 0; i < m->size; i++) {
    if (m->entered[i] >= m->entered[group->rank]) continue;
    int rank = group->members[i];
    if (atomic_load(&r->world->ranks[rank].finished)) returned = rank;
    if (used < sizeof missing) used += (size_t)snprintf(missing + used, sizeof missing - used, " %d", rank);
    nmissing++;
  }
  comm_describe_group(&r->comm, g, members, sizeof members);
  if (returned >= 0)
    comm_fail(&r->comm, "%s on the %s group (%s): rank %d returned from its main function without joining",
              op, comm_group_name(g), members, returned);
  if (timed_out)
    comm_fail(&r->comm, "%s on the %s group (%s): rank%s%s never arrived within %g s; "
              "set PLAIT_COMM_TIMEOUT to wait longer", op, comm_group_name(g), members, nmissing > 1 ? "s" : "",
              missing, r->comm.timeout);
}

/* Called by the last member to arrive at a barrier of g, while the others wait in it. */
static void local_check_agree(LocalRank *r, LocalGroup *m, GroupKind g) {
  const CommGroup *group = &r->comm.group[g];
  for (int k = 1; k < m->size; k++) {
    const LocalCall *first = &m->call[0], *other = &m->call[k];
    if (strcmp(other->what, first->what) != 0)
      comm_fail(&r->comm, "the members of the %s group disagree: rank %d calls %s, rank %d calls %s",
                comm_group_name(g), group->members[0], first->what, group->members[k], other->what);
    if (other->step != first->step)
      comm_fail(&r->comm, "the members of the %s group disagree: ranks %d and %d are at different steps of %s",
                comm_group_name(g), group->members[0], group->members[k], first->what);
  }
}

/* Waits until every member of g has entered as many barriers as this rank. */
static void local_barrier(LocalRank *r, LocalGroup *m, GroupKind g) {
  double deadline = clock_seconds() + r->comm.timeout;
  int me = r->comm.group[g].rank;
  pthread_mutex_lock(&m->lock);
  m->call[me].step++;
  m->entered[me]++;
  if (++m->waiting == m->size) {
    local_check_agree(r, m, g);
    m->waiting = 0;
    m->generation++;
    pthread_cond_broadcast(&m->changed);
  } else {
    int64_t generation = m->generation;
    int timed_out = 0;
    while (m->generation == generation) {
      local_check_missing(r, m, g, m->call[me].op, timed_out);
      timed_out = comm_cond_wait_until(&m->changed, &m->lock, deadline);
    }
  }
  pthread_mutex_unlock(&m->lock);
}

/* Publishes this member's call and waits for every member: their buffers may be read until the
 * collective's last barrier. */
static LocalGroup *local_enter(LocalRank *r, int channel, GroupKind g, const LocalCall *call) {
  LocalGroup *m = r->meet[channel][g];
  comm_memory_ready();
  m->call[r->comm.group[g].rank] = *call;
  local_barrier(r, m, g);
  return m;
}

static const char *type_name(CommType type) {
  size_t size = comm_type_size(type);
  return size == 2 ? "bf16" : size == sizeof(float) ? "f32" : "f64";
}

/* ---- collectives ------------------------------------------------------------------------------- */

/* Each member copies the other members' chunks of the buffer from their owners (every member has
 * entered with its buffer published). */
static void local_copy_chunks(LocalRank *r, LocalGroup *m, GroupKind g, void *buf, int64_t n,
                              size_t bytes) {
  int64_t lo, hi;
  for (int k = 0; k < m->size; k++) {
    if (k == r->comm.group[g].rank) continue;
    comm_chunk(n, m->size, k, &lo, &hi);
    comm_copy((char *)buf + lo * (int64_t)bytes, (const char *)m->call[k].out + lo * (int64_t)bytes,
              (size_t)(hi - lo) * bytes);
  }
  local_barrier(r, m, g); /* no member reuses its buffer while another still copies from it */
}

/* Each member folds its own chunk of every member's buffer, in member order, into its buffer; then
 * (unless scatter) each copies the other chunks from their owners. Every element is folded once, in
 * the same order, so every member gets the same bits. */
static void local_reduce_on(LocalRank *r, int channel, GroupKind g, void *buf, int64_t n,
                            CommType type, CommOp op, int scatter) {
  const char *name = channel == CHANNEL_RANK ? "all-reduce"
                     : scatter             ? "nonblocking reduce-scatter"
                                           : "nonblocking all-reduce";
  LocalCall call = {.op = name, .in = buf, .out = buf};
  snprintf(call.what, sizeof call.what, "%s (%s, %s) of %lld elements", name,
           op == COMM_SUM ? "sum" : "max", type_name(type), (long long)n);
  LocalGroup *m = local_enter(r, channel, g, &call);
  const void **src = r->sources[channel];
  int size = m->size, me = r->comm.group[g].rank;
  size_t bytes = comm_type_size(type);
  int64_t lo, hi;
  comm_chunk(n, size, me, &lo, &hi);
  for (int k = 0; k < size; k++) src[k] = (const char *)m->call[k].out + lo * (int64_t)bytes;
  comm_fold((char *)buf + lo * (int64_t)bytes, src, size, hi - lo, type, op);
  local_barrier(r, m, g);
  if (!scatter) local_copy_chunks(r, m, g, buf, n, bytes);
}

static void local_allreduce(Comm *c, GroupKind g, void *buf, int64_t n, CommType type, CommOp op) {
  local_reduce_on(local_rank(c), CHANNEL_RANK, g, buf, n, type, op, 0);
}

static void local_worker_reduce(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op,
                                int scatter) {
  local_reduce_on(local_rank(c), CHANNEL_WORKER, g, buf, n, COMM_REAL, op, scatter);
}

static void local_allgather_chunks(Comm *c, GroupKind g, void *buf, int64_t n, CommType type) {
  LocalRank *r = local_rank(c);
  LocalCall call = {.op = "all-gather of chunks", .in = buf, .out = buf};
  snprintf(call.what, sizeof call.what, "all-gather of the chunks of %lld elements (%s)",
           (long long)n, type_name(type));
  local_copy_chunks(r, local_enter(r, CHANNEL_RANK, g, &call), g, buf, n, comm_type_size(type));
}

/*   out[o][k][i] = in_k[o][i]   for member k, row o < outer, i < inner */
static void local_allgather(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner,
                            CommType type) {
  LocalRank *r = local_rank(c);
  size_t e = comm_type_size(type);
  LocalCall call = {.op = "all-gather", .in = in, .out = out};
  snprintf(call.what, sizeof call.what, "all-gather of %lld×%lld elements", (long long)outer, (long long)inner);
  LocalGroup *m = local_enter(r, CHANNEL_RANK, g, &call);
  for (int k = 0; k < m->size; k++)
    for (int64_t o = 0; o < outer; o++)
      comm_copy((char *)out + (size_t)((o * m->size + k) * inner) * e,
                (const char *)m->call[k].in + (size_t)(o * inner) * e, e * (size_t)inner);
  local_barrier(r, m, g);
}

/*   out[o][i] = in_0[o][me][i] + in_1[o][me][i] + … (members in order)   for row o < outer, i < inner */
static void local_reducescatter(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner,
                                CommType type) {
  LocalRank *r = local_rank(c);
  size_t e = comm_type_size(type);
  LocalCall call = {.op = "reduce-scatter", .in = in, .out = out};
  snprintf(call.what, sizeof call.what, "reduce-scatter of %lld×%lld elements", (long long)outer, (long long)inner);
  LocalGroup *m = local_enter(r, CHANNEL_RANK, g, &call);
  const void **src = r->sources[CHANNEL_RANK];
  int size = m->size, me = c->group[g].rank;
  for (int64_t o = 0; o < outer; o++) {
    for (int k = 0; k < size; k++) src[k] = (const char *)m->call[k].in + (size_t)((o * size + me) * inner) * e;
    comm_fold((char *)out + (size_t)(o * inner) * e, src, size, inner, type, COMM_SUM);
  }
  local_barrier(r, m, g);
}

static void local_broadcast(Comm *c, GroupKind g, void *buf, int64_t bytes, int root) {
  LocalRank *r = local_rank(c);
  LocalCall call = {.op = "broadcast", .in = buf, .out = buf};
  snprintf(call.what, sizeof call.what, "broadcast of %lld bytes from member %d", (long long)bytes, root);
  LocalGroup *m = local_enter(r, CHANNEL_RANK, g, &call);
  if (c->group[g].rank != root) comm_copy(buf, m->call[root].in, (size_t)bytes);
  local_barrier(r, m, g);
}

static void local_barrier_op(Comm *c, GroupKind g) {
  LocalCall call = {.op = "barrier", .what = "barrier"};
  local_enter(local_rank(c), CHANNEL_RANK, g, &call);
}

/* ---- point to point ---------------------------------------------------------------------------- */

static void local_check_in_p2p(LocalRank *r, const char *fn) {
  if (!r->in_p2p) comm_fail(&r->comm, "%s outside comm_p2p_start … comm_p2p_end", fn);
}

static void local_p2p_start(Comm *c) {
  LocalRank *r = local_rank(c);
  if (r->in_p2p) comm_fail(c, "comm_p2p_start inside a group already started; end it with comm_p2p_end first");
  r->in_p2p = 1;
  r->nrecvs = 0;
}

static void local_send(Comm *c, int peer, const void *buf, int64_t n, CommType type, int tag) {
  LocalRank *r = local_rank(c);
  local_check_in_p2p(r, "comm_send");
  size_t bytes = comm_type_size(type) * (size_t)n;
  LocalMessage *msg = malloc(sizeof *msg + bytes);
  if (!msg) comm_fail(c, "no memory for a message of %lld elements to rank %d", (long long)n, peer);
  *msg = (LocalMessage){.from = c->info.rank, .tag = tag, .n = n, .bytes = bytes};
  comm_copy(msg->data, buf, bytes);
  LocalMailbox *box = &r->world->mailbox[peer];
  pthread_mutex_lock(&box->lock);
  if (box->tail) box->tail->next = msg;
  else box->head = msg;
  box->tail = msg;
  pthread_cond_broadcast(&box->arrived);
  pthread_mutex_unlock(&box->lock);
}

static void local_recv(Comm *c, int peer, void *buf, int64_t n, CommType type, int tag) {
  LocalRank *r = local_rank(c);
  local_check_in_p2p(r, "comm_recv");
  if (r->nrecvs == r->recvs_room) {
    r->recvs_room = r->recvs_room ? 2 * r->recvs_room : 8;
    r->recvs = realloc(r->recvs, sizeof *r->recvs * (size_t)r->recvs_room);
  }
  r->recvs[r->nrecvs++] = (LocalRecv){.peer = peer, .tag = tag, .n = n, .bytes = comm_type_size(type) * (size_t)n, .buf = buf};
}

/* Unlinks the oldest message from `from` in box (lock held); NULL when there is none. */
static LocalMessage *local_unlink(LocalMailbox *box, int from) {
  LocalMessage **link = &box->head, *prev = NULL;
  while (*link && (*link)->from != from) {
    prev = *link;
    link = &(*link)->next;
  }
  LocalMessage *msg = *link;
  if (!msg) return NULL;
  *link = msg->next;
  if (box->tail == msg) box->tail = prev;
  return msg;
}

/* Waits for the oldest message from want->peer, until the deadline. */
static LocalMessage *local_take(LocalRank *r, const LocalRecv *want, double deadline) {
  LocalMailbox *box = &r->world->mailbox[r->comm.info.rank];
  LocalMessage *msg;
  pthread_mutex_lock(&box->lock);
  for (int timed_out = 0; !(msg = local_unlink(box, want->peer));
       timed_out = comm_cond_wait_until(&box->arrived, &box->lock, deadline)) {
    if (atomic_load(&r->world->ranks[want->peer].finished))
      comm_fail(&r->comm, "receive from rank %d (tag %d, %lld elements): rank %d returned from its main function "
                "without sending it", want->peer, want->tag, (long long)want->n, want->peer);
    if (timed_out)
      comm_fail(&r->comm, "receive from rank %d (tag %d, %lld elements): rank %d sent nothing within %g s; "
                "set PLAIT_COMM_TIMEOUT to wait longer", want->peer, want->tag, (long long)want->n, want->peer,
                r->comm.timeout);
  }
  pthread_mutex_unlock(&box->lock);
  return msg;
}

static void local_p2p_end(Comm *c) {
  LocalRank *r = local_rank(c);
  local_check_in_p2p(r, "comm_p2p_end");
  double deadline = clock_seconds() + c->timeout;
  for (int i = 0; i < r->nrecvs; i++) {
    const LocalRecv *want = &r->recvs[i];
    LocalMessage *msg = local_take(r, want, deadline);
    if (msg->tag != want->tag || msg->n != want->n || msg->bytes != want->bytes)
      comm_fail(c, "receive from rank %d expected tag %d with %lld elements, found tag %d with %lld elements",
                want->peer, want->tag, (long long)want->n, msg->tag, (long long)msg->n);
    comm_copy(want->buf, msg->data, msg->bytes);
    free(msg);
  }
  r->nrecvs = 0;
  r->in_p2p = 0;
}

/* The worker reads buf on its own thread: the rank's kernels must have written it first. */
static CommRequest *local_reduce_start(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op,
                                       int scatter) {
  comm_memory_ready();
  return comm_worker_start(c, g, buf, n, op, scatter);
}

static const CommOps local_ops = {
  .name = "local",
  .allreduce = local_allreduce,
  .allgather = local_allgather,
  .reducescatter = local_reducescatter,
  .broadcast = local_broadcast,
  .barrier = local_barrier_op,
  .p2p_start = local_p2p_start,
  .send = local_send,
  .recv = local_recv,
  .p2p_end = local_p2p_end,
  .reduce_start = local_reduce_start,
  .allgather_chunks = local_allgather_chunks,
  .wait = comm_worker_wait,
  .abort = NULL, /* comm_fail's _exit ends every rank */
};

/* ---- the world --------------------------------------------------------------------------------- */

static void local_group_init(LocalGroup *m, int size) {
  pthread_mutex_init(&m->lock, NULL);
  comm_cond_init(&m->changed);
  m->size = size;
  m->entered = calloc((size_t)size, sizeof *m->entered);
  m->call = calloc((size_t)size, sizeof *m->call);
}

static void local_group_free(LocalGroup *m) {
  if (!m->size) return;
  pthread_mutex_destroy(&m->lock);
  pthread_cond_destroy(&m->changed);
  free(m->entered);
  free(m->call);
}

static void local_rank_init(LocalWorld *w, LocalRank *r, int rank, const CommGrid *grid, double timeout) {
  comm_init(&r->comm, &local_ops, grid, rank, timeout, &w->process);
  r->world = w;
  for (int ch = 0; ch < CHANNELS; ch++) {
    r->sources[ch] = malloc(sizeof(void *) * (size_t)w->size);
    for (int g = 0; g < GROUP_COUNT; g++) {
      const CommGroup *group = &r->comm.group[g];
      LocalGroup *m = &w->groups[ch][g][group->members[0]];
      if (!m->size) local_group_init(m, group->size);
      r->meet[ch][g] = m;
    }
  }
  r->comm.worker = comm_worker_new(&r->comm, local_worker_reduce, 1);
}

static LocalWorld *local_world_new(const CommGrid *grid, double timeout) {
  LocalWorld *w = calloc(1, sizeof *w);
  w->size = grid->tp * grid->pp * grid->dp;
  w->ranks = calloc((size_t)w->size, sizeof *w->ranks);
  w->mailbox = calloc((size_t)w->size, sizeof *w->mailbox);
  for (int i = 0; i < w->size; i++) {
    pthread_mutex_init(&w->mailbox[i].lock, NULL);
    comm_cond_init(&w->mailbox[i].arrived);
  }
  for (int ch = 0; ch < CHANNELS; ch++)
    for (int g = 0; g < GROUP_COUNT; g++) w->groups[ch][g] = calloc((size_t)w->size, sizeof(LocalGroup));
  for (int i = 0; i < w->size; i++) local_rank_init(w, &w->ranks[i], i, grid, timeout);
  return w;
}

static void local_world_free(LocalWorld *w) {
  for (int i = 0; i < w->size; i++) {
    LocalRank *r = &w->ranks[i];
    comm_worker_free(r->comm.worker);
    for (int ch = 0; ch < CHANNELS; ch++) free(r->sources[ch]);
    free(r->recvs);
    comm_release(&r->comm);
    pthread_mutex_destroy(&w->mailbox[i].lock);
    pthread_cond_destroy(&w->mailbox[i].arrived);
  }
  for (int ch = 0; ch < CHANNELS; ch++)
    for (int g = 0; g < GROUP_COUNT; g++) {
      for (int i = 0; i < w->size; i++) local_group_free(&w->groups[ch][g][i]);
      free(w->groups[ch][g]);
    }
  free(w->mailbox);
  free(w->ranks);
  free(w);
}

/* Wakes every rank that may be waiting for r, so that it sees r has returned. */
static void local_wake_all(LocalRank *r) {
  LocalWorld *w = r->world;
  for (int ch = 0; ch < CHANNELS; ch++)
    for (int g = 0; g < GROUP_COUNT; g++) {
      LocalGroup *m = r->meet[ch][g];
      pthread_mutex_lock(&m->lock);
      pthread_cond_broadcast(&m->changed);
      pthread_mutex_unlock(&m->lock);
    }
  for (int i = 0; i < w->size; i++) {
    pthread_mutex_lock(&w->mailbox[i].lock);
    pthread_cond_broadcast(&w->mailbox[i].arrived);
    pthread_mutex_unlock(&w->mailbox[i].lock);
  }
}

static void *local_rank_main(void *arg) {
  LocalRank *r = arg;
  r->status = r->fn(&r->comm, r->arg);
  comm_worker_check_idle(&r->comm);
  if (r->in_p2p) comm_fail(&r->comm, "returned between comm_p2p_start and comm_p2p_end");
  atomic_store(&r->finished, 1);
  local_wake_all(r);
  return NULL;
}

/* A message nobody received means the ranks disagree about what moves: a failure like any other. */
static void local_check_delivered(LocalWorld *w) {
  for (int i = 0; i < w->size; i++) {
    const LocalMessage *msg = w->mailbox[i].head;
    if (msg)
      comm_fail(&w->ranks[i].comm, "returned without receiving a message from rank %d (tag %d, %lld elements)",
                msg->from, msg->tag, (long long)msg->n);
  }
}

int comm_local_launch(const CommGrid *grid, double timeout, RankMain fn, void *arg) {
  LocalWorld *w = local_world_new(grid, timeout);
  int status = 0;
  for (int i = 0; i < w->size; i++) {
    LocalRank *r = &w->ranks[i];
    r->fn = fn;
    r->arg = arg;
    int err = pthread_create(&r->thread, NULL, local_rank_main, r);
    if (err) comm_fail(&r->comm, "cannot start its thread: %s", strerror(err));
  }
  for (int i = 0; i < w->size; i++) {
    pthread_join(w->ranks[i].thread, NULL);
    if (!status) status = w->ranks[i].status;
  }
  local_check_delivered(w);
  local_world_free(w);
  return status;
}
