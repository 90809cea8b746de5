/* checkpoint.c: saving every parameter and its Adam state as full logical tensors by name
 * (gathered over DP where the distributed optimizer shards them, over TP, sent to rank 0, streamed
 * into one safetensors file written atomically), and
 * loading any layout's checkpoint by reading each rank's own box of every tensor: all of them to
 * resume (--load), the weights alone to start from (--init). */
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"
#include "ckpt/safetensors_meta.h"
#include "ckpt/safetensors_model.h"
#include "message.h"
#include "own_folder.h"
#include "device.h"
#include "train/resume.h"

/* the kinds of tensor, in the order a checkpoint holds them */
enum { WEIGHTS = PARAM_WEIGHTS, ADAM_M = PARAM_ADAM_M, ADAM_V = PARAM_ADAM_V, KINDS };
static const char *const kind_prefix[KINDS] = {"", "adam.m.", "adam.v."};

/* Every parameter of the model in one order all ranks agree on: model scope, then layer by
 * layer. */
typedef struct {
  const ParamSpec *spec;
  int layer;
  int owner; /* the pipeline rank that saves it (chunk 0's for a tied table) */
} Entry;

static int owner_of(const Program *p, const ParamSpec *spec, int layer) {
  if (layer < 0) return spec->in_embed ? 0 : (p->nchunks - 1) % p->pp;
  for (int c = 0; c < p->nchunks; c++)
    if (layer >= p->chunks[c].first_layer && layer < p->chunks[c].first_layer + p->chunks[c].layers)
      return c % p->pp;
  return 0;
}

static int entries(const Program *p, Entry *out) {
  int n = 0;
  for (int i = 0; i < p->nmodel_params; i++)
    out[n++] = (Entry){&p->model_params[i], -1, owner_of(p, &p->model_params[i], -1)};
  for (int l = 0; l < p->layers; l++)
    for (int i = 0; i < p->nblock_params; i++)
      out[n++] = (Entry){&p->block_params[i], l, owner_of(p, &p->block_params[i], l)};
  return n;
}

static void entry_name(const Entry *e, int kind, char *buf, int len) {
  if (e->layer < 0) snprintf(buf, len, "%s%s", kind_prefix[kind], e->spec->name);
  else snprintf(buf, len, "%slayers.%d.%s", kind_prefix[kind], e->layer, e->spec->name);
}

static int64_t unpadded_elems(const ParamSpec *s) {
  int64_t n = 1;
  for (int a = 0; a < s->ndim; a++) n *= s->unpadded[a];
  return n;
}

static int64_t padded_elems(const ParamSpec *s) {
  int64_t n = 1;
  for (int a = 0; a < s->ndim; a++) n *= s->shape[a];
  return n;
}

static ParamSlot *find_slot(Params *ps, const Entry *e) {
  for (int i = 0; i < ps->count; i++)
    if (ps->slot[i].spec == e->spec && ps->slot[i].layer == e->layer) return &ps->slot[i];
  return NULL;
}

/* ---- saving --------------------------------------------------------------------------------- */

/* A save under way: the tensor in transit, and on rank 0 the writer. */
typedef struct {
  Trainer *t;
  int64_t step;
  real *full, *host; /* one tensor in the backend's memory, and on rank 0 its copy in host memory */
  real *whole;       /* with the distributed optimizer: a rank's share of it, whole (DP rank 0) */
  real *experts;     /* with experts split over ep and tp: every ep rank's, before the tp gather */
  CkptWriter w;
  /* rank 0: the writer failed (the other ranks go on sending; the save fails at its end) */
  int failed;
} Save;

/* With the distributed optimizer, on the owner's ranks: DP rank 0 receives the other DP ranks'
 * elements of the slot's state into `whole` beside its own; returns where the slot's n elements
 * are (DP rank 0's). */
