"""The PyTorch twin of clients/trainer's model, for benchmarks only (never CI).

Same architecture (pre-LayerNorm, tanh GELU, tied lm-head), fp32 weights,
fp32 math (TF32 off) or bf16 autocast, AdamW (fused on CUDA). Prints one line per figure:

  python gpt.py train NAME V L C H T B STEPS DEVICE THREADS [fp32|bf16 [MICROBATCH [PEAK_TFLOPS]]]
      -> training tokens/s, then its MFU line (and on CUDA the memory line)
  python gpt.py gemm M N K THREADS [fp32|bf16]                            -> GEMM GFLOP/s, out = A(M,K) B(N,K)^T

MICROBATCH (default B, 0 too) splits each step into B/MICROBATCH passes whose
gradients accumulate, as the trainer's Config.MicroBatch does. PEAK_TFLOPS
(default 0: unknown, MFU printed as "-") is the device's peak for the MFU
figure, e.g. a GPU's dense bf16 tensor rate (H100 SXM, H200: 989).
llama.py (the Llama twin) shares train_model and the MFU accounting.
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


def flops_per_token(n_matmul, L, C, T):
    """Model FLOPs of training one token, 6N + 12 L C T: N the parameters
    that multiply activations (all but GPT-2's position table and an untied
    model's input embedding; a tied embedding counts once, as the lm-head),
    6 = 2 forward + 4 backward FLOPs per parameter and token, 12 L C T the
    attention's q.k and a.v products forward and backward, no causal halving.
    trainer-bench's FLOPsPerToken is the same formula."""
    return 6 * n_matmul + 12 * L * C * T


def n_params(m):
    return sum(p.numel() for p in m.parameters())  # a tied tensor once


def train_model(name, m, n_matmul, V, L, C, T, B, steps, device, threads, precision="fp32", microbatch=0, peak_tflops=0.0):
    """Times `steps` AdamW steps of m (forward(idx, tgt) -> mean loss) on B
    random sequences of T tokens after one warm-up step, each step in B /
    microbatch passes whose gradients accumulate, and prints the tok/s,
    MFU and (CUDA) memory lines."""
    torch.set_num_threads(threads)
    mb = microbatch or B
    if B % mb:
        sys.exit(f"micro-batch {mb} does not divide the batch {B}")
    cast = torch.autocast(device, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    m = m.to(device)
    fused = {"fused": True} if device == "cuda" else {}
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1, **fused)
    x = torch.randint(0, min(V, 256), (B, T), device=device)
    y = torch.roll(x, -1, 1)

    def step():
        opt.zero_grad(set_to_none=True)
        for i in range(0, B, mb):
            with cast:
                loss = m(x[i:i + mb], y[i:i + mb])
            (loss * (mb / B)).backward()
        opt.step()

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    step()
    sync(device)
    t0 = time.time()
    for _ in range(steps):
        step()
    sync(device)
    dt = time.time() - t0
    where = torch.cuda.get_device_name() if device == "cuda" else f"cpu, {threads} threads"
    label = "bf16-autocast" if precision == "bf16" else "fp32"
    tok_s = B * T * steps / dt
    print(f"pytorch {torch.__version__} train {name:10s} B={B} T={T} {label} adamw: {tok_s:9.0f} tok/s on {where}")
    f = flops_per_token(n_matmul, L, C, T)
    achieved = tok_s * f / 1e12
    mfu = f"MFU {100 * achieved / peak_tflops:.3g}% of {peak_tflops:g} TFLOP/s" if peak_tflops > 0 else "MFU - (no peak TFLOP/s given)"
    print(f"pytorch {torch.__version__} mfu {name} {label} B={B} microbatch={mb} T={T} AdamW steps: {tok_s:.0f} tok/s x {f / 1e9:.4g} GFLOP/token"
          f" = {achieved:.2f} TFLOP/s, {mfu} (FLOP/token = 6N + 12*L*C*T, N={n_matmul} matmul parameters, L={L} C={C} T={T})")
    if device == "cuda":
        gib = 1 << 30
        print(f"pytorch {torch.__version__} memory {name} {label} microbatch={mb}: gpu max allocated {torch.cuda.max_memory_allocated() / gib:.2f} GiB,"
              f" max reserved {torch.cuda.max_memory_reserved() / gib:.2f} GiB")


def train(name, V, L, C, H, T, B, steps, device, threads, precision="fp32", microbatch=0, peak_tflops=0.0):
    m = gpt(V, L, C, H, T)
    train_model(name, m, n_params(m) - T * C, V, L, C, T, B, steps, device, threads, precision, microbatch, peak_tflops)


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
        extra = [int(args[11])] if len(args) > 11 else []
        extra += [float(args[12])] if len(args) > 12 else []
        train(args[0], *map(int, args[1:8]), args[8], int(args[9]), *args[10:11], *extra)
    elif cmd == "gemm":
        gemm(*map(int, args[:4]), *args[4:5])
    else:
        sys.exit(f"unknown command {cmd!r}: train or gemm")
