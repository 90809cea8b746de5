/* attention.c: multi-head attention, forward and backward, in tiles with an online softmax. */
#include "cpu.h"
#include "kernels.h"

/* Causal or not, sliding window, grouped-query, rotary positions, capped scores; no T×T matrix is ever
 * stored. Per head, with scores S = cap(Q·Kᵀ·scale) − slope·|t − t'| (masked causally, and outside the
 * window; the ALiBi term only with alibi), cap(s) = c·tanh(s/c) or s, and P = softmax(S) by rows:
 *   forward   O = P·V, lse = log Σ_t' exp(S)                      (P never stored: online softmax)
 *   backward  P = exp(S − lse) recomputed, dP = dO·Vᵀ, D_t = Σ_e dO·O, dS = P·(dP − D)·cap'(s),
 *             cap' = 1 − (S/c)², dQ = dS·K·scale, dK = dSᵀ·Q·scale, dV = Pᵀ·dO
 * Dot products over D and sums within one tile are in `real`, split across vector lanes; the sums over
 * tiles (O, dQ, dK, dV, the softmax normaliser) are in double. */

/* A tile pairs W positions held in a transposed panel (the vector lanes: queries in the forward pass and
 * for dq, keys for dk and dv) with up to R positions read as rows (keys, or queries). */
enum { W = 32, R = 64 };

/* One call's view of its tensors. */
typedef struct {
  const AttnShape *s;
  int group;                   /* query heads per kv head */
  int64_t q_stride, kv_stride; /* from one position to the next: Hq·D and Hkv·D */
  real scale;                  /* the shape's, or 1/sqrt(D) */
  int64_t window;              /* keys seen back from a query, itself included (T: every one) */
  real *slopes;                /* [Hq] ALiBi's slope of each local head, or NULL */
  const real *q, *k;           /* the queries and keys the scores use: rotated copies under rope */
  real *rotated;               /* those copies (NULL without rope) */
  real *cos, *sin;             /* [T][D/2] rotary tables (NULL without rope) */
} Attn;

/* One thread's scratch. */
typedef struct {
  real *panel, *panel2;   /* [D][W] positions transposed */
  real *s, *ds;           /* [R][W] scores, then probabilities; dP, then dS */
  real *part;             /* [D][W] one tile's share of a sum over tiles */
  double *acc, *acc2;     /* [D][W] sums over tiles */
  double *m, *l, *rescale; /* [W] online softmax per query: running max, running sum, change of scale */
} Tiles;

