/* philox.c: stream names and the initialisers that fill a rank's shard of a logical tensor. */
#include "philox.h"

uint64_t philox_stream_of(const char *name) {
  uint64_t hash = 0xcbf29ce484222325u; /* FNV-1a 64: offset basis, then xor and multiply per byte */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) hash = (hash ^ *p) * 0x100000001b3u;
  return hash;
}

PhiloxShard philox_shard(int ndim, const int64_t *shape, const int64_t *begin, const int64_t *count) {
  PhiloxShard s = {.ndim = ndim};
  for (int d = 0; d < ndim; d++) {
    s.extent[d] = shape[d];
    s.begin[d] = begin[d];
    s.count[d] = count[d];
  }
  return s;
}

/* The box is walked as rows: every axis but the last, then a contiguous run along the last. */
static int64_t shard_rows(const PhiloxShard *s) {
  int64_t rows = 1;
  for (int d = 0; d < s->ndim - 1; d++) rows *= s->count[d];
  return rows;
}

/* For row r of the box: the unpadded row-major index of its element at last-axis coordinate 0 (in
 * *first), or -1 when the row lies in padding. */
static int shard_row_start(const PhiloxShard *s, int64_t r, int64_t *first) {
  int64_t index = 0, stride = s->extent[s->ndim - 1];
  for (int d = s->ndim - 2; d >= 0; d--) {
    int64_t coord = s->begin[d] + r % s->count[d];
    r /= s->count[d];
    if (coord >= s->extent[d]) return -1;
    index += coord * stride;
    stride *= s->extent[d];
  }
  *first = index;
  return 0;
}

void philox_fill_normal(real *out, const PhiloxShard *s, uint64_t seed, uint64_t stream, double std) {
  int64_t rows = shard_rows(s), width = s->count[s->ndim - 1], col0 = s->begin[s->ndim - 1];
  int64_t extent = s->extent[s->ndim - 1];
  /* out[r, k] = std·N(0,1) drawn at index first(r) + col0 + k; 0 in padding. */
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    real *row = out + r * width;
    int64_t first;
    int padding_row = shard_row_start(s, r, &first) != 0;
    for (int64_t k = 0; k < width; k++) {
      int64_t col = col0 + k;
      row[k] = padding_row || col >= extent ? 0 : (real)(std * philox_normal(seed, stream, (uint64_t)(first + col)));
    }
  }
}

void philox_fill_const(real *out, const PhiloxShard *s, real value) {
  int64_t rows = shard_rows(s), width = s->count[s->ndim - 1], col0 = s->begin[s->ndim - 1];
  int64_t extent = s->extent[s->ndim - 1];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    real *row = out + r * width;
    int64_t first;
    int padding_row = shard_row_start(s, r, &first) != 0;
    for (int64_t k = 0; k < width; k++) row[k] = padding_row || col0 + k >= extent ? 0 : value;
  }
}
