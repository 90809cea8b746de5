/* graph.h: the intermediate representation: named dims, tensors with layouts, primitive nodes,
 * parameters, and a model made of three stage graphs (embed, one block, head). */
#ifndef PLAIT_GRAPH_H
#define PLAIT_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "ir/budget.h"
#include "ir/expr.h"
#include "ir/name_index.h"
#include "rope.h"

enum { MAX_DIMS = 6, MAX_INPUTS = 16, MAX_OUTPUTS = 4, NAME_LEN = 64, WHERE_LEN = 160 };

/* A dim is a name bound to a size. A tensor's shape is a list of dim ids, so printing shows
 * [b, seq, hidden]; sizes are logical (whole-model) sizes, local sizes follow from layouts. */
typedef struct {
  char name[NAME_LEN];
  int64_t size;      /* logical size, padding included */
  int64_t unpadded;  /* size before padding (the vocabulary before rounding up) */
  /* smallest piece a shard may hold: head_dim for a dim of heads·head_dim, else 1 */
  int64_t granule;
  int of_parts;      /* made by a split or concat: granule is one group's run */
  /* a dim sized at run time (the rows a rank's experts receive): size is what balanced routing
   * gives, worst the most there can be; 0 for a dim of fixed size */
  int64_t worst;
} Dim;

/* Layout over the tensor-parallel group: replicated, split along one axis, or partial sums. A split
 * may be into fewer pieces than ranks: key/value heads fewer than tp, each piece then held by
 * `copies` consecutive ranks (rank r holds piece r / copies). A forward tensor so laid out is whole
 * on each of its copies; a gradient so laid out is a partial sum over them (each rank's share of
 * the backward), which a parameter's gradient sums over the ranks holding the piece. */
typedef enum { LAYOUT_NONE, LAYOUT_R, LAYOUT_S, LAYOUT_P } LayoutKind;
typedef struct {
  LayoutKind kind;
  int axis;   /* for LAYOUT_S: the tensor axis that is split */
  int copies; /* for LAYOUT_S: ranks holding each piece (0 or 1: every rank its own piece) */
} Layout;

typedef enum {
  T_INPUT,      /* a stage input: token ids, targets, or the activation from the previous stage */
  T_PARAM,      /* a parameter (its tensor stands for the weights) */
  T_ACT,        /* an activation produced by a forward node */
  T_GRAD,       /* a gradient of an activation or stage input, produced by a backward node */
  T_PARAM_GRAD, /* the gradient buffer of a parameter, accumulated into by backward nodes */
  T_CONST,      /* a constant the model file computed at build time (Model.constants[param]) */
} TensorKind;

/* Activations (act_t in generated code: bf16 on GPUs), integer token ids, and statistics kept in
 * the precision of `real` (norm means and reciprocal deviations, softmax log-normalisers, the
 * loss). */
typedef enum { DT_REAL, DT_INT, DT_STATS } DType;

typedef struct {
  TensorKind kind;
  DType dtype;
  int ndim;
  int dims[MAX_DIMS];
  Layout layout;
  int producer; /* node id; -1 for stage inputs, parameters and parameter gradients */
  int param;    /* parameter id for T_PARAM and T_PARAM_GRAD, constant id for T_CONST, else -1 */
  int grad_of;  /* for T_GRAD: the tensor this is the gradient of, else -1 */
  /* T_PARAM, T_PARAM_GRAD: -1, or the join (Model.joins) this tensor stands for whole, its
   * members' weights (gradients) as one matrix; `param` is then the first member */
  int join;
  int copy_of;  /* made by a recomputed node (remat.c): the forward tensor it is again, else -1 */
  char name[NAME_LEN];
} Tensor;

/* Every primitive, once: X(op, name), name as listings print it. The passes switch over the ops
 * without a default (-Wswitch-enum): an op a pass does not handle fails the build. */
