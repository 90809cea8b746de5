/* expr.c: building, grafting, differentiating, evaluating and printing elementwise expressions. */
#include "ir/expr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_LINEAR_INPUTS = 16 }; /* a node's inputs, at most (graph.h's MAX_INPUTS) */

#define EXPR_ROW(op, name, arity, use, model_name, specials) \
  [op] = {name, arity, use, model_name, specials},
static const struct {
  const char *name;
  int arity;
  ExprUse use;
  const char *model_name;
  double specials;
} expr_ops[E_OPCOUNT] = {EXPR_OPS(EXPR_ROW)};
#undef EXPR_ROW

const char *expr_op_name(ExprOp op) { return expr_ops[op].name; }
int expr_arity(ExprOp op) { return expr_ops[op].arity; }
ExprUse expr_op_use(ExprOp op) { return expr_ops[op].use; }
const char *expr_op_model_name(ExprOp op) { return expr_ops[op].model_name; }
double expr_op_specials(ExprOp op) { return expr_ops[op].specials; }
int expr_root(const Expr *e) { return e->count - 1; }

static int expr_push(Expr *e, ExprNode node) {
  if (e->count >= EXPR_MAX) return -1;
  e->n[e->count] = node;
  return e->count++;
}

int expr_input(Expr *e, int input) {
  for (int i = 0; i < e->count; i++)
    if (e->n[i].op == E_IN && e->n[i].input == input) return i;
  return expr_push(e, (ExprNode){.op = E_IN, .a = -1, .b = -1, .input = input});
}

int expr_const(Expr *e, double value) {
  return expr_push(e, (ExprNode){.op = E_CONST, .a = -1, .b = -1, .value = value});
}

int expr_unary(Expr *e, ExprOp op, int a) {
  if (a < 0) return -1;
  return expr_push(e, (ExprNode){.op = op, .a = a, .b = -1});
}

int expr_binary(Expr *e, ExprOp op, int a, int b) {
  if (a < 0 || b < 0) return -1;
  return expr_push(e, (ExprNode){.op = op, .a = a, .b = b});
}

int expr_dropout(Expr *e, int a, double p, int site) {
  if (a < 0) return -1;
  return expr_push(e, (ExprNode){.op = E_DROPOUT, .a = a, .b = -1, .value = p, .site = site});
}

/* Copies the subtree at `root`; `done[i]` remembers where node i of src already went. */
static int graft_node(Expr *dst, const Expr *src, int root, const int *input_map, int *done) {
  if (done[root] >= 0) return done[root];
  const ExprNode *s = &src->n[root];
  int r;
  switch (expr_arity(s->op)) {
  case 0:
    if (s->op != E_IN) r = expr_push(dst, *s);
    else r = input_map ? input_map[s->input] : expr_input(dst, s->input);
    break;
  case 1: {
    int a = graft_node(dst, src, s->a, input_map, done);
    r = a < 0 ? -1 : expr_push(dst, (ExprNode){s->op, a, -1, 0, s->value, s->site});
    break;
  }
  default: {
    int a = graft_node(dst, src, s->a, input_map, done);
    int b = graft_node(dst, src, s->b, input_map, done);
    r = (a < 0 || b < 0) ? -1 : expr_push(dst, (ExprNode){s->op, a, b, 0, 0, 0});
    break;
  }
  }
  done[root] = r;
  return r;
}

int expr_graft(Expr *dst, const Expr *src, int root, const int *input_map) {
  int done[EXPR_MAX];
  for (int i = 0; i < EXPR_MAX; i++) done[i] = -1;
  return graft_node(dst, src, root, input_map, done);
}

int expr_compact(Expr *e, int root) {
  Expr fresh = {0};
  if (expr_graft(&fresh, e, root, NULL) < 0) return -1;
  *e = fresh;
  return 0;
}

/* Each node's linear form over the inputs: form[k][i] its coefficient of input i, form[k][n] its
 * constant. */
typedef double LinearForm[MAX_LINEAR_INPUTS + 1];

static int is_constant(const LinearForm f, int n) {
  for (int i = 0; i < n; i++)
    if (f[i] != 0) return 0;
  return 1;
}

