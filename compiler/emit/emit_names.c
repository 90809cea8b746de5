/* emit_names.c: how the stage functions spell each tensor: parameters and constants as the
 * runtime's tables, the functions' arguments as such, and every other buffer after the model's
 * scopes (the parameters' names less their last part: "attn.q.weight" is of scope attn.q): attn_q,
 * ln_1_rstd, d_mlp_fc. docs/generated-code.md states the rules. */
#include <ctype.h>
#include <string.h>

#include "emit/emit.h"

/* ---- the runtime's tables -------------------------------------------------------------------- */

/* "attn.q.weight" -> "ATTN_Q_WEIGHT" */
static void constant_name(const char *prefix, const char *name, char *buf, int len) {
  int n = snprintf(buf, len, "%s", prefix);
  for (const char *c = name; *c && n < len - 1; c++)
    buf[n++] = isalnum((unsigned char)*c) ? (char)toupper((unsigned char)*c) : '_';
  buf[n] = 0;
}

/* The enum constant of constant c: C_ and its name. */
void emit_constant_enum(const Model *m, int c, char *buf, int len) {
  constant_name("C_", m->constants[c].name, buf, len);
}

/* The enum constant of parameter p: P_ for model scope, L_ for a layer's. */
void emit_param_constant(const Model *m, int p, char *buf, int len) {
  constant_name(m->params[p].scope == SCOPE_BLOCK ? "L_" : "P_", m->params[p].name, buf, len);
}

/* Parameters are w[...] (this layer's) or r->model_w[...]; their gradients g[...] or
 * r->model_g[...]. */
static void param_name(const Model *m, const Tensor *x, char *buf, int len) {
  char constant[96];
  emit_param_constant(m, x->param, constant, sizeof constant);
  int layer = m->params[x->param].scope == SCOPE_BLOCK, grad = x->kind == T_PARAM_GRAD;
  snprintf(buf, len, "%s[%s]", layer ? (grad ? "g" : "w") : (grad ? "r->model_g" : "r->model_w"),
           constant);
}

/* Constants are r->constants[C_...], uploaded when the program starts. */
static void constant_buffer_name(const Model *m, const Tensor *x, char *buf, int len) {
  char constant[96];
  emit_constant_enum(m, x->param, constant, sizeof constant);
  snprintf(buf, len, "r->constants[%s]", constant);
}

/* The spelling of a tensor the runtime or the function's signature gives; 0 for a buffer to name.
 */
static int given_name(const Emission *e, int s, int t, char *buf, int len) {
  const Tensor *x = &e->stage[s]->tensors[t];
  switch (e->memory[s].region[t]) {
  case REGION_PARAM:
  case REGION_PARAM_GRAD: param_name(&e->plan->model, x, buf, len); return 1;
  case REGION_CONST: constant_buffer_name(&e->plan->model, x, buf, len); return 1;
  case REGION_GRAD_OUT: snprintf(buf, len, "dy"); return 1;
  case REGION_GRAD_IN: snprintf(buf, len, "dx"); return 1;
  case REGION_INPUT:
  case REGION_DATA: snprintf(buf, len, "%s", x->name); return 1;
  case REGION_SAVED:
  case REGION_SCRATCH:
  case REGION_LOSS: return 0;
  }
  return 0;
}

/* ---- scopes ---------------------------------------------------------------------------------- */

typedef struct {
  const Emission *e;
  int stage;
  const Graph *g;
  char (*scope)[EMIT_NAME_CHARS]; /* per tensor: the scope of the node that made it, "" for none */
  char (*name)[EMIT_NAME_CHARS];
} Namer;

