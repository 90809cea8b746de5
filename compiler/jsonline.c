/* jsonline.c: one JSON object a line, read by the bounded JSON reader (text/json.h), keeping the
 * numbers of named members. */
#include "jsonline.h"

#include <stdio.h>
#include <string.h>

#include "text/json.h"

/* The root object's last member named key (when a key repeats, the last counts); -1 when none. */
static int32_t last_member(const Json *j, const char *key) {
  size_t length = strlen(key);
  int32_t found = -1;
  for (int32_t m = j->nodes[0].first; m >= 0; m = j->nodes[m].next)
    if (j->nodes[m].key_len == length && memcmp(json_key(j, m), key, length) == 0) found = m;
  return found;
}

static int take_field(const Json *j, JsonField *field, char *why, size_t size) {
  int32_t m = last_member(j, field->key);
  if (m < 0) return 0;
  if (j->nodes[m].kind != JSON_NUMBER) {
    snprintf(why, size, "\"%s\" is %s, not a number", field->key,
             json_kind_name(j->nodes[m].kind));
    return -1;
  }
  field->value = j->nodes[m].number;
  field->found = 1;
  return 0;
}

int jsonline_read(const char *text, size_t n, JsonField *fields, int nfields, char *why,
                  size_t size) {
  Json j;
  for (int i = 0; i < nfields; i++) fields[i].found = 0;
  if (json_parse(&j, text, n, JSONLINE_MAX_DEPTH, why, size)) return -1;
  int rc = 0;
  if (j.nodes[0].kind != JSON_OBJECT) {
    snprintf(why, size, "the line is %s: each line is one JSON object",
             json_kind_name(j.nodes[0].kind));
    rc = -1;
  }
  for (int i = 0; rc == 0 && i < nfields; i++) rc = take_field(&j, &fields[i], why, size);
  json_free(&j);
  return rc;
}
