/* attention.c: multi-head attention, forward and backward, in blocks with an online softmax. */
#include <omp.h>

#include "cpu.h"
#include "kernels.h"

/* Causal or not, sliding window, grouped-query, rotary positions, capped scores, ALiBi; no T×T matrix is
 * ever stored. Per head, with scores S = cap(Q·Kᵀ·scale) − slope·|t − t'| (masked causally, and outside
 * the window; the ALiBi term only with alibi), cap(s) = c·tanh(s/c) or s, and P = softmax(S) by rows:
 *   forward   O = P·V, lse = log Σ_t' exp(S)                      (P never stored: online softmax)
 *   backward  P = exp(S − lse) recomputed, dP = dO·Vᵀ, D_t = Σ_e dO·O, dS = P·(dP − D)·cap'(s),
 *             cap' = 1 − (S/c)², dQ = dS·K·scale, dK = dSᵀ·Q·scale, dV = Pᵀ·dO
 * The work goes by blocks of TILE queries by TILE keys (tiles start at multiples of TILE), each block a few
 * products (attention_vector.h) computed by bands of rows, each band over only the chunks of L columns, or
 * the terms, that its rows see: causally about half of a diagonal block. Dot products over D and the
 * sums within one block are in `real`, each in one vector lane in a fixed order; the sums over blocks (O,
 * dQ, dK, dV, the softmax normaliser) are in double. */
enum { L = 16, TILE = 64 };

/* One product: out[r][c] = Σ_{t<n} a[r·ar + t·at]·b[t·ldb + c] for rows r < rows, columns c0 ≤ c < c1
 * (multiples of L). */
typedef struct {
  const real *a, *b;
  real *out;
  int64_t ar, at, ldb, ldo;
  int rows, n, c0, c1;
} Product;

/* A transposition: panel[e][c] = mul·x[c·stride + e] for c < n and e < D, 0 for n ≤ c < TILE. */
typedef void TransposeFn(const real *x, int64_t stride, int n, int D, real mul, real *panel);

/* An integer of the size of `real`: the lanes of a shuffle's mask. */
#ifdef PLAIT_REAL_DOUBLE
typedef int64_t real_bits;
#else
typedef int32_t real_bits;
#endif

/* GCC keeps its vectors wider than the target's registers in memory, and its target_clones leave these
 * loop nests scalar: they are compiled once per vector width with vectors of that width, and picked at
 * run time as target_clones pick (cpu.h). Under PLAIT_CPU_BASELINE only the baseline ones. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PLAIT_CPU_BASELINE)
#define VECTOR_WIDTHS 1
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define VECTOR_BYTES 64
#define PRODUCT product_64
#define TRANSPOSE transpose_64
#include "attention_vector.h"
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define VECTOR_BYTES 32
#define PRODUCT product_32
#define TRANSPOSE transpose_32
#include "attention_vector.h"
#pragma GCC pop_options
#endif
#define VECTOR_BYTES 16
#define PRODUCT product_16
#define TRANSPOSE transpose_16
#include "attention_vector.h"

/* The product and the transposition of one vector width. */
typedef struct {
  void (*product)(const Product *p);
  TransposeFn *transpose;
} Kernels;

static Kernels kernels_for_this_cpu(void) {
#ifdef VECTOR_WIDTHS
  if (__builtin_cpu_supports("x86-64-v4")) return (Kernels){product_64, transpose_64};
  if (__builtin_cpu_supports("x86-64-v3")) return (Kernels){product_32, transpose_32};
#endif
  return (Kernels){product_16, transpose_16};
}

/* One call's view of its tensors. */
typedef struct {
  const AttnShape *s;
  int group;                   /* query heads per kv head */
  int Dp;                      /* D rounded up to a multiple of L: the rows of rows in scratch */
  int64_t q_stride, kv_stride; /* from one position to the next: Hq·D and Hkv·D */
  real scale;                  /* the shape's, or 1/sqrt(D) */
  int64_t window;              /* keys seen back from a query, itself included (T: every one) */
  real *slopes;                /* [Hq] ALiBi's slope of each local head, or NULL */
  const real *q, *k;           /* the queries and keys the scores use: rotated copies under rope */
  real *rotated;               /* those copies (NULL without rope) */
  real *cos, *sin;             /* [T][D/2] rotary tables (NULL without rope) */
  Kernels kernels;             /* of this CPU's vector width */
} Attn;

/* Rows of Dp values as the products read them (zeros past D): x[c·stride + e]. */
typedef struct {
  const real *x;
  int64_t stride;
} Rows;

