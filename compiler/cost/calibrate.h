/* calibrate.h: a machine file from what build/plait-probe measured on this machine: the GEMM
 * rate at each shape measured (and one rate fitted to them all), the streaming rate and
 * per-kernel overhead fitted to stream times over sizes, the attention kernel's rate, the rate
 * of special functions (a GeLU's exp), and the all-reduce's per-step latency and bus bandwidth
 * fitted to its times over sizes (α–β ring). */
#ifndef PLAIT_CALIBRATE_H
#define PLAIT_CALIBRATE_H

#include <stdio.h>

#include "ir/diag.h"

enum { CALIBRATE_MAX_SAMPLES = 64 };

typedef struct {
  double x, seconds; /* GEMM and attention: FLOPs; stream and all-reduce: bytes */
} Sample;

typedef struct {
  int ranks, cores;
  char backend[32];
  Sample gemm[CALIBRATE_MAX_SAMPLES];
  double gemm_shape[CALIBRATE_MAX_SAMPLES][3]; /* each GEMM's M, N, K */
  int ngemm;
  Sample allreduce[CALIBRATE_MAX_SAMPLES];
  int nallreduce;
  Sample stream[CALIBRATE_MAX_SAMPLES];
  int nstream;
  Sample attention[CALIBRATE_MAX_SAMPLES];
  int nattention;
  double gelu_per_s;   /* special functions per second, as a GeLU computes one */
  double memory_bytes; /* the machine's memory */
} Probe;

typedef struct {
  double gemm_flops_per_s, gemm_overhead; /* t = overhead + FLOPs / rate, over every shape */
  double stream_bytes_per_s, overhead; /* t = overhead + bytes / rate: a kernel's overhead */
  double attention_flops_per_s;        /* t = FLOPs / rate */
  double link_bandwidth, link_latency; /* t = 2(n-1)·latency + 2(n-1)/n · bytes / bandwidth */
} Fit;

/* Reads plait-probe's "key value" lines. Returns 0, or -1 with one line in d. */
int calibrate_read(FILE *f, Probe *p, Diag *d);
void calibrate_fit(const Probe *p, Fit *fit);
/* The machine file (a Lua chunk plait plan --machine reads). */
void calibrate_write(const Probe *p, const Fit *fit, FILE *f);

#endif
