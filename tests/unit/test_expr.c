/* test_expr.c: elementwise expressions: linear forms, folding, and symbolic derivatives against central
 * finite differences. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/expr.h"

/* Checks d e / d input i (times an upstream gradient g) at x against (e(x+h) - e(x-h)) / 2h · g. */
static void check_gradient(const Expr *e, int ninputs, const double *x, const char *what) {
  for (int i = 0; i < ninputs; i++) {
    Expr ge;
    CHECK(expr_grad(e, i, ninputs, &ge) == 0, "%s: expr_grad failed", what);
    double args[8], g = 0.7;
    for (int k = 0; k < ninputs; k++) args[k] = x[k];
    args[ninputs] = g;
    double analytic = expr_eval(&ge, args);
    double h = 1e-6, plus[8], minus[8];
    for (int k = 0; k < ninputs; k++) plus[k] = minus[k] = x[k];
    plus[i] += h, minus[i] -= h;
    double numeric = (expr_eval(e, plus) - expr_eval(e, minus)) / (2 * h) * g;
    double err = fabs(analytic - numeric) / fmax(1e-8, fabs(analytic) + fabs(numeric));
    CHECK(err < 1e-7, "%s: d/dx%d analytic %.12g numeric %.12g (relative error %.2g)", what, i, analytic, numeric, err);
  }
}

/* (x0 − 2·x1)/4 + 3 − x2 is linear: coefficients 1/4, −1/2, −1 and constant 3; gelu(x0) + x1 and x0·x1
 * are not. */
static void linear_forms(void) {
  Expr e = {0};
  int a = expr_binary(&e, E_SUB, expr_input(&e, 0), expr_binary(&e, E_MUL, expr_const(&e, 2), expr_input(&e, 1)));
  a = expr_binary(&e, E_DIV, a, expr_const(&e, 4));
  a = expr_binary(&e, E_ADD, a, expr_const(&e, 3));
  expr_binary(&e, E_SUB, a, expr_input(&e, 2));
  double coef[3], constant;
  CHECK(expr_linear(&e, 3, coef, &constant), "a linear form was refused");
  CHECK(coef[0] == 0.25 && coef[1] == -0.5 && coef[2] == -1 && constant == 3, "coefficients %g %g %g, constant %g",
        coef[0], coef[1], coef[2], constant);
  Expr g = {0};
  expr_binary(&g, E_ADD, expr_unary(&g, E_GELU, expr_input(&g, 0)), expr_input(&g, 1));
  CHECK(!expr_linear(&g, 2, coef, &constant), "gelu(x0) + x1 taken as linear");
  Expr p = {0};
  expr_binary(&p, E_MUL, expr_input(&p, 0), expr_input(&p, 1));
  CHECK(!expr_linear(&p, 2, coef, &constant), "x0·x1 taken as linear");
}

/* x0 + ((0 + x1) − 0)·1 folds to x0 + x1, and 0 − x2 to −x2; the values stay. */
static void zeros_folded(void) {
  Expr e = {0};
  int inner = expr_binary(&e, E_ADD, expr_const(&e, 0), expr_input(&e, 1));
  inner = expr_binary(&e, E_MUL, expr_binary(&e, E_SUB, inner, expr_const(&e, 0)), expr_const(&e, 1));
  int sum = expr_binary(&e, E_ADD, expr_input(&e, 0), inner);
  expr_binary(&e, E_ADD, sum, expr_binary(&e, E_SUB, expr_const(&e, 0), expr_input(&e, 2)));
  const double x[3] = {1.5, -2.25, 4};
  double before = expr_eval(&e, x);
  expr_fold_zeros(&e);
  char text[200];
  const char *names[3] = {"x0", "x1", "x2"};
  expr_to_c(&e, names, NULL, text, sizeof text);
  CHECK(strcmp(text, "((x0 + x1) + (-x2))") == 0, "folded: %s", text);
  CHECK(expr_eval(&e, x) == before, "the value changed: %g against %g", expr_eval(&e, x), before);
  CHECK(e.count == 6, "%d nodes after folding (%s), want 6", e.count, text);
}

static void unary_ops(void) {
  const ExprOp ops[] = {E_NEG, E_GELU, E_SILU, E_SIGMOID, E_TANH, E_EXP, E_RELU, E_GELU_EXACT, E_ERF, E_ABS};
  const double points[] = {-2.3, -0.4, 0.3, 1.7};
  for (unsigned k = 0; k < sizeof ops / sizeof *ops; k++)
    for (unsigned p = 0; p < sizeof points / sizeof *points; p++) {
      Expr e = {0};
      expr_unary(&e, ops[k], expr_input(&e, 0));
      check_gradient(&e, 1, &points[p], expr_op_name(ops[k]));
    }
}