/* One thread's scratch: panels [D][TILE] (positions transposed), rows [TILE][Dp], blocks [TILE][TILE]. */
typedef struct {
  real *panel, *panel2;   /* forward: queries·scale; backward: keys, values */
  Rows q, dout, k, v;     /* queries·scale, their output gradients, keys, values: tensors or copies */
  real *copies[4];        /* [TILE][Dp] room for those copies, in that order */
  real *s, *ds;           /* scores, then probabilities; dP, then dS */
  real *part;             /* [TILE][Dp] one block's product */
  real *lse, *delta;      /* [TILE] of a backward block's queries */
  double *acc, *acc2;     /* [TILE][Dp] sums over blocks: out; dk and dv */
  double *dq;             /* [dq_rows][Dp] sums over blocks of dq */
  double *m, *l, *rescale; /* [TILE] online softmax per query: running max, running sum, change of scale */
} Tiles;

/* The first n values of a block of scratch; *next moves past them. */
static real *take(real **next, size_t n) {
  real *x = *next;
  *next += n;
  return x;
}

static double *take_double(double **next, size_t n) {
  double *x = *next;
  *next += n;
  return x;
}

static Tiles *tiles_new(const Attn *a, int64_t dq_rows) {
  size_t panel = (size_t)a->s->D * TILE, rows = (size_t)TILE * a->Dp, block = TILE * TILE;
  Tiles *w = cpu_alloc(1, sizeof(Tiles), "attention tiles");
  real *r = cpu_alloc(2 * panel + 5 * rows + 2 * block + 2 * TILE, sizeof(real), "attention tiles");
  w->panel = take(&r, panel), w->panel2 = take(&r, panel);
  for (int i = 0; i < 4; i++) w->copies[i] = take(&r, rows);
  w->part = take(&r, rows), w->s = take(&r, block), w->ds = take(&r, block);
  w->lse = take(&r, TILE), w->delta = take(&r, TILE);
  double *d = cpu_alloc(2 * rows + (size_t)dq_rows * a->Dp + 3 * TILE, sizeof(double), "attention tiles");
  w->acc = take_double(&d, rows), w->acc2 = take_double(&d, rows), w->dq = take_double(&d, (size_t)dq_rows * a->Dp);
  w->m = take_double(&d, TILE), w->l = take_double(&d, TILE), w->rescale = take_double(&d, TILE);
  return w;
}

static void tiles_free(Tiles *w) {
  free(w->panel);
  free(w->acc);
  free(w);
}

/* ---- rotary positions -------------------------------------------------------------------------- */

/* y ← x with each head's pairs (x_i, x_{i+D/2}) turned by position t's angles (sign = 1) or back (−1):
 * (y_i, y_{i+D/2}) = (x_i·cos − x_{i+D/2}·sin, x_{i+D/2}·cos + x_i·sin); y may be x. Turning back is
 * the transpose, so it also carries a gradient from the rotated vector to the original. */
CPU_WIDE static void rope_rotate(const Attn *a, int64_t t, int sign, int heads, const real *x, real *y) {
  int D = a->s->D, half = D / 2;
  const real *cos_t = a->cos + t * half, *sin_t = a->sin + t * half;
  for (int h = 0; h < heads; h++) {
    const real *xh = x + (int64_t)h * D;
    real *yh = y + (int64_t)h * D;
#pragma omp simd
    for (int i = 0; i < half; i++) {
      real x1 = xh[i], x2 = xh[i + half], sn = sign * sin_t[i];
      yh[i] = x1 * cos_t[i] - x2 * sn;
      yh[i + half] = x2 * cos_t[i] + x1 * sn;
    }
  }
}

/* The angle of pair i at position t is t·theta^(−2i/D) (in double); q and k are copied and rotated
 * once per call, every head of a position sharing its angles. */
static void rope_init(Attn *a, const real *q, const real *k) {
  const AttnShape *s = a->s;
  int half = s->D / 2;
  int64_t positions = s->B * s->T, nq = positions * a->q_stride, nk = positions * a->kv_stride;
  a->cos = cpu_alloc((size_t)(2 * s->T * half), sizeof(real), "rotary tables");
  a->sin = a->cos + s->T * half;
  for (int i = 0; i < half; i++) {
    double frequency = pow(s->rope_theta, -2.0 * i / s->D);
    for (int64_t t = 0; t < s->T; t++) {
      a->cos[t * half + i] = (real)cos((double)t * frequency);
      a->sin[t * half + i] = (real)sin((double)t * frequency);
    }
  }
  real *qr = a->rotated = cpu_alloc((size_t)(nq + nk), sizeof(real), "rotated q and k"), *kr = qr + nq;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < positions; p++) {
    rope_rotate(a, p % s->T, 1, s->Hq, q + p * a->q_stride, qr + p * a->q_stride);
    rope_rotate(a, p % s->T, 1, s->Hkv, k + p * a->kv_stride, kr + p * a->kv_stride);
  }
  a->q = qr, a->k = kr;
}

