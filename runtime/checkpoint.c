/* checkpoint.c: saving every parameter and its Adam state as full logical tensors by name (gathered over
 * TP, sent to rank 0, streamed into one safetensors file written atomically), and loading any layout's
 * checkpoint by reading each rank's own box of every tensor. */
#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "ckpt_model.h"
#include "device.h"

enum { KINDS = 3 }; /* weights, Adam m, Adam v */
static const char *const kind_prefix[KINDS] = {"", "adam.m.", "adam.v."};

/* Every parameter of the model in one order all ranks agree on: model scope, then layer by layer. */
typedef struct {
  const ParamSpec *spec;
  int layer;
  int owner; /* the pipeline rank that saves it (chunk 0's for a tied table) */
} Entry;

static int owner_of(const Program *p, const ParamSpec *spec, int layer) {
  if (layer < 0) return spec->in_embed ? 0 : (p->nchunks - 1) % p->pp;
  for (int c = 0; c < p->nchunks; c++)
    if (layer >= p->chunks[c].first_layer && layer < p->chunks[c].first_layer + p->chunks[c].layers) return c % p->pp;
  return 0;
}

static int entries(const Program *p, Entry *out) {
  int n = 0;
  for (int i = 0; i < p->nmodel_params; i++) out[n++] = (Entry){&p->model_params[i], -1, owner_of(p, &p->model_params[i], -1)};
  for (int l = 0; l < p->layers; l++)
    for (int i = 0; i < p->nblock_params; i++) out[n++] = (Entry){&p->block_params[i], l, owner_of(p, &p->block_params[i], l)};
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

static real *slot_data(ParamSlot *s, int kind) { return kind == 0 ? s->master : kind == 1 ? s->m : s->v; }

/* ---- saving --------------------------------------------------------------------------------- */

/* On the owner's TP ranks of DP replica 0: the whole padded tensor, gathered along the split axis. */
static void gather(Trainer *t, ParamSlot *s, int kind, real *full) {
  const ParamSpec *p = s->spec;
  if (p->split_axis < 0 || t->prog->tp == 1) {
    device_copy(full, slot_data(s, kind), (size_t)s->n * sizeof(real));
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < p->ndim; a++) {
    if (a < p->split_axis) outer *= p->shape[a];
    else inner *= a == p->split_axis ? p->shape[a] / t->prog->tp : p->shape[a];
  }
  comm_allgather(t->comm, GROUP_TP, slot_data(s, kind), full, outer, inner, COMM_REAL);
}

/* Moves one tensor to rank 0 (full: backend memory) and hands it to the writer there (host: its copy in
 * host memory). Padding is the tail of axis 0, so the unpadded tensor is a prefix of the padded one. */
static void save_tensor(Trainer *t, const Entry *e, int kind, real *full, real *host, CkptWriter *w, int *failed) {
  const RankInfo *ri = comm_info(t->comm);
  int holder = comm_group_member(t->comm, GROUP_PP, e->owner); /* this DP replica's, TP rank as ours */
  int in_owner_group = ri->pp_rank == e->owner && ri->dp_rank == 0;
  int64_t n = unpadded_elems(e->spec);
  if (in_owner_group) gather(t, find_slot(&t->params, e), kind, full);
  int sender = in_owner_group && ri->tp_rank == 0 && ri->rank != 0;
  int receiver = ri->rank == 0 && !(in_owner_group && ri->tp_rank == 0);
  if (sender || receiver) {
    comm_p2p_start(t->comm);
    if (sender) comm_send(t->comm, 0, full, n, COMM_REAL, kind);
    else comm_recv(t->comm, holder, full, n, COMM_REAL, kind); /* rank 0 is TP rank 0 of replica 0, like the sender */
    comm_p2p_end(t->comm);
  }
  if (ri->rank != 0) return;
  device_download(host, full, (size_t)n * sizeof *host);
  if (!*failed && ckpt_write_data(w, host, n)) *failed = 1;
}

enum { META_FIXED = 5, META_TEXT_LEN = 96 };

/* What the file is and where the run stands (format, model, step, seed, layers), then the model's
 * configuration as config.KEY: what loading checks. text holds the values and keys made here (3 +
 * nconfig entries). */
static CkptMeta *metadata(const Trainer *t, int64_t step, char (*text)[META_TEXT_LEN], int *count) {
  const Program *p = t->prog;
  CkptMeta *meta = calloc((size_t)(META_FIXED + p->nconfig), sizeof *meta);
  snprintf(text[0], META_TEXT_LEN, "%lld", (long long)step);
  snprintf(text[1], META_TEXT_LEN, "%llu", (unsigned long long)t->seed);
  snprintf(text[2], META_TEXT_LEN, "%d", p->layers);
  meta[0] = (CkptMeta){"format", "plait checkpoint 1"};
  meta[1] = (CkptMeta){CKPT_MODEL_KEY, p->name};
  meta[2] = (CkptMeta){"step", text[0]};
  meta[3] = (CkptMeta){"seed", text[1]};
  meta[4] = (CkptMeta){CKPT_LAYERS_KEY, text[2]};
  for (int i = 0; i < p->nconfig; i++) {
    snprintf(text[3 + i], META_TEXT_LEN, "%s%s", CKPT_CONFIG_PREFIX, p->config[i].key);
    meta[META_FIXED + i] = (CkptMeta){text[3 + i], p->config[i].value};
  }
  *count = META_FIXED + p->nconfig;
  return meta;
}

static int begin_file(Trainer *t, const char *path, const Entry *list, int n, int64_t step, CkptWriter *w) {
  CkptSpec *specs = calloc((size_t)n * KINDS, sizeof *specs);
  char (*names)[160] = calloc((size_t)n * KINDS, sizeof *names);
  for (int k = 0, i = 0; k < KINDS; k++)
    for (int j = 0; j < n; j++, i++) {
      entry_name(&list[j], k, names[i], sizeof names[i]);
      specs[i].name = names[i];
      specs[i].ndim = list[j].spec->ndim;
      for (int a = 0; a < specs[i].ndim; a++) specs[i].shape[a] = list[j].spec->unpadded[a];
    }
  char (*text)[META_TEXT_LEN] = calloc((size_t)(3 + t->prog->nconfig), sizeof *text);
  int nmeta;
  CkptMeta *meta = metadata(t, step, text, &nmeta);
  int status = ckpt_write_begin(w, path, specs, n * KINDS, meta, nmeta);
  free(meta);
  free(text);
  free(specs);
  free(names);
  return status;
}

static void ensure_directory(Trainer *t, const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    comm_fail(t->comm, "--save %s: cannot create the directory: %s", dir, strerror(errno));
}

void checkpoint_save(Trainer *t, const char *dir, int64_t step) {
  const Program *p = t->prog;
  int total = p->nmodel_params + p->layers * p->nblock_params, is_root = comm_info(t->comm)->rank == 0;
  Entry *list = calloc((size_t)total, sizeof *list);
  int n = entries(p, list);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  CkptWriter w;
  int failed = 0;
  if (is_root) ensure_directory(t, dir);
  if (is_root && begin_file(t, path, list, n, step, &w)) comm_fail(t->comm, "%s", w.error);
  int64_t largest = 0;
  for (int i = 0; i < n; i++) largest = padded_elems(list[i].spec) > largest ? padded_elems(list[i].spec) : largest;
  real *full = device_alloc((size_t)largest * sizeof *full, "a checkpoint's tensor");
  real *host = malloc((size_t)largest * sizeof *host);
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < n; i++) save_tensor(t, &list[i], k, full, host, &w, &failed);
  device_free(full);
  free(host);
  free(list);
  if (is_root && (failed || ckpt_write_end(&w))) {
    ckpt_write_abort(&w);
    comm_fail(t->comm, "%s", w.error);
  }
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
    if (a > 0 && p->unpadded[a] != p->shape[a]) comm_fail(t->comm, "%s: padding beyond axis 0 (a bug in plait)", name);
  }
  if (p->ndim > 0 && begin[0] + count[0] > p->unpadded[0]) count[0] = p->unpadded[0] > begin[0] ? p->unpadded[0] - begin[0] : 0;
  if ((p->ndim == 0 || count[0] > 0) && ckpt_read_box(c, name, p->ndim, p->unpadded, begin, count, out))
    comm_fail(t->comm, "%s", c->error);
  device_upload(slot_data(s, kind), out, (size_t)s->n * sizeof *out);
  free(out);
}

