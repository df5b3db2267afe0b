#!/usr/bin/python3
"""Test-only reference for `bench eval` on Hugging Face model folders (tests/cli/hf_config_test.cpp),
with NumPy alone (no PyTorch, no transformers).

    hf_models_reference.py MODEL_TYPE OUT_DIR

Writes into OUT_DIR a tiny random model as Hugging Face publishes one: config.json, the weights
under that architecture's tensor names and layouts (model.safetensors, or for gpt_neox two shards
and model.safetensors.index.json), a token file (raw uint16), and the float64 logits of the
architecture computed from its published definition (the transformers modeling files), evaluated
as `bench eval` does: consecutive windows of SEQ positions, each starting at position 0.

MODEL_TYPE: llama, mistral, qwen2, gemma, gemma2, olmo, olmo2, phi3, gpt2, gpt_neox, falcon. What each
one checks:
  llama     pre-RMSNorm, SwiGLU, rotate-half RoPE, GQA, untied head
  mistral   as llama with a sliding window of 5 keys
  qwen2     q, k, v biases, tied head
  gemma2    (1 + w) RMSNorm around and after each sublayer, sqrt(d) embedding scale, head_dim != d/H,
            query_pre_attn_scalar, attention and final soft-caps, sliding window on even layers,
            GeGLU with tanh GeLU
  gemma     Gemma 1: (1 + w) RMSNorm before each sublayer, sqrt(d) embedding scale, head_dim != d/H,
            multi-query, GeGLU with tanh GeLU from hidden_activation absent (hidden_act "gelu" is
            ignored, as transformers ignores it)
  olmo      OLMo 1: LayerNorm without weight or bias (eps 1e-5), q, k, v and o biases
            (attention_bias), tied head, clip_qkv null
  olmo2     norms on the sublayer outputs, RMSNorm over the whole q and the whole k
  phi3      fused qkv_proj and gate_up_proj
  gpt2      Conv1D weights stored [in, out], fused c_attn, learned positions (wpe), LayerNorm with
            biases, biases everywhere, tied head, gelu_new, n_inner null, with the attention-mask
            buffers (attn.bias, attn.masked_bias) that GPT-2 checkpoints carry
  gpt_neox  parallel block with a LayerNorm per branch, per-head interleaved query_key_value,
            rotary on half of each head, biases, exact GeLU MLP, sharded checkpoint, with the
            rotary buffer some checkpoints carry
  falcon    multi-query, parallel block with one shared LayerNorm, query_key_value [q..., k, v]
Variants (MODEL_TYPE as written here, the config's model_type before the underscore):
  llama_llama3  llama with Llama 3.1's rope_scaling (rope_type llama3, factor 4, L_orig 8)
  falcon_mha    falcon with multi_query false: query_key_value [q_h; k_h; v_h] per head, biases
  phi3_longrope phi3 with a LongRoPE rope_scaling (s = 16 / 4; every window longer than L_orig = 4)
  phi3_longrope_short  LongRoPE with windows of 8 (`bench eval --seq-len 8`) within L_orig = 8 < 16:
            the short factors, and the attention factor sqrt(1 + ln 2 / ln 8) all the same
  mistral_null  mistral with "sliding_window": null (no window, as Mistral 7B v0.3 ships it) and
            "head_dim": null (hidden_size / heads)
  gemma2_null   gemma2 with null soft-caps (none)
  gpt2_hub  gpt2 with the names of OpenAI's checkpoints on the Hub (no "transformer." prefix)
  olmo_clip olmo with clip_qkv 1.0 (OLMo 1.7's is 8.0): q, k, v clamped after their biases, about
            a third of them here; the clamped fraction goes to clipped.txt
Windows: SEQ positions, or WINDOW[MODEL_TYPE] where that is set.
"""
import json
import math
import os
import sys

import numpy as np

from safetensors_writer import write_safetensors

VOCAB, D, LAYERS, HEADS, DH, FF, SEQ = 320, 32, 2, 4, 8, 64, 16
WINDOW = {"phi3_longrope_short": 8}
CLIPPED = [0, 0]  # q, k, v entries clamped by clip_qkv, and all of them


