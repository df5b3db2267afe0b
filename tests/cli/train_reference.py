#!/usr/bin/python3
"""Test-only reference for training from given weights (tests/cli/train_test.cpp), NumPy alone.

Writes, for one small Llama-style configuration (pre-RMSNorm, SwiGLU, rotate-half RoPE, GQA with
4 query / 2 key-value heads, untied head), a checkpoint in the Hugging Face layout (safetensors,
F64), a raw uint16 token file, and what `bench run` must reproduce when a `[stability]` case starts
from that checkpoint and reads the file with `sampling = "sequential"`: the loss and the gradient
norm of every step, the held-out loss after training, and the final weights. Forward and backward
are written out by hand in float64; the optimizer is the AdamW of docs/stability.md ("The
optimizer step") and the schedule that of docs/experiments.md.

    train_reference.py OUT_DIR [--check-gradient]

--check-gradient compares the hand-written gradient with central finite differences first.
"""
import json
import math
import os
import sys

import numpy as np

from safetensors_writer import write_safetensors

VOCAB, D, LAYERS, HEADS, KV, DH, FF = 64, 32, 2, 4, 2, 8, 64
SEQ, BATCH, TOKENS, VALIDATION = 16, 4, 1000, 0.1
STEPS, LR, WARMUP_FRACTION, MIN_LR_RATIO = 20, 1e-2, 0.1, 0.1
BETA1, BETA2, EPS, WEIGHT_DECAY, CLIP = 0.9, 0.95, 1e-8, 0.1, 1.0
NORM_EPS, ROPE_BASE = 1e-5, 10000.0

# The TOML twin (train_test.cpp writes the same file).
TOML = f"""name = "train_from_weights"
seed = 7
device = "cpu"
[model]
vocab_size = {VOCAB}
d_model = {D}
n_layers = {LAYERS}
n_heads = {HEADS}
n_kv_heads = {KV}
d_head = {DH}
seq_len = {SEQ}
batch_size = {BATCH}
dtype = "float64"
norm_position = "pre"
norm = {{type = "rmsnorm", eps = {NORM_EPS}}}
position = {{type = "rope", base = {ROPE_BASE}, layout = "half"}}
attention = "causal"
ffn = {{type = "swiglu", d_ff = {FF}}}
[data]
type = "tokens"
path = "tokens.bin"
format = "uint16"
vocab_size = {VOCAB}
validation_fraction = {VALIDATION}
sampling = "sequential"
[stability]
steps = {STEPS}
lr = {LR}
warmup_fraction = {WARMUP_FRACTION}
schedule = "cosine"
min_lr_ratio = {MIN_LR_RATIO}
weight_decay = {WEIGHT_DECAY}
beta1 = {BETA1}
beta2 = {BETA2}
eps = {EPS}
grad_clip = {CLIP}
eval_batches = 1
init_weights = "weights.safetensors"
save_weights = true
"""


def layer(i, name):
    return f"model.layers.{i}.{name}.weight"


# --- forward, keeping what the backward needs -------------------------------------------------


def rms_forward(x, g):
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + NORM_EPS)
    return x * r * g, (x, r, g)


def rms_backward(dy, cache):
    x, r, g = cache
    dg = np.sum(dy * x * r, axis=tuple(range(dy.ndim - 1)))
    dyg = dy * g
    dx = dyg * r - x * r**3 * np.mean(dyg * x, axis=-1, keepdims=True)
    return dx, dg


