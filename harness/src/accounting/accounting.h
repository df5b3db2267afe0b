// defines: bench::accounting — parameters, FLOPs per token, KV-cache bytes and shape ratios of a
// transformer without running it: Architecture (a model's shape and the details that change its
// parameter count), Accounts, account(), the built-in table of real models (real_models,
// find_model), and the accounts of an experiment's cases built from their components (config_accounts)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench::accounting {

/// Normalization layers: LayerNorm has a gain and a bias per feature, RMSNorm a gain only.
enum class NormKind { kLayerNorm, kRmsNorm };

/// The shape of a transformer and every detail that changes its parameter count. Decoder-only
/// unless n_encoder_layers > 0 (T5: an encoder stack of n_encoder_layers and a decoder stack of
/// n_layers, whose layers add cross-attention and a third norm).
struct Architecture {
  std::string name;
  int64_t n_layers = 0;  ///< decoder layers
  int64_t n_encoder_layers = 0;
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t d_head = 0;
  int64_t d_ff = 0;
  int64_t vocab_size = 0;  ///< rows of the embedding matrix as stored in the checkpoint
  std::string ffn;         ///< activation of the FFN: GELU, ReLU, SwiGLU, GeGLU
  bool gated_ffn = false;  ///< three matrices (gate, up, down) instead of two
  NormKind norm = NormKind::kRmsNorm;
  int64_t norms_per_layer = 2;    ///< Gemma 2: 4 (before and after each sublayer)
  bool final_norm = true;         ///< one more norm after the last layer (per stack)
  bool qkv_bias = false;          ///< biases on the q, k and v projections (GPT-2/3, Qwen2.5)
  bool out_bias = false;          ///< bias on the attention output projection (GPT-2/3)
  bool ffn_bias = false;          ///< biases on both FFN matrices (GPT-2/3)
  bool qk_norm = false;           ///< RMSNorm gains over the full q and k projections (OLMo 2)
  bool tied_embeddings = false;   ///< the LM head reuses the token embedding matrix
  int64_t learned_positions = 0;  ///< rows of a learned absolute position table (GPT-2: 1024)
  int64_t relative_buckets = 0;   ///< T5: a learned bias per (bucket, head), one table per stack
  int64_t context = 0;            ///< context length the model was trained at
  int64_t sliding_window = 0;     ///< window of the local-attention layers; 0 = none
  int64_t local_layers = 0;       ///< layers that attend within sliding_window (Gemma 2: every other)
  int64_t published_params = 0;   ///< the count its authors or checkpoint report; 0 = unknown
  std::string published_source;   ///< where published_params comes from
  std::string note;               ///< what makes the count differ, or a caveat
};

/// The accounts of a model at a context length and batch size. FLOP convention (docs/calc.md):
/// forward = 2 N + 2 L T d_attn and training = 6 N + 6 L T d_attn per token, where N counts every
/// parameter used in a matrix product per token (all non-embedding parameters plus the output
/// projection, also when it is tied to the embedding), L the attention layers, T the context and
/// d_attn = n_heads * d_head: QK^T and AV at 2 FLOPs per multiply-add over the seq/2 keys a causal
/// query sees on average; backward = 2 x forward.
struct Accounts {
  int64_t params = 0;                  ///< every trainable parameter, a tied matrix once
  int64_t params_embedding = 0;        ///< token embedding and learned absolute positions
  int64_t params_non_embedding = 0;    ///< params - params_embedding (includes an untied LM head)
  int64_t params_attention_layer = 0;  ///< attention parameters of one (decoder) layer
  int64_t params_ffn_layer = 0;        ///< FFN parameters of one (decoder) layer
  double n_matmul = 0;                 ///< N of the FLOP convention
  double flops_forward_per_token = 0;
  double flops_train_per_token = 0;
  double flops_attention_train_per_token = 0;  ///< the 6 L T d_attn part of flops_train_per_token
  double kv_bytes_per_token = 0;               ///< 2 * n_layers * n_kv_heads * d_head * bytes_per_element
  double kv_bytes_per_token_mha = 0;           ///< the same with n_kv_heads = n_heads (what MHA would need)
  double kv_bytes_total = 0;                   ///< the cache at `context` tokens x `batch` sequences (windows applied)
  int64_t context = 0;
  int64_t batch = 0;
  double bytes_per_element = 0;
  double ffn_ratio = 0;          ///< d_ff / d_model
  double aspect_ratio = 0;       ///< d_model / n_layers
  double head_ratio = 0;         ///< n_heads * d_head / d_model
  double query_per_kv_head = 0;  ///< n_heads / n_kv_heads (GQA group size)
};

/// Accounts of `a` at `context` tokens (0: a.context) and `batch` sequences, KV cache elements of
/// `bytes_per_element` bytes (bf16: 2).
Accounts account(const Architecture& a, int64_t context, int64_t batch, double bytes_per_element);

/// Parameters of `a` counted from its layers: the sum of every weight, bias and norm gain.
int64_t count_params(const Architecture& a);

/// The real models of the lecture's table (CS336 lecture 3), in its order.
const std::vector<Architecture>& real_models();

/// A real model by name, ignoring case, spaces, dots and dashes ("llama-2-70b", "Llama 2 70B");
/// nullptr when unknown.
const Architecture* find_model(std::string_view name);

/// Bytes per element of a KV-cache dtype name: fp32 4, bf16 and fp16 2, fp8 and int8 1.
std::optional<double> dtype_bytes(std::string_view name);

/// One distinct model of an experiment, counted from its own components (Model built with
/// plan_only), with the analytic accounts of its shape alongside.
struct ConfigAccounts {
  std::string label;              ///< the cases' label without the runner-only axes (lr ...)
  std::string variant;            ///< the experiment's variant name
  std::vector<int64_t> ordinals;  ///< the cases that build this model
  int64_t seq_len = 0, batch_size = 0;
  Architecture shape;  ///< dimensions as configured; d_ff read from the FFN's parameters (0 = unknown)
  Accounts accounts;   ///< params from the model; FLOPs by the 6N convention; KV from the shape
  double flops_declared_forward_per_token = 0;  ///< what the components declare (Component::cost)
  double flops_declared_train_per_token = 0;    ///< forward + backward, declared
};

/// Accounts of each distinct model of the experiment file `path` (plugins loaded as `bench run`
/// would, [cpu] overrides applied when `device` is "cpu"); a file with only a [model] (no runner
/// section) is its one model. context 0: each case's seq_len; batch 0: each case's batch_size.
/// Nothing is allocated (plan-only builds), so a model of any size is counted. Throws ConfigError
/// / Error.
std::vector<ConfigAccounts> config_accounts(const std::string& path, const std::string& device, int64_t context,
                                            int64_t batch, double bytes_per_element);

}  // namespace bench::accounting
