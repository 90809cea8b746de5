/* core.c: the module plait.core: the graph builder behind lib/plait's tensors, parameters and
 * layers. */
#include "front/core.h"

#include <lauxlib.h>
#include <math.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "front/layers.h"
#include "front/lua_files.h"
#include "front/lua_limits.h"
#include "ir/shape.h"

static Builder *builder(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* The innermost frame outside lib/plait; where the model file hands a library function to plait
 * directly (embed = nn.embedding), there is none and the model file itself is named. */
void core_user_where(lua_State *L, char *buf, int len) {
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0 && strncmp(ar.source, "@lib/plait/", 11) != 0) {
      snprintf(buf, len, "%s:%d", ar.short_src, ar.currentline);
      return;
    }
  }
  lua_getfield(L, LUA_REGISTRYINDEX, CORE_MODEL_FILE);
  snprintf(buf, len, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
  lua_pop(L, 1);
}

/* Raises a Lua error "file:line: message" at the model file's line. */
static int fail(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(lua_State *L, const char *fmt, ...) {
  char where[WHERE_LEN], msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  core_user_where(L, where, sizeof where);
  lua_pushfstring(L, "%s: %s", where, msg);
  return lua_error(L);
}

/* A name that becomes an identifier or a key of the program, its checkpoints and plans (`what`
 * names its kind): plain, at most NAME_LEN - 1 characters; anything else is refused at the model
 * file's line. */
static const char *plain_name_arg(lua_State *L, int arg, const char *what) {
  const char *name = luaL_checkstring(L, arg);
  char shown[120];
  if (!escape_plain_name(name, NAME_LEN - 1))
    fail(L, "%s '%s' is not a plain name: give it 1 to %d ASCII letters, digits, '_', '.' or '-'",
         what, escape(ESC_TEXT, name, shown, sizeof shown), NAME_LEN - 1);
  return name;
}

static int check_graph(lua_State *L, Builder *b) {
  if (!b->graph) return fail(L, "tensors can only be made while plait traces a model's stages");
  return 0;
}

/* The stages in the order they are traced (Builder.stage_kind is 1 + an index here):
 * block_variant, another layer's block, repeats, and core.variant_done ends the run of them; the
 * head's output ends the trace ("done"). */
static const char *const stage_names[] = {"embed", "block", "block_variant", "head", "done", NULL};
enum { STAGE_EMBED = 1, STAGE_BLOCK, STAGE_VARIANT, STAGE_HEAD, STAGE_DONE };

/* Dims and the configuration change only until the head's loss ends the trace. */
static int check_open(lua_State *L, Builder *b) {
  if (b->stage_kind == STAGE_DONE) return fail(L, "the model is traced: it cannot change any more");
  return 0;
}

/* After an addition to the model that failed: when the memory budget refused it, that limit's
 * error. */
static void check_memory(lua_State *L, Builder *b) {
  if (b->model->budget && b->model->budget->exceeded) lua_limits_error(L);
}

/* An addition to the model or a graph: its index, or (-1: the budget refused it) the memory limit's
 * error. */
static int added(lua_State *L, int index) {
  if (index < 0) lua_limits_error(L);
  return index;
}

/* Integer argument `arg` (optional with a default when opt), which must fit an int. */
static int int_arg(lua_State *L, int arg, int opt, int default_value) {
  lua_Integer v = opt ? luaL_optinteger(L, arg, default_value) : luaL_checkinteger(L, arg);
  if (v < INT_MIN || v > INT_MAX)
    return fail(L, "argument %d: %lld is out of range", arg, (long long)v);
  return (int)v;
}

/* A tensor argument: a table with an integer field id naming a tensor of the current stage. */
static int tensor_arg(lua_State *L, Builder *b, int arg) {
  check_graph(L, b);
  if (!lua_istable(L, arg)) return fail(L, "expected a tensor, got %s", luaL_typename(L, arg));
  lua_getfield(L, arg, "id");
  int isnum;
  lua_Integer id = lua_tointegerx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum || id < 0 || id >= b->graph->ntensors)
    return fail(
        L,
        "a tensor from another stage was used in stage %s; pass values between stages as the "
        "stage functions' arguments and results",
        b->graph->name);
  return (int)id;
}

/* The last dim of tensor t, for an operation (`what`) over it; a tensor of no axes has none. */
static const Dim *last_dim(lua_State *L, Builder *b, int t, const char *what) {
  const Tensor *x = &b->graph->tensors[t];
  if (x->ndim < 1) fail(L, "%s takes a tensor of at least one axis, not a scalar", what);
  return &b->model->dims[x->dims[x->ndim - 1]];
}

static int dim_arg(lua_State *L, Builder *b, const char *name) {
  int d = model_find_dim(b->model, name);
  if (d < 0) return fail(L, "unknown dim '%s'", name);
  return d;
}

/* A tensor of more elements than this is a size gone wrong (a vocabulary of 1e18): its counts,
 * and the memory and traffic made of them, would overflow. */
#define MAX_TENSOR_ELEMS 1099511627776.0 /* 2^40 */

/* Refuses a shape whose elements exceed MAX_TENSOR_ELEMS, naming its dims (the config keys they
 * come from) and their sizes. */
static int check_elements(lua_State *L, Builder *b, int ndim, const int *dims) {
  double n = 1;
  for (int i = 0; i < ndim; i++) n *= (double)b->model->dims[dims[i]].size;
  if (n <= MAX_TENSOR_ELEMS) return 0;
  char shape[256], sizes[256];
  size_t used = 0, used_sizes = 0;
  for (int i = 0; i < ndim; i++) {
    const Dim *d = &b->model->dims[dims[i]];
    used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%s", i ? ", " : "", d->name);
    used_sizes += (size_t)snprintf(sizes + used_sizes, sizeof sizes - used_sizes, "%s%lld",
                                   i ? " × " : "", (long long)d->size);
    if (used >= sizeof shape || used_sizes >= sizeof sizes) break;
  }
  return fail(L,
              "a tensor [%s] of %s = %.3g elements, beyond what plait plans (2^40); check the "
              "config's sizes",
              shape, sizes, n);
}

