#!/usr/bin/python3
"""Test-only reference for `bench eval` (tests/cli/eval_test.cpp), with NumPy alone (no PyTorch).

Writes, for one small configuration, a checkpoint in the Hugging Face layout (safetensors, F32,
PyTorch Linear weights [out, in]), a token file, and the float64 logits and block outputs that
the model computes on that file, evaluated as `bench eval` does: consecutive windows of seq_len
positions, each starting at position 0.

    hf_reference.py llama|postnorm OUT_DIR [F32|BF16 [VOCAB]]

With BF16 the checkpoint holds bfloat16 weights (rounded to nearest even, as Hugging Face
checkpoints usually are) and the reference uses exactly those rounded values. VOCAB (default 64)
sets the vocabulary: one that is not a multiple of 64 checks that bench's padded vocabulary
leaves the loss and the dumped logits those of the real one.

Configurations (their TOML twins are in eval_test.cpp):
  llama:    pre-RMSNorm, SwiGLU, rotate-half RoPE, GQA (4 query / 2 key-value heads), untied head
  postnorm: post-LayerNorm (with bias), GeLU (erf) MLP, learned absolute positions, MHA, tied head
"""
import math
import os
import sys

import numpy as np

from safetensors_writer import to_bf16_bits, write_safetensors

VOCAB, D, LAYERS, HEADS, DH, FF, SEQ = 64, 32, 2, 4, 8, 64, 16


