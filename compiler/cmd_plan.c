/* cmd_plan.c: `plait plan`: builds the plan of a model under a layout and prints it (text, json, dot). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "options.h"
#include "plan.h"

static const char *const plan_flags[] = {"--tp", "--pp", "--vpp", "--dp", "--mbs", "--gbs", "--schedule", "--recompute",
                                         "--sequence-parallel", "--partition", "--set", "--format", "--machine",
                                         "--unit-costs", "--print", "-o", "--lua-instructions", "--lua-memory", NULL};

typedef struct {
  const char *name;
  void (*write)(const Plan *p, FILE *f);
} Format;

static const Format formats[] = {{"text", plan_write_text}, {"json", plan_write_json}, {"dot", plan_write_dot},
                                 {"trace", plan_write_trace}, {"svg", plan_write_svg}};

static const Format *find_format(const char *name, Diag *d) {
  for (unsigned i = 0; i < sizeof formats / sizeof *formats; i++)
    if (strcmp(formats[i].name, name) == 0) return &formats[i];
  diag(d, "--format %s: unknown format (text, json, dot, trace, svg)", name);
  return NULL;
}

static FILE *open_output(const char *path, Diag *d) {
  if (!path) return stdout;
  FILE *f = fopen(path, "w");
  if (!f) diag(d, "-o %s: cannot write there (check the directory exists and is writable)", path);
  return f;
}

static int run(const Options *o, Diag *d) {
  const Format *format = find_format(o->format ? o->format : "text", d);
  if (!format) return -1;
  FILE *out = open_output(o->output, d);
  if (!out) return -1;
  Plan p;
  int status = plan_build(o, &p, out, d);
  if (status == 0) format->write(&p, out);
  plan_free(&p);
  if (out != stdout && fclose(out) != 0) return diag(d, "-o %s: write failed", o->output);
  return status < 0 ? -1 : 0;
}

int cmd_plan(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, plan_flags, 1, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  fprintf(stderr, "plait: %s\n", d.msg);
  return 1;
}
