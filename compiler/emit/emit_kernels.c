/* emit_kernels.c: fused elementwise kernels, written once as C loops (OpenMP) for the CPU and
 * once as CUDA source for NVRTC, from the same expression. */
#include <stdlib.h>
#include <string.h>

#include "emit/emit.h"
#include "escape.h"

static const char *const input_names[MAX_INPUTS] = {"x0",  "x1",  "x2",  "x3", "x4",  "x5",
                                                    "x6",  "x7",  "x8",  "x9", "x10", "x11",
                                                    "x12", "x13", "x14", "x15"};

int64_t emit_local_dim(const Plan *p, const Tensor *t, int a) {
  int64_t size = p->model.dims[t->dims[a]].size;
  int split = t->layout.kind == LAYOUT_S && t->layout.axis == a;
  return split ? size / layout_pieces(t->layout, p->par.tp) : size;
}

int64_t emit_local_elems(const Plan *p, const Tensor *t) {
  int64_t n = 1;
  for (int a = 0; a < t->ndim; a++) n *= emit_local_dim(p, t, a);
  return n;
}

/* ---- collecting the distinct kernels -------------------------------------------------------- */

static void describe(const Plan *p, const Graph *g, const Node *n, Kernel *k) {
  memset(k, 0, sizeof *k);
  k->graph = g;
  k->node = n;
  const Tensor *out = &g->tensors[n->out[0]];
  int64_t total = emit_local_elems(p, out);
  k->accumulate = out->kind == T_PARAM_GRAD;
  k->dropouts = expr_dropouts(&n->expr, NULL, NULL);
  char body[1800];
  static const ExprDialect plain = {"", "dropout(%s, %.9g, #%d)"};
  expr_to_c(&n->expr, input_names, &plain, body, sizeof body);
  int used = snprintf(k->signature, sizeof k->signature, "%s%s|", k->accumulate ? "+=" : "=", body);
  for (int i = 0; i < n->nin; i++) {
    k->broadcast[i] = emit_local_elems(p, &g->tensors[n->in[i]]) < total;
    used += snprintf(k->signature + used, sizeof k->signature - used, "%c",
                     k->broadcast[i] ? 'b' : 'f');
  }
}

/* Expressions with a name, spelled over their inputs (x: an input read whole, b: one that repeats,
 * a bias), "+= " in front where the kernel adds into a parameter's gradient; a name may have
 * several spellings. */
typedef struct {
  const char *shape, *name, *role;
} Pattern;

static const Pattern patterns[] = {
    {"(x + b)", "bias_add", ""},
    {"(b + x)", "bias_add", ""},
    {"(x + x)", "add", "_sum"},
    {"(x + (x + b))", "residual_bias_add", "_residual"},
    {"((x + b) + x)", "residual_bias_add", "_residual"},
    {"((x + x) + x)", "add3", "_sum"},
    {"((x + x) + b)", "residual_bias_add", "_residual"},
    {"gelu((x + b))", "gelu_bias_add", "_gelu"},
    {"gelu_exact((x + b))", "gelu_exact_bias_add", "_gelu"},
    {"(x * gelu_grad((x + b)))", "gelu_bias_add_backward", ""},
    {"(x * gelu_exact_grad((x + b)))", "gelu_exact_bias_add_backward", ""},
    {"(x * silu(x))", "swiglu", "_swiglu"},
    {"(silu(x) * x)", "swiglu", "_swiglu"},
    {"((x * x) * (sigmoid(x) * (1 + (x * (1 - sigmoid(x))))))", "swiglu_gate_backward", ""},
    {"(x * gelu(x))", "geglu", "_geglu"},
    {"(gelu(x) * x)", "geglu", "_geglu"},
    {"((x * x) * gelu_grad(x))", "geglu_gate_backward", ""},
    {"(x * b)", "scale", "_scaled"},
    {"(b * x)", "scale", "_scaled"},
    {"(x * x)", "mul", "_product"},
    {"+= x", "accumulate", ""},
    {"x", "copy", ""},
    {"dropout(x)", "dropout", "_dropout"},
    {"dropout((x + b))", "dropout_bias_add", "_dropout"},
    {"dropout((x + x))", "dropout_add", "_dropout"},
    {"(x + dropout((x + b)))", "dropout_residual_bias_add", "_residual"},
    {NULL, NULL, NULL},
};

