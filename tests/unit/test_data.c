/* test_data.c: token files (every check and its message) and the training, validation and masked-LM
 * batches, including their independence from how samples are split across data-parallel ranks. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "train/data.h"

static char dir[] = "/tmp/plait-test-data-XXXXXX";
static char path[256];

/* Writes a token file with the given header words and n tokens token(i); extra bytes are appended
 * (negative: that many cut off the end). */
static void write_file(const char *name, int32_t magic, int32_t version, int32_t header_count, int64_t n,
                       uint16_t (*token)(int64_t), int64_t extra) {
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int32_t header[DATA_HEADER_INTS] = {magic, version, header_count};
  int64_t size = DATA_HEADER_BYTES + 2 * n + extra;
  unsigned char *bytes = calloc(1, (size_t)(DATA_HEADER_BYTES + 2 * n + (extra > 0 ? extra : 0)));
  memcpy(bytes, header, sizeof header);
  for (int64_t i = 0; i < n; i++) {
    uint16_t t = token(i);
    memcpy(bytes + DATA_HEADER_BYTES + 2 * i, &t, 2);
  }
  FILE *f = fopen(path, "wb");
  fwrite(bytes, 1, (size_t)size, f);
  fclose(f);
  free(bytes);
}

static uint16_t token_mixed(int64_t i) { return (uint16_t)((i * 7919 + 13) % 30000); }
static uint16_t token_position(int64_t i) { return (uint16_t)i; }

static void write_good(const char *name, int64_t n, uint16_t (*token)(int64_t)) {
  write_file(name, DATA_MAGIC, DATA_VERSION, (int32_t)n, n, token, 0);
}

/* data_open must fail with exactly `expected` (after the path and ": "). */
static void expect_open_error(int64_t vocab, int64_t seq, DataUse use, const char *expected) {
  TokenFile f;
  char want[1200];
  snprintf(want, sizeof want, "%s: %s", path, expected);
  int rc = data_open(&f, path, vocab, seq, use);
  CHECK(rc == -1, "%s opened", path);
  CHECK(strcmp(f.error, want) == 0, "message\n  got  '%s'\n  want '%s'", f.error, want);
  CHECK(strchr(f.error, '\n') == NULL, "the message is more than one line");
}

static void test_open_reads_tokens(void) {
  write_good("good.bin", 5000, token_mixed);
  TokenFile f;
  CHECK(data_open(&f, path, 30000, 64, DATA_TRAIN) == 0, "open: %s", f.error);
  CHECK(f.count == 5000, "count %lld", (long long)f.count);
  int bad = 0;
  for (int64_t i = 0; i < f.count; i++) bad += data_token(&f, i) != token_mixed(i);
  CHECK(bad == 0, "%d tokens differ", bad);
  data_close(&f);
}