#define GRAPH_OPS(X)                                                                               \
  /* forward primitives */                                                                         \
  X(OP_MATMUL, "matmul") /* C = op(A)·op(B), A's leading dims flattened; see MatmulAttr */         \
  X(OP_EW, "ew") /* n-ary elementwise expression over inputs broadcast from the right */           \
  X(OP_REDUCE, "reduce") /* sum over leading dims down to the output's (suffix) shape */           \
  X(OP_NORM, "norm") /* layer or RMS norm over the last dim: out y, [mean,] rstd */                \
  X(OP_ATTENTION, "attention") /* softmax(q·kᵀ/√d)·v per head: out o, lse */                       \
  X(OP_EMBEDDING, "embedding") /* rows of a table picked by integer ids */                         \
  /* softmax cross entropy summed over tokens, times the loss scale: out loss, lse */              \
  X(OP_XENT, "xent")                                                                               \
  /* rotary positions: each head's first dims turned by angles of the position (or back) */        \
  X(OP_ROPE, "rope")                                                                               \
  X(OP_SPLIT, "split") /* one part of each group of the last dim (a fused q, k, v taken apart) */  \
  /* parts joined group by group along the last dim (the inverse of OP_SPLIT) */                   \
  X(OP_CONCAT, "concat")                                                                           \
  /* a mixture of experts: the k largest of the last dim (values, DT_INT indices); where           \
   * each routed row goes (DT_INT slots like the indices) and the rows per expert; the             \
   * tokens' rows copied to their slots; a GEMM per expert over its rows (see MoeAttr); the        \
   * rows weighted and summed back per token (in rows, slots, [weights]) */                        \
  X(OP_TOPK, "topk")                                                                               \
  X(OP_ROUTE, "route")                                                                             \
  X(OP_DISPATCH, "dispatch")                                                                       \
  X(OP_GROUPED_MATMUL, "grouped_matmul")                                                           \
  X(OP_COMBINE, "combine")                                                                         \
  /* the route's counts [E] as fractions of the routed rows (real, no gradient) */                \
  X(OP_FRACTIONS, "fractions")                                                                     \
  /* in x, term -> x again; term's sum times the loss scale added to the training loss */         \
  X(OP_LOSS_TERM, "loss_term")                                                                     \
  /* expert parallelism (passes/experts.c): every ep rank's counts gathered, [ep, E], and the rows \
   * this rank's experts receive, [E/ep] (in counts); routed rows [routed, D] sent to the holders  \
   * of their experts, [ep·routed, D] (in rows, all counts); held rows sent back (the reverse) */ \
  X(OP_EXPERT_COUNTS, "expert_counts")                                                             \
  X(OP_EXPERT_SEND, "expert_send")                                                                 \
  X(OP_EXPERT_RETURN, "expert_return")                                                             \
  /* collectives over the tensor-parallel group, and the local slice */                            \
  X(OP_ALLREDUCE, "allreduce") /* P -> R */                                                        \
  X(OP_ALLGATHER, "allgather") /* S(axis) -> R */                                                  \
  X(OP_REDUCESCATTER, "reducescatter") /* P -> S(axis) */                                          \
  X(OP_SLICE, "slice") /* R -> S(axis), no communication */                                        \
  /* backward primitives that are not forward ones reused */                                       \
  X(OP_NORM_BWD, "norm_bwd") /* in x, w, [mean,] rstd, dy -> dx, dw (+=), [db (+=)] */             \
  X(OP_ATTENTION_BWD, "attention_bwd") /* in q, k, v, o, lse, do -> dq, dk, dv */                  \
  X(OP_EMBEDDING_BWD, "embedding_bwd") /* in ids, dy -> dW (+=) */                                 \
  X(OP_XENT_BWD, "xent_bwd") /* in logits, targets, lse -> dlogits (written over the logits) */   \
  /* in indices, dvalues -> dx: the values' gradients at the indices, zeros elsewhere */           \
  X(OP_TOPK_BWD, "topk_bwd")                                                                       \
  /* in rows, slots, weights, dout -> drows (dout weighted, at the slots), dweights */             \
  X(OP_COMBINE_BWD, "combine_bwd")                                                                 \
  X(OP_LOSS_TERM_BWD, "loss_term_bwd") /* -> dterm: the loss scale in every element */