def rope_tables(t):
    inv_freq = 1.0 / (ROPE_BASE ** (np.arange(0, DH, 2, dtype=np.float64) / DH))
    freqs = np.outer(np.arange(t, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb)[None, :, None, :], np.sin(emb)[None, :, None, :]


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rotate_half_t(y):
    """The transpose of rotate_half: [y1, y2] -> [y2, -y1]."""
    h = y.shape[-1] // 2
    return np.concatenate([y[..., h:], -y[..., :h]], axis=-1)


def attention_forward(x, p, i):
    b, t, _ = x.shape
    q = (x @ p[layer(i, "self_attn.q_proj")].T).reshape(b, t, HEADS, DH)
    k = (x @ p[layer(i, "self_attn.k_proj")].T).reshape(b, t, KV, DH)
    v = (x @ p[layer(i, "self_attn.v_proj")].T).reshape(b, t, KV, DH)
    cos, sin = rope_tables(t)
    qr, kr = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    rep = HEADS // KV
    kh, vh = np.repeat(kr, rep, axis=2), np.repeat(v, rep, axis=2)  # query head h reads h // rep
    s = np.einsum("bqhd,bkhd->bhqk", qr, kh) / math.sqrt(DH)
    s = s + np.triu(np.full((t, t), -np.inf), 1)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    prob = e / e.sum(axis=-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", prob, vh).reshape(b, t, HEADS * DH)
    return o @ p[layer(i, "self_attn.o_proj")].T, (x, qr, kh, vh, prob, o, cos, sin)


def attention_backward(dout, cache, p, i, grads):
    x, qr, kh, vh, prob, o, cos, sin = cache
    b, t, _ = x.shape
    rep = HEADS // KV
    grads[layer(i, "self_attn.o_proj")] += np.einsum("btj,btk->jk", dout, o)
    do = (dout @ p[layer(i, "self_attn.o_proj")]).reshape(b, t, HEADS, DH)
    dprob = np.einsum("bqhd,bkhd->bhqk", do, vh)
    dvh = np.einsum("bhqk,bqhd->bkhd", prob, do)
    ds = prob * (dprob - np.sum(dprob * prob, axis=-1, keepdims=True)) / math.sqrt(DH)
    dqr = np.einsum("bhqk,bkhd->bqhd", ds, kh)
    dkh = np.einsum("bhqk,bqhd->bkhd", ds, qr)
    dkr = dkh.reshape(b, t, KV, rep, DH).sum(axis=3)
    dv = dvh.reshape(b, t, KV, rep, DH).sum(axis=3)
    dq = dqr * cos + rotate_half_t(dqr * sin)
    dk = dkr * cos + rotate_half_t(dkr * sin)
    dx = np.zeros_like(x)
    for name, d, n in (("q_proj", dq, HEADS), ("k_proj", dk, KV), ("v_proj", dv, KV)):
        d2 = d.reshape(b, t, n * DH)
        grads[layer(i, "self_attn." + name)] += np.einsum("btj,btk->jk", d2, x)
        dx += d2 @ p[layer(i, "self_attn." + name)]
    return dx


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def forward(p, ids, targets):
    """Mean cross-entropy over the batch, and the caches of every layer."""
    caches = {"ids": ids}
    x = p["model.embed_tokens.weight"][ids]
    for i in range(LAYERS):
        h, c_n1 = rms_forward(x, p[layer(i, "input_layernorm")])
        a, c_at = attention_forward(h, p, i)
        x = x + a
        h2, c_n2 = rms_forward(x, p[layer(i, "post_attention_layernorm")])
        ga, up = h2 @ p[layer(i, "mlp.gate_proj")].T, h2 @ p[layer(i, "mlp.up_proj")].T
        s = ga * sigmoid(ga)
        x = x + (s * up) @ p[layer(i, "mlp.down_proj")].T
        caches[i] = (c_n1, c_at, c_n2, h2, ga, up, s)
    xf, c_f = rms_forward(x, p["model.norm.weight"])
    logits = xf @ p["lm_head.weight"].T
    z = logits.max(axis=-1, keepdims=True)
    lse = z[..., 0] + np.log(np.exp(logits - z).sum(axis=-1))
    picked = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    caches["head"] = (c_f, xf, logits, lse, targets)
    return float(np.mean(lse - picked)), caches


def backward(p, caches):
    grads = {k: np.zeros_like(v) for k, v in p.items()}
    c_f, xf, logits, lse, targets = caches["head"]
    n = targets.size
    dlogits = np.exp(logits - lse[..., None])
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(dlogits, targets[..., None], axis=-1) - 1, -1)
    dlogits /= n
    grads["lm_head.weight"] += np.einsum("btv,btd->vd", dlogits, xf)
    dx, grads["model.norm.weight"] = rms_backward(dlogits @ p["lm_head.weight"], c_f)
    for i in reversed(range(LAYERS)):
        c_n1, c_at, c_n2, h2, ga, up, s = caches[i]
        du = dx @ p[layer(i, "mlp.down_proj")]
        grads[layer(i, "mlp.down_proj")] += np.einsum("btj,btk->jk", dx, s * up)
        ds, dup = du * up, du * s
        sg = sigmoid(ga)
        dga = ds * (sg + ga * sg * (1 - sg))
        grads[layer(i, "mlp.gate_proj")] += np.einsum("btj,btk->jk", dga, h2)
        grads[layer(i, "mlp.up_proj")] += np.einsum("btj,btk->jk", dup, h2)
        dh2 = dga @ p[layer(i, "mlp.gate_proj")] + dup @ p[layer(i, "mlp.up_proj")]
        dxn, grads[layer(i, "post_attention_layernorm")] = rms_backward(dh2, c_n2)
        dx = dx + dxn
        dh = attention_backward(dx, c_at, p, i, grads)
        dxn, grads[layer(i, "input_layernorm")] = rms_backward(dh, c_n1)
        dx = dx + dxn
    np.add.at(grads["model.embed_tokens.weight"], caches["ids"], dx)
    return grads


# --- data, schedule, optimizer ----------------------------------------------------------------


def batch(tokens, begin, end, index):
    """Batch `index` of the split [begin, end) under sampling = "sequential" (docs/experiments.md)."""
    count = (end - begin - 1) // SEQ
    starts = [begin + ((index * BATCH + r) % count) * SEQ for r in range(BATCH)]
    ids = np.stack([tokens[s : s + SEQ] for s in starts])
    return ids, np.stack([tokens[s + 1 : s + SEQ + 1] for s in starts])


def lr_at(step, warmup):
    if step < warmup:
        return LR * (step + 1) / warmup
    lo = LR * MIN_LR_RATIO
    progress = min(1.0, (step - warmup) / max(1, STEPS - 1 - warmup))
    return lo + (LR - lo) * 0.5 * (1 + math.cos(math.pi * progress))


def decayed(name):
    """Weight decay reaches matrices and the embedding, never the norm gains."""
    return not name.endswith("layernorm.weight") and name != "model.norm.weight"


def check_gradient(p, tokens, train_end):
    ids, targets = batch(tokens, 0, train_end, 0)
    _, caches = forward(p, ids, targets)
    grads = backward(p, caches)
    rng = np.random.default_rng(5)
    worst = 0.0
    for name in p:
        for _ in range(3):
            idx = tuple(rng.integers(0, n) for n in p[name].shape)
            keep, h = p[name][idx], 1e-5
            p[name][idx] = keep + h
            up, _ = forward(p, ids, targets)
            p[name][idx] = keep - h
            down, _ = forward(p, ids, targets)
            p[name][idx] = keep
            fd = (up - down) / (2 * h)
            worst = max(worst, abs(fd - grads[name][idx]) / (1e-6 + abs(fd)))
    print(f"gradient check: worst relative error {worst:.2e}")
    if worst > 1e-4:
        sys.exit("gradient check failed")


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(31337)
    p = {}

    def normal(name, shape, std=0.2, mean=0.0):
        p[name] = mean + std * rng.standard_normal(shape)

    normal("model.embed_tokens.weight", (VOCAB, D), 0.5)
    for i in range(LAYERS):
        normal(layer(i, "self_attn.q_proj"), (HEADS * DH, D))
        normal(layer(i, "self_attn.k_proj"), (KV * DH, D))
        normal(layer(i, "self_attn.v_proj"), (KV * DH, D))
        normal(layer(i, "self_attn.o_proj"), (D, HEADS * DH))
        normal(layer(i, "mlp.gate_proj"), (FF, D))
        normal(layer(i, "mlp.up_proj"), (FF, D))
        normal(layer(i, "mlp.down_proj"), (D, FF))
        normal(layer(i, "input_layernorm"), (D,), 0.1, 1.0)
        normal(layer(i, "post_attention_layernorm"), (D,), 0.1, 1.0)
    normal("model.norm.weight", (D,), 0.1, 1.0)
    normal("lm_head.weight", (VOCAB, D), 0.3)
    write_safetensors(os.path.join(out, "weights.safetensors"), p, "F64")

    # Tokens with some structure to learn: a noisy walk over the vocabulary.
    tokens = np.cumsum(rng.integers(-2, 3, TOKENS)) % VOCAB
    tokens.astype("<u2").tofile(os.path.join(out, "tokens.bin"))
    with open(os.path.join(out, "train.toml"), "w") as f:
        f.write(TOML)
    train_end = math.floor(TOKENS * (1 - VALIDATION))

    if "--check-gradient" in sys.argv:
        check_gradient(p, tokens, train_end)

    warmup = round(WARMUP_FRACTION * STEPS)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    losses, norms = [], []
    for step in range(STEPS):
        ids, targets = batch(tokens, 0, train_end, step)
        loss, caches = forward(p, ids, targets)
        grads = backward(p, caches)
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
        losses.append(loss)
        norms.append(norm)
        scale = CLIP / (norm + 1e-6) if CLIP > 0 and norm > CLIP else 1.0
        lr, t = lr_at(step, warmup), step + 1
        for k in p:
            g = grads[k] * scale
            if decayed(k):
                p[k] *= 1 - lr * WEIGHT_DECAY
            m[k] = BETA1 * m[k] + (1 - BETA1) * g
            v2[k] = BETA2 * v2[k] + (1 - BETA2) * g * g
            p[k] -= lr * (m[k] / (1 - BETA1**t)) / (np.sqrt(v2[k] / (1 - BETA2**t)) + EPS)
    ids, targets = batch(tokens, train_end, TOKENS, 0)
    val_loss, _ = forward(p, ids, targets)
    write_safetensors(os.path.join(out, "final.safetensors"), p, "F64")
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"loss": losses, "grad_norm": norms, "final_val_loss": val_loss}, f)


if __name__ == "__main__":
    main()
