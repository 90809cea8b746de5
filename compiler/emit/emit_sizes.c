/* emit_sizes.c: the model's dims as named constants at the top of model.c (B, T, C, V and the
 * others by their names) and sizes written as products of them, B*T*C, as llm.c writes them. */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "emit/emit.h"

/* Uppercase words a dim's constant must not be: model.c's own constants and the C library's macros
 * without an underscore; names with these prefixes are model.c's or the runtime's too. */
static const char *const reserved_words[] = {
    "TP",     "NULL",    "EOF",    "NAN",    "INFINITY", "BUFSIZ",  "EDOM",    "ERANGE",
    "EILSEQ", "SIGABRT", "SIGFPE", "SIGILL", "SIGINT",   "SIGSEGV", "SIGTERM", NULL};
static const char *const reserved_prefixes[] = {
    "P_",  "L_",    "C_",    "ACT_",  "ATTENTION_", "BLOCK_", "DIM_",  "EMBED_",
    "EW_", "GEMM_", "HEAD_", "INIT_", "IO_",        "ROPE_",  "XENT_", NULL};

static int reserved_constant(const char *name) {
  for (int i = 0; reserved_words[i]; i++)
    if (strcmp(name, reserved_words[i]) == 0) return 1;
  for (int i = 0; reserved_prefixes[i]; i++)
    if (strncmp(name, reserved_prefixes[i], strlen(reserved_prefixes[i])) == 0) return 1;
  return 0;
}

/* "ffn" -> "FFN"; 0 when the name is not a lowercase C identifier (config-key style: "qdim",
 * "head_dim"). */
static int upper_name(const char *name, char *buf, int len) {
  int n = 0;
  if (!islower((unsigned char)name[0])) return 0;
  for (const char *c = name; *c; c++) {
    if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_') || n >= len - 1)
      return 0;
    buf[n++] = (char)toupper((unsigned char)*c);
  }
  buf[n] = 0;
  return 1;
}

static int taken_by_earlier(char (*names)[EMIT_DIM_CHARS], int upto, const char *name) {
  for (int d = 0; d < upto; d++)
    if (strcmp(names[d], name) == 0) return 1;
  return 0;
}

/* The vocabulary is padded (to a multiple of 128, say): its dim is Vp, and V the tokens there are.
 */
static int padded_vocab(const Model *m) {
  return m->vocab_dim >= 0 && m->dims[m->vocab_dim].unpadded < m->dims[m->vocab_dim].size;
}

/* The constant of dim d, or "" where it has none (a dim named by its number, a size past int). */
static void dim_constant(const Model *m, int d, char (*names)[EMIT_DIM_CHARS]) {
  char upper[EMIT_DIM_CHARS - 8], *name = names[d];
  name[0] = 0;
  if (m->dims[d].size > INT_MAX) return;
  if (m->dims[d].worst) /* a variable of the stage function, set from the exchanged counts */
    snprintf(name, EMIT_DIM_CHARS, "n_%s", m->dims[d].name);
  else if (d == m->batch_dim)
    snprintf(name, EMIT_DIM_CHARS, "B");
  else if (d == m->seq_dim)
    snprintf(name, EMIT_DIM_CHARS, "T");
  else if (d == m->hidden_dim)
    snprintf(name, EMIT_DIM_CHARS, "C");
  else if (d == m->vocab_dim)
    snprintf(name, EMIT_DIM_CHARS, "%s", padded_vocab(m) ? "Vp" : "V");
  else if (!upper_name(m->dims[d].name, upper, sizeof upper))
    return;
  else if (reserved_constant(upper) || strlen(upper) == 1)
    snprintf(name, EMIT_DIM_CHARS, "DIM_%s", upper);
  else
    snprintf(name, EMIT_DIM_CHARS, "%s", upper);
  if (taken_by_earlier(names, d, name)) name[0] = 0;
}

char (*emit_dim_constants(const Model *m))[EMIT_DIM_CHARS] {
  char(*names)[EMIT_DIM_CHARS] = calloc((size_t)m->ndims + 1, sizeof *names);
  for (int d = 0; d < m->ndims; d++) dim_constant(m, d, names);
  return names;
}

void emit_dims_enum(const Emission *e, FILE *f) {
  const Model *m = &e->plan->model;
  fprintf(
      f,
      "/* The model's dims, whole (a tensor split over TP ranks holds its dim / TP). */\nenum {");
  int n = 0;
  for (int d = 0; d < m->ndims; d++) {
    if (!e->dim_constant[d][0] || m->dims[d].worst) continue;
    fprintf(f, "%s%s = %lld",
            n == 0       ? "\n  "
            : n % 6 == 0 ? ",\n  "
                         : ", ",
            e->dim_constant[d], (long long)m->dims[d].size);
    n++;
  }
  if (padded_vocab(m) && e->dim_constant[m->vocab_dim][0])
    fprintf(f, "%sV = %lld", n++ ? ", " : "\n  ", (long long)m->dims[m->vocab_dim].unpadded);
  if (e->plan->par.tp > 1) fprintf(f, "%sTP = %d", n++ ? ", " : "\n  ", e->plan->par.tp);
  fprintf(f, "\n};\n\n");
}

