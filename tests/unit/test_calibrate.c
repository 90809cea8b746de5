/* test_calibrate.c: plait calibrate's fits recover the numbers that made the probe's times (GEMM rate and
 * overhead, the streaming rate and per-kernel overhead, the attention rate, the all-reduce's latency and
 * bus bandwidth), its reader refuses incomplete or strange probe output, and the machine file it writes
 * is read back with those numbers, the measured GEMM shapes and rate curves, which the plan's kernels
 * follow; the elementwise kernels' special functions bound them at the machine's rate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost/calibrate.h"
#include "check.h"
#include "cost/kernel_time.h"
#include "cost/machine.h"

static const double rate = 150e9, overhead = 4e-6, bandwidth = 7e9, latency = 25e-6;
static const double stream_rate = 20e9, kernel_overhead = 2e-6, attention_rate = 40e9;

/* What plait-probe would print for 2 ranks on a machine with exactly these numbers. */
static FILE *probe_output(void) {
  FILE *f = tmpfile();
  fprintf(f, "ranks 2\nbackend local\ncores 2\nmemory_bytes 8e9\n");
  for (double n = 64; n <= 2048; n *= 2) fprintf(f, "gemm %g %g %g %.17g\n", n, n / 2, n, overhead + n * n * n / rate);
  for (double b = 32768; b <= 32 << 20; b *= 4) fprintf(f, "stream %g %.17g\n", b, kernel_overhead + b / stream_rate);
  for (double x = 1e7; x <= 1e9; x *= 10) fprintf(f, "attention %g %.17g\n", x, x / attention_rate);
  fprintf(f, "gelu_per_s 1.25e8\n");
  for (double b = 1024; b <= 16 << 20; b *= 4) fprintf(f, "allreduce %g %.17g\n", b, 2 * latency + b / bandwidth);
  rewind(f);
  return f;
}

static void test_fits_recover_the_numbers(void) {
  FILE *f = probe_output();
  Probe p;
  Fit fit;
  Diag d;
  CHECK(calibrate_read(f, &p, &d) == 0, "%s", d.msg);
  fclose(f);
  calibrate_fit(&p, &fit);
  CHECK(fabs(fit.gemm_flops_per_s / rate - 1) < 1e-6, "GEMM rate %g, made with %g", fit.gemm_flops_per_s, rate);
  CHECK(fabs(fit.gemm_overhead / overhead - 1) < 1e-6, "GEMM overhead %g, made with %g", fit.gemm_overhead, overhead);
  CHECK(fabs(fit.stream_bytes_per_s / stream_rate - 1) < 1e-6, "stream %g, made with %g", fit.stream_bytes_per_s, stream_rate);
  CHECK(fabs(fit.overhead / kernel_overhead - 1) < 1e-6, "overhead %g, made with %g", fit.overhead, kernel_overhead);
  CHECK(fabs(fit.attention_flops_per_s / attention_rate - 1) < 1e-9, "attention %g, made with %g", fit.attention_flops_per_s,
        attention_rate);
  CHECK(fabs(fit.link_bandwidth / bandwidth - 1) < 1e-6, "bus bandwidth %g, made with %g", fit.link_bandwidth, bandwidth);
  CHECK(fabs(fit.link_latency / latency - 1) < 1e-6, "latency %g, made with %g", fit.link_latency, latency);
}

static void test_machine_file_reads_back(void) {
  FILE *f = probe_output();
  Probe p;
  Fit fit;
  Diag d;
  calibrate_read(f, &p, &d);
  fclose(f);
  calibrate_fit(&p, &fit);
  char path[] = "/tmp/plait-calibrated-XXXXXX.lua";
  int fd = mkstemps(path, 4);
  FILE *out = fdopen(fd, "w");
  calibrate_write(&p, &fit, out);
  fclose(out);
  Machine m;
  int status = machine_load(path, &m, &d);
  unlink(path);
  CHECK(status == 0, "%s", d.msg);
  CHECK(fabs(m.peak_flops * m.gemm_efficiency / rate - 1) < 1e-5, "GEMM ceiling %g", m.peak_flops * m.gemm_efficiency);
  CHECK(m.special_rate == 1.25e8 && m.memory_bytes == 4e9 && m.devices_per_node == 2, "special %g, memory %g, devices %g",
        m.special_rate, m.memory_bytes, m.devices_per_node);
  CHECK(fabs(m.link_bandwidth / bandwidth - 1) < 1e-5 && m.attention == ATTENTION_FUSED, "bus %g", m.link_bandwidth);
  CHECK(fabs(m.memory_bandwidth / stream_rate - 1) < 1e-5 && fabs(m.launch_overhead / kernel_overhead - 1) < 1e-5,
        "stream %g, overhead %g", m.memory_bandwidth, m.launch_overhead);
  /* every GEMM shape of the probe (64³ to 2048·1024·2048: 6 shapes) is listed with its rate, every
   * attention shape is a point of its curve */
  CHECK(m.gemm_rates.count == 6 && m.attention_rates.n == 3, "%d GEMM shapes, %d attention points", m.gemm_rates.count,
        m.attention_rates.n);
  double flops = 2.0 * 256 * 128 * 256;
  KernelTime g = kernel_gemm(&m, 1, 256, 256, 128, 4);
  CHECK(fabs(g.seconds / (overhead + flops / rate) - 1) < 1e-5, "a measured GEMM shape (6 digits in the file): %g s, measured %g s", g.seconds,
        overhead + flops / rate);
}