/* Functions of positive numbers only. */
static void positive_ops(void) {
  const ExprOp ops[] = {E_SQRT, E_RSQRT, E_LOG};
  const double points[] = {0.05, 0.4, 1.7, 30};
  for (unsigned k = 0; k < sizeof ops / sizeof *ops; k++)
    for (unsigned p = 0; p < sizeof points / sizeof *points; p++) {
      Expr e = {0};
      expr_unary(&e, ops[k], expr_input(&e, 0));
      check_gradient(&e, 1, &points[p], expr_op_name(ops[k]));
    }
}

/* Min and max each way round, comparisons (no gradient, values 0 and 1), and the exact GeLU against
 * x·Φ(x) at known points (Φ(1) = 0.8413447460685429). */
static void binary_ops(void) {
  const ExprOp ops[] = {E_ADD, E_SUB, E_MUL, E_DIV, E_MIN, E_MAX, E_GT, E_GE};
  const double x[2][2] = {{1.3, -0.7}, {-0.7, 1.3}};
  for (unsigned k = 0; k < sizeof ops / sizeof *ops; k++)
    for (int order = 0; order < 2; order++) {
      Expr e = {0};
      expr_binary(&e, ops[k], expr_input(&e, 0), expr_input(&e, 1));
      check_gradient(&e, 2, x[order], expr_op_name(ops[k]));
    }
  Expr m = {0};
  expr_binary(&m, E_GT, expr_input(&m, 0), expr_input(&m, 1));
  CHECK(expr_eval(&m, x[0]) == 1 && expr_eval(&m, x[1]) == 0, "gt");
  Expr g = {0};
  expr_unary(&g, E_GELU_EXACT, expr_input(&g, 0));
  const double one = 1;
  CHECK(fabs(expr_eval(&g, &one) - 0.8413447460685429) < 1e-15, "gelu_exact(1) = %.17g", expr_eval(&g, &one));
}

/* silu(gate)·up + gelu(a + b)/c − tanh(a·a): inputs used several times and constants. */
static void compound(void) {
  Expr e = {0};
  int gate = expr_input(&e, 0), up = expr_input(&e, 1), a = expr_input(&e, 2), b = expr_input(&e, 3);
  int c = expr_const(&e, 1.5);
  int t1 = expr_binary(&e, E_MUL, expr_unary(&e, E_SILU, gate), up);
  int t2 = expr_binary(&e, E_DIV, expr_unary(&e, E_GELU, expr_binary(&e, E_ADD, a, b)), c);
  int t3 = expr_unary(&e, E_TANH, expr_binary(&e, E_MUL, a, a));
  expr_binary(&e, E_SUB, expr_binary(&e, E_ADD, t1, t2), t3);
  for (int trial = 0; trial < 20; trial++) {
    double x[4];
    for (int i = 0; i < 4; i++) x[i] = (rand() / (double)RAND_MAX) * 4 - 2;
    check_gradient(&e, 4, x, "compound");
  }
}

/* An input that does not appear has derivative 0; d(x + y)/dx is the upstream gradient itself. */
static void structure(void) {
  Expr e = {0}, ge;
  expr_binary(&e, E_ADD, expr_input(&e, 0), expr_input(&e, 1));
  CHECK(expr_grad(&e, 0, 2, &ge) == 0, "grad");
  CHECK(ge.count == 1 && ge.n[0].op == E_IN && ge.n[0].input == 2, "d(x+y)/dx should be the upstream gradient alone");
  Expr f = {0};
  expr_unary(&f, E_GELU, expr_input(&f, 0));
  CHECK(expr_grad(&f, 1, 2, &ge) == 0, "grad");
  double args[3] = {0.3, 0.5, 2.0};
  CHECK(expr_eval(&ge, args) == 0, "an unused input has derivative 0");
  CHECK(!expr_uses_input(&ge, 0), "the zero derivative reads no inputs");
}

/* Dropout is linear: its derivative applies the same mask (same site) to the upstream gradient. */
static void dropout_is_linear(void) {
  Expr e = {0}, ge;
  expr_dropout(&e, expr_input(&e, 0), 0.1, 7);
  CHECK(expr_grad(&e, 0, 1, &ge) == 0, "grad");
  const ExprNode *r = &ge.n[expr_root(&ge)];
  CHECK(r->op == E_DROPOUT && r->site == 7 && r->value == 0.1, "dropout's derivative is dropout of the gradient");
  CHECK(ge.n[r->a].op == E_IN && ge.n[r->a].input == 1, "applied to the upstream gradient");
}

int main(void) {
  RUN(linear_forms);
  RUN(zeros_folded);
  RUN(unary_ops);
  RUN(positive_ops);
  RUN(binary_ops);
  RUN(compound);
  RUN(structure);
  RUN(dropout_is_linear);
  TEST_EXIT();
}
