/* json.h: a bounded JSON reader for files from strangers (tokenizer files): the whole text is read
 * into a tree of nodes whose strings are decoded into one pool; the nesting depth is bounded and
 * every failure is one message naming the byte where the text stops being JSON. */
#ifndef PLAIT_TEXT_JSON_H
#define PLAIT_TEXT_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonKind;

/* One value. A member of an object carries its key; children are chained through next. */
typedef struct {
  JsonKind kind;
  int boolean;
  double number;
  uint32_t str, str_len; /* a string's bytes in the pool (UTF-8, NUL-terminated there) */
  uint32_t key, key_len; /* the key of an object's member */
  int32_t first, next;   /* the first child, the next sibling; -1 when none */
  int32_t count;         /* children of an array or object */
} JsonNode;

typedef struct {
  JsonNode *nodes;
  int32_t count, capacity;
  char *pool; /* decoded strings; owned */
  size_t pool_len;
} Json;

/* Parses text[0..len) (one value, then only white space) with arrays and objects nested at most
 * max_depth deep; node 0 is the root. Returns 0, or -1 with why ("not JSON at byte 12: ...").
 * A lone surrogate escape, a control character in a string or invalid UTF-8 is refused. */
int json_parse(Json *j, const char *text, size_t len, int max_depth, char *why, size_t size);
void json_free(Json *j);

/* The member `key` of object node obj; -1 when obj is not an object or has no such member. */
int32_t json_member(const Json *j, int32_t obj, const char *key);
/* A string node's bytes (NUL-terminated; the length may count NULs inside). */
const char *json_text(const Json *j, int32_t node);
const char *json_key(const Json *j, int32_t node);
/* What a node is, for messages: "a string", "an object", ... */
const char *json_kind_name(JsonKind kind);

#endif