static void test_open_errors(void) {
  snprintf(path, sizeof path, "%s/missing.bin", dir);
  expect_open_error(
      256, 8, DATA_TRAIN,
      "cannot open it (No such file or directory); give the path of a token file made with plait "
      "data");

  snprintf(path, sizeof path, "%s", dir);
  expect_open_error(256, 8, DATA_TRAIN,
                    "not a regular file (a directory); give the path of a token file made with plait data");

  write_file("short.bin", DATA_MAGIC, DATA_VERSION, 0, 0, token_position, -24);
  expect_open_error(256, 8, DATA_TRAIN,
                    "1000 bytes, shorter than the 1024-byte header of a token file; remake it with plait data");

  write_file("magic.bin", 12345, DATA_VERSION, 100, 100, token_position, 0);
  expect_open_error(
      256, 8, DATA_TRAIN,
      "bad magic 12345 (a token file starts with 20240520 or 20240801); this is not a token file, "
      "make one with plait data");

  write_file("version.bin", DATA_MAGIC, 2, 100, 100, token_position, 0);
  expect_open_error(256, 8, DATA_TRAIN,
                    "token file version 2 under magic 20240520, but only version 1 (uint16 "
                    "tokens) is read there; remake it with plait data");
  write_file("wide_version.bin", DATA_MAGIC32, 1, 100, 100, token_position, 0);
  expect_open_error(256, 8, DATA_TRAIN,
                    "token file version 1 under magic 20240801, but only version 7 (uint32 "
                    "tokens) is read there; remake it with plait data");
  /* uint32 tokens: 100 of them take 400 bytes, not the 200 of uint16 ones */
  write_file("wide.bin", DATA_MAGIC32, DATA_VERSION32, 100, 100, token_position, 0);
  expect_open_error(256, 8, DATA_TRAIN,
                    "the header counts 100 tokens (1424 bytes) but the file has 1224 bytes; the "
                    "file is truncated or damaged, remake it with plait data");

  write_file("cut.bin", DATA_MAGIC, DATA_VERSION, 100, 100, token_position, -3);
  expect_open_error(256, 8, DATA_TRAIN,
                    "the header counts 100 tokens (1224 bytes) but the file has 1221 bytes; the file is truncated or "
                    "damaged, remake it with plait data");

  write_file("long.bin", DATA_MAGIC, DATA_VERSION, 100, 100, token_position, 2);
  expect_open_error(256, 8, DATA_TRAIN,
                    "the header counts 100 tokens (1224 bytes) but the file has 1226 bytes; the file is truncated or "
                    "damaged, remake it with plait data");

  write_good("few.bin", 8, token_position);
  expect_open_error(256, 8, DATA_TRAIN,
                    "8 tokens, fewer than the 9 of one training window (sequence length + 1); use a longer file or a "
                    "shorter sequence");
  write_good("one.bin", 1, token_position);
  expect_open_error(256, 8, DATA_EVAL,
                    "1 tokens, fewer than the 2 --eval needs (a token and the next, to predict it); use a longer file");

  write_good("vocab.bin", 300, token_position);
  expect_open_error(256, 8, DATA_TRAIN,
                    "token 256 at position 256 is not below the model's vocabulary size 256; use a file made with this "
                    "model's tokenizer");
}

/* Every sample is a window of the file: inputs are seq tokens from its start, targets the next seq. */
static void test_train_windows(void) {
  write_good("train.bin", 5000, token_mixed);
  TokenFile f;
  CHECK(data_open(&f, path, 30000, 64, DATA_TRAIN) == 0, "open: %s", f.error);
  DataSlice s = {.seq = 64, .global_batch = 16, .first = 0, .count = 16};
  int32_t in[16 * 64], tg[16 * 64];
  int64_t lo = f.count, hi = 0;
  for (int step = 0; step < 50; step++) {
    data_train_batch(&f, 42, step, &s, in, tg);
    for (int j = 0; j < 16; j++) {
      int64_t start = data_window_start(&f, 42, step, &s, j);
      lo = start < lo ? start : lo, hi = start > hi ? start : hi;
      CHECK(start >= 0 && start + 64 < f.count, "start %lld out of range", (long long)start);
      int bad = 0;
      for (int t = 0; t < 64; t++)
        bad += in[j * 64 + t] != data_token(&f, start + t) ||
               tg[j * 64 + t] != data_token(&f, start + t + 1);
      CHECK(bad == 0, "step %d sample %d: %d positions are not the window at %lld", step, j, bad, (long long)start);
    }
  }
  /* 800 draws over 4936 starts reach near both ends. */
  CHECK(lo < 100 && hi > f.count - 64 - 100, "starts span only %lld..%lld", (long long)lo, (long long)hi);
  CHECK(data_window_start(&f, 42, 0, &s, 0) != data_window_start(&f, 43, 0, &s, 0), "the seed changes the window");
  data_close(&f);
}

/* Data-parallel rank r of dp reading [r·G/dp, (r+1)·G/dp) gets exactly the rows one rank reads. */
static void test_train_split_ranks(void) {
  write_good("split.bin", 5000, token_mixed);
  TokenFile f;
  CHECK(data_open(&f, path, 30000, 32, DATA_TRAIN) == 0, "open: %s", f.error);
  enum { G = 8, T = 32 };
  DataSlice whole = {.seq = T, .global_batch = G, .first = 0, .count = G};
  int32_t in[G * T], tg[G * T], part_in[G * T], part_tg[G * T];
  data_train_batch(&f, 7, 3, &whole, in, tg);
  for (int dp = 2; dp <= 4; dp *= 2)
    for (int r = 0; r < dp; r++) {
      DataSlice s = {.seq = T, .global_batch = G, .first = r * G / dp, .count = G / dp};
      data_train_batch(&f, 7, 3, &s, part_in, part_tg);
      size_t bytes = sizeof(int32_t) * (size_t)(s.count * T);
      CHECK(memcmp(part_in, in + s.first * T, bytes) == 0 && memcmp(part_tg, tg + s.first * T, bytes) == 0,
            "dp %d rank %d reads other windows than one rank", dp, r);
    }
  data_close(&f);
}