/* Reads a list of dim names into dims. */
static int dims_arg(lua_State *L, Builder *b, int arg, int *dims) {
  luaL_checktype(L, arg, LUA_TTABLE);
  int n = (int)lua_rawlen(L, arg);
  if (n > MAX_DIMS) return fail(L, "tensors have at most %d axes", MAX_DIMS);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, arg, i + 1);
    dims[i] = dim_arg(L, b, luaL_checkstring(L, -1));
    lua_pop(L, 1);
  }
  return check_elements(L, b, n, dims) ? -1 : n;
}

static void name_tensor(Builder *b, int t, const char *prefix) {
  snprintf(b->graph->tensors[t].name, NAME_LEN, "%s%d", prefix, b->ntensor_names++);
}

/* Adds node n (its inputs set) with outputs shaped by shape inference; returns the first output. */
static int add_node(lua_State *L, Builder *b, Node *n) {
  Diag d;
  Shapes s;
  core_user_where(L, n->where, sizeof n->where);
  if (shape_infer(b->model, b->graph, n, &s, &d)) {
    check_memory(L, b);
    lua_pushstring(L, d.msg);
    return lua_error(L);
  }
  n->nout = s.nout;
  for (int k = 0; k < s.nout; k++) check_elements(L, b, s.ndim[k], s.dims[k]);
  for (int k = 0; k < s.nout; k++) {
    n->out[k] = added(L, graph_tensor(b->graph, T_ACT, s.dtype[k], s.ndim[k], s.dims[k], NULL));
    name_tensor(b, n->out[k], "t");
  }
  added(L, graph_node(b->graph, n));
  lua_pushinteger(L, n->out[0]);
  return 1;
}

static int l_dim(lua_State *L) {
  Builder *b = builder(L);
  check_open(L, b);
  const char *name = plain_name_arg(L, 1, "dim");
  lua_Integer size = luaL_checkinteger(L, 2), granule = luaL_optinteger(L, 3, 1);
  if (size < 1) return fail(L, "dim %s: size %lld must be positive", name, (long long)size);
  if (granule < 1 || size % granule != 0)
    return fail(L, "dim %s: size %lld is not a whole number of pieces of %lld", name,
                (long long)size, (long long)granule);
  if (model_dim(b->model, name, size, granule) < 0) {
    check_memory(L, b);
    int d = model_find_dim(b->model, name);
    return fail(L, "dim '%s' is %lld already, not %lld", name,
                (long long)b->model->dims[d].unpadded, (long long)size);
  }
  lua_pushstring(L, name);
  return 1;
}

/* The vocabulary, padded up to a multiple of 128·tp as Megatron pads it. */
static int l_vocab_dim(lua_State *L) {
  Builder *b = builder(L);
  check_open(L, b);
  lua_Integer vocab = luaL_checkinteger(L, 1);
  if (vocab < 1) return fail(L, "vocab %lld must be positive", (long long)vocab);
  int d = model_dim(b->model, "vocab", vocab, 1);
  if (d < 0) {
    check_memory(L, b);
    return fail(L, "the vocabulary is %lld already, not %lld",
                (long long)b->model->dims[model_find_dim(b->model, "vocab")].unpadded,
                (long long)vocab);
  }
  int64_t multiple = 128LL * b->tp;
  b->model->dims[d].size = (vocab + multiple - 1) / multiple * multiple;
  b->model->vocab_dim = d;
  lua_pushstring(L, "vocab");
  return 1;
}

static int l_input(lua_State *L) {
  Builder *b = builder(L);
  check_graph(L, b);
  const char *name = plain_name_arg(L, 1, "input");
  if (strpbrk(name, ".-") || (name[0] >= '0' && name[0] <= '9'))
    return fail(L,
                "input '%s' is not a C identifier: use letters, digits and '_', not first a digit",
                name);
  int dims[MAX_DIMS], n = dims_arg(L, b, 2, dims);
  DType dt = strcmp(luaL_checkstring(L, 3), "int") == 0 ? DT_INT : DT_REAL;
  Graph *g = b->graph;
  if (g->ninputs == (int)(sizeof g->inputs / sizeof *g->inputs))
    return fail(L, "stage %s takes at most %d inputs", g->name, g->ninputs);
  int t = added(L, graph_tensor(g, T_INPUT, dt, n, dims, name));
  g->inputs[g->ninputs++] = t;
  lua_pushinteger(L, t);
  return 1;
}

static const char *param_name(const void *model, int id) {
  return ((const Model *)model)->params[id].name;
}
static const char *constant_name(const void *model, int id) {
  return ((const Model *)model)->constants[id].name;
}

static int find_param(const Builder *b, const char *name, ParamScope scope) {
  return name_index_find(&b->param_index[scope], name, param_name, b->model);
}

/* The slot of leaf `id` in *leaves, grown to hold it (a fresh slot belongs to no stage). */
static Leaf *leaf_slot(lua_State *L, Builder *b, Leaf **leaves, int *cap, int id) {
  if (id >= *cap) {
    int cap2 = *cap ? *cap : 16;
    while (cap2 <= id) cap2 *= 2;
    Leaf *grown = budget_realloc(b->model->budget, *leaves, (size_t)*cap * sizeof **leaves,
                                 (size_t)cap2 * sizeof **leaves);
    if (!grown) lua_limits_error(L);
    memset(grown + *cap, 0, (size_t)(cap2 - *cap) * sizeof *grown);
    *leaves = grown, *cap = cap2;
  }
  return &(*leaves)[id];
}

/* The stage's tensor of leaf `id` of kind `kind` (parameter or constant id): one per stage that
 * uses it. */
static int leaf_tensor(lua_State *L, Builder *b, TensorKind kind, int id, int ndim, const int *dims,
                       const char *name) {
  Leaf *leaf = kind == T_PARAM ? leaf_slot(L, b, &b->param_leaves, &b->param_leaves_cap, id)
                               : leaf_slot(L, b, &b->constant_leaves, &b->constant_leaves_cap, id);
  if (leaf->stage == b->stages_begun) return leaf->tensor;
  int t = added(L, graph_tensor(b->graph, kind, DT_REAL, ndim, dims, name));
  b->graph->tensors[t].param = id;
  leaf->stage = b->stages_begun, leaf->tensor = t;
  return t;
}