static void attn_init(Attn *a, const AttnShape *s, const real *q, const real *k) {
  a->s = s;
  a->group = s->Hq / s->Hkv;
  a->Dp = (s->D + L - 1) / L * L;
  a->q_stride = (int64_t)s->Hq * s->D;
  a->kv_stride = (int64_t)s->Hkv * s->D;
  a->scale = (real)(s->scale > 0 ? s->scale : 1 / sqrt((double)s->D));
  a->window = s->window > 0 && s->window < s->T ? s->window : s->T;
  a->slopes = NULL;
  if (s->alibi) {
    a->slopes = cpu_alloc((size_t)s->Hq, sizeof(real), "ALiBi slopes");
    for (int h = 0; h < s->Hq; h++) a->slopes[h] = (real)attention_alibi_slope(s->heads_total, s->head0 + h);
  }
  a->kernels = kernels_for_this_cpu();
  a->q = q, a->k = k, a->rotated = a->cos = a->sin = NULL;
  if (s->rope) rope_init(a, q, k);
}

/* Where head h (of q and out) or kv head g (of k and v) of sequence b starts. */
static int64_t attn_q_head(const Attn *a, int64_t b, int h) {
  return b * a->s->T * a->q_stride + (int64_t)h * a->s->D;
}

static int64_t attn_kv_head(const Attn *a, int64_t b, int g) {
  return b * a->s->T * a->kv_stride + (int64_t)g * a->s->D;
}

static void attn_free(Attn *a) {
  free(a->slopes);
  free(a->rotated);
  free(a->cos);
}

/* ---- copies in and out ------------------------------------------------------------------------- */

/* rows[c][e] = mul·x[c][e] for c < n and e < D, 0 for D ≤ e < Dp. */
CPU_WIDE static void load_rows(const real *x, int64_t stride, int n, int D, int Dp, real mul, real *rows) {
  for (int c = 0; c < n; c++) {
#pragma omp simd
    for (int e = 0; e < D; e++) rows[c * Dp + e] = mul * x[c * stride + e];
    for (int e = D; e < Dp; e++) rows[c * Dp + e] = 0;
  }
}

/* Rows c < n of a tensor (`stride` apart) as the products read them: the tensor itself where D = Dp and
 * mul = 1, else mul·x copied into scratch. */
static Rows rows_view(const Attn *a, const real *x, int64_t stride, int n, real mul, real *scratch) {
  if (a->s->D == a->Dp && mul == 1) return (Rows){x, stride};
  load_rows(x, stride, n, a->s->D, a->Dp, mul, scratch);
  return (Rows){scratch, a->Dp};
}

/* Asks for the cache lines of rows c < n of a head (D values each, `stride` apart) ahead of their use,
 * to be written or read. */
static void prefetch_rows(const real *x, int n, int D, int64_t stride, int write) {
  for (int c = 0; c < n; c++)
    for (int e = 0; e < D; e += 64 / (int)sizeof(real)) {
      if (write) __builtin_prefetch(x + c * stride + e, 1, 3);
      else __builtin_prefetch(x + c * stride + e, 0, 3);
    }
}

/* y[c][e] = acc[c][e]·mul for c < n and e < D, rows of y `stride` apart. */
CPU_WIDE static void store_rows(const double *acc, int n, int D, int Dp, double mul, real *y, int64_t stride) {
  for (int c = 0; c < n; c++) {
#pragma omp simd
    for (int e = 0; e < D; e++) y[c * stride + e] = (real)(acc[c * Dp + e] * mul);
  }
}

/* acc[r][e] = acc[r][e]·rescale[r] + part[r][e] for r < n, e < Dp (rescale NULL: 1), or acc = part for
 * the first block (fresh): a block's share enters a sum over blocks. */
CPU_WIDE static void accumulate(int n, int Dp, int fresh, const double *rescale, const real *part, double *acc) {
  for (int r = 0; r < n; r++) {
    double *a = acc + r * Dp, keep = rescale ? rescale[r] : 1;
    const real *p = part + r * Dp;
    if (fresh) {
#pragma omp simd
      for (int e = 0; e < Dp; e++) a[e] = p[e];
    } else {
#pragma omp simd
      for (int e = 0; e < Dp; e++) a[e] = a[e] * keep + p[e];
    }
  }
}

/* ---- bands ------------------------------------------------------------------------------------- */

