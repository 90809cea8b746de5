/* comm_nccl.c: the NCCL backend of the CUDA build: this process is one rank on one GPU. The unique id
 * goes from rank 0 to the others over MPI when mpirun or srun started the job, else over TCP from
 * RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun's variables). One communicator per group,
 * split from the world in the fixed order of GroupKind, and a second set for the nonblocking
 * all-reduces. Communication runs on streams of its own, ordered after the rank's compute stream by an
 * event and before what the rank computes next by another: the host does not wait, except for results
 * it reads (host buffers) and barriers. Sums are NCCL's (their order is NCCL's, not the fold of the
 * other backends). */
#include "comm_backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <nccl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpu.h"

#ifdef PLAIT_MPI
#include <mpi.h>
#endif

/* A rank's own calls and the nonblocking all-reduces use separate communicators and streams. */
enum { CHANNEL_RANK, CHANNEL_WORKER, CHANNELS };

typedef struct {
  int send, peer;
  void *buf;
  int64_t n;
  CommType type;
} NcclTransfer;

typedef struct {
  Comm comm; /* first: an NcclRank is its Comm */
  CommProcess process;
  int mpi;   /* the id came over MPI (MPI_Finalize at the end, MPI_Abort on failure) */
  ncclComm_t world;
  ncclComm_t group[CHANNELS][GROUP_COUNT]; /* NULL for a group of one */
  cudaStream_t stream[CHANNELS];
  cudaEvent_t ready[CHANNELS], done[CHANNELS];
  void *staging, *permute; /* device memory: host buffers' copies; blocks of gathers with outer > 1 */
  size_t staging_bytes, permute_bytes;
  int in_p2p;
  NcclTransfer *transfers; /* posted in the current p2p group */
  int ntransfers, transfers_room;
} NcclRank;

static NcclRank *nc_rank(Comm *c) { return (NcclRank *)c; }

/* "NCCL <op> on the tp group (ranks 0 1) failed: <NCCL's reason>" through comm_fail (which names the rank). */
static void nc_check(NcclRank *r, ncclResult_t rc, const char *op, GroupKind g) {
  if (rc == ncclSuccess) return;
  char members[256];
  comm_describe_group(&r->comm, g, members, sizeof members);
  comm_fail(&r->comm, "NCCL %s on the %s group (%s) failed: %s%s%s", op, comm_group_name(g), members,
            ncclGetErrorString(rc), ncclGetLastError(NULL)[0] ? ": " : "", ncclGetLastError(NULL));
}

static ncclDataType_t nc_type(CommType type) {
  return type == COMM_ACT ? ncclBfloat16 : comm_type_size(type) == sizeof(float) ? ncclFloat32 : ncclFloat64;
}

/* Device memory of at least `bytes` in *buf (grown when short, in order on the rank's stream; the
 * communication streams reach it only after events recorded on that stream). */
static void *nc_buffer(void **buf, size_t *room, size_t bytes) {
  if (bytes > *room) {
    *room = bytes > 4096 ? bytes : 4096;
    *buf = gpu_buffer_grow(*buf, *room, "communication buffers");
  }
  return *buf;
}

/* The channel's stream, after everything the rank queued so far. */
static cudaStream_t nc_begin(NcclRank *r, int ch) {
  gpu_check(cudaEventRecord(r->ready[ch], gpu_stream()), "cudaEventRecord");
  gpu_check(cudaStreamWaitEvent(r->stream[ch], r->ready[ch], 0), "cudaStreamWaitEvent");
  return r->stream[ch];
}

/* What the rank queues next waits for the channel's communication. */
static void nc_end(NcclRank *r, int ch) {
  gpu_check(cudaEventRecord(r->done[ch], r->stream[ch]), "cudaEventRecord");
  gpu_check(cudaStreamWaitEvent(gpu_stream(), r->done[ch], 0), "cudaStreamWaitEvent");
}

static void nc_require_device(NcclRank *r, const void *p, const char *op) {
  if (!gpu_is_device_memory(p)) comm_fail(&r->comm, "NCCL %s was given host memory (a bug in plait)", op);
}

/* ---- collectives ------------------------------------------------------------------------------- */

