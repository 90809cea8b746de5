/* cmd_check.c: `plait check`: reads a schedule (text or CSV) or generates a named one, lowers it
 * when it is compute-only, validates it, simulates it (unit costs, or a model's costs with
 * --model), and prints the bubble and the peaks; or reads a trace (.json) and measures and draws
 * it; or sets a planned trace beside a measured one (two .json files). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "escape.h"
#include "options.h"
#include "outfile.h"
#include "plan/plan.h"
#include "plan/trace_compare.h"

static const char *const check_flags[] = {"--unit-costs",
                                          "--pp",
                                          "--vpp",
                                          "--dp",
                                          "--mbs",
                                          "--gbs",
                                          "--tp",
                                          "--set",
                                          "--machine",
                                          "--model",
                                          "--sequence-parallel",
                                          "--recompute",
                                          "--grad-reduce",
                                          "--format",
                                          "-o",
                                          NULL};

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && strcmp(s + n - k, tail) == 0;
}

static int is_named(const char *name) {
  return strcmp(name, "gpipe") == 0 || strcmp(name, "1f1b") == 0 ||
         strcmp(name, "interleaved") == 0;
}

static int layout_given(const Parallel *p) {
  return p->pp != UNSET || p->vpp != UNSET || p->dp != UNSET || p->mbs != UNSET || p->gbs != UNSET;
}

/* A named schedule, or a file: a file checked against the layout flags when any are given. */
static int load(const Options *o, Schedule *s, Diag *d) {
  if (!is_named(o->file) && !layout_given(&o->parallel))
    return schedule_generate(o->file, 0, 0, 0, s, d);
  Parallel p = o->parallel;
  parallel_defaults(&p);
  if (parallel_check(&p, d)) return -1;
  return schedule_generate(o->file, p.pp, p.vpp, parallel_microbatches(&p), s, d);
}

static void print_report(const Options *o, const Schedule *s, const Timeline *t, FILE *f) {
  int actions = 0;
  const char *unit = t->unit ? "units" : "s";
  for (int r = 0; r < s->pp; r++) actions += s->rank[r].count;
  escape_write(ESC_TEXT, o->file, f);
  fprintf(f, ": valid schedule: %d ranks, %d stage%s per rank, %d microbatches, %d actions\n",
          s->pp, s->vpp, s->vpp > 1 ? "s" : "", s->microbatches, actions);
  fprintf(f, "bubble fraction: %.6g (flush at %g, ideal %g %s; %s)\n", t->bubble_fraction, t->flush,
          t->ideal, unit,
          ends_with(o->file, ".json") ? "measured in the trace"
          : t->unit ? "unit costs: forward 1, backward 2 per stage, communication free"
                    : "costs of the model on the machine");
  fprintf(f, "iteration time: %g %s\n", t->iteration, unit);
  if (s->vpp == 1) fprintf(f, "peak in-flight microbatches:\n");
  else fprintf(f, "peak in-flight microbatches (chunk passes / vpp %d):\n", s->vpp);
  for (int r = 0; r < s->pp; r++) {
    if (s->vpp == 1) fprintf(f, "  rank %d: %d\n", r, t->peak_inflight[r]);
    else
      fprintf(f, "  rank %d: %g (%d chunk passes)\n", r, t->peak_inflight_microbatches[r],
              t->peak_inflight[r]);
  }
}

static int write_output(const Options *o, const Schedule *s, const Timeline *t, Diag *d) {
  const char *format = o->format ? o->format : "report";
  if (strcmp(format, "report") && strcmp(format, "text") && strcmp(format, "csv") &&
      strcmp(format, "trace") && strcmp(format, "svg"))
    return diag(d, "unknown format '%s'; use --format report, text, csv, trace or svg", format);
  const char *inputs[] = {o->file, o->model};
  OutFile out = {0};
  if (o->output &&
      (outfile_check("-o", o->output, inputs, 2, d) || outfile_open(&out, o->output, d)))
    return -1;
  FILE *f = o->output ? out.file : stdout;
  if (strcmp(format, "report") == 0) print_report(o, s, t, f);
  else if (strcmp(format, "text") == 0) schedule_write_text(s, f, 0);
  else if (strcmp(format, "csv") == 0) schedule_csv_write(s, f, 0);
  else if (strcmp(format, "trace") == 0) timeline_trace_write(s, t, f);
  else timeline_svg_write(s, t, f);
  return o->output ? outfile_close(&out, d) : 0;
}

