/* cmd_plan.c: `plait plan`: traces a model under a layout, runs the passes, prints the plan. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "host.h"
#include "options.h"
#include "shape.h"

static const char *const plan_flags[] = {"--tp", "--pp", "--vpp", "--dp", "--mbs", "--gbs", "--schedule", "--recompute",
                                         "--sequence-parallel", "--partition", "--set", "--format", "--machine",
                                         "--unit-costs", "--print", "-o", NULL};

int cmd_plan(int argc, char **argv) {
  Options o;
  Diag d;
  Model m;
  Parallel par;
  if (options_parse(argc, argv, 2, plan_flags, &o, &d) == 0 && !o.file) diag(&d, "plan needs a model file: plait plan MODEL.lua");
  else if (options_parse(argc, argv, 2, plan_flags, &o, &d) == 0 &&
           host_build_model(o.file, o.sets, o.nsets, &o.parallel, &par, &m, &d) == 0) {
    shape_print(&m, stdout);
    model_free(&m);
    return 0;
  }
  fprintf(stderr, "plait: %s\n", d.msg);
  return 1;
}
