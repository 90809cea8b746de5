"""sdpa_bench.py: PyTorch's scaled_dot_product_attention (bf16, causal) at the GPU check's benchmark shapes,
laid out as plait lays out attention ([B, T, H, D] rows viewed as [B, H, T, D]), on each backend: the
anchor plait's attention is measured against in the same run. Random inputs; each figure the median of
9 timed calls (CUDA events) after 3 warm-ups. One line a shape and backend, as attention_bench prints:
    sdpa NAME BACKEND forward_ms backward_ms
(backward: forward + backward less forward)."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"gpt2": (64, 1024, 12, 64), "gpt-1.3b": (8, 2048, 16, 128)}
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def median_ms(fn, calls=9, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[calls // 2]


def bench(name, backend_name):
    B, T, H, D = SHAPES[name]
    rows = lambda: torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    q, k, v = (rows().requires_grad_(True) for _ in range(3))
    grad = torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def both():
        forward().backward(grad)

    with sdpa_kernel(BACKENDS[backend_name]):
        fwd = median_ms(forward)
        total = median_ms(both)
    print(f"sdpa {name} {backend_name} {fwd:.3f} {total - fwd:.3f}", flush=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    for shape in SHAPES:
        for backend in BACKENDS:
            try:
                bench(shape, backend)
            except Exception as error:  # a backend this card or build lacks: say so and go on
                print(f"sdpa {shape} {backend} failed: {str(error)[:120]}", flush=True)
