/* host.h: the embedded Lua: runs a model file with lib/plait and traces it into a Model. */
#ifndef PLAIT_HOST_H
#define PLAIT_HOST_H

#include <lua.h>

#include "front/core.h"
#include "ir/diag.h"
#include "ir/graph.h"
#include "options.h"
#include "front/parallel.h"

/* Runs the model file o->file (in its sandbox, under the Lua limits of o) with the --set
 * overrides, merges its parallel table under the layout flags of o into `par` (defaults filled
 * in and checked), and traces embed, block and head into `m`. Returns 0, or -1 with one line in
 * d (Lua errors carry the model file's name and line). */
int host_build_model(const Options *o, Parallel *par, Model *m, Diag *d);

/* What a command does with a traced model while its Lua state is open: L holds the model record at
 * stack index `model`. Returns 0, or -1 with one line in d. */
typedef int (*HostVisit)(lua_State *L, int model, const Model *m, void *ctx, Diag *d);

/* As host_build_model under the model file's own layout, with before(L, model, m, ctx, d) (when
 * given) after the model file ran and before it is traced (m holds its name and depth alone), then
 * visit(L, model, m, ctx, d) before the state closes. */
int host_visit_model(const Options *o, Model *m, HostVisit before, HostVisit visit, void *ctx,
                     Diag *d);

/* The parallel table of the model record at stack index `model` of L into p, what it leaves
 * out UNSET. Returns 0, or -1 with one line in d. */
int host_read_parallel(lua_State *L, int model, Parallel *p, Diag *d);

/* Calls the function below nargs arguments on L's stack as lua_pcall does; an error becomes one
 * line in d (an error inside lib/plait named at the model file's line). Returns 0 or -1. */
int host_call(lua_State *L, int nargs, int nresults, Diag *d);

#endif
