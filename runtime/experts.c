/* experts.c: expert parallelism's exchanges: a mixture of experts' routed rows sent from the ranks
 * that routed them to the ranks of the ep group that hold their experts, regrouped there by local
 * expert for the grouped GEMMs, and the results brought back in the order they left; the buffers of
 * the rows a rank receives beyond the balanced share its arena holds, sized at run time. */
#include "rt.h"

#include <stdlib.h>

#include "device.h"

/* Rows move between ranks as act_t; the counts as 4-byte words, which gathers and point-to-point
 * copy bit for bit. */
enum { EXPERT_ROWS_TAG = 77 };

/* Host memory for n counts, for the caller to free. */
static int32_t *counts_buffer(Run *r, int64_t n) {
  int32_t *host = malloc((size_t)(n > 0 ? n : 1) * sizeof *host);
  if (!host) comm_fail(r->comm, "out of host memory for the experts' counts");
  return host;
}

/* A host copy of n counts in the backend's memory (the GPU's on the CUDA backend), for the caller
 * to free. */
static int32_t *host_counts(Run *r, int64_t n, const int32_t *counts) {
  int32_t *host = counts_buffer(r, n);
  device_download(host, counts, (size_t)n * sizeof *host);
  return host;
}

void rt_expert_counts(Run *r, int64_t E, const int32_t *counts, int32_t *all_counts,
                      int32_t *local_counts) {
  int ep = comm_group_size(r->comm, GROUP_EP), me = comm_group_rank(r->comm, GROUP_EP);
  int64_t local = E / ep;
  comm_allgather(r->comm, GROUP_EP, counts, all_counts, 1, E, COMM_F32);
  int32_t *all = host_counts(r, ep * E, all_counts), *mine = counts_buffer(r, local);
  for (int64_t e = 0; e < local; e++) {
    mine[e] = 0;
    for (int source = 0; source < ep; source++) mine[e] += all[source * E + me * local + e];
  }
  device_upload(local_counts, mine, (size_t)local * sizeof *mine);
  free(mine);
  free(all);
}

/* The exchange's bookkeeping: this rank's place among the ep ranks, the experts each holds, and
 * every rank's rows per global expert ([ep][E]). A rank's routed rows are grouped by global
 * expert; a holder's received rows by its local expert, then by the rank that routed them. */
typedef struct {
  int ep, me;
  int64_t E, local;
  int32_t *all; /* a host copy, freed by expert_map_free */
} ExpertMap;

static ExpertMap expert_map(Run *r, int64_t E, const int32_t *all_counts) {
  ExpertMap m = {.ep = comm_group_size(r->comm, GROUP_EP), .me = comm_group_rank(r->comm, GROUP_EP),
                 .E = E};
  m.local = E / m.ep;
  m.all = host_counts(r, m.ep * E, all_counts);
  return m;
}

static void expert_map_free(ExpertMap *m) { free(m->all); }

/* First row of global expert g among the rows this rank routed. */
static int64_t routed_offset(const ExpertMap *m, int64_t g) {
  int64_t at = 0;
  for (int64_t f = 0; f < g; f++) at += m->all[m->me * m->E + f];
  return at;
}

/* First row, on this rank, of the rows `source` routed to this rank's local expert e. */
static int64_t held_offset(const ExpertMap *m, int source, int64_t e) {
  int64_t at = 0, base = m->me * m->local;
  for (int64_t f = 0; f < e; f++)
    for (int s = 0; s < m->ep; s++) at += m->all[s * m->E + base + f];
  for (int s = 0; s < source; s++) at += m->all[s * m->E + base + e];
  return at;
}

/* n_out rows of width D from `from` to ep rank `peer`, n_in rows from it into `to`; with this rank
 * itself, a copy of from into to. Empty pieces move nothing on either side. */
static void piece(Run *r, const ExpertMap *m, int peer, const act_t *from, act_t *to,
                  int64_t n_out, int64_t n_in, int64_t D) {
  if (peer == m->me) {
    if (n_out) device_copy(to, from, (size_t)(n_out * D) * sizeof *to);
    return;
  }
  int world = comm_group_member(r->comm, GROUP_EP, peer);
  if (n_out) comm_send(r->comm, world, from, n_out * D, COMM_ACT, EXPERT_ROWS_TAG);
  if (n_in) comm_recv(r->comm, world, to, n_in * D, COMM_ACT, EXPERT_ROWS_TAG);
}

