/* embedding.c: token embedding over a vocabulary shard of the table, forward and backward. */
#include <string.h>

#include "cpu.h"
#include "kernels.h"

/* out[n, :] = table[ids[n] − row0, :] when row0 ≤ ids[n] < row0 + rows, else 0. */
void k_embedding_forward(int64_t N, int64_t C, const int32_t *ids, const real *table, int64_t row0, int64_t rows,
                         real *out) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    int64_t row = (int64_t)ids[n] - row0;
    if (row >= 0 && row < rows) memcpy(out + n * C, table + row * C, (size_t)C * sizeof(real));
    else memset(out + n * C, 0, (size_t)C * sizeof(real));
  }
}

/* dtable[ids[n] − row0, :] += dout[n, :] for the ids in the shard. A token repeated in the batch adds
 * into the same row, so tasks own blocks of columns instead of rows of n, and add in the order of n. */
void k_embedding_backward(int64_t N, int64_t C, const int32_t *ids, const real *dout, int64_t row0, int64_t rows,
                          real *dtable) {
  int64_t blocks = (C + CPU_COLUMN_BLOCK - 1) / CPU_COLUMN_BLOCK;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; blk++) {
    int64_t c0 = blk * CPU_COLUMN_BLOCK, width = cpu_min(CPU_COLUMN_BLOCK, C - c0);
    for (int64_t n = 0; n < N; n++) {
      int64_t row = (int64_t)ids[n] - row0;
      if (row < 0 || row >= rows) continue;
      real *restrict dst = dtable + row * C + c0;
      const real *restrict src = dout + n * C + c0;
      for (int64_t c = 0; c < width; c++) dst[c] += src[c];
    }
  }
}
