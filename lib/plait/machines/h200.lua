-- h200.lua: an HGX H200 node (8 H200 SXM 141GB) on NDR InfiniBand, running plait's GPU programs with
-- cuDNN's fused attention. The device's kernel rates are those plait's run of 2026-11-28 on an H200
-- measured (docs/gpu-check-2026-11-28-NVIDIA-H200.md: its --profile tables, GPT-2 124M at 64 × 1024 and
-- the 1.3B GPT at 8 × 2048, each kind's time a step pooled over the two); the GEMM ceiling and the copy
-- rate the 2026-11-27 run's. How each number was taken: docs/cost-model.md.
return {
  name = "h200",
  about = "NVIDIA H200 SXM 141GB: bf16 989 TFLOP/s, 4.8 TB/s HBM3e, NVLink 4, 8 x NDR 400 Gb/s per node",
  precision = "bf16",
  device = {
    flops = { bf16 = 989e12, tf32 = 494e12, fp32 = 67e12 },
    gemm_efficiency = 0.803,       -- bf16 8192³ GEMM measured on this card: 794 of 989 TFLOP/s (2026-11-27)
    gemm_tile = { 256, 128 },
    memory_bandwidth = 4.8e12,
    memory_efficiency = 0.896,     -- the copy rate measured on this card: 4.3 TB/s, read + written (2026-11-27)
    memory = 141e9,
    compute_units = 132,
    launch_overhead = 4e-6,
    special_rate = 0,
  },
  node = { devices = 8, link_bandwidth = 450e9, link_latency = 2e-6 },
  network = { nics = 8, nic_bandwidth = 50e9, nic_latency = 5e-6 },
  kernels = {
    attention = "cudnn",           -- cuDNN's fused attention where the runtime's rules let it, else plait's
    attention_dropout = 0,
    -- { head size, forward, backward FLOP/s } over the scores computed (causal: half the square).
    -- cuDNN's: the 2026-11-28 H200 profile's attention a layer (GPT-2 18.30 ms / 12, heads of 64; 1.3B
    -- 31.70 ms / 24, heads of 128), less a launch each way, split forward : backward as PyTorch's cuDNN
    -- SDPA split it on 2026-11-27 (0.30 : 1.31 ms at 64, 0.26 : 1.04 at 128)
    cudnn_attention = { { 64, 365e12, 167e12 }, { 128, 523e12, 262e12 } },
    -- plait's: the 2026-11-28 H100's (h100.lua) times the H200 over H100 speed of the same software at
    -- these shapes, PyTorch's cuDNN SDPA in the two runs (1.832 / 1.662 ms at 64, 1.482 / 1.283 at 128)
    plait_attention = { { 64, 208e12, 95.2e12 }, { 128, 241e12, 120e12 } },
    -- each kind's share of the copy rate (4.3 TB/s): the 2026-11-28 H200 profile's bytes of that kind (as
    -- the plan counts them) over its time, GPT-2 and 1.3B pooled, less 4 µs a kernel: elementwise 2.90,
    -- norm 1.64, bias_sums 2.10, embedding 3.14, xent 3.10, optimizer 2.77 TB/s, grad_norm 333 GB/s
    memory_efficiency = { elementwise = 0.674, norm = 0.382, bias_sums = 0.489, embedding = 0.731, xent = 0.720,
                          optimizer = 0.644, grad_norm = 0.0773 },
  },
}