/* In place over n elements; a host buffer (the trainer's scalars) goes through device staging. */
static void nc_allreduce_on(NcclRank *r, int ch, GroupKind g, void *buf, int64_t n, CommType type, CommOp op) {
  size_t bytes = comm_type_size(type) * (size_t)n;
  int host = !gpu_is_device_memory(buf);
  if (host && ch == CHANNEL_WORKER) nc_require_device(r, buf, "nonblocking all-reduce");
  void *data = host ? nc_buffer(&r->staging, &r->staging_bytes, bytes) : buf;
  if (host) gpu_check(cudaMemcpyAsync(data, buf, bytes, cudaMemcpyHostToDevice, gpu_stream()), "staging");
  cudaStream_t stream = nc_begin(r, ch);
  nc_check(r, ncclAllReduce(data, data, (size_t)n, nc_type(type), op == COMM_SUM ? ncclSum : ncclMax, r->group[ch][g],
                            stream), "all-reduce", g);
  if (ch == CHANNEL_WORKER) return; /* comm_wait orders the rank after it */
  nc_end(r, ch);
  if (host) {
    gpu_check(cudaMemcpyAsync(buf, data, bytes, cudaMemcpyDeviceToHost, gpu_stream()), "staging");
    gpu_sync("an all-reduce of host values");
  }
}

static void nc_allreduce(Comm *c, GroupKind g, void *buf, int64_t n, CommType type, CommOp op) {
  nc_allreduce_on(nc_rank(c), CHANNEL_RANK, g, buf, n, type, op);
}

/* Member k's chunk of buf (comm_chunk) summed into member k's buf (reduce), or sent from member k
 * to every member (broadcast): one call a chunk, grouped, in place. */
static void nc_chunks(NcclRank *r, int ch, GroupKind g, void *buf, int64_t n, CommType type,
                      int reduce) {
  const char *op = reduce ? "reduce-scatter" : "all-gather of chunks";
  size_t e = comm_type_size(type);
  int64_t lo, hi;
  nc_require_device(r, buf, op);
  cudaStream_t stream = nc_begin(r, ch);
  nc_check(r, ncclGroupStart(), op, g);
  for (int k = 0; k < r->comm.group[g].size; k++) {
    comm_chunk(n, r->comm.group[g].size, k, &lo, &hi);
    void *chunk = (char *)buf + (size_t)lo * e;
    if (hi == lo) continue;
    if (reduce)
      nc_check(r, ncclReduce(chunk, chunk, (size_t)(hi - lo), nc_type(type), ncclSum, k,
                             r->group[ch][g], stream), op, g);
    else
      nc_check(r, ncclBroadcast(chunk, chunk, (size_t)(hi - lo), nc_type(type), k,
                                r->group[ch][g], stream), op, g);
  }
  nc_check(r, ncclGroupEnd(), op, g);
  if (ch == CHANNEL_RANK) nc_end(r, ch); /* the worker's: comm_wait orders the rank after it */
}

static void nc_worker_reduce(Comm *c, GroupKind g, real *buf, int64_t n, CommOp op, int scatter) {
  if (scatter) nc_chunks(nc_rank(c), CHANNEL_WORKER, g, buf, n, COMM_REAL, 1);
  else nc_allreduce_on(nc_rank(c), CHANNEL_WORKER, g, buf, n, COMM_REAL, op);
}

static void nc_allgather_chunks(Comm *c, GroupKind g, void *buf, int64_t n, CommType type) {
  nc_chunks(nc_rank(c), CHANNEL_RANK, g, buf, n, type, 0);
}

/* NCCL gathers whole blocks [member][outer][inner]; with outer > 1 they are permuted on the stream into
 *   out[o][k][i] = block_k[o][i] */
