/* options.h: the command line of plait's commands: a model file, layout flags, --set overrides,
 * output choices. Each command names the flags it takes; anything else is refused. */
#ifndef PLAIT_OPTIONS_H
#define PLAIT_OPTIONS_H

#include "front/core.h"
#include "ir/diag.h"
#include "front/parallel.h"

typedef struct {
  /* the positional argument: a model file, or a schedule file for check */
  const char *file;
  /* a second positional argument, where the command takes one (import, export) */
  const char *second;
  Parallel parallel;         /* layout flags given (the rest UNSET) */
  Override sets[MAX_OVERRIDES];
  int nsets;
  const char *format;        /* --format */
  const char *output;        /* -o */
  const char *print;         /* --print PASS: a pass's printed form */
  const char *machine;       /* --machine NAME */
  int unit_costs;            /* --unit-costs */
  /* --separate-gemms: no GEMMs joined over weights side by side (fuse_gemm) */
  int separate_gemms;
  int gpus;                  /* --gpus N (tune: the devices to lay the model over; 0: not given) */
  /* --ranks N (calibrate: the ranks that share this machine; 0: not given) */
  int ranks;
  /* --launcher CMD (calibrate: starts the ranks as processes, as mpirun -np N) */
  const char *launcher;
  int time_limit;            /* --time-limit S (calibrate: the probe's seconds; 0: not given) */
  int emit_only;             /* --emit-only */
  int double_precision;      /* --double: real = double (gradient checks) */
  /* --force (import: replace a full training checkpoint with weights alone) */
  int force;
  const char *backend;       /* --backend cpu|cuda */
  const char *model;         /* --model FILE (check: costs from a model) */
  const char *dtype;         /* --dtype f32|bf16|f16|f64 (export) */
  const char *shard_size;    /* --shard-size BYTES (export) */
  long long lua_instructions; /* --lua-instructions N: the model file's budget (0: the default) */
  long long lua_memory_mb;    /* --lua-memory MB */
} Options;

/* In a command's flags: every flag of the layout's table (layout_fields.h). */
#define OPTIONS_LAYOUT "(the layout's flags)"

/* Parses argv[first..argc): `flags` lists the long flags the command takes ("--tp", "--set", ...,
 * "-o", OPTIONS_LAYOUT); `files` is how many positional arguments it takes (1 or 2).
 * Returns 0, or -1 with the reason in d. */
int options_parse(int argc, char **argv, int first, const char *const *flags, int files, Options *o,
                  Diag *d);

#endif
