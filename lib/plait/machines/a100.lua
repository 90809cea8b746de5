-- a100.lua: a DGX A100 node (8 A100 SXM 80GB) on HDR InfiniBand, as Selene was when Narayanan et al.
-- (2021) measured Table 1; with the kernels Megatron-LM used then. Every number's source is in
-- docs/cost-model.md.
return {
  name = "a100",
  about = "NVIDIA A100 SXM 80GB (DGX A100): bf16 312 TFLOP/s, 2.04 TB/s HBM2e, NVLink 3, 8 x HDR 200 Gb/s per node",
  precision = "bf16",
  device = {
    flops = { bf16 = 312e12, tf32 = 156e12, fp32 = 19.5e12 }, -- dense, data sheet
    gemm_efficiency = 0.827,       -- cuBLAS on random inputs, under the 400 W limit: 258 of 312 TFLOP/s
    gemm_tile = { 256, 128 },      -- the largest output tile one SM computes (CUTLASS/cuBLAS sm80)
    memory_bandwidth = 2.039e12,   -- HBM2e, data sheet
    memory_efficiency = 0.69,      -- Megatron-LM's attention core, measured: its bytes in 1.3 ms a layer
    memory = 80e9,
    compute_units = 108,           -- SMs
    launch_overhead = 4e-6,        -- seconds per kernel, launch to launch
    special_rate = 0,              -- tanh, exp, ... per second: 0, memory bounds them here
  },
  node = {
    devices = 8,
    link_bandwidth = 230e9,        -- NVLink 3 through NVSwitch: nccl-tests all-reduce bus bandwidth
    link_latency = 2e-6,           -- per ring step
  },
  network = {
    nics = 8,                      -- ConnectX-6 HDR, one per GPU
    nic_bandwidth = 25e9,          -- 200 Gb/s
    nic_latency = 5e-6,            -- per ring step between nodes
  },
  kernels = {
    attention = "materialised",    -- Megatron-LM 2021: q·kᵀ stored, fused scale-mask-softmax, dropout
    attention_dropout = 0.1,       -- Table 1's runs (Megatron's default)
  },
}