static const real *share_whole(Trainer *t, ParamSlot *s, int kind, real *whole) {
  const Params *ps = &t->params;
  int dp = t->prog->dp, dp_rank = comm_info(t->comm)->dp_rank;
  if (!ps->sharded) return params_own(s, kind);
  int64_t begin, end;
  comm_p2p_start(t->comm);
  if (dp_rank > 0 && s->own_end > s->own_begin)
    comm_send(t->comm, comm_group_member(t->comm, GROUP_DP, 0), params_own(s, kind),
              s->own_end - s->own_begin, COMM_REAL, kind);
  for (int k = 1; dp_rank == 0 && k < dp; k++) {
    params_share(ps, s, dp, k, &begin, &end);
    if (end > begin)
      comm_recv(t->comm, comm_group_member(t->comm, GROUP_DP, k), whole + begin, end - begin,
                COMM_REAL, kind);
  }
  comm_p2p_end(t->comm);
  if (s->own_end > s->own_begin)
    device_copy(whole + s->own_begin, params_own(s, kind),
                (size_t)(s->own_end - s->own_begin) * sizeof(real));
  return whole;
}

/* Pieces gathered from every TP rank, [outer][tp][inner], to one of each, [outer][pieces][inner]:
 * the first of the `copies` ranks holding each. Every block moves left by at least its length. */
static void drop_copies(real *full, int64_t outer, int tp, int copies, int64_t inner) {
  int pieces = tp / copies;
  for (int64_t o = 0; o < outer; o++)
    for (int q = 0; q < pieces; q++)
      if (o > 0 || q > 0)
        device_copy(full + (o * pieces + q) * inner, full + (o * tp + q * copies) * inner,
                    (size_t)inner * sizeof(real));
}

/* An expert's weights spread over ep ranks: gathered over them along axis 0, the experts. */
static int spread_over_ep(const Trainer *t, const ParamSlot *s) {
  return s->spec->expert_split && params_ep(t->prog) > 1;
}

/* On the owner's TP ranks of DP replica 0 (and, for experts spread over ep ranks, of the other DP
 * ranks of its ep group): the whole padded tensor, gathered over the experts (into `experts` when
 * they are split over tp too), then along the split axis (full has room for every piece). */
static void gather(Trainer *t, ParamSlot *s, const real *share, real *full, real *experts) {
  const ParamSpec *p = s->spec;
  int tp = t->prog->tp, copies = params_copies(p), split = p->split_axis >= 0 && tp != copies;
  if (spread_over_ep(t, s)) {
    comm_allgather(t->comm, GROUP_EP, share, split ? experts : full, 1, s->n, COMM_REAL);
    if (!split) return;
    share = experts;
  }
  if (!split) {
    device_copy(full, share, (size_t)s->n * sizeof(real));
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < p->ndim; a++) {
    if (a < p->split_axis) outer *= p->shape[a];
    else inner *= a == p->split_axis ? p->shape[a] / (tp / copies) : p->shape[a];
  }
  comm_allgather(t->comm, GROUP_TP, share, full, outer, inner, COMM_REAL);
  if (copies > 1) drop_copies(full, outer, tp, copies, inner);
}

/* A checkpoint holds finite values only: a weight or moment that is not (an update with a
 * learning rate of nan, a moment that overflowed) ends the job before the file is renamed into
 * place, so the checkpoint saved before stays as it was. Checked on rank 0's copy as it goes to
 * the writer. */
static void check_finite(Save *sv, const Entry *e, int kind, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += !isfinite(sv->host[i]);
  if (!bad) return;
  int64_t first = 0;
  while (isfinite(sv->host[first])) first++;
  char name[160];
  entry_name(e, kind, name, sizeof name);
  ckpt_write_abort(&sv->w);
  comm_fail(sv->t->comm,
            "step %lld: tensor '%s' holds %g at element %lld (%lld elements are not finite); a "
            "checkpoint keeps "
            "finite values only: not saved, %s stays as it was; try a lower --lr",
            (long long)sv->step, name, (double)sv->host[first], (long long)first, (long long)bad,
            sv->w.path);
}