static Tiles *tiles_new(int D) {
  size_t panel = (size_t)D * W;
  Tiles *w = cpu_alloc(1, sizeof(Tiles), "attention tiles");
  w->panel = cpu_alloc(3 * panel + 2 * R * W, sizeof(real), "attention tiles");
  w->panel2 = w->panel + panel;
  w->part = w->panel2 + panel;
  w->s = w->part + panel;
  w->ds = w->s + R * W;
  w->acc = cpu_alloc(2 * panel + 3 * W, sizeof(double), "attention tiles");
  w->acc2 = w->acc + panel;
  w->m = w->acc2 + panel;
  w->l = w->m + W;
  w->rescale = w->l + W;
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
static void attn_init(Attn *a, const AttnShape *s, const real *q, const real *k) {
  a->s = s;
  a->group = s->Hq / s->Hkv;
  a->q_stride = (int64_t)s->Hq * s->D;
  a->kv_stride = (int64_t)s->Hkv * s->D;
  a->scale = (real)(s->scale > 0 ? s->scale : 1 / sqrt((double)s->D));
  a->window = s->window > 0 && s->window < s->T ? s->window : s->T;
  a->slopes = NULL;
  if (s->alibi) {
    a->slopes = cpu_alloc((size_t)s->Hq, sizeof(real), "ALiBi slopes");
    for (int h = 0; h < s->Hq; h++) a->slopes[h] = (real)attention_alibi_slope(s->heads_total, s->head0 + h);
  }
  a->q = q, a->k = k, a->rotated = a->cos = a->sin = NULL;
  if (!s->rope) return;
  int half = s->D / 2;
  int64_t positions = s->B * s->T, nq = positions * a->q_stride, nk = positions * a->kv_stride;
  a->cos = cpu_alloc((size_t)(2 * s->T * half), sizeof(real), "rotary tables");
  a->sin = a->cos + s->T * half;
  for (int64_t t = 0; t < s->T; t++)
    for (int i = 0; i < half; i++) {
      double angle = (double)t * pow(s->rope_theta, -2.0 * i / s->D);
      a->cos[t * half + i] = (real)cos(angle);
      a->sin[t * half + i] = (real)sin(angle);
    }
  real *qr = a->rotated = cpu_alloc((size_t)(nq + nk), sizeof(real), "rotated q and k"), *kr = qr + nq;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < positions; p++) {
    rope_rotate(a, p % s->T, 1, s->Hq, q + p * a->q_stride, qr + p * a->q_stride);
    rope_rotate(a, p % s->T, 1, s->Hkv, k + p * a->kv_stride, kr + p * a->kv_stride);
  }
  a->q = qr, a->k = kr;
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

/* ---- tile products ----------------------------------------------------------------------------- */

/* panel[e][c] = mul·x[t0 + c][e] for c < n, 0 for n ≤ c < W: W positions of one head, transposed. */
static void load_panel(const real *x, int64_t stride, int64_t t0, int n, int D, real mul, real *panel) {
  for (int c = 0; c < W; c++)
    for (int e = 0; e < D; e++) panel[e * W + c] = c < n ? mul * x[(t0 + c) * stride + e] : 0;
}

/* The two tile products below keep two rows of W sums in local arrays while an inner loop adds two
 * scalars times one shared row of W: with that loop unrolled, the compiler packs it into this machine's
 * vector operations (per clone: AVX-512, AVX2, SSE2) and keeps the sums in vector registers, two
 * independent chains of additions so that the vector units need not wait on the latency of one.
 * A last unpaired row is paired with itself (computed twice, written twice: the same values). */

/* out[r][c] = Σ_e x[r][e]·panel[e][c] for rows r < n of x and every column c < W. */
CPU_WIDE static void tile_products(int n, int D, const real *x, int64_t stride, const real *restrict panel,
                                   real *restrict out) {
  for (int r = 0; r < n; r += 2) {
    int r1 = r + 1 < n ? r + 1 : r;
    const real *x0 = x + r * stride, *x1 = x + r1 * stride;
    real sum0[W] = {0}, sum1[W] = {0};
    for (int e = 0; e < D; e++) {
      real a0 = x0[e], a1 = x1[e];
#pragma GCC unroll 64
      for (int c = 0; c < W; c++) {
        sum0[c] += a0 * panel[e * W + c];
        sum1[c] += a1 * panel[e * W + c];
      }
    }
    memcpy(out + r * W, sum0, sizeof sum0);
    memcpy(out + r1 * W, sum1, sizeof sum1);
  }
}

/* part[e][c] = Σ_r x[r][e]·coef[r][c] over rows r < n of x: the transposed panel of a product such as
 * Vᵀ·P. */
CPU_WIDE static void tile_sums(int n, int D, const real *x, int64_t stride, const real *restrict coef,
                               real *restrict part) {
  for (int e = 0; e < D; e += 2) {
    int e1 = e + 1 < D ? e + 1 : e;
    real sum0[W] = {0}, sum1[W] = {0};
    for (int r = 0; r < n; r++) {
      real a0 = x[r * stride + e], a1 = x[r * stride + e1];
#pragma GCC unroll 64
      for (int c = 0; c < W; c++) {
        sum0[c] += a0 * coef[r * W + c];
        sum1[c] += a1 * coef[r * W + c];
      }
    }
    memcpy(part + e * W, sum0, sizeof sum0);
    memcpy(part + e1 * W, sum1, sizeof sum1);
  }
}

/* acc[e][c] = acc[e][c]·rescale[c] + part[e][c] (rescale NULL: 1): a tile's share enters the double sum. */
CPU_WIDE static void tile_accumulate(int D, const double *rescale, const real *part, double *acc) {
  for (int e = 0; e < D; e++) {
    double *a = acc + e * W;
    const real *p = part + e * W;
    if (rescale) {
#pragma omp simd
      for (int c = 0; c < W; c++) a[c] = a[c] * rescale[c] + p[c];
    } else {
#pragma omp simd
      for (int c = 0; c < W; c++) a[c] += p[c];
    }
  }
}

/* Writes row t0 + c of one head, for c < n, from column c of acc times mul. */
static void store_panel(const double *acc, int n, int D, real mul, int64_t t0, real *head, int64_t stride) {
  for (int c = 0; c < n; c++)
    for (int e = 0; e < D; e++) head[(t0 + c) * stride + e] = (real)(acc[e * W + c] * mul);
}

/* ---- masks and caps ---------------------------------------------------------------------------- */

/* Scores of one tile capped in place: s ← c·tanh(s/c) over rows r < n. */
static void cap_tile(const AttnShape *s, int n, real *sc) {
  if (s->softcap <= 0) return;
  real c = (real)s->softcap;
  for (int i = 0; i < n * W; i++) sc[i] = c * tanh(sc[i] / c);
}

/* ALiBi over one tile of head h: s ← s − slope_h·|query − key|, rows being keys r0 + j (columns queries
 * c0 + c) or queries (columns keys). */
static void alibi_tile(const Attn *a, int h, int rows_are_keys, int64_t r0, int n, int64_t c0, real *sc) {
  if (!a->slopes) return;
  real slope = a->slopes[h];
  for (int j = 0; j < n; j++)
    for (int c = 0; c < W; c++) {
      int64_t distance = rows_are_keys ? c0 + c - (r0 + j) : r0 + j - (c0 + c);
      sc[j * W + c] -= slope * (real)(distance < 0 ? -distance : distance);
    }
}

/* The first key query t sees: t − window + 1 (0 at least), 0 without a causal mask. */
static int64_t first_key(const Attn *a, int64_t t) {
  return a->s->causal && t - a->window + 1 > 0 ? t - a->window + 1 : 0;
}

/* ---- forward ----------------------------------------------------------------------------------- */

/* Online softmax over one tile: s[j][c] holds the score of key j0 + j (j < n) for query t0 + c.
 * Per query: m' = max(m, max_j s), s ← exp(s − m') (0 where unseen: causal j0 + j > t0 + c, or the key
 * out of the window, j0 + j ≤ t0 + c − window), l ← l·exp(m − m') + Σ_j s, rescale = exp(m − m').
 * Vectorised across queries. */
CPU_WIDE static void softmax_tile(const Attn *a, int64_t t0, int64_t j0, int n, real *sc, double *m, double *l,
                                  double *rescale) {
  real top[W], sum[W] = {0};
  for (int c = 0; c < W; c++) top[c] = (real)m[c];
  for (int j = 0; j < n; j++) {
    const real *row = sc + j * W;
    int64_t first = a->s->causal ? j0 + j - t0 : 0; /* the queries that see key j0 + j: first ≤ c < last */
    int64_t last = a->s->causal ? first + a->window : W;
#pragma omp simd
    for (int c = 0; c < W; c++) top[c] = c >= first && c < last && row[c] > top[c] ? row[c] : top[c];
  }
  for (int j = 0; j < n; j++) {
    real *row = sc + j * W;
    int64_t first = a->s->causal ? j0 + j - t0 : 0;
    int64_t last = a->s->causal ? first + a->window : W;
#pragma omp simd
    for (int c = 0; c < W; c++) {
      real e = cpu_exp(row[c] - top[c]);
      row[c] = c >= first && c < last ? e : 0;
      sum[c] += row[c];
    }
  }
  for (int c = 0; c < W; c++) {
    rescale[c] = m[c] == -INFINITY ? 0 : exp(m[c] - top[c]);
    l[c] = l[c] * rescale[c] + sum[c];
    m[c] = top[c];
  }
}

/* Queries t0..t0+W of head h in sequence b: out = Σ_j softmax_j(S_j)·v_j and lse = log Σ_j exp(S_j), S_j = cap(q·k_j·scale),
 * R keys at a time: Sᵀ = K·Qᵀ, online softmax, Oᵀ ← Oᵀ·rescale + Vᵀ·P (Oᵀ in double). */
static void forward_tile(const Attn *a, Tiles *w, int64_t b, int h, int64_t t0, const real *v, real *out,
                         real *lse) {
  const AttnShape *s = a->s;
  int D = s->D, nq = (int)cpu_min(W, s->T - t0);
  int64_t q_head = attn_q_head(a, b, h), kv_head = attn_kv_head(a, b, h / a->group);
  load_panel(a->q + q_head, a->q_stride, t0, nq, D, a->scale, w->panel);
  for (int c = 0; c < W; c++) w->m[c] = -INFINITY, w->l[c] = 0;
  memset(w->acc, 0, (size_t)D * W * sizeof(double));
  int64_t keys = s->causal ? t0 + nq : s->T;
  for (int64_t j0 = first_key(a, t0); j0 < keys; j0 += R) {
    int nk = (int)cpu_min(R, keys - j0);
    const real *kt = a->k + kv_head + j0 * a->kv_stride, *vt = v + kv_head + j0 * a->kv_stride;
    tile_products(nk, D, kt, a->kv_stride, w->panel, w->s);
    cap_tile(s, nk, w->s);
    alibi_tile(a, h, 1, j0, nk, t0, w->s);
    softmax_tile(a, t0, j0, nk, w->s, w->m, w->l, w->rescale);
    tile_sums(nk, D, vt, a->kv_stride, w->s, w->part);
    tile_accumulate(D, w->rescale, w->part, w->acc);
  }
  for (int c = 0; c < nq; c++) {
    lse[(b * s->Hq + h) * s->T + t0 + c] = (real)(w->m[c] + log(w->l[c]));
    double inverse = 1 / w->l[c];
    for (int e = 0; e < D; e++) w->acc[e * W + c] *= inverse;
  }
  store_panel(w->acc, nq, D, 1, t0, out + q_head, a->q_stride);
}

void k_attention_forward(const AttnShape *s, const real *q, const real *k, const real *v, real *out, real *lse) {
  Attn a;
  attn_init(&a, s, q, k);
  int64_t tiles = (s->T + W - 1) / W, heads = s->B * s->Hq;
#pragma omp parallel
  {
    Tiles *w = tiles_new(s->D);
    /* Tile-major order: later query tiles see more keys (causal), so they go first and the dynamic
     * schedule ends on small items. */
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < heads * tiles; it++) {
      int64_t tile = tiles - 1 - it / heads, bh = it % heads;
      forward_tile(&a, w, bh / s->Hq, (int)(bh % s->Hq), tile * W, v, out, lse);
    }
    tiles_free(w);
  }
  attn_free(&a);
}