/* A block: rows are queries or keys, positions p..p+n−1; columns the other side, positions c..c+nc−1. */
typedef struct {
  int rows_are_keys;
  int64_t p, c;
  int n, nc;
} Block;

static int64_t clamp(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The columns that rows r..r+rows−1 of a block see, [*lo, *hi) (0 ≤ *lo ≤ *hi ≤ nc): a query the keys of
 * its window up to itself, a key the queries from itself to the end of its window; every column without
 * a causal mask. Each column in the range is seen by some row of the band. */
static inline void seen(const Attn *a, const Block *bl, int r, int rows, int *lo, int *hi) {
  int64_t from = 0, to = bl->nc;
  if (a->s->causal && bl->rows_are_keys) from = bl->p + r - bl->c, to = bl->p + r + rows - 1 + a->window - bl->c;
  else if (a->s->causal) from = bl->p + r - a->window + 1 - bl->c, to = bl->p + r + rows - bl->c;
  *lo = (int)clamp(from, 0, bl->nc), *hi = (int)clamp(to, *lo, bl->nc);
}

/* The same rounded out to whole chunks of L columns: what a band's products and masks cover. */
static inline void seen_chunks(const Attn *a, const Block *bl, int r, int *c0, int *c1) {
  seen(a, bl, r, (int)cpu_min(L, bl->n - r), c0, c1);
  *c0 = *c0 / L * L, *c1 = (*c1 + L - 1) / L * L;
}

/* The tiles of the other side that positions p..p+n−1 (queries, or keys) see: from *first, a multiple of
 * TILE, to before *end. */
static void seen_tiles(const Attn *a, int rows_are_keys, int64_t p, int n, int64_t *first, int64_t *end) {
  Block all = {rows_are_keys, p, 0, n, (int)a->s->T};
  int lo, hi;
  seen(a, &all, 0, n, &lo, &hi);
  *first = lo / TILE * TILE, *end = hi;
}

/* out[r][c] = Σ_e x[r][e]·panel[e][c] over a block's rows (x rows `stride` apart) and the chunks of
 * columns each band of L rows sees. */
static void band_scores(const Attn *a, const Block *bl, const real *x, int64_t stride, const real *panel, real *out) {
  for (int r = 0; r < bl->n; r += L) {
    Product pr = {.a = x + r * stride, .ar = stride, .at = 1, .b = panel, .ldb = TILE, .out = out + r * TILE,
                  .ldo = TILE, .rows = (int)cpu_min(L, bl->n - r), .n = a->s->D};
    seen_chunks(a, bl, r, &pr.c0, &pr.c1);
    a->kernels.product(&pr);
  }
}

/* part[r][e] = Σ_t coef[r·cr + t·ct]·y[t][e] over a block's rows, every e < Dp, and t over the columns (the
 * terms) that each band of L/2 rows sees. */
static void band_sums(const Attn *a, const Block *bl, const real *coef, int64_t cr, int64_t ct, Rows y, real *part) {
  for (int r = 0; r < bl->n; r += L / 2) {
    int rows = (int)cpu_min(L / 2, bl->n - r), lo, hi;
    seen(a, bl, r, rows, &lo, &hi);
    Product pr = {.a = coef + r * cr + lo * ct, .ar = cr, .at = ct, .b = y.x + lo * y.stride, .ldb = y.stride,
                  .out = part + r * a->Dp, .ldo = a->Dp, .rows = rows, .n = hi - lo, .c0 = 0, .c1 = a->Dp};
    a->kernels.product(&pr);
  }
}

/* ---- masks and caps ---------------------------------------------------------------------------- */

/* lo ≤ c < hi, in one comparison (no branch in a vector loop). */
static inline int in_range(int c, int lo, int hi) { return (unsigned)(c - lo) < (unsigned)(hi - lo); }

/* Scores of a block capped in place, s ← c·tanh(s/c), where its bands' products wrote them. */
static void cap_tile(const Attn *a, const Block *bl, real *sc) {
  if (a->s->softcap <= 0) return;
  real cap = (real)a->s->softcap;
  for (int r = 0; r < bl->n; r++) {
    int c0, c1;
    seen_chunks(a, bl, r / L * L, &c0, &c1);
    for (int c = c0; c < c1; c++) sc[r * TILE + c] = cap * tanh(sc[r * TILE + c] / cap);
  }
}

/* ---- forward ----------------------------------------------------------------------------------- */

/* ALiBi over a forward block of head h, keys by queries, where its bands' products wrote scores:
 * s ← s − slope_h·|query − key|. */
CPU_WIDE static void alibi_tile(const Attn *a, int h, const Block *bl, real *sc) {
  if (!a->slopes) return;
  real slope = a->slopes[h];
  for (int j = 0; j < bl->n; j++) {
    int c0, c1, diagonal = (int)(bl->p + j - bl->c); /* the column of the query at the key */
    seen_chunks(a, bl, j / L * L, &c0, &c1);
#pragma omp simd
    for (int c = c0; c < c1; c++) sc[j * TILE + c] -= slope * (real)abs(c - diagonal);
  }
}

/* Online softmax over a forward block, keys by queries: s[j][c] holds the score of key p + j for query
 * c' + c (c' the block's first query). Per query: m' = max(m, max_j s), s ← exp(s − m') (0 where unseen:
 * causal key > query, or out of the window, key ≤ query − window), l ← l·exp(m − m') + Σ_j s, rescale =
 * exp(m − m'). Vectorised across queries, over the chunks each band of keys sees. */
CPU_WIDE static void softmax_tile(const Attn *a, const Block *bl, real *sc, double *m, double *l, double *rescale) {
  real top[TILE], sum[TILE] = {0};
  for (int c = 0; c < TILE; c++) top[c] = (real)m[c];
  for (int j = 0; j < bl->n; j++) {
    real *row = sc + j * TILE;
    int c0, c1, first, last; /* the queries that see key j: first ≤ c < last */
    seen_chunks(a, bl, j / L * L, &c0, &c1);
    seen(a, bl, j, 1, &first, &last);
#pragma omp simd
    for (int c = c0; c < c1; c++) top[c] = (in_range(c, first, last) & (row[c] > top[c])) ? row[c] : top[c];
  }
  for (int j = 0; j < bl->n; j++) {
    real *row = sc + j * TILE;
    int c0, c1, first, last;
    seen_chunks(a, bl, j / L * L, &c0, &c1);
    seen(a, bl, j, 1, &first, &last);
#pragma omp simd
    for (int c = c0; c < c1; c++) {
      real e = cpu_exp(row[c] - top[c]);
      row[c] = in_range(c, first, last) ? e : 0;
      sum[c] += row[c];
    }
  }
  for (int c = 0; c < TILE; c++) {
    rescale[c] = m[c] == -INFINITY ? 0 : exp(m[c] - top[c]);
    l[c] = l[c] * rescale[c] + sum[c];
    m[c] = top[c];
  }
}

/* Queries t0..t0+nq of head h in sequence b: out = Σ_j softmax_j(S_j)·v_j and lse = log Σ_j exp(S_j),
 * S_j = cap(q·k_j·scale), a tile of keys at a time: Sᵀ = K·(Q·scale)ᵀ, online softmax, O ← O·rescale + P·V
 * (O in double). */
static void forward_tile(const Attn *a, Tiles *w, int64_t b, int h, int64_t t0, const real *v, real *out,
                         real *lse) {
  const AttnShape *s = a->s;
  int D = s->D, nq = (int)cpu_min(TILE, s->T - t0);
  int64_t q_head = attn_q_head(a, b, h), kv_head = attn_kv_head(a, b, h / a->group), first, end;
  /* in a training step these come cold from other kernels: their lines are on their way meanwhile */
  prefetch_rows(a->k + kv_head + t0 * a->kv_stride, nq, D, a->kv_stride, 0);
  prefetch_rows(v + kv_head + t0 * a->kv_stride, nq, D, a->kv_stride, 0);
  prefetch_rows(out + q_head + t0 * a->q_stride, nq, D, a->q_stride, 1);
  a->kernels.transpose(a->q + q_head + t0 * a->q_stride, a->q_stride, nq, D, a->scale, w->panel);
  for (int c = 0; c < TILE; c++) w->m[c] = -INFINITY, w->l[c] = 0;
  seen_tiles(a, 0, t0, nq, &first, &end);
  for (int64_t j0 = first; j0 < end; j0 += TILE) {
    int nk = (int)cpu_min(TILE, s->T - j0);
    int64_t keys = kv_head + j0 * a->kv_stride;
    Block scores = {1, j0, t0, nk, nq}, values = {0, t0, j0, nq, nk};
    band_scores(a, &scores, a->k + keys, a->kv_stride, w->panel, w->s);
    cap_tile(a, &scores, w->s);
    alibi_tile(a, h, &scores, w->s);
    softmax_tile(a, &scores, w->s, w->m, w->l, w->rescale);
    band_sums(a, &values, w->s, 1, TILE, rows_view(a, v + keys, a->kv_stride, nk, 1, w->copies[3]), w->part);
    accumulate(nq, a->Dp, j0 == first, w->rescale, w->part, w->acc);
  }
  for (int c = 0; c < nq; c++) {
    lse[(b * s->Hq + h) * s->T + t0 + c] = (real)(w->m[c] + log(w->l[c]));
    store_rows(w->acc + c * a->Dp, 1, D, a->Dp, 1 / w->l[c], out + q_head + (t0 + c) * a->q_stride, a->q_stride);
  }
}

void k_attention_forward(const AttnShape *s, const real *q, const real *k, const real *v, real *out, real *lse) {
  Attn a;
  attn_init(&a, s, q, k);
  int64_t tiles = (s->T + TILE - 1) / TILE, heads = s->B * s->Hq;
#pragma omp parallel
  {
    Tiles *w = tiles_new(&a, 0);
    /* Tile-major order: later query tiles see more keys (causal), so they go first and the dynamic
     * schedule ends on small items. Then sequences before heads: items that run side by side write other
     * sequences' rows, never the cache line two heads of a row share where rows do not start on one. */
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < heads * tiles; it++) {
      int64_t tile = tiles - 1 - it / heads, bh = it % heads;
      forward_tile(&a, w, bh % s->B, (int)(bh / s->B), tile * TILE, v, out, lse);
    }
    tiles_free(w);
  }
  attn_free(&a);
}

