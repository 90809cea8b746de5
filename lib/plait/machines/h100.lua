-- h100.lua: a DGX H100 node (8 H100 SXM 80GB) on NDR InfiniBand, with fused attention kernels (no
-- stored scores). Every number's source is in docs/cost-model.md.
return {
  name = "h100",
  about = "NVIDIA H100 SXM 80GB (DGX H100): bf16 989 TFLOP/s, 3.35 TB/s HBM3, NVLink 4, 8 x NDR 400 Gb/s per node",
  precision = "bf16",
  device = {
    flops = { bf16 = 989e12, tf32 = 494e12, fp32 = 67e12 },
    gemm_efficiency = 0.801,       -- largest measured bf16 GEMM rate: 792.1 of 989 TFLOP/s
    gemm_tile = { 256, 128 },
    memory_bandwidth = 3.35e12,
    memory_efficiency = 0.85,
    memory = 80e9,
    compute_units = 132,
    launch_overhead = 4e-6,
    special_rate = 0,
  },
  node = { devices = 8, link_bandwidth = 450e9, link_latency = 2e-6 },
  network = { nics = 8, nic_bandwidth = 50e9, nic_latency = 5e-6 },
  kernels = { attention = "fused", attention_dropout = 0 },
}
