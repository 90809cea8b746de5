/* test_kernel_time.c: the kernel and collective times of kernel_time.c against their definitions: wave
 * quantisation of GEMM tiles, memory-bound GEMMs, the ceiling reached by large GEMMs, streaming kernels,
 * and α–β rings on the link a group crosses; the built-in machines read. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cost/kernel_time.h"
#include "cost/machine.h"

static Machine a100(void) {
  Machine m;
  Diag d;
  if (machine_load("a100", &m, &d)) printf("a100: %s\n", d.msg);
  return m;
}

static void test_builtin_machines_load(void) {
  const char *names[] = {"a100", "h100", "h200", "cpu"};
  for (int i = 0; i < 4; i++) {
    Machine m;
    Diag d;
    CHECK(machine_load(names[i], &m, &d) == 0, "%s: %s", names[i], d.msg);
    CHECK(strcmp(m.name, names[i]) == 0, "%s read as %s", names[i], m.name);
    CHECK(m.peak_flops > 0 && m.memory_bandwidth > 0 && m.compute_units >= 1, "%s: zero rates", names[i]);
  }
  Machine m = a100();
  CHECK(m.activation_bytes == 2 && m.peak_flops == 312e12 && m.compute_units == 108, "a100: %d bytes, %g FLOP/s, %g SMs",
        m.activation_bytes, m.peak_flops, m.compute_units);
}

/* One 256×128 tile more than the SMs: the best tiling is then 128×64 tiles in 5 waves of a quarter of the
 * work each, 1.25 times one full wave of 256×128 tiles. */
static void test_gemm_waves(void) {
  Machine m = a100();
  m.launch_overhead = 0;
  double K = 8192, tiles_n = 108;
  KernelTime one = kernel_gemm(&m, 1, 256, 128 * tiles_n, K, 2);
  KernelTime more = kernel_gemm(&m, 1, 256, 128 * tiles_n + 128, K, 2);
  double ideal = one.flops / (m.peak_flops * m.gemm_efficiency);
  CHECK(fabs(one.seconds / ideal - 1) < 1e-9 && one.bound == BOUND_COMPUTE, "one full wave: %g s, ideal %g s, bound %s",
        one.seconds, ideal, kernel_bound_name(one.bound));
  CHECK(fabs(more.seconds / one.seconds - 1.25) < 1e-9 && more.bound == BOUND_QUANTISATION, "a wave and one tile: %g s against %g s, %s",
        more.seconds, one.seconds, kernel_bound_name(more.bound));
}

/* A GEMM with a short contraction moves more bytes than its FLOPs take: memory-bound, at the streaming rate. */
static void test_gemm_memory_bound(void) {
  Machine m = a100();
  KernelTime k = kernel_gemm(&m, 64, 2048, 2048, 64, 2);
  double bytes = 64 * (2048.0 * 64 * 2 * 2 + 2048.0 * 2048 * 2);
  CHECK(k.bound == BOUND_MEMORY && fabs(k.bytes - bytes) < 1, "bound %s, %g bytes (expected %g)", kernel_bound_name(k.bound),
        k.bytes, bytes);
  double expected = bytes / (m.memory_bandwidth * m.memory_efficiency) + m.launch_overhead;
  CHECK(fabs(k.seconds / expected - 1) < 1e-9, "%g s, expected %g s", k.seconds, expected);
}

/* A large square GEMM runs at the ceiling; a tiny one is launch-bound. */
static void test_gemm_ceiling_and_latency(void) {
  Machine m = a100();
  KernelTime big = kernel_gemm(&m, 1, 16384, 16384, 16384, 2);
  double rate = big.flops / big.seconds;
  CHECK(rate > 0.97 * m.peak_flops * m.gemm_efficiency && rate <= m.peak_flops * m.gemm_efficiency, "%g FLOP/s", rate);
  KernelTime tiny = kernel_gemm(&m, 1, 8, 8, 8, 2);
  CHECK(tiny.bound == BOUND_LATENCY, "an 8×8×8 GEMM is %s-bound", kernel_bound_name(tiny.bound));
}

/* A memory-bound kind's kernels run at its share of the copy rate: a norm at half of it takes twice a copy's
 * time; a kind the machine file does not name runs at the copy rate. */
