-- h100.lua: a DGX H100 node (8 H100 SXM 80GB) on NDR InfiniBand, running plait's GPU programs with
-- cuDNN's fused attention. The device's kernel rates are those plait's run of 2026-11-28 on an H100
-- measured (docs/gpu-check-2026-11-28-NVIDIA-H100-80GB-HBM3.md: its --profile tables, GPT-2 124M at
-- 64 × 1024 and the 1.3B GPT at 8 × 2048, each kind's time a step pooled over the two). That run ran
-- plait's own attention kernels (cuDNN's path had a bug then): cuDNN's rates are the H200's scaled to
-- this card. How each number was taken: docs/cost-model.md.
return {
  name = "h100",
  about = "NVIDIA H100 SXM 80GB (DGX H100): bf16 989 TFLOP/s, 3.35 TB/s HBM3, NVLink 4, 8 x NDR 400 Gb/s per node",
  precision = "bf16",
  device = {
    flops = { bf16 = 989e12, tf32 = 494e12, fp32 = 67e12 },
    gemm_efficiency = 0.801,       -- largest measured bf16 GEMM rate: 792.1 of 989 TFLOP/s (2026-11-28's
                                   -- profile: the 1.3B's GEMMs at 761, with a synchronisation after each)
    gemm_tile = { 256, 128 },
    memory_bandwidth = 3.35e12,
    memory_efficiency = 0.896,     -- the H200's measured 0.896 (3.0 TB/s): the 2026-11-28 run's cross entropy
                                   -- alone reached 2.99 TB/s (0.89), above the 0.85 assumed before
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
    -- { head size, forward, backward FLOP/s } over the scores computed (causal: half the square).
    -- cuDNN's: not run on an H100; the H200's (h200.lua, 2026-11-28) times the H100 over H200 speed of the
    -- same software at these shapes, PyTorch's cuDNN SDPA in the two runs (1.662 / 1.832 ms at 64, 1.283 /
    -- 1.482 at 128)
    cudnn_attention = { { 64, 331e12, 152e12 }, { 128, 453e12, 227e12 } },
    -- plait's: the 2026-11-28 H100 profile's attention a layer (GPT-2 35.29 ms / 12, heads of 64; 1.3B
    -- 79.40 ms / 24, heads of 128), less a launch each way, split forward : backward as cuDNN's (h200.lua)
    plait_attention = { { 64, 189e12, 86.4e12 }, { 128, 208e12, 104e12 } },
    -- each kind's share of the copy rate (3.0 TB/s): the 2026-11-28 H100 profile's bytes of that kind (as
    -- the plan counts them) over its time, GPT-2 and 1.3B pooled, less 4 µs a kernel: elementwise 2.57,
    -- norm 1.36, bias_sums 1.74, embedding 2.91, xent 2.96, optimizer 2.21 TB/s, grad_norm 319 GB/s
    memory_efficiency = { elementwise = 0.857, norm = 0.454, bias_sums = 0.580, embedding = 0.969, xent = 0.987,
                          optimizer = 0.736, grad_norm = 0.106 },
  },
}
