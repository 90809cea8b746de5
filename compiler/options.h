/* options.h: the command line of plait's commands: a model file, layout flags, --set overrides,
 * output choices. Each command names the flags it takes; anything else is refused. */
#ifndef PLAIT_OPTIONS_H
#define PLAIT_OPTIONS_H

#include "core.h"
#include "diag.h"
#include "parallel.h"

typedef struct {
  const char *file;          /* the positional argument: a model file, or a schedule file for check */
  Parallel parallel;         /* layout flags given (the rest UNSET) */
  Override sets[MAX_OVERRIDES];
  int nsets;
  const char *format;        /* --format */
  const char *output;        /* -o */
  const char *print;         /* --print PASS: a pass's printed form */
  const char *machine;       /* --machine NAME */
  int unit_costs;            /* --unit-costs */
  int emit_only;             /* --emit-only */
  int double_precision;      /* --double: real = double (gradient checks) */
  const char *backend;       /* --backend cpu|cuda */
  const char *model;         /* --model FILE (check: costs from a model) */
} Options;

/* Parses argv[first..argc): `flags` lists the long flags the command takes ("--tp", "--set", ...,
 * "-o"); the layout flags are "--tp --pp --vpp --dp --mbs --gbs --schedule --recompute
 * --sequence-parallel --partition". Returns 0, or -1 with the reason in d. */
int options_parse(int argc, char **argv, int first, const char *const *flags, Options *o, Diag *d);

#endif