static int param_tensor(lua_State *L, Builder *b, int p) {
  const Param *pm = &b->model->params[p];
  return leaf_tensor(L, b, T_PARAM, p, pm->ndim, pm->dims, pm->name);
}

static int constant_tensor(lua_State *L, Builder *b, int c) {
  const Constant *k = &b->model->constants[c];
  return leaf_tensor(L, b, T_CONST, c, k->ndim, k->dims, k->name);
}

/* The count of values of a constant of these dims (past CONSTANT_MAX_ELEMS: that plus one). */
static int64_t constant_count(const Model *m, int ndim, const int *dims) {
  int64_t count = 1;
  for (int i = 0; i < ndim; i++) {
    int64_t size = m->dims[dims[i]].size;
    if (size > 0 && count > CONSTANT_MAX_ELEMS / size) return CONSTANT_MAX_ELEMS + 1;
    count *= size;
  }
  return count;
}

/* Pushes value i of the constant: the list's at `arg`, or what its function returns for the
 * row-major (0-based) indices of i. Returns the status of the call. */
static int push_value(lua_State *L, const Model *m, const Constant *k, int arg, int64_t i) {
  if (lua_type(L, arg) == LUA_TTABLE) {
    lua_rawgeti(L, arg, i + 1);
    return LUA_OK;
  }
  lua_pushvalue(L, arg);
  int64_t index[MAX_DIMS];
  for (int d = k->ndim - 1; d >= 0; d--) {
    int64_t size = m->dims[k->dims[d]].size;
    index[d] = i % size, i /= size;
  }
  for (int d = 0; d < k->ndim; d++) lua_pushinteger(L, index[d]);
  return lua_pcall(L, k->ndim, 1, 0);
}

/* k's values from `arg`, into k->values (count of them); on an error the values are freed and
 * the error raised. */
static void fill_values(lua_State *L, const Model *m, Constant *k, int arg) {
  size_t bytes = (size_t)k->count * sizeof(double);
  for (int64_t i = 0; i < k->count; i++) {
    int status = push_value(L, m, k, arg, i), isnum = 0;
    if (status == LUA_OK) k->values[i] = lua_tonumberx(L, -1, &isnum);
    if (status == LUA_OK && isnum && isfinite(k->values[i])) {
      lua_pop(L, 1);
      continue;
    }
    budget_realloc(m->budget, k->values, bytes, 0);
    if (status != LUA_OK) lua_error(L);
    fail(L, "constant '%s': value %lld is not a finite number", k->name, (long long)i + 1);
  }
}

/* The constant named `name`, or a new one from the values at stack index `arg` (a list of
 * numbers in row-major order, or a function of the indices). */
static int find_or_make_constant(lua_State *L, Builder *b, const char *name, int ndim,
                                 const int *dims, int arg) {
  Model *m = b->model;
  int64_t count = constant_count(m, ndim, dims);
  int found = name_index_find(&b->constant_index, name, constant_name, m);
  if (found >= 0) {
    if (m->constants[found].count != count)
      return fail(L, "constant '%s' is made twice with different shapes", name);
    return found;
  }
  if (count > CONSTANT_MAX_ELEMS)
    return fail(L,
                "constant '%s' has more than %d elements, the most a program carries: compute "
                "it from primitives, or make it a parameter with trainable = false",
                name, CONSTANT_MAX_ELEMS);
  if (lua_type(L, arg) == LUA_TTABLE && (int64_t)lua_rawlen(L, arg) != count)
    return fail(L, "constant '%s' has %lld values for a shape of %lld elements", name,
                (long long)lua_rawlen(L, arg), (long long)count);
  size_t bytes = (size_t)count * sizeof(double);
  Constant k = {.ndim = ndim, .count = count, .values = budget_realloc(m->budget, NULL, 0, bytes)};
  if (!k.values) lua_limits_error(L);
  snprintf(k.name, sizeof k.name, "%s", name);
  memcpy(k.dims, dims, sizeof k.dims);
  core_user_where(L, k.where, sizeof k.where);
  fill_values(L, m, &k, arg);
  int c = model_constant(m, &k);
  if (c < 0) budget_realloc(m->budget, k.values, bytes, 0);
  added(L, c);
  added(L, name_index_add(&b->constant_index, c, constant_name, m, m->budget));
  return c;
}

/* core.dim_size(name): the size of a dim. */
static int l_dim_size(lua_State *L) {
  Builder *b = builder(L);
  int d = dim_arg(L, b, luaL_checkstring(L, 1));
  lua_pushinteger(L, b->model->dims[d].size);
  return 1;
}

/* core.constant(name, dims, values): a constant tensor of the model, computed by the model file
 * (values: a list, or a function of the indices that is called for each value). */
static int l_constant(lua_State *L) {
  Builder *b = builder(L);
  check_graph(L, b);
  const char *name = plain_name_arg(L, 1, "constant");
  int dims[MAX_DIMS], ndim = dims_arg(L, b, 2, dims);
  if (lua_type(L, 3) != LUA_TFUNCTION) luaL_checktype(L, 3, LUA_TTABLE);
  int c = find_or_make_constant(L, b, name, ndim, dims, 3);
  lua_pushinteger(L, constant_tensor(L, b, c));
  return 1;
}

/* Another layer's parameter: layer 0's of that name, of the same shape. */
static int layer_param(lua_State *L, Builder *b, const Param *p) {
  int found = find_param(b, p->name, p->scope);
  if (found < 0)
    return fail(L,
                "parameter '%s' is made by this layer but not by layer 0; layers share their "
                "parameters' names",
                p->name);
  const Param *q = &b->model->params[found];
  if (q->ndim != p->ndim || memcmp(q->dims, p->dims, (size_t)p->ndim * sizeof *p->dims) != 0)
    return fail(L, "parameter '%s' has another shape in this layer than in layer 0", p->name);
  lua_pushinteger(L, param_tensor(L, b, found));
  return 1;
}

