/* safetensors_model.c: a checkpoint's kind (format, contents) and model (name, depth,
 * configuration) against the model that reads it. */
#include "ckpt/safetensors_model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors_meta.h"

/* Settings that leave the function the weights compute as it is, so a checkpoint loads across
 * them: dropout (noise while training), the spread of the initial weights, and the sequence
 * length (the weights read any length; learned positions hold it in their shape, which loading
 * checks anyway). */
static int changes_the_function(const char *key) {
  return !strstr(key, "dropout") && strcmp(key, "init_std") != 0 && strcmp(key, "seq") != 0;
}

/* Equal as text, or as numbers ("4" and "4.0"). */
static int same_value(const char *a, const char *b) {
  char *end_a, *end_b;
  double x = strtod(a, &end_a), y = strtod(b, &end_b);
  return strcmp(a, b) == 0 || (end_a != a && end_b != b && !*end_a && !*end_b && x == y);
}

static const char *model_setting(const CkptModel *m, const char *key) {
  for (int i = 0; i < m->nconfig; i++)
    if (strcmp(m->config[i].key, key) == 0) return m->config[i].value;
  return NULL;
}

/* A checkpoint of another depth: its tensors differ by whole layers, which this names rather
 * than one missing tensor. */
static int check_depth(const Ckpt *c, const CkptModel *m, char *error, size_t len) {
  uint64_t saved;
  int found = ckpt_meta_whole(c, CKPT_LAYERS_KEY, 1, INT_MAX, &saved, error, len);
  if (found > 0)
    return ckpt_refuse(
        error, len, "%s has no layer count in its metadata; it is not a plait checkpoint", c->path);
  if (found < 0 || saved == (uint64_t)m->layers) return found;
  return ckpt_refuse(error, len,
                     "%s holds a %d-layer '%s', this model is a %d-layer one; load a checkpoint of "
                     "a %d-layer model, "
                     "or build a %d-layer one",
                     c->path, (int)saved, m->name, m->layers, m->layers, (int)saved);
}

/* The configuration the checkpoint was saved with against this model's, over the settings that
 * change the function: a checkpoint of heads 2 loaded by a model of heads 4 has the same shapes
 * and would compute something else. */
static int check_configuration(const Ckpt *c, const CkptModel *m, char *error, size_t len) {
  char key[256];
  for (int i = 0; i < m->nconfig; i++) {
    const char *name = m->config[i].key, *ours = m->config[i].value;
    snprintf(key, sizeof key, "%s%s", CKPT_CONFIG_PREFIX, name);
    const char *saved = ckpt_meta(c, key);
    if (!changes_the_function(name) || (saved && same_value(saved, ours))) continue;
    if (!saved)
      return ckpt_refuse(
          error, len,
          "%s was saved without %s (this model has %s = %s); load a checkpoint of this model's "
          "configuration",
          c->path, name, name, ours);
    return ckpt_refuse(error, len,
                       "%s was saved with %s = %s, this model has %s = %s; load a checkpoint of "
                       "this configuration, "
                       "or build this model with --set %s=%s",
                       c->path, name, saved, name, ours, name, saved);
  }
  size_t prefix = strlen(CKPT_CONFIG_PREFIX);
  for (int i = 0; i < c->nmeta; i++) {
    if (strncmp(c->meta[i].key, CKPT_CONFIG_PREFIX, prefix) != 0) continue;
    const char *name = c->meta[i].key + prefix;
    if (changes_the_function(name) && !model_setting(m, name))
      return ckpt_refuse(
          error, len,
          "%s was saved with %s = %s, which this model's configuration does not have; load a "
          "checkpoint of this model's configuration",
          c->path, name, c->meta[i].value);
  }
  return 0;
}

/* What the file says it is, where it says so (files of older plait do not): this format of
 * checkpoint, and contents plait knows. */
static int check_kind(const Ckpt *c, char *error, size_t len) {
  static const char *const format[] = {CKPT_FORMAT};
  static const char *const contents[] = {CKPT_WEIGHTS_ONLY, CKPT_WEIGHTS_AND_OPTIMIZER};
  int which;
  if (ckpt_meta_word(c, CKPT_FORMAT_KEY, format, 1, &which, error, len) < 0) return -1;
  return ckpt_meta_word(c, CKPT_CONTENTS_KEY, contents, 2, &which, error, len) < 0 ? -1 : 0;
}

int ckpt_check_model(const Ckpt *c, const CkptModel *m, char *error, size_t len) {
  if (check_kind(c, error, len)) return -1;
  const char *model = ckpt_meta(c, CKPT_MODEL_KEY);
  if (!model || strcmp(model, m->name) != 0)
    return ckpt_refuse(error, len, "%s holds model '%s', not '%s'; load a checkpoint of this model",
                       c->path, model ? model : "?", m->name);
  if (check_depth(c, m, error, len) || check_configuration(c, m, error, len)) return -1;
  return 0;
}
