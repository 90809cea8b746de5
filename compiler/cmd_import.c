/* cmd_import.c: `plait import MODEL.lua HF_DIR -o CKPT_DIR`: a Hugging Face checkpoint
 * (model.safetensors, or shards listed by model.safetensors.index.json; F32, F16, BF16 or F64)
 * into a weights-only plait checkpoint of the model, through the links of the model's family
 * (lib/plait/hf.lua). config.json, the tensors' names and their shapes are checked against the
 * model first, and every disagreement is named on a line of its own; then nothing is written. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors_model.h"
#include "commands.h"
#include "escape.h"
#include "front/family.h"
#include "front/host.h"
#include "options.h"
#include "outfile.h"
#include "front/relayout.h"

static const char *const import_flags[] = {"--set",        "-o", "--force", "--lua-instructions",
                                           "--lua-memory", NULL};

/* The Hugging Face checkpoint: its files, and which tensors a link has claimed. */
typedef struct {
  const char *dir;
  char **paths;
  Ckpt *files;
  int nfiles;
  char **used; /* per file, per tensor: claimed by a link */
} Source;

/* Where a tensor of the Hugging Face checkpoint is. */
typedef struct {
  int file;
  const CkptTensor *tensor;
} Found;

static void source_close(Source *s) {
  for (int i = 0; i < s->nfiles; i++) {
    ckpt_close(&s->files[i]);
    free(s->paths[i]);
    free(s->used[i]);
  }
  free(s->paths);
  free(s->files);
  free(s->used);
}

static Found find_exact(Source *s, const char *name) {
  for (int i = 0; i < s->nfiles; i++)
    for (int t = 0; t < s->files[i].ntensors; t++)
      if (strcmp(s->files[i].tensors[t].name, name) == 0)
        return (Found){i, &s->files[i].tensors[t]};
  return (Found){-1, NULL};
}

/* The tensor by its full name, or by the name without the base model's prefix (a checkpoint of
 * the base model: GPT-2's own files name "h.0.attn.c_attn.weight", not "transformer.h.0...."). */
static Found find(Source *s, const Family *f, const char *name) {
  Found found = find_exact(s, name);
  size_t n = strlen(f->base_prefix);
  if (!found.tensor && n && strncmp(name, f->base_prefix, n) == 0) found = find_exact(s, name + n);
  return found;
}

/* Whether real (a resolved path) is dir itself or below it. */
static int below(const char *real, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(real, dir, n) == 0 && (real[n] == '/' || real[n] == 0 || (n && dir[n - 1] == '/'));
}

/* A file the folder names must be its own: in it, links followed, or in the blobs of the Hugging
 * Face cache it is a snapshot of (CACHE/snapshots/REVISION links its files to CACHE/blobs); one
 * that leads outside (a shard named "..", a link to a file elsewhere) is refused before anything is
 * read. */
static int own_file(const Source *s, const char *path, Diag *d) {
  char real_dir[PATH_MAX], blobs[PATH_MAX + 16], real_blobs[PATH_MAX], real[PATH_MAX];
  /* where a path does not resolve, opening it names what is wrong */
  if (!realpath(s->dir, real_dir) || !realpath(path, real)) return 0;
  snprintf(blobs, sizeof blobs, "%s/../../blobs", real_dir);
  const char *up = strrchr(real_dir, '/');
  int cache = up && up - real_dir >= 10 && strncmp(up - 10, "/snapshots", 10) == 0 &&
              realpath(blobs, real_blobs);
  if (below(real, real_dir) || (cache && below(real, real_blobs))) return 0;
  return diag(d, "%s leads outside %s (to %s); import reads the folder's own files only: copy the "
              "file into the folder", path, s->dir, real);
}

/* Opens every file the folder's index (or its single model.safetensors) names; a file that does
 * not open is a problem of its own. */