/* A new parameter of the model, found by its name from now on. */
static int add_param(lua_State *L, Builder *b, const Param *p) {
  int i = added(L, model_param(b->model, p));
  added(L, name_index_add(&b->param_index[p->scope], i, param_name, b->model, b->model->budget));
  return i;
}

static int l_param(lua_State *L) {
  static const char *const inits[] = {"normal", "zeros", "ones", NULL};
  static const char *const hints[] = {"replicated", "column", "row", "vocab", NULL};
  Builder *b = builder(L);
  check_graph(L, b);
  Param p;
  memset(&p, 0, sizeof p);
  const char *name = plain_name_arg(L, 1, "parameter");
  snprintf(p.name, sizeof p.name, "%s", name);
  p.ndim = dims_arg(L, b, 2, p.dims);
  p.init = (InitKind)luaL_checkoption(L, 3, NULL, inits);
  p.std = luaL_checknumber(L, 4);
  p.hint = (ShardHint)luaL_checkoption(L, 5, NULL, hints);
  p.decay = lua_toboolean(L, 6);
  p.trainable = lua_isnoneornil(L, 7) ? 1 : lua_toboolean(L, 7);
  p.scope = b->scope;
  core_user_where(L, p.where, sizeof p.where);
  if (b->tracing_variant) return layer_param(L, b, &p);
  if (find_param(b, p.name, p.scope) >= 0)
    return fail(L, "parameter '%s' is defined twice; give each layer its own name", p.name);
  if ((p.hint == HINT_ROW && p.ndim != 2 && p.ndim != 3) ||
      ((p.hint == HINT_COLUMN || p.hint == HINT_VOCAB) && p.ndim < 1))
    return fail(L, "parameter '%s': a %s hint needs a matrix", p.name, hints[p.hint]);
  lua_pushinteger(L, param_tensor(L, b, add_param(L, b, &p)));
  return 1;
}

static int l_param_ref(lua_State *L) {
  Builder *b = builder(L);
  check_graph(L, b);
  int p = find_param(b, luaL_checkstring(L, 1), SCOPE_MODEL);
  if (p < 0) return 0;
  if (b->graph == &b->model->head && strcmp(b->model->params[p].name, "wte") == 0)
    b->model->tied = 1;
  lua_pushinteger(L, param_tensor(L, b, p));
  return 1;
}

/* The elementwise op a model file asks for by `name` (plait.core.ew's), or -1 when none. */
static int ew_op_named(const char *name) {
  for (int op = 0; op < E_OPCOUNT; op++)
    if (expr_op_use(op) != EW_INTERNAL && strcmp(expr_op_model_name(op), name) == 0) return op;
  return -1;
}

/* An operand of an elementwise op: a tensor becomes a node input, a number a constant. */
static int ew_operand(lua_State *L, Builder *b, int arg, Node *n) {
  if (lua_type(L, arg) == LUA_TNUMBER) return expr_const(&n->expr, lua_tonumber(L, arg));
  int t = tensor_arg(L, b, arg);
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] == t) return expr_input(&n->expr, i);
  n->in[n->nin] = t;
  return expr_input(&n->expr, n->nin++);
}

static int l_ew(lua_State *L) {
  Builder *b = builder(L);
  const char *name = luaL_checkstring(L, 1);
  int op = ew_op_named(name);
  if (op < 0) return fail(L, "unknown elementwise op '%s'", name);
  Node n = node_new(OP_EW, 0, NULL);
  int a = ew_operand(L, b, 2, &n);
  if (expr_arity(op) == 2) expr_binary(&n.expr, op, a, ew_operand(L, b, 3, &n));
  else expr_unary(&n.expr, op, a);
  if (n.nin == 0) return fail(L, "%s of numbers alone: use Lua arithmetic", name);
  return add_node(L, b, &n);
}

static int l_dropout(lua_State *L) {
  Builder *b = builder(L);
  Node n = node_new(OP_EW, 0, NULL);
  int a = ew_operand(L, b, 1, &n);
  expr_dropout(&n.expr, a, luaL_checknumber(L, 2), b->dropout_sites++);
  if (n.nin == 0) return fail(L, "dropout of a number alone: it takes a tensor");
  return add_node(L, b, &n);
}

static int l_matmul(lua_State *L) {
  Builder *b = builder(L);
  int in[2] = {tensor_arg(L, b, 1), tensor_arg(L, b, 2)};
  Node n = node_new(OP_MATMUL, 2, in);
  n.a.mm.trans_b = lua_toboolean(L, 3);
  return add_node(L, b, &n);
}

/* norm(kind, x, weight, bias, eps): a layer norm takes a weight and a bias, a weight alone or
 * neither, an RMS norm a weight or none. */
static int l_norm(lua_State *L) {
  Builder *b = builder(L);
  static const char *const kinds[] = {"layer", "rms", NULL};
  NormKind kind = (NormKind)luaL_checkoption(L, 1, NULL, kinds);
  int in[3] = {tensor_arg(L, b, 2), -1, -1};
  int with_weight = !lua_isnoneornil(L, 3), with_bias = !lua_isnoneornil(L, 4);
  if (kind == NORM_LAYER && with_bias && !with_weight)
    return fail(L, "a layer norm takes a bias only beside a weight");
  if (kind == NORM_RMS && with_bias) return fail(L, "an RMS norm takes no bias");
  if (with_weight) in[1] = tensor_arg(L, b, 3);
  if (with_bias) in[2] = tensor_arg(L, b, 4);
  Node n = node_new(OP_NORM, 1 + with_weight + with_bias, in);
  n.a.norm.kind = kind;
  n.a.norm.eps = luaL_checknumber(L, 5);
  n.a.norm.weighted = with_weight;
  n.a.norm.group = int_arg(L, 6, 1, 0);
  int64_t width = last_dim(L, b, in[0], "a norm")->size;
  if (n.a.norm.group < 0 || (n.a.norm.group && width % n.a.norm.group != 0))
    return fail(L, "a norm over groups of %d does not divide the width %lld", n.a.norm.group,
                (long long)width);
  return add_node(L, b, &n);
}

