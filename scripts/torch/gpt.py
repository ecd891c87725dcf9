"""The PyTorch twin of clients/trainer's model, for benchmarks only (never CI).

Same architecture (pre-LayerNorm, tanh GELU, tied lm-head), fp32 weights,
fp32 math (TF32 off) or bf16 autocast, AdamW. Prints one line per figure:

  python gpt.py train NAME V L C H T B STEPS DEVICE THREADS [fp32|bf16]  -> training tokens/s
  python gpt.py gemm M N K THREADS [fp32|bf16]                            -> GEMM GFLOP/s, out = A(M,K) B(N,K)^T
"""
import contextlib
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def gpt(V, L, C, H, T):
    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.qkv, s.proj = nn.LayerNorm(C), nn.Linear(C, 3 * C), nn.Linear(C, C)
            s.ln2, s.fc, s.fcproj = nn.LayerNorm(C), nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(s, x):
            q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(x.size(0), T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.size(0), T, C)
            x = x + s.proj(y)
            return x + s.fcproj(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            s.blocks = nn.ModuleList(Block() for _ in range(L))
            s.lnf = nn.LayerNorm(C)

        def forward(s, idx, tgt):
            x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
            for b in s.blocks:
                x = b(x)
            return F.cross_entropy(F.linear(s.lnf(x), s.wte.weight).view(-1, V), tgt.view(-1))

    return GPT()


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def train(name, V, L, C, H, T, B, steps, device, threads, precision="fp32"):
    torch.set_num_threads(threads)
    cast = torch.autocast(device, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    m = gpt(V, L, C, H, T).to(device)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
    x = torch.randint(0, min(V, 256), (B, T), device=device)
    y = torch.roll(x, -1, 1)

    def step():
        opt.zero_grad(set_to_none=True)
        with cast:
            loss = m(x, y)
        loss.backward()
        opt.step()

    step()
    sync(device)
    t0 = time.time()
    for _ in range(steps):
        step()
    sync(device)
    dt = time.time() - t0
    where = torch.cuda.get_device_name() if device == "cuda" else f"cpu, {threads} threads"
    label = "bf16-autocast" if precision == "bf16" else "fp32"
    print(f"pytorch {torch.__version__} train {name:10s} B={B} T={T} {label} adamw: {B * T * steps / dt:9.0f} tok/s on {where}")


def gemm(M, N, K, threads, precision="fp32"):
    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.rand(M, K) - 0.5).to(dtype), (torch.rand(N, K) - 0.5).to(dtype)
    out = torch.empty(M, N, dtype=dtype)
    torch.mm(a, b.t(), out=out)
    reps, t0 = 0, time.time()
    while time.time() - t0 < 0.7:
        torch.mm(a, b.t(), out=out)
        reps += 1
    dt = time.time() - t0
    print(f"pytorch {torch.__version__} gemm {precision} M={M} N={N} K={K} threads={threads}  {2 * M * N * K * reps / dt / 1e9:6.1f} GFLOP/s")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "train":
        train(args[0], *map(int, args[1:8]), args[8], int(args[9]), *args[10:11])
    elif cmd == "gemm":
        gemm(*map(int, args[:4]), *args[4:5])
    else:
        sys.exit(f"unknown command {cmd!r}: train or gemm")