/* 101 tokens with seq 10: 10 windows at 0, 10, ..., 90; batch b of G = 4 reads windows 4b..4b+3 mod 10. */
static void test_val_sequential(void) {
  write_good("val.bin", 101, token_position);
  TokenFile f;
  CHECK(data_open(&f, path, 256, 10, DATA_TRAIN) == 0, "open: %s", f.error);
  DataSlice s = {.seq = 10, .global_batch = 4, .first = 1, .count = 3};
  int32_t in[30], tg[30];
  for (int b = 0; b < 4; b++) {
    data_val_batch(&f, b, &s, in, tg);
    for (int i = 0; i < 3; i++) {
      int window = (4 * b + 1 + i) % 10;
      int bad = 0;
      for (int t = 0; t < 10; t++) bad += in[i * 10 + t] != window * 10 + t || tg[i * 10 + t] != window * 10 + t + 1;
      CHECK(bad == 0, "batch %d sample %d is not window %d (starts with %d)", b, 1 + i, window, in[i * 10]);
    }
  }
  data_close(&f);
}

/* Masked LM: about 15% targets; of those 80% mask, 10% random, 10% unchanged; elsewhere -1 and the input
 * unchanged; the rank split reads the same. */
static void test_mlm(void) {
  write_good("mlm.bin", 20000, token_mixed);
  TokenFile f;
  CHECK(data_open(&f, path, 30000, 128, DATA_TRAIN) == 0, "open: %s", f.error);
  enum { G = 16, T = 128, MASK = 29999 };
  DataSlice s = {.seq = T, .global_batch = G, .first = 0, .count = G};
  int32_t in[G * T], tg[G * T], part_in[G * T / 2], part_tg[G * T / 2];
  int64_t positions = 0, marked = 0, masked = 0, random = 0, unchanged = 0, wrong = 0;
  for (int step = 0; step < 20; step++) {
    data_mlm_batch(&f, 5, step, &s, MASK, in, tg);
    for (int j = 0; j < G; j++) {
      int64_t start = data_window_start(&f, 5, step, &s, j);
      for (int t = 0; t < T; t++, positions++) {
        int32_t x = in[j * T + t], y = tg[j * T + t];
        if (y == -1) {
          wrong += x != data_token(&f, start + t);
          continue;
        }
        marked++;
        wrong += y != data_token(&f, start + t);
        if (x == MASK)
          masked++;
        else if (x == data_token(&f, start + t))
          unchanged++;
        else
          random++, wrong += x < 0 || x >= 30000;
      }
    }
  }
  CHECK(wrong == 0, "%lld positions are wrong", (long long)wrong);
  double rate = (double)marked / positions;
  CHECK(rate > 0.14 && rate < 0.16, "marked %g of positions", rate);
  CHECK(masked > 0.77 * marked && masked < 0.83 * marked, "masked %lld of %lld", (long long)masked, (long long)marked);
  CHECK(random > 0.08 * marked && random < 0.12 * marked, "random %lld of %lld", (long long)random, (long long)marked);
  CHECK(unchanged > 0.08 * marked && unchanged < 0.12 * marked, "unchanged %lld of %lld", (long long)unchanged,
        (long long)marked);

  DataSlice half = {.seq = T, .global_batch = G, .first = G / 2, .count = G / 2};
  data_mlm_batch(&f, 5, 19, &half, MASK, part_in, part_tg);
  CHECK(memcmp(part_in, in + G / 2 * T, sizeof part_in) == 0 && memcmp(part_tg, tg + G / 2 * T, sizeof part_tg) == 0,
        "the second half read alone differs");
  data_close(&f);
}

/* Evaluation reads the file once in order: 37 tokens with seq 10 are ceil(36 / 10) = 4 windows at 0, 10,
 * 20, 30, the last predicting tokens 31..36 and then nothing (input 0, target -1), as every window past
 * it; every token but the first is a target exactly once, and a rank's slice reads what one rank reads. */