static int l_attention(lua_State *L) {
  Builder *b = builder(L);
  int in[3] = {tensor_arg(L, b, 1), tensor_arg(L, b, 2), tensor_arg(L, b, 3)};
  Node n = node_new(OP_ATTENTION, 3, in);
  AttnAttr *at = &n.a.attn;
  at->heads = int_arg(L, 4, 0, 0);
  at->kv_heads = int_arg(L, 5, 0, 0);
  at->causal = lua_toboolean(L, 6);
  at->rope = lua_toboolean(L, 7);
  at->rope_theta = luaL_checknumber(L, 8);
  at->window = luaL_optinteger(L, 9, 0);
  at->softcap = luaL_optnumber(L, 10, 0);
  at->scale = luaL_optnumber(L, 11, 0);
  at->alibi = lua_toboolean(L, 12);
  at->per_layer = -1;
  if (at->window < 0 || (at->window > 0 && !at->causal))
    return fail(
        L,
        "attention: a sliding window is a whole number of keys (%lld given) over causal attention",
        (long long)at->window);
  if (at->softcap < 0 || at->scale < 0)
    return fail(
        L, "attention: softcap and scale are positive numbers (or 0 for none and 1/√head_dim)");
  int64_t width = last_dim(L, b, in[0], "attention")->size;
  if (at->heads < 1 || at->kv_heads < 1 || at->heads % at->kv_heads != 0 || width % at->heads != 0)
    return fail(L, "attention: %d heads and %d kv heads do not fit a width of %lld", at->heads,
                at->kv_heads, (long long)width);
  at->head_dim = (int)(width / at->heads);
  if (at->rope && at->head_dim % 2 != 0)
    return fail(L, "attention: RoPE needs an even head_dim, not %d", at->head_dim);
  return add_node(L, b, &n);
}

/* core.rope(x, head_dim, rotary, interleaved, theta, scaling, factor, low_freq_factor,
 * high_freq_factor, original_positions): lib/plait has checked the options; the sizes are
 * checked against x here. */
static int l_rope(lua_State *L) {
  Builder *b = builder(L);
  int in = tensor_arg(L, b, 1);
  Node n = node_new(OP_ROPE, 1, &in);
  RopeShape *r = &n.a.rope;
  r->head_dim = int_arg(L, 2, 0, 0);
  r->rotary = int_arg(L, 3, 0, 0);
  r->interleaved = lua_toboolean(L, 4);
  r->theta = luaL_checknumber(L, 5);
  static const char *const scalings[] = {"none", "linear", "llama3", NULL};
  r->scaling = (RopeScalingKind)luaL_checkoption(L, 6, "none", scalings);
  r->factor = luaL_optnumber(L, 7, 1);
  r->low_freq_factor = luaL_optnumber(L, 8, 1);
  r->high_freq_factor = luaL_optnumber(L, 9, 4);
  r->original_positions = luaL_optnumber(L, 10, 8192);
  const Tensor *x = &b->graph->tensors[in];
  if (x->ndim != 3)
    return fail(L, "rope takes [batch, seq, heads·head_dim], not a tensor of %d axes", x->ndim);
  int64_t width = last_dim(L, b, in, "rope")->size;
  if (r->head_dim < 2 || width % r->head_dim != 0)
    return fail(L, "rope: head_dim %d does not divide the width %lld", r->head_dim,
                (long long)width);
  if (r->rotary < 2 || r->rotary > r->head_dim || r->rotary % 2 != 0)
    return fail(
        L, "rope: the rotated part must be an even number of dims from 2 to head_dim %d, not %d",
        r->head_dim, r->rotary);
  return add_node(L, b, &n);
}

/* Reads the part sizes at `arg` (a list of positive integers) into a. */
static int part_sizes(lua_State *L, int arg, PartAttr *a) {
  luaL_checktype(L, arg, LUA_TTABLE);
  a->nparts = (int)lua_rawlen(L, arg);
  if (a->nparts < 1 || a->nparts > MAX_PARTS)
    return fail(L, "split: 1 to %d parts, not %d", MAX_PARTS, a->nparts);
  for (int i = 0; i < a->nparts; i++) {
    lua_rawgeti(L, arg, i + 1);
    a->sizes[i] = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (a->sizes[i] < 1 || a->sizes[i] > INT_MAX)
      return fail(L, "split: part %d's size must be a whole number from 1 to %d", i + 1, INT_MAX);
  }
  return 0;
}

/* core.split(x, groups, sizes, part): part `part` (from 0) of each of x's groups along its last
 * dim. */
static int l_split(lua_State *L) {
  Builder *b = builder(L);
  int in = tensor_arg(L, b, 1);
  Node n = node_new(OP_SPLIT, 1, &in);
  n.a.parts.groups = int_arg(L, 2, 0, 0);
  part_sizes(L, 3, &n.a.parts);
  n.a.parts.part = int_arg(L, 4, 0, 0);
  last_dim(L, b, in, "split");
  return add_node(L, b, &n);
}

