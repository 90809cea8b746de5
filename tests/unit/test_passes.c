/* test_passes.c: shape inference on its own, and the passes between autodiff and emission: fusion
 * merges exactly the elementwise chains nothing else reads, the cross entropy takes its gradient in
 * its forward exactly where nothing else reads the logits, the memory plan never lets two live
 * tensors share memory, and shapes survive. */
#include <string.h>

#include "check.h"
#include "options.h"
#include "plan/plan.h"
#include "ir/shape.h"

static const char *const all_flags[] = {"--tp", "--pp", "--vpp", "--dp", "--mbs", "--gbs", "--schedule", "--recompute",
                                        "--sequence-parallel", "--partition", "--set", "--format", "--machine",
                                        "--unit-costs", "--print", "-o", "--separate-gemms", NULL};

static int plan_of(const char *command, Plan *p) {
  char buf[1024], *argv[64];
  int argc = 0;
  Diag d;
  snprintf(buf, sizeof buf, "plait plan %s", command);
  for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
  Options o;
  if (options_parse(argc, argv, 2, all_flags, 1, &o, &d) || plan_build(&o, p, stdout, &d)) {
    CHECK(0, "%s: %s", command, d.msg);
    return -1;
  }
  return 0;
}

static int readers(const Graph *g, int t) {
  int n = 0;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) n += g->nodes[i].in[k] == t;
  return n;
}

static int count_ops(const Graph *g, OpKind op, int backward) {
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) n += g->nodes[i].op == op && g->nodes[i].backward == backward;
  return n;
}

/* Whether some elementwise node of g evaluates `op` in its expression. */
static int has_expr_op(const Graph *g, ExprOp op, int backward) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i].op == OP_EW && g->nodes[i].backward == backward)
      for (int j = 0; j < g->nodes[i].expr.count; j++)
        if (g->nodes[i].expr.n[j].op == op) return 1;
  return 0;
}

/* After fusion no elementwise node feeds a single elementwise reader of its own pass with a value
 * nothing else needs, and no elementwise node without dropout is read only by elementwise nodes (it
 * is recomputed in each). A GPT block forward keeps 6 kernels: the q, k, v bias adds (attention reads
 * them), the attention output's bias + dropout + residual, the MLP's gelu(x·W + b), and the MLP
 * output's bias + dropout + residual; the backward's GeLU derivative recomputes the bias add. A
 * Llama-style block computes silu(gate)·up in one kernel. */
static void fusion(void) {
  Plan p;
  if (plan_of("models/tiny.lua --set dropout=0.1", &p)) return;
  const Graph *g = &p.model.block;
  CHECK(count_ops(g, OP_EW, 0) == 6, "block forward has %d elementwise kernels, expected 6", count_ops(g, OP_EW, 0));
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = &g->nodes[i];
    if (n->op != OP_EW) continue;
    int t = n->out[0];
    if (g->tensors[t].kind == T_PARAM_GRAD || t == g->output || t == g->grad_input) continue;
    int ew_readers = 0, same_pass = 0;
    for (int j = 0; j < g->nnodes; j++)
      for (int k = 0; k < g->nodes[j].nin; k++)
        if (g->nodes[j].in[k] == t && g->nodes[j].op == OP_EW) ew_readers++, same_pass += g->nodes[j].backward == n->backward;
    if (readers(g, t) == 1 && same_pass == 1) CHECK(0, "node %d (%s) feeds one elementwise node alone and was not fused", i, g->tensors[t].name);
    if (readers(g, t) > 1 && ew_readers == readers(g, t) && expr_dropouts(&n->expr, NULL, NULL) == 0)
      CHECK(0, "node %d (%s) is read only by elementwise kernels and was not recomputed in them", i, g->tensors[t].name);
  }
  CHECK(has_expr_op(g, E_GELU, 0) && has_expr_op(g, E_GELU_GRAD, 1), "no GeLU kernels");
  plan_free(&p);
  if (plan_of("models/llama.lua --set layers=2 hidden=128 heads=8 kv_heads=2 ffn=256 seq=32 vocab=256", &p)) return;
  g = &p.model.block;
  int swiglu = 0;
  for (int i = 0; i < g->nforward; i++) {
    const Node *n = &g->nodes[i];
    if (n->op != OP_EW) continue;
    char text[200];
    const char *names[MAX_INPUTS];
    for (int k = 0; k < MAX_INPUTS; k++) names[k] = "x";
    expr_to_c(&n->expr, names, NULL, text, sizeof text);
    swiglu += strstr(text, "silu(") != NULL && strstr(text, " * ") != NULL;
  }
  CHECK(swiglu == 1, "%d forward kernels compute silu(gate)·up, expected 1", swiglu);
  plan_free(&p);
}