static const Pattern *pattern_of(const Kernel *k) {
  const char *roles[MAX_INPUTS];
  for (int i = 0; i < k->node->nin; i++) roles[i] = k->broadcast[i] ? "b" : "x";
  static const ExprDialect shape_dialect = {"", "dropout(%s)"};
  char shape[1800];
  int used = snprintf(shape, sizeof shape, "%s", k->accumulate ? "+= " : "");
  expr_to_c(&k->node->expr, roles, &shape_dialect, shape + used, (int)sizeof shape - used);
  for (const Pattern *p = patterns; p->shape; p++)
    if (strcmp(p->shape, shape) == 0) return p;
  return NULL;
}

static int name_used(const KernelSet *ks, int before, const char *name) {
  for (int j = 0; j < before; j++)
    if (strcmp(ks->kernels[j].name, name) == 0) return 1;
  return 0;
}

/* ew_bias_add, ew_bias_add_2 for a second kernel of the same pattern, ew_7 for one of none. */
static void name_kernel(KernelSet *ks, int index) {
  Kernel *k = &ks->kernels[index];
  const Pattern *p = pattern_of(k);
  k->role = p ? p->role : "";
  char base[48];
  if (p)
    snprintf(base, sizeof base, "ew_%s", p->name);
  else
    snprintf(base, sizeof base, "ew_%d", index);
  snprintf(k->name, sizeof k->name, "%s", base);
  for (int n = 2; name_used(ks, index, k->name); n++)
    snprintf(k->name, sizeof k->name, "%s_%d", base, n);
}

void emit_collect_kernels(Emission *e) {
  KernelSet *ks = &e->kernels;
  memset(ks, 0, sizeof *ks);
  int capacity = 0;
  for (int s = 0; s < STAGES; s++) capacity += e->stage[s]->nnodes;
  ks->kernels = calloc((size_t)capacity + 1, sizeof *ks->kernels);
  for (int s = 0; s < STAGES; s++) {
    const Graph *g = e->stage[s];
    ks->kernel_of[s] = malloc(((size_t)g->nnodes + 1) * sizeof(int));
    for (int i = 0; i < g->nnodes; i++) {
      ks->kernel_of[s][i] = -1;
      if (g->nodes[i].op != OP_EW) continue;
      Kernel k;
      describe(e->plan, g, &g->nodes[i], &k);
      int found = -1;
      for (int j = 0; j < ks->count && found < 0; j++)
        if (strcmp(ks->kernels[j].signature, k.signature) == 0) found = j;
      if (found < 0) ks->kernels[found = ks->count++] = k;
      ks->kernel_of[s][i] = found;
    }
  }
  for (int k = 0; k < ks->count; k++) name_kernel(ks, k);
}

void emit_free_kernels(KernelSet *k) {
  free(k->kernels);
  for (int s = 0; s < STAGES; s++) free(k->kernel_of[s]);
  memset(k, 0, sizeof *k);
}

/* ---- C
 * ---------------------------------------------------------------------------------------- */

/* "int64_t n, int64_t p, const real *restrict x0, const real *restrict x1, int64_t n1, real
 * *restrict out, ..." (first: the name of the first parameter, n or row) */
static void parameters(const Kernel *k, const char *first, const char *real, const char *grad,
                       const char *restrict_, const char *index, const char *keys, char *buf,
                       int len) {
  int used = snprintf(buf, len, "%s %s, %s p", index, first, index);
  for (int i = 0; i < k->node->nin; i++) {
    used += snprintf(buf + used, len - used, ", const %s *%s%s", real, restrict_, input_names[i]);
    if (k->broadcast[i]) used += snprintf(buf + used, len - used, ", %s n%d", index, i);
  }
  used += snprintf(buf + used, len - used, ", %s *%sout", k->accumulate ? grad : real, restrict_);
  if (k->dropouts) snprintf(buf + used, len - used, ", %s", keys);
}

