/* options.c: parsing the command line into Options, with one clear line for anything unknown. */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int allowed(const char *const *flags, const char *flag) {
  for (int i = 0; flags[i]; i++)
    if (strcmp(flags[i], flag) == 0) return 1;
  return 0;
}

static int positive(const char *flag, const char *text, int *out, Diag *d) {
  char *end;
  long v = text ? strtol(text, &end, 10) : 0;
  if (!text || *end || v < 1 || v > 1 << 24) return diag(d, "%s takes a positive integer, not '%s'", flag, text ? text : "");
  *out = (int)v;
  return 0;
}

static int budget(const char *flag, const char *text, long long *out, Diag *d) {
  char *end;
  double v = text ? strtod(text, &end) : 0;
  if (!text || *end || v < 1 || v > 1e15 || v != (double)(long long)v)
    return diag(d, "%s takes a whole number of at least 1, not '%s'", flag, text ? text : "");
  *out = (long long)v;
  return 0;
}

/* --lua-memory MB: at most this machine's memory (more would overflow the byte count, and is never
 * there). */
static int memory_budget(const char *text, long long *out, Diag *d) {
  if (budget("--lua-memory", text, out, d)) return -1;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  long long most = 1LL << 30;
  if (pages > 0 && page > 0) most = (long long)((double)pages * (double)page / 1048576.0);
  if (*out <= most) return 0;
  return diag(d, "--lua-memory %s MB is more than this machine's memory (%lld MB); give at most "
              "%lld", text, most, most);
}

static int copy_text(const char *flag, const char *text, char *out, int len, Diag *d) {
  if (!text) return diag(d, "%s takes a value", flag);
  if ((int)strlen(text) >= len) return diag(d, "%s: value too long", flag);
  snprintf(out, len, "%s", text);
  return 0;
}

/* --set key=value [key=value ...]: takes every following word that holds '=' and is not a flag. */
static int parse_sets(int argc, char **argv, int *i, Options *o, Diag *d) {
  int start = *i;
  while (*i + 1 < argc && argv[*i + 1][0] != '-' && strchr(argv[*i + 1], '=')) {
    const char *kv = argv[++*i];
    const char *eq = strchr(kv, '=');
    if (o->nsets == MAX_OVERRIDES) return diag(d, "--set: at most %d keys", MAX_OVERRIDES);
    Override *ov = &o->sets[o->nsets++];
    if (eq - kv >= NAME_LEN || strlen(eq + 1) >= NAME_LEN || eq == kv) return diag(d, "--set %s: malformed key=value", kv);
    snprintf(ov->key, sizeof ov->key, "%.*s", (int)(eq - kv), kv);
    snprintf(ov->value, sizeof ov->value, "%s", eq + 1);
    ov->used = 0;
  }
  return *i == start ? diag(d, "--set takes key=value pairs, as in --set layers=24 hidden=2048") : 0;
}

static int parse_layout_flag(const char *flag, const char *value, Parallel *p, int *consumed, Diag *d) {
  *consumed = 1;
  if (strcmp(flag, "--tp") == 0) return positive(flag, value, &p->tp, d);
  if (strcmp(flag, "--pp") == 0) return positive(flag, value, &p->pp, d);
  if (strcmp(flag, "--vpp") == 0) return positive(flag, value, &p->vpp, d);
  if (strcmp(flag, "--dp") == 0) return positive(flag, value, &p->dp, d);
  if (strcmp(flag, "--mbs") == 0) return positive(flag, value, &p->mbs, d);
  if (strcmp(flag, "--gbs") == 0) return positive(flag, value, &p->gbs, d);
  if (strcmp(flag, "--schedule") == 0) return copy_text(flag, value, p->schedule, sizeof p->schedule, d);
  if (strcmp(flag, "--partition") == 0) return copy_text(flag, value, p->partition, sizeof p->partition, d);
  if (strcmp(flag, "--recompute") == 0) {
    if (!value || (strcmp(value, "full") != 0 && strcmp(value, "none") != 0))
      return diag(d, "--recompute takes none or full, not '%s'", value ? value : "");
    p->recompute = strcmp(value, "full") == 0;
    return 0;
  }
  if (strcmp(flag, "--grad-reduce") == 0) {
    if (!value || (strcmp(value, "overlap") != 0 && strcmp(value, "after") != 0))
      return diag(d, "--grad-reduce takes overlap or after, not '%s'", value ? value : "");
    p->grad_reduce_after = strcmp(value, "after") == 0;
    return 0;
  }
  *consumed = 0;
  if (strcmp(flag, "--sequence-parallel") == 0) { p->sequence_parallel = 1; return 0; }
  return diag(d, "internal: %s is not a layout flag", flag);
}