/* ---- backward ---------------------------------------------------------------------------------- */

/* Blocks of query rows by key columns. Each output element is summed by one work item in a fixed order,
 * without atomics, one of two ways: a single sweep, a work item per kv head of a sequence, runs its key
 * tiles in order and within each the query tiles, summing dk and dv per key tile and dq per query over
 * the key tiles in order; or two sweeps, dq by query tiles (key tiles in order) and dk, dv by key tiles,
 * which recompute S and dP for their blocks (seven products a block for five) but have more, smaller work
 * items. Both sum the same blocks' shares, computed alike, in the same order: the same bits, so that the
 * choice may follow the thread count. */

/* Keys j0..j0+nk of kv head g in sequence b: Kᵀ and Vᵀ panels and the rows of K. */
static void load_keys(const Attn *a, Tiles *w, int64_t b, int g, int64_t j0, int nk, const real *v) {
  int64_t keys = attn_kv_head(a, b, g) + j0 * a->kv_stride;
  a->kernels.transpose(a->k + keys, a->kv_stride, nk, a->s->D, 1, w->panel);
  a->kernels.transpose(v + keys, a->kv_stride, nk, a->s->D, 1, w->panel2);
  w->k = rows_view(a, a->k + keys, a->kv_stride, nk, 1, w->copies[2]);
}