static int by_text(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

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

static int kind_of(const char *name) {
  for (int k = KINDS - 1; k > 0; k--)
    if (strncmp(name, kind_prefix[k], strlen(kind_prefix[k])) == 0) return k;
  return 0;
}

/* The next checkpoint tensor of this kind from index j on (its tensors are sorted by name, so those of
 * one kind come in order), or c->ntensors. */
static int next_of_kind(const Ckpt *c, int kind, int j) {
  while (j < c->ntensors && kind_of(c->tensors[j].name) != kind) j++;
  return j;
}

/* The checkpoint holds exactly this model's tensors: per kind, weights first, walks both sorted lists
 * side by side and names the first tensor that only one of them has. */
static void check_tensor_names(Trainer *t, const Ckpt *c, const char *path) {
  for (int k = 0; k < KINDS; k++) {
    int n;
    char (*names)[160] = expected_names(t->prog, k, &n);
    for (int i = 0, j = next_of_kind(c, k, 0); i < n || j < c->ntensors; i++, j = next_of_kind(c, k, j + 1)) {
      int order = i == n ? 1 : j == c->ntensors ? -1 : strcmp(names[i], c->tensors[j].name);
      if (order < 0)
        comm_fail(t->comm, "%s has no tensor '%s', which this model has: it is of another model named '%s'; load "
                  "a checkpoint of this model", path, names[i], t->prog->name);
      if (order > 0)
        comm_fail(t->comm, "%s holds tensor '%s', which this model does not have: it is of another model named "
                  "'%s'; load a checkpoint of this model", path, c->tensors[j].name, t->prog->name);
    }
    free(names);
  }
}

/* Refuses a checkpoint of another model before reading anything: its name, its depth, its configuration,
 * its set of tensors (the shapes are checked as each tensor is read). Any layout loads it: nothing here
 * depends on one. */
static void check_model(Trainer *t, const Ckpt *c, const char *path) {
  const Program *p = t->prog;
  CkptMeta *config = calloc((size_t)p->nconfig + 1, sizeof *config);
  for (int i = 0; i < p->nconfig; i++) config[i] = (CkptMeta){p->config[i].key, p->config[i].value};
  CkptModel model = {p->name, p->layers, config, p->nconfig};
  char error[1024];
  int refused = ckpt_check_model(c, &model, error, sizeof error);
  free(config);
  if (refused) comm_fail(t->comm, "%s", error);
  if (!ckpt_meta(c, "step") || !ckpt_meta(c, "seed"))
    comm_fail(t->comm, "%s has no step or seed in its metadata; it is not a plait checkpoint", path);
  check_tensor_names(t, c, path);
}

int64_t checkpoint_load(Trainer *t, const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  Ckpt c;
  if (ckpt_open(&c, path)) comm_fail(t->comm, "%s", c.error);
  check_model(t, &c, path);
  t->seed = strtoull(ckpt_meta(&c, "seed"), NULL, 10); /* data windows and dropout masks go on as they would have */
  for (int i = 0; i < t->params.count; i++)
    for (int k = 0; k < KINDS; k++) {
      ParamSlot *s = &t->params.slot[i];
      char name[160];
      snprintf(name, sizeof name, "%s%s", kind_prefix[k], s->name);
      load_box(t, &c, s, k, name);
    }
  int64_t at = strtoll(ckpt_meta(&c, "step"), NULL, 10);
  ckpt_close(&c);
  params_refresh(&t->params);
  return at;
}