static int is_layout_flag(const char *flag) {
  static const char *const layout[] = {"--tp", "--pp", "--vpp", "--dp", "--mbs", "--gbs", "--schedule", "--recompute",
                                       "--sequence-parallel", "--partition", "--grad-reduce", NULL};
  return allowed(layout, flag);
}

static int parse_flag(int argc, char **argv, int *i, Options *o, Diag *d) {
  const char *flag = argv[*i], *value = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (strcmp(flag, "--set") == 0) return parse_sets(argc, argv, i, o, d);
  if (is_layout_flag(flag)) {
    int consumed;
    if (parse_layout_flag(flag, value, &o->parallel, &consumed, d)) return -1;
    *i += consumed;
    return 0;
  }
  if (strcmp(flag, "--lua-instructions") == 0)
    return (*i)++, budget(flag, value, &o->lua_instructions, d);
  if (strcmp(flag, "--lua-memory") == 0) return (*i)++, memory_budget(value, &o->lua_memory_mb, d);
  if (strcmp(flag, "--unit-costs") == 0) { o->unit_costs = 1; return 0; }
  if (strcmp(flag, "--separate-gemms") == 0) { o->separate_gemms = 1; return 0; }
  if (strcmp(flag, "--gpus") == 0) return (*i)++, positive(flag, value, &o->gpus, d);
  if (strcmp(flag, "--ranks") == 0) return (*i)++, positive(flag, value, &o->ranks, d);
  if (strcmp(flag, "--time-limit") == 0) return (*i)++, positive(flag, value, &o->time_limit, d);
  if (strcmp(flag, "--emit-only") == 0) { o->emit_only = 1; return 0; }
  if (strcmp(flag, "--double") == 0) { o->double_precision = 1; return 0; }
  if (strcmp(flag, "--force") == 0) { o->force = 1; return 0; }
  const char **text = strcmp(flag, "--format") == 0 ? &o->format
                      : strcmp(flag, "-o") == 0 ? &o->output
                      : strcmp(flag, "--print") == 0 ? &o->print
                      : strcmp(flag, "--machine") == 0 ? &o->machine
                      : strcmp(flag, "--backend") == 0 ? &o->backend
                      : strcmp(flag, "--model") == 0 ? &o->model
                      : strcmp(flag, "--dtype") == 0 ? &o->dtype
                      : strcmp(flag, "--shard-size") == 0 ? &o->shard_size
                      : strcmp(flag, "--launcher") == 0 ? &o->launcher : NULL;
  if (!text) return diag(d, "internal: no handler for %s", flag);
  if (!value) return diag(d, "%s takes a value", flag);
  *text = value;
  (*i)++;
  return 0;
}

int options_parse(int argc, char **argv, int first, const char *const *flags, int files, Options *o, Diag *d) {
  memset(o, 0, sizeof *o);
  parallel_unset(&o->parallel);
  for (int i = first; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] == '-' && arg[1]) {
      if (!allowed(flags, arg)) return diag(d, "unknown flag %s; see plait help", arg);
      if (parse_flag(argc, argv, &i, o, d)) return -1;
    } else if (!o->file) {
      o->file = arg;
    } else if (files == 2 && !o->second) {
      o->second = arg;
    } else {
      return diag(d, "unexpected argument '%s' (%s)", arg, files == 2 ? "two files at most" : "one file only");
    }
  }
  return 0;
}