static void test_eval_sequential(void) {
  write_good("eval.bin", 37, token_position);
  TokenFile f;
  CHECK(data_open(&f, path, 256, 10, DATA_EVAL) == 0, "open: %s", f.error);
  CHECK(data_eval_windows(f.count, 10, 0) == 4, "%lld windows", (long long)data_eval_windows(f.count, 10, 0));
  enum { G = 3, T = 10 };
  DataSlice all = {.seq = T, .global_batch = G, .first = 0, .count = G}, last = {T, G, 2, 1};
  int32_t in[G * T], tg[G * T], part_in[T], part_tg[T];
  int seen[37] = {0}, wrong = 0;
  for (int b = 0; b < 2; b++) {
    data_eval_batch(&f, b, &all, in, tg);
    for (int n = 0; n < G * T; n++) {
      int at = (b * G) * T + n, inside = at + 1 < 37;
      wrong += in[n] != (inside ? at : 0) || tg[n] != (inside ? at + 1 : -1);
      if (tg[n] >= 0) seen[tg[n]]++;
    }
    data_eval_batch(&f, b, &last, part_in, part_tg);
    CHECK(memcmp(part_in, in + 2 * T, sizeof part_in) == 0 && memcmp(part_tg, tg + 2 * T, sizeof part_tg) == 0,
          "batch %d: the last sample read alone differs", b);
  }
  CHECK(wrong == 0, "%d positions are not the file's tokens in order", wrong);
  int once = 0;
  for (int k = 1; k < 37; k++) once += seen[k] == 1;
  CHECK(seen[0] == 0 && once == 36, "token 0 predicted %d times, %d of tokens 1..36 exactly once", seen[0], once);
  CHECK(data_eval_windows(37, 9, 0) == 4 && data_eval_windows(37, 12, 0) == 3 && data_eval_windows(37, 10, 1) == 4 &&
            data_eval_windows(2, 10, 0) == 1,
        "windows for seq 9, 12, masked LM and a file of 2 tokens");
  data_close(&f);
}

/* Masked-LM evaluation: windows of the file's own tokens, about 15% of them targets, the masks keyed by
 * the position in the file (so another batch size draws the same), nothing past the end. */
static void test_mlm_eval(void) {
  write_good("mlm_eval.bin", 1000, token_mixed);
  TokenFile f;
  CHECK(data_open(&f, path, 30000, 64, DATA_EVAL) == 0, "open: %s", f.error);
  enum { T = 64, MASK = 29999 };
  int64_t windows = data_eval_windows(f.count, T, 1), targets = 0, wrong = 0;
  CHECK(windows == 16, "%lld windows", (long long)windows);
  int32_t in[16 * T], tg[16 * T], one_in[T], one_tg[T];
  DataSlice all = {.seq = T, .global_batch = 16, .first = 0, .count = 16}, single = {T, 1, 0, 1};
  data_mlm_eval_batch(&f, 5, 0, &all, MASK, in, tg);
  for (int n = 0; n < 16 * T; n++) {
    if (n >= 1000) {
      wrong += in[n] != 0 || tg[n] != -1;
      continue;
    }
    targets += tg[n] >= 0;
    wrong += tg[n] >= 0 ? tg[n] != data_token(&f, n) : in[n] != data_token(&f, n) || tg[n] != -1;
  }
  CHECK(wrong == 0, "%lld positions are wrong", (long long)wrong);
  CHECK(targets > 110 && targets < 190, "%lld targets of 1000 tokens", (long long)targets);
  data_mlm_eval_batch(&f, 5, 7, &single, MASK, one_in, one_tg);
  CHECK(memcmp(one_in, in + 7 * T, sizeof one_in) == 0 && memcmp(one_tg, tg + 7 * T, sizeof one_tg) == 0,
        "window 7 read as batch 7 of one window differs");
  data_mlm_eval_batch(&f, 6, 0, &all, MASK, in, tg);
  CHECK(memcmp(one_tg, tg + 7 * T, sizeof one_tg) != 0, "seed 6 masks window 7 as seed 5 does");
  data_close(&f);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  RUN(test_open_reads_tokens);
  RUN(test_open_errors);
  RUN(test_train_windows);
  RUN(test_train_split_ranks);
  RUN(test_val_sequential);
  RUN(test_mlm);
  RUN(test_eval_sequential);
  RUN(test_mlm_eval);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  TEST_EXIT();
}