static void comment(const Emission *e, int index, FILE *f) {
  const Kernel *k = &e->kernels.kernels[index];
  char body[1800];
  expr_to_c(&k->node->expr, input_names, NULL, body, sizeof body);
  fprintf(f, "/* %s: out %s %s", k->name, k->accumulate ? "+=" : "=", body);
  int any = 0;
  for (int i = 0; i < k->node->nin; i++)
    if (k->broadcast[i])
      fprintf(f, "%s%s", any++ ? ", " : "; repeating every n_i elements: ", input_names[i]);
  char where[ESCAPED_SIZE(WHERE_LEN)];
  fprintf(f, "\n * (first made at %s) */\n",
          escape(ESC_C_COMMENT, k->node->where, where, sizeof where));
}

/* The expression with full inputs read at i and repeating ones at j of their current row. */
static void body_c(const Kernel *k, char *buf, int len) {
  char names[MAX_INPUTS][32];
  const char *spelled[MAX_INPUTS];
  for (int i = 0; i < k->node->nin; i++) {
    snprintf(names[i], sizeof names[i], k->broadcast[i] ? "%s_row[j]" : "%s[i]", input_names[i]);
    spelled[i] = names[i];
  }
  static const ExprDialect c_dialect = {"rt_", "rt_dropout(%s, %.9g, keys, %d, i)"};
  expr_to_c(&k->node->expr, spelled, &c_dialect, buf, len);
}

/* "row, p, x0, x1, n1, out, keys": the row function's arguments, as the kernel names them. */
static void row_arguments(const Kernel *k, char *buf, int len) {
  int used = snprintf(buf, len, "row, p");
  for (int i = 0; i < k->node->nin; i++) {
    used += snprintf(buf + used, len - used, ", %s", input_names[i]);
    if (k->broadcast[i]) used += snprintf(buf + used, len - used, ", n%d", i);
  }
  snprintf(buf + used, len - used, ", out%s", k->dropouts ? ", keys" : "");
}

/* One row, compiled for each vector width the CPU may have (CPU_WIDE), and the kernel: its rows
 * shared among the threads (none when the tensor is empty: the rows a rank's experts receive may
 * be none). */
static void kernel_c(const Emission *e, int index, FILE *f) {
  const Kernel *k = &e->kernels.kernels[index];
  char params[1024], row_params[1024], args[1024], body[4096];
  parameters(k, "n", "act_t", "real", "restrict ", "int64_t", "const EwKeys *keys", params,
             sizeof params);
  parameters(k, "row", "act_t", "real", "restrict ", "int64_t", "const EwKeys *keys", row_params,
             sizeof row_params);
  row_arguments(k, args, sizeof args);
  body_c(k, body, sizeof body);
  comment(e, index, f);
  fprintf(f, "CPU_WIDE static void %s_row(%s) {\n", k->name, row_params);
  for (int i = 0; i < k->node->nin; i++)
    if (k->broadcast[i])
      fprintf(f, "  const act_t *%s_row = %s + row %% (n%d / p) * p;\n", input_names[i],
              input_names[i], i);
  fprintf(f,
          "#pragma omp simd\n  for (int64_t j = 0; j < p; j++) {\n    int64_t i = row * p + j;\n");
  fprintf(f, "    out[i] %s %s;\n  }\n}\n\n", k->accumulate ? "+=" : "=", body);
  fprintf(f, "void %s(%s) {\n  if (p == 0) return;\n#pragma omp parallel for\n", k->name, params);
  fprintf(f, "  for (int64_t row = 0; row < n / p; row++) %s_row(%s);\n}\n\n", k->name, args);
}

void emit_kernels_c(const Emission *e, FILE *f) {
  char name[ESCAPED_SIZE(NAME_LEN)], file[ESCAPED_SIZE(WHERE_LEN)];
  fprintf(
      f,
      "/* fused.c: the fused elementwise kernels of %s for the CPU (generated by plait from %s).\n"
      " * Each loops over rows of p elements, a row at a time at the CPU's widest vectors "
      "(CPU_WIDE); an\n"
      " * input repeating every n_i elements (a bias, a position table) is read at the same place "
      "of its\n"
      " * own row. */\n",
      escape(ESC_C_COMMENT, e->plan->model.name, name, sizeof name),
      escape(ESC_C_COMMENT, e->plan->model.file, file, sizeof file));
  fprintf(f, "#include \"ew_cpu.h\"\n#include \"fused.h\"\n\n");
  for (int k = 0; k < e->kernels.count; k++) kernel_c(e, k, f);
}

