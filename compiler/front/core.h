/* core.h: the module plait.core: the C functions lib/plait calls to add dims, parameters and
 * primitive nodes to the graph being traced, with shapes inferred as each node is made. */
#ifndef PLAIT_CORE_H
#define PLAIT_CORE_H

#include <lua.h>

#include "ir/graph.h"

enum { MAX_OVERRIDES = 64 };

typedef struct {
  char key[NAME_LEN];
  char value[NAME_LEN];
  int used;
} Override;

/* A parameter's or constant's tensor in the stage being traced: valid while `stage` is
 * Builder.stages_begun. */
typedef struct {
  int stage, tensor;
} Leaf;

typedef struct {
  Model *model;
  Graph *graph;     /* the stage being traced */
  int stages_begun; /* embed 1, block 2, then each other layer's block, head: Leaf.stage */
  /* the stage being traced: 0 before embed, then 1 + its index in core.c's stage names */
  int stage_kind;
  ParamScope scope; /* block parameters are per layer; the others belong to the model */
  int tp;           /* the vocabulary is padded to a multiple of 128·tp */
  int dropout_sites;
  int ntensor_names;
  Graph variant;          /* another layer's block, traced to be compared with layer 0's */
  int tracing_variant;    /* parameters are layer 0's, looked up by name */
  int block_first_site;   /* the dropout sites of a block start here */
  int block_end_site;     /* and end here */
  Override overrides[MAX_OVERRIDES];
  int noverrides;
  NameIndex param_index[2];  /* parameters by name, per ParamScope */
  NameIndex constant_index;  /* constants by name */
  /* per parameter, per constant: its tensor in the stage traced */
  Leaf *param_leaves, *constant_leaves;
  int param_leaves_cap, constant_leaves_cap;
} Builder;

/* Makes require("plait.core") return the builder's functions. */
void core_register(lua_State *L, Builder *b);
/* Frees what tracing kept beside the model (the other layers' block, the indexes). */
void core_free(Builder *b);

/* The registry key of the model file's name. */
#define CORE_MODEL_FILE "plait.model_file"

/* "file:line" of the innermost Lua frame outside lib/plait. */
void core_user_where(lua_State *L, char *buf, int len);

#endif