/* The form of node k from its operands' forms; 0 when it is not linear. */
static int linear_node(const ExprNode *x, LinearForm *form, int n, LinearForm out) {
  const double *a = x->a >= 0 ? form[x->a] : NULL, *b = x->b >= 0 ? form[x->b] : NULL;
  for (int i = 0; i <= n; i++) out[i] = 0;
  switch (x->op) {
  case E_IN:
    if (x->input >= n) return 0;
    out[x->input] = 1;
    return 1;
  case E_CONST: out[n] = x->value; return 1;
  case E_ADD: case E_SUB:
    for (int i = 0; i <= n; i++) out[i] = a[i] + (x->op == E_ADD ? b[i] : -b[i]);
    return 1;
  case E_NEG:
    for (int i = 0; i <= n; i++) out[i] = -a[i];
    return 1;
  case E_MUL:
    if (!is_constant(a, n) && !is_constant(b, n)) return 0;
    for (int i = 0; i <= n; i++) out[i] = is_constant(a, n) ? a[n] * b[i] : a[i] * b[n];
    return 1;
  case E_DIV:
    if (!is_constant(b, n)) return 0;
    for (int i = 0; i <= n; i++) out[i] = a[i] / b[n];
    return 1;
  case E_GELU: case E_GELU_GRAD: case E_SILU: case E_SIGMOID: case E_RELU: case E_STEP: case E_TANH:
  case E_EXP: case E_DROPOUT: case E_GELU_EXACT: case E_GELU_EXACT_GRAD: case E_ERF: case E_SQRT:
  case E_RSQRT: case E_LOG: case E_ABS: case E_SIGN: case E_MIN: case E_MAX: case E_GT: case E_GE:
    break;
  }
  return 0;
}

int expr_linear(const Expr *e, int n, double *coef, double *constant) {
  LinearForm form[EXPR_MAX];
  if (n > MAX_LINEAR_INPUTS) return 0;
  for (int k = 0; k < e->count; k++)
    if (!linear_node(&e->n[k], form, n, form[k])) return 0;
  const double *root = form[e->count - 1];
  for (int i = 0; i < n; i++) coef[i] = root[i];
  *constant = root[n];
  return 1;
}

static int is_number(const Expr *e, int k, double value) {
  return e->n[k].op == E_CONST && e->n[k].value == value;
}

/* Node k with its operands already folded (a and b in `out`): the node it folds to in `out`. */
static int fold_node(Expr *out, const ExprNode *x, int a, int b) {
  if (x->op == E_ADD && is_number(out, a, 0)) return b;
  if ((x->op == E_ADD || x->op == E_SUB) && is_number(out, b, 0)) return a;
  if (x->op == E_SUB && is_number(out, a, 0)) return expr_unary(out, E_NEG, b);
  if (x->op == E_MUL && (is_number(out, a, 0) || is_number(out, b, 1))) return a;
  if (x->op == E_MUL && (is_number(out, b, 0) || is_number(out, a, 1))) return b;
  if (out->count == EXPR_MAX) return -1;
  ExprNode y = *x;
  y.a = a, y.b = b;
  out->n[out->count] = y;
  return out->count++;
}

void expr_fold_zeros(Expr *e) {
  Expr out = {0};
  int map[EXPR_MAX];
  for (int k = 0; k < e->count; k++) {
    const ExprNode *x = &e->n[k];
    map[k] = fold_node(&out, x, x->a >= 0 ? map[x->a] : -1, x->b >= 0 ? map[x->b] : -1);
    if (map[k] < 0) return; /* no room: e stays as it was */
  }
  if (expr_compact(&out, map[e->count - 1]) == 0) *e = out;
}

int expr_uses_input(const Expr *e, int input) {
  for (int i = 0; i < e->count; i++)
    if (e->n[i].op == E_IN && e->n[i].input == input) return 1;
  return 0;
}

/* Reverse-mode differentiation over the tree. adj[i] is the position in `out` of d root / d node
 * i (times the upstream gradient), or -1 while nothing flows into node i. The forward values the
 * derivatives need are grafted from `e` on demand (fwd_done maps positions of e to those of
 * out). */
typedef struct {
  const Expr *e;
  Expr *out;
  int fwd_done[EXPR_MAX];
  int input_map[64];
} GradCtx;

static int fwd_value(GradCtx *c, int node) {
  return graft_node(c->out, c->e, node, c->input_map, c->fwd_done);
}