void emit_kernels_h(const Emission *e, FILE *f) {
  char name[ESCAPED_SIZE(NAME_LEN)];
  fprintf(f,
          "/* fused.h: the fused elementwise kernels of %s (generated by plait): out over n "
          "elements in rows\n"
          " * of p; inputs that repeat pass their length n_i. The CPU build compiles fused.c, the "
          "CUDA build\n"
          " * fused_cuda.c (the same kernels as source for NVRTC). */\n",
          escape(ESC_C_COMMENT, e->plan->model.name, name, sizeof name));
  fprintf(f, "#ifndef PLAIT_FUSED_H\n#define PLAIT_FUSED_H\n\n#include \"rt.h\"\n\n");
  for (int index = 0; index < e->kernels.count; index++) {
    char params[1024];
    parameters(&e->kernels.kernels[index], "n", "act_t", "real", "", "int64_t",
               "const EwKeys *keys", params, sizeof params);
    fprintf(f, "void %s(%s);\n", e->kernels.kernels[index].name, params);
  }
  fprintf(f, "\n#endif\n");
}

/* ---- CUDA
 * ------------------------------------------------------------------------------------- */

/* The expression over element i, an input read from memory (ld(x0[i]), or ld(x1[i % n1])
 * repeating), or, in the vector loop, from the 8 values loaded for it (v0[j]). */
static void body_cuda(const Kernel *k, int vector, char *buf, int len) {
  char names[MAX_INPUTS][48];
  const char *spelled[MAX_INPUTS];
  for (int i = 0; i < k->node->nin; i++) {
    if (vector) snprintf(names[i], sizeof names[i], "v%d[j]", i);
    else if (k->broadcast[i])
      snprintf(names[i], sizeof names[i], "ld(%s[i %% n%d])", input_names[i], i);
    else snprintf(names[i], sizeof names[i], "ld(%s[i])", input_names[i]);
    spelled[i] = names[i];
  }
  static const ExprDialect cuda_dialect = {"rt_", "rt_dropout(%s, %.9g, &keys, %d, i)"};
  expr_to_c(&k->node->expr, spelled, &cuda_dialect, buf, len);
}

/* The vector loop's condition (every pointer 16-byte aligned, and every repeating input's length
 * a multiple of 8, so that 8 consecutive elements fall in one run of it, at i0 mod n_i), its
 * arrays and its loads. */
static void vector_parts(const Kernel *k, char *wide, char *arrays, char *loads, int len) {
  int w = 0, a = snprintf(arrays, len, "y[8]"), l = 0;
  loads[0] = 0;
  for (int i = 0; i < k->node->nin; i++) {
    w += snprintf(wide + w, len - w, "rt_wide(%s) && ", input_names[i]);
    if (k->broadcast[i]) w += snprintf(wide + w, len - w, "n%d %% 8 == 0 && ", i);
    a += snprintf(arrays + a, len - a, ", v%d[8]", i);
    if (k->broadcast[i])
      l += snprintf(loads + l, len - l, "      rt_load8(%s + i0 %% n%d, v%d);\n", input_names[i], i,
                    i);
    else
      l += snprintf(loads + l, len - l, "      rt_load8(%s + i0, v%d);\n", input_names[i], i);
  }
  snprintf(wide + w, len - w, "rt_wide(out)");
  if (k->accumulate) snprintf(loads + l, len - l, "      rt_load8(out + i0, y);\n");
}

/* The kernel as CUDA C: activations are act_t (bf16), gradients of parameters float, arithmetic
 * in float; ld(), st(), rt_load8() and rt_store8() convert (the runtime's NVRTC prelude defines
 * them and the rt_ functions). Threads stride over a grid the launch sizes to the device, taking
 * 8 consecutive elements at a time (one 16-byte load per input, one store) where vector_parts'
 * condition holds; the elements past the last 8, or all of them otherwise, one at a time. An
 * input repeating every n_i elements is read at i mod n_i (row i / p of the output reads row (i
 * / p) mod (n_i / p) of the input, at the same place j = i mod p). Dropout draws by the
 * element's index i on both paths, and its p is a double, as in the C kernels, so that both draw
 * the same masks. */
