#!/usr/bin/env bash
# The trainer's check for a machine with an NVIDIA GPU, in one go:
#   1. builds the CUDA path (scripts/build-cuda.sh),
#   2. runs the GPU tests: gradients match the CPU within 1e-4, two GPU runs
#      give identical digests,
#   3. prints training tokens/s for the small and gpt2-124m configs, next to
#      PyTorch training the same model on the same GPU when PyTorch is installed.
# Usage: scripts/gpu-check.sh [steps]     (default 3 timed steps per config)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
steps=${1:-3}

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found"
scripts/build-cuda.sh
# shellcheck disable=SC1091
source clients/trainer/cuda/build/env.sh

echo "=== GPU tests"
go test -tags cuda -count=1 -timeout 20m -run 'GPU' -v ./clients/trainer/

echo "=== trainer tokens/s (GPU forward/backward, host optimizers)"
go run -tags cuda ./clients/trainer/cmd/trainer-bench -gemm=false -configs small -steps "$steps" -batch 16 -microbatch 16
go run -tags cuda ./clients/trainer/cmd/trainer-bench -gemm=false -configs gpt2-124m -steps "$steps" -batch 8 -microbatch 8

echo "=== PyTorch on the same GPU (fp32, AdamW)"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu-check: PyTorch with CUDA not available, skipping the comparison"
  exit 0
fi
py=$(mktemp --suffix=.py)
trap 'rm -f "$py"' EXIT
cat >"$py" <<'PY'
# GPT-2 style model matching clients/trainer (pre-LN, tanh GELU, tied lm-head),
# fp32 weights and math (TF32 off), AdamW; prints tokens/s over timed steps.
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
name, V, L, C, H, T, B, steps = sys.argv[1], *map(int, sys.argv[2:9])
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1 = nn.LayerNorm(C); s.qkv = nn.Linear(C, 3*C); s.proj = nn.Linear(C, C)
        s.ln2 = nn.LayerNorm(C); s.fc = nn.Linear(C, 4*C); s.fcproj = nn.Linear(4*C, C)
    def forward(s, x):
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(x.size(0), T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.size(0), T, C)
        x = x + s.proj(y)
        return x + s.fcproj(F.gelu(s.fc(s.ln2(x)), approximate='tanh'))
class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.wte = nn.Embedding(V, C); s.wpe = nn.Embedding(T, C)
        s.blocks = nn.ModuleList(Block() for _ in range(L)); s.lnf = nn.LayerNorm(C)
    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
        for b in s.blocks: x = b(x)
        return F.cross_entropy(F.linear(s.lnf(x), s.wte.weight).view(-1, V), tgt.view(-1))
m = GPT().cuda(); opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
x = torch.randint(0, min(V, 256), (B, T), device='cuda'); y = torch.roll(x, -1, 1)
def step():
    opt.zero_grad(set_to_none=True); loss = m(x, y); loss.backward(); opt.step(); return loss
step(); torch.cuda.synchronize(); t0 = time.time()
for _ in range(steps): step()
torch.cuda.synchronize(); dt = time.time() - t0
print(f"pytorch {torch.__version__} {name:10s} B={B} T={T} fp32 adamw: {B*T*steps/dt:9.0f} tok/s on {torch.cuda.get_device_name()}")
PY
python3 "$py" small 256 6 384 6 256 16 "$steps"
python3 "$py" gpt2-124m 50304 12 768 12 1024 8 "$steps"
