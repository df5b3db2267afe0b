// The built-in table of real models: the dimensions of the lecture's table (CS336 lecture 3,
// "real model configurations"), plus the details its table leaves out that change a parameter
// count (biases, tied embeddings, norms, learned or relative positions, padded vocabularies).
// docs/calc.md says how close each count comes to the published one, and why.
#include "accounting/accounting.h"

namespace bench::accounting {

namespace {

/// GPT-2's layout: d_head = d_model / heads, d_ff = 4 d_model, GELU, LayerNorm, biases everywhere,
/// a tied LM head and a learned position table as long as the context.
Architecture gpt2_layout(const char* name, int64_t layers, int64_t d_model, int64_t heads, int64_t context,
                         int64_t published, const char* source, const char* note) {
  Architecture a;
  a.name = name;
  a.n_layers = layers, a.d_model = d_model, a.n_heads = heads, a.n_kv_heads = heads, a.d_head = d_model / heads;
  a.d_ff = 4 * d_model, a.vocab_size = 50257, a.ffn = "GELU", a.norm = NormKind::kLayerNorm;
  a.qkv_bias = a.out_bias = a.ffn_bias = true, a.tied_embeddings = true;
  a.learned_positions = context, a.context = context;
  a.published_params = published, a.published_source = source, a.note = note;
  return a;
}

Architecture t5_11b() {
  Architecture a;
  a.name = "T5 11B";
  a.n_layers = 24, a.n_encoder_layers = 24, a.d_model = 1024, a.n_heads = 128, a.n_kv_heads = 128, a.d_head = 128;
  a.d_ff = 65536, a.vocab_size = 32128, a.ffn = "ReLU", a.norm = NormKind::kRmsNorm;
  a.tied_embeddings = true, a.relative_buckets = 32, a.context = 512;
  a.published_params = 11307321344;
  a.published_source = "Hugging Face t5-11b, num_parameters() (the paper says \"11 billion\")";
  a.note =
      "encoder-decoder: 24 encoder + 24 decoder layers, decoder layers add cross-attention; relative "
      "position bias (32 buckets x 128 heads) per stack; scale-only LayerNorm; no biases; KV per token is the "
      "decoder's self-attention (cross-attention caches as much per source token)";
  return a;
}

Architecture llama(const char* name, int64_t layers, int64_t d_model, int64_t heads, int64_t kv_heads, int64_t d_ff,
                   int64_t vocab, int64_t context, int64_t published, const char* source, const char* note) {
  Architecture a;
  a.name = name;
  a.n_layers = layers, a.d_model = d_model, a.n_heads = heads, a.n_kv_heads = kv_heads, a.d_head = 128;
  a.d_ff = d_ff, a.vocab_size = vocab, a.ffn = "SwiGLU", a.gated_ffn = true, a.norm = NormKind::kRmsNorm;
  a.context = context, a.published_params = published, a.published_source = source, a.note = note;
  return a;
}

Architecture qwen25_7b() {
  Architecture a = llama("Qwen2.5 7B", 28, 3584, 28, 4, 18944, 152064, 32768, 7615616512,
                         "Hugging Face Qwen/Qwen2.5-7B, safetensors total",
                         "Llama layout plus biases on q, k and v (not on the output projection); untied LM head");
  a.qkv_bias = true;
  return a;
}

Architecture gemma2_9b() {
  Architecture a = llama("Gemma 2 9B", 42, 3584, 16, 8, 14336, 256000, 8192, 9241705984,
                         "Hugging Face google/gemma-2-9b, safetensors total",
                         "GeGLU; four RMSNorms per layer (before and after each sublayer); tied embeddings; "
                         "d_head 256 so n_heads * d_head = 4096 > d_model; local (4096-token window) and global "
                         "layers alternate");
  a.d_head = 256, a.ffn = "GeGLU", a.norms_per_layer = 4, a.tied_embeddings = true;
  a.sliding_window = 4096, a.local_layers = 21;
  return a;
}

Architecture olmo2_7b() {
  Architecture a = llama("OLMo 2 7B", 32, 4096, 32, 32, 11008, 100352, 4096, 7298617344,
                         "Hugging Face allenai/OLMo-2-1124-7B, safetensors total",
                         "Llama layout with the norms on the sublayer outputs and QK-norm (RMSNorm gains over the "
                         "full q and k, 4096 each); embedding padded to 100,352 rows (the tokenizer has 100,278)");
  a.qk_norm = true;
  return a;
}

}  // namespace

const std::vector<Architecture>& real_models() {
  static const std::vector<Architecture> models = {
      gpt2_layout("GPT-2 XL", 48, 1600, 25, 1024, 1557611200,
                  "Hugging Face gpt2-xl (OpenAI's checkpoint), num_parameters()",
                  "biases everywhere, LayerNorm, tied LM head, learned positions (1024 x 1600)"),
      gpt2_layout("GPT-3 175B", 96, 12288, 96, 2048, 175000000000,
                  "Brown et al. 2020, Table 2.1 (\"175.0B\", rounded; no checkpoint released)",
                  "GPT-2's architecture at scale (alternating dense and banded sparse attention: no extra "
                  "parameters)"),
      t5_11b(),
      llama("Llama 2 7B", 32, 4096, 32, 32, 11008, 32000, 4096, 6738415616,
            "Hugging Face meta-llama/Llama-2-7b-hf, num_parameters()",
            "RMSNorm, SwiGLU, RoPE, untied LM head, no biases"),
      llama("Llama 2 70B", 80, 8192, 64, 8, 28672, 32000, 4096, 68976648192,
            "Hugging Face meta-llama/Llama-2-70b-hf, num_parameters() (its safetensors also store 5,120 RoPE "
            "inv_freq values)",
            "GQA with 8 KV heads"),
      llama("Mistral 7B", 32, 4096, 32, 8, 14336, 32000, 8192, 7241732096,
            "Hugging Face mistralai/Mistral-7B-v0.1, num_parameters()",
            "GQA with 8 KV heads; v0.1 attends within a 4096-token sliding window (a rolling KV buffer), not "
            "applied here"),
      llama("Llama 3 8B", 32, 4096, 32, 8, 14336, 128256, 8192, 8030261248,
            "Hugging Face meta-llama/Meta-Llama-3-8B, safetensors total", "GQA with 8 KV heads, vocabulary 128,256"),
      qwen25_7b(),
      gemma2_9b(),
      olmo2_7b(),
  };
  return models;
}

}  // namespace bench::accounting