/* core.concat(list, groups): the tensors joined group by group along their last dim. */
static int l_concat(lua_State *L) {
  Builder *b = builder(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  int count = (int)lua_rawlen(L, 1), in[MAX_PARTS];
  if (count < 1 || count > MAX_PARTS)
    return fail(L, "concat: 1 to %d tensors, not %d", MAX_PARTS, count);
  Node n = node_new(OP_CONCAT, 0, NULL);
  n.a.parts.groups = int_arg(L, 2, 0, 0);
  n.a.parts.nparts = count;
  n.a.parts.part = -1;
  for (int i = 0; i < count; i++) {
    lua_rawgeti(L, 1, i + 1);
    in[i] = tensor_arg(L, b, lua_gettop(L));
    lua_pop(L, 1);
    int64_t width = last_dim(L, b, in[i], "concat")->size;
    if (n.a.parts.groups < 1 || width % n.a.parts.groups != 0)
      return fail(L, "concat: tensor %d's last dim (%lld) is not a whole number of %d groups",
                  i + 1, (long long)width, n.a.parts.groups);
    n.a.parts.sizes[i] = width / n.a.parts.groups;
  }
  n.nin = count;
  memcpy(n.in, in, sizeof(int) * (size_t)count);
  return add_node(L, b, &n);
}

/* core.topk(x, k, k_dim): the k largest of x's last dim and where they are (k_dim: k's dim). */
static int l_topk(lua_State *L) {
  Builder *b = builder(L);
  int in = tensor_arg(L, b, 1);
  Node n = node_new(OP_TOPK, 1, &in);
  n.a.moe.topk = int_arg(L, 2, 0, 0);
  n.a.moe.k_dim = dim_arg(L, b, luaL_checkstring(L, 3));
  n.a.moe.experts = (int)last_dim(L, b, in, "topk")->size;
  if (n.a.moe.topk < 1 || n.a.moe.topk > n.a.moe.experts)
    return fail(L, "topk: k = %d must be from 1 to the last dim's %d", n.a.moe.topk,
                n.a.moe.experts);
  add_node(L, b, &n);
  lua_pushinteger(L, n.out[1]);
  return 2;
}

/* A node of op over the tensors at arguments 1..count; its first output pushed, or with
 * `both`, its first two. */
static int moe_node(lua_State *L, OpKind op, int count, int both, MoeAttr attr) {
  Builder *b = builder(L);
  int in[MAX_INPUTS];
  for (int i = 0; i < count; i++) in[i] = tensor_arg(L, b, i + 1);
  Node n = node_new(op, count, in);
  n.a.moe = attr;
  add_node(L, b, &n);
  if (!both) return 1;
  lua_pushinteger(L, n.out[1]);
  return 2;
}

/* core.route(indices, priority, capacity_factor): the slots and per-expert counts of a topk's
 * indices; with a factor above 0 each expert keeps its rows of the largest priority (nil: the
 * earliest) up to its capacity. */
static int l_route(lua_State *L) {
  MoeAttr attr = {.capacity_factor = luaL_optnumber(L, 3, 0)};
  return moe_node(L, OP_ROUTE, lua_isnil(L, 2) ? 1 : 2, 1, attr);
}
/* core.dispatch(x, slots): each token's row at its slots. */
static int l_dispatch(lua_State *L) { return moe_node(L, OP_DISPATCH, 2, 0, (MoeAttr){0}); }
/* core.grouped_matmul(rows, w, counts, transpose): each expert's rows by its matrix. */
static int l_grouped_matmul(lua_State *L) {
  return moe_node(L, OP_GROUPED_MATMUL, 3, 0, (MoeAttr){.trans_b = lua_toboolean(L, 4)});
}
/* core.combine(rows, slots, weights): the rows at each token's slots, weighted and summed. */
static int l_combine(lua_State *L) { return moe_node(L, OP_COMBINE, 3, 0, (MoeAttr){0}); }
/* core.fractions(counts): a route's counts as fractions of its routed rows. */
static int l_fractions(lua_State *L) { return moe_node(L, OP_FRACTIONS, 1, 0, (MoeAttr){0}); }

/* core.add_loss(x, term): x again; term's sum, scaled as the loss is, added to the training
 * loss. */
static int l_add_loss(lua_State *L) {
  Builder *b = builder(L);
  int in[2] = {tensor_arg(L, b, 1), tensor_arg(L, b, 2)};
  Node n = node_new(OP_LOSS_TERM, 2, in);
  return add_node(L, b, &n);
}

static int l_embedding(lua_State *L) {
  Builder *b = builder(L);
  int in[2] = {tensor_arg(L, b, 1), tensor_arg(L, b, 2)};
  Node n = node_new(OP_EMBEDDING, 2, in);
  return add_node(L, b, &n);
}

static int l_xent(lua_State *L) {
  Builder *b = builder(L);
  int in[2] = {tensor_arg(L, b, 1), tensor_arg(L, b, 2)};
  Node n = node_new(OP_XENT, 2, in);
  int64_t width = last_dim(L, b, in[0], "cross entropy")->unpadded;
  n.a.xent.vocab = luaL_checkinteger(L, 3);
  if (n.a.xent.vocab <= 0) n.a.xent.vocab = width;
  n.a.xent.ignore_index = lua_isnoneornil(L, 4) ? XENT_NO_IGNORE : luaL_checkinteger(L, 4);
  if (n.a.xent.ignore_index != XENT_NO_IGNORE) b->model->masked_lm = 1;
  if (n.a.xent.vocab > width)
    return fail(L, "cross entropy: vocab %lld is wider than the logits (%lld)",
                (long long)n.a.xent.vocab, (long long)width);
  return add_node(L, b, &n);
}

static int l_shape(lua_State *L) {
  Builder *b = builder(L);
  int id = tensor_arg(L, b, 1);
  const Tensor *t = &b->graph->tensors[id];
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    const Dim *d = &b->model->dims[t->dims[i]];
    lua_createtable(L, 0, 2);
    lua_pushstring(L, d->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, d->unpadded);
    lua_setfield(L, -2, "size");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* Whether stage `kind` may begin after the stage being traced. */
static int stage_follows(const Builder *b, int kind) {
  switch (kind) {
  case STAGE_EMBED: return b->stage_kind == 0;
  case STAGE_BLOCK: return b->stage_kind == STAGE_EMBED;
  case STAGE_VARIANT: return b->stage_kind == STAGE_BLOCK || b->stage_kind == STAGE_VARIANT;
  case STAGE_HEAD: return b->stage_kind == STAGE_BLOCK;
  default: return 0;
  }
}

/* core.stage(name): "embed", "block", "head", or "block_variant": another layer's block, traced
 * afresh from the dropout sites layer 0 began with. */
static int l_stage(lua_State *L) {
  Builder *b = builder(L);
  int kind = 1 + luaL_checkoption(L, 1, NULL, stage_names);
  if (!stage_follows(b, kind))
    return fail(
        L,
        "plait traces a model's stages once, in order (embed, block, each other layer's block, "
        "head): not %s after %s",
        stage_names[kind - 1], b->stage_kind ? stage_names[b->stage_kind - 1] : "none");
  Model *m = b->model;
  b->stage_kind = kind;
  b->stages_begun++;
  b->tracing_variant = kind == STAGE_VARIANT;
  if (b->tracing_variant) {
    graph_free(&b->variant);
    graph_init(&b->variant, "block");
    b->variant.budget = m->budget;
    b->graph = &b->variant;
    b->dropout_sites = b->block_first_site;
  } else {
    b->graph = kind == STAGE_EMBED ? &m->embed : kind == STAGE_BLOCK ? &m->block : &m->head;
  }
  if (b->graph == &m->block) b->block_first_site = b->dropout_sites;
  b->scope = b->graph == &m->head || b->graph == &m->embed ? SCOPE_MODEL : SCOPE_BLOCK;
  b->ntensor_names = 0;
  return 0;
}

/* core.variant_output(y, layer): ends another layer's trace and compares it with layer 0's. */
static int l_variant_output(lua_State *L) {
  Builder *b = builder(L);
  if (b->stage_kind != STAGE_VARIANT)
    return fail(L, "another layer's block ends only while it is traced");
  int y = tensor_arg(L, b, 1);
  int layer = int_arg(L, 2, 0, 0);
  if (layer < 1 || layer >= b->model->layers)
    return fail(L, "layer %d: the model's other layers are 1 to %d", layer, b->model->layers - 1);
  b->variant.output = y;
  b->variant.nforward = b->variant.nnodes;
  Diag d;
  if (layers_compare(b->model, &b->variant, layer, &d)) {
    check_memory(L, b);
    lua_pushstring(L, d.msg);
    return lua_error(L);
  }
  if (y != b->model->block.output)
    return fail(
        L,
        "layer %d's block returns another tensor than layer 0's; layers may differ only in their "
        "attention's window, softcap, scale and rope_theta",
        layer);
  return 0;
}

/* core.variant_done(): every layer compared; the dropout sites continue after the block's. */
static int l_variant_done(lua_State *L) {
  Builder *b = builder(L);
  if (b->stage_kind != STAGE_VARIANT)
    return fail(L, "the other layers' blocks end only after they are traced");
  b->stage_kind = STAGE_BLOCK;
  layers_finish(b->model);
  graph_free(&b->variant);
  memset(&b->variant, 0, sizeof b->variant);
  b->graph = NULL;
  b->tracing_variant = 0;
  b->dropout_sites = b->block_end_site;
  return 0;
}

static int l_output(lua_State *L) {
  Builder *b = builder(L);
  int output = tensor_arg(L, b, 1);
  Graph *g = b->graph;
  g->output = output;
  g->nforward = g->nnodes;
  if (g == &b->model->block) b->block_end_site = b->dropout_sites;
  const Tensor *t = &g->tensors[g->output];
  if (g == &b->model->embed) {
    if (t->ndim != 3)
      return fail(L, "embed must return [batch, seq, hidden], not %d axes", t->ndim);
    b->model->hidden_dim = t->dims[2];
  }
  if (g == &b->model->head && t->ndim != 0) return fail(L, "head must return the scalar loss");
  if (g == &b->model->head) b->stage_kind = STAGE_DONE, b->graph = NULL;
  return 0;
}

static int l_overrides(lua_State *L) {
  Builder *b = builder(L);
  lua_createtable(L, 0, b->noverrides);
  for (int i = 0; i < b->noverrides; i++) {
    lua_pushstring(L, b->overrides[i].value);
    lua_setfield(L, -2, b->overrides[i].key);
  }
  return 1;
}

static int l_consume(lua_State *L) {
  Builder *b = builder(L);
  const char *key = luaL_checkstring(L, 1);
  for (int i = 0; i < b->noverrides; i++)
    if (strcmp(b->overrides[i].key, key) == 0) b->overrides[i].used = 1;
  return 0;
}

/* A config value at the top of the stack, which checkpoints record as JSON and loading compares:
 * at most NAME_LEN - 1 bytes of UTF-8 text. */
static void config_value_arg(lua_State *L, const char *key) {
  size_t n;
  const char *value = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : "";
  if (lua_type(L, -1) == LUA_TSTRING &&
      (n >= NAME_LEN || strlen(value) != n || !escape_is_utf8(value)))
    fail(L,
         "config.%s: a text value must be at most %d bytes of UTF-8 text (checkpoints record it)",
         key, NAME_LEN - 1);
}

/* core.set_config(config [, name]): the configuration's scalar entries for the plan to print and
 * checkpoints to record, and (from plait.model) the model's name. */
static int l_set_config(lua_State *L) {
  check_open(L, builder(L));
  Model *m = builder(L)->model;
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2))
    snprintf(m->name, sizeof m->name, "%s", plain_name_arg(L, 2, "the model's name"));
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) n++, lua_pop(L, 1);
  size_t bytes = (size_t)(n ? n : 1) * sizeof *m->config;
  ConfigEntry *config =
      budget_realloc(m->budget, m->config, (size_t)m->config_cap * sizeof *m->config, bytes);
  if (!config) lua_limits_error(L);
  m->config = config, m->config_cap = n ? n : 1;
  m->nconfig = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    if (lua_type(L, -2) == LUA_TSTRING &&
        (lua_isnumber(L, -1) || lua_isstring(L, -1) || lua_isboolean(L, -1))) {
      config_value_arg(L, plain_name_arg(L, -2, "config key"));
      ConfigEntry *e = &m->config[m->nconfig++];
      snprintf(e->key, sizeof e->key, "%s", lua_tostring(L, -2));
      if (lua_isboolean(L, -1))
        snprintf(e->value, sizeof e->value, "%s", lua_toboolean(L, -1) ? "true" : "false");
      else snprintf(e->value, sizeof e->value, "%s", lua_tostring(L, -1));
    }
    lua_pop(L, 1);
  }
  return 0;
}

