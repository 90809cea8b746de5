/* family.h: a model's Hugging Face family (lib/plait/hf.lua) read into C for plait import and
 * plait export: the model's tensors by their checkpoint names, and for each Hugging Face tensor
 * the link to the model's tensors it holds (names, shapes, transpose, interleave, or a block of
 * one of them where several Hugging Face tensors are joined into it). */
#ifndef PLAIT_FAMILY_H
#define PLAIT_FAMILY_H

#include <lua.h>
#include <stdint.h>

#include "ckpt/safetensors.h"
#include "front/relayout.h"
#include "ir/diag.h"
#include "ir/graph.h"

enum { FAMILY_NAME_LEN = 192, FAMILY_MAX_PARTS = 8, FAMILY_MAX_ALSO = 3 };

/* One of the model's tensors, as its checkpoints hold it. */
typedef struct {
  char name[FAMILY_NAME_LEN]; /* "wte", "layers.3.attn.q.weight" */
  int ndim;
  int64_t shape[CKPT_MAX_DIMS]; /* without vocabulary padding */
} FamilyTensor;

/* One Hugging Face tensor and the model's tensors it holds (see relayout.h). */
typedef struct {
  char name[FAMILY_NAME_LEN]; /* the name export writes; import takes the first the folder holds */
  char also[FAMILY_MAX_ALSO][FAMILY_NAME_LEN]; /* other names it goes by ("embed_out.weight") */
  int nalso;
  int ndim;
  int64_t shape[CKPT_MAX_DIMS]; /* as export writes it */
  int transpose, groups, at_least;
  int nparts;
  int parts[FAMILY_MAX_PARTS];  /* indices into Family.tensors, in order along the first axis */
  /* joined (join_count > 0): one of join_count Hugging Face tensors, block join_index along
   * join_axis of its one part; the links of one join follow each other in index order */
  int join_axis, join_index, join_count;
  char join_text[FAMILY_NAME_LEN + 64]; /* "the 4 (heads) joined into the model's X" */
} FamilyLink;

typedef struct {
  FamilyTensor *tensors; /* model scope first, then layer by layer */
  int ntensors;
  FamilyLink *links;
  int nlinks;
  char **ignored;        /* Hugging Face tensors import passes over */
  int nignored;
  /* names of the base model's tensors start with it, or not in some checkpoints */
  char base_prefix[64];
} Family;

/* The family of the model (its record at stack index `model` of L) for its tensors. What does
 * not fit (a tensor the family does not place, parts of different shapes) goes to `problems`.
 * Returns 0, or -1 with one line in d (an unknown family, a Lua error). */
int family_read(lua_State *L, int model, const Model *m, Family *f, DiagList *problems, Diag *d);
void family_free(Family *f);

/* Calls plait.hf's function `name` with the nargs values on top of L's stack (they are consumed),
 * leaving nresults. Returns 0, or -1 with one line in d. */
int family_call(lua_State *L, const char *name, int nargs, int nresults, Diag *d);

/* The index of the model's tensor of that name, or -1. */
int family_tensor(const Family *f, const char *name);
/* Whether import passes over a Hugging Face tensor of that name. */
int family_ignores(const Family *f, const char *name);
/* Elements of a link's Hugging Face tensor, and of one of the model's tensors. */
int64_t family_link_elems(const FamilyLink *l);
int64_t family_tensor_elems(const FamilyTensor *t);
/* Elements of a part as its link moves it: the tensor's, or a joined link's block's. */
int64_t family_part_elems(const FamilyLink *l, const FamilyTensor *t);
/* A joined link's block of its tensor. */
RelayoutBlock family_block(const FamilyLink *l, const FamilyTensor *t);
/* A part's rows in its link's matrix: its first axis, or 1 for a vector kept as a row of a
 * matrix (a part of one axis fewer than its link), or a joined link's block's first axis. */
int64_t family_part_rows(const FamilyLink *l, const FamilyTensor *t);
/* The link's columns in the model's orientation: its first part's axes after the first (or, for
 * a vector kept as a row, all of them; for a joined link, its block's). */
int64_t family_link_cols(const Family *f, const FamilyLink *l);

#endif