static int add_adjoint(Expr *out, int current, int contribution) {
  if (contribution < 0) return -2; /* out of room */
  if (current < 0) return contribution;
  return expr_binary(out, E_ADD, current, contribution);
}

/* The local derivatives of the functions beyond the activations: erf' = 2/√π·exp(−a²), sqrt' =
 * 1/(2√a), rsqrt' = −rsqrt(a)/(2a), log' = 1/a, abs' = sign(a); min and max pass g to the
 * operand they chose (a on a tie); comparisons have none. */
static int more_local_grad(GradCtx *c, int k, int which, int g) {
  const ExprNode *n = &c->e->n[k];
  Expr *o = c->out;
  switch (n->op) {
    case E_GELU_EXACT:
      return expr_binary(o, E_MUL, g, expr_unary(o, E_GELU_EXACT_GRAD, fwd_value(c, n->a)));
    case E_ERF: {
      int a = fwd_value(c, n->a);
      int gauss = expr_unary(o, E_EXP, expr_unary(o, E_NEG, expr_binary(o, E_MUL, a, a)));
      return expr_binary(o, E_MUL, g,
                         expr_binary(o, E_MUL, expr_const(o, 1.1283791670955126), gauss));
  }
  case E_SQRT:
    return expr_binary(o, E_DIV, expr_binary(o, E_MUL, g, expr_const(o, 0.5)), fwd_value(c, k));
  case E_RSQRT: {
    int ratio = expr_binary(o, E_DIV, fwd_value(c, k), fwd_value(c, n->a));
    return expr_binary(o, E_MUL, g, expr_binary(o, E_MUL, expr_const(o, -0.5), ratio));
  }
  case E_LOG: return expr_binary(o, E_DIV, g, fwd_value(c, n->a));
  case E_ABS: return expr_binary(o, E_MUL, g, expr_unary(o, E_SIGN, fwd_value(c, n->a)));
  case E_MIN: case E_MAX: {
    int a = fwd_value(c, n->a), b = fwd_value(c, n->b),
        chose_a = n->op == E_MIN ? expr_binary(o, E_GE, b, a) : expr_binary(o, E_GE, a, b);
    int chose = which == 0 ? chose_a : expr_binary(o, E_SUB, expr_const(o, 1), chose_a);
    return expr_binary(o, E_MUL, g, chose);
  }
  case E_GT: case E_GE: return expr_const(o, 0);
  case E_IN: case E_CONST: case E_ADD: case E_SUB: case E_MUL: case E_DIV: case E_NEG: case E_GELU:
  case E_GELU_GRAD: case E_SIGMOID: case E_SILU: case E_RELU: case E_STEP: case E_TANH: case E_EXP:
  case E_DROPOUT: case E_GELU_EXACT_GRAD: case E_SIGN:
    break; /* local_grad's own, or derivatives, which are not differentiated */
  }
  return -1;
}