/* The cross entropy's forward takes the gradient exactly where its logits are not split by vocabulary and
 * nothing but its two nodes reads them (gemma2's logit cap included); its backward node is marked alike. */
static int xent_marks(const char *command, int *unsplit) {
  Plan p;
  if (plan_of(command, &p)) return -1;
  const Graph *g = &p.model.head;
  int marked = 0;
  *unsplit = 0;
  for (int i = 0; i < g->nforward; i++) {
    const Node *n = &g->nodes[i];
    if (n->op != OP_XENT) continue;
    const Tensor *z = &g->tensors[n->in[0]];
    int whole = !(z->layout.kind == LAYOUT_S && z->layout.axis == z->ndim - 1);
    int expected = whole && readers(g, n->in[0]) == 2;
    CHECK(n->a.xent.grad_in_forward == expected, "%s: grad_in_forward %d, expected %d", command,
          n->a.xent.grad_in_forward, expected);
    for (int j = g->nforward; j < g->nnodes; j++)
      if (g->nodes[j].op == OP_XENT_BWD)
        CHECK(g->nodes[j].a.xent.grad_in_forward == n->a.xent.grad_in_forward, "%s: backward node marked otherwise", command);
    marked += n->a.xent.grad_in_forward;
    *unsplit += whole;
  }
  plan_free(&p);
  return marked;
}

static void xent_in_forward(void) {
  int unsplit;
  CHECK(xent_marks("models/tiny.lua", &unsplit) == 1, "tiny at tp 1: the cross entropy does not take its gradient");
  CHECK(xent_marks("models/tiny.lua --tp 2", &unsplit) == 0 && unsplit == 0,
        "tiny at tp 2: vocab-parallel logits taken in the forward");
  xent_marks("models/gemma2.lua --set layers=2 hidden=64 heads=2 kv_heads=1 head_dim=32 ffn=128 vocab=256 seq=32 sliding_window=16", &unsplit);
  xent_marks("models/bert.lua --set layers=2 hidden=64 heads=2 ffn=128 vocab=256 seq=32", &unsplit);
}

/* Two tensors of scratch (or of the saved region) that are alive at the same node never overlap. */
static void check_memory(const Plan *p, int stage) {
  const Graph *g = stage == 0 ? &p->model.embed : stage == 1 ? &p->model.block : &p->model.head;
  const StageMemory *m = &p->memory[stage];
  int n = g->ntensors;
  int first[n], last[n];
  for (int t = 0; t < n; t++) first[t] = g->nnodes, last[t] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *node = &g->nodes[i];
    for (int k = 0; k < node->nout; k++) {
      int t = node->out[k];
      if (i < first[t]) first[t] = i;
      if (i > last[t]) last[t] = i;
    }
    for (int k = 0; k < node->nin; k++) last[node->in[k]] = i > last[node->in[k]] ? i : last[node->in[k]];
  }
  for (int a = 0; a < n; a++) {
    if (m->region[a] != REGION_SCRATCH && m->region[a] != REGION_SAVED) continue;
    if (last[a] < 0) continue;
    CHECK(m->offset[a] % 16 == 0, "%s at %lld is not aligned", g->tensors[a].name, (long long)m->offset[a]);
    int64_t size_a = tensor_local_elems(&p->model, &g->tensors[a], p->par.tp);
    for (int b = a + 1; b < n; b++) {
      if (m->region[b] != m->region[a] || last[b] < 0) continue;
      int64_t size_b = tensor_local_elems(&p->model, &g->tensors[b], p->par.tp);
      int same_place = m->offset[a] == m->offset[b]; /* an in-place output takes its input's place */
      int live_together = m->region[a] == REGION_SAVED || (first[a] <= last[b] && first[b] <= last[a]);
      int overlap = m->offset[a] < m->offset[b] + size_b && m->offset[b] < m->offset[a] + size_a;
      int inplace = 0;
      for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].inplace >= 0 && ((g->nodes[i].out[0] == a && g->nodes[i].in[g->nodes[i].inplace] == b) ||
                                         (g->nodes[i].out[0] == b && g->nodes[i].in[g->nodes[i].inplace] == a)))
          inplace = 1;
      CHECK(!(live_together && overlap) || (inplace && same_place), "stage %d: %s and %s overlap while both alive", stage,
            g->tensors[a].name, g->tensors[b].name);
    }
  }
}