static int open_files(lua_State *L, Source *s, DiagList *problems, Diag *d) {
  lua_pushstring(L, s->dir);
  if (family_call(L, "_files", 1, 2, d)) return -1;
  int list = lua_gettop(L) - 1;
  s->nfiles = (int)lua_rawlen(L, list);
  s->paths = calloc((size_t)s->nfiles + 1, sizeof *s->paths);
  s->files = calloc((size_t)s->nfiles + 1, sizeof *s->files);
  s->used = calloc((size_t)s->nfiles + 1, sizeof *s->used);
  for (int i = 0; i < s->nfiles; i++) {
    lua_rawgeti(L, list, i + 1);
    size_t n = strlen(s->dir) + strlen(lua_tostring(L, -1)) + 2;
    s->paths[i] = malloc(n);
    snprintf(s->paths[i], n, "%s/%s", s->dir, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (own_file(s, s->paths[i], d)) return -1;
    if (ckpt_open(&s->files[i], s->paths[i])) diag_add(problems, "%s", s->files[i].error);
    s->used[i] = calloc((size_t)s->files[i].ntensors + 1, 1);
  }
  return 0;
}

/* A sharded checkpoint's index must say where each tensor is: a tensor it places in a file that
 * does not hold it is a damaged index. (The weight map is at the top of the stack, or nil.) */
static void check_index(lua_State *L, Source *s, DiagList *problems) {
  if (lua_isnil(L, -1)) return;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    const char *name = lua_tostring(L, -2), *file = lua_tostring(L, -1);
    Found found = find_exact(s, name);
    const char *at = found.tensor ? strrchr(s->paths[found.file], '/') + 1 : NULL;
    if (!at || strcmp(at, file) != 0)
      diag_add(problems,
               "%s/model.safetensors.index.json places %s in %s, which does not hold it; the index "
               "is damaged",
               s->dir, name, file);
    lua_pop(L, 1);
  }
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int a = 0; a < ndim && used < len; a++)
    used += (size_t)snprintf(buf + used, len - used, "%s%lld", a ? ", " : "", (long long)shape[a]);
  if (used < len) snprintf(buf + used, len - used, "]");
}

/* The Hugging Face tensor has the link's shape; with at_least, its first axis in the model's
 * orientation (the second stored axis of a transpose) may be longer. */
static int fits(const FamilyLink *l, const CkptTensor *t) {
  if (t->ndim != l->ndim) return 0;
  int rows_axis = l->transpose ? 1 : 0;
  for (int a = 0; a < l->ndim; a++) {
    int longer_ok = l->at_least && a == rows_axis;
    if (longer_ok ? t->shape[a] < l->shape[a] : t->shape[a] != l->shape[a]) return 0;
  }
  return 1;
}

/* A link whose tensor goes by several names takes the first of them the folder holds. */
static void take_name_held(Source *s, const Family *f, FamilyLink *l) {
  for (int i = 0; i < l->nalso && !find(s, f, l->name).tensor; i++)
    if (find(s, f, l->also[i]).tensor) snprintf(l->name, sizeof l->name, "%s", l->also[i]);
}

static void check_link(Source *s, const Family *f, const FamilyLink *l, DiagList *problems) {
  Found found = find(s, f, l->name);
  if (!found.tensor) {
    char others[FAMILY_MAX_ALSO * (FAMILY_NAME_LEN + 8)] = "";
    for (int i = 0, n = 0; i < l->nalso; i++)
      n += snprintf(others + n, sizeof others - (size_t)n, "%s%s", i ? ", " : " (nor ", l->also[i]);
    if (l->nalso) strcat(others, ")");
    if (l->join_count)
      diag_add(problems, "%s has no tensor %s%s, index %d of %s; give a folder that holds all %d",
               s->dir, l->name, others, l->join_index, l->join_text, l->join_count);
    else
      diag_add(problems, "%s has no tensor %s%s, which the model's %s comes from", s->dir, l->name,
               others, f->tensors[l->parts[0]].name);
    return;
  }
  s->used[found.file][found.tensor - s->files[found.file].tensors] = 1;
  char have[128], want[128];
  shape_text(found.tensor->ndim, found.tensor->shape, have, sizeof have);
  shape_text(l->ndim, l->shape, want, sizeof want);
  if (!fits(l, found.tensor))
    diag_add(problems, "%s: tensor %s has shape %s, the model needs %s%s", s->paths[found.file],
             l->name, have, want, l->at_least ? " (or more rows)" : "");
  if (!ckpt_dtype_readable(found.tensor->dtype))
    diag_add(problems, "%s: tensor %s is %s; plait reads F32, F16, BF16 and F64",
             s->paths[found.file], l->name, ckpt_dtype_name(found.tensor->dtype));
}

