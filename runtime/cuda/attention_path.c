/* attention_path.c: which kernels run a GPU program's attention: cuDNN's fused flash attention for the
 * shapes it serves, plait's own (attention.cu) for the others or when chosen. Decided once per shape on
 * each rank's context, when the shape is first called, and said once; cuDNN's plans, its workspace and
 * the rotated copies of q and k that rope needs are kept with the decision. The cuDNN library is one per
 * process, found and loaded on first need. */
#include "gpu.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_sdpa.h"

#ifndef PLAIT_CUDA_LIBDIR
#define PLAIT_CUDA_LIBDIR ""
#endif

enum { MOST_SITES = 64 };

/* One shape of attention call and what runs it. */
typedef struct {
  AttnShape shape;
  AttentionChoice choice; /* the --attention it was decided under */
  int cudnn;       /* cuDNN's plans below run it; else plait's kernels */
  SdpaPlan forward, backward;
  int accumulated; /* the backward sums dq in fp32 (no engine without it gave the same bits every run) */
} AttentionSite;

struct GpuAttention {
  AttentionChoice choice;
  int report;
  cudnnHandle_t handle;
  AttentionSite sites[MOST_SITES];
  int count;
  void *workspace; /* cuDNN's workspace, then the backward's fp32 sums */
  size_t workspace_bytes;
  act_t *rotated; /* q and k turned by rope, for cuDNN */
  size_t rotated_bytes;
};

/* ---- the library ----------------------------------------------------------------------------------- */

static Cudnn library;
static int library_missing;
static char library_why[4096];
static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static void load_library(void) {
  CudnnSearch where = {getenv("PLAIT_CUDNN"), getenv("PATH"), getenv("HOME"), PLAIT_CUDA_LIBDIR};
  library_missing = cudnn_load(&where, CUDART_VERSION / 1000, &library, library_why, sizeof library_why);
}

/* The process's cuDNN (why untouched), or NULL with why. */
static const Cudnn *cudnn(const char **why) {
  pthread_once(&library_once, load_library);
  if (!library_missing) return &library;
  *why = library_why;
  return NULL;
}

int k_attention_available(AttentionChoice choice, char *why, size_t size) {
  const char *reason;
  if (choice != ATTENTION_CUDNN || cudnn(&reason)) return 0;
  snprintf(why, size, "no cuDNN this program can use (%s); install one (pip install nvidia-cudnn-cu13) or name it "
           "with PLAIT_CUDNN=FILE, or run --attention auto", reason);
  return 1;
}

/* ---- this context's state -------------------------------------------------------------------------- */

static GpuAttention *attention_state(void) {
  GpuContext *c = gpu_context();
  if (!c->attention) {
    c->attention = calloc(1, sizeof *c->attention);
    if (!c->attention) {
      fprintf(stderr, "plait: out of host memory for the attention's state\n");
      exit(1);
    }
  }
  return c->attention;
}

void k_attention_choose(AttentionChoice choice, int report) {
  GpuAttention *a = attention_state();
  a->choice = choice;
  a->report = report;
}

void gpu_attention_free(GpuContext *c) {
  GpuAttention *a = c->attention;
  if (!a) return;
  for (int i = 0; i < a->count; i++) {
    sdpa_plan_free(&a->sites[i].forward);
    sdpa_plan_free(&a->sites[i].backward);
  }
  if (a->handle) library.destroy(a->handle);
  if (a->workspace) cudaFreeAsync(a->workspace, c->stream);
  if (a->rotated) cudaFreeAsync(a->rotated, c->stream);
  free(a);
  c->attention = NULL;
}

/* ---- deciding -------------------------------------------------------------------------------------- */

static int same_shape(const AttnShape *a, const AttnShape *b) {
  return a->B == b->B && a->T == b->T && a->Hq == b->Hq && a->Hkv == b->Hkv && a->D == b->D &&
         a->causal == b->causal && a->rope == b->rope && a->rope_theta == b->rope_theta && a->window == b->window &&
         a->softcap == b->softcap && a->scale == b->scale && a->alibi == b->alibi && a->head0 == b->head0 &&
         a->heads_total == b->heads_total;
}

static float scale_of(const AttnShape *s) { return (float)(s->scale > 0 ? s->scale : 1 / sqrt((double)s->D)); }