static void memory_plan(void) {
  const char *layouts[] = {"models/tiny.lua --set dropout=0.1", "models/tiny.lua --tp 2 --sequence-parallel",
                           "models/llama.lua --set layers=2 hidden=64 heads=4 kv_heads=2 ffn=160 seq=32 vocab=256 --tp 2"};
  for (unsigned i = 0; i < sizeof layouts / sizeof *layouts; i++) {
    Plan p;
    if (plan_of(layouts[i], &p)) continue;
    for (int s = 0; s < 3; s++) check_memory(&p, s);
    CHECK(p.memory[1].saved > 0 && p.scratch_elems > 0, "%s: empty regions", layouts[i]);
    plan_free(&p);
  }
}

/* The forward graphs after shard, autodiff and fusion still infer to the shapes they hold. */
static void shapes_survive(void) {
  Plan p;
  if (plan_of("models/bert.lua --set layers=2 hidden=64 heads=4 ffn=256 seq=32 vocab=256 --tp 2", &p)) return;
  Diag d;
  const Graph *graphs[3] = {&p.model.embed, &p.model.block, &p.model.head};
  for (int g = 0; g < 3; g++) CHECK(shape_check(&p.model, graphs[g], &d) == 0, "%s", d.msg);
  plan_free(&p);
}

static int find_forward(const Graph *g, OpKind op) {
  for (int i = 0; i < g->nforward; i++)
    if (g->nodes[i].op == op) return i;
  return -1;
}

/* Shape inference on its own: a grouped-query block (8 heads over 2 kv heads of 16) gives q, k and v
 * their named widths and attention q's shape, and a matmul whose inner dims differ is refused with a
 * message naming the op and both shapes. */
static void shape_inference(void) {
  Plan p;
  if (plan_of("models/llama.lua --set layers=2 hidden=128 heads=8 kv_heads=2 ffn=256 seq=32 vocab=256", &p)) return;
  const Graph *g = &p.model.block;
  int a = find_forward(g, OP_ATTENTION);
  CHECK(a >= 0, "no attention in the block");
  if (a < 0) { plan_free(&p); return; }
  Shapes s;
  Diag d;
  CHECK(shape_infer(&p.model, g, &g->nodes[a], &s, &d) == 0, "%s", d.msg);
  const Tensor *q = &g->tensors[g->nodes[a].in[0]], *k = &g->tensors[g->nodes[a].in[1]];
  CHECK(p.model.dims[q->dims[2]].size == 128 && p.model.dims[k->dims[2]].size == 32,
        "q is %lld wide and k %lld, expected 128 and 32", (long long)p.model.dims[q->dims[2]].size,
        (long long)p.model.dims[k->dims[2]].size);
  CHECK(s.nout == 2 && s.ndim[0] == 3 && memcmp(s.dims[0], q->dims, 3 * sizeof(int)) == 0, "attention output is not q's shape");
  CHECK(s.ndim[1] == 3 && p.model.dims[s.dims[1][1]].size == 8, "lse is not [b, heads, seq] with 8 heads");

  int mm = find_forward(g, OP_MATMUL);
  Node bad = g->nodes[mm];
  bad.in[1] = g->nodes[a].in[1]; /* k [b, seq, kvdim] where a weight matrix belongs */
  CHECK(shape_infer(&p.model, g, &bad, &s, &d) != 0, "a matmul with a 3-d right operand was accepted");
  CHECK(strstr(d.msg, "matmul") && strstr(d.msg, "[b, seq, hidden] = (1, 32, 128)") && strstr(d.msg, "(1, 32, 32)"),
        "message '%s' does not name the op and both shapes", d.msg);
  printf("info: %s\n", d.msg);
  plan_free(&p);
}

