-- h200-2026-11-27.lua: lib/plait/machines/h200.lua as it was calibrated from plait's GPU run of 2026-11-27
-- on an H200 (docs/gpu-check-2026-11-27-NVIDIA-H200.md; docs/cost-model.md), with plait's own attention
-- kernels, the ones that run ran. tests/cli/gpu_clock.sh holds the plan on it to that run's steps; the
-- shipped h200.lua has since taken the rates of the 2026-11-28 run.
return {
  name = "h200-2026-11-27",
  about = "NVIDIA H200 SXM 141GB: bf16 989 TFLOP/s, 4.8 TB/s HBM3e, NVLink 4, 8 x NDR 400 Gb/s per node",
  precision = "bf16",
  device = {
    flops = { bf16 = 989e12, tf32 = 494e12, fp32 = 67e12 },
    gemm_efficiency = 0.803,       -- bf16 8192³ GEMM measured on this card: 794 of 989 TFLOP/s
    gemm_tile = { 256, 128 },
    memory_bandwidth = 4.8e12,
    memory_efficiency = 0.896,     -- the copy rate measured on this card: 4.3 TB/s, read + written
    memory = 141e9,
    compute_units = 132,
    launch_overhead = 4e-6,
    special_rate = 0,
  },
  node = { devices = 8, link_bandwidth = 450e9, link_latency = 2e-6 },
  network = { nics = 8, nic_bandwidth = 50e9, nic_latency = 5e-6 },
  kernels = {
    attention = "plait",           -- the 2026-11-27 run had no cuDNN: plait's kernels everywhere
    attention_dropout = 0,
    -- { head size, forward, backward FLOP/s } over the scores computed (causal: half the square)
    cudnn_attention = { { 64, 344e12, 157e12 }, { 128, 529e12, 264e12 } },  -- PyTorch's SDPA on cuDNN
    plait_attention = { { 64, 20.0e12, 7.61e12 }, { 128, 19.3e12, 8.44e12 } }, -- plait's kernels, profiled
    -- each kind's share of the copy rate in the benchmarks' steps (DIR/train --profile)
    memory_efficiency = { elementwise = 0.348, norm = 0.334, bias_sums = 0.342, embedding = 0.0256, xent = 0.312,
                          optimizer = 0.625, grad_norm = 0.0761 },
  },
}
