/* core.h: the module plait.core: the C functions lib/plait calls to add dims, parameters and
 * primitive nodes to the graph being traced, with shapes inferred as each node is made. */
#ifndef PLAIT_CORE_H
#define PLAIT_CORE_H

#include <lua.h>

#include "graph.h"

enum { MAX_OVERRIDES = 64 };

typedef struct {
  char key[NAME_LEN];
  char value[NAME_LEN];
  int used;
} Override;

typedef struct {
  Model *model;
  Graph *graph;     /* the stage being traced */
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
} Builder;

/* Makes require("plait.core") return the builder's functions. */
void core_register(lua_State *L, Builder *b);

/* The registry key of the model file's name. */
#define CORE_MODEL_FILE "plait.model_file"

/* "file:line" of the innermost Lua frame outside lib/plait. */
void core_user_where(lua_State *L, char *buf, int len);

#endif
