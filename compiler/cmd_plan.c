/* cmd_plan.c: `plait plan`: traces a model under a layout, runs the passes, prints the plan. */
#include <stdio.h>
#include <string.h>

#include "autodiff.h"
#include "commands.h"
#include "host.h"
#include "options.h"
#include "shape.h"
#include "shard.h"

static const char *const plan_flags[] = {"--tp", "--pp", "--vpp", "--dp", "--mbs", "--gbs", "--schedule", "--recompute",
                                         "--sequence-parallel", "--partition", "--set", "--format", "--machine",
                                         "--unit-costs", "--print", "-o", NULL};

static int run(const Options *o, Diag *d) {
  Model m;
  Parallel par;
  if (!o->file) return diag(d, "plan needs a model file: plait plan MODEL.lua");
  if (host_build_model(o->file, o->sets, o->nsets, &o->parallel, &par, &m, d)) return -1;
  int status = 0;
  if (o->print && strcmp(o->print, "shapes") == 0) shape_print(&m, stdout);
  else if (shard_model(&m, &par, d)) status = -1;
  else if (o->print && strcmp(o->print, "shard") == 0) graph_print(&m, stdout);
  else if (autodiff_model(&m, d)) status = -1;
  else graph_print(&m, stdout);
  model_free(&m);
  return status;
}

int cmd_plan(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, plan_flags, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  fprintf(stderr, "plait: %s\n", d.msg);
  return 1;
}
