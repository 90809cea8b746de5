/* cmd_plan.c: `plait plan`: builds the plan of a model under a layout and prints it (text, json,
 * dot). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "options.h"
#include "outfile.h"
#include "plan/plan.h"

const char *const plan_flags[] = {OPTIONS_LAYOUT, "--set", "--format", "--machine", "--unit-costs",
                                  "--print", "-o", "--lua-instructions", "--lua-memory",
                                  "--separate-gemms", NULL};

typedef struct {
  const char *name;
  void (*write)(const Plan *p, FILE *f);
} Format;

static const Format formats[] = {{"text", plan_write_text},
                                 {"json", plan_write_json},
                                 {"dot", plan_write_dot},
                                 {"trace", plan_write_trace},
                                 {"svg", plan_write_svg}};

static const Format *find_format(const char *name, Diag *d) {
  for (unsigned i = 0; i < sizeof formats / sizeof *formats; i++)
    if (strcmp(formats[i].name, name) == 0) return &formats[i];
  diag(d, "--format %s: unknown format (text, json, dot, trace, svg)", name);
  return NULL;
}

/* -o FILE: neither the model file nor a schedule file it reads, written through a temporary
 * file. */
static int open_output(const Options *o, OutFile *out, Diag *d) {
  const char *inputs[] = {o->file, o->parallel.schedule[0] ? o->parallel.schedule : NULL};
  if (outfile_check("-o", o->output, inputs, 2, d)) return -1;
  return outfile_open(out, o->output, d);
}

static int run(const Options *o, Diag *d) {
  const Format *format = find_format(o->format ? o->format : "text", d);
  OutFile out = {0};
  if (!format || (o->output && open_output(o, &out, d))) return -1;
  FILE *f = o->output ? out.file : stdout;
  Plan p;
  int status = plan_build(o, &p, f, d);
  if (status == 0) format->write(&p, f);
  plan_free(&p);
  if (o->output && status >= 0) return outfile_close(&out, d);
  if (o->output) outfile_abort(&out);
  return status < 0 ? -1 : 0;
}

int cmd_plan(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, plan_flags, 1, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  diag_print(d.msg);
  return 1;
}