/* "attn.q.weight" -> "attn.q"; a name without a dot is its own scope ("wte"). */
static void param_scope(const char *name, char *buf, int len) {
  const char *dot = strrchr(name, '.');
  snprintf(buf, len, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
}

/* The longest run of whole dotted parts a and b start with: "attn.q", "attn.k" -> "attn". */
static void common_scope(char *a, const char *b) {
  int n = 0, whole = 0;
  for (; a[n] && a[n] == b[n]; n++)
    if (a[n] == '.') whole = n;
  a[(!a[n] || a[n] == '.') && (!b[n] || b[n] == '.') ? n : whole] = 0;
}

static int is_param(const Tensor *t) { return t->kind == T_PARAM || t->kind == T_CONST; }

/* A part of a join's product (fuse_gemm's q, k and v in one GEMM) is of its member's scope. */
static int join_part_scope(const Namer *w, const Node *n, char *buf, int len) {
  if (n->op != OP_SPLIT) return 0;
  int producer = w->g->tensors[n->in[0]].producer;
  if (producer < 0 || w->g->nodes[producer].op != OP_MATMUL) return 0;
  const Tensor *weight = &w->g->tensors[w->g->nodes[producer].in[1]];
  const Model *m = &w->e->plan->model;
  if (weight->join < 0 || n->a.parts.part >= m->joins[weight->join].n) return 0;
  param_scope(m->params[m->joins[weight->join].params[n->a.parts.part]].name, buf, len);
  return 1;
}

/* A node's scope: its join member's; else the first parameter's it reads (a bias add is of its
 * bias's scope); else what its inputs' scopes share. */
static void node_scope(const Namer *w, const Node *n, char *buf, int len) {
  buf[0] = 0;
  if (join_part_scope(w, n, buf, len)) return;
  for (int k = 0; k < n->nin; k++)
    if (is_param(&w->g->tensors[n->in[k]])) {
      param_scope(w->g->tensors[n->in[k]].name, buf, len);
      return;
    }
  for (int k = 0; k < n->nin; k++) {
    const char *s = w->scope[n->in[k]];
    if (!s[0]) continue;
    if (buf[0])
      common_scope(buf, s);
    else
      snprintf(buf, len, "%s", s);
  }
}

/* ---- names ----------------------------------------------------------------------------------- */

/* What output k of a forward node is beside its scope's main result: a suffix to the scope. */
static const char *role(const Namer *w, const Node *n, int index, int k) {
  static const char *const norm_roles[] = {"", "_mean", "_rstd"};
  switch (n->op) {
  case OP_NORM: return norm_roles[n->a.norm.kind == NORM_LAYER ? k : 2 * k];
  case OP_ATTENTION: return k ? "_lse" : "";
  case OP_EMBEDDING: return "_rows";
  case OP_TOPK: return k ? "_indices" : "_values";
  case OP_ROUTE: return k ? "_counts" : "_slots";
  case OP_DISPATCH: return "_rows";
  case OP_FRACTIONS: return "_fractions";
  case OP_EXPERT_COUNTS: return k ? "_local" : "_all";
  case OP_EXPERT_SEND: return "_held";
  case OP_EXPERT_RETURN: return "_back";
  case OP_EW: return w->e->kernels.kernels[w->e->kernels.kernel_of[w->stage][index]].role;
  case OP_MATMUL:
  case OP_REDUCE:
  case OP_XENT:
  case OP_ROPE:
  case OP_SPLIT:
  case OP_CONCAT:
  case OP_ALLREDUCE:
  case OP_ALLGATHER:
  case OP_REDUCESCATTER:
  case OP_SLICE:
  case OP_NORM_BWD:
  case OP_ATTENTION_BWD:
  case OP_EMBEDDING_BWD:
  case OP_XENT_BWD:
  case OP_GROUPED_MATMUL:
  case OP_COMBINE:
  case OP_TOPK_BWD:
  case OP_COMBINE_BWD:
  case OP_LOSS_TERM:
  case OP_LOSS_TERM_BWD: return "";
  }
  return "";
}

/* "attn.q+k+v" -> "attn_q_k_v": a C identifier's characters. */
static void identifier(const char *text, char *buf, int len) {
  int n = 0;
  for (const char *c = text; *c && n < len - 1; c++)
    buf[n++] = isalnum((unsigned char)*c) ? *c : '_';
  buf[n] = 0;
}

/* Output k of forward node `index`: the logits and the loss by what they are, the rest by scope and
 * role; "" where the model names no scope. */
static void forward_name(const Namer *w, int index, int k, char *buf, int len) {
  const Node *n = &w->g->nodes[index];
  const Tensor *t = &w->g->tensors[n->out[k]];
  const Model *m = &w->e->plan->model;
  char scoped[EMIT_NAME_CHARS];
  snprintf(scoped, sizeof scoped, "%s%s", w->scope[n->out[k]], role(w, n, index, k));
  if (n->op == OP_XENT)
    snprintf(buf, len, "%s", k ? "lse" : "loss");
  else if (n->op == OP_MATMUL && m->vocab_dim >= 0 && t->dims[t->ndim - 1] == m->vocab_dim)
    snprintf(buf, len, "logits");
  else if (w->scope[n->out[k]][0])
    identifier(scoped, buf, len);
  else
    buf[0] = 0;
}

/* The forward tensor a backward node's output is the gradient of: an elementwise node's one forward
 * activation (gelu's backward reads the product it differentiates), else the tensor autodiff made
 * it for. -1 when neither. */
static int gradient_of(const Namer *w, const Node *n, int out) {
  int read = -1, count = 0;
  for (int k = 0; n->op == OP_EW && k < n->nin; k++)
    if (w->g->tensors[n->in[k]].kind == T_ACT) read = n->in[k], count++;
  return count == 1 ? read : w->g->tensors[out].grad_of;
}

static int plain_identifier(const char *name) {
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_') return 0;
  return name[0] != 0;
}

/* Every tensor's wished-for name, before names that collide are told apart; given ones stay. */
static void wished_names(Namer *w, const int *given) {
  for (int i = 0; i < w->g->nnodes; i++) {
    const Node *n = &w->g->nodes[i];
    char scope[EMIT_NAME_CHARS];
    if (!n->backward) node_scope(w, n, scope, sizeof scope);
    for (int k = 0; k < n->nout; k++) {
      int t = n->out[k];
      if (given[t]) continue;
      if (!n->backward) {
        snprintf(w->scope[t], EMIT_NAME_CHARS, "%s", scope);
        forward_name(w, i, k, w->name[t], EMIT_NAME_CHARS);
        continue;
      }
      int again = w->g->tensors[t].copy_of, of = again >= 0 ? again : gradient_of(w, n, t);
      char forward[EMIT_NAME_CHARS];
      snprintf(forward, sizeof forward, "%s", of >= 0 ? w->name[of] : "");
      if (plain_identifier(forward))
        snprintf(w->name[t], EMIT_NAME_CHARS, "%s%.100s", again >= 0 ? "re_" : "d_", forward);
    }
  }
}

/* Words a buffer's name must not be: C's keywords and its library's lowercase macros, the stage and
 * chunk functions' own names, and the runtime's types; nor may it start as the runtime's functions
 * do. */
static const char *const reserved[] = {
    "auto",        "break",     "case",     "char",     "const",
    "continue",    "default",   "do",       "double",   "else",
    "enum",        "extern",    "float",    "for",      "goto",
    "if",          "inline",    "int",      "long",     "register",
    "restrict",    "return",    "short",    "signed",   "sizeof",
    "static",      "struct",    "switch",   "typedef",  "union",
    "unsigned",    "void",      "volatile", "while",    "alignas",
    "alignof",     "assert",    "bool",     "complex",  "errno",
    "false",       "imaginary", "noreturn", "offsetof", "static_assert",
    "stderr",      "stdin",     "stdout",   "true",     "thread_local",
    "r",           "layer",     "x",        "dy",       "dx",
    "saved",       "tmp",       "w",        "g",        "tokens",
    "targets",     "shape",     "sites",    "keys",     "input",
    "layer_input", "kept",      "slot",     "i",        "real",
    "act_t",       NULL};
static const char *const reserved_types[] = {"int8_t",  "int16_t",   "int32_t",  "int64_t",
                                             "uint8_t", "uint16_t",  "uint32_t", "uint64_t",
                                             "size_t",  "ptrdiff_t", "intptr_t", NULL};
static const char *const reserved_prefixes[] = {"rt_",   "k_",     "ew_", "device_",
                                                "cuda_", "plait_", NULL};

static int in_list(const char *const *list, const char *name) {
  for (int i = 0; list[i]; i++)
    if (strcmp(name, list[i]) == 0) return 1;
  return 0;
}

/* A reserved word, a dim's constant (Vp), a runtime prefix, or no lowercase letter (the form of
 * model.c's constants and the C library's macros). */
static int unusable(const Namer *w, const char *name) {
  if (in_list(reserved, name) || in_list(reserved_types, name)) return 1;
  for (int d = 0; d < w->e->plan->model.ndims; d++)
    if (strcmp(name, w->e->dim_constant[d]) == 0) return 1;
  for (int i = 0; reserved_prefixes[i]; i++)
    if (strncmp(name, reserved_prefixes[i], strlen(reserved_prefixes[i])) == 0) return 1;
  for (const char *c = name; *c; c++)
    if (islower((unsigned char)*c)) return 0;
  return 1;
}

static int order(const Namer *w, int t) { return w->g->tensors[t].producer; }

/* Names several tensors wish for: the last made keeps it, the others add their node's op
 * (attn_q_split beside attn_q). */
static void tell_apart(Namer *w, const int *given) {
  for (int t = 0; t < w->g->ntensors; t++) {
    if (given[t] || !w->name[t][0]) continue;
    int later = 0;
    for (int u = 0; u < w->g->ntensors && !later; u++)
      later =
          u != t && !given[u] && strcmp(w->name[u], w->name[t]) == 0 && order(w, u) > order(w, t);
    if (later && order(w, t) >= 0) {
      size_t used = strlen(w->name[t]);
      snprintf(w->name[t] + used, EMIT_NAME_CHARS - used, "_%s",
               op_name(w->g->nodes[order(w, t)].op));
    }
  }
}

static int taken(const Namer *w, const int *done, int t) {
  for (int u = 0; u < w->g->ntensors; u++)
    if (u != t && done[u] && strcmp(w->name[u], w->name[t]) == 0) return 1;
  return 0;
}

/* The final names: a number for a tensor the model names nothing of (t7, d_t7), v_ before a name
 * that starts with no letter, _ after a reserved one (int_), then _2, _3, ... while a name is
 * taken. */
static void finish(Namer *w, int *done) {
  for (int t = 0; t < w->g->ntensors; t++) {
    if (done[t]) continue;
    char base[EMIT_NAME_CHARS];
    int of = w->g->tensors[t].grad_of;
    if (w->name[t][0])
      snprintf(base, sizeof base, "%.110s", w->name[t]);
    else if (w->g->tensors[t].kind == T_GRAD && of >= 0)
      snprintf(base, sizeof base, "d_t%d", of);
    else
      snprintf(base, sizeof base, "t%d", t);
    snprintf(w->name[t], EMIT_NAME_CHARS, "%s%.110s%s", isalpha((unsigned char)base[0]) ? "" : "v_",
             base, unusable(w, base) ? "_" : "");
    snprintf(base, sizeof base, "%.113s", w->name[t]);
    for (int n = 2; taken(w, done, t); n++)
      snprintf(w->name[t], EMIT_NAME_CHARS, "%.113s_%d", base, n);
    done[t] = 1;
  }
}

void emit_name_buffers(const Emission *e, int s, char (*name)[EMIT_NAME_CHARS]) {
  const Graph *g = e->stage[s];
  char scope[g->ntensors + 1][EMIT_NAME_CHARS];
  int given[g->ntensors + 1];
  Namer w = {.e = e, .stage = s, .g = g, .scope = scope, .name = name};
  for (int t = 0; t < g->ntensors; t++) {
    scope[t][0] = name[t][0] = 0;
    given[t] = given_name(e, s, t, name[t], EMIT_NAME_CHARS);
    if (g->tensors[t].kind == T_PARAM) param_scope(g->tensors[t].name, scope[t], EMIT_NAME_CHARS);
  }
  wished_names(&w, given);
  tell_apart(&w, given);
  finish(&w, given);
}
