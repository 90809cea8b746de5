/* cmd_export.c: `plait export MODEL.lua CKPT_DIR -o HF_DIR`: a plait checkpoint of the model
 * (weights-only or full; its Adam state is left behind) into a Hugging Face folder: config.json
 * with the family's keys, and the tensors under the family's names and layouts in
 * model.safetensors, or in shards of at most --shard-size bytes with
 * model.safetensors.index.json, as transformers' save_pretrained writes them. Tensors are F32
 * unless --dtype asks for bf16, f16 or f64. Everything is checked before anything is written;
 * the folder is written beside its final name and moved into place, into an existing one only
 * where it is plait's own (own_folder.h): files export wrote before are the only ones it
 * replaces or removes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors_model.h"
#include "commands.h"
#include "front/family.h"
#include "front/host.h"
#include "options.h"
#include "outfile.h"
#include "front/relayout.h"

static const char *const export_flags[] = {
    "--set", "-o", "--dtype", "--shard-size", "--lua-instructions", "--lua-memory", NULL};

/* transformers' save_pretrained default: shards of at most 5 GB. */
static const double default_shard_bytes = 5e9;

typedef struct {
  const Options *o;
  CkptDtype dtype;
  double shard_bytes;
  Ckpt ckpt;
  char ckpt_path[4200];
  char temp[4200]; /* the folder being written */
  int *shard;      /* per link: the shard it goes to */
  int nshards;
  int reported;    /* the problems were printed */
  double *joined;  /* the tensor of the join being written, read at its first link */
} Export;

static int parse_dtype(const char *text, CkptDtype *out, Diag *d) {
  static const struct {
    const char *name;
    CkptDtype dtype;
  } names[] = {{"f32", CKPT_F32}, {"bf16", CKPT_BF16}, {"f16", CKPT_F16}, {"f64", CKPT_F64}};
  for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
    if (strcmp(text, names[i].name) == 0) return *out = names[i].dtype, 0;
  return diag(d, "--dtype %s: export writes f32, bf16, f16 or f64", text);
}

/* "5GB", "500MB", "2GiB", "1000000": bytes (KB, MB, GB decimal; KiB, MiB, GiB binary, as
 * transformers). */