#define GRAPH_OP_ENUMERATOR(op, name) op,
#define GRAPH_OP_ONE(op, name) +1
typedef enum { GRAPH_OPS(GRAPH_OP_ENUMERATOR) } OpKind;
enum { OP_COUNT = 0 GRAPH_OPS(GRAPH_OP_ONE) };
#undef GRAPH_OP_ENUMERATOR
#undef GRAPH_OP_ONE

typedef struct {
  int trans_a, trans_b; /* A viewed as [M,K] (or [K,M] when trans_a), B as [K,N] (or [N,K]) */
} MatmulAttr;

typedef enum { NORM_LAYER, NORM_RMS } NormKind;
typedef struct {
  NormKind kind;
  double eps;
  /* multiplied by a weight (and, for a layer norm, shifted by a bias where it has one: its third
   * input); else the norm alone */
  int weighted;
  /* 0: over the whole last dim; else over each run of `group` elements of it (a norm per head:
   * QK-norm), the weight `group` wide and shared by the runs */
  int group;
} NormAttr;

typedef struct {
  int heads, kv_heads, head_dim; /* logical counts; local counts follow from the layout */
  int causal, rope;
  double rope_theta;
  /* causal: a query sees itself and the window − 1 keys before it; 0: every earlier key */
  int64_t window;
  double softcap;  /* scores capped to softcap·tanh(score/softcap); 0: not capped */
  double scale;    /* scores are q·k·scale; 0: 1/√head_dim */
  int alibi;       /* scores less slope_h·|t − t'| (ALiBi), the slopes over every rank's heads */
  /* -1: the same in every layer; else the row of Model.layer_attn holding the options (window,
   * softcap, scale, rope_theta) of each layer */
  int per_layer;
} AttnAttr;

/* The attention options a layer may set for itself (Gemma-2's sliding and global layers). */
typedef struct {
  int64_t window;
  double softcap, scale, rope_theta;
} LayerAttn;

/* The last dim as `groups` runs, each the parts' sizes one after another: [g0: p0 p1 …][g1: p0
 * p1 …]… (Megatron's fused q, k, v: groups = heads, parts of head_dim each, so that a column
 * split by whole heads leaves every part of a head on its rank). OP_SPLIT takes part `part`;
 * OP_CONCAT joins all its inputs, or with one input that is part `part` (a split's gradient),
 * zeros in the other parts. */
enum { MAX_PARTS = 8 };
typedef struct {
  int groups, nparts, part;
  int64_t sizes[MAX_PARTS];
} PartAttr;

typedef struct {
  int64_t vocab;        /* real vocabulary: logits at or beyond it are padding and left out */
  int64_t ignore_index; /* targets equal to it count for nothing (masked-LM positions not masked);
                           XENT_NO_IGNORE when every target counts */
  int grad_in_forward;  /* the forward writes the gradient over the logits (fuse_xent): the backward
                           node emits nothing */
} XentAttr;

#define XENT_NO_IGNORE INT64_MIN

typedef struct { int axis; } CollAttr;

/* A mixture of experts' nodes: `experts` experts, each token routed to `topk` of them. A grouped
 * matmul's rows are grouped by expert (the route's counts, its third input, say how many each):
 * rows [n, K] · op(W[e]) with W [experts, K, N] (or [experts, N, K] when trans_b) -> [n, N];
 * with trans_a (a weight's gradient) A [n, M] and B [n, N] give [experts, M, N], each expert's
 * A_eᵀ·B_e. */
typedef struct {
  int experts, topk;
  int trans_a, trans_b;
  int k_dim;              /* OP_TOPK: the model's dim of its k values */
  double capacity_factor; /* OP_ROUTE: each expert keeps moe_capacity rows at most; 0: all */
} MoeAttr;

/* The rows each expert keeps of a route over `rows` routed rows (tokens·k) and `experts` experts:
 * ceil(rows / experts · factor), as Megatron-Core's get_capacity; 0 (every row) without one. */
int64_t moe_capacity(const MoeAttr *a, int64_t rows, int64_t experts);