/* ---- backward ---------------------------------------------------------------------------------- */

/* Two sweeps, each output element owned by one work item that sums in a fixed order: dq by query tiles
 * (keys in rows), dk and dv by key tiles (queries in rows, over every query head of the group). Each
 * recomputes S and dP for its tiles, which costs two tile products more than a single sweep with shared
 * sums would, and needs no atomics. */

/* delta[b][h][t] = Σ_e dO·O of each query row, in double: the D of dS = P·(dP − D). */
static real *attn_deltas(const Attn *a, const real *out, const real *dout) {
  const AttnShape *s = a->s;
  real *delta = cpu_alloc((size_t)(s->B * s->Hq * s->T), sizeof(real), "attention deltas");
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < s->B * s->T; p++)
    for (int h = 0; h < s->Hq; h++) {
      const real *o = out + p * a->q_stride + (int64_t)h * s->D, *g = dout + p * a->q_stride + (int64_t)h * s->D;
      double dot = 0;
      for (int e = 0; e < s->D; e++) dot += g[e] * o[e];
      delta[((p / s->T) * s->Hq + h) * s->T + p % s->T] = (real)dot;
    }
  return delta;
}

/* One tile of scores s and of dP = dO·v in ds, rows j < n and columns c of the panel: S = cap(s),
 * P = exp(S − lse) (0 where the query does not see the key, or past the last column nc) replaces s, and
 * dS = P·(dP − delta)·cap'(s) replaces ds. When rows_are_keys, row j is key r0 + j and column c query
 * c0 + c, with lse and delta per column; otherwise row j is query r0 + j, column c key c0 + c, lse and
 * delta per row. */