def config_of(name):
    if name == "llama_llama3":
        return dict(config_of("llama"), rope_scaling={"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 8, "rope_type": "llama3"})
    if name == "phi3_longrope":  # windows of 16 and 5 positions, both past L_orig = 4: the long factors
        return dict(config_of("phi3"), original_max_position_embeddings=4,
                    rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                                  "long_factor": [1.0, 2.0, 4.0, 8.0]})
    if name == "phi3_longrope_short":  # L_orig 8, windows of 8: the short factors; s = 16 / 8
        return dict(config_of("phi3_longrope"), original_max_position_embeddings=8)
    if name == "mistral_null":
        return dict(config_of("mistral"), sliding_window=None, head_dim=None)
    if name == "gemma2_null":
        return dict(config_of("gemma2"), attn_logit_softcapping=None, final_logit_softcapping=None)
    if name == "gpt2_hub":
        return config_of("gpt2")
    if name == "olmo_clip":
        return dict(config_of("olmo"), clip_qkv=1.0)
    if name == "falcon_mha":
        return dict(config_of("falcon"), multi_query=False, bias=True)
    mt = name
    base = {"architectures": ["X"], "model_type": mt, "vocab_size": VOCAB, "hidden_size": D,
            "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "max_position_embeddings": SEQ,
            "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2, "use_cache": True}
    llama = dict(base, intermediate_size=FF, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0,
                 hidden_act="silu", tie_word_embeddings=False, attention_bias=False, initializer_range=0.02)
    if mt == "llama":
        return dict(llama, mlp_bias=False, pretraining_tp=1, rope_scaling=None)
    if mt == "mistral":
        c = dict(llama, sliding_window=5)
        del c["attention_bias"]
        return c
    if mt == "qwen2":
        c = dict(llama, tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1000000.0, use_sliding_window=False,
                 sliding_window=4096, max_window_layers=2, use_mrope=False)
        del c["attention_bias"]
        return c
    if mt == "gemma2":
        return dict(llama, head_dim=16, tie_word_embeddings=True, rms_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh",
                    hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=12, attn_logit_softcapping=2.0,
                    final_logit_softcapping=3.0, sliding_window=4, cache_implementation="hybrid")
    if mt == "olmo2":
        return dict(llama, rope_theta=500000.0, rope_scaling=None)
    if mt == "gemma":  # hidden_act is ignored by transformers: hidden_activation absent is the tanh GeLU
        c = dict(llama, head_dim=16, num_key_value_heads=1, tie_word_embeddings=True, rms_norm_eps=1e-6,
                 hidden_act="gelu", rope_scaling=None)
        return c
    if mt == "olmo":
        c = dict(llama, attention_bias=True, tie_word_embeddings=True, clip_qkv=None, pad_token_id=1,
                 bos_token_id=None, rope_scaling=None)
        del c["rms_norm_eps"]
        return c
    if mt == "gpt2":
        return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
                "bos_token_id": 1, "embd_pdrop": 0.1, "eos_token_id": 1, "initializer_range": 0.02,
                "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": SEQ, "n_embd": D, "n_head": HEADS,
                "n_inner": None, "n_layer": LAYERS, "n_positions": SEQ, "resid_pdrop": 0.1,
                "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
                "summary_type": "cls_index", "summary_use_proj": True, "reorder_and_upcast_attn": False,
                "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
                "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
                "vocab_size": VOCAB}
    if mt == "phi3":
        return dict(llama, original_max_position_embeddings=SEQ, sliding_window=2047, embd_pdrop=0.0, resid_pdrop=0.0,
                    rope_scaling=None)
    if mt == "gpt_neox":
        return dict(base, intermediate_size=FF, hidden_act="gelu", layer_norm_eps=1e-5, rotary_emb_base=10000,
                    rotary_pct=0.5, use_parallel_residual=True, tie_word_embeddings=False)
    if mt == "falcon":
        return dict(base, alibi=False, apply_residual_connection_post_layernorm=False, bias=False,
                    hidden_dropout=0.0, attention_dropout=0.0, layer_norm_epsilon=1e-5, multi_query=True,
                    new_decoder_architecture=False, parallel_attn=True)
    raise SystemExit("unknown model_type " + mt)


def rms_norm(x, w, eps, offset=0.0):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (offset + w)


def layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    """transformers' NewGELUActivation, written as it is there."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * np.power(x, 3.0))))


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def llama3_inv_freq(inv_freq, s):
    """Hugging Face's _compute_llama3_parameters."""
    old, lo, hi = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"]
    wavelen = 2 * math.pi / inv_freq
    out = np.where(wavelen > old / lo, inv_freq / s["factor"], inv_freq)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / s["factor"] + smooth * out
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return np.where(medium, smoothed, out)


def rope(x, rot, base, scaling=None):
    """Hugging Face's apply_rotary_pos_emb on the first `rot` features of each head [t, heads, dh]."""
    t = x.shape[0]
    inv_freq = 1.0 / (base ** (np.arange(0, rot, 2, dtype=np.float64) / rot))
    mul = 1.0
    if scaling is not None and scaling.get("rope_type", scaling.get("type")) == "llama3":
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    elif scaling is not None:  # Phi-3 LongRoPE: factors by the window's length, cos and sin scaled
        long = t > scaling["original"]
        inv_freq = inv_freq / np.array(scaling["long_factor" if long else "short_factor"])
        s = scaling["max"] / scaling["original"]
        mul = math.sqrt(1 + math.log(s) / math.log(scaling["original"])) if s > 1 else 1.0
    freqs = np.outer(np.arange(t, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = mul * np.cos(emb)[:, None, :], mul * np.sin(emb)[:, None, :]
    r, rest = x[..., :rot], x[..., rot:]
    return np.concatenate([r * cos + rotate_half(r) * sin, rest], axis=-1)


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def attention(c, p, pre, x, layer):
    """One attention sublayer [t, d] -> [t, d], reading the tensors as the architecture does."""
    mt, t = c["model_type"], x.shape[0]
    H = c.get("num_attention_heads", c.get("n_head"))
    dh = c.get("head_dim") or c.get("hidden_size", c.get("n_embd")) // H  # head_dim null: hidden_size / heads
    K = c.get("num_key_value_heads", H)
    if mt == "gpt2":  # Conv1D: x W + b with W [in, out]; columns [q | k | v], heads in order within each
        qkv = x @ p[pre + "attn.c_attn.weight"] + p[pre + "attn.c_attn.bias"]
        q, k, v = (a.reshape(t, H, dh) for a in np.split(qkv, 3, axis=1))
    elif mt == "gpt_neox":  # [t, H, 3 dh]: per head q, k, v
        qkv = (x @ p[pre + "attention.query_key_value.weight"].T + p[pre + "attention.query_key_value.bias"])
        qkv = qkv.reshape(t, H, 3 * dh)
        q, k, v, K = qkv[..., :dh], qkv[..., dh : 2 * dh], qkv[..., 2 * dh :], H
    elif mt == "falcon" and c["multi_query"]:  # [t, H + 2, dh]: the H query heads, then k, then v
        qkv = (x @ p[pre + "self_attention.query_key_value.weight"].T).reshape(t, H + 2, dh)
        q, k, v, K = qkv[:, :H], qkv[:, H : H + 1], qkv[:, H + 1 :], 1
    elif mt == "falcon":  # multi-head: [t, H, 3, dh]
        qkv = x @ p[pre + "self_attention.query_key_value.weight"].T + p[pre + "self_attention.query_key_value.bias"]
        qkv = qkv.reshape(t, H, 3, dh)
        q, k, v, K = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], H
    else:
        if mt == "phi3":
            qkv = x @ p[pre + "self_attn.qkv_proj.weight"].T
            q, k, v = qkv[:, : H * dh], qkv[:, H * dh : (H + K) * dh], qkv[:, (H + K) * dh :]
        else:
            q, k, v = (x @ p[pre + f"self_attn.{n}_proj.weight"].T for n in "qkv")
            if mt == "qwen2" or (mt == "olmo" and c["attention_bias"]):
                q, k, v = (a + p[pre + f"self_attn.{n}_proj.bias"] for a, n in zip((q, k, v), "qkv"))
            if mt == "olmo" and c["clip_qkv"] is not None:  # OlmoAttention: clamp_ after the projections
                bound = c["clip_qkv"]
                for a in (q, k, v):
                    CLIPPED[0] += int((np.abs(a) > bound).sum())
                    CLIPPED[1] += a.size
                q, k, v = (np.clip(a, -bound, bound) for a in (q, k, v))
        if mt == "olmo2":  # over the whole projections, before the heads are split
            q = rms_norm(q, p[pre + "self_attn.q_norm.weight"], c["rms_norm_eps"])
            k = rms_norm(k, p[pre + "self_attn.k_norm.weight"], c["rms_norm_eps"])
        q, k, v = q.reshape(t, H, dh), k.reshape(t, K, dh), v.reshape(t, K, dh)
    base = c.get("rope_theta", c.get("rotary_emb_base", 10000.0))
    rot = int(dh * c.get("rotary_pct", 1.0))
    scaling = c.get("rope_scaling")
    if scaling is not None and mt == "phi3":
        scaling = dict(scaling, original=c["original_max_position_embeddings"], max=c["max_position_embeddings"])
    if mt != "gpt2":  # GPT-2's positions are the learned table added to the embeddings
        q, k = rope(q, rot, base, scaling), rope(k, rot, base, scaling)
    scale = c["query_pre_attn_scalar"] ** -0.5 if mt == "gemma2" else 1.0 / math.sqrt(dh)
    mask = np.triu(np.full((t, t), -np.inf), 1)
    window = c.get("sliding_window") if mt in ("mistral", "phi3") or (mt == "gemma2" and layer % 2 == 0) else None
    if window is not None:  # keys j <= i - window are masked: each query sees its last `window` keys
        mask = mask + np.tril(np.full((t, t), -np.inf), -window)
    out = np.zeros((t, H, dh))
    for h in range(H):
        s = q[:, h, :] @ k[:, h // (H // K), :].T * scale
        if mt == "gemma2" and c["attn_logit_softcapping"] is not None:
            cap = c["attn_logit_softcapping"]
            s = cap * np.tanh(s / cap)
        s = s + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        out[:, h, :] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, h // (H // K), :]
    o = out.reshape(t, H * dh)
    if mt == "gpt2":
        return o @ p[pre + "attn.c_proj.weight"] + p[pre + "attn.c_proj.bias"]
    if mt == "olmo" and c["attention_bias"]:
        return o @ p[pre + "self_attn.o_proj.weight"].T + p[pre + "self_attn.o_proj.bias"]
    if mt == "gpt_neox":
        return o @ p[pre + "attention.dense.weight"].T + p[pre + "attention.dense.bias"]
    if mt == "falcon":
        return o @ p[pre + "self_attention.dense.weight"].T + (p[pre + "self_attention.dense.bias"] if c["bias"] else 0)
    return o @ p[pre + "self_attn.o_proj.weight"].T


def mlp(c, p, pre, x):
    mt = c["model_type"]
    if mt == "gpt2":
        h = gelu_new(x @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"])
        return h @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]
    if mt == "gpt_neox":
        h = gelu(x @ p[pre + "mlp.dense_h_to_4h.weight"].T + p[pre + "mlp.dense_h_to_4h.bias"])
        return h @ p[pre + "mlp.dense_4h_to_h.weight"].T + p[pre + "mlp.dense_4h_to_h.bias"]
    if mt == "falcon":
        b = (lambda n: p[pre + f"mlp.{n}.bias"]) if c["bias"] else (lambda n: 0)
        h = gelu(x @ p[pre + "mlp.dense_h_to_4h.weight"].T + b("dense_h_to_4h"))
        return h @ p[pre + "mlp.dense_4h_to_h.weight"].T + b("dense_4h_to_h")
    if mt == "phi3":  # gate_up_proj: [gate; up]
        gu = x @ p[pre + "mlp.gate_up_proj.weight"].T
        gate, up = gu[:, : gu.shape[1] // 2], gu[:, gu.shape[1] // 2 :]
    else:
        gate, up = x @ p[pre + "mlp.gate_proj.weight"].T, x @ p[pre + "mlp.up_proj.weight"].T
    act = gelu_tanh if mt in ("gemma", "gemma2") else silu
    return (act(gate) * up) @ p[pre + "mlp.down_proj.weight"].T


def forward(c, p, ids):
    """Logits [t, vocab] of one window, in float64."""
    mt = c["model_type"]
    if mt == "gpt2":
        eps = c["layer_norm_epsilon"]
        x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][: len(ids)]
        for i in range(LAYERS):
            pre = f"transformer.h.{i}."
            ln = lambda n, v: layer_norm(v, p[pre + n + ".weight"], p[pre + n + ".bias"], eps)
            x = x + attention(c, p, pre, ln("ln_1", x), i)
            x = x + mlp(c, p, pre, ln("ln_2", x))
        x = layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
        return x @ p["transformer.wte.weight"].T  # tied
    if mt == "olmo":  # OlmoLayerNorm: no weight, no bias, eps 1e-5
        ln = lambda v: layer_norm(v, 1.0, 0.0, 1e-5)
        x = p["model.embed_tokens.weight"][ids]
        for i in range(LAYERS):
            pre = f"model.layers.{i}."
            x = x + attention(c, p, pre, ln(x), i)
            x = x + mlp(c, p, pre, ln(x))
        return ln(x) @ p["model.embed_tokens.weight"].T  # tied
    if mt in ("gpt_neox", "falcon"):
        emb = "gpt_neox.embed_in.weight" if mt == "gpt_neox" else "transformer.word_embeddings.weight"
        x = p[emb][ids]
        eps = c.get("layer_norm_eps", c.get("layer_norm_epsilon"))
        for i in range(LAYERS):
            pre = f"gpt_neox.layers.{i}." if mt == "gpt_neox" else f"transformer.h.{i}."
            ln = lambda n, v: layer_norm(v, p[pre + n + ".weight"], p[pre + n + ".bias"], eps)
            if mt == "gpt_neox":  # use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x))
                x = x + attention(c, p, pre, ln("input_layernorm", x), i) + mlp(c, p, pre, ln("post_attention_layernorm", x))
            else:  # parallel_attn: one norm, shared
                h = ln("input_layernorm", x)
                x = x + attention(c, p, pre, h, i) + mlp(c, p, pre, h)
        if mt == "gpt_neox":
            x = layer_norm(x, p["gpt_neox.final_layer_norm.weight"], p["gpt_neox.final_layer_norm.bias"], eps)
            return x @ p["embed_out.weight"].T
        x = layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
        return x @ p["transformer.word_embeddings.weight"].T  # tied
    eps = c["rms_norm_eps"]
    off = 1.0 if mt in ("gemma", "gemma2") else 0.0
    x = p["model.embed_tokens.weight"][ids]
    if mt in ("gemma", "gemma2"):
        x = x * math.sqrt(c["hidden_size"])
    for i in range(LAYERS):
        pre = f"model.layers.{i}."
        nrm = lambda n, v: rms_norm(v, p[pre + n + ".weight"], eps, off)
        if mt == "gemma2":
            x = x + nrm("post_attention_layernorm", attention(c, p, pre, nrm("input_layernorm", x), i))
            x = x + nrm("post_feedforward_layernorm", mlp(c, p, pre, nrm("pre_feedforward_layernorm", x)))
        elif mt == "olmo2":
            x = x + nrm("post_attention_layernorm", attention(c, p, pre, x, i))
            x = x + nrm("post_feedforward_layernorm", mlp(c, p, pre, x))
        else:
            x = x + attention(c, p, pre, nrm("input_layernorm", x), i)
            x = x + mlp(c, p, pre, nrm("post_attention_layernorm", x))
    x = rms_norm(x, p["model.norm.weight"], eps, off)
    head = p["model.embed_tokens.weight"] if c["tie_word_embeddings"] else p["lm_head.weight"]
    logits = x @ head.T
    if mt == "gemma2" and c["final_logit_softcapping"] is not None:
        cap = c["final_logit_softcapping"]
        logits = cap * np.tanh(logits / cap)
    return logits


def weights(c, rng):
    mt, t = c["model_type"], {}
    H = c.get("num_attention_heads", c.get("n_head"))
    dh = c.get("head_dim") or D // H
    K = c.get("num_key_value_heads", H)

    def normal(name, shape, std=0.2, mean=0.0):
        t[name] = (mean + std * rng.standard_normal(shape)).astype(np.float32)

    gain_mean = 0.0 if mt in ("gemma", "gemma2") else 1.0  # Gemma stores w of (1 + w)
    if mt == "gpt2":  # Conv1D weights [in, out]
        normal("transformer.wte.weight", (VOCAB, D), 0.5)
        normal("transformer.wpe.weight", (SEQ, D), 0.3)
        for i in range(LAYERS):
            pre = f"transformer.h.{i}."
            for n in ("ln_1", "ln_2"):
                normal(pre + n + ".weight", (D,), 0.1, 1.0)
                normal(pre + n + ".bias", (D,), 0.1)
            normal(pre + "attn.c_attn.weight", (D, 3 * D))
            normal(pre + "attn.c_attn.bias", (3 * D,), 0.1)
            normal(pre + "attn.c_proj.weight", (D, D))
            normal(pre + "attn.c_proj.bias", (D,), 0.1)
            normal(pre + "mlp.c_fc.weight", (D, 4 * D))
            normal(pre + "mlp.c_fc.bias", (4 * D,), 0.1)
            normal(pre + "mlp.c_proj.weight", (4 * D, D))
            normal(pre + "mlp.c_proj.bias", (D,), 0.1)
        normal("transformer.ln_f.weight", (D,), 0.1, 1.0)
        normal("transformer.ln_f.bias", (D,), 0.1)
        return t
    if mt in ("gpt_neox", "falcon"):
        neox = mt == "gpt_neox"
        normal("gpt_neox.embed_in.weight" if neox else "transformer.word_embeddings.weight", (VOCAB, D), 0.5)
        for i in range(LAYERS):
            pre = f"gpt_neox.layers.{i}." if neox else f"transformer.h.{i}."
            att = "attention." if neox else "self_attention."
            rows = 3 * D if neox or not c["multi_query"] else (H + 2) * dh
            normal(pre + att + "query_key_value.weight", (rows, D))
            normal(pre + att + "dense.weight", (D, D))
            normal(pre + "mlp.dense_h_to_4h.weight", (FF if neox else 4 * D, D))
            normal(pre + "mlp.dense_4h_to_h.weight", (D, FF if neox else 4 * D))
            if neox or c.get("bias"):
                normal(pre + att + "query_key_value.bias", (rows,), 0.1)
                normal(pre + att + "dense.bias", (D,), 0.1)
                normal(pre + "mlp.dense_h_to_4h.bias", (FF if neox else 4 * D,), 0.1)
                normal(pre + "mlp.dense_4h_to_h.bias", (D,), 0.1)
            for n in ("input_layernorm", "post_attention_layernorm") if neox else ("input_layernorm",):
                normal(pre + n + ".weight", (D,), 0.1, 1.0)
                normal(pre + n + ".bias", (D,), 0.1)
        fin = "gpt_neox.final_layer_norm" if neox else "transformer.ln_f"
        normal(fin + ".weight", (D,), 0.1, 1.0)
        normal(fin + ".bias", (D,), 0.1)
        if neox:
            normal("embed_out.weight", (VOCAB, D), 0.3)
        return t
    normal("model.embed_tokens.weight", (VOCAB, D), 0.5 if mt not in ("gemma", "gemma2") else 0.1)
    for i in range(LAYERS):
        pre = f"model.layers.{i}."
        if mt == "phi3":
            normal(pre + "self_attn.qkv_proj.weight", ((H + 2 * K) * dh, D))
            normal(pre + "mlp.gate_up_proj.weight", (2 * FF, D))
        else:
            normal(pre + "self_attn.q_proj.weight", (H * dh, D))
            normal(pre + "self_attn.k_proj.weight", (K * dh, D))
            normal(pre + "self_attn.v_proj.weight", (K * dh, D))
            normal(pre + "mlp.gate_proj.weight", (FF, D))
            normal(pre + "mlp.up_proj.weight", (FF, D))
        if mt == "qwen2" or mt == "olmo":
            for n, rows in (("q", H * dh), ("k", K * dh), ("v", K * dh)):
                normal(pre + f"self_attn.{n}_proj.bias", (rows,), 0.1)
        if mt == "olmo":
            normal(pre + "self_attn.o_proj.bias", (D,), 0.1)
        if mt == "olmo2":
            normal(pre + "self_attn.q_norm.weight", (H * dh,), 0.1, 1.0)
            normal(pre + "self_attn.k_norm.weight", (K * dh,), 0.1, 1.0)
        normal(pre + "self_attn.o_proj.weight", (D, H * dh))
        normal(pre + "mlp.down_proj.weight", (D, FF))
        norms = {"gemma2": ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                            "post_feedforward_layernorm"),
                 "olmo2": ("post_attention_layernorm", "post_feedforward_layernorm"), "olmo": ()}
        for n in norms.get(mt, ("input_layernorm", "post_attention_layernorm")):
            normal(pre + n + ".weight", (D,), 0.1, gain_mean)
    if mt != "olmo":
        normal("model.norm.weight", (D,), 0.1, gain_mean)
    if not c["tie_word_embeddings"]:
        normal("lm_head.weight", (VOCAB, D), 0.3)
    return t


def main():
    name, out = sys.argv[1], sys.argv[2]
    c = config_of(name)
    mt = c["model_type"]
    rng = np.random.default_rng(sum(map(ord, name)))
    t = weights(c, rng)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if mt == "gpt_neox":  # two shards and their index, with a buffer that is not a parameter
        t["gpt_neox.layers.0.attention.rotary_emb.inv_freq"] = np.ones(2, dtype=np.float32)
        names = list(t)
        shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
                  "model-00002-of-00002.safetensors": names[len(names) // 2 :]}
        weight_map = {}
        for shard, ns in shards.items():
            write_safetensors(os.path.join(out, shard), {n: t[n] for n in ns})
            weight_map.update({n: shard for n in ns})
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
        del t["gpt_neox.layers.0.attention.rotary_emb.inv_freq"]
    elif mt == "gpt2":  # with the attention-mask buffers GPT-2 checkpoints carry
        buffers = {}
        for i in range(LAYERS):
            buffers[f"transformer.h.{i}.attn.bias"] = np.tril(np.ones((1, 1, SEQ, SEQ), dtype=np.float32))
            buffers[f"transformer.h.{i}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
        stored = dict(t, **buffers)
        if name == "gpt2_hub":  # saved from GPT2Model: no "transformer." prefix
            stored = {k[len("transformer."):]: v for k, v in stored.items()}
        write_safetensors(os.path.join(out, "model.safetensors"), stored)
    else:
        write_safetensors(os.path.join(out, "model.safetensors"), t)

    n_tokens = 2 * SEQ + 6  # two full windows and a partial one of 5 positions
    tokens = rng.integers(0, VOCAB, n_tokens)
    tokens.astype("<u2").tofile(os.path.join(out, "tokens.bin"))
    p = {k: v.astype(np.float64) for k, v in t.items()}
    logits, nll = [], []
    positions = n_tokens - 1
    window = WINDOW.get(name, SEQ)
    for s in range(0, positions, window):
        ids = tokens[s : min(s + window, positions)]
        lg = forward(c, p, ids)
        logits.append(lg)
        z = lg.max(axis=-1) + np.log(np.exp(lg - lg.max(axis=-1, keepdims=True)).sum(axis=-1))
        nll.extend(z - lg[np.arange(len(ids)), tokens[s + 1 : s + 1 + len(ids)]])
    np.save(os.path.join(out, "logits.npy"), np.concatenate(logits))
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write(repr(float(np.mean(nll))))
    if CLIPPED[1] > 0:
        with open(os.path.join(out, "clipped.txt"), "w") as f:
            f.write(repr(CLIPPED[0] / CLIPPED[1]))


if __name__ == "__main__":
    main()
