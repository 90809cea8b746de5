/* calibrate.h: a machine file from what build/plait-probe measured on this machine: the GEMM ceiling and
 * the per-call overhead fitted to GEMM times over shapes, the streaming rate, the rate of special
 * functions (a GeLU's exp), and the all-reduce's
 * per-step latency and bus bandwidth fitted to its times over sizes (α–β ring). */
#ifndef PLAIT_CALIBRATE_H
#define PLAIT_CALIBRATE_H

#include <stdio.h>

#include "diag.h"

enum { CALIBRATE_MAX_SAMPLES = 64 };

typedef struct {
  double x, seconds; /* GEMM: FLOPs; all-reduce: bytes */
} Sample;

typedef struct {
  int ranks, cores;
  char backend[32];
  Sample gemm[CALIBRATE_MAX_SAMPLES];
  int ngemm;
  Sample allreduce[CALIBRATE_MAX_SAMPLES];
  int nallreduce;
  double stream_bytes_per_s;
  double gelu_per_s;   /* special functions per second, as a GeLU computes one */
  double memory_bytes; /* the machine's memory */
} Probe;

typedef struct {
  double gemm_flops_per_s, overhead;   /* t = overhead + FLOPs / rate */
  double link_bandwidth, link_latency; /* t = 2(n-1)·latency + 2(n-1)/n · bytes / bandwidth */
} Fit;

/* Reads plait-probe's "key value" lines. Returns 0, or -1 with one line in d. */
int calibrate_read(FILE *f, Probe *p, Diag *d);
void calibrate_fit(const Probe *p, Fit *fit);
/* The machine file (a Lua chunk plait plan --machine reads). */
void calibrate_write(const Probe *p, const Fit *fit, FILE *f);

#endif