/* Moves one tensor to rank 0 and hands it to the writer there. Padding is the tail of axis 0, so
 * the unpadded tensor is a prefix of the padded one. */
static void save_tensor(Save *sv, const Entry *e, int kind) {
  Trainer *t = sv->t;
  const RankInfo *ri = comm_info(t->comm);
  /* this DP replica's, TP rank as ours */
  int holder = comm_group_member(t->comm, GROUP_PP, e->owner);
  int in_owner_group = ri->pp_rank == e->owner && ri->dp_rank == 0;
  int64_t n = unpadded_elems(e->spec);
  if (ri->pp_rank == e->owner) {
    ParamSlot *s = find_slot(&t->params, e);
    const real *share = share_whole(t, s, kind, sv->whole);
    int gathers = in_owner_group || (spread_over_ep(t, s) && ri->dp_rank < params_ep(t->prog));
    if (gathers) gather(t, s, share, sv->full, sv->experts);
  }
  int sender = in_owner_group && ri->tp_rank == 0 && ri->rank != 0;
  int receiver = ri->rank == 0 && !(in_owner_group && ri->tp_rank == 0);
  if (sender || receiver) {
    comm_p2p_start(t->comm);
    if (sender) comm_send(t->comm, 0, sv->full, n, COMM_REAL, kind);
    /* rank 0: TP rank 0 of replica 0, as the sender */
    else comm_recv(t->comm, holder, sv->full, n, COMM_REAL, kind);
    comm_p2p_end(t->comm);
  }
  if (ri->rank != 0 || sv->failed) return;
  device_download(sv->host, sv->full, (size_t)n * sizeof *sv->host);
  check_finite(sv, e, kind, n);
  if (ckpt_write_data(&sv->w, sv->host, n)) sv->failed = 1;
}

enum { META_FIXED = 5, META_TEXT_LEN = 160 };

/* A full checkpoint's metadata: what the file is (format, contents, model, layers), where the
 * run stands (step, then its seed and schedule), and the model's configuration as config.KEY:
 * what loading checks. Keys and values made here live in text. */
typedef struct {
  CkptMeta *meta;
  int count;
  char (*text)[META_TEXT_LEN];
  char (*run)[RESUME_TEXT_LEN];
} Metadata;

static Metadata metadata(const Trainer *t, int64_t step) {
  const Program *p = t->prog;
  Metadata m = {calloc((size_t)(META_FIXED + RESUME_KEYS + p->nconfig), sizeof *m.meta), 0,
                calloc((size_t)(2 + p->nconfig), sizeof *m.text),
                calloc(RESUME_KEYS, sizeof *m.run)};
  snprintf(m.text[0], META_TEXT_LEN, "%lld", (long long)step);
  snprintf(m.text[1], META_TEXT_LEN, "%d", p->layers);
  m.meta[m.count++] = (CkptMeta){CKPT_FORMAT_KEY, CKPT_FORMAT};
  m.meta[m.count++] = (CkptMeta){CKPT_CONTENTS_KEY, CKPT_WEIGHTS_AND_OPTIMIZER};
  m.meta[m.count++] = (CkptMeta){CKPT_MODEL_KEY, p->name};
  m.meta[m.count++] = (CkptMeta){CKPT_LAYERS_KEY, m.text[1]};
  m.meta[m.count++] = (CkptMeta){"step", m.text[0]};
  m.count += resume_metadata(t, m.meta + m.count, m.run);
  for (int i = 0; i < p->nconfig; i++) {
    snprintf(m.text[2 + i], META_TEXT_LEN, "%s%s", CKPT_CONFIG_PREFIX, p->config[i].key);
    m.meta[m.count++] = (CkptMeta){m.text[2 + i], p->config[i].value};
  }
  return m;
}

static void metadata_free(Metadata *m) {
  free(m->meta);
  free(m->text);
  free(m->run);
}