def bf16_bits_to_float(h):
    return (h.astype("<u4") << 16).view("<f4")


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def attention(x, p, i, kv_heads, rope):
    t = x.shape[0]
    q = (x @ p[f"model.layers.{i}.self_attn.q_proj.weight"].T).reshape(t, HEADS, DH)
    k = (x @ p[f"model.layers.{i}.self_attn.k_proj.weight"].T).reshape(t, kv_heads, DH)
    v = (x @ p[f"model.layers.{i}.self_attn.v_proj.weight"].T).reshape(t, kv_heads, DH)
    if rope:  # Hugging Face Llama: cos/sin of cat(freqs, freqs), q * cos + rotate_half(q) * sin
        inv_freq = 1.0 / (10000.0 ** (np.arange(0, DH, 2, dtype=np.float64) / DH))
        freqs = np.outer(np.arange(t, dtype=np.float64), inv_freq)
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    rep = HEADS // kv_heads  # repeat_kv: query head h reads key-value head h // rep
    out = np.zeros((t, HEADS, DH))
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for h in range(HEADS):
        s = q[:, h, :] @ k[:, h // rep, :].T / math.sqrt(DH) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        out[:, h, :] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, h // rep, :]
    return out.reshape(t, HEADS * DH) @ p[f"model.layers.{i}.self_attn.o_proj.weight"].T


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def forward(config, p, ids):
    """Logits [t, vocab] and block outputs [layers, t, d] of one window, in float64."""
    x = p["model.embed_tokens.weight"][ids]
    hidden = []
    if config == "llama":
        eps = 1e-5
        for i in range(LAYERS):
            x = x + attention(rms_norm(x, p[f"model.layers.{i}.input_layernorm.weight"], eps), p, i, 2, True)
            h = rms_norm(x, p[f"model.layers.{i}.post_attention_layernorm.weight"], eps)
            m = p[f"model.layers.{i}.mlp."]
            x = x + (silu(h @ m("gate_proj").T) * (h @ m("up_proj").T)) @ m("down_proj").T
            hidden.append(x)
        x = rms_norm(x, p["model.norm.weight"], eps)
        return x @ p["lm_head.weight"].T, hidden
    eps = 1e-5
    x = x + p["model.embed_positions.weight"][: len(ids)]
    for i in range(LAYERS):
        ln = lambda name, v: layer_norm(v, p[f"model.layers.{i}.{name}.weight"], p[f"model.layers.{i}.{name}.bias"], eps)
        x = ln("input_layernorm", x + attention(x, p, i, HEADS, False))
        m = p[f"model.layers.{i}.mlp."]
        x = ln("post_attention_layernorm", x + gelu(x @ m("up_proj").T) @ m("down_proj").T)
        hidden.append(x)
    return x @ p["model.embed_tokens.weight"].T, hidden  # tied head, no final norm


class Params(dict):
    """Tensors by name; p["prefix."](suffix) reads prefix + suffix + ".weight"."""

    def __getitem__(self, name):
        if name.endswith("."):
            return lambda suffix: dict.__getitem__(self, name + suffix + ".weight")
        return dict.__getitem__(self, name)


def main():
    config, out = sys.argv[1], sys.argv[2]
    dtype = sys.argv[3] if len(sys.argv) > 3 else "F32"
    global VOCAB
    VOCAB = int(sys.argv[4]) if len(sys.argv) > 4 else VOCAB
    rng = np.random.default_rng(20240 if config == "llama" else 20241)
    t = {}

    def normal(name, shape, std=0.2, mean=0.0):
        t[name] = (mean + std * rng.standard_normal(shape)).astype(np.float32)

    normal("model.embed_tokens.weight", (VOCAB, D), 0.5)
    kv = 2 if config == "llama" else HEADS
    if config == "postnorm":
        normal("model.embed_positions.weight", (SEQ, D), 0.3)
    for i in range(LAYERS):
        pre = f"model.layers.{i}."
        normal(pre + "self_attn.q_proj.weight", (HEADS * DH, D))
        normal(pre + "self_attn.k_proj.weight", (kv * DH, D))
        normal(pre + "self_attn.v_proj.weight", (kv * DH, D))
        normal(pre + "self_attn.o_proj.weight", (D, HEADS * DH))
        if config == "llama":
            normal(pre + "mlp.gate_proj.weight", (FF, D))
        normal(pre + "mlp.up_proj.weight", (FF, D))
        normal(pre + "mlp.down_proj.weight", (D, FF))
        for n in ("input_layernorm", "post_attention_layernorm"):
            normal(pre + n + ".weight", (D,), 0.1, 1.0)
            if config == "postnorm":
                normal(pre + n + ".bias", (D,), 0.1)
    if config == "llama":
        normal("model.norm.weight", (D,), 0.1, 1.0)
        normal("lm_head.weight", (VOCAB, D), 0.3)
    write_safetensors(os.path.join(out, "weights.safetensors"), t, dtype)
    if dtype == "BF16":  # the model computes with what the file holds
        t = {k: bf16_bits_to_float(to_bf16_bits(v)) for k, v in t.items()}

    n_tokens = 2 * SEQ + 6  # two full windows and a partial one of 5 positions
    tokens = rng.integers(0, VOCAB, n_tokens)
    if config == "llama":  # raw uint16
        tokens.astype("<u2").tofile(os.path.join(out, "tokens.bin"))
    else:  # llm.c / nanoGPT: 256 int32 header (magic, version, count), then uint16
        header = np.zeros(256, dtype="<i4")
        header[:3] = [20240520, 1, n_tokens]
        with open(os.path.join(out, "tokens.bin"), "wb") as f:
            f.write(header.tobytes() + tokens.astype("<u2").tobytes())

    p = Params({k: v.astype(np.float64) for k, v in t.items()})
    logits, hidden, nll = [], [], []
    positions = n_tokens - 1
    for s in range(0, positions, SEQ):
        ids = tokens[s : min(s + SEQ, positions)]
        lg, hs = forward(config, p, ids)
        logits.append(lg)
        hidden.append(np.stack(hs))
        z = lg.max(axis=-1) + np.log(np.exp(lg - lg.max(axis=-1, keepdims=True)).sum(axis=-1))
        nll.extend(z - lg[np.arange(len(ids)), tokens[s + 1 : s + 1 + len(ids)]])
    np.save(os.path.join(out, "logits.npy"), np.concatenate(logits))
    np.save(os.path.join(out, "hidden.npy"), np.concatenate(hidden, axis=1))
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write(repr(float(np.mean(nll))))


if __name__ == "__main__":
    main()
