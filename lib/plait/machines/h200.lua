-- h200.lua: an HGX H200 node (8 H200 SXM 141GB) on NDR InfiniBand, with fused attention kernels.
-- Every number's source is in docs/cost-model.md.
return {
  name = "h200",
  about = "NVIDIA H200 SXM 141GB: bf16 989 TFLOP/s, 4.8 TB/s HBM3e, NVLink 4, 8 x NDR 400 Gb/s per node",
  precision = "bf16",
  device = {
    flops = { bf16 = 989e12, tf32 = 494e12, fp32 = 67e12 },
    gemm_efficiency = 0.836,       -- largest measured bf16 GEMM rate on the same die with HBM3e (GH200)
    gemm_tile = { 256, 128 },
    memory_bandwidth = 4.8e12,
    memory_efficiency = 0.85,
    memory = 141e9,
    compute_units = 132,
    launch_overhead = 4e-6,
    special_rate = 0,
  },
  node = { devices = 8, link_bandwidth = 450e9, link_latency = 2e-6 },
  network = { nics = 8, nic_bandwidth = 50e9, nic_latency = 5e-6 },
  kernels = { attention = "fused", attention_dropout = 0 },
}
