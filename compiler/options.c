/* options.c: parsing the command line into Options, with one clear line for anything unknown. */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front/layout_fields.h"

static int allowed(const char *const *flags, const char *flag) {
  for (int i = 0; flags[i]; i++)
    if (strcmp(flags[i], flag) == 0 ||
        (strcmp(flags[i], OPTIONS_LAYOUT) == 0 && layout_field_by_flag(flag)))
      return 1;
  return 0;
}

static int positive(const char *flag, const char *text, int *out, Diag *d) {
  *out = text ? layout_field_size(text) : -1;
  return *out < 0 ? diag(d, "%s takes a positive integer, not '%s'", flag, text ? text : "") : 0;
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

/* --set key=value [key=value ...]: takes every following word that holds '=' and is not a flag. */
static int parse_sets(int argc, char **argv, int *i, Options *o, Diag *d) {
  int start = *i;
  while (*i + 1 < argc && argv[*i + 1][0] != '-' && strchr(argv[*i + 1], '=')) {
    const char *kv = argv[++*i];
    const char *eq = strchr(kv, '=');
    if (o->nsets == MAX_OVERRIDES) return diag(d, "--set: at most %d keys", MAX_OVERRIDES);
    Override *ov = &o->sets[o->nsets++];
    if (eq - kv >= NAME_LEN || strlen(eq + 1) >= NAME_LEN || eq == kv)
      return diag(d, "--set %s: malformed key=value", kv);
    snprintf(ov->key, sizeof ov->key, "%.*s", (int)(eq - kv), kv);
    snprintf(ov->value, sizeof ov->value, "%s", eq + 1);
    ov->used = 0;
  }
  return *i == start ? diag(d, "--set takes key=value pairs, as in --set layers=24 hidden=2048")
                     : 0;
}

/* A layout flag: a switch alone, any other with its value. */
static int parse_layout_flag(const LayoutField *field, const char *value, int *i, Parallel *p,
                             Diag *d) {
  if (field->kind == FIELD_SWITCH) return LAYOUT_INT(field, p) = 1, 0;
  (*i)++;
  if (field->kind == FIELD_SIZE) return positive(field->flag, value, &LAYOUT_INT(field, p), d);
  LayoutFieldSet set = value ? layout_field_set(field, value, p) : FIELD_BAD_VALUE;
  char words[128];
  if (set == FIELD_SET) return 0;
  if (field->kind == FIELD_NAME)
    return diag(d, value ? "%s: value too long" : "%s takes a value", field->flag);
  return diag(d, "%s takes %s, not '%s'", field->flag,
              layout_field_words(field, "", "", words, sizeof words), value ? value : "");
}

static int parse_flag(int argc, char **argv, int *i, Options *o, Diag *d) {
  const char *flag = argv[*i], *value = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (strcmp(flag, "--set") == 0) return parse_sets(argc, argv, i, o, d);
  const LayoutField *field = layout_field_by_flag(flag);
  if (field) return parse_layout_flag(field, value, i, &o->parallel, d);
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

int options_parse(int argc, char **argv, int first, const char *const *flags, int files, Options *o,
                  Diag *d) {
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
      return diag(d, "unexpected argument '%s' (%s)", arg,
                  files == 2 ? "two files at most" : "one file only");
    }
  }
  return 0;
}
