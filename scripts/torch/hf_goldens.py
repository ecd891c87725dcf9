"""Goldens from the reference implementation (transformers), run by hand, never in CI.

  python hf_goldens.py write DIR          writes DIR/gpt2, DIR/llama, DIR/llama3, DIR/mistral,
                                          DIR/qwen2 and DIR/qwen2-untied: tiny random
                                          GPT2LMHeadModel, LlamaForCausalLM (plain, and with Llama
                                          3.1's rotary scaling and epsilon 1e-6),
                                          MistralForCausalLM and Qwen2ForCausalLM (tied, and
                                          untied with its last layer sliding) saved with
                                          save_pretrained (config.json, model.safetensors), and
                                          golden.json: tokens, logits, mean loss, greedy
                                          continuations and tensor names, computed in fp32 on
                                          the CPU
  python hf_goldens.py check EXPORT GOLD  loads EXPORT (a directory psyche-client wrote with
                                          `model export`) in transformers and compares its
                                          logits on GOLD's tokens with GOLD's logits

clients/trainer/testdata/hf holds the output of `write`; hf_test.go checks the trainer's
forward pass against it. Needs torch, transformers and safetensors from PyPI
(scripts/bench-vs-pytorch.sh's venv plus `pip install transformers safetensors`).
"""
import json
import os
import sys

import torch
import transformers

torch.backends.cuda.matmul.allow_tf32 = False
VOCAB, T, B = 96, 12, 2


def models():
    gpt2 = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=2, n_head=4, activation_function="gelu_new",
        layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    llama = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=16, rope_theta=10000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False, hidden_act="silu", attention_bias=False, mlp_bias=False)
    # A tied Llama with Llama 3.1's rotary scaling (head size 16: one
    # frequency kept, one blended, the rest divided) and RMSNorm epsilon 1e-6.
    llama3 = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, hidden_act="silu", attention_bias=False, mlp_bias=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 32})
    # Mistral below its sliding window (T < 16): full attention.
    mistral = transformers.MistralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, sliding_window=16, rope_theta=1e6, rms_norm_eps=1e-6,
        tie_word_embeddings=False, hidden_act="silu")
    return {"gpt2": transformers.GPT2LMHeadModel(gpt2), "llama": transformers.LlamaForCausalLM(llama),
            "llama3": transformers.LlamaForCausalLM(llama3), "mistral": transformers.MistralForCausalLM(mistral)}


def qwen2_models():
    # Qwen2: q/k/v biases, no o bias, tied; and untied with its second layer
    # sliding (max_window_layers 1) below the window (T < 16): full attention.
    qwen2 = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_theta=1e6, rms_norm_eps=1e-6,
        tie_word_embeddings=True, hidden_act="silu", use_sliding_window=False)
    qwen2_untied = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=False, hidden_act="silu", use_sliding_window=True, sliding_window=16, max_window_layers=1)
    return {"qwen2": transformers.Qwen2ForCausalLM(qwen2), "qwen2-untied": transformers.Qwen2ForCausalLM(qwen2_untied)}


def forward(model, tokens):
    with torch.no_grad():
        out = model(input_ids=tokens)
    logits = out.logits.float()
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    return logits, loss


def greedy(model, prompt, n):
    """The n tokens that follow prompt, each the argmax of the last position's logits."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[0, len(prompt):].tolist()


def write(root):
    # Each group from its own seed, so that adding one leaves the others' files as they were.
    for seed, group in ((0, models), (1, qwen2_models)):
        torch.manual_seed(seed)
        write_group(root, group())


def write_group(root, group):
    for name, model in group.items():
        model.eval()
        # Random values everywhere (biases and norm weights too), so that
        # every tensor and its orientation matters.
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(torch.randn_like(p) * (0.1 if p.dim() > 1 else 0.3) + (1.0 if "norm" in n or "ln_" in n else 0.0))
        d = os.path.join(root, name)
        model.save_pretrained(d, safe_serialization=True)
        os.remove(os.path.join(d, "generation_config.json"))  # sampling defaults: not the model
        tokens = torch.randint(0, VOCAB, (B, T))
        logits, loss = forward(model, tokens)
        prompt = tokens[0, :4].tolist()
        golden = {
            "transformers": transformers.__version__, "torch": torch.__version__,
            "tokens": tokens.tolist(), "logits": logits.reshape(-1).tolist(), "loss": loss.item(),
            "greedy": {"prompt": prompt, "tokens": greedy(model, prompt, 10)},
            "tensors": sorted(n for n, _ in model.named_parameters()),
        }
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump(golden, f)
        print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, loss {loss.item():.6f} -> {d}")


def check(export, gold):
    with open(os.path.join(gold, "golden.json")) as f:
        golden = json.load(f)
    model = transformers.AutoModelForCausalLM.from_pretrained(export, torch_dtype=torch.float32)
    model.eval()
    tokens = torch.tensor(golden["tokens"])
    logits, loss = forward(model, tokens)
    want = torch.tensor(golden["logits"])
    err = (logits.reshape(-1) - want).abs().max().item() / want.abs().max().item()
    print(f"{export}: {type(model).__name__} loaded by transformers {transformers.__version__}; "
          f"logits max relative error {err:.3g}, loss {loss.item():.6f} against {golden['loss']:.6f}")
    sys.exit(0 if err <= 1e-5 else 1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
