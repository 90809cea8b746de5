/* safetensors_model.h: whether a checkpoint holds a given model: the name, depth and
 * configuration its metadata records against the model's. The generated programs' --load and
 * --init and plait export refuse a checkpoint of another model with it before reading any
 * tensor. */
#ifndef PLAIT_CKPT_MODEL_H
#define PLAIT_CKPT_MODEL_H

#include <stddef.h>

#include "ckpt/safetensors.h"

/* Metadata keys: the model's name, its number of layers, and each config entry as config.KEY. */
#define CKPT_MODEL_KEY "model"
#define CKPT_LAYERS_KEY "layers"
#define CKPT_CONFIG_PREFIX "config."

/* What the file is, and what it holds: the weights alone (plait import writes such files; --init
 * reads them), or with Adam's m and v (tensors adam.m.NAME, adam.v.NAME), the step, the seed and
 * the schedule (--save writes these; --load resumes from them). */
#define CKPT_FORMAT_KEY "format"
#define CKPT_FORMAT "plait checkpoint 1"
#define CKPT_CONTENTS_KEY "contents"
#define CKPT_WEIGHTS_ONLY "weights"
#define CKPT_WEIGHTS_AND_OPTIMIZER "weights and optimizer"

typedef struct {
  const char *name;
  int layers;
  const CkptMeta *config; /* the model file's config table after --set, as text */
  int nconfig;
} CkptModel;

/* 0 when c holds this model as far as its metadata tells: a format and contents plait knows
 * (where the file names them), the same name and depth (a whole number of at least 1), and the
 * same values of the settings that change the function the weights compute (every config entry
 * but dropout, init_std and seq). Else -1 with one line in `error` naming what differs, or the
 * malformed key, and the fix. */
int ckpt_check_model(const Ckpt *c, const CkptModel *m, char *error, size_t len);

#endif