/* The costs of --model under the schedule's layout (the flags give the rest: --tp, --set,
 * --machine). */
static int model_costs(const Options *o, const Schedule *s, Costs *costs, Diag *d) {
  Options plan_options = *o;
  plan_options.file = o->model;
  plan_options.print = NULL;
  plan_options.parallel.pp = s->pp, plan_options.parallel.vpp = s->vpp;
  if (plan_options.parallel.gbs == UNSET) {
    int mbs = o->parallel.mbs == UNSET ? 1 : o->parallel.mbs,
        dp = o->parallel.dp == UNSET ? 1 : o->parallel.dp;
    plan_options.parallel.gbs = s->microbatches * mbs * dp;
  }
  Plan p;
  int status = plan_build(&plan_options, &p, stdout, d);
  if (status == 0) plan_costs(&p, costs, 0);
  plan_free(&p);
  return status;
}

/* An invalid schedule's message and neighbourhood on stdout, the file's name and lines shown as
 * text. */
static void print_invalid(const char *file, const ScheduleFault *fault) {
  escape_write(ESC_TEXT, file, stdout);
  printf(": invalid schedule: ");
  escape_write(ESC_TEXT, fault->message, stdout);
  printf("\n");
  for (const char *line = fault->context; *line;) {
    size_t n = strcspn(line, "\n");
    char text[sizeof fault->context];
    snprintf(text, sizeof text, "%.*s", (int)n, line);
    escape_write(ESC_TEXT, text, stdout);
    if (line[n] == '\n') printf("\n");
    line += n + (line[n] == '\n');
  }
  printf("\n");
}

/* Validates, then simulates and writes; an invalid schedule shows its neighbourhood on stdout. */
static int check(const Options *o, Schedule *s, Diag *d) {
  ScheduleFault fault;
  Costs costs;
  Timeline t;
  lower_schedule(s, o->parallel.grad_reduce_after == 1 ? LOWER_REDUCE_AFTER : 0);
  if (validate_schedule(s, &fault)) {
    print_invalid(o->file, &fault);
    return diag(d, "%s: %s", o->file, fault.message);
  }
  if (o->model && !o->unit_costs) {
    if (model_costs(o, s, &costs, d)) return -1;
  } else {
    simulate_costs_unit(&costs, s->stages);
  }
  int status = simulate_schedule(s, &costs, &t, d);
  simulate_costs_free(&costs);
  if (status) return -1;
  status = write_output(o, s, &t, d);
  simulate_timeline_free(&t);
  return status;
}

/* A trace: its actions are validated as a schedule's are; its timeline is what it measured (or
 * what the plan simulated), drawn or reported as is. */
static int check_trace(const Options *o, Diag *d) {
  Schedule s;
  Timeline t;
  ScheduleFault fault;
  if (trace_read(o->file, &s, &t, d)) return -1;
  int status = 0;
  if (validate_schedule(&s, &fault)) {
    print_invalid(o->file, &fault);
    status = diag(d, "%s: %s", o->file, fault.message);
  }
  if (status == 0) status = write_output(o, &s, &t, d);
  simulate_timeline_free(&t);
  schedule_free(&s);
  return status;
}

int cmd_check(int argc, char **argv) {
  Options o;
  Diag d;
  Schedule s;
  int status = options_parse(argc, argv, 2, check_flags, 2, &o, &d);
  if (!status && !o.file)
    status = diag(&d,
                  "check needs a schedule: plait check FILE (text or .csv), or plait check 1f1b "
                  "--pp 4 --gbs 8");
  if (!status && o.second && !(ends_with(o.file, ".json") && ends_with(o.second, ".json")))
    status = diag(
        &d,
        "check takes two files only as traces to compare: plait check PLANNED.json MEASURED.json");
  if (!status && o.second) status = trace_compare(o.file, o.second, stdout, &d);
  else if (!status && ends_with(o.file, ".json")) status = check_trace(&o, &d);
  else if (!status && !(status = load(&o, &s, &d))) {
    status = check(&o, &s, &d);
    schedule_free(&s);
  }
  if (status) diag_print(d.msg);
  return status ? 1 : 0;
}