/* The local derivative of node k times its adjoint g, for operand `which` (0: a, 1: b). */
static int local_grad(GradCtx *c, int k, int which, int g) {
  const ExprNode *n = &c->e->n[k];
  Expr *o = c->out;
  switch (n->op) {
  case E_ADD: return g;
  case E_SUB: return which == 0 ? g : expr_unary(o, E_NEG, g);
  case E_MUL: return expr_binary(o, E_MUL, g, fwd_value(c, which == 0 ? n->b : n->a));
  case E_DIV:
    if (which == 0) return expr_binary(o, E_DIV, g, fwd_value(c, n->b));
    /* d(a/b)/db = -a/b² */
    return expr_unary(o, E_NEG,
                      expr_binary(o, E_DIV, expr_binary(o, E_MUL, g, fwd_value(c, n->a)),
                                  expr_binary(o, E_MUL, fwd_value(c, n->b), fwd_value(c, n->b))));
  case E_NEG: return expr_unary(o, E_NEG, g);
  case E_GELU: return expr_binary(o, E_MUL, g, expr_unary(o, E_GELU_GRAD, fwd_value(c, n->a)));
  case E_SIGMOID: { /* s(1-s) */
    int s = fwd_value(c, k);
    return expr_binary(o, E_MUL, g,
                       expr_binary(o, E_MUL, s, expr_binary(o, E_SUB, expr_const(o, 1), s)));
  }
  case E_SILU: { /* s·(1 + a·(1-s)), s = sigmoid(a) */
    int a = fwd_value(c, n->a);
    int s = expr_unary(o, E_SIGMOID, a);
    int one = expr_const(o, 1);
    int inner = expr_binary(o, E_ADD, one, expr_binary(o, E_MUL, a, expr_binary(o, E_SUB, one, s)));
    return expr_binary(o, E_MUL, g, expr_binary(o, E_MUL, s, inner));
  }
  case E_RELU: return expr_binary(o, E_MUL, g, expr_unary(o, E_STEP, fwd_value(c, n->a)));
  case E_TANH: { /* 1 - t² */
    int t = fwd_value(c, k);
    return expr_binary(o, E_MUL, g,
                       expr_binary(o, E_SUB, expr_const(o, 1), expr_binary(o, E_MUL, t, t)));
  }
  case E_EXP: return expr_binary(o, E_MUL, g, fwd_value(c, k));
  case E_DROPOUT: return expr_dropout(o, g, n->value, n->site); /* linear: the same mask */
  case E_GELU_EXACT:
  case E_ERF:
  case E_SQRT:
  case E_RSQRT:
  case E_LOG:
  case E_ABS:
  case E_MIN:
  case E_MAX:
  case E_GT: case E_GE:
    return more_local_grad(c, k, which, g);
  case E_IN: case E_CONST: case E_GELU_GRAD: case E_STEP: case E_GELU_EXACT_GRAD: case E_SIGN:
    break; /* no operands to feed: inputs and constants; derivatives are not differentiated */
  }
  return -1;
}

int expr_grad(const Expr *e, int wrt, int grad_input, Expr *out) {
  GradCtx c = {.e = e, .out = out};
  int adj[EXPR_MAX];
  out->count = 0;
  for (int i = 0; i < EXPR_MAX; i++) c.fwd_done[i] = -1, adj[i] = -1;
  for (int i = 0; i < 64; i++) c.input_map[i] = -1;
  for (int i = 0; i < e->count; i++)
    if (e->n[i].op == E_IN) {
      c.input_map[e->n[i].input] = expr_input(out, e->n[i].input);
      c.fwd_done[i] = c.input_map[e->n[i].input];
    }
  adj[expr_root(e)] = expr_input(out, grad_input);
  for (int k = expr_root(e); k >= 0; k--) {
    if (adj[k] < 0) continue;
    const ExprNode *n = &e->n[k];
    int operands[2] = {n->a, n->b};
    for (int w = 0; w < expr_arity(n->op); w++) {
      int contribution = local_grad(&c, k, w, adj[k]);
      adj[operands[w]] = add_adjoint(out, adj[operands[w]], contribution);
      if (adj[operands[w]] < 0) return -1;
    }
  }
  int result = -1;
  for (int i = 0; i < e->count; i++)
    if (e->n[i].op == E_IN && e->n[i].input == wrt && adj[i] >= 0) result = adj[i];
  if (result < 0) result = expr_const(out, 0);
  return expr_compact(out, result);
}

