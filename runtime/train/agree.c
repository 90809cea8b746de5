/* agree.c: the ranks of a job agree before any work: start-up refusals told once, then rank 0's
 * program and settings held against every rank's. */
#include "train/agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/flags.h"
#include "train/preflight.h"

/* What a rank brings: its program, described where a difference should be named and hashed where it
 * only needs to be found, and its settings. */
typedef struct {
  char model[128];
  char precision[64];
  char layout[256];
  char config[4096]; /* "key = value\n" for each item, in the program's (sorted) order */
  uint64_t params, plan;
  FlagSetting settings[FLAGS_MAX_SETTINGS];
  int nsettings;
} RunRecord;

/* ---- the record
 * ------------------------------------------------------------------------------------ */

/* FNV-1a, 64 bits. */
static uint64_t mix(uint64_t h, const void *data, size_t n) {
  const unsigned char *bytes = data;
  for (size_t i = 0; i < n; i++) h = (h ^ bytes[i]) * 0x100000001b3ULL;
  return h;
}

static uint64_t mix_int(uint64_t h, int64_t v) { return mix(h, &v, sizeof v); }
static uint64_t mix_real(uint64_t h, double v) { return mix(h, &v, sizeof v); }
static uint64_t mix_text(uint64_t h, const char *s) { return mix(h, s, strlen(s) + 1); }

static uint64_t mix_param(uint64_t h, const ParamSpec *s) {
  h = mix_text(h, s->name);
  h = mix_int(h, s->ndim);
  for (int d = 0; d < s->ndim; d++) h = mix_int(mix_int(h, s->shape[d]), s->unpadded[d]);
  h = mix_int(mix_int(mix_int(h, s->split_axis), s->init), s->decay);
  h = mix_int(mix_int(mix_int(h, s->tp_sum), s->in_embed), s->in_head);
  h = mix_int(mix_int(mix_int(h, s->place), s->split_copies), s->expert_split);
  return mix_real(h, s->std);
}

static uint64_t params_hash(const Program *p) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < p->nmodel_params; i++) h = mix_param(h, &p->model_params[i]);
  h = mix_int(h, -1);
  for (int i = 0; i < p->nblock_params; i++) h = mix_param(h, &p->block_params[i]);
  return h;
}

static uint64_t mix_chunk(uint64_t h, const ChunkSpec *c) {
  int64_t fields[] = {c->first_layer,   c->layers,          c->has_embed,
                      c->has_head,      c->slot_elems,      c->input_offset,
                      c->output_offset, c->grad_out_offset, c->grad_in_offset};
  return mix(h, fields, sizeof fields);
}

static uint64_t mix_action(uint64_t h, const Action *a) {
  int64_t fields[] = {a->kind, a->joined, a->chunk, a->microbatch, a->peer, a->slot, a->neighbour};
  return mix(h, fields, sizeof fields);
}

/* Everything of the plan the runtime reads: chunks, each pipeline rank's actions and footprint, the
 * activation regions, the logits, the vocabulary, the FLOPs. */
static uint64_t plan_hash(const Program *p) {
  uint64_t h = 0xcbf29ce484222325ULL;
  int64_t sizes[] = {p->seq,          p->hidden,        p->layers,        p->vocab,
                     p->vocab_padded, p->masked_lm,     p->scratch_elems, p->recompute_elems,
                     p->io_elems,     p->logits_offset, p->logits_cols,   p->nchunks};
  h = mix(h, sizes, sizeof sizes);
  for (int c = 0; c < p->nchunks; c++) h = mix_int(mix_chunk(h, &p->chunks[c]), p->slots[c]);
  for (int r = 0; r < p->pp; r++) {
    h = mix_int(mix_int(mix_int(h, p->nactions[r]), p->footprints[r].param_elems),
                p->footprints[r].activation_elems);
    for (int i = 0; i < p->nactions[r]; i++) h = mix_action(h, &p->actions[r][i]);
  }
  return mix_real(h, p->flops_per_iteration);
}

/* How the layout line names Program.recompute (none, full, selective). */
static const char *const recompute_words[] = {"", ", recompute full", ", recompute selective"};

static void record_fill(RunRecord *rec, const Program *p, const TrainArgs *a) {
  memset(rec, 0, sizeof *rec);
  snprintf(rec->model, sizeof rec->model, "%s", p->name);
  snprintf(rec->precision, sizeof rec->precision, "%s weights, %zu-byte activations", REAL_NAME,
           sizeof(act_t));
  snprintf(rec->layout, sizeof rec->layout, "tp %d × pp %d × dp %d, vpp %d, mbs %d of gbs %d%s%s",
           p->tp, p->pp, p->dp, p->vpp, p->mbs, p->gbs, recompute_words[p->recompute],
           p->sequence_parallel ? ", sequence parallel" : "");
  size_t used = 0;
  for (int i = 0; i < p->nconfig && used < sizeof rec->config; i++)
    used += (size_t)snprintf(rec->config + used, sizeof rec->config - used, "%s = %s\n",
                             p->config[i].key, p->config[i].value);
  rec->params = params_hash(p);
  rec->plan = plan_hash(p);
  rec->nsettings = flags_settings(a, rec->settings);
}

