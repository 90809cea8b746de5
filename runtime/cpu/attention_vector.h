/* attention_vector.h: the parts of attention.c written over GCC's vectors of VECTOR_BYTES, compiled once
 * per vector width: attention.c includes this file with VECTOR_BYTES, PRODUCT and TRANSPOSE (the
 * functions' names) defined, under that width's target. Each value comes out the same at every width:
 * a sum runs over its terms in order in one lane (a multiplication, then an addition: no fused
 * multiply-add), and a transposition only moves values. */

/* out[r][c] = Σ_{t<n} a[r·ar + t·at]·b[t·ldb + c] for rows r < rows and columns c0 ≤ c < c1, a chunk of L
 * columns at a time: RB rows of the chunk's sums stay in vector registers while t runs, each adding one
 * broadcast a times the chunk's row of b. 8 registers of sums at the wide widths; 16 at 16 bytes, where a
 * broadcast takes two instructions and serves more rows so (measured: faster, though b then comes from
 * memory). A last block short of RB rows repeats its last row. */
static void PRODUCT(const Product *p) {
  typedef real vec __attribute__((vector_size(VECTOR_BYTES)));
  typedef real vec_at __attribute__((vector_size(VECTOR_BYTES), aligned(sizeof(real)), may_alias));
  enum { V = VECTOR_BYTES / (int)sizeof(real), N = L / V, SUMS = VECTOR_BYTES == 16 ? 16 : 8 };
  enum { RB = N < SUMS ? SUMS / N : 1 }; /* lanes, vectors a chunk, rows a block */
  for (int c = p->c0; c < p->c1; c += L)
    for (int r0 = 0; r0 < p->rows; r0 += RB) {
      const real *a[RB];
      vec sum[RB][N];
      for (int r = 0; r < RB; r++) {
        a[r] = p->a + (r0 + r < p->rows ? r0 + r : p->rows - 1) * p->ar;
        for (int v = 0; v < N; v++) sum[r][v] = (vec){0};
      }
      for (int t = 0; t < p->n; t++) {
        const real *bt = p->b + t * p->ldb + c;
        vec b[N];
        for (int v = 0; v < N; v++) b[v] = *(const vec_at *)(bt + v * V);
#pragma GCC unroll 16
        for (int r = 0; r < RB; r++) {
          real x = a[r][t * p->at];
#pragma GCC unroll 16
          for (int v = 0; v < N; v++) sum[r][v] += x * b[v];
        }
      }
      for (int r = 0; r < RB && r0 + r < p->rows; r++)
        for (int v = 0; v < N; v++) *(vec_at *)(p->out + (r0 + r) * p->ldo + c + v * V) = sum[r][v];
    }
}

/* panel[e][c] = mul·x[c·stride + e] for c < n and e < D, 0 for n ≤ c < TILE: blocks of V×V values (V the
 * lanes of a vector) turned in registers by log2 V rounds of shuffles, the round of b swapping the
 * off-diagonal b×b quarters of every 2b×2b block; the dims past the last whole block one by one. */
static void TRANSPOSE(const real *x, int64_t stride, int n, int D, real mul, real *panel) {
#ifdef __clang__
  int whole = 0; /* no __builtin_shuffle: every dim one by one */
#else
  typedef real vec __attribute__((vector_size(VECTOR_BYTES)));
  typedef real_bits lanes __attribute__((vector_size(VECTOR_BYTES)));
  enum { V = VECTOR_BYTES / (int)sizeof(real) };
  static const real_bits numbers[L] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  lanes lane;
  memcpy(&lane, numbers, sizeof lane);
  int whole = D / V * V;
  for (int c0 = 0; c0 < TILE; c0 += V)
    for (int e0 = 0; e0 < whole; e0 += V) {
      vec r[V];
#pragma GCC unroll 16
      for (int c = 0; c < V; c++) {
        r[c] = (vec){0};
        if (c0 + c < n) memcpy(&r[c], x + (c0 + c) * stride + e0, sizeof r[c]);
      }
#pragma GCC unroll 4
      for (int b = V / 2; b > 0; b /= 2) {
        /* lanes of the pair's result: from the first row, or (numbers past V) from the second */
        lanes first = lane + (((lane & b) != 0) & (V - b)), second = first + b;
#pragma GCC unroll 16
        for (int c = 0; c < V; c++)
          if (!(c & b)) {
            vec u = __builtin_shuffle(r[c], r[c + b], first), v = __builtin_shuffle(r[c], r[c + b], second);
            r[c] = u, r[c + b] = v;
          }
      }
#pragma GCC unroll 16
      for (int e = 0; e < V; e++) {
        r[e] *= mul;
        memcpy(panel + (e0 + e) * TILE + c0, &r[e], sizeof r[e]);
      }
    }
#endif
  for (int e = whole; e < D; e++)
    for (int c = 0; c < TILE; c++) panel[e * TILE + c] = c < n ? mul * x[c * stride + e] : 0;
}

#undef VECTOR_BYTES
#undef PRODUCT
#undef TRANSPOSE
