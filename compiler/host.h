/* host.h: the embedded Lua: runs a model file with lib/plait and traces it into a Model. */
#ifndef PLAIT_HOST_H
#define PLAIT_HOST_H

#include "core.h"
#include "diag.h"
#include "graph.h"
#include "parallel.h"

/* Runs `file` with the --set overrides, merges its parallel table under the flags in `flags` into
 * `par` (defaults filled in and checked), and traces embed, block and head into `m`.
 * Returns 0, or -1 with one line in d (Lua errors carry the model file's name and line). */
int host_build_model(const char *file, const Override *sets, int nsets, const Parallel *flags, Parallel *par,
                     Model *m, Diag *d);

#endif