/* A tensor of the checkpoint no link claims: a joined one's index beyond the model's count, or
 * one the model has no place for. */
static int add_extra(lua_State *L, int model, const Source *s, int file, const char *name,
                     DiagList *problems, Diag *d) {
  lua_pushvalue(L, model);
  lua_pushstring(L, name);
  if (family_call(L, "_beyond_join", 2, 1, d)) return -1;
  if (lua_isstring(L, -1))
    diag_add(problems,
             "%s holds tensor %s, %s; give a folder whose tensors match its config.json, or a "
             "family whose join takes it",
             s->paths[file], name, lua_tostring(L, -1));
  else
    diag_add(problems,
             "%s holds tensor %s, which the model has no place for; import it with a model of "
             "its shape, or extend the model's family (plait.hf.extend)",
             s->paths[file], name);
  lua_pop(L, 1);
  return 0;
}

/* Every tensor of the checkpoint is claimed by a link or passed over by the family. */
static int check_extra(lua_State *L, int model, Source *s, const Family *f, DiagList *problems,
                       Diag *d) {
  char full[FAMILY_NAME_LEN + 64];
  for (int i = 0; i < s->nfiles; i++)
    for (int t = 0; t < s->files[i].ntensors; t++) {
      const char *name = s->files[i].tensors[t].name;
      snprintf(full, sizeof full, "%s%s", f->base_prefix, name);
      if (s->used[i][t] || family_ignores(f, name) || family_ignores(f, full)) continue;
      if (add_extra(L, model, s, i, name, problems, d)) return -1;
    }
  return 0;
}

/* ---- writing
 * ------------------------------------------------------------------------------------ */

/* The checkpoint's specs, in link order (each link's parts one after another; a joined tensor at
 * its first link), stored as F32, or F64 where the source is F64. */
static CkptSpec *specs_of(Source *s, const Family *f) {
  CkptSpec *specs = calloc((size_t)f->ntensors + 1, sizeof *specs);
  int n = 0;
  for (int i = 0; i < f->nlinks; i++) {
    const FamilyLink *l = &f->links[i];
    if (l->join_index > 0) continue;
    CkptDtype source = find(s, f, l->name).tensor->dtype;
    for (int p = 0; p < l->nparts; p++) {
      const FamilyTensor *t = &f->tensors[l->parts[p]];
      specs[n] = (CkptSpec){t->name, t->ndim, {0}, source == CKPT_F64 ? CKPT_F64 : CKPT_F32};
      memcpy(specs[n].shape, t->shape, sizeof t->shape);
      n++;
    }
  }
  return specs;
}

static int by_key(const void *a, const void *b) {
  return strcmp(((const ConfigEntry *)a)->key, ((const ConfigEntry *)b)->key);
}

/* What the programs check when they load it: a weights-only plait checkpoint of this model. keys
 * and layers hold the texts made here. */
