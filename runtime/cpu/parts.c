/* parts.c: tensors taken apart and joined along the last dim in groups of parts, on the CPU. */
#include "cpu.h"
#include "kernels.h"

static int64_t parts_period(int nparts, const int64_t *sizes) {
  int64_t period = 0;
  for (int i = 0; i < nparts; i++) period += sizes[i];
  return period;
}

static int64_t part_offset(const int64_t *sizes, int part) {
  int64_t offset = 0;
  for (int i = 0; i < part; i++) offset += sizes[i];
  return offset;
}

/* y[r, g·s + j] = x[r, g·period + offset + j] for j < s = sizes[part]. */
void k_split(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, int part, const act_t *x, act_t *y) {
  int64_t period = parts_period(nparts, sizes), offset = part_offset(sizes, part), s = sizes[part];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows * groups; r++) memcpy(y + r * s, x + r * period + offset, (size_t)s * sizeof *y);
}

/* y[r, g·period + offset_i + j] = parts[i][r, g·s_i + j], or 0 where parts[i] is NULL. */
void k_concat(int64_t rows, int64_t groups, int nparts, const int64_t *sizes, const act_t *const *parts, act_t *y) {
  int64_t period = parts_period(nparts, sizes);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows * groups; r++) {
    act_t *out = y + r * period;
    for (int i = 0; i < nparts; out += sizes[i], i++) {
      if (parts[i]) memcpy(out, parts[i] + r * sizes[i], (size_t)sizes[i] * sizeof *out);
      else memset(out, 0, (size_t)sizes[i] * sizeof *out);
    }
  }
}