/* dot[c] = Σ_e x[c][e]·y[c][e] for c < n in double: L partial sums, of the e ≡ k (mod L) in order,
 * then added pairwise (the same at any vector width). */
CPU_WIDE static void row_dots(int n, int D, const real *x, int64_t x_stride, const real *y, int64_t y_stride,
                              real *dot) {
  for (int c = 0; c < n; c++) {
    const real *xc = x + c * x_stride, *yc = y + c * y_stride;
    double part[L] = {0};
    int e0 = 0;
    for (; e0 + L <= D; e0 += L)
#pragma omp simd
      for (int k = 0; k < L; k++) part[k] += xc[e0 + k] * yc[e0 + k];
    for (int k = 0; e0 + k < D; k++) part[k] += xc[e0 + k] * yc[e0 + k];
    for (int half = L / 2; half > 0; half /= 2)
#pragma omp simd
      for (int k = 0; k < half; k++) part[k] += part[k + half];
    dot[c] = (real)part[0];
  }
}

/* Queries i0..i0+nq of head h in sequence b: rows of q·scale and of dO, their lse, and delta = Σ_e dO·O
 * (in double): the D of dS = P·(dP − D). */
static void load_queries(const Attn *a, Tiles *w, int64_t b, int h, int64_t i0, int nq, const real *out,
                         const real *lse, const real *dout) {
  const AttnShape *s = a->s;
  int64_t queries = attn_q_head(a, b, h) + i0 * a->q_stride, rows = (b * s->Hq + h) * s->T + i0;
  w->q = rows_view(a, a->q + queries, a->q_stride, nq, a->scale, w->copies[0]);
  w->dout = rows_view(a, dout + queries, a->q_stride, nq, 1, w->copies[1]);
  row_dots(nq, s->D, dout + queries, a->q_stride, out + queries, a->q_stride, w->delta);
  for (int c = 0; c < nq; c++) w->lse[c] = lse[rows + c];
}

/* A block's probabilities and score gradients in place of its scores s and dP ds, rows queries, columns
 * keys: S = cap(s) − slope·|query − key|, P = exp(S − lse) (0 where the query does not see the key),
 * dS = P·(dP − delta)·cap'(s), over the chunks each band sees. */
