/* cmd_calibrate.c: `plait calibrate`: measures this machine (build/plait-probe, through the runtime) and
 * writes the machine file plait plan --machine FILE reads. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "calibrate.h"
#include "commands.h"
#include "options.h"
#include "outfile.h"

static const char *const calibrate_flags[] = {"--ranks", "-o", NULL};

static int measure(const Options *o, Probe *p, Diag *d) {
  char home[PATH_MAX], probe[PATH_MAX + 32], command[PATH_MAX + 64];
  if (plait_home(home, sizeof home, d)) return -1;
  snprintf(probe, sizeof probe, "%s/build/plait-probe", home);
  if (access(probe, X_OK) != 0) return diag(d, "the probe %s is missing; run make in %s", probe, home);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(command, sizeof command, "'%s' %d", probe, o->ranks ? o->ranks : (int)(cores > 0 ? cores : 1));
  FILE *f = popen(command, "r");
  if (!f) return diag(d, "cannot run %s", probe);
  int status = calibrate_read(f, p, d);
  int exit_status = pclose(f);
  if (status == 0 && exit_status != 0) return diag(d, "%s failed (status %d); run it by hand to see why", command, exit_status);
  return status;
}

static int run(const Options *o, Diag *d) {
  if (o->file) return diag(d, "calibrate takes no file: plait calibrate [--ranks N] [-o FILE]");
  OutFile out = {0};
  if (o->output && (outfile_check("-o", o->output, NULL, 0, d) || outfile_open(&out, o->output, d))) return -1;
  Probe p;
  Fit fit;
  if (measure(o, &p, d)) {
    if (o->output) outfile_abort(&out);
    return -1;
  }
  calibrate_fit(&p, &fit);
  calibrate_write(&p, &fit, o->output ? out.file : stdout);
  return o->output ? outfile_close(&out, d) : 0;
}

int cmd_calibrate(int argc, char **argv) {
  Options o;
  Diag d;
  if (options_parse(argc, argv, 2, calibrate_flags, 1, &o, &d) == 0 && run(&o, &d) == 0) return 0;
  fprintf(stderr, "plait: %s\n", d.msg);
  return 1;
}