/* The window cuDNN masks by: 0 when every earlier key is seen. */
static int64_t window_of(const AttnShape *s) { return s->causal && s->window > 0 && s->window < s->T ? s->window : 0; }

static SdpaShape sdpa_shape(const AttnShape *s) {
  SdpaShape x = {s->B, s->T, (int64_t)s->Hq * s->D, (int64_t)s->Hkv * s->D, s->Hq, s->Hkv, s->D, s->causal,
                 window_of(s), scale_of(s)};
  return x;
}

/* What keeps cuDNN from a shape before any plan is tried, or NULL. */
static const char *cudnn_refusal(const AttnShape *s, char *why, size_t size) {
  struct cudaDeviceProp prop;
  gpu_check(cudaGetDeviceProperties(&prop, gpu_context()->device), "cudaGetDeviceProperties");
  if (s->softcap > 0) return "cuDNN's graph here has no capped scores";
  if (s->alibi) return "cuDNN's graph here has no ALiBi";
  if (s->D % 8 != 0 || s->D > 256) {
    snprintf(why, size, "heads of %d elements: cuDNN takes multiples of 8 up to 256", s->D);
    return why;
  }
  if (prop.major < 8) {
    snprintf(why, size, "compute capability %d.%d: cuDNN's fused attention needs 8.0 or newer", prop.major,
             prop.minor);
    return why;
  }
  return NULL;
}

/* The handle of this context, on its stream. */
static const char *handle_of(GpuAttention *a, const Cudnn *lib, char *why, size_t size) {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  if (!a->handle) status = lib->create(&a->handle);
  if (status == CUDNN_STATUS_SUCCESS) status = lib->set_stream(a->handle, gpu_stream());
  if (status == CUDNN_STATUS_SUCCESS) return NULL;
  snprintf(why, size, "cuDNN does not start: %s", lib->error_string(status));
  return why;
}

/* Both plans of a site: the backward without an fp32 accumulator if an engine gives the same bits every
 * run, else with it. NULL, or why not. */
static const char *build_plans(GpuAttention *a, AttentionSite *site, const Cudnn *lib, char *why, size_t size) {
  SdpaShape s = sdpa_shape(&site->shape);
  char detail[512];
  if (sdpa_plan_build(&site->forward, lib, a->handle, &s, SDPA_FORWARD, detail, sizeof detail)) {
    snprintf(why, size, "cuDNN %s has no plan for the forward graph: %s", lib->file, detail);
    return why;
  }
  if (sdpa_plan_build(&site->backward, lib, a->handle, &s, SDPA_BACKWARD, detail, sizeof detail) == 0) return NULL;
  site->accumulated = 1;
  if (sdpa_plan_build(&site->backward, lib, a->handle, &s, SDPA_BACKWARD_ACCUMULATED, detail, sizeof detail) == 0)
    return NULL;
  sdpa_plan_free(&site->forward);
  snprintf(why, size, "cuDNN %s has no plan for the backward graph: %s", lib->file, detail);
  return why;
}

static size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* The backward's fp32 scratch after cuDNN's workspace: Σ dO·O per row, then dq's sums if accumulated. */
static size_t row_sums_offset(const AttentionSite *site) {
  size_t most = (size_t)(site->forward.workspace_bytes > site->backward.workspace_bytes
                             ? site->forward.workspace_bytes : site->backward.workspace_bytes);
  return aligned(most);
}

static size_t dq_sums_offset(const AttentionSite *site) {
  const AttnShape *s = &site->shape;
  return row_sums_offset(site) + aligned((size_t)(s->B * s->Hq * s->T) * sizeof(float));
}

static size_t site_bytes(const AttentionSite *site) {
  const AttnShape *s = &site->shape;
  return dq_sums_offset(site) + (site->accumulated ? (size_t)(s->B * s->Hq * s->T * s->D) * sizeof(float) : 0);
}

