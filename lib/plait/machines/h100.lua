-- h100.lua: a DGX H100 node (8 H100 SXM 80GB) on NDR InfiniBand, running plait's GPU programs with
-- cuDNN's fused attention. Its kernels' rates are the H200's (the same GH100 die and clocks), a lead
-- until they are measured on an H100. Every number's source is in docs/cost-model.md.
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
  kernels = {
    attention = "cudnn",           -- cuDNN's fused attention where the runtime's rules let it, else plait's
    attention_dropout = 0,
    -- the H200's, measured 2026-11-27: { head size, forward, backward FLOP/s } over the scores computed
    cudnn_attention = { { 64, 344e12, 157e12 }, { 128, 529e12, 264e12 } },
    plait_attention = { { 64, 20.0e12, 7.61e12 }, { 128, 19.3e12, 8.44e12 } },
    -- the H200's shares of its copy rate, kind by kind
    memory_efficiency = { elementwise = 0.348, norm = 0.334, bias_sums = 0.342, embedding = 0.0256, xent = 0.312,
                          optimizer = 0.625, grad_norm = 0.0761 },
  },
}