typedef struct {
  OpKind op;
  int nin, in[MAX_INPUTS];
  int nout, out[MAX_OUTPUTS];
  union {
    MatmulAttr mm;
    NormAttr norm;
    AttnAttr attn;
    RopeShape rope; /* B, T and heads 0: the emitter takes them from the input's local shape */
    PartAttr parts;
    XentAttr xent;
    CollAttr coll;
    MoeAttr moe;
  } a;
  Expr expr;      /* OP_EW: the expression over in[0..nin) */
  /* the first output reuses the buffer of this input (-1: none); the input dies here */
  int inplace;
  int backward;   /* 1 for nodes of the backward pass */
  int inserted;   /* 1 for collectives and slices the shard pass or autodiff inserted */
  int recomputed; /* 1 for a forward node re-run in the backward pass (remat.c) */
  char where[WHERE_LEN]; /* model file:line that asked for it (or the pass that made it) */
} Node;

/* One stage graph: forward nodes in order, then (after autodiff) backward nodes. A tensor of kind
 * T_PARAM_GRAD written by a node is accumulated into (+=), never overwritten. */
typedef struct {
  char name[NAME_LEN];
  Tensor *tensors;
  int ntensors, tensors_cap;
  Node *nodes;
  int nnodes, nodes_cap;
  int inputs[4], ninputs; /* stage inputs (T_INPUT), in the order the stage function took them */
  int output;             /* the stage's result: the next stage's input, or the loss */
  /* after autodiff: gradient of `output` given to backward (-1 for the loss) */
  int grad_output;
  /* after autodiff: gradient of inputs[0] when it is real-valued, else -1 */
  int grad_input;
  int nforward;           /* nodes[0..nforward) are the forward pass */
  /* while a model file is traced, what its tables may take (NULL: no bound) */
  MemoryBudget *budget;
} Graph;

typedef enum { INIT_NORMAL, INIT_ZEROS, INIT_ONES } InitKind;
typedef enum { HINT_REPLICATED, HINT_COLUMN, HINT_ROW, HINT_VOCAB } ShardHint;
typedef enum { SCOPE_MODEL, SCOPE_BLOCK } ParamScope;

typedef struct {
  char name[NAME_LEN]; /* "wte", or for block parameters the name inside a layer: "attn.q.weight" */
  int ndim, dims[MAX_DIMS];
  InitKind init;
  double std;          /* INIT_NORMAL: standard deviation */
  ShardHint hint;
  Layout layout;       /* from the hint, set by the shard pass */
  ParamScope scope;
  int decay;           /* weight decay applies (matrices and embeddings, not norms and biases) */
  /* 0: frozen: no gradient is computed for it and the optimizer leaves it as it is */
  int trainable;
  int grad_tp_sum;     /* autodiff: its gradient is a partial sum over the TP group (a replicated
                          parameter used on split activations), so it is all-reduced over TP */
  /* a mixture's experts' weights, [experts, ..]: axis 0 spread over the model's ep ranks */
  int ep_split;
  char where[WHERE_LEN]; /* model file:line that made it */
} Param;

/* Parameters laid side by side in memory along their first axis, in this order, so that one GEMM
 * reads their weights, and accumulates into their gradients, as one matrix (fuse_gemm: q, k and
 * v of an attention; gate and up of a GLU). Each rank's shares lie side by side: its own rows of
 * each. */
typedef struct {
  int n;
  int params[MAX_PARTS];
} ParamJoin;

typedef struct {
  char key[NAME_LEN];
  char value[NAME_LEN];
} ConfigEntry;

/* A tensor of values the model file computed when plait built it: not trained, not saved; the
 * program carries the values (at most CONSTANT_MAX_ELEMS of them, 2 GiB as doubles: model.c up to
 * CONSTANT_INLINE_ELEMS, constants.bin beyond) and every rank holds all of them. */
enum { CONSTANT_MAX_ELEMS = 1 << 28 };
typedef struct {
  char name[NAME_LEN];
  int ndim, dims[MAX_DIMS];
  int64_t count;
  double *values; /* row-major, count of them */
  char where[WHERE_LEN];
} Constant;

