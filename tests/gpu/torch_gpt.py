"""torch_gpt.py: the GPT of models/gpt.lua (learned positions, pre-LayerNorm blocks, tanh GeLU MLP of
4·hidden, biases, embedding tied to the output layer) trained in PyTorch as people usually write it:
fp32 master weights under bf16 autocast, scaled_dot_product_attention, fused AdamW. Prints the training
step's tokens per second in eager mode and under torch.compile, for the GPU check to set plait beside.

    python3 tests/gpu/torch_gpt.py --layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50304 --batch 16
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(h, dim=2)
        q, k, v = (y.view(b, t, self.heads, h // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, h))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def tokens_per_second(model, args, warmup=3, timed=6):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01, fused=True)
    tokens = torch.randint(0, 256, (args.batch, args.seq + 1), device="cuda")
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return args.batch * args.seq / times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    for name in ("layers", "hidden", "heads", "seq", "vocab", "batch"):
        parser.add_argument("--" + name, type=int, required=True)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(args.layers, args.hidden, args.heads, args.seq, args.vocab).cuda()
    print(f"eager tokens/s {tokens_per_second(model, args):.0f}", flush=True)
    print(f"compile tokens/s {tokens_per_second(torch.compile(model), args):.0f}", flush=True)


if __name__ == "__main__":
    main()
