/* gradcheck.c: analytic gradients of one batch against central finite differences of the loss:
 * along random directions through every parameter at once, and element by element. Five-point
 * stencils, (-L(w+2h) + 8L(w+h) - 8L(w-h) + L(w-2h)) / 12h, whose error is O(h⁴). It runs on the
 * CPU in double precision (train.c refuses it elsewhere), where the weights compute reads are
 * the master copies and live in host memory. */
#include "train/gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The loss of the batch loaded, through the forward actions alone (dropout masks as in
 * training). */
static double loss_now(Trainer *t) {
  t->run.loss = 0;
  exec_iteration(&t->eval, t->device_tokens, t->device_targets);
  return batch_loss(t);
}

/* Moves every parameter by step·direction (direction over all of this rank's elements). */
static void move(Trainer *t, const double *direction, double step) {
  int64_t at = 0;
  for (int s = 0; s < t->params.count; s++)
    for (int64_t i = 0; i < t->params.slot[s].n; i++)
      t->params.slot[s].master[i] += (real)(step * direction[at++]);
}

static double stencil(Trainer *t, const double *direction, double h) {
  double f[4];
  const double steps[4] = {2 * h, h, -h, -2 * h};
  for (int k = 0; k < 4; k++) {
    move(t, direction, steps[k]);
    f[k] = loss_now(t);
    move(t, direction, -steps[k]);
  }
  return (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
}

/* Direction i of k over this rank's elements: Philox normals, 0 on frozen parameters (no
 * gradient). */
static double direction_at(const Trainer *t, int k, int64_t i, const ParamSlot *s) {
  if (!s->spec->trainable) return 0;
  return philox_normal(t->seed, philox_stream_of("gradcheck-direction") + (uint64_t)k, (uint64_t)i);
}

/* d L along unit random directions (Philox normals, normalised) against g·d. */
static double directional(Trainer *t, int directions) {
  int64_t n = t->params.elems;
  double *d = malloc((size_t)n * sizeof *d), worst = 0;
  for (int k = 0; k < directions; k++) {
    double norm = 0, dot = 0;
    int64_t i = 0;
    for (int s = 0; s < t->params.count; s++)
      for (int64_t e = 0; e < t->params.slot[s].n; e++, i++)
        d[i] = direction_at(t, k, i, &t->params.slot[s]), norm += d[i] * d[i];
    norm = sqrt(norm);
    int64_t at = 0;
    for (int s = 0; s < t->params.count; s++)
      for (int64_t i = 0; i < t->params.slot[s].n; i++, at++)
        d[at] /= norm, dot += d[at] * t->params.slot[s].g[i];
    double numeric = stencil(t, d, 1e-3),
           error = fabs(numeric - dot) / fmax(fabs(numeric), fabs(dot));
    if (error > worst || isnan(error)) worst = error;
  }
  free(d);
  return worst;
}

/* The n-th checked element: spread over every trained parameter by Philox, in a fixed order. */
static void pick(const Trainer *t, int64_t n, int *slot, int64_t *element) {
  int64_t trained = 0;
  for (int i = 0; i < t->params.count; i++)
    trained += t->params.slot[i].spec->trainable ? t->params.slot[i].n : 0;
  uint64_t u = philox_below(t->seed, philox_stream_of("gradcheck"), (uint64_t)n, (uint64_t)trained);
  for (int i = 0; i < t->params.count; i++) {
    if (!t->params.slot[i].spec->trainable) continue;
    if ((int64_t)u < t->params.slot[i].n) {
      *slot = i, *element = (int64_t)u;
      return;
    }
    u -= (uint64_t)t->params.slot[i].n;
  }
  *slot = 0, *element = 0;
}

static double element_derivative(Trainer *t, real *w, double h) {
  double f[4];
  const double steps[4] = {2 * h, h, -h, -2 * h};
  real saved = *w;
  for (int k = 0; k < 4; k++) {
    *w = saved + (real)steps[k];
    f[k] = loss_now(t);
  }
  *w = saved;
  return (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
}

int gradcheck_run(Trainer *t, int64_t count) {
  const double tolerance = 1e-6;
  batch_load(t, 0, 0);
  params_zero_grads(&t->params);
  t->run.step = 0;
  t->exec.step = NULL; /* gradients only: no update */
  t->run.loss = 0;
  exec_iteration(&t->exec, t->device_tokens, t->device_targets);
  double base = batch_loss(t), along = directional(t, 3);
  double *numeric = calloc((size_t)count + 1, sizeof *numeric),
         *analytic = calloc((size_t)count + 1, sizeof *analytic);
  double largest = 0;
  int *slots = calloc((size_t)count + 1, sizeof *slots);
  int64_t *elements = calloc((size_t)count + 1, sizeof *elements);
  for (int64_t n = 0; n < count; n++) {
    pick(t, n, &slots[n], &elements[n]);
    ParamSlot *p = &t->params.slot[slots[n]];
    numeric[n] = element_derivative(t, &p->master[elements[n]], 1e-3);
    analytic[n] = p->g[elements[n]];
    largest = fmax(largest, fabs(numeric[n]));
  }
  /* relative to the larger of the two, with a floor at 1e-4 of the largest derivative seen so that
   * elements through which almost nothing flows do not divide by almost nothing */
  double worst = 0;
  int64_t at = 0;
  for (int64_t n = 0; n < count; n++) {
    double e = fabs(numeric[n] - analytic[n]) /
               fmax(fmax(fabs(numeric[n]), fabs(analytic[n])), 1e-4 * largest);
    if (e > worst || isnan(e)) worst = e, at = n;
  }
  printf(
      "gradcheck: loss %.12f; 3 random directions: largest relative error %.3g; %lld elements: "
      "largest relative "
      "error %.3g (%s[%lld]: analytic %.9g, numeric %.9g)\n",
      base, along, (long long)count, worst, t->params.slot[slots[at]].name, (long long)elements[at],
      analytic[at], numeric[at]);
  fflush(stdout);
  int ok = along < tolerance && worst < tolerance && largest > 0;
  free(numeric), free(analytic), free(slots), free(elements);
  return ok ? 0 : 1;
}