typedef struct {
  char name[NAME_LEN];
  char file[WHERE_LEN];
  Dim *dims;
  int ndims, dims_cap;
  Param *params;
  int nparams, params_cap;
  ConfigEntry *config;
  int nconfig, config_cap;
  int layers;      /* number of times the block repeats */
  int seq_dim, batch_dim, hidden_dim, vocab_dim; /* well-known dims; vocab_dim is -1 without one */
  int tied;        /* the head's output matrix is the embedding table */
  int masked_lm;   /* the loss ignores some targets: the data marks masked positions (BERT) */
  Graph embed, block, head;
  Constant *constants;
  int nconstants, constants_cap;
  /* [row · layers + layer]: the options of attention nodes that differ by layer */
  LayerAttn *layer_attn;
  int nlayer_attn;       /* rows of layer_attn */
  /* set by the shard pass: the ranks holding each piece of the parameters split into fewer pieces
   * than tp (key/value heads fewer than tp), whose gradients are summed over them; 1: none */
  int tp_copies;
  /* set by passes/experts.c: the ranks a mixture's experts are spread over (1: each rank all) */
  int ep;
  ParamJoin *joins;      /* parameters a fused GEMM reads as one matrix */
  int njoins;
  NameIndex dim_index;   /* dims by name */
  /* while the model file is traced, what the model's tables may take (NULL: no bound): the
   * growth of dims, params, constants and layer_attn */
  MemoryBudget *budget;
} Model;

/* dims: model_dim returns the dim of that name, made if new; -1 if the name is taken by another
 * size, or when m's budget refuses the growth (m->budget->exceeded then says which) */
int model_dim(Model *m, const char *name, int64_t size, int64_t granule);
int model_find_dim(const Model *m, const char *name);
/* parameters and constants: the new one's index, or -1 when m's budget refuses the growth */
int model_param(Model *m, const Param *p);
int model_constant(Model *m, const Constant *k);
/* tensors and nodes: graph_tensor and graph_node return -1 when g's budget refuses the growth */
void graph_init(Graph *g, const char *name);
void graph_free(Graph *g);
int graph_tensor(Graph *g, TensorKind kind, DType dtype, int ndim, const int *dims,
                 const char *name);
int graph_node(Graph *g, const Node *n);
/* Every tensor's producer from the nodes as they now stand (after nodes were dropped or added). */
void graph_set_producers(Graph *g);
Node node_new(OpKind op, int nin, const int *in);
int64_t tensor_elems(const Model *m, const Tensor *t);
int64_t tensor_local_elems(const Model *m, const Tensor *t, int tp);
int64_t param_elems(const Model *m, const Param *p);
int64_t param_local_elems(const Model *m, const Param *p, int tp);
int64_t param_unpadded_elems(const Model *m, const Param *p);
const char *op_name(OpKind op);
int op_is_collective(OpKind op);
void model_free(Model *m);
/* Every node of every stage with its outputs and inputs as name[shape]:layout; '+' marks inserted
 * collectives, '~' forward nodes re-run in the backward, bwd the backward pass. */
void graph_print(const Model *m, FILE *f);

/* printing: "[b, seq, hidden]", "R", "S(2)", "S(2)×2" (pieces held by 2 ranks each), "P" */
void shape_string(const Model *m, int ndim, const int *dims, char *buf, int len);
void layout_string(Layout l, char *buf, int len);
int layout_equal(Layout a, Layout b);
static inline Layout layout_r(void) { return (Layout){LAYOUT_R, 0, 1}; }
static inline Layout layout_p(void) { return (Layout){LAYOUT_P, 0, 1}; }
static inline Layout layout_s(int axis) { return (Layout){LAYOUT_S, axis, 1}; }
/* Split along axis as `like` is: into as many pieces, each held by as many ranks. */
static inline Layout layout_s_like(int axis, Layout like) {
  return (Layout){LAYOUT_S, axis, like.kind == LAYOUT_S && like.copies > 1 ? like.copies : 1};
}
/* Ranks holding each piece of a split (1 for every other layout). */
static inline int layout_copies(Layout l) {
  return l.kind == LAYOUT_S && l.copies > 1 ? l.copies : 1;
}
/* The pieces a split cuts its axis into over tp ranks (1: not split). */
static inline int layout_pieces(Layout l, int tp) {
  return l.kind == LAYOUT_S ? tp / layout_copies(l) : 1;
}

#endif