CPU_WIDE static void grad_tile(const Attn *a, int h, const Block *bl, const real *lse, const real *delta, real *sc,
                               real *ds) {
  real inverse_cap = a->s->softcap > 0 ? (real)(1 / a->s->softcap) : 0; /* cap'(s) = 1 − (S/c)², 1 uncapped */
  real alibi = a->slopes ? a->slopes[h] : 0;
  cap_tile(a, bl, sc);
  for (int i = 0; i < bl->n; i++) {
    real *p = sc + i * TILE, *g = ds + i * TILE, lse_i = lse[i], delta_i = delta[i];
    int c0, c1, lo, hi, diagonal = (int)(bl->p + i - bl->c); /* the column of the key at the query */
    seen_chunks(a, bl, i / L * L, &c0, &c1);
    seen(a, bl, i, 1, &lo, &hi);
#pragma omp simd
    for (int c = c0; c < c1; c++) {
      real bias = -alibi * (real)abs(c - diagonal);
      real e = cpu_exp(p[c] + bias - lse_i), slope = 1 - (p[c] * inverse_cap) * (p[c] * inverse_cap);
      p[c] = in_range(c, lo, hi) ? e : 0;
      g[c] = p[c] * (g[c] - delta_i) * slope;
    }
  }
}

/* The block of the loaded queries i0.. (nq) and keys j0.. (nk) of head h: S = (Q·scale)·Kᵀ and dP = dO·Vᵀ
 * by bands of queries over the keys they see, then P and dS. */
static void grad_block(const Attn *a, Tiles *w, int h, const Block *bl) {
  band_scores(a, bl, w->q.x, w->q.stride, w->panel, w->s);
  band_scores(a, bl, w->dout.x, w->dout.stride, w->panel2, w->ds);
  grad_tile(a, h, bl, w->lse, w->delta, w->s, w->ds);
}

/* A block's shares of its keys' sums, by bands of keys over the queries they see: dv += Pᵀ·dO (in acc2)
 * and dk += dSᵀ·(Q·scale) (in acc); fresh: the first shares. */
static void key_sums(const Attn *a, Tiles *w, const Block *bl, int fresh) {
  Block keys = {1, bl->c, bl->p, bl->nc, bl->n};
  band_sums(a, &keys, w->s, 1, TILE, w->dout, w->part);
  accumulate(keys.n, a->Dp, fresh, NULL, w->part, w->acc2);
  band_sums(a, &keys, w->ds, 1, TILE, w->q, w->part);
  accumulate(keys.n, a->Dp, fresh, NULL, w->part, w->acc);
}

/* A block's share of its queries' sums, by bands of queries over the keys they see: dq += dS·K (the scale
 * comes when dq is stored); fresh when its keys are the first the queries see. */
static void query_sums(const Attn *a, Tiles *w, const Block *bl, double *dq) {
  int64_t first, end;
  seen_tiles(a, 0, bl->p, bl->n, &first, &end);
  band_sums(a, bl, w->ds, TILE, 1, w->k, w->part);
  accumulate(bl->n, a->Dp, bl->c == first, NULL, w->part, dq);
}

/* dk and dv of keys j0..j0+TILE of kv head g in sequence b, summed over the query heads of its group and
 * every query tile that sees them, in order; with dq (not NULL: [group][T][Dp]) each block's share of dq
 * is added there too. */
static void dkv_tile(const Attn *a, Tiles *w, int64_t b, int g, int64_t j0, const real *v, const real *out,
                     const real *lse, const real *dout, real *dk, real *dv, double *dq) {
  const AttnShape *s = a->s;
  int nk = (int)cpu_min(TILE, s->T - j0);
  int64_t first, end;
  load_keys(a, w, b, g, j0, nk, v);
  seen_tiles(a, 1, j0, nk, &first, &end);
  for (int h = g * a->group; h < (g + 1) * a->group; h++)
    for (int64_t i0 = first; i0 < end; i0 += TILE) {
      int nq = (int)cpu_min(TILE, s->T - i0);
      Block block = {0, i0, j0, nq, nk};
      load_queries(a, w, b, h, i0, nq, out, lse, dout);
      grad_block(a, w, h, &block);
      key_sums(a, w, &block, h == g * a->group && i0 == first);
      if (dq) query_sums(a, w, &block, dq + ((h - g * a->group) * s->T + i0) * a->Dp);
    }
  int64_t keys = attn_kv_head(a, b, g) + j0 * a->kv_stride;
  store_rows(w->acc, nk, s->D, a->Dp, 1, dk + keys, a->kv_stride);
  store_rows(w->acc2, nk, s->D, a->Dp, 1, dv + keys, a->kv_stride);
}