/* Between two measured sizes the rate is linear in log(FLOPs); beyond them, the nearest one's. */
static void test_rate_curve(void) {
  RateCurve c = {3, {1e6, 1e8, 1e10}, {50e9, 150e9, 250e9}};
  double mid = kernel_rate_at(&c, 1e7), below = kernel_rate_at(&c, 1e3), above = kernel_rate_at(&c, 1e12);
  CHECK(fabs(mid - 100e9) < 1, "halfway in log(FLOPs): %g", mid);
  CHECK(below == 50e9 && above == 250e9 && kernel_rate_at(&c, 1e8) == 150e9, "%g, %g", below, above);
}

/* A GEMM takes the rate of the measured shapes like it: the same part for its short side (an output side,
 * or the inner size of a weight gradient), the short side nearest in log, linear in log FLOPs between
 * sizes and the nearest size's beyond; with no shape of its part measured, any shape's. */
static void test_gemm_rates(void) {
  GemmRates g = {4, {128, 128, 768, 512}, {768, 3072, 768, 768}, {768, 768, 128, 768}, {100, 200, 300, 400}};
  double between = kernel_gemm_rate(&g, 128, 1536, 768), inner = kernel_gemm_rate(&g, 768, 768, 128);
  CHECK(fabs(between - 150) < 1e-9, "128×1536×768, halfway in log FLOPs between the two of its short side: %g", between);
  CHECK(inner == 300 && kernel_gemm_rate(&g, 3072, 768, 128) == 300, "a weight gradient: %g", inner);
  CHECK(kernel_gemm_rate(&g, 400, 768, 768) == 400, "short side 400: nearer 512 than 128 in log");
  CHECK(kernel_gemm_rate(&g, 128, 768, 96) == 300 && kernel_gemm_rate(&g, 128, 48, 768) == 100,
        "the inner size or an output side short: %g, %g", kernel_gemm_rate(&g, 128, 768, 96), kernel_gemm_rate(&g, 128, 48, 768));
  GemmRates outputs_only = {2, {128, 128}, {768, 3072}, {768, 768}, {100, 200}};
  CHECK(kernel_gemm_rate(&outputs_only, 768, 768, 128) == 100, "no weight gradient measured: the output-side shapes'");
}

static void test_reader_refuses(void) {
  const char *bad[] = {"ranks 2\ngemm 64 64 64 1e-5\n",                    /* too few of everything */
                       "ranks 1\nwhat 3\n",                                 /* an unknown line */
                       "ranks 1\ngemm 64 64 64 0\ngemm 8 8 8 1e-6\n"};      /* a time of zero */
  for (int i = 0; i < 3; i++) {
    FILE *f = tmpfile();
    fputs(bad[i], f);
    rewind(f);
    Probe p;
    Diag d;
    CHECK(calibrate_read(f, &p, &d) != 0, "probe output %d accepted", i);
    fclose(f);
  }
}

/* A GeLU over a million elements at 1e8 GeLUs/s: 10 ms, more than its 8 MB at 9 GB/s. */
static void test_special_functions_bound(void) {
  Machine m;
  Diag d;
  CHECK(machine_load("cpu", &m, &d) == 0, "%s", d.msg);
  m.special_rate = 1e8, m.memory_bandwidth = 9e9, m.memory_efficiency = 1, m.launch_overhead = 0;
  KernelTime gelu = kernel_elementwise(&m, MEMORY_ELEMENTWISE, 8e6, 1e6);
  CHECK(fabs(gelu.seconds - 1e-2) < 1e-12 && gelu.bound == BOUND_COMPUTE, "%g s, %s-bound", gelu.seconds,
        kernel_bound_name(gelu.bound));
  KernelTime add = kernel_elementwise(&m, MEMORY_ELEMENTWISE, 8e6, 0);
  CHECK(fabs(add.seconds - 8e6 / 9e9) < 1e-12 && add.bound == BOUND_MEMORY, "%g s", add.seconds);
  m.special_rate = 0;
  CHECK(kernel_elementwise(&m, MEMORY_ELEMENTWISE, 8e6, 1e6).seconds == add.seconds, "a rate of 0 bounds nothing");
}

int main(void) {
  RUN(test_fits_recover_the_numbers);
  RUN(test_machine_file_reads_back);
  RUN(test_rate_curve);
  RUN(test_gemm_rates);
  RUN(test_reader_refuses);
  RUN(test_special_functions_bound);
  TEST_EXIT();
}
