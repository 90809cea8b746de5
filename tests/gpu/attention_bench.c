/* attention_bench.c: the time of attention's forward and backward at the GPU check's benchmark shapes
 * (GPT-2 124M: B 64, T 1024, 12 heads of 64; the 1.3B GPT: B 8, T 2048, 16 heads of 128; causal, bf16),
 * on the kernels --attention auto picks and on plait's own. Inputs are random (never zeros), each
 * figure the median of 7 rounds of 5 calls after 3 warm-up calls. One line a shape and path, auto's
 * first (tests/gpu/run.sh reads the first line of a shape as auto's):
 *   attention NAME PATH forward_ms backward_ms
 * A shape is decided again when the choice changes (attention_path.c), so the second pass runs on plait's
 * own kernels even where auto picked cuDNN's; a pass on other kernels than asked ends the bench. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "kernels.h"
#include "philox.h"

enum { WARMUP = 3, ROUNDS = 7, CALLS = 5 };

typedef struct {
  act_t *q, *k, *v, *out, *dout, *dq, *dk, *dv;
  real *lse;
} Buffers;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* n bf16 values uniform in [-1, 1) from Philox stream `name`. */
static act_t *random_act(const char *name, int64_t n) {
  act_t *host = malloc((size_t)n * sizeof *host), *dev = device_alloc((size_t)n * sizeof *dev, name);
  for (int64_t i = 0; i < n; i++) {
    float x = (float)(2 * philox_uniform(7, philox_stream_of(name), (uint64_t)i) - 1);
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    host[i] = (act_t)(u >> 16);
  }
  device_upload(dev, host, (size_t)n * sizeof *host);
  free(host);
  return dev;
}

static Buffers buffers_new(const AttnShape *s) {
  int64_t nq = s->B * s->T * s->Hq * s->D, nkv = s->B * s->T * s->Hkv * s->D;
  Buffers b = {random_act("q", nq), random_act("k", nkv), random_act("v", nkv), random_act("out", nq),
               random_act("dout", nq), random_act("dq", nq), random_act("dk", nkv), random_act("dv", nkv),
               device_alloc((size_t)(s->B * s->Hq * s->T) * sizeof(real), "lse")};
  return b;
}

static void buffers_free(Buffers *b) {
  act_t *acts[] = {b->q, b->k, b->v, b->out, b->dout, b->dq, b->dk, b->dv};
  for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) device_free(acts[i]);
  device_free(b->lse);
}

static void call(const AttnShape *s, Buffers *b, int backward) {
  if (backward) k_attention_backward(s, b->q, b->k, b->v, b->out, b->lse, b->dout, b->dq, b->dk, b->dv);
  else k_attention_forward(s, b->q, b->k, b->v, b->out, b->lse);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median ms of one call. */
static double time_calls(const AttnShape *s, Buffers *b, int backward) {
  double rounds[ROUNDS];
  for (int i = 0; i < WARMUP; i++) call(s, b, backward);
  device_sync();
  for (int r = 0; r < ROUNDS; r++) {
    double start = now();
    for (int i = 0; i < CALLS; i++) call(s, b, backward);
    device_sync();
    rounds[r] = (now() - start) * 1e3 / CALLS;
  }
  qsort(rounds, ROUNDS, sizeof *rounds, by_value);
  return rounds[ROUNDS / 2];
}

static void bench(const char *name, AttnShape s) {
  Buffers b = buffers_new(&s);
  AttentionChoice choices[] = {ATTENTION_AUTO, ATTENTION_PLAIT};
  for (int i = 0; i < 2; i++) {
    k_attention_choose(choices[i], 0);
    const char *path = k_attention_path(&s);
    if (choices[i] == ATTENTION_PLAIT && strcmp(path, "plait") != 0) {
      fprintf(stderr, "attention_bench: %s under --attention plait ran on %s's kernels\n", name, path);
      exit(1);
    }
    double forward = time_calls(&s, &b, 0), backward = time_calls(&s, &b, 1);
    printf("attention %s %s %.3f %.3f\n", name, path, forward, backward);
    fflush(stdout);
  }
  buffers_free(&b);
}

int main(void) {
  device_init(0, 1);
  bench("gpt2", (AttnShape){.B = 64, .T = 1024, .Hq = 12, .Hkv = 12, .D = 64, .causal = 1});
  bench("gpt-1.3b", (AttnShape){.B = 8, .T = 2048, .Hq = 16, .Hkv = 16, .D = 128, .causal = 1});
  return 0;
}