/* The folder of the model file, "." for a bare name. */
static void model_dir(lua_State *L, char *buf, size_t len) {
  lua_getfield(L, LUA_REGISTRYINDEX, CORE_MODEL_FILE);
  const char *file = lua_isstring(L, -1) ? lua_tostring(L, -1) : ".";
  const char *slash = strrchr(file, '/');
  if (slash) snprintf(buf, len, "%.*s", (int)(slash - file), file);
  else snprintf(buf, len, ".");
  if (!buf[0]) snprintf(buf, len, "/");
  lua_pop(L, 1);
}

/* core.model_dir(): where the model file is; the sandbox reads and requires files there. */
static int l_model_dir(lua_State *L) {
  char dir[PATH_MAX];
  model_dir(L, dir, sizeof dir);
  lua_pushstring(L, dir);
  return 1;
}

/* core.beside(path): whether path is an existing file in the model file's folder or below it (links
 * followed). */
static int l_beside(lua_State *L) {
  char dir[PATH_MAX], real_dir[PATH_MAX], real[PATH_MAX];
  model_dir(L, dir, sizeof dir);
  const char *path = luaL_checkstring(L, 1);
  size_t n = realpath(dir, real_dir) ? strlen(real_dir) : 0;
  int inside = n && realpath(path, real) && strncmp(real, real_dir, n) == 0 &&
               (real[n] == '/' || real_dir[n - 1] == '/');
  lua_pushboolean(L, inside);
  return 1;
}