/* Room for this site's workspace and rotated copies, taken now rather than mid-step. */
static void reserve(GpuAttention *a, const AttentionSite *site) {
  const AttnShape *s = &site->shape;
  size_t rotated = site->shape.rope ? (size_t)(s->B * s->T * (s->Hq + s->Hkv) * s->D) * sizeof(act_t) : 0;
  if (site_bytes(site) > a->workspace_bytes) {
    a->workspace_bytes = site_bytes(site);
    a->workspace = gpu_buffer_grow(a->workspace, a->workspace_bytes, "cuDNN's attention workspace");
  }
  if (rotated > a->rotated_bytes) {
    a->rotated_bytes = rotated;
    a->rotated = (act_t *)gpu_buffer_grow(a->rotated, rotated, "the rotated q and k of cuDNN's attention");
  }
}

/* Why cuDNN does not run a site, or NULL when its plans are built. */
static const char *try_cudnn(GpuAttention *a, AttentionSite *site, char *why, size_t size) {
  const char *reason = cudnn_refusal(&site->shape, why, size);
  const Cudnn *lib = reason ? NULL : cudnn(&reason);
  if (!reason) reason = handle_of(a, lib, why, size);
  if (!reason) reason = build_plans(a, site, lib, why, size);
  if (!reason) reserve(a, site);
  return reason;
}

static void say_shape(const AttnShape *s, char *out, size_t size) {
  snprintf(out, size, "B %lld × T %lld, %d heads of %d%s%s%s", (long long)s->B, (long long)s->T, s->Hq, s->D,
           s->Hkv != s->Hq ? " (grouped)" : "", s->causal ? ", causal" : "", s->rope ? ", rope" : "");
}

static void report(const AttentionSite *site, const char *reason) {
  char shape[160], version[32];
  say_shape(&site->shape, shape, sizeof shape);
  if (!site->cudnn) {
    printf("attention: plait's kernels for %s (%s)\n", shape, reason);
    return;
  }
  cudnn_version_text(library.version, version, sizeof version);
  printf("attention: cuDNN %s for %s (%s backward, workspace %.1f MB)\n", version, shape,
         site->accumulated ? "nondeterministic" : "deterministic", (double)site_bytes(site) / 1e6);
}

static void decide(GpuAttention *a, AttentionSite *site) {
  char why[PATH_MAX + 1024];
  const char *reason = a->choice == ATTENTION_PLAIT ? "--attention plait" : try_cudnn(a, site, why, sizeof why);
  char shape[160];
  site->cudnn = reason == NULL;
  if (reason && a->choice == ATTENTION_CUDNN) {
    say_shape(&site->shape, shape, sizeof shape);
    fprintf(stderr, "plait: --attention cudnn cannot run attention over %s: %s; run --attention auto to use "
            "plait's kernels where cuDNN cannot\n", shape, reason);
    exit(1);
  }
  if (a->report) report(site, reason);
}

/* The site of a shape, decided under the choice in force: a shape decided under another choice (a check
 * or benchmark that runs it on cuDNN's kernels, then on plait's own) is decided again. */
static AttentionSite *site_of(const AttnShape *s) {
  GpuAttention *a = attention_state();
  AttentionSite *site = NULL;
  for (int i = 0; i < a->count && !site; i++)
    if (same_shape(&a->sites[i].shape, s)) site = &a->sites[i];
  if (site && site->choice == a->choice) return site;
  if (site) { /* its plans may have calls in flight */
    if (site->cudnn) gpu_check(cudaStreamSynchronize(gpu_stream()), "attention decided again");
    sdpa_plan_free(&site->forward);
    sdpa_plan_free(&site->backward);
  } else if (a->count == MOST_SITES) {
    fprintf(stderr, "plait: more than %d shapes of attention in one program\n", MOST_SITES);
    exit(1);
  } else {
    site = &a->sites[a->count++];
  }
  memset(site, 0, sizeof *site);
  site->shape = *s;
  site->choice = a->choice;
  decide(a, site);
  return site;
}

const char *k_attention_path(const AttnShape *s) { return site_of(s)->cudnn ? "cuDNN" : "plait"; }

/* ---- running ------------------------------------------------------------------------------------- */

/* x turned by rope (inverse: turned back) into y, both [B, T, heads·D]. */
static void rotate(const AttnShape *s, int heads, int inverse, const act_t *x, act_t *y) {
  RopeShape r = {s->B, s->T, heads, s->D, s->D, 0, inverse, s->rope_theta, ROPE_SCALING_NONE, 0, 0, 0, 0};
  k_rope(&r, x, y);
}

