/* expr.h: elementwise expression trees: the body of an OP_EW node, built from the model's operators,
 * differentiated symbolically by autodiff and merged by fusion. */
#ifndef PLAIT_EXPR_H
#define PLAIT_EXPR_H

enum { EXPR_MAX = 96 };

typedef enum {
  E_IN,        /* input `input` of the node */
  E_CONST,     /* the number `value` */
  E_ADD, E_SUB, E_MUL, E_DIV,
  E_NEG,
  E_GELU,      /* tanh approximation, as GPT-2 and Megatron use */
  E_GELU_GRAD, /* d gelu(a) / da */
  E_SILU,      /* a·sigmoid(a) */
  E_SIGMOID,
  E_RELU,
  E_STEP,      /* 1 where a > 0, else 0 (d relu / da) */
  E_TANH,
  E_EXP,
  E_DROPOUT,   /* a·keep/(1-p), keep drawn from Philox at (seed, site, layer, step, global element) */
  E_GELU_EXACT,      /* a·Φ(a) = a/2·(1 + erf(a/√2)), as BERT, GPT-NeoX and Falcon use */
  E_GELU_EXACT_GRAD, /* d gelu_exact(a) / da = Φ(a) + a·φ(a) */
  E_ERF,
  E_SQRT, E_RSQRT, E_LOG,
  E_ABS,
  E_SIGN,      /* −1, 0 or 1 (d abs / da) */
  E_MIN, E_MAX,
  E_GT, E_GE,  /* 1 where a > b (a ≥ b), else 0 */
  E_OPCOUNT
} ExprOp;

typedef struct {
  ExprOp op;
  int a, b;     /* operand positions in the same Expr (-1 when unused) */
  int input;    /* E_IN: which node input */
  double value; /* E_CONST: the number; E_DROPOUT: the drop probability p */
  int site;     /* E_DROPOUT: the dropout site, unique in the model */
} ExprNode;

/* Nodes in topological order: operands come before their users; the last node is the root. */
typedef struct {
  int count;
  ExprNode n[EXPR_MAX];
} Expr;

int expr_input(Expr *e, int input);
int expr_const(Expr *e, double value);
int expr_unary(Expr *e, ExprOp op, int a);
int expr_binary(Expr *e, ExprOp op, int a, int b);
int expr_dropout(Expr *e, int a, double p, int site);
int expr_root(const Expr *e);
int expr_arity(ExprOp op);
const char *expr_op_name(ExprOp op);

/* Copies the tree rooted at `root` of `src` into `dst`, with input i of src replaced by the node
 * input_map[i] of dst (or by input i itself when input_map is NULL). Returns the new root in dst,
 * or -1 when dst is full. */
int expr_graft(Expr *dst, const Expr *src, int root, const int *input_map);

/* Keeps only what `root` depends on, with `root` last. Returns 0, or -1 when it does not fit. */
int expr_compact(Expr *e, int root);

/* The derivative of e with respect to input `wrt`, times the upstream gradient, which is input
 * `grad_input` of the result. Inputs keep their numbers. Returns 0, or -1 when the result is too large. */
int expr_grad(const Expr *e, int wrt, int grad_input, Expr *out);

/* Whether e is linear in its inputs — built from inputs, constants, +, −, negation, and products and
 * quotients by constant subtrees — and then its coefficient of each of the first n inputs and its
 * constant term: e = Σ coef[i]·input_i + constant. */
int expr_linear(const Expr *e, int n, double *coef, double *constant);

/* Folds additions and subtractions of zero and products by zero and one (what grafting zeros into a
 * sum leaves). */
void expr_fold_zeros(Expr *e);

/* Does input i appear in e? */
int expr_uses_input(const Expr *e, int input);

/* Evaluates in double precision; dropout keeps every unit (for tests of the algebra). */
double expr_eval(const Expr *e, const double *inputs);

/* How expr_to_c spells functions: prefix + name ("rt_gelu"), and dropout as a printf format taking the
 * operand, the probability and the dropout's ordinal in the expression (0, 1, ...). */
typedef struct {
  const char *prefix;
  const char *dropout;
} ExprDialect;

/* The fewest significant digits (%g) that read back as exactly v: how generated code spells numbers, so
 * that a --double build computes with the value the model file gave. */
void expr_number_text(double v, char *buf, int len);

/* Writes the expression as C, with input i spelled by names[i]: "gelu(x0 + x1)". A NULL dialect
 * prints the plain form used in pass listings. */
void expr_to_c(const Expr *e, const char *const *names, const ExprDialect *dialect, char *buf, int len);

/* The number of dropout nodes, and the site of the k-th one (in node order). */
int expr_dropouts(const Expr *e, int *sites, double *probabilities);

#endif