/* Dim d by name: its constant, or the sum of its parts' ("qdim+kvdim+kvdim" -> (QDIM+KVDIM+KVDIM))
 * when each part is a named dim and they add up to it; 0 when it has no name. */
static int dim_text(const Emission *e, int d, char *buf, int len) {
  const Model *m = &e->plan->model;
  if (e->dim_constant[d][0]) return snprintf(buf, len, "%s", e->dim_constant[d]) < len;
  if (!strchr(m->dims[d].name, '+')) return 0;
  char parts[NAME_LEN];
  snprintf(parts, sizeof parts, "%s", m->dims[d].name);
  int used = snprintf(buf, len, "(");
  int64_t sum = 0;
  for (char *save, *part = strtok_r(parts, "+", &save); part; part = strtok_r(NULL, "+", &save)) {
    int p = model_find_dim(m, part);
    if (p < 0 || !e->dim_constant[p][0] || used >= len) return 0;
    sum += m->dims[p].size;
    used += snprintf(buf + used, len - used, "%s%s", used > 1 ? "+" : "", e->dim_constant[p]);
  }
  return sum == m->dims[d].size && snprintf(buf + used, len - used, ")") < len - used;
}

/* Axis a of t as one rank holds it: "FFN", "FFN/TP" where split ("KVDIM/(TP/2)" where each piece
 * lies on 2 ranks), or its number where unnamed. */
static void axis_text(const Emission *e, const Tensor *t, int a, char *buf, int len) {
  char name[EMIT_SIZE_CHARS];
  int split = t->layout.kind == LAYOUT_S && t->layout.axis == a;
  if (!dim_text(e, t->dims[a], name, sizeof name))
    snprintf(buf, len, "%lld", (long long)emit_local_dim(e->plan, t, a));
  else if (split && layout_copies(t->layout) > 1) /* pieces held by several ranks each */
    snprintf(buf, len, "%.400s/(TP/%d)", name, layout_copies(t->layout));
  else if (split)
    snprintf(buf, len, "%.400s/TP", name);
  else
    snprintf(buf, len, "%s", name);
}

void emit_size(const Emission *e, const Tensor *t, int first, int last, char *buf, int len) {
  int64_t value = 1;
  int named = 0, used = 0;
  for (int a = first; a < last; a++) {
    char axis[EMIT_SIZE_CHARS];
    axis_text(e, t, a, axis, sizeof axis);
    named |= !isdigit((unsigned char)axis[0]);
    value *= emit_local_dim(e->plan, t, a);
    /* a split axis in parentheses where more factors follow: B*(FFN/TP) */
    int wrap = strchr(axis, '/') && last - first > 1;
    used += snprintf(buf + used, used < len ? len - used : 0, "%s%s%s%s", used ? "*" : "",
                     wrap ? "(" : "", axis, wrap ? ")" : "");
  }
  if (!named || used >= len)
    snprintf(buf, len, "%lld", (long long)value);
  else if (value > INT_MAX) { /* the product in 64 bits: the constants are ints */
    char product[EMIT_SIZE_CHARS];
    snprintf(product, sizeof product, "%s", buf);
    snprintf(buf, len, "(int64_t)%s", product);
  }
}

void emit_vocab(const Emission *e, int64_t tokens, char *buf, int len) {
  const Model *m = &e->plan->model;
  int named = m->vocab_dim >= 0 && e->dim_constant[m->vocab_dim][0] &&
              m->dims[m->vocab_dim].unpadded == tokens;
  if (named)
    snprintf(buf, len, "V");
  else
    snprintf(buf, len, "%lld", (long long)tokens);
}

void emit_part_size(const Emission *e, const Tensor *whole, int part, int64_t size, char *buf,
                    int len) {
  const Model *m = &e->plan->model;
  char parts[NAME_LEN];
  snprintf(parts, sizeof parts, "%s", m->dims[whole->dims[whole->ndim - 1]].name);
  char *save, *name = strtok_r(parts, "+", &save);
  for (int i = 0; i < part && name; i++) name = strtok_r(NULL, "+", &save);
  int d = name ? model_find_dim(m, name) : -1;
  if (d >= 0 && e->dim_constant[d][0] && m->dims[d].size == size)
    snprintf(buf, len, "%s", e->dim_constant[d]);
  else
    snprintf(buf, len, "%lld", (long long)size);
}