static void nc_allgather(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner, CommType type) {
  NcclRank *r = nc_rank(c);
  nc_require_device(r, in, "all-gather");
  nc_require_device(r, out, "all-gather");
  int size = c->group[g].size;
  size_t e = comm_type_size(type), block = e * (size_t)(outer * inner);
  void *blocks = outer == 1 ? out : nc_buffer(&r->permute, &r->permute_bytes, block * (size_t)size);
  cudaStream_t stream = nc_begin(r, CHANNEL_RANK);
  nc_check(r, ncclAllGather(in, blocks, (size_t)(outer * inner), nc_type(type), r->group[CHANNEL_RANK][g], stream),
           "all-gather", g);
  for (int k = 0; k < size && outer > 1; k++)
    gpu_check(cudaMemcpy2DAsync((char *)out + (size_t)k * inner * e, (size_t)size * inner * e,
                                (const char *)blocks + (size_t)k * block, (size_t)inner * e, (size_t)inner * e,
                                (size_t)outer, cudaMemcpyDeviceToDevice, stream), "all-gather");
  nc_end(r, CHANNEL_RANK);
}

/* in[o][k][i] is packed into blocks [k][o][i] (already so when outer = 1), and NCCL sums block k into
 * member k's out. */
static void nc_reducescatter(Comm *c, GroupKind g, const void *in, void *out, int64_t outer, int64_t inner,
                             CommType type) {
  NcclRank *r = nc_rank(c);
  nc_require_device(r, in, "reduce-scatter");
  nc_require_device(r, out, "reduce-scatter");
  int size = c->group[g].size;
  size_t e = comm_type_size(type), block = e * (size_t)(outer * inner);
  cudaStream_t stream = nc_begin(r, CHANNEL_RANK);
  const void *send = in;
  if (outer > 1) {
    void *packed = nc_buffer(&r->permute, &r->permute_bytes, block * (size_t)size);
    for (int k = 0; k < size; k++)
      gpu_check(cudaMemcpy2DAsync((char *)packed + (size_t)k * block, (size_t)inner * e,
                                  (const char *)in + (size_t)k * inner * e, (size_t)size * inner * e, (size_t)inner * e,
                                  (size_t)outer, cudaMemcpyDeviceToDevice, stream), "reduce-scatter");
    send = packed;
  }
  nc_check(r, ncclReduceScatter(send, out, (size_t)(outer * inner), nc_type(type), ncclSum, r->group[CHANNEL_RANK][g],
                                stream), "reduce-scatter", g);
  nc_end(r, CHANNEL_RANK);
}

static void nc_broadcast(Comm *c, GroupKind g, void *buf, int64_t bytes, int root) {
  NcclRank *r = nc_rank(c);
  int host = !gpu_is_device_memory(buf);
  void *data = host ? nc_buffer(&r->staging, &r->staging_bytes, (size_t)bytes) : buf;
  if (host) gpu_check(cudaMemcpyAsync(data, buf, (size_t)bytes, cudaMemcpyHostToDevice, gpu_stream()), "staging");
  cudaStream_t stream = nc_begin(r, CHANNEL_RANK);
  nc_check(r, ncclBroadcast(data, data, (size_t)bytes, ncclUint8, root, r->group[CHANNEL_RANK][g], stream),
           "broadcast", g);
  nc_end(r, CHANNEL_RANK);
  if (host) {
    gpu_check(cudaMemcpyAsync(buf, data, (size_t)bytes, cudaMemcpyDeviceToHost, gpu_stream()), "staging");
    gpu_sync("a broadcast of host values");
  }
}

/* An all-reduce of one value that the host waits for. */
static void nc_barrier(Comm *c, GroupKind g) {
  float one = 1;
  nc_allreduce(c, g, &one, 1, COMM_F32, COMM_SUM);
}

/* ---- point to point ---------------------------------------------------------------------------- */

static void nc_check_in_p2p(NcclRank *r, const char *fn) {
  if (!r->in_p2p) comm_fail(&r->comm, "%s outside comm_p2p_start … comm_p2p_end", fn);
}

static void nc_p2p_start(Comm *c) {
  NcclRank *r = nc_rank(c);
  if (r->in_p2p) comm_fail(c, "comm_p2p_start inside a group already started; end it with comm_p2p_end first");
  r->in_p2p = 1;
  r->ntransfers = 0;
}

static void nc_post(NcclRank *r, int send, int peer, void *buf, int64_t n, CommType type) {
  nc_require_device(r, buf, send ? "send" : "receive");
  if (r->ntransfers == r->transfers_room) {
    r->transfers_room = r->transfers_room ? 2 * r->transfers_room : 8;
    r->transfers = realloc(r->transfers, sizeof *r->transfers * (size_t)r->transfers_room);
  }
  r->transfers[r->ntransfers++] = (NcclTransfer){send, peer, buf, n, type};
}