static double gelu(double x) {
  const double c = 0.7978845608028654; /* sqrt(2/pi) */
  return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

/* a·Φ(a), Φ the normal distribution function */
static double gelu_exact(double x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }

/* Φ(a) + a·φ(a), φ(a) = exp(−a²/2)/√(2π) */
static double gelu_exact_grad(double x) {
  return 0.5 * (1.0 + erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x);
}

static double gelu_grad(double x) {
  const double c = 0.7978845608028654;
  double u = c * (x + 0.044715 * x * x * x);
  double t = tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

double expr_eval(const Expr *e, const double *inputs) {
  double v[EXPR_MAX];
  for (int i = 0; i < e->count; i++) {
    const ExprNode *n = &e->n[i];
    double a = n->a >= 0 ? v[n->a] : 0, b = n->b >= 0 ? v[n->b] : 0;
    switch (n->op) {
    case E_IN: v[i] = inputs[n->input]; break;
    case E_CONST: v[i] = n->value; break;
    case E_ADD: v[i] = a + b; break;
    case E_SUB: v[i] = a - b; break;
    case E_MUL: v[i] = a * b; break;
    case E_DIV: v[i] = a / b; break;
    case E_NEG: v[i] = -a; break;
    case E_GELU: v[i] = gelu(a); break;
    case E_GELU_GRAD: v[i] = gelu_grad(a); break;
    case E_SILU: v[i] = a / (1.0 + exp(-a)); break;
    case E_SIGMOID: v[i] = 1.0 / (1.0 + exp(-a)); break;
    case E_RELU: v[i] = a > 0 ? a : 0; break;
    case E_STEP: v[i] = a > 0 ? 1 : 0; break;
    case E_TANH: v[i] = tanh(a); break;
    case E_EXP: v[i] = exp(a); break;
    case E_DROPOUT: v[i] = a; break;
    case E_GELU_EXACT: v[i] = gelu_exact(a); break;
    case E_GELU_EXACT_GRAD: v[i] = gelu_exact_grad(a); break;
    case E_ERF: v[i] = erf(a); break;
    case E_SQRT: v[i] = sqrt(a); break;
    case E_RSQRT: v[i] = 1 / sqrt(a); break;
    case E_LOG: v[i] = log(a); break;
    case E_ABS: v[i] = fabs(a); break;
    case E_SIGN: v[i] = (a > 0) - (a < 0); break;
    case E_MIN: v[i] = a <= b ? a : b; break;
    case E_MAX: v[i] = a >= b ? a : b; break;
    case E_GT: v[i] = a > b; break;
    case E_GE: v[i] = a >= b; break;
    }
  }
  return e->count ? v[expr_root(e)] : NAN;
}

void expr_number_text(double v, char *buf, int len) {
  for (int digits = 6; digits <= 17; digits++) {
    snprintf(buf, len, "%.*g", digits, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* Prints node k; `names` spells the inputs. Operators are parenthesised where needed. `ordinal`
 * numbers the dropouts in node order. */
static int print_node(const Expr *e, int k, const char *const *names, const ExprDialect *dialect,
                      char *buf, int len) {
  const ExprNode *n = &e->n[k];
  char a[2048] = "", b[2048] = "";
  if (n->a >= 0) print_node(e, n->a, names, dialect, a, sizeof a);
  if (n->b >= 0) print_node(e, n->b, names, dialect, b, sizeof b);
  switch (n->op) {
  case E_IN: return snprintf(buf, len, "%s", names[n->input]);
  case E_CONST: {
    char number[32];
    expr_number_text(n->value, number, sizeof number);
    return snprintf(buf, len, "%s", number);
  }
  case E_ADD: case E_SUB: case E_MUL: case E_DIV:
    return snprintf(buf, len, "(%s %s %s)", a, expr_op_name(n->op), b);
  case E_NEG: return snprintf(buf, len, "(-%s)", a);
  case E_MIN: case E_MAX: case E_GT: case E_GE:
    return snprintf(buf, len, "%s%s(%s, %s)", dialect ? dialect->prefix : "", expr_op_name(n->op),
                    a, b);
  case E_DROPOUT: {
    int ordinal = 0;
    for (int i = 0; i < k; i++) ordinal += e->n[i].op == E_DROPOUT;
    if (!dialect) return snprintf(buf, len, "dropout(%s, %g, site %d)", a, n->value, n->site);
    return snprintf(buf, len, dialect->dropout, a, n->value, ordinal);
  }
  case E_GELU: case E_GELU_GRAD: case E_SILU: case E_SIGMOID: case E_RELU: case E_STEP: case E_TANH:
  case E_EXP: case E_GELU_EXACT: case E_GELU_EXACT_GRAD: case E_ERF: case E_SQRT: case E_RSQRT:
  case E_LOG: case E_ABS: case E_SIGN:
    return snprintf(buf, len, "%s%s(%s)", dialect ? dialect->prefix : "", expr_op_name(n->op), a);
  }
  return 0;
}

void expr_to_c(const Expr *e, const char *const *names, const ExprDialect *dialect, char *buf,
               int len) {
  if (e->count == 0) { snprintf(buf, len, "0"); return; }
  print_node(e, expr_root(e), names, dialect, buf, len);
}

int expr_dropouts(const Expr *e, int *sites, double *probabilities) {
  int n = 0;
  for (int i = 0; i < e->count; i++)
    if (e->n[i].op == E_DROPOUT) {
      if (sites) sites[n] = e->n[i].site;
      if (probabilities) probabilities[n] = e->n[i].value;
      n++;
    }
  return n;
}