/* The q and k cuDNN reads: the caller's, or their rotated copies under rope. */
static void rotated_inputs(const AttnShape *s, const act_t **q, const act_t **k) {
  if (!s->rope) return;
  act_t *q_turned = attention_state()->rotated, *k_turned = q_turned + s->B * s->T * s->Hq * s->D;
  rotate(s, s->Hq, 0, *q, q_turned);
  rotate(s, s->Hkv, 0, *k, k_turned);
  *q = q_turned, *k = k_turned;
}

static void run(const AttentionSite *site, const SdpaPlan *plan, int count, const int64_t *uids, void **pointers) {
  char why[512];
  GpuAttention *a = attention_state();
  if (sdpa_plan_run(plan, a->handle, count, uids, pointers, a->workspace, why, sizeof why) == 0) return;
  char shape[160];
  say_shape(&site->shape, shape, sizeof shape);
  fprintf(stderr, "plait: cuDNN's attention over %s failed: %s\n", shape, why);
  exit(1);
}

/* The scalars a call passes by value: the scale, the masked scores' value, the window, and one. */
typedef struct {
  float scale, masked, window, one;
} Scalars;

static Scalars scalars_of(const AttnShape *s) {
  Scalars x = {scale_of(s), -FLT_MAX, (float)window_of(s), 1.0f};
  return x;
}

/* Appends the mask's scalars the graph names. */
static int add_masks(const AttnShape *s, Scalars *x, int n, int64_t *uids, void **pointers) {
  if (!s->causal) return n;
  uids[n] = SDPA_MASKED, pointers[n++] = &x->masked;
  if (window_of(s) > 0) uids[n] = SDPA_WINDOW, pointers[n++] = &x->window;
  return n;
}

static void cudnn_forward(const AttentionSite *site, const act_t *q, const act_t *k, const act_t *v, act_t *out,
                          real *lse) {
  const AttnShape *s = &site->shape;
  Scalars x = scalars_of(s);
  rotated_inputs(s, &q, &k);
  int64_t uids[8] = {SDPA_Q, SDPA_K, SDPA_V, SDPA_O, SDPA_STATS, SDPA_SCALE};
  void *pointers[8] = {(void *)q, (void *)k, (void *)v, out, lse, &x.scale};
  run(site, &site->forward, add_masks(s, &x, 6, uids, pointers), uids, pointers);
}

static void cudnn_backward(const AttentionSite *site, const act_t *q, const act_t *k, const act_t *v,
                           const act_t *out, const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv) {
  const AttnShape *s = &site->shape;
  Scalars x = scalars_of(s);
  char *workspace = attention_state()->workspace;
  rotated_inputs(s, &q, &k);
  int64_t uids[16] = {SDPA_Q, SDPA_K, SDPA_V, SDPA_O, SDPA_DO, SDPA_STATS, SDPA_DQ, SDPA_DK, SDPA_DV, SDPA_SCALE,
                      SDPA_ONE, SDPA_SOFTMAX_SUM};
  void *pointers[16] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)dout, (void *)lse, dq, dk, dv,
                        &x.scale, &x.one, workspace + row_sums_offset(site)};
  int n = add_masks(s, &x, 12, uids, pointers);
  if (site->accumulated) uids[n] = SDPA_DQ_SUM, pointers[n++] = workspace + dq_sums_offset(site);
  run(site, &site->backward, n, uids, pointers);
  if (!s->rope) return;
  rotate(s, s->Hq, 1, dq, dq);
  rotate(s, s->Hkv, 1, dk, dk);
}

void k_attention_forward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, act_t *out, real *lse) {
  if (s->B <= 0 || s->T <= 0) return;
  const AttentionSite *site = site_of(s);
  if (site->cudnn) cudnn_forward(site, q, k, v, out, lse);
  else plait_attention_forward(s, q, k, v, out, lse);
}

void k_attention_backward(const AttnShape *s, const act_t *q, const act_t *k, const act_t *v, const act_t *out,
                          const real *lse, const act_t *dout, act_t *dq, act_t *dk, act_t *dv) {
  if (s->B <= 0 || s->T <= 0) return;
  const AttentionSite *site = site_of(s);
  if (site->cudnn) cudnn_backward(site, q, k, v, out, lse, dout, dq, dk, dv);
  else plait_attention_backward(s, q, k, v, out, lse, dout, dq, dk, dv);
}