CPU_WIDE static void grad_tile(const Attn *a, int h, int rows_are_keys, int64_t r0, int n, int64_t c0, int nc,
                               const real *lse, const real *delta, real *sc, real *ds) {
  const AttnShape *s = a->s;
  real inverse_cap = s->softcap > 0 ? (real)(1 / s->softcap) : 0; /* cap'(s) = 1 − (S/c)², 1 uncapped */
  cap_tile(s, n, sc);
  real alibi = a->slopes ? a->slopes[h] : 0; /* ALiBi's slope: the score less alibi·|query − key| */
  for (int j = 0; j < n; j++) {
    real *p = sc + j * W, *g = ds + j * W;
    /* The columns this row pairs with: causally, a key row meets the queries from itself to the end of
     * its window, a query row the keys of its window up to itself. */
    int64_t diagonal = r0 + j - c0;
    int64_t lo = !s->causal ? 0 : rows_are_keys ? diagonal : diagonal - a->window + 1;
    int64_t hi = !s->causal ? nc : rows_are_keys ? cpu_min(nc, diagonal + a->window) : cpu_min(nc, diagonal + 1);
    if (rows_are_keys) {
#pragma omp simd
      for (int c = 0; c < W; c++) {
        int64_t distance = c - diagonal < 0 ? diagonal - c : c - diagonal;
        real bias = -alibi * (real)distance;
        real e = cpu_exp(p[c] + bias - lse[c]), slope = 1 - (p[c] * inverse_cap) * (p[c] * inverse_cap);
        p[c] = c >= lo && c < hi ? e : 0;
        g[c] = p[c] * (g[c] - delta[c]) * slope;
      }
    } else {
#pragma omp simd
      for (int c = 0; c < W; c++) {
        int64_t distance = c - diagonal < 0 ? diagonal - c : c - diagonal;
        real bias = -alibi * (real)distance;
        real e = cpu_exp(p[c] + bias - lse[j]), slope = 1 - (p[c] * inverse_cap) * (p[c] * inverse_cap);
        p[c] = c >= lo && c < hi ? e : 0;
        g[c] = p[c] * (g[c] - delta[j]) * slope;
      }
    }
  }
}

