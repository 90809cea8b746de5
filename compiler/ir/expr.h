/* expr.h: elementwise expression trees: the body of an OP_EW node, built from the model's
 * operators, differentiated symbolically by autodiff and merged by fusion. */
#ifndef PLAIT_EXPR_H
#define PLAIT_EXPR_H

enum { EXPR_MAX = 96 };

/* How a model file asks for an elementwise op through plait.core.ew: as a function of lib/plait
 * (plait.gelu(x), x:min(y)), as an operator of its tensors (a + b is "add"), or not at all (inputs,
 * constants, derivatives, and dropout, which has a call of its own). */
typedef enum { EW_FUNCTION, EW_OPERATOR, EW_INTERNAL } ExprUse;

/* Every elementwise op, once: X(op, name, arity, use, model_name, specials). `name` is how listings
 * and generated code spell it ("+"; gelu is rt_gelu in generated code); `model_name` what
 * plait.core.ew takes (NULL when internal); `specials` the special functions (tanh, exp, erf, sqrt,
 * log, a dropout draw) each element costs, which the plan's time of a fused kernel counts. */
#define EXPR_OPS(X)                                                                                \
  X(E_IN, "in", 0, EW_INTERNAL, NULL, 0)       /* input `input` of the node */                     \
  X(E_CONST, "const", 0, EW_INTERNAL, NULL, 0) /* the number `value` */                            \
  X(E_ADD, "+", 2, EW_OPERATOR, "add", 0)                                                          \
  X(E_SUB, "-", 2, EW_OPERATOR, "sub", 0)                                                          \
  X(E_MUL, "*", 2, EW_OPERATOR, "mul", 0)                                                          \
  X(E_DIV, "/", 2, EW_OPERATOR, "div", 0)                                                          \
  X(E_NEG, "neg", 1, EW_OPERATOR, "neg", 0)                                                        \
  X(E_GELU, "gelu", 1, EW_FUNCTION, "gelu", 1) /* tanh approximation, as GPT-2 and Megatron use */ \
  X(E_GELU_GRAD, "gelu_grad", 1, EW_INTERNAL, NULL, 1) /* d gelu(a) / da */                        \
  X(E_SILU, "silu", 1, EW_FUNCTION, "silu", 1)         /* a·sigmoid(a) */                          \
  X(E_SIGMOID, "sigmoid", 1, EW_FUNCTION, "sigmoid", 1)                                            \
  X(E_RELU, "relu", 1, EW_FUNCTION, "relu", 0)                                                     \
  X(E_STEP, "step", 1, EW_INTERNAL, NULL, 0) /* 1 where a > 0, else 0 (d relu / da) */             \
  X(E_TANH, "tanh", 1, EW_FUNCTION, "tanh", 1)                                                     \
  X(E_EXP, "exp", 1, EW_FUNCTION, "exp", 1)                                                        \
  /* a·keep/(1-p), keep drawn from Philox at (seed, site, layer, step, global element) */          \
  X(E_DROPOUT, "dropout", 1, EW_INTERNAL, NULL, 1)                                                 \
  /* a·Φ(a) = a/2·(1 + erf(a/√2)), as BERT, GPT-NeoX and Falcon use; d/da: Φ(a) + a·φ(a) */        \
  X(E_GELU_EXACT, "gelu_exact", 1, EW_FUNCTION, "gelu_exact", 1)                                   \
  X(E_GELU_EXACT_GRAD, "gelu_exact_grad", 1, EW_INTERNAL, NULL, 2)                                 \
  X(E_ERF, "erf", 1, EW_FUNCTION, "erf", 1)                                                        \
  X(E_SQRT, "sqrt", 1, EW_FUNCTION, "sqrt", 1)                                                     \
  X(E_RSQRT, "rsqrt", 1, EW_FUNCTION, "rsqrt", 1)                                                  \
  X(E_LOG, "log", 1, EW_FUNCTION, "log", 1)                                                        \
  X(E_ABS, "abs", 1, EW_FUNCTION, "abs", 0)                                                        \
  X(E_SIGN, "sign", 1, EW_INTERNAL, NULL, 0) /* −1, 0 or 1 (d abs / da) */                         \
  X(E_MIN, "min", 2, EW_FUNCTION, "min", 0)                                                        \
  X(E_MAX, "max", 2, EW_FUNCTION, "max", 0)                                                        \
  X(E_GT, "gt", 2, EW_FUNCTION, "gt", 0) /* 1 where a > b, else 0 */                               \
  X(E_GE, "ge", 2, EW_FUNCTION, "ge", 0) /* 1 where a ≥ b, else 0 */

#define EXPR_ENUMERATOR(op, name, arity, use, model_name, specials) op,
#define EXPR_ONE(op, name, arity, use, model_name, specials) +1
typedef enum { EXPR_OPS(EXPR_ENUMERATOR) } ExprOp;
enum { E_OPCOUNT = 0 EXPR_OPS(EXPR_ONE) };
#undef EXPR_ENUMERATOR
#undef EXPR_ONE

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
ExprUse expr_op_use(ExprOp op);
const char *expr_op_model_name(ExprOp op); /* NULL for EW_INTERNAL */
double expr_op_specials(ExprOp op);

/* Copies the tree rooted at `root` of `src` into `dst`, with input i of src replaced by the node
 * input_map[i] of dst (or by input i itself when input_map is NULL). Returns the new root in dst,
 * or -1 when dst is full. */
int expr_graft(Expr *dst, const Expr *src, int root, const int *input_map);

/* Keeps only what `root` depends on, with `root` last. Returns 0, or -1 when it does not fit. */
int expr_compact(Expr *e, int root);

/* The derivative of e with respect to input `wrt`, times the upstream gradient, which is input
 * `grad_input` of the result. Inputs keep their numbers. Returns 0, or -1 when the result is too
 * large. */
int expr_grad(const Expr *e, int wrt, int grad_input, Expr *out);

/* Whether e is linear in its inputs — built from inputs, constants, +, −, negation, and products
 * and quotients by constant subtrees — and then its coefficient of each of the first n inputs
 * and its constant term: e = Σ coef[i]·input_i + constant. */
int expr_linear(const Expr *e, int n, double *coef, double *constant);

/* Folds additions and subtractions of zero and products by zero and one (what grafting zeros into a
 * sum leaves). */
void expr_fold_zeros(Expr *e);

/* Does input i appear in e? */
int expr_uses_input(const Expr *e, int input);

/* Evaluates in double precision; dropout keeps every unit (for tests of the algebra). */
double expr_eval(const Expr *e, const double *inputs);

/* How expr_to_c spells functions: prefix + name ("rt_gelu"), and dropout as a printf format
 * taking the operand, the probability and the dropout's ordinal in the expression (0, 1, ...). */
typedef struct {
  const char *prefix;
  const char *dropout;
} ExprDialect;

/* The fewest significant digits (%g) that read back as exactly v: how generated code spells
 * numbers, so that a --double build computes with the value the model file gave. */
void expr_number_text(double v, char *buf, int len);

/* Writes the expression as C, with input i spelled by names[i]: "gelu(x0 + x1)". A NULL dialect
 * prints the plain form used in pass listings. */
void expr_to_c(const Expr *e, const char *const *names, const ExprDialect *dialect, char *buf,
               int len);

/* The number of dropout nodes, and the site of the k-th one (in node order). */
int expr_dropouts(const Expr *e, int *sites, double *probabilities);

#endif
