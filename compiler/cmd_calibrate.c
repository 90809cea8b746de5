/* cmd_calibrate.c: `plait calibrate`: measures this machine (build/plait-probe, through the
 * runtime, under a time limit) and writes the machine file plait plan --machine FILE reads. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cost/calibrate.h"
#include "commands.h"
#include "options.h"
#include "outfile.h"

static const char *const calibrate_flags[] = {"--ranks", "--launcher", "--time-limit", "-o", NULL};

/* The probe's seconds unless --time-limit says otherwise; ranks a core at most (past them a rank's
 * share of the machine measures nothing a plan could use, and starting them exhausts its threads).
 */
enum { PROBE_SECONDS = 600, RANKS_PER_CORE = 8 };

static volatile sig_atomic_t probe_group, probe_timed_out;

/* SIGALRM: the probe ran out of time; its process group (the launcher and what it started) is
 * ended. */
static void end_probe(int sig) {
  (void)sig;
  probe_timed_out = 1;
  if (probe_group > 0) kill(-(pid_t)probe_group, SIGKILL);
}

/* Starts `sh -c command` in a process group of its own, its stdout the stream returned. */
static FILE *start_probe(const char *command, pid_t *pid) {
  int out[2];
  if (pipe(out) != 0) return NULL;
  *pid = fork();
  if (*pid == 0) {
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl("/bin/sh", "sh", "-c", command, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  if (*pid < 0) return close(out[0]), NULL;
  setpgid(*pid, *pid);
  return fdopen(out[0], "r");
}

/* Waits for the probe; its exit status as pclose gives it. */
static int wait_probe(FILE *f, pid_t pid) {
  fclose(f);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  alarm(0);
  probe_group = 0;
  return status;
}

/* The first line the probe wrote to `errors` (its own one-line reason), or "" when it wrote
 * none. */
static void first_line(FILE *errors, char *line, int len) {
  line[0] = 0;
  rewind(errors);
  if (!fgets(line, len, errors)) line[0] = 0;
  line[strcspn(line, "\n")] = 0;
}

/* Runs the probe for `ranks` ranks: threads of one process, or the processes `launcher` starts
 * (the ranks of an MPI job, as `mpirun -np N DIR/train` starts them), and reads what it printed;
 * a probe that fails is reported by its own first line on stderr. */
static int measure(const Options *o, int ranks, Probe *p, Diag *d) {
  char home[PATH_MAX], probe[PATH_MAX + 32], command[2 * PATH_MAX + 64],
      errors_path[] = "/tmp/plait-probe-XXXXXX";
  if (plait_home(home, sizeof home, d)) return -1;
  snprintf(probe, sizeof probe, "%s/build/plait-probe", home);
  if (access(probe, X_OK) != 0)
    return diag(d, "the probe %s is missing; run make in %s", probe, home);
  if (o->launcher && strlen(o->launcher) > PATH_MAX) return diag(d, "--launcher: command too long");
  int fd = mkstemp(errors_path);
  if (fd < 0) return diag(d, "cannot create a temporary file in /tmp for the probe's messages");
  FILE *errors = fdopen(fd, "w+");
  unlink(errors_path);
  snprintf(command, sizeof command, "%s%s'%s' %d 2>/dev/fd/%d", o->launcher ? o->launcher : "",
           o->launcher ? " " : "", probe, ranks, fd);
  pid_t pid;
  FILE *f = start_probe(command, &pid);
  if (!f) return fclose(errors), diag(d, "cannot run %s", probe);
  int seconds = o->time_limit ? o->time_limit : PROBE_SECONDS;
  probe_group = pid, probe_timed_out = 0;
  signal(SIGALRM, end_probe);
  alarm((unsigned)seconds);
  Diag read_failure;
  int status = calibrate_read(f, p, &read_failure);
  int exit_status = wait_probe(f, pid);
  if (probe_timed_out)
    return fclose(errors), diag(d, "the probe ran more than %d s and was stopped: %s did not end; "
                                "check that it runs the probe, or give calibrate a --time-limit",
                                seconds, o->launcher ? "the launcher" : "it");
  char why[512];
  first_line(errors, why, sizeof why);
  fclose(errors);
  if (exit_status != 0 && why[0])
    return diag(d, "the probe failed: %s", strncmp(why, "plait: ", 7) == 0 ? why + 7 : why);
  if (status) return *d = read_failure, -1;
  if (exit_status != 0)
    return diag(d, "%s failed (status %d); run it by hand to see why", command, exit_status);
  return 0;
}

static int run(const Options *o, Diag *d) {
  if (o->file)
    return diag(d,
                "calibrate takes no file: plait calibrate [--ranks N] [--launcher CMD] [-o FILE]");
  if (o->launcher && !o->ranks)
    return diag(
        d, "--launcher needs --ranks N: the ranks it starts (as in --launcher 'mpirun -np N')");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int ranks = o->ranks ? o->ranks : (int)(cores > 0 ? cores : 1);
  long most = RANKS_PER_CORE * (cores > 0 ? cores : 1);
  if (ranks > most)
    return diag(d, "--ranks %d is more than this machine runs (%d ranks a core, %ld cores); give "
                "--ranks %ld or fewer", ranks, RANKS_PER_CORE, cores, most);
  OutFile out = {0};
  if (o->output && (outfile_check("-o", o->output, NULL, 0, d) || outfile_open(&out, o->output, d)))
    return -1;
  Probe p;
  Fit fit;
  if (measure(o, ranks, &p, d)) {
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
  diag_print(d.msg);
  return 1;
}