/* NCCL has no tags: messages between two ranks match in the order they were posted, which is the order
 * the plan gives both sides. */
static void nc_send(Comm *c, int peer, const void *buf, int64_t n, CommType type, int tag) {
  (void)tag;
  nc_check_in_p2p(nc_rank(c), "comm_send");
  nc_post(nc_rank(c), 1, peer, (void *)buf, n, type);
}

static void nc_recv(Comm *c, int peer, void *buf, int64_t n, CommType type, int tag) {
  (void)tag;
  nc_check_in_p2p(nc_rank(c), "comm_recv");
  nc_post(nc_rank(c), 0, peer, buf, n, type);
}

/* The group's transfers as one NCCL group on the world communicator (peers are world ranks). */
static void nc_p2p_end(Comm *c) {
  NcclRank *r = nc_rank(c);
  nc_check_in_p2p(r, "comm_p2p_end");
  cudaStream_t stream = nc_begin(r, CHANNEL_RANK);
  nc_check(r, ncclGroupStart(), "group start", GROUP_WORLD);
  for (int i = 0; i < r->ntransfers; i++) {
    const NcclTransfer *t = &r->transfers[i];
    if (t->send) nc_check(r, ncclSend(t->buf, (size_t)t->n, nc_type(t->type), t->peer, r->world, stream), "send", GROUP_WORLD);
    else nc_check(r, ncclRecv(t->buf, (size_t)t->n, nc_type(t->type), t->peer, r->world, stream), "receive", GROUP_WORLD);
  }
  nc_check(r, ncclGroupEnd(), "grouped sends and receives", GROUP_WORLD);
  nc_end(r, CHANNEL_RANK);
  r->ntransfers = 0;
  r->in_p2p = 0;
}

/* ---- nonblocking all-reduce -------------------------------------------------------------------- */

/* Started at once on the worker's stream (the host does not wait); waiting orders the rank's stream
 * after every all-reduce started so far. */
static void nc_wait(Comm *c, CommRequest *request) {
  NcclRank *r = nc_rank(c);
  comm_worker_wait(c, request);
  gpu_check(cudaEventRecord(r->done[CHANNEL_WORKER], r->stream[CHANNEL_WORKER]), "cudaEventRecord");
  gpu_check(cudaStreamWaitEvent(gpu_stream(), r->done[CHANNEL_WORKER], 0), "cudaStreamWaitEvent");
}

static void nc_abort(Comm *c) {
  (void)c;
#ifdef PLAIT_MPI
  if (nc_rank(c)->mpi) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
}

static const CommOps nccl_ops = {
  .name = "nccl",
  .allreduce = nc_allreduce,
  .allgather = nc_allgather,
  .reducescatter = nc_reducescatter,
  .broadcast = nc_broadcast,
  .barrier = nc_barrier,
  .p2p_start = nc_p2p_start,
  .send = nc_send,
  .recv = nc_recv,
  .p2p_end = nc_p2p_end,
  .reduce_start = comm_worker_start,
  .allgather_chunks = nc_allgather_chunks,
  .wait = nc_wait,
  .abort = nc_abort,
};

/* ---- bootstrap: the unique id from rank 0 ------------------------------------------------------ */

/* One line on stderr, status 1 for the process. */
static int nc_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int nc_refuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "plait: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
}

/* An environment variable as a whole number ≥ 0, or -1. */
static long env_number(const char *name) {
  const char *text = getenv(name);
  char *end;
  if (!text || !*text) return -1;
  long v = strtol(text, &end, 10);
  return *end || v < 0 ? -1 : v;
}