/* core.json_string(s): s as a JSON string, escaped as every JSON string plait writes (escape.h);
 * a NUL byte inside becomes \u0000. */
static int l_json_string(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  /* counted against the model file's memory */
  char *part = lua_newuserdatauv(L, ESCAPED_SIZE(n), 0);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '"');
  for (size_t at = 0; at <= n; at += strlen(s + at) + 1) {
    if (at) luaL_addstring(&b, "\\u0000");
    escape(ESC_JSON, s + at, part, ESCAPED_SIZE(n));
    luaL_addlstring(&b, part + 1, strlen(part) - 2); /* without its quotes */
  }
  luaL_addchar(&b, '"');
  luaL_pushresult(&b);
  return 1;
}

/* The function of upvalue 1 called with the arguments, its results returned. */
static int call_kept(lua_State *L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* core.keeps_caller(f): f behind a C function. A model file's `return f(...)` is a tail call,
 * which replaces the model file's frame with a Lua function's but not with a C function's:
 * errors raised in f then name the model file's line. */
static int l_keeps_caller(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, call_kept, 1);
  return 1;
}

/* core.where(): "file:line" of the model file's innermost frame, or its name (lib/plait's
 * errors). */
static int l_where(lua_State *L) {
  char where[WHERE_LEN];
  core_user_where(L, where, sizeof where);
  lua_pushstring(L, where);
  return 1;
}

static const luaL_Reg core_functions[] = {
    {"dim", l_dim},
    {"vocab_dim", l_vocab_dim},
    {"input", l_input},
    {"param", l_param},
    {"param_ref", l_param_ref},
    {"ew", l_ew},
    {"dropout", l_dropout},
    {"matmul", l_matmul},
    {"norm", l_norm},
    {"attention", l_attention},
    {"embedding", l_embedding},
    {"xent", l_xent},
    {"rope", l_rope},
    {"constant", l_constant},
    {"dim_size", l_dim_size},
    {"split", l_split},
    {"concat", l_concat},
    {"topk", l_topk},
    {"fractions", l_fractions},
    {"add_loss", l_add_loss},
    {"route", l_route},
    {"dispatch", l_dispatch},
    {"grouped_matmul", l_grouped_matmul},
    {"combine", l_combine},
    {"variant_output", l_variant_output},
    {"variant_done", l_variant_done},
    {"shape", l_shape},
    {"stage", l_stage},
    {"output", l_output},
    {"overrides", l_overrides},
    {"consume", l_consume},
    {"set_config", l_set_config},
    {"where", l_where},
    {"model_dir", l_model_dir},
    {"beside", l_beside},
    {"keeps_caller", l_keeps_caller},
    {"json_string", l_json_string},
    {"load_file", lua_files_l_load},
    {"open_file", lua_files_l_open},
    {NULL, NULL},
};

/* core.ew_functions: { name, arity } of each elementwise op lib/plait offers as a function
 * (expr.h's EXPR_OPS), in their order, onto the table on top of the stack. */
static void push_ew_functions(lua_State *L) {
  lua_newtable(L);
  int row = 0;
  for (int op = 0; op < E_OPCOUNT; op++) {
    if (expr_op_use(op) != EW_FUNCTION) continue;
    lua_createtable(L, 2, 0);
    lua_pushstring(L, expr_op_model_name(op));
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, expr_arity(op));
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, ++row);
  }
  lua_setfield(L, -2, "ew_functions");
}

static int open_core(lua_State *L) {
  luaL_newlibtable(L, core_functions);
  lua_pushvalue(L, lua_upvalueindex(1));
  luaL_setfuncs(L, core_functions, 1);
  push_ew_functions(L);
  return 1;
}

void core_free(Builder *b) {
  MemoryBudget *budget = b->model->budget;
  graph_free(&b->variant);
  name_index_free(&b->param_index[SCOPE_MODEL], budget);
  name_index_free(&b->param_index[SCOPE_BLOCK], budget);
  name_index_free(&b->constant_index, budget);
  budget_realloc(budget, b->param_leaves, (size_t)b->param_leaves_cap * sizeof *b->param_leaves, 0);
  budget_realloc(budget, b->constant_leaves,
                 (size_t)b->constant_leaves_cap * sizeof *b->constant_leaves, 0);
}

void core_register(lua_State *L, Builder *b) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushlightuserdata(L, b);
  lua_pushcclosure(L, open_core, 1);
  lua_setfield(L, -2, "plait.core");
  lua_pop(L, 1);
}