static int begin_file(Trainer *t, const OwnFolder *folder, const char *path, const Entry *list,
                      int n, int64_t step, CkptWriter *w) {
  char temp[4200];
  own_folder_temp(folder, "model.safetensors", temp, sizeof temp);
  CkptSpec *specs = calloc((size_t)n * KINDS, sizeof *specs);
  char (*names)[160] = calloc((size_t)n * KINDS, sizeof *names);
  for (int k = 0, i = 0; k < KINDS; k++)
    for (int j = 0; j < n; j++, i++) {
      entry_name(&list[j], k, names[i], sizeof names[i]);
      specs[i].name = names[i];
      specs[i].ndim = list[j].spec->ndim;
      for (int a = 0; a < specs[i].ndim; a++) specs[i].shape[a] = list[j].spec->unpadded[a];
    }
  Metadata meta = metadata(t, step);
  int status = ckpt_write_begin_as(w, path, temp, specs, n * KINDS, meta.meta, meta.count);
  metadata_free(&meta);
  free(specs);
  free(names);
  return status;
}

/* --save's folder, made where missing and checked again at each save: plait's own checkpoint
 * folder. */
static void claim_folder(Trainer *t, const char *dir, OwnFolder *folder) {
  static const char *const files[] = {"model.safetensors"};
  char error[MESSAGE_TEXT];
  if (own_folder_claim(folder, "--save", dir, FOLDER_CHECKPOINT, files, 1, error, sizeof error))
    comm_fail(t->comm, "%s", error);
}

void checkpoint_save(Trainer *t, const char *dir, int64_t step) {
  const Program *p = t->prog;
  int total = p->nmodel_params + p->layers * p->nblock_params,
      is_root = comm_info(t->comm)->rank == 0;
  Entry *list = calloc((size_t)total, sizeof *list);
  int n = entries(p, list);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  Save sv = {.t = t, .step = step};
  OwnFolder folder = {0};
  if (is_root) claim_folder(t, dir, &folder);
  if (is_root && begin_file(t, &folder, path, list, n, step, &sv.w))
    comm_fail(t->comm, "%s", sv.w.error);
  int64_t largest = 0;
  for (int i = 0; i < n; i++)
    largest = padded_elems(list[i].spec) > largest ? padded_elems(list[i].spec) : largest;
  int copies = p->tp_copies > 1 ? p->tp_copies : 1; /* pieces gathered from every TP rank */
  sv.full = device_alloc((size_t)(largest * copies) * sizeof *sv.full, "a checkpoint's tensor");
  if (t->params.sharded) sv.whole = device_alloc((size_t)largest * sizeof *sv.whole, "a share");
  if (params_ep(p) > 1 && p->tp > 1)
    sv.experts = device_alloc((size_t)largest * sizeof *sv.experts, "an expert's tensor");
  sv.host = malloc((size_t)largest * sizeof *sv.host);
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < n; i++) save_tensor(&sv, &list[i], k);
  device_free(sv.full);
  device_free(sv.whole);
  device_free(sv.experts);
  free(sv.host);
  free(list);
  if (is_root && (sv.failed || ckpt_write_end(&sv.w))) {
    ckpt_write_abort(&sv.w);
    comm_fail(t->comm, "%s", sv.w.error);
  }
  own_folder_free(&folder);
  comm_barrier(t->comm, GROUP_WORLD);
  if (is_root) printf("saved %s (step %lld)\n", path, (long long)step);
}

/* ---- loading -------------------------------------------------------------------------------- */

