// account(), count_params(): the arithmetic of docs/calc.md, layer by layer.
#include "accounting/accounting.h"

#include <algorithm>
#include <cctype>

namespace bench::accounting {

namespace {

int64_t norm_params(const Architecture& a) { return a.norm == NormKind::kLayerNorm ? 2 * a.d_model : a.d_model; }

/// q, k, v and output projections (with their biases) of one attention sublayer; `kv_heads` is
/// the number of k/v heads (cross-attention and MHA: n_heads).
int64_t attention_params(const Architecture& a, int64_t kv_heads) {
  const int64_t q = a.n_heads * a.d_head;
  const int64_t kv = kv_heads * a.d_head;
  int64_t n = a.d_model * (q + 2 * kv) + q * a.d_model;
  if (a.qkv_bias) n += q + 2 * kv;
  if (a.out_bias) n += a.d_model;
  if (a.qk_norm) n += q + kv;
  return n;
}

int64_t ffn_params(const Architecture& a) {
  int64_t n = (a.gated_ffn ? 3 : 2) * a.d_model * a.d_ff;
  if (a.ffn_bias) n += a.d_ff * (a.gated_ffn ? 2 : 1) + a.d_model;
  return n;
}

int64_t embedding_params(const Architecture& a) { return a.vocab_size * a.d_model + a.learned_positions * a.d_model; }

}  // namespace

int64_t count_params(const Architecture& a) {
  const int64_t attn = attention_params(a, a.n_kv_heads);
  const int64_t ffn = ffn_params(a);
  const int64_t norm = norm_params(a);
  int64_t n = embedding_params(a);
  if (!a.tied_embeddings) n += a.vocab_size * a.d_model;
  // Decoder layers: self-attention and FFN; in an encoder-decoder also cross-attention and its norm.
  const bool enc_dec = a.n_encoder_layers > 0;
  const int64_t decoder_layer =
      attn + ffn + a.norms_per_layer * norm + (enc_dec ? attention_params(a, a.n_heads) + norm : 0);
  n += a.n_layers * decoder_layer;
  if (a.final_norm) n += norm;
  if (enc_dec) {
    n += a.n_encoder_layers * (attention_params(a, a.n_heads) + ffn + a.norms_per_layer * norm);
    if (a.final_norm) n += norm;
  }
  // Relative position biases: one table of buckets x heads per stack (T5 shares it across layers).
  n += a.relative_buckets * a.n_heads * (enc_dec ? 2 : 1);
  return n;
}

Accounts account(const Architecture& a, int64_t context, int64_t batch, double bytes_per_element) {
  Accounts r;
  r.context = context > 0 ? context : a.context;
  r.batch = batch > 0 ? batch : 1;
  r.bytes_per_element = bytes_per_element;
  r.params = count_params(a);
  r.params_embedding = embedding_params(a);
  r.params_non_embedding = r.params - r.params_embedding;
  r.params_attention_layer = attention_params(a, a.n_kv_heads);
  r.params_ffn_layer = ffn_params(a);

  // N: parameters in a matrix product per token. The embedding lookup costs nothing; the output
  // projection costs 2 V d whether or not it shares the embedding's matrix.
  r.n_matmul = static_cast<double>(r.params_non_embedding) +
               (a.tied_embeddings ? static_cast<double>(a.vocab_size * a.d_model) : 0.0);
  const double d_attn = static_cast<double>(a.n_heads * a.d_head);
  // Attention layers in causal-self-attention units: a decoder layer's self-attention is one; an
  // encoder's bidirectional self-attention and a decoder's cross-attention see all T keys, two.
  const double attention_layers = static_cast<double>(a.n_layers) + 2.0 * static_cast<double>(a.n_encoder_layers) +
                                  (a.n_encoder_layers > 0 ? 2.0 * static_cast<double>(a.n_layers) : 0.0);
  const double t = static_cast<double>(r.context);
  r.flops_forward_per_token = 2 * r.n_matmul + 2 * attention_layers * t * d_attn;
  r.flops_attention_train_per_token = 6 * attention_layers * t * d_attn;
  r.flops_train_per_token = 6 * r.n_matmul + r.flops_attention_train_per_token;

  // KV cache: k and v of every (decoder) layer, n_kv_heads x d_head each.
  const double per_layer = 2.0 * static_cast<double>(a.n_kv_heads * a.d_head) * bytes_per_element;
  const double per_layer_mha = 2.0 * static_cast<double>(a.n_heads * a.d_head) * bytes_per_element;
  r.kv_bytes_per_token = static_cast<double>(a.n_layers) * per_layer;
  r.kv_bytes_per_token_mha = static_cast<double>(a.n_layers) * per_layer_mha;
  const int64_t local = a.sliding_window > 0 ? std::min(a.local_layers, a.n_layers) : 0;
  const double local_tokens = static_cast<double>(a.sliding_window > 0 ? std::min(r.context, a.sliding_window) : 0);
  r.kv_bytes_total = static_cast<double>(r.batch) * per_layer *
                     (static_cast<double>(a.n_layers - local) * t + static_cast<double>(local) * local_tokens);

  const auto ratio = [](int64_t x, int64_t y) { return y > 0 ? static_cast<double>(x) / static_cast<double>(y) : 0.0; };
  r.ffn_ratio = ratio(a.d_ff, a.d_model);
  r.aspect_ratio = ratio(a.d_model, a.n_layers);
  r.head_ratio = ratio(a.n_heads * a.d_head, a.d_model);
  r.query_per_kv_head = ratio(a.n_heads, a.n_kv_heads);
  return r;
}

std::optional<double> dtype_bytes(std::string_view name) {
  if (name == "fp32" || name == "float32") return 4.0;
  if (name == "bf16" || name == "fp16" || name == "float16" || name == "bfloat16") return 2.0;
  if (name == "fp8" || name == "int8") return 1.0;
  return std::nullopt;
}

const Architecture* find_model(std::string_view name) {
  const auto key = [](std::string_view s) {
    std::string k;
    for (char c : s)
      if (std::isalnum(static_cast<unsigned char>(c)) != 0)
        k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return k;
  };
  const std::string wanted = key(name);
  for (const Architecture& a : real_models())
    if (key(a.name) == wanted) return &a;
  return nullptr;
}

}  // namespace bench::accounting
