-- cpu.lua: a small CPU node, ranks as threads of one process: fp32, 100 GFLOP/s GEMMs, 5 GB/s memory
-- for the other kernels and between ranks, 100 M special functions (tanh, exp) a second. An
-- assumption, not a measurement: `plait calibrate` is the way to a machine file of the machine in
-- hand.
return {
  name = "cpu",
  about = "a small CPU node: 100 GFLOP/s fp32 GEMMs at 60%, 5 GB/s memory for other kernels and between ranks, 1e8 special functions/s",
  precision = "fp32",
  device = {
    flops = { fp32 = 100e9 },
    gemm_efficiency = 0.6,
    gemm_tile = { 8, 8 },
    memory_bandwidth = 5e9,
    memory_efficiency = 1,
    memory = 16e9,
    compute_units = 1,
    launch_overhead = 0,
    special_rate = 1e8,
  },
  node = { devices = 1048576, link_bandwidth = 5e9, link_latency = 1e-6 },
  network = { nics = 1, nic_bandwidth = 5e9, nic_latency = 1e-6 },
  kernels = { attention = "fused", attention_dropout = 0 },
}
