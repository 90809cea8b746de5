/* family.c: the model's tensors, and plait.hf's links for them, from Lua into C. */
#include "front/family.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/host.h"

int family_call(lua_State *L, const char *name, int nargs, int nresults, Diag *d) {
  lua_getglobal(L, "require");
  lua_pushstring(L, "plait.hf");
  if (host_call(L, 1, 1, d)) {
    lua_pop(L, nargs);
    return -1;
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  lua_insert(L, -1 - nargs);
  return host_call(L, nargs, nresults, d);
}

/* The model's tensors in checkpoint order: model scope, then each layer's block parameters. */
static void list_tensors(const Model *m, Family *f) {
  int blocks = 0;
  for (int i = 0; i < m->nparams; i++) blocks += m->params[i].scope == SCOPE_BLOCK;
  f->tensors = calloc((size_t)(m->nparams - blocks + m->layers * blocks) + 1, sizeof *f->tensors);
  for (int layer = -1; layer < m->layers; layer++)
    for (int i = 0; i < m->nparams; i++) {
      const Param *p = &m->params[i];
      if ((p->scope == SCOPE_BLOCK) != (layer >= 0)) continue;
      FamilyTensor *t = &f->tensors[f->ntensors++];
      if (layer < 0) snprintf(t->name, sizeof t->name, "%s", p->name);
      else snprintf(t->name, sizeof t->name, "layers.%d.%s", layer, p->name);
      t->ndim = p->ndim;
      for (int a = 0; a < p->ndim; a++) t->shape[a] = m->dims[p->dims[a]].unpadded;
    }
}

/* {name = {size, ...}, ...} for plait.hf. */
static void push_tensors(lua_State *L, const Family *f) {
  lua_createtable(L, 0, f->ntensors);
  for (int i = 0; i < f->ntensors; i++) {
    lua_createtable(L, f->tensors[i].ndim, 0);
    for (int a = 0; a < f->tensors[i].ndim; a++) {
      lua_pushinteger(L, f->tensors[i].shape[a]);
      lua_rawseti(L, -2, a + 1);
    }
    lua_setfield(L, -2, f->tensors[i].name);
  }
}

int family_tensor(const Family *f, const char *name) {
  for (int i = 0; i < f->ntensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return i;
  return -1;
}

static int int_field(lua_State *L, int table, const char *key) {
  lua_getfield(L, table, key);
  int v = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}

static int bool_field(lua_State *L, int table, const char *key) {
  lua_getfield(L, table, key);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A joined link's join = {axis, index, count, text}, where the link (at index t) has one. */
static void read_join(lua_State *L, int t, FamilyLink *l) {
  lua_getfield(L, t, "join");
  if (lua_istable(L, -1)) {
    int join = lua_gettop(L);
    l->join_axis = int_field(L, join, "axis");
    l->join_index = int_field(L, join, "index");
    l->join_count = int_field(L, join, "count");
    lua_getfield(L, join, "text");
    snprintf(l->join_text, sizeof l->join_text, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* One link from its Lua table (at the top of the stack). */
static int read_link(lua_State *L, const Family *f, FamilyLink *l, Diag *d) {
  int t = lua_gettop(L);
  lua_getfield(L, t, "hf");
  snprintf(l->name, sizeof l->name, "%s", lua_tostring(L, -1));
  lua_getfield(L, t, "shape");
  l->ndim = (int)lua_rawlen(L, -1);
  if (l->ndim > CKPT_MAX_DIMS)
    return diag(d, "%s has %d axes; plait moves tensors of at most %d", l->name, l->ndim,
                CKPT_MAX_DIMS);
  for (int a = 0; a < l->ndim; a++) {
    lua_rawgeti(L, -1, a + 1);
    l->shape[a] = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  lua_getfield(L, t, "also");
  l->nalso = (int)lua_rawlen(L, -1);
  if (l->nalso > FAMILY_MAX_ALSO)
    return diag(d, "%s goes by %d other names; plait reads at most %d", l->name, l->nalso,
                FAMILY_MAX_ALSO);
  for (int i = 0; i < l->nalso; i++) {
    lua_rawgeti(L, -1, i + 1);
    snprintf(l->also[i], sizeof l->also[i], "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_getfield(L, t, "parts");
  l->nparts = (int)lua_rawlen(L, -1);
  if (l->nparts > FAMILY_MAX_PARTS)
    return diag(d, "%s joins %d tensors; plait joins at most %d", l->name, l->nparts,
                FAMILY_MAX_PARTS);
  for (int i = 0; i < l->nparts; i++) {
    lua_rawgeti(L, -1, i + 1);
    l->parts[i] = family_tensor(f, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 4);
  read_join(L, t, l);
  l->transpose = bool_field(L, t, "transpose");
  l->at_least = bool_field(L, t, "at_least");
  l->groups = int_field(L, t, "groups");
  return 0;
}

static void read_problems(lua_State *L, int table, DiagList *problems) {
  for (int i = 1; i <= (int)lua_rawlen(L, table); i++) {
    lua_rawgeti(L, table, i);
    diag_add(problems, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static int read_links(lua_State *L, int model, Family *f, DiagList *problems, Diag *d) {
  lua_pushvalue(L, model);
  push_tensors(L, f);
  if (family_call(L, "_links", 2, 2, d)) return -1;
  int links = lua_gettop(L) - 1;
  f->nlinks = (int)lua_rawlen(L, links);
  f->links = calloc((size_t)f->nlinks + 1, sizeof *f->links);
  int status = 0;
  for (int i = 0; i < f->nlinks && status == 0; i++) {
    lua_rawgeti(L, links, i + 1);
    status = read_link(L, f, &f->links[i], d);
    lua_pop(L, 1);
  }
  read_problems(L, links + 1, problems);
  lua_pop(L, 2);
  return status;
}

static int read_ignored(lua_State *L, int model, Family *f, Diag *d) {
  lua_pushvalue(L, model);
  if (family_call(L, "_ignored", 1, 2, d)) return -1;
  snprintf(f->base_prefix, sizeof f->base_prefix, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    f->ignored = realloc(f->ignored, sizeof *f->ignored * (size_t)(f->nignored + 1));
    f->ignored[f->nignored++] = strdup(lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 0;
}

int family_read(lua_State *L, int model, const Model *m, Family *f, DiagList *problems, Diag *d) {
  memset(f, 0, sizeof *f);
  list_tensors(m, f);
  return read_links(L, model, f, problems, d) || read_ignored(L, model, f, d) ? -1 : 0;
}

void family_free(Family *f) {
  for (int i = 0; i < f->nignored; i++) free(f->ignored[i]);
  free(f->ignored);
  free(f->tensors);
  free(f->links);
  memset(f, 0, sizeof *f);
}

int family_ignores(const Family *f, const char *name) {
  for (int i = 0; i < f->nignored; i++)
    if (strcmp(f->ignored[i], name) == 0) return 1;
  return 0;
}

static int64_t elems(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int a = 0; a < ndim; a++) n *= shape[a];
  return n;
}

int64_t family_link_elems(const FamilyLink *l) { return elems(l->ndim, l->shape); }
int64_t family_tensor_elems(const FamilyTensor *t) { return elems(t->ndim, t->shape); }

int64_t family_part_elems(const FamilyLink *l, const FamilyTensor *t) {
  return l->join_count ? family_link_elems(l) : family_tensor_elems(t);
}

RelayoutBlock family_block(const FamilyLink *l, const FamilyTensor *t) {
  int a = l->join_axis;
  return (RelayoutBlock){elems(a, t->shape), t->shape[a], elems(t->ndim - a - 1, t->shape + a + 1),
                         l->join_index, l->join_count};
}

/* A joined link's block in the model's orientation: its Hugging Face shape, or that transposed. */
static int64_t block_rows(const FamilyLink *l) {
  if (l->ndim == 0) return 1;
  return l->shape[l->transpose ? 1 : 0];
}

int64_t family_part_rows(const FamilyLink *l, const FamilyTensor *t) {
  if (l->join_count) return block_rows(l);
  if (t->ndim < l->ndim || t->ndim == 0) return 1;
  return t->shape[0];
}

int64_t family_link_cols(const Family *f, const FamilyLink *l) {
  if (l->join_count) return family_link_elems(l) / block_rows(l);
  const FamilyTensor *first = &f->tensors[l->parts[0]];
  if (first->ndim < l->ndim) return family_tensor_elems(first);
  return first->ndim ? elems(first->ndim - 1, first->shape + 1) : 1;
}