/* Both directions: `to_holders` sends each routed piece to the rank holding its expert (routed in,
 * held out); else each held piece goes back to the rank that routed it (held in, routed out).
 * Between a pair the pieces go one per expert in expert order, each posted where it lands. */
static void exchange(Run *r, const ExpertMap *m, int64_t D, const act_t *in, act_t *out,
                     int to_holders) {
  comm_p2p_start(r->comm);
  for (int peer = 0; peer < m->ep; peer++)
    for (int64_t e = 0; e < m->local; e++) {
      int64_t theirs = peer * m->local + e, ours = m->me * m->local + e;
      int64_t mine_to_them = m->all[m->me * m->E + theirs];
      int64_t theirs_to_me = m->all[peer * m->E + ours];
      int64_t held = held_offset(m, peer, e) * D, routed = routed_offset(m, theirs) * D;
      if (to_holders)
        piece(r, m, peer, in + routed, out + held, mine_to_them, theirs_to_me, D);
      else
        piece(r, m, peer, in + held, out + routed, theirs_to_me, mine_to_them, D);
    }
  comm_p2p_end(r->comm);
}

void rt_expert_send(Run *r, int64_t E, int64_t D, const int32_t *all_counts, const act_t *in,
                    act_t *out) {
  ExpertMap m = expert_map(r, E, all_counts);
  exchange(r, &m, D, in, out, 1);
  expert_map_free(&m);
}

void rt_expert_return(Run *r, int64_t E, int64_t D, const int32_t *all_counts, const act_t *in,
                      act_t *out) {
  ExpertMap m = expert_map(r, E, all_counts);
  exchange(r, &m, D, in, out, 0);
  expert_map_free(&m);
}

/* The rows ep rank `holder` receives: every rank's rows to its experts. */
static int64_t rows_to(const ExpertMap *m, int holder) {
  int64_t rows = 0;
  for (int s = 0; s < m->ep; s++)
    for (int64_t e = 0; e < m->local; e++) rows += m->all[s * m->E + holder * m->local + e];
  return rows;
}

int64_t rt_expert_held(Run *r, int64_t E, const int32_t *all_counts) {
  ExpertMap m = expert_map(r, E, all_counts);
  for (int holder = 0; holder < m.ep; holder++)
    if (rows_to(&m, holder) > r->expert_rows.most) r->expert_rows.most = rows_to(&m, holder);
  int64_t held = rows_to(&m, m.me);
  expert_map_free(&m);
  return held;
}

void rt_expert_dropped(Run *r, int64_t rows, int64_t E, const int32_t *counts) {
  if (!r->training || r->rerun) return;
  int32_t *host = host_counts(r, E, counts);
  int64_t kept = 0;
  for (int64_t e = 0; e < E; e++) kept += host[e];
  free(host);
  r->expert_rows.routed += rows;
  r->expert_rows.dropped += rows - kept;
}

act_t *rt_expert_rows(Run *r, act_t *place, int64_t room, int64_t elems) {
  if (elems <= room) return place;
  ExpertRows *x = &r->expert_rows;
  int at = 0;
  while (at < x->count && (x->buffers[at].place != place || x->buffers[at].room != room)) at++;
  if (at == x->count) {
    if (x->count == x->cap) {
      x->cap = x->cap ? 2 * x->cap : 16;
      x->buffers = realloc(x->buffers, (size_t)x->cap * sizeof *x->buffers);
      if (!x->buffers) comm_fail(r->comm, "out of host memory for the experts' row buffers");
    }
    x->buffers[x->count++] = (ExpertBuffer){place, NULL, room, 0};
  }
  ExpertBuffer *b = &x->buffers[at];
  if (elems > b->elems) {
    device_free(b->data);
    b->data = device_alloc((size_t)elems * sizeof *b->data, "the rows a rank's experts receive");
    b->elems = elems;
  }
  return b->data;
}

void rt_expert_rows_free(Run *r) {
  for (int i = 0; i < r->expert_rows.count; i++) device_free(r->expert_rows.buffers[i].data);
  free(r->expert_rows.buffers);
  r->expert_rows = (ExpertRows){0};
}