static void test_memory_kinds(void) {
  Machine m = a100();
  m.launch_overhead = 0;
  m.kind_efficiency[MEMORY_NORM] = 0.5;
  double bytes = 1e9, copy = bytes / (m.memory_bandwidth * m.memory_efficiency);
  CHECK(fabs(kernel_stream(&m, MEMORY_COPY, bytes).seconds / copy - 1) < 1e-12, "a copy: %g s",
        kernel_stream(&m, MEMORY_COPY, bytes).seconds);
  CHECK(fabs(kernel_stream(&m, MEMORY_NORM, bytes).seconds / (2 * copy) - 1) < 1e-12, "a norm at half: %g s",
        kernel_stream(&m, MEMORY_NORM, bytes).seconds);
  CHECK(kernel_stream(&m, MEMORY_XENT, bytes).seconds == kernel_stream(&m, MEMORY_COPY, bytes).seconds,
        "a kind not named: the copy rate");
  Machine h200;
  Diag d;
  CHECK(machine_load("h200", &h200, &d) == 0, "%s", d.msg);
  for (int k = 0; k < MEMORY_KINDS; k++)
    CHECK(h200.kind_efficiency[k] > 0 && h200.kind_efficiency[k] < 1, "h200's %s: %g of the copy rate",
          memory_kind_names[k], h200.kind_efficiency[k]);
}

/* Inside a node the ring runs on NVLink; across nodes a DP group of one rank per node gets one NIC. */
static void test_rings(void) {
  Machine m = a100();
  Link tp = kernel_group_link(&m, 1, 8), dp = kernel_group_link(&m, 8, 4), wide = kernel_group_link(&m, 1, 32);
  CHECK(!tp.inter_node && tp.bandwidth == m.link_bandwidth, "tp 8 in a node: %g B/s", tp.bandwidth);
  CHECK(dp.inter_node && dp.bandwidth == m.nic_bandwidth, "dp 4 at stride 8: %g B/s", dp.bandwidth);
  CHECK(wide.inter_node && wide.bandwidth == fmin(m.link_bandwidth, m.nics * m.nic_bandwidth), "32 ranks: %g B/s",
        wide.bandwidth);
  double bytes = 1e9;
  KernelTime ar = kernel_collective(&tp, RING_ALLREDUCE, bytes, 8), ag = kernel_collective(&tp, RING_ALLGATHER, bytes, 8);
  double expected = 14 * m.link_latency + 2.0 * 7 / 8 * bytes / m.link_bandwidth;
  CHECK(fabs(ar.seconds / expected - 1) < 1e-9, "all-reduce %g s, expected %g s", ar.seconds, expected);
  CHECK(fabs(ag.seconds / (7 * m.link_latency + 7.0 / 8 * bytes / m.link_bandwidth) - 1) < 1e-9, "all-gather %g s",
        ag.seconds);
  CHECK(kernel_collective(&tp, RING_ALLREDUCE, bytes, 1).seconds == 0, "a group of one communicates");
  KernelTime small = kernel_collective(&dp, RING_ALLREDUCE, 64, 4);
  CHECK(small.bound == BOUND_LATENCY, "64 bytes over 4 nodes: %s-bound", kernel_bound_name(small.bound));
}

/* An all-reduce across nodes runs as NCCL's tree where its tuner would pick it: 1 MB over 64 nodes (one
 * rank on each) in 2·log2 64 = 12 latency steps and 2 MB at 0.92 of the bus bandwidth, rather than the
 * ring's 126 steps; 10 GB of gradients on the ring, whose bandwidth term is smaller; inside a node, always
 * the ring. */
static void test_tree_where_nccl_picks_it(void) {
  Machine m = a100();
  Link dp = kernel_group_link(&m, 8, 64), tp = kernel_group_link(&m, 1, 8);
  double small = 1e6, large = 1e10;
  double tree = 12 * dp.latency + 2 * small / (0.92 * dp.bandwidth);
  double ring = 126 * dp.latency + 2.0 * 63 / 64 * large / dp.bandwidth;
  KernelTime a = kernel_collective(&dp, RING_ALLREDUCE, small, 64), b = kernel_collective(&dp, RING_ALLREDUCE, large, 64);
  CHECK(fabs(a.seconds / tree - 1) < 1e-12, "1 MB over 64 nodes: %g s, the tree's %g s", a.seconds, tree);
  CHECK(fabs(b.seconds / ring - 1) < 1e-12, "10 GB over 64 nodes: %g s, the ring's %g s", b.seconds, ring);
  double intra = 14 * tp.latency + 2.0 * 7 / 8 * small / tp.bandwidth;
  CHECK(fabs(kernel_collective(&tp, RING_ALLREDUCE, small, 8).seconds / intra - 1) < 1e-12, "inside a node: the ring");
  CHECK(kernel_collective(&dp, RING_ALLGATHER, small, 64).seconds == 63 * dp.latency + 63.0 / 64 * small / dp.bandwidth,
        "an all-gather: the ring");
}

int main(void) {
  RUN(test_builtin_machines_load);
  RUN(test_gemm_waves);
  RUN(test_gemm_memory_bound);
  RUN(test_gemm_ceiling_and_latency);
  RUN(test_memory_kinds);
  RUN(test_rings);
  RUN(test_tree_where_nccl_picks_it);
  TEST_EXIT();
}
