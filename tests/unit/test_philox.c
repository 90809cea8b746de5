/* test_philox.c: Philox4x32-10 against the published vectors, the draws' statistics, and shards that
 * draw the same numbers as the whole tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "philox.h"

static const uint64_t seed = 1234, stream = 77;

/* Random123's known answers for Philox4x32-10: counter and key all zeros, all ones, and digits of pi. */
static void test_known_answers(void) {
  static const struct {
    uint32_t counter[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (unsigned t = 0; t < sizeof kat / sizeof *kat; t++) {
    Philox4 counter;
    memcpy(counter.v, kat[t].counter, sizeof counter.v);
    Philox4 out = philox4x32_10(counter, kat[t].key[0], kat[t].key[1]);
    for (int i = 0; i < 4; i++)
      CHECK(out.v[i] == kat[t].out[i], "vector %u word %d: %08x, expected %08x", t, i, out.v[i], kat[t].out[i]);
  }
  /* The pi vector again through the (seed, stream, index) packing: index and stream low word first. */
  Philox4 w = philox_words(0x299f31d0a4093822u, 0x0370734413198a2eu, 0x85a308d3243f6a88u);
  CHECK(w.v[0] == 0xd16cfe09 && w.v[3] == 0x24126ea1, "packing of seed, stream and index: %08x %08x", w.v[0], w.v[3]);
}

/* FNV-1a 64's published values for "", "a" and "foobar". */
static void test_stream_names(void) {
  CHECK(philox_stream_of("") == 0xcbf29ce484222325u, "empty name");
  CHECK(philox_stream_of("a") == 0xaf63dc4c8601ec8cu, "\"a\": %llx", (unsigned long long)philox_stream_of("a"));
  CHECK(philox_stream_of("foobar") == 0x85944171f73967e8u, "\"foobar\"");
  CHECK(philox_stream_of("h.0.attn.w") != philox_stream_of("h.1.attn.w"), "distinct names, distinct streams");
}

static void test_normal_moments(void) {
  const int n = 1000000;
  double sum = 0, sumsq = 0;
  int beyond2 = 0;
  for (int i = 0; i < n; i++) {
    double z = philox_normal(seed, stream, (uint64_t)i);
    sum += z, sumsq += z * z;
    beyond2 += fabs(z) > 2;
  }
  double mean = sum / n, sd = sqrt(sumsq / n - mean * mean), tail = (double)beyond2 / n;
  CHECK(fabs(mean) < 0.005, "mean %g", mean);
  CHECK(fabs(sd - 1) < 0.005, "std %g", sd);
  CHECK(fabs(tail - 0.0455) < 0.002, "P(|z| > 2) = %g, expected 0.0455", tail);
}

static void test_uniform_and_below(void) {
  const int n = 200000;
  double sum = 0, lo = 1, hi = 0;
  int bins[10] = {0};
  for (int i = 0; i < n; i++) {
    double u = philox_uniform(seed, stream, (uint64_t)i);
    sum += u;
    lo = u < lo ? u : lo, hi = u > hi ? u : hi;
    uint64_t k = philox_below(seed, stream + 1, (uint64_t)i, 10);
    if (k < 10) bins[k]++;
  }
  CHECK(lo >= 0 && hi < 1, "uniform out of [0, 1): %g..%g", lo, hi);
  CHECK(fabs(sum / n - 0.5) < 0.003, "uniform mean %g", sum / n);
  for (int k = 0; k < 10; k++) CHECK(abs(bins[k] - n / 10) < n / 200, "bin %d holds %d of %d", k, bins[k], n);
  CHECK(philox_uniform(seed, stream, 5) != philox_uniform(seed + 1, stream, 5), "the seed changes the draw");
  CHECK(philox_uniform(seed, stream, 5) != philox_uniform(seed, stream + 1, 5), "the stream changes the draw");
}

static void test_keep_rate(void) {
  const double ps[] = {0, 0.1, 0.5, 0.9, 1};
  const int n = 1000000;
  for (unsigned t = 0; t < sizeof ps / sizeof *ps; t++) {
    int kept = 0;
    for (int i = 0; i < n; i++) kept += philox_keep(seed, stream, (uint64_t)i, ps[t]);
    double rate = (double)kept / n;
    CHECK(fabs(rate - (1 - ps[t])) < 0.002, "p = %g: keep rate %g", ps[t], rate);
  }
}

/* The whole tensor draws element i (row-major) at index i. */
static void test_whole_tensor_indexing(void) {
  int64_t shape[3] = {3, 4, 5}, zero[3] = {0, 0, 0};
  PhiloxShard s = philox_shard(3, shape, zero, shape);
  real out[60];
  philox_fill_normal(out, &s, seed, stream, 0.02);
  for (int i = 0; i < 60; i++)
    CHECK(out[i] == (real)(0.02 * philox_normal(seed, stream, (uint64_t)i)), "element %d", i);
}

/* Fills the box [begin, begin + count) of a rows×cols tensor (extent erows×ecols) and checks it against
 * the same box of `whole`. */
static void check_box(const real *whole, int64_t rows, int64_t cols, int64_t erows, int64_t ecols, int64_t r0,
                      int64_t nr, int64_t c0, int64_t nc) {
  PhiloxShard s = {.ndim = 2, .extent = {erows, ecols}, .begin = {r0, c0}, .count = {nr, nc}};
  real *box = malloc(sizeof(real) * (size_t)(nr * nc));
  philox_fill_normal(box, &s, seed, stream, 0.02);
  int bad = 0;
  for (int64_t r = 0; r < nr; r++)
    for (int64_t c = 0; c < nc; c++) bad += box[r * nc + c] != whole[(r0 + r) * cols + c0 + c];
  CHECK(bad == 0, "box rows %lld+%lld cols %lld+%lld of %lldx%lld: %d elements differ from the whole", (long long)r0,
        (long long)nr, (long long)c0, (long long)nc, (long long)rows, (long long)cols, bad);
  free(box);
}

static void test_shards_match_whole(void) {
  enum { R = 8, C = 12 };
  int64_t shape[2] = {R, C}, zero[2] = {0, 0};
  PhiloxShard s = philox_shard(2, shape, zero, shape);
  real whole[R * C];
  philox_fill_normal(whole, &s, seed, stream, 0.02);
  for (int ways = 2; ways <= 4; ways += 2)
    for (int k = 0; k < ways; k++) {
      check_box(whole, R, C, R, C, k * R / ways, R / ways, 0, C); /* split on axis 0 */
      check_box(whole, R, C, R, C, 0, R, k * C / ways, C / ways); /* split on axis 1 */
    }
  check_box(whole, R, C, R, C, 3, 2, 5, 4); /* an arbitrary box */
}

/* A 3-D tensor split on its middle axis. */
static void test_shards_3d(void) {
  int64_t shape[3] = {2, 6, 4}, zero[3] = {0, 0, 0};
  PhiloxShard s = philox_shard(3, shape, zero, shape);
  real whole[48], part[16];
  philox_fill_normal(whole, &s, seed, stream, 1);
  int64_t begin[3] = {0, 2, 0}, count[3] = {2, 2, 4};
  PhiloxShard box = philox_shard(3, shape, begin, count);
  philox_fill_normal(part, &box, seed, stream, 1);
  int bad = 0;
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int c = 0; c < 4; c++) bad += part[(a * 2 + b) * 4 + c] != whole[(a * 6 + 2 + b) * 4 + c];
  CHECK(bad == 0, "%d elements of the 3-D box differ", bad);
}

/* A vocabulary padded from 10 to 16 rows: rows ≥ 10 are 0 and the others equal an unpadded 10-row
 * tensor's, whole or split; the same for padding columns. */
static void test_padding(void) {
  enum { V = 10, VP = 16, C = 6 };
  int64_t real_shape[2] = {V, C}, zero[2] = {0, 0};
  PhiloxShard unpadded = philox_shard(2, real_shape, zero, real_shape);
  real plain[V * C], padded[VP * C];
  philox_fill_normal(plain, &unpadded, seed, stream, 0.02);
  PhiloxShard s = {.ndim = 2, .extent = {V, C}, .begin = {0, 0}, .count = {VP, C}};
  philox_fill_normal(padded, &s, seed, stream, 0.02);
  int bad = 0, nonzero = 0;
  for (int i = 0; i < V * C; i++) bad += padded[i] != plain[i];
  for (int i = V * C; i < VP * C; i++) nonzero += padded[i] != 0;
  CHECK(bad == 0, "%d real elements moved by the padding", bad);
  CHECK(nonzero == 0, "%d padding elements are not 0", nonzero);
  for (int k = 0; k < 4; k++) check_box(padded, VP, C, V, C, k * VP / 4, VP / 4, 0, C);
  check_box(padded, VP, C, V, C, 0, VP, 3, 3);

  PhiloxShard cols = {.ndim = 2, .extent = {V, 4}, .begin = {0, 0}, .count = {V, C}};
  int64_t narrow_shape[2] = {V, 4};
  PhiloxShard narrow = philox_shard(2, narrow_shape, zero, narrow_shape);
  real wide[V * C], thin[V * 4];
  philox_fill_normal(wide, &cols, seed, stream, 1);
  philox_fill_normal(thin, &narrow, seed, stream, 1);
  bad = 0;
  for (int r = 0; r < V; r++)
    for (int c = 0; c < C; c++) bad += wide[r * C + c] != (c < 4 ? thin[r * 4 + c] : 0);
  CHECK(bad == 0, "%d elements wrong with padding columns", bad);
}

static void test_const_fill(void) {
  real out[12];
  PhiloxShard s = {.ndim = 1, .extent = {9}, .begin = {0}, .count = {12}};
  philox_fill_const(out, &s, 1);
  for (int i = 0; i < 12; i++) CHECK(out[i] == (i < 9 ? 1 : 0), "ones: element %d is %g", i, (double)out[i]);
  PhiloxShard tail = {.ndim = 1, .extent = {9}, .begin = {6}, .count = {6}};
  philox_fill_const(out, &tail, 1);
  for (int i = 0; i < 6; i++) CHECK(out[i] == (i < 3 ? 1 : 0), "box of ones: element %d is %g", i, (double)out[i]);
}

int main(void) {
  RUN(test_known_answers);
  RUN(test_stream_names);
  RUN(test_normal_moments);
  RUN(test_uniform_and_below);
  RUN(test_keep_rate);
  RUN(test_whole_tensor_indexing);
  RUN(test_shards_match_whole);
  RUN(test_shards_3d);
  RUN(test_padding);
  RUN(test_const_fill);
  TEST_EXIT();
}