/* Rank 0 of a TCP job: accepts world − 1 connections on MASTER_PORT and sends each the id. */
static int tcp_serve(const ncclUniqueId *id, int world, const char *port, double timeout) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
  int one = 1, server = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (server < 0 || bind(server, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(server, world) != 0) {
    fprintf(stderr, "plait: rank 0 cannot listen on MASTER_PORT %s: %s; choose a free port\n", port, strerror(errno));
    return -1;
  }
  double deadline = clock_seconds() + timeout;
  for (int joined = 1; joined < world; joined++) {
    struct pollfd p = {.fd = server, .events = POLLIN};
    int wait_ms = (int)((deadline - clock_seconds()) * 1000);
    if (wait_ms <= 0 || poll(&p, 1, wait_ms) <= 0) {
      fprintf(stderr, "plait: rank 0: %d of %d ranks connected to MASTER_PORT %s within %g s; start every rank with the "
              "same MASTER_ADDR and MASTER_PORT (or set PLAIT_COMM_TIMEOUT)\n", joined, world, port, timeout);
      close(server);
      return -1;
    }
    int peer = accept(server, NULL, NULL);
    if (peer < 0 || write(peer, id, sizeof *id) != (ssize_t)sizeof *id) joined--;
    if (peer >= 0) close(peer);
  }
  close(server);
  return 0;
}

/* Another rank of a TCP job: connects to MASTER_ADDR:MASTER_PORT (retrying until rank 0 listens) and
 * reads the id. */
static int tcp_fetch(ncclUniqueId *id, int rank, const char *host, const char *port, double timeout) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *found = NULL;
  if (getaddrinfo(host, port, &hints, &found) != 0 || !found) {
    fprintf(stderr, "plait: rank %d: MASTER_ADDR %s does not resolve; set it to rank 0's host\n", rank, host);
    return -1;
  }
  double deadline = clock_seconds() + timeout;
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, found->ai_addr, found->ai_addrlen) == 0) {
      size_t got = 0;
      ssize_t n = 1;
      while (got < sizeof *id && (n = read(s, (char *)id + got, sizeof *id - got)) > 0) got += (size_t)n;
      close(s);
      if (got == sizeof *id) break;
    } else if (s >= 0) {
      close(s);
    }
    if (clock_seconds() > deadline) {
      fprintf(stderr, "plait: rank %d could not reach rank 0 at %s:%s within %g s; start rank 0 with the same "
              "MASTER_ADDR and MASTER_PORT (or set PLAIT_COMM_TIMEOUT)\n", rank, host, port, timeout);
      freeaddrinfo(found);
      return -1;
    }
    usleep(100 * 1000);
  }
  freeaddrinfo(found);
  return 0;
}

/* The id, this process's rank and the world from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. */
static int tcp_bootstrap(int needed, double timeout, ncclUniqueId *id, int *rank) {
  long world = env_number("WORLD_SIZE"), r = env_number("RANK");
  const char *host = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (world < 1) return nc_refuse("WORLD_SIZE is '%s'; set it to the number of ranks", getenv("WORLD_SIZE"));
  if (r < 0 || r >= world)
    return nc_refuse("RANK is '%s'; set it to this process's rank, 0 to WORLD_SIZE - 1",
                     getenv("RANK") ? getenv("RANK") : "unset");
  if (world != needed)
    return nc_refuse("WORLD_SIZE is %ld but the plan needs tp·pp·dp = %d; start that many ranks", world, needed);
  *rank = (int)r;
  if (world > 1 && (!host || !*host || env_number("MASTER_PORT") < 1))
    return nc_refuse("MASTER_ADDR and MASTER_PORT must name rank 0's host and a free port (they are '%s' and '%s')",
                     host ? host : "unset", port ? port : "unset");
  if (r == 0 && ncclGetUniqueId(id) != ncclSuccess) return nc_refuse("NCCL could not make its unique id: %s", ncclGetLastError(NULL));
  if (world == 1) return 0;
  return (r == 0 ? tcp_serve(id, (int)world, port, timeout) : tcp_fetch(id, (int)r, host, port, timeout)) ? 1 : 0;
}

