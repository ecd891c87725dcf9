"""The PyTorch twin of clients/trainer's Llama, for benchmarks only (never CI).

Same architecture as the trainer's `Arch: "llama"` (clients/trainer/README.md,
"Model configs"): token embedding, pre-RMSNorm (eps 1e-5), rotary positions
on q and k (rotate-half: i pairs with i + hs/2, angle t * theta^(-2i/hs)),
grouped-query attention (each key/value head shared by heads/kv_heads
consecutive query heads), SwiGLU MLP wdown(silu(wgate x) * wup x), final
RMSNorm, no biases, lm-head tied to the embedding unless --untied. Init
N(0, 0.02), wo and wdown 0.02/sqrt(2L), norms 1. Differences that do not
change the work: the padded vocabulary rows take part in the softmax (the
trainer leaves them out), and the random tokens are below 256.

Trained as gpt.py trains GPT-2 (train_model: one warm-up step, then `steps`
timed AdamW steps, fused on CUDA, each in B / microbatch passes whose
gradients accumulate), in fp32 (TF32 off) or bf16 autocast with fp32 weights.
Prints the tok/s line, the MFU line (6N + 12 L C T model FLOPs per token,
gpt.flops_per_token, trainer-bench's formula) and on CUDA the memory line:

  python llama.py --config llama-1.1b --batch 8 --microbatch 2 --steps 2 \\
      --device cuda --precision bf16 --peak-tflops 989
  python llama.py --config llama-light --steps 1 --device cpu   # smoke check

--seq-len runs shorter sequences than the config's maximum.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import n_params, train_model  # noqa: E402 (also sets TF32 off)

# clients/trainer/config.go's Llama configs: vocab, padded vocab, layers,
# width, heads, key/value heads, SwiGLU hidden size, max sequence length,
# default micro-batch.
CONFIGS = {
    "llama-light": dict(V=256, Vp=256, L=4, C=128, H=4, KV=2, hidden=384, T=128, mb=8),
    "llama-small": dict(V=256, Vp=256, L=6, C=384, H=6, KV=2, hidden=1152, T=256, mb=8),
    "llama-12m": dict(V=256, Vp=256, L=8, C=384, H=6, KV=2, hidden=1024, T=512, mb=4),
    "llama-125m": dict(V=50257, Vp=50304, L=12, C=768, H=12, KV=4, hidden=2304, T=1024, mb=1),
    "llama-1.1b": dict(V=50257, Vp=50304, L=22, C=2048, H=32, KV=4, hidden=5632, T=2048, mb=1),
}


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.size(-1),), w, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def llama(Vp, L, C, H, KV, hidden, T, theta=10000.0, untied=False):
    hs = C // H
    kvd = KV * hs

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.rms1, s.rms2 = nn.Parameter(torch.ones(C)), nn.Parameter(torch.ones(C))
            s.wq, s.wk, s.wv, s.wo = (nn.Linear(C, d, bias=False) for d in (C, kvd, kvd, C))
            s.wgate, s.wup = nn.Linear(C, hidden, bias=False), nn.Linear(C, hidden, bias=False)
            s.wdown = nn.Linear(hidden, C, bias=False)

        def forward(s, x, cos, sin):
            b = x.size(0)
            h = rms_norm(x, s.rms1)
            q = s.wq(h).view(b, T, H, hs).transpose(1, 2)
            k = s.wk(h).view(b, T, KV, hs).transpose(1, 2)
            v = s.wv(h).view(b, T, KV, hs).transpose(1, 2)
            cos_, sin_ = cos.to(q.dtype), sin.to(q.dtype)
            q, k = q * cos_ + rotate_half(q) * sin_, k * cos_ + rotate_half(k) * sin_
            # Key/value head j serves query heads j*H/KV .. (j+1)*H/KV - 1.
            k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, T, C)
            x = x + s.wo(y)
            h = rms_norm(x, s.rms2)
            return x + s.wdown(F.silu(s.wgate(h)) * s.wup(h))

    class Llama(nn.Module):
        def __init__(s):
            super().__init__()
            s.wte = nn.Embedding(Vp, C)
            s.blocks = nn.ModuleList(Block() for _ in range(L))
            s.rmsf = nn.Parameter(torch.ones(C))
            s.lmhead = nn.Linear(C, Vp, bias=False) if untied else None
            inv = theta ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)  # theta^(-2i/hs)
            ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
            ang = torch.cat((ang, ang), dim=-1)
            s.register_buffer("cos", ang.cos().float(), persistent=False)
            s.register_buffer("sin", ang.sin().float(), persistent=False)
            for name, p in s.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith(("wo.weight", "wdown.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(s, idx, tgt):
            x = s.wte(idx)
            for blk in s.blocks:
                x = blk(x, s.cos, s.sin)
            x = rms_norm(x, s.rmsf)
            logits = s.lmhead(x) if s.lmhead is not None else F.linear(x, s.wte.weight)
            return F.cross_entropy(logits.view(-1, Vp), tgt.reshape(-1))

    return Llama()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="llama-1.1b", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    ap.add_argument("--microbatch", type=int, default=0, help="sequences per forward/backward pass (0: the config's)")
    ap.add_argument("--seq-len", type=int, default=0, help="tokens per sequence (0: the config's maximum)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="fp32 (TF32 off) or bf16 autocast")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="peak TFLOP/s for MFU (0: unknown, printed as -)")
    ap.add_argument("--untied", action="store_true", help="a separate lm-head (the trainer's Untied)")
    a = ap.parse_args()
    c = CONFIGS[a.config]
    T = a.seq_len or c["T"]
    if not 1 <= T <= c["T"]:
        sys.exit(f"--seq-len {T}: want 1 to {c['T']}")
    with torch.device(a.device):  # built and initialised where it trains
        m = llama(c["Vp"], c["L"], c["C"], c["H"], c["KV"], c["hidden"], T, untied=a.untied)
    n = n_params(m)
    n_matmul = n - (c["Vp"] * c["C"] if a.untied else 0)  # an untied embedding is looked up, not multiplied
    train_model(a.config, m, n_matmul, c["V"], c["L"], c["C"], T, a.batch, a.steps, a.device, a.threads,
                a.precision, a.microbatch or min(c["mb"], a.batch), a.peak_tflops)


if __name__ == "__main__":
    main()
