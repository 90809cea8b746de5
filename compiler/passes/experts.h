/* experts.h: expert parallelism: a mixture's experts spread over ep data-parallel ranks. After each
 * route the ranks' counts are gathered; the dispatched rows go to the ranks holding their experts
 * (an all-to-all of variable counts) and the experts' results come back before the combine. The
 * rows between the two exchanges are those this rank's experts receive, as many as the gathered
 * counts say: a dim sized at run time (Dim.worst), routed rows under balanced routing, ep·routed
 * rows at most (the dropless worst case). */
#ifndef PLAIT_EXPERTS_H
#define PLAIT_EXPERTS_H

#include "front/parallel.h"
#include "ir/diag.h"
#include "ir/graph.h"

/* Inserts the exchanges into every stage graph's forward nodes (run before autodiff, which makes
 * each exchange's adjoint the other) and marks the experts' weights spread over ep. Nothing with
 * ep = 1. Errors: ep > 1 for a model without experts, ep not dividing the experts. */
int experts_spread(Model *m, const Parallel *par, Diag *d);

/* The greatest number dividing every mixture's experts (what an ep must divide); 0 without. */
int64_t experts_common(const Model *m);

#endif