/* ---- differences
 * ----------------------------------------------------------------------------------- */

/* The first line of config text a that differs from b's line at the same place. */
static void first_config_difference(const char *a, const char *b, char *out, size_t size) {
  size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
  while (la == lb && strncmp(a, b, la) == 0 && a[la] == '\n' && b[lb] == '\n') {
    a += la + 1, b += lb + 1;
    la = strcspn(a, "\n"), lb = strcspn(b, "\n");
  }
  snprintf(out, size, "config %.*s%s against %.*s%s", (int)la, a, la ? "" : "(nothing)", (int)lb, b,
           lb ? "" : "(nothing)");
}

/* What differs between this rank's program and rank 0's, or 0 when nothing does. */
static int program_difference(const RunRecord *mine, const RunRecord *first, char *out,
                              size_t size) {
  if (strcmp(mine->model, first->model) != 0)
    snprintf(out, size, "model '%s' against '%s'", mine->model, first->model);
  else if (strcmp(mine->precision, first->precision) != 0)
    snprintf(out, size, "%s against %s", mine->precision, first->precision);
  else if (strcmp(mine->layout, first->layout) != 0)
    snprintf(out, size, "%s against %s", mine->layout, first->layout);
  else if (strcmp(mine->config, first->config) != 0)
    first_config_difference(mine->config, first->config, out, size);
  else if (mine->params != first->params)
    snprintf(out, size, "the same configuration with other parameters");
  else if (mine->plan != first->plan)
    snprintf(out, size,
             "the same model and layout with another plan: another schedule or plait version");
  else
    return 0;
  return 1;
}

static void setting_text(const FlagSetting *s, char *out, size_t size) {
  if (!s->given) snprintf(out, size, "without %s", s->flag);
  else snprintf(out, size, "with %s%s%s", s->flag, s->value[0] ? " " : "", s->value);
}

/* One line when this rank's program or settings are not rank 0's; 0 when they are. */
static int run_difference(const RunRecord *mine, const RunRecord *first, int rank, char *out,
                          size_t size) {
  char what[1024], ours[PATH_MAX + 64], theirs[PATH_MAX + 64];
  if (program_difference(mine, first, what, sizeof what)) {
    snprintf(out, size,
             "rank %d runs another program than rank 0 (%s); launch one program on every rank",
             rank, what);
    return 1;
  }
  for (int i = 0; i < mine->nsettings; i++) {
    const FlagSetting *a = &mine->settings[i], *b = &first->settings[i];
    if (a->given == b->given && strcmp(a->value, b->value) == 0) continue;
    setting_text(a, ours, sizeof ours);
    setting_text(b, theirs, sizeof theirs);
    snprintf(out, size, "rank %d was started %s, rank 0 %s; give every rank the same flags", rank,
             ours, theirs);
    return 1;
  }
  return 0;
}

/* ---- agreeing
 * ------------------------------------------------------------------------------------- */

/* message: this rank's failure, or NULL. The lowest rank with one tells it to every rank, and it
 * ends the job ("plait: rank R: <message>" when name_rank, else "plait: <message>"); otherwise
 * this returns. */
static void fail_if_any(Comm *c, const char *message, int name_rank) {
  const RankInfo *ri = comm_info(c);
  /* the maximum of minus the rank is the lowest */
  double lowest = -(double)(message ? ri->rank : ri->world);
  comm_allreduce(c, GROUP_WORLD, &lowest, 1, COMM_F64, COMM_MAX);
  int speaker = (int)-lowest;
  if (speaker == ri->world) return;
  char text[REFUSAL_TEXT] = "";
  if (message) snprintf(text, sizeof text, "%s", message);
  comm_broadcast(c, GROUP_WORLD, text, sizeof text, speaker);
  comm_fail_from(c, speaker, name_rank, text);
}

void agree_on_run(Comm *c, const TrainArgs *a) {
  if (strcmp(comm_backend_name(c), "local") == 0) return;
  fail_if_any(c, a->start_error, 1);
  RunRecord *mine = malloc(sizeof *mine), *first = malloc(sizeof *first);
  if (!mine || !first)
    comm_fail(c, "no memory for the %zu bytes that describe the run", 2 * sizeof *mine);
  record_fill(mine, &plait_program, a);
  memcpy(first, mine, sizeof *first);
  comm_broadcast(c, GROUP_WORLD, first, sizeof *first, 0);
  char message[REFUSAL_TEXT];
  int differs = run_difference(mine, first, comm_info(c)->rank, message, sizeof message);
  free(mine);
  free(first);
  fail_if_any(c, differs ? message : NULL, 0);
}