/* dq of queries t0..t0+W of head h in sequence b: dq = scale·Σ_j dS_j·k_j over the keys they see,
 * R keys at a time, with Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ recomputed and dqᵀ += Kᵀ·dS in double. */
static void dq_tile(const Attn *a, Tiles *w, int64_t b, int h, int64_t t0, const real *v, const real *lse,
                    const real *delta, const real *dout, real *dq) {
  const AttnShape *s = a->s;
  int D = s->D, nq = (int)cpu_min(W, s->T - t0);
  int64_t q_head = attn_q_head(a, b, h), kv_head = attn_kv_head(a, b, h / a->group);
  int64_t rows = (b * s->Hq + h) * s->T + t0;
  real lse_c[W] = {0}, delta_c[W] = {0};
  for (int c = 0; c < nq; c++) lse_c[c] = lse[rows + c], delta_c[c] = delta[rows + c];
  load_panel(a->q + q_head, a->q_stride, t0, nq, D, a->scale, w->panel);
  load_panel(dout + q_head, a->q_stride, t0, nq, D, 1, w->panel2);
  memset(w->acc, 0, (size_t)D * W * sizeof(double));
  int64_t keys = s->causal ? t0 + nq : s->T;
  for (int64_t j0 = first_key(a, t0); j0 < keys; j0 += R) {
    int nk = (int)cpu_min(R, keys - j0);
    const real *kt = a->k + kv_head + j0 * a->kv_stride, *vt = v + kv_head + j0 * a->kv_stride;
    tile_products(nk, D, kt, a->kv_stride, w->panel, w->s);
    tile_products(nk, D, vt, a->kv_stride, w->panel2, w->ds);
    grad_tile(a, h, 1, j0, nk, t0, nq, lse_c, delta_c, w->s, w->ds);
    tile_sums(nk, D, kt, a->kv_stride, w->ds, w->part);
    tile_accumulate(D, NULL, w->part, w->acc);
  }
  store_panel(w->acc, nq, D, a->scale, t0, dq + q_head, a->q_stride);
}