#ifdef PLAIT_MPI
/* Under mpirun or srun: MPI's world must be the launcher's and the plan's; rank 0's id is broadcast. */
static int mpi_bootstrap(int needed, int world, const char *launcher, ncclUniqueId *id, int *rank) {
  int size;
  MPI_Init(NULL, NULL);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  if (size != world || size != needed) {
    if (*rank == 0)
      fprintf(stderr, "plait: the launcher started %d rank%s but the plan needs tp·pp·dp = %d; run %s %d\n", size,
              size > 1 ? "s" : "", needed, launcher, needed);
    MPI_Finalize();
    return 1;
  }
  if (*rank == 0 && ncclGetUniqueId(id) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(id, sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD);
  return 0;
}
#endif

/* ---- the rank ---------------------------------------------------------------------------------- */

/* The world communicator, then each group split from it in the order of GroupKind, twice (the rank's
 * own and the worker's). A group's color is its first member; groups of one get no communicator. */
static void nc_groups_new(NcclRank *r, const ncclUniqueId *id) {
  const RankInfo *ri = &r->comm.info;
  nc_check(r, ncclCommInitRank(&r->world, ri->world, *id, ri->rank), "initialisation", GROUP_WORLD);
  for (int ch = 0; ch < CHANNELS; ch++)
    for (int g = 0; g < GROUP_COUNT; g++) {
      const CommGroup *group = &r->comm.group[g];
      int color = group->size > 1 ? group->members[0] : NCCL_SPLIT_NOCOLOR;
      nc_check(r, ncclCommSplit(r->world, color, group->rank, &r->group[ch][g], NULL), "communicator split",
               (GroupKind)g);
    }
}

static NcclRank *nc_rank_new(const CommGrid *grid, int rank, double timeout, const ncclUniqueId *id, int mpi) {
  NcclRank *r = calloc(1, sizeof *r);
  comm_init(&r->comm, &nccl_ops, grid, rank, timeout, &r->process);
  r->mpi = mpi;
  device_init(comm_device_index(&r->comm), comm_ranks_on_machine(r->comm.info.world));
  for (int ch = 0; ch < CHANNELS; ch++) {
    gpu_check(cudaStreamCreateWithFlags(&r->stream[ch], cudaStreamNonBlocking), "cudaStreamCreate");
    gpu_check(cudaEventCreateWithFlags(&r->ready[ch], cudaEventDisableTiming), "cudaEventCreate");
    gpu_check(cudaEventCreateWithFlags(&r->done[ch], cudaEventDisableTiming), "cudaEventCreate");
  }
  nc_groups_new(r, id);
  r->comm.worker = comm_worker_new(&r->comm, nc_worker_reduce, 0);
  return r;
}

static void nc_rank_free(NcclRank *r) {
  gpu_sync("the end of the job");
  comm_worker_free(r->comm.worker);
  for (int ch = 0; ch < CHANNELS; ch++) {
    cudaStreamSynchronize(r->stream[ch]);
    for (int g = 0; g < GROUP_COUNT; g++)
      if (r->group[ch][g]) ncclCommDestroy(r->group[ch][g]);
    cudaStreamDestroy(r->stream[ch]);
    cudaEventDestroy(r->ready[ch]);
    cudaEventDestroy(r->done[ch]);
  }
  ncclCommDestroy(r->world);
  if (r->staging) cudaFreeAsync(r->staging, gpu_stream());
  if (r->permute) cudaFreeAsync(r->permute, gpu_stream());
  gpu_sync("the end of the job");
  free(r->transfers);
  comm_release(&r->comm);
  free(r);
}

int comm_nccl_launch(const CommGrid *grid, double timeout, int world, const char *launcher, RankMain fn,
                     void *arg) {
  ncclUniqueId id;
  int rank = 0, mpi = world > 0, ranks = grid->tp * grid->pp * grid->dp;
  memset(&id, 0, sizeof id);
#ifdef PLAIT_MPI
  if (mpi && mpi_bootstrap(ranks, world, launcher, &id, &rank)) return 1;
#else
  if (mpi)
    return nc_refuse("started by %s %d but this program was built without MPI; start each rank with RANK, WORLD_SIZE, "
                     "MASTER_ADDR and MASTER_PORT set instead", launcher, world);
#endif
  if (!mpi && tcp_bootstrap(ranks, timeout, &id, &rank)) return 1;
  NcclRank *r = nc_rank_new(grid, rank, timeout, &id, mpi);
  int status = fn(&r->comm, arg);
  comm_worker_check_idle(&r->comm);
  if (r->in_p2p) comm_fail(&r->comm, "returned between comm_p2p_start and comm_p2p_end");
  nc_rank_free(r);
#ifdef PLAIT_MPI
  if (mpi) MPI_Finalize();
#endif
  return status;
}