static CkptMeta *metadata(const Model *m, const char *source, char (*keys)[NAME_LEN + 8],
                          char *layers, int *count) {
  ConfigEntry *sorted = malloc(sizeof *sorted * (size_t)(m->nconfig + 1));
  memcpy(sorted, m->config, sizeof *sorted * (size_t)m->nconfig);
  qsort(sorted, (size_t)m->nconfig, sizeof *sorted, by_key);
  snprintf(layers, 16, "%d", m->layers);
  CkptMeta *meta = calloc((size_t)m->nconfig + 5, sizeof *meta);
  int n = 0;
  meta[n++] = (CkptMeta){CKPT_FORMAT_KEY, CKPT_FORMAT};
  meta[n++] = (CkptMeta){CKPT_CONTENTS_KEY, CKPT_WEIGHTS_ONLY};
  meta[n++] = (CkptMeta){CKPT_MODEL_KEY, m->name};
  meta[n++] = (CkptMeta){CKPT_LAYERS_KEY, layers};
  meta[n++] = (CkptMeta){"source", source};
  for (int i = 0; i < m->nconfig; i++) {
    snprintf(keys[i], sizeof keys[i], "%s%s", CKPT_CONFIG_PREFIX, sorted[i].key);
    for (int j = 0; j < m->nconfig; j++)
      if (strcmp(m->config[j].key, sorted[i].key) == 0)
        meta[n++] = (CkptMeta){keys[i], m->config[j].value};
  }
  free(sorted);
  *count = n;
  return meta;
}

/* A joined link's block goes into its tensor (*whole, made at the join's first link), which is
 * handed to the writer once its last block is in. */
static int write_block(const Family *f, const FamilyLink *l, const double *block, double **whole,
                       CkptWriter *w, Diag *d) {
  const FamilyTensor *t = &f->tensors[l->parts[0]];
  if (l->join_index == 0) *whole = malloc(sizeof **whole * (size_t)(family_tensor_elems(t) + 1));
  RelayoutBlock b = family_block(l, t);
  relayout_put(&b, block, *whole);
  if (l->join_index < l->join_count - 1) return 0;
  int status = ckpt_write_data(w, *whole, family_tensor_elems(t)) ? diag(d, "%s", w->error) : 0;
  free(*whole);
  *whole = NULL;
  return status;
}

/* A link's Hugging Face tensor read whole, split into its parts and handed to the writer in part
 * order, or for a joined link, put into its tensor (*whole). */
static int write_link(Source *s, const Family *f, const FamilyLink *l, double **whole,
                      CkptWriter *w, Diag *d) {
  Found found = find(s, f, l->name);
  Ckpt *c = &s->files[found.file];
  int64_t rows[FAMILY_MAX_PARTS], cols = family_link_cols(f, l), hf_elems = 1;
  for (int a = 0; a < found.tensor->ndim; a++) hf_elems *= found.tensor->shape[a];
  double *hf = malloc(sizeof *hf * (size_t)(hf_elems + 1)), *parts[FAMILY_MAX_PARTS];
  for (int p = 0; p < l->nparts; p++) {
    rows[p] = family_part_rows(l, &f->tensors[l->parts[p]]);
    int64_t elems = family_part_elems(l, &f->tensors[l->parts[p]]);
    parts[p] = malloc(sizeof **parts * (size_t)(elems + 1));
  }
  int status = ckpt_read(c, found.tensor->name, found.tensor->ndim, found.tensor->shape, hf)
                   ? diag(d, "%s", c->error)
                   : 0;
  int64_t hf_rows = found.tensor->ndim ? found.tensor->shape[l->transpose ? 1 : 0] : 1;
  Relayout r = {l->nparts, rows, cols, l->groups, l->transpose, hf_rows};
  if (status == 0) relayout_split(&r, hf, parts);
  for (int p = 0; p < l->nparts; p++) {
    int64_t elems = family_tensor_elems(&f->tensors[l->parts[p]]);
    if (status == 0 && l->join_count) status = write_block(f, l, parts[p], whole, w, d);
    else if (status == 0 && ckpt_write_data(w, parts[p], elems)) status = diag(d, "%s", w->error);
    free(parts[p]);
  }
  free(hf);
  return status;
}