/* The forward matmul reading join j's weights, -1 when none does. */
static int joined_gemm(const Graph *g, int j) {
  for (int i = 0; i < g->nforward; i++)
    if (g->nodes[i].op == OP_MATMUL && g->tensors[g->nodes[i].in[1]].join == j) return i;
  return -1;
}

/* The last dim of t on one of tp ranks. */
static int64_t local_width(const Model *m, const Tensor *t, int tp) {
  int64_t n = m->dims[t->dims[t->ndim - 1]].size;
  return t->layout.kind == LAYOUT_S && t->layout.axis == t->ndim - 1 ? n / tp : n;
}

/* GEMMs that read one input by weights of one layout are one (fuse_gemm): a GPT block's q, k and v over
 * a join of their weights, 384 columns; a Llama block's q, k, v (grouped: 8 q heads and 2 kv heads of 16)
 * and gate, up at tp 2, each rank's share of the joined output its heads' columns (96) and its half of
 * both (256); --separate-gemms keeps the six. Each join's output is split into every part once, forward,
 * and its gradient is one concat of the parts', backward; the block's backward has two GEMMs a forward one. */
static void gemm_fusion(void) {
  const struct {
    const char *command;
    int matmuls, joins, splits;
    int64_t width[2];
  } cases[] = {
      {"models/tiny.lua", 4, 1, 3, {384}},
      {"models/llama.lua --set layers=2 hidden=128 heads=8 kv_heads=2 ffn=256 seq=32 vocab=256 --tp 2", 4, 2, 5, {96, 256}},
      {"models/tiny.lua --separate-gemms", 6, 0, 0, {0}},
  };
  for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
    Plan p;
    if (plan_of(cases[c].command, &p)) return;
    const Graph *g = &p.model.block;
    const char *command = cases[c].command;
    CHECK(count_ops(g, OP_MATMUL, 0) == cases[c].matmuls && count_ops(g, OP_MATMUL, 1) == 2 * cases[c].matmuls,
          "%s: %d forward and %d backward matmuls", command, count_ops(g, OP_MATMUL, 0), count_ops(g, OP_MATMUL, 1));
    CHECK(p.model.njoins == cases[c].joins, "%s: %d joins, expected %d", command, p.model.njoins, cases[c].joins);
    CHECK(count_ops(g, OP_SPLIT, 0) == cases[c].splits && count_ops(g, OP_CONCAT, 1) == cases[c].joins,
          "%s: %d splits forward, %d concats backward", command, count_ops(g, OP_SPLIT, 0), count_ops(g, OP_CONCAT, 1));
    for (int j = 0; j < p.model.njoins && j < 2; j++) {
      int mm = joined_gemm(g, j);
      CHECK(mm >= 0, "%s: no GEMM reads join %d", command, j);
      if (mm < 0) continue;
      int y = g->nodes[mm].out[0];
      int64_t width = local_width(&p.model, &g->tensors[y], p.par.tp);
      CHECK(width == cases[c].width[j] && readers(g, y) == p.model.joins[j].n,
            "%s: join %d's output is %lld wide on a rank (expected %lld), read %d times", command, j, (long long)width,
            (long long)cases[c].width[j], readers(g, y));
    }
    plan_free(&p);
  }
}

int main(void) {
  RUN(shape_inference);
  RUN(gemm_fusion);
  RUN(fusion);
  RUN(xent_in_forward);
  RUN(memory_plan);
  RUN(shapes_survive);
  TEST_EXIT();
}