/* dk and dv of keys j0..j0+W of kv head g in sequence b, summed over the query heads of its group and
 * every query that sees them, R queries at a time in a fixed order: S = Q·Kᵀ·scale, dP = dO·Vᵀ,
 * dvᵀ += dOᵀ·P and dkᵀ += Qᵀ·dS·scale in double. */
static void dkv_tile(const Attn *a, Tiles *w, int64_t b, int g, int64_t j0, const real *v, const real *lse,
                     const real *delta, const real *dout, real *dk, real *dv) {
  const AttnShape *s = a->s;
  int D = s->D, nk = (int)cpu_min(W, s->T - j0);
  int64_t kv_head = attn_kv_head(a, b, g);
  load_panel(a->k + kv_head, a->kv_stride, j0, nk, D, a->scale, w->panel);
  load_panel(v + kv_head, a->kv_stride, j0, nk, D, 1, w->panel2);
  memset(w->acc, 0, (size_t)D * W * sizeof(double));
  memset(w->acc2, 0, (size_t)D * W * sizeof(double));
  /* the queries that see these keys: from j0 to the last key's window's end */
  int64_t queries = s->causal ? cpu_min(s->T, j0 + nk - 1 + a->window) : s->T;
  for (int h = g * a->group; h < (g + 1) * a->group; h++)
    for (int64_t t0 = s->causal ? j0 : 0; t0 < queries; t0 += R) {
      int n = (int)cpu_min(R, queries - t0);
      int64_t q_rows = attn_q_head(a, b, h) + t0 * a->q_stride, rows = (b * s->Hq + h) * s->T + t0;
      const real *qt = a->q + q_rows, *gt = dout + q_rows;
      tile_products(n, D, qt, a->q_stride, w->panel, w->s);
      tile_products(n, D, gt, a->q_stride, w->panel2, w->ds);
      grad_tile(a, h, 0, t0, n, j0, nk, lse + rows, delta + rows, w->s, w->ds);
      tile_sums(n, D, gt, a->q_stride, w->s, w->part);
      tile_accumulate(D, NULL, w->part, w->acc2);
      tile_sums(n, D, qt, a->q_stride, w->ds, w->part);
      tile_accumulate(D, NULL, w->part, w->acc);
    }
  store_panel(w->acc, nk, D, a->scale, j0, dk + kv_head, a->kv_stride);
  store_panel(w->acc2, nk, D, 1, j0, dv + kv_head, a->kv_stride);
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

/* The sweeps over (sequence, query head, query tile) and (sequence, kv head, key tile) share one
 * parallel region; dk and dv of a kv head sum over the query heads of its group. */
void k_attention_backward(const AttnShape *s, const real *q, const real *k, const real *v, const real *out,
                          const real *lse, const real *dout, real *dq, real *dk, real *dv) {
  Attn a;
  attn_init(&a, s, q, k);
  real *delta = attn_deltas(&a, out, dout);
  int64_t tiles = (s->T + W - 1) / W, q_heads = s->B * s->Hq, kv_heads = s->B * s->Hkv;
#pragma omp parallel
  {
    Tiles *w = tiles_new(s->D);
#pragma omp for schedule(dynamic) nowait
    for (int64_t it = 0; it < q_heads * tiles; it++) {
      int64_t tile = tiles - 1 - it / q_heads, bh = it % q_heads;
      dq_tile(&a, w, bh / s->Hq, (int)(bh % s->Hq), tile * W, v, lse, delta, dout, dq);
    }
    /* Causal: earlier key tiles are seen by more queries; they go first. */
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < kv_heads * tiles; it++) {
      int64_t tile = it / kv_heads, bg = it % kv_heads;
      dkv_tile(&a, w, bg / s->Hkv, (int)(bg % s->Hkv), tile * W, v, lse, delta, dout, dk, dv);
    }
    tiles_free(w);
  }
  if (s->rope) rope_unrotate_grads(&a, dq, dk);
  free(delta);
  attn_free(&a);
}