static int parse_size(const char *text, double *out, Diag *d) {
  static const struct {
    const char *unit;
    double bytes;
  } units[] = {{"", 1},     {"B", 1},        {"KB", 1e3},        {"MB", 1e6},
               {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  char *end;
  double v = strtod(text, &end);
  for (unsigned i = 0; end != text && v > 0 && i < sizeof units / sizeof *units; i++)
    if (strcmp(end, units[i].unit) == 0) return *out = v * units[i].bytes, 0;
  return diag(d, "--shard-size %s: give a positive size such as 5GB, 500MB or 2GiB", text);
}

/* ---- checks
 * ----------------------------------------------------------------------------------- */

/* The checkpoint holds this model: its name, depth and configuration, then each tensor's shape. */
static void check_checkpoint(Export *e, const Model *m, const Family *f, DiagList *problems) {
  CkptMeta *config = calloc((size_t)m->nconfig + 1, sizeof *config);
  for (int i = 0; i < m->nconfig; i++) config[i] = (CkptMeta){m->config[i].key, m->config[i].value};
  CkptModel model = {m->name, m->layers, config, m->nconfig};
  char error[1024];
  int refused = ckpt_check_model(&e->ckpt, &model, error, sizeof error);
  free(config);
  if (refused) {
    diag_add(problems, "%s", error);
    return;
  }
  for (int i = 0; i < f->ntensors; i++) {
    const FamilyTensor *t = &f->tensors[i];
    const CkptTensor *have = ckpt_find(&e->ckpt, t->name);
    int same = have && have->ndim == t->ndim && ckpt_dtype_readable(have->dtype);
    for (int a = 0; same && a < t->ndim; a++) same = have->shape[a] == t->shape[a];
    if (!have)
      diag_add(problems, "%s has no tensor %s, which the model has", e->ckpt_path, t->name);
    else if (!same)
      diag_add(problems,
               "%s: tensor %s is not the model's (%s, %d axes): load a checkpoint of this model",
               e->ckpt_path, t->name, ckpt_dtype_name(have->dtype), have->ndim);
  }
}

/* Links go to shards in order, a shard closed when the next tensor would take it past the size. */
static void assign_shards(Export *e, const Family *f) {
  double size = 0, elem = ckpt_dtype_size(e->dtype);
  e->shard = calloc((size_t)f->nlinks + 1, sizeof *e->shard);
  e->nshards = 1;
  for (int i = 0; i < f->nlinks; i++) {
    double bytes = elem * (double)family_link_elems(&f->links[i]);
    if (size > 0 && size + bytes > e->shard_bytes) e->nshards++, size = 0;
    e->shard[i] = e->nshards - 1;
    size += bytes;
  }
}

static void shard_name(const Export *e, int shard, char *buf, size_t len) {
  if (e->nshards == 1) snprintf(buf, len, "model.safetensors");
  else snprintf(buf, len, "model-%05d-of-%05d.safetensors", shard + 1, e->nshards);
}

/* ---- writing
 * ---------------------------------------------------------------------------------- */

static int write_text(const char *dir, const char *name, const char *text, Diag *d) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *file = fopen(path, "w");
  int ok = file && fputs(text, file) >= 0;
  if (file && fclose(file) != 0) ok = 0;
  return ok ? 0 : diag(d, "cannot write %s: %s", path, strerror(errno));
}

static int read_tensor(Export *e, const FamilyTensor *t, double *out, Diag *d) {
  return ckpt_read(&e->ckpt, t->name, t->ndim, t->shape, out) ? diag(d, "%s", e->ckpt.error) : 0;
}

/* A part as its link moves it: the tensor read from the checkpoint, or a joined link's block of
 * it (the tensor read once, at the join's first link, and let go at its last). */
static int read_part(Export *e, const FamilyLink *l, const FamilyTensor *t, double *part,
                     Diag *d) {
  if (!l->join_count) return read_tensor(e, t, part, d);
  if (l->join_index == 0) {
    e->joined = malloc(sizeof *e->joined * (size_t)(family_tensor_elems(t) + 1));
    if (read_tensor(e, t, e->joined, d)) return -1;
  }
  RelayoutBlock b = family_block(l, t);
  relayout_take(&b, e->joined, part);
  if (l->join_index == l->join_count - 1) {
    free(e->joined);
    e->joined = NULL;
  }
  return 0;
}

/* One link's Hugging Face tensor: its parts read from the checkpoint and joined. */
static int write_link(Export *e, const Family *f, const FamilyLink *l, CkptWriter *w, Diag *d) {
  int64_t rows[FAMILY_MAX_PARTS], cols = family_link_cols(f, l), n = family_link_elems(l);
  double *hf = malloc(sizeof *hf * (size_t)(n + 1)), *parts[FAMILY_MAX_PARTS];
  int64_t total_rows = 0;
  int status = 0;
  for (int p = 0; p < l->nparts; p++) {
    const FamilyTensor *t = &f->tensors[l->parts[p]];
    rows[p] = family_part_rows(l, t);
    total_rows += rows[p];
    parts[p] = malloc(sizeof **parts * (size_t)(family_part_elems(l, t) + 1));
    if (status == 0) status = read_part(e, l, t, parts[p], d);
  }
  Relayout r = {l->nparts, rows, cols, l->groups, l->transpose, total_rows};
  if (status == 0) relayout_join(&r, (const double *const *)parts, hf);
  if (status == 0 && ckpt_write_data(w, hf, n)) status = diag(d, "%s", w->error);
  for (int p = 0; p < l->nparts; p++) free(parts[p]);
  free(hf);
  return status;
}

static int write_shard(Export *e, const Family *f, int shard, Diag *d) {
  char name[64], path[4600];
  shard_name(e, shard, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", e->temp, name);
  CkptSpec *specs = calloc((size_t)f->nlinks + 1, sizeof *specs);
  const FamilyLink **links = calloc((size_t)f->nlinks + 1, sizeof *links);
  int n = 0;
  for (int i = 0; i < f->nlinks; i++) {
    if (e->shard[i] != shard) continue;
    links[n] = &f->links[i];
    specs[n] = (CkptSpec){f->links[i].name, f->links[i].ndim, {0}, e->dtype};
    memcpy(specs[n].shape, f->links[i].shape, sizeof f->links[i].shape);
    n++;
  }
  const CkptMeta meta[1] = {{"format", "pt"}}; /* transformers loads safetensors files marked so */
  CkptWriter w;
  int status = ckpt_write_begin(&w, path, specs, n, meta, 1) ? diag(d, "%s", w.error) : 0;
  for (int i = 0; i < n && status == 0; i++) status = write_link(e, f, links[i], &w, d);
  if (status == 0 && ckpt_write_end(&w)) status = diag(d, "%s", w.error);
  if (status) ckpt_write_abort(&w);
  free(specs);
  free(links);
  return status;
}

/* model.safetensors.index.json for shards: the total bytes and where each tensor is. */
static int write_index(lua_State *L, Export *e, const Family *f, Diag *d) {
  int64_t total = 0;
  char name[64];
  for (int i = 0; i < f->nlinks; i++)
    total += ckpt_dtype_size(e->dtype) * family_link_elems(&f->links[i]);
  lua_pushinteger(L, total);
  lua_createtable(L, 0, f->nlinks);
  for (int i = 0; i < f->nlinks; i++) {
    shard_name(e, e->shard[i], name, sizeof name);
    lua_pushstring(L, name);
    lua_setfield(L, -2, f->links[i].name);
  }
  if (family_call(L, "_index_text", 2, 1, d)) return -1;
  int status = write_text(e->temp, "model.safetensors.index.json", lua_tostring(L, -1), d);
  lua_pop(L, 1);
  return status;
}

static int write_config(lua_State *L, int model, Export *e, Diag *d) {
  lua_pushvalue(L, model);
  lua_pushstring(L, ckpt_dtype_name(e->dtype));
  if (family_call(L, "_config_text", 2, 1, d)) return -1;
  int status = write_text(e->temp, "config.json", lua_tostring(L, -1), d);
  lua_pop(L, 1);
  return status;
}

/* ---- the folder: written beside its final name, then moved in
 * ----------------------------------- */

/* mkdtemp makes a private folder; the checkpoint's is for every user to read, as mkdir would
 * make it. */
static int make_temp(Export *e, Diag *d) {
  snprintf(e->temp, sizeof e->temp, "%s.tmp.XXXXXX", e->o->output);
  if (mkdtemp(e->temp)) {
    mode_t mask = umask(0);
    umask(mask);
    chmod(e->temp, 0777 & ~mask);
    return 0;
  }
  e->temp[0] = 0;
  return diag(d, "-o %s: cannot create a folder beside it: %s", e->o->output, strerror(errno));
}

/* What the folder holds: config.json, the shards, and their index where there are several. */
static int export_files(const Export *e, char (*buf)[64], const char **names) {
  int n = 0;
  snprintf(buf[n], sizeof buf[n], "config.json");
  names[n] = buf[n], n++;
  for (int s = 0; s < e->nshards; s++, n++) {
    shard_name(e, s, buf[n], sizeof buf[n]);
    names[n] = buf[n];
  }
  if (e->nshards > 1) {
    snprintf(buf[n], sizeof buf[n], "model.safetensors.index.json");
    names[n] = buf[n], n++;
  }
  return n;
}

/* The folder being written: the files this export put there and its marker, then the folder
 * itself. */
static void remove_temp(const Export *e, const char *const *names, int n) {
  char path[4600];
  for (int i = 0; i <= n; i++) {
    snprintf(path, sizeof path, "%s/%s", e->temp, i < n ? names[i] : OWN_FOLDER_MARKER);
    unlink(path);
  }
  rmdir(e->temp);
}

/* A new folder is renamed into place. Into one of plait's own each file is renamed, and then the
 * files its marker lists that this export did not write (another shard count's, which a reader
 * would take for part of this checkpoint) are removed; nothing else there is touched. */
static int move_into_place(Export *e, OwnFolder *out, const char *const *names, int n, Diag *d) {
  if (!out->exists && rename(e->temp, out->path) == 0) {
    e->temp[0] = 0; /* moved, marker and all */
    return 0;
  }
  if (own_folder_claim(out, "-o", e->o->output, FOLDER_HF, names, n, d->msg, sizeof d->msg))
    return -1;
  char from[4600], to[4600];
  for (int i = 0; i < n; i++) {
    snprintf(from, sizeof from, "%s/%s", e->temp, names[i]);
    snprintf(to, sizeof to, "%s/%s", out->path, names[i]);
    if (rename(from, to) != 0)
      return diag(d, "cannot move %s to %s: %s", from, to, strerror(errno));
  }
  return own_folder_settle(out, names, n, d->msg, sizeof d->msg);
}

static int write_folder(lua_State *L, int model, Export *e, const Family *f, Diag *d) {
  char config[4300], (*buf)[64] = calloc((size_t)e->nshards + 2, sizeof *buf);
  const char *inputs[] = {e->ckpt_path, e->o->file},
             **names = calloc((size_t)e->nshards + 2, sizeof *names);
  int n = export_files(e, buf, names);
  OwnFolder out, temp = {0};
  snprintf(config, sizeof config, "%s/config.json", e->o->output);
  int status = own_folder_check(&out, "-o", e->o->output, FOLDER_HF, d->msg, sizeof d->msg) ||
               outfile_check("-o", config, inputs, 2, d) || make_temp(e, d) ? -1 : 0;
  if (status == 0)
    status = own_folder_claim(&temp, "-o", e->temp, FOLDER_HF, names, n, d->msg, sizeof d->msg);
  if (status == 0) status = write_config(L, model, e, d);
  for (int s = 0; s < e->nshards && status == 0; s++) status = write_shard(e, f, s, d);
  if (status == 0 && e->nshards > 1) status = write_index(L, e, f, d);
  if (status == 0) status = move_into_place(e, &out, names, n, d);
  if (e->temp[0]) remove_temp(e, names, n);
  own_folder_free(&out);
  own_folder_free(&temp);
  free(names);
  free(buf);
  return status;
}

/* ---- the command
 * -------------------------------------------------------------------------------- */

static int same_folder(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static int export_model(lua_State *L, int model, const Model *m, void *ctx, Diag *d) {
  Export *e = ctx;
  Family f;
  DiagList problems = {0};
  int status = family_read(L, model, m, &f, &problems, d), opened = 0;
  snprintf(e->ckpt_path, sizeof e->ckpt_path, "%s/model.safetensors", e->o->second);
  if (status == 0 && problems.count == 0) {
    opened = ckpt_open(&e->ckpt, e->ckpt_path) == 0;
    if (!opened) status = diag(d, "%s", e->ckpt.error);
  }
  if (opened) check_checkpoint(e, m, &f, &problems);
  if (status == 0 && problems.count) {
    diag_report(&problems);
    e->reported = 1;
    status = -1;
  }
  if (status == 0 && same_folder(e->o->second, e->o->output))
    status = diag(d,
                  "-o %s is the plait checkpoint's folder; its model.safetensors would be "
                  "replaced, choose another",
                  e->o->output);
  if (status == 0) {
    assign_shards(e, &f);
    status = write_folder(L, model, e, &f, d);
  }
  if (status == 0)
    printf("exported %s into %s: %d tensors as %s in %d file%s, and config.json\n", e->ckpt_path,
           e->o->output, f.nlinks, ckpt_dtype_name(e->dtype), e->nshards,
           e->nshards == 1 ? "" : "s");
  if (opened) ckpt_close(&e->ckpt);
  free(e->joined);
  free(e->shard);
  family_free(&f);
  diag_list_free(&problems);
  return status;
}

int cmd_export(int argc, char **argv) {
  Options o;
  Diag d;
  Model m;
  Export e = {.o = &o, .dtype = CKPT_F32, .shard_bytes = default_shard_bytes};
  int status = options_parse(argc, argv, 2, export_flags, 2, &o, &d);
  if (status == 0 && (!o.file || !o.second || !o.output))
    status = diag(&d,
                  "export takes a model file, a plait checkpoint folder and -o: plait export "
                  "MODEL.lua CKPT_DIR -o "
                  "HF_DIR [--dtype f32|bf16|f16|f64] [--shard-size 5GB]");
  if (status == 0 && o.dtype) status = parse_dtype(o.dtype, &e.dtype, &d);
  if (status == 0 && o.shard_size) status = parse_size(o.shard_size, &e.shard_bytes, &d);
  if (status == 0) {
    status = host_visit_model(&o, &m, NULL, export_model, &e, &d);
    model_free(&m);
  }
  if (status == 0) return 0;
  if (!e.reported) diag_print(d.msg);
  return 1;
}