/* This rank's box of one tensor: the unpadded part read from the file, padding rows zero. */
static void load_box(Trainer *t, Ckpt *c, ParamSlot *s, int kind, const char *name) {
  int64_t begin[CKPT_MAX_DIMS], count[CKPT_MAX_DIMS];
  const ParamSpec *p = s->spec;
  real *out = calloc((size_t)s->n + 1, sizeof *out);
  for (int a = 0; a < p->ndim; a++) {
    begin[a] = s->box.begin[a];
    count[a] = s->box.count[a];
    if (a > 0 && p->unpadded[a] != p->shape[a])
      comm_fail(t->comm, "%s: padding beyond axis 0 (a bug in plait)", name);
  }
  if (p->ndim > 0 && begin[0] + count[0] > p->unpadded[0])
    count[0] = p->unpadded[0] > begin[0] ? p->unpadded[0] - begin[0] : 0;
  if ((p->ndim == 0 || count[0] > 0) &&
      ckpt_read_box(c, name, p->ndim, p->unpadded, begin, count, out))
    comm_fail(t->comm, "%s", c->error);
  params_upload(s, (ParamState)kind, out);
  free(out);
}

static int by_text(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b);
}

/* The names of this model's tensors of one kind (the weights, Adam's m or v), sorted. */
static char (*expected_names(const Program *p, int kind, int *count))[160] {
  int total = p->nmodel_params + p->layers * p->nblock_params;
  Entry *list = calloc((size_t)total, sizeof *list);
  int n = entries(p, list);
  char (*names)[160] = calloc((size_t)n, sizeof *names);
  for (int j = 0; j < n; j++) entry_name(&list[j], kind, names[j], sizeof names[j]);
  qsort(names, (size_t)n, sizeof *names, by_text);
  free(list);
  *count = n;
  return names;
}

/* A tensor's kind; KINDS for optimizer state plait does not keep (another adam.* tensor), which no
 * reader looks at. */
static int kind_of(const char *name) {
  for (int k = KINDS - 1; k > 0; k--)
    if (strncmp(name, kind_prefix[k], strlen(kind_prefix[k])) == 0) return k;
  return strncmp(name, "adam.", 5) == 0 ? KINDS : WEIGHTS;
}

/* The next checkpoint tensor of this kind from index j on (its tensors are sorted by name, so
 * those of one kind come in order), or c->ntensors. */
static int next_of_kind(const Ckpt *c, int kind, int j) {
  while (j < c->ntensors && kind_of(c->tensors[j].name) != kind) j++;
  return j;
}

/* The checkpoint holds exactly this model's tensors of the kinds before `upto` (ADAM_M: the
 * weights; KINDS: all): per kind, walks both sorted lists side by side and names the first
 * tensor that only one of them has. Tensors of the other kinds are not looked at. */
static void check_tensor_names(Trainer *t, const Ckpt *c, int upto) {
  for (int k = 0; k < upto; k++) {
    int n;
    char (*names)[160] = expected_names(t->prog, k, &n);
    for (int i = 0, j = next_of_kind(c, k, 0); i < n || j < c->ntensors;
         i++, j = next_of_kind(c, k, j + 1)) {
      int order = i == n ? 1 : j == c->ntensors ? -1 : strcmp(names[i], c->tensors[j].name);
      if (order < 0)
        comm_fail(
            t->comm,
            "%s has no tensor '%s', which this model has: it is of another model named '%s'; load "
            "a checkpoint of this model",
            c->path, names[i], t->prog->name);
      if (order > 0)
        comm_fail(
            t->comm,
            "%s holds tensor '%s', which this model does not have: it is of another model named "
            "'%s'; load a checkpoint of this model",
            c->path, c->tensors[j].name, t->prog->name);
    }
    free(names);
  }
}

/* Refuses a checkpoint of another model before reading anything: its name, its depth, its
 * configuration (then check_tensor_names its set of tensors; the shapes are checked as each
 * tensor is read). Any layout loads it: nothing here depends on one. */
static void check_model(Trainer *t, const Ckpt *c) {
  const Program *p = t->prog;
  CkptMeta *config = calloc((size_t)p->nconfig + 1, sizeof *config);
  for (int i = 0; i < p->nconfig; i++) config[i] = (CkptMeta){p->config[i].key, p->config[i].value};
  CkptModel model = {p->name, p->layers, config, p->nconfig};
  char error[MESSAGE_TEXT];
  int refused = ckpt_check_model(c, &model, error, sizeof error);
  free(config);
  if (refused) comm_fail(t->comm, "%s", error);
}