int emit_kernel_cuda_source(const Emission *e, int index, char *buf, int len) {
  const Kernel *k = &e->kernels.kernels[index];
  char params[1024], scalar[4096], vector[4096], wide[1024], arrays[1024], loads[1024], store[4200];
  parameters(k, "n", "act_t", "float", "", "long long", "EwKeys keys", params, sizeof params);
  body_cuda(k, 0, scalar, sizeof scalar);
  body_cuda(k, 1, vector, sizeof vector);
  vector_parts(k, wide, arrays, loads, sizeof wide);
  snprintf(store, sizeof store, k->accumulate ? "out[i] += %s;" : "out[i] = st(%s);", scalar);
  return snprintf(buf, len,
                  "extern \"C\" __global__ void %s(%s) {\n"
                  "  long long step = (long long)gridDim.x * blockDim.x;\n"
                  "  long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "  (void)p;\n"
                  "  if (%s) {\n"
                  "    for (long long w = first; w < n / 8; w += step) {\n"
                  "      long long i0 = w * 8;\n"
                  "      float %s;\n"
                  "%s"
                  "#pragma unroll\n"
                  "      for (int j = 0; j < 8; j++) {\n"
                  "%s"
                  "        y[j] %s %s;\n"
                  "      }\n"
                  "      rt_store8(out + i0, y);\n"
                  "    }\n"
                  "    first += n / 8 * 8;\n"
                  "  }\n"
                  "  for (long long i = first; i < n; i += step) %s\n"
                  "}\n",
                  k->name, params, wide, arrays, loads,
                  k->dropouts ? "        long long i = i0 + j;\n" : "", k->accumulate ? "+=" : "=",
                  vector, store);
}

/* A C string literal of the source, one line per line. */
static void string_literal(const char *text, FILE *f) {
  fprintf(f, "    \"");
  for (const char *c = text; *c; c++) {
    if (*c == '\n') fprintf(f, c[1] ? "\\n\"\n    \"" : "\\n\"");
    else if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
    else fputc(*c, f);
  }
}

void emit_kernels_cuda(const Emission *e, FILE *f) {
  char name[ESCAPED_SIZE(NAME_LEN)];
  fprintf(f,
          "/* fused_cuda.c: the fused elementwise kernels of %s as CUDA source, compiled at "
          "start-up by NVRTC\n"
          " * for the device in hand (generated by plait); each launcher starts its kernel by\n"
          " * its place in plait_cuda_kernels. */\n",
          escape(ESC_C_COMMENT, e->plan->model.name, name, sizeof name));
  fprintf(f, "#include \"fused.h\"\n#include \"cuda_rt.h\"\n\n");
  fprintf(f, "const CudaKernelSource plait_cuda_kernels[] = {\n");
  for (int index = 0; index < e->kernels.count; index++) {
    char src[16384];
    emit_kernel_cuda_source(e, index, src, sizeof src);
    fprintf(f, "  {\"%s\",\n", e->kernels.kernels[index].name);
    string_literal(src, f);
    fprintf(f, "},\n");
  }
  fprintf(f, "};\nconst int plait_cuda_kernel_count = %d;\n\n", e->kernels.count);
  for (int index = 0; index < e->kernels.count; index++) {
    const Kernel *k = &e->kernels.kernels[index];
    char params[1024];
    parameters(k, "n", "act_t", "real", "", "int64_t", "const EwKeys *keys", params, sizeof params);
    fprintf(f, "void %s(%s) {\n  void *args[] = {&n, &p", k->name, params);
    for (int i = 0; i < k->node->nin; i++) {
      fprintf(f, ", &%s", input_names[i]);
      if (k->broadcast[i]) fprintf(f, ", &n%d", i);
    }
    fprintf(f, ", &out%s};\n  cuda_launch_fused(%d, n, args);\n}\n\n",
            k->dropouts ? ", (void *)keys" : "", index);
  }
}
