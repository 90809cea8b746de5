/* cmd_tune.c: `plait tune`: the fastest layouts of a model over N devices that fit their memory. */
#include <stdio.h>
#include <string.h>

#include "bytes.h"
#include "commands.h"
#include "plan/tune.h"

const char *const tune_flags[] = {"--gpus", "--machine", "--set", "--format", OPTIONS_LAYOUT,
                                  "--lua-instructions", "--lua-memory", NULL};

/* None fits: one line naming the least memory a layout needs. */
static int none_fits(const Tune *t, Diag *d) {
  const TuneLayout *l = &t->layouts[t->smallest];
  char least[32], capacity[32], flags[512];
  bytes_format(l->memory, least, sizeof least);
  bytes_format(t->machine.memory_bytes, capacity, sizeof capacity);
  tune_layout_flags(&l->par, flags, sizeof flags);
  return diag(d,
              "%s fits no layout on %d device%s of %s (%s each): the smallest needs %s per device "
              "(%s); use more "
              "devices, a smaller global batch, or a machine with more memory",
              t->model_file, t->devices, t->devices == 1 ? "" : "s", t->machine.name, capacity,
              least, flags);
}

static int run(const Options *o, Diag *d) {
  const char *format = o->format ? o->format : "text";
  if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)
    return diag(d, "--format %s: unknown format for tune (text, json)", format);
  Tune t;
  int status = tune_search(o, &t, d);
  if (status == 0 && t.fitting == 0)
    status = t.count ? none_fits(&t, d)
                     : diag(d, "%s: plan refuses every layout on %d devices (the first: %s)",
                            t.model_file, t.devices, t.refused ? t.refusal : "none to try");
  if (status == 0) (strcmp(format, "json") == 0 ? tune_write_json : tune_write_text)(&t, stdout);
  tune_free(&t);
  return status;
}

int cmd_tune(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, tune_flags, 1, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  diag_print(d.msg);
  return 1;
}
