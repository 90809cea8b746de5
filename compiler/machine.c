/* machine.c: the table of machines (datasheet rates; efficiency is an assumption, stated per entry). */
#include "machine.h"

#include <string.h>

static const Machine machines[] = {
    {"a100", "NVIDIA A100 SXM 80GB (DGX A100): bf16 312 TFLOP/s, NVLink 300 GB/s, 8x200 Gb/s InfiniBand per node",
     312e12, 0.5, 300e9, 25e9, 5e-6, 2.0e12, 8, 2},
    {"h100", "NVIDIA H100 SXM (DGX H100): bf16 989 TFLOP/s, NVLink 450 GB/s, 8x400 Gb/s InfiniBand per node",
     989e12, 0.5, 450e9, 50e9, 5e-6, 3.35e12, 8, 2},
    {"h200", "NVIDIA H200 SXM: bf16 989 TFLOP/s, NVLink 450 GB/s, 8x400 Gb/s InfiniBand per node",
     989e12, 0.5, 450e9, 50e9, 5e-6, 4.8e12, 8, 2},
    {"cpu", "a small CPU node: 100 GFLOP/s fp32 GEMMs at 60%, 5 GB/s memory for other kernels and between ranks",
     100e9, 0.6, 5e9, 5e9, 1e-6, 5e9, 1 << 20, 4},
};

const Machine *machine_find(const char *name) {
  for (unsigned i = 0; i < sizeof machines / sizeof *machines; i++)
    if (strcmp(machines[i].name, name) == 0) return &machines[i];
  return NULL;
}

const char *machine_names(void) { return "a100, h100, h200, cpu"; }