/* dq of queries i0..i0+TILE of head h in sequence b: dq = scale·Σ_j dS_j·k_j over the key tiles they see,
 * in order. */
static void dq_tile(const Attn *a, Tiles *w, int64_t b, int h, int64_t i0, const real *v, const real *out,
                    const real *lse, const real *dout, real *dq) {
  const AttnShape *s = a->s;
  int nq = (int)cpu_min(TILE, s->T - i0);
  int64_t first, end;
  load_queries(a, w, b, h, i0, nq, out, lse, dout);
  seen_tiles(a, 0, i0, nq, &first, &end);
  for (int64_t j0 = first; j0 < end; j0 += TILE) {
    int nk = (int)cpu_min(TILE, s->T - j0);
    Block block = {0, i0, j0, nq, nk};
    load_keys(a, w, b, h / a->group, j0, nk, v);
    grad_block(a, w, h, &block);
    query_sums(a, w, &block, w->dq);
  }
  store_rows(w->dq, nq, s->D, a->Dp, a->scale, dq + attn_q_head(a, b, h) + i0 * a->q_stride, a->q_stride);
}

/* The single sweep over kv head g of sequence b: its key tiles in order, then dq of its group's heads. */
static void kv_head_sweep(const Attn *a, Tiles *w, int64_t b, int g, const real *v, const real *out,
                          const real *lse, const real *dout, real *dq, real *dk, real *dv) {
  const AttnShape *s = a->s;
  for (int64_t j0 = 0; j0 < s->T; j0 += TILE) dkv_tile(a, w, b, g, j0, v, out, lse, dout, dk, dv, w->dq);
  for (int i = 0; i < a->group; i++)
    store_rows(w->dq + i * s->T * a->Dp, (int)s->T, s->D, a->Dp, a->scale, dq + attn_q_head(a, b, g * a->group + i),
               a->q_stride);
}

/* The single sweep when its work items fill the threads about as well as the two sweeps' (in rounds of
 * one item a thread, at 5/7 of their work) and its dq sums take at most 4 MiB a thread. */
static int single_sweep(const Attn *a) {
  int64_t items = a->s->B * a->s->Hkv, threads = omp_get_max_threads(), rounds = (items + threads - 1) / threads;
  double bytes = (double)a->group * (double)a->s->T * a->Dp * sizeof(double);
  return 5 * rounds * threads <= 7 * items && bytes <= 4 << 20;
}

/* Under rope, dq and dk so far are gradients of the rotated q and k: turn them back. */
static void rope_unrotate_grads(const Attn *a, real *dq, real *dk) {
  const AttnShape *s = a->s;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->B * s->T; p++) {
    rope_rotate(a, p % s->T, -1, s->Hq, dq + p * a->q_stride, dq + p * a->q_stride);
    rope_rotate(a, p % s->T, -1, s->Hkv, dk + p * a->kv_stride, dk + p * a->kv_stride);
  }
}

void k_attention_backward(const AttnShape *s, const real *q, const real *k, const real *v, const real *out,
                          const real *lse, const real *dout, real *dq, real *dk, real *dv) {
  Attn a;
  attn_init(&a, s, q, k);
  int single = single_sweep(&a);
  int64_t tiles = (s->T + TILE - 1) / TILE, q_heads = s->B * s->Hq, kv_heads = s->B * s->Hkv;
#pragma omp parallel
  {
    Tiles *w = tiles_new(&a, single ? a.group * s->T : TILE);
    if (single) {
#pragma omp for schedule(dynamic)
      for (int64_t bg = 0; bg < kv_heads; bg++)
        kv_head_sweep(&a, w, bg % s->B, (int)(bg / s->B), v, out, lse, dout, dq, dk, dv);
    } else {
      /* Causal: later query tiles see more keys, earlier key tiles more queries; they go first. Sequences
       * before heads, as in the forward pass. */
#pragma omp for schedule(dynamic) nowait
      for (int64_t it = 0; it < q_heads * tiles; it++) {
        int64_t tile = tiles - 1 - it / q_heads, bh = it % q_heads;
        dq_tile(&a, w, bh % s->B, (int)(bh / s->B), tile * TILE, v, out, lse, dout, dq);
      }
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < kv_heads * tiles; it++) {
        int64_t tile = it / kv_heads, bg = it % kv_heads;
        dkv_tile(&a, w, bg % s->B, (int)(bg / s->B), tile * TILE, v, out, lse, dout, dk, dv, NULL);
      }
    }
    tiles_free(w);
  }
  if (s->rope) rope_unrotate_grads(&a, dq, dk);
  attn_free(&a);
}