static void note_longer(Source *s, const Family *f, const FamilyLink *l) {
  const CkptTensor *t = find(s, f, l->name).tensor;
  int axis = l->transpose ? 1 : 0;
  char hf[ESCAPED_SIZE(FAMILY_NAME_LEN)], ours[ESCAPED_SIZE(FAMILY_NAME_LEN)];
  if (l->at_least && t->shape[axis] > l->shape[axis])
    printf("note: %s has %lld rows, the model's %s %lld: the first %lld are taken\n",
           escape(ESC_TEXT, l->name, hf, sizeof hf), (long long)t->shape[axis],
           escape(ESC_TEXT, f->tensors[l->parts[0]].name, ours, sizeof ours),
           (long long)l->shape[axis], (long long)l->shape[axis]);
}

static int same_folder(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* A training checkpoint (Adam's state beside the weights) is not replaced by weights alone
 * without --force. */
static int check_replaced(const OwnFolder *folder, int force, Diag *d) {
  char path[4200];
  Ckpt c;
  snprintf(path, sizeof path, "%s/model.safetensors", folder->path);
  if (force || !folder->exists || ckpt_open(&c, path) != 0) return 0;
  const char *contents = ckpt_meta(&c, CKPT_CONTENTS_KEY), *step = ckpt_meta(&c, "step");
  int full = contents && strcmp(contents, CKPT_WEIGHTS_AND_OPTIMIZER) == 0;
  for (int i = 0; i < c.ntensors && !full; i++) full = strncmp(c.tensors[i].name, "adam.", 5) == 0;
  char at[64] = "";
  if (step) snprintf(at, sizeof at, " of step %.32s", step);
  if (full)
    diag(d,
         "-o %s holds a training checkpoint%s (weights and Adam's state), which weights alone "
         "would replace: give "
         "another folder, or --force to replace it",
         folder->path, at);
  ckpt_close(&c);
  return full ? -1 : 0;
}

/* A folder this run made and then could not fill: its marker removed, then the folder, empty
 * again. */
static void forget_folder(const char *out) {
  char marker[4200];
  snprintf(marker, sizeof marker, "%s/%s", out, OWN_FOLDER_MARKER);
  unlink(marker);
  rmdir(out);
}

static int write_checkpoint(Source *s, const Family *f, const Model *m, const Options *o, Diag *d) {
  static const char *const files[] = {"model.safetensors"};
  const char *out = o->output;
  if (same_folder(s->dir, out))
    return diag(d,
                "-o %s is the Hugging Face folder itself; its model.safetensors would be replaced, "
                "choose another",
                out);
  char path[4200], source[4200], layers[16], temp[4300];
  snprintf(path, sizeof path, "%s/model.safetensors", out);
  OwnFolder folder = {0};
  int status = own_folder_check(&folder, "-o", out, FOLDER_CHECKPOINT, d->msg, sizeof d->msg) ||
               outfile_check("-o", path, (const char *const *)s->paths, s->nfiles, d) ||
               check_replaced(&folder, o->force, d) ? -1 : 0;
  int created = !folder.exists; /* before the claim makes it */
  if (status == 0 &&
      own_folder_claim(&folder, "-o", out, FOLDER_CHECKPOINT, files, 1, d->msg, sizeof d->msg))
    status = -1;
  if (status == 0) own_folder_temp(&folder, "model.safetensors", temp, sizeof temp);
  own_folder_free(&folder);
  if (status) return -1;
  char(*keys)[NAME_LEN + 8] = calloc((size_t)m->nconfig + 1, sizeof *keys);
  snprintf(source, sizeof source, "Hugging Face checkpoint %s", s->dir);
  int nmeta;
  CkptMeta *meta = metadata(m, source, keys, layers, &nmeta);
  CkptSpec *specs = specs_of(s, f);
  CkptWriter w;
  status = ckpt_write_begin_as(&w, path, temp, specs, f->ntensors, meta, nmeta)
               ? diag(d, "%s", w.error)
               : 0;
  double *whole = NULL; /* a joined tensor being filled */
  for (int i = 0; i < f->nlinks && status == 0; i++)
    status = write_link(s, f, &f->links[i], &whole, &w, d);
  free(whole);
  if (status == 0 && ckpt_write_end(&w)) status = diag(d, "%s", w.error);
  if (status) ckpt_write_abort(&w);
  /* the folder this run made: a refused import leaves nothing */
  if (status && created) forget_folder(out);
  free(specs);
  free(meta);
  free(keys);
  return status;
}

/* ---- the command
 * -------------------------------------------------------------------------------- */

typedef struct {
  const Options *o;
  int reported; /* the problems were printed */
} Import;

/* The lines on which DIR/config.json disagrees with the model's config into problems; before the
 * trace, the settings derived from the model's tensors are left for after it. */
static int check_config(lua_State *L, int model, const char *dir, int traced, DiagList *problems,
                        Diag *d) {
  lua_pushvalue(L, model);
  lua_pushstring(L, dir);
  lua_pushboolean(L, traced);
  if (family_call(L, "_check_config", 3, 1, d)) return -1;
  for (int i = 1; i <= (int)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    diag_add(problems, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 0;
}

static void check_source(lua_State *L, int model, Source *s, Family *f, DiagList *problems,
                         Diag *d, int *status) {
  if (*status == 0) *status = check_config(L, model, s->dir, 1, problems, d);
  if (*status == 0) *status = open_files(L, s, problems, d);
  if (*status == 0) {
    check_index(L, s, problems);
    lua_pop(L, 2);
  }
  if (*status || problems->count) return;
  for (int i = 0; i < f->nlinks; i++) {
    take_name_held(s, f, &f->links[i]);
    check_link(s, f, &f->links[i], problems);
  }
  *status = check_extra(L, model, s, f, problems, d);
}

/* config.json against the model's config before the trace: a setting the model file would refuse
 * (a window longer than the sequence) is reported with the --set that fits the folder. */
static int check_config_first(lua_State *L, int model, const Model *m, void *ctx, Diag *d) {
  (void)m;
  Import *im = ctx;
  DiagList problems = {0};
  int status = check_config(L, model, im->o->second, 0, &problems, d);
  if (status == 0 && problems.count) {
    diag_report(&problems);
    im->reported = 1;
    status = -1;
  }
  diag_list_free(&problems);
  return status;
}

static int import(lua_State *L, int model, const Model *m, void *ctx, Diag *d) {
  Import *im = ctx;
  Family f;
  DiagList problems = {0};
  Source s = {.dir = im->o->second};
  int status = family_read(L, model, m, &f, &problems, d);
  check_source(L, model, &s, &f, &problems, d, &status);
  if (status == 0 && problems.count) {
    diag_report(&problems);
    im->reported = 1;
    status = -1;
  }
  for (int i = 0; status == 0 && i < f.nlinks; i++) note_longer(&s, &f, &f.links[i]);
  if (status == 0) status = write_checkpoint(&s, &f, m, im->o, d);
  int64_t count = 0;
  for (int i = 0; i < f.ntensors; i++) count += family_tensor_elems(&f.tensors[i]);
  if (status == 0)
    printf(
        "imported %s into %s/model.safetensors: %lld parameters in %d tensors, weights only; start "
        "from them with "
        "DIR/train --init %s\n",
        s.dir, im->o->output, (long long)count, f.ntensors, im->o->output);
  source_close(&s);
  family_free(&f);
  diag_list_free(&problems);
  return status;
}

int cmd_import(int argc, char **argv) {
  Options o;
  Diag d;
  Model m;
  Import im = {&o, 0};
  int status = options_parse(argc, argv, 2, import_flags, 2, &o, &d);
  if (status == 0 && (!o.file || !o.second || !o.output))
    status = diag(&d,
                  "import takes a model file, a Hugging Face folder and -o: plait import MODEL.lua "
                  "HF_DIR -o CKPT_DIR");
  if (status == 0) {
    status = host_visit_model(&o, &m, check_config_first, import, &im, &d);
    model_free(&m);
  }
  if (status == 0) return 0;
  if (!im.reported) diag_print(d.msg);
  return 1;
}
