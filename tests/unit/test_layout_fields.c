/* test_layout_fields.c: every field of the layout's table, given a value other than its default,
 * reaches every consumer with no code of its own: the flags of plan, build and tune, the model
 * file's parallel table, the flags over the model file, plan's JSON and text, and tune's flags. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "commands.h"
#include "front/host.h"
#include "front/layout_fields.h"
#include "options.h"
#include "plan/plan.h"
#include "plan/tune.h"

/* A value of the field that is not its default, spelled as its flag takes it. */
static const char *other_value(const LayoutField *field) {
  if (field->kind == FIELD_SIZE) return "3";
  if (!field->words[0]) return "from-test";
  return field->standard && strcmp(field->words[0], field->standard) == 0 ? field->words[1]
                                                                          : field->words[0];
}

/* Whether the field of p holds other_value. */
static int holds_other(const LayoutField *field, const Parallel *p) {
  char value[LAYOUT_VALUE_LEN];
  return strcmp(layout_field_value(field, p, NULL, value, sizeof value), other_value(field)) == 0;
}

/* The defaults, with the field at other_value. */
static Parallel layout_with_other(const LayoutField *field) {
  Parallel p;
  parallel_unset(&p);
  parallel_defaults(&p);
  layout_field_set(field, other_value(field), &p);
  return p;
}

static void flags_of(const char *command, const char *const *flags) {
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *field = &layout_fields[i];
    char *argv[] = {
        "plait", (char *)command, "model.lua", (char *)field->flag, (char *)other_value(field),
        NULL};
    int argc = field->kind == FIELD_SWITCH ? 4 : 5;
    Options o;
    Diag d;
    int status = options_parse(argc, argv, 2, flags, 1, &o, &d);
    CHECK(status == 0, "%s %s %s: %s", command, field->flag, argv[4], d.msg);
    CHECK(status != 0 || holds_other(field, &o.parallel), "%s %s %s: the value did not arrive",
          command, field->flag, argv[4]);
  }
}

static void flags_of_plan_build_and_tune(void) {
  flags_of("plan", plan_flags);
  flags_of("build", build_flags);
  flags_of("tune", tune_flags);
}

/* parallel = { KEY = value } read as the model file's table is, and laid over by flags. */
static void model_file_and_flags_over_it(void) {
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *field = &layout_fields[i];
    char chunk[256];
    const char *quote = field->kind == FIELD_SIZE || field->kind == FIELD_SWITCH ? "" : "\"";
    snprintf(chunk, sizeof chunk, "return { parallel = { %s = %s%s%s } }", field->key, quote,
             field->kind == FIELD_SWITCH ? "true" : other_value(field), quote);
    lua_State *L = luaL_newstate();
    Parallel from_file, flags, merged;
    Diag d;
    int status = luaL_dostring(L, chunk) == LUA_OK
                     ? host_read_parallel(L, lua_gettop(L), &from_file, &d)
                     : -1;
    lua_close(L);
    CHECK(status == 0, "%s: %s", chunk, status ? d.msg : "");
    if (status) continue;
    CHECK(holds_other(field, &from_file), "%s: the value did not arrive", chunk);
    parallel_unset(&flags);
    merged = from_file;
    parallel_override(&merged, &flags);
    parallel_defaults(&merged);
    CHECK(holds_other(field, &merged), "%s: flags that give nothing replaced it", chunk);
    parallel_unset(&merged);
    parallel_defaults(&merged);
    flags = layout_with_other(field);
    parallel_override(&merged, &flags);
    CHECK(holds_other(field, &merged), "--%s over the defaults: the value did not arrive",
          field->key);
  }
}

/* What a writer of a layout prints for p, in buf. */
static const char *written(void (*write)(const Parallel *, FILE *), const Parallel *p, char *buf,
                           size_t len) {
  FILE *f = fmemopen(buf, len, "w");
  write(p, f);
  fclose(f);
  return buf;
}

static void tune_flags_of(const Parallel *p, FILE *f) {
  char flags[512];
  tune_layout_flags(p, flags, sizeof flags);
  fputs(flags, f);
}

static void plan_json_text_and_tune_flags(void) {
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *field = &layout_fields[i];
    Parallel p = layout_with_other(field);
    char out[4096], want[512], text_value[LAYOUT_VALUE_LEN];
    const char *value = other_value(field);
    if (field->kind == FIELD_SWITCH)
      snprintf(want, sizeof want, "\"%s\": true", field->key);
    else if (field->kind == FIELD_SIZE)
      snprintf(want, sizeof want, "\"%s\": %s", field->key, value);
    else
      snprintf(want, sizeof want, "\"%s\": \"%s\"", field->key, value);
    CHECK(strstr(written(plan_write_layout_json, &p, out, sizeof out), want), "JSON lacks %s: %s",
          want, out);
    snprintf(text_value, sizeof text_value, "%s",
             field->kind == FIELD_SWITCH ? field->words[1] : value);
    snprintf(want, sizeof want, field->text, text_value);
    CHECK(strstr(written(plan_write_layout_text, &p, out, sizeof out), want), "text lacks '%s': %s",
          want, out);
    if (field->tune == TUNE_HIDDEN) continue;
    snprintf(want, sizeof want, field->kind == FIELD_SWITCH ? "%s" : "%s %s", field->flag, value);
    CHECK(strstr(written(tune_flags_of, &p, out, sizeof out), want), "tune's flags lack '%s': %s",
          want, out);
  }
}

/* The pinned fields stay out of tune's flags at their default; the defaults are what the table
 * says. */
static void defaults(void) {
  Parallel p;
  parallel_unset(&p);
  parallel_defaults(&p);
  char flags[512], value[LAYOUT_VALUE_LEN];
  tune_layout_flags(&p, flags, sizeof flags);
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *field = &layout_fields[i];
    if (field->standard)
      CHECK(strcmp(layout_field_value(field, &p, NULL, value, sizeof value), field->standard) == 0,
            "%s defaults to %s, not %s", field->key, value, field->standard);
    if (field->tune == TUNE_PINNED)
      CHECK(!strstr(flags, field->flag), "tune's flags give %s: %s", field->flag, flags);
  }
  CHECK(p.gbs == p.mbs * p.dp && strcmp(p.schedule, "1f1b") == 0,
        "derived defaults: gbs %d, schedule %s", p.gbs, p.schedule);
}

int main(void) {
  RUN(flags_of_plan_build_and_tune);
  RUN(model_file_and_flags_over_it);
  RUN(plan_json_text_and_tune_flags);
  RUN(defaults);
  TEST_EXIT();
}