/* Weights alone: its metadata says so (plait import writes such files), or an older file without
 * a step has no Adam state either. */
static int holds_weights_only(const Ckpt *c) {
  const char *contents = ckpt_meta(c, CKPT_CONTENTS_KEY);
  int adam = 0;
  for (int j = 0; j < c->ntensors && !adam; j++) adam = kind_of(c->tensors[j].name) == ADAM_M;
  return (contents && strcmp(contents, CKPT_WEIGHTS_ONLY) == 0) || (!adam && !ckpt_meta(c, "step"));
}

/* What a run that goes on needs beyond the model: Adam's state, the step and the seed. */
static void check_resumable(Trainer *t, const Ckpt *c, const char *dir) {
  if (holds_weights_only(c))
    comm_fail(t->comm,
              "%s holds weights only (no Adam state or step); start from it with --init %s",
              c->path, dir);
  if (!ckpt_meta(c, "step") || !ckpt_meta(c, "seed"))
    comm_fail(t->comm, "%s has no step or seed in its metadata; it is not a plait checkpoint",
              c->path);
}

/* Reads this rank's box of every parameter's tensors of the kinds before `upto`. */
static void load_tensors(Trainer *t, Ckpt *c, int upto) {
  for (int i = 0; i < t->params.count; i++)
    for (int k = 0; k < upto; k++) {
      ParamSlot *s = &t->params.slot[i];
      char name[160];
      snprintf(name, sizeof name, "%s%s", kind_prefix[k], s->name);
      load_box(t, c, s, k, name);
    }
}

static void open_checkpoint(Trainer *t, Ckpt *c, const char *dir, char *path, size_t len) {
  snprintf(path, len, "%s/model.safetensors", dir);
  if (ckpt_open(c, path)) comm_fail(t->comm, "%s", c->error);
}

/* The step the checkpoint holds: a whole number. */
static int64_t saved_step(Trainer *t, const Ckpt *c) {
  char error[MESSAGE_TEXT];
  uint64_t step = 0;
  if (ckpt_meta_whole(c, "step", 0, INT64_MAX, &step, error, sizeof error) < 0)
    comm_fail_all(t->comm, "%s", error);
  return (int64_t)step;
}

/* A run that trains must go beyond the checkpoint's step: else it would train nothing and end as
 * if it had. */
static void check_steps_beyond(Trainer *t, int64_t step, const char *dir) {
  int64_t steps = t->args->steps;
  if (steps > 0 && step >= steps)
    comm_fail_all(t->comm,
                  "%s holds step %lld, and --steps %lld is not beyond it: nothing would train; "
                  "give --steps above %lld",
                  dir, (long long)step, (long long)steps, (long long)step);
}

int64_t checkpoint_load(Trainer *t, const char *dir) {
  char path[4096];
  Ckpt c;
  open_checkpoint(t, &c, dir, path, sizeof path);
  check_model(t, &c);
  check_resumable(t, &c, dir);
  int64_t at = saved_step(t, &c);
  check_tensor_names(t, &c, KINDS);
  load_tensors(t, &c, KINDS); /* checks each tensor's shape and checksum */
  /* data windows, dropout masks and the learning rate go on as they would have */
  resume_settle(t, &c);
  check_steps_beyond(t, at, dir);
  ckpt_close(&c);
  return at;
}

void checkpoint_init(Trainer *t, const char *dir) {
  char path[4096];
  Ckpt c;
  open_checkpoint(t, &c, dir, path, sizeof path);
  check_model(t, &c);
  /* the weights; Adam's state, if the file holds it, is not read */
  check_tensor_names(t, &c, ADAM_M);
  load_tensors(t, &c, ADAM_M);
  ckpt_close(&c);
}
