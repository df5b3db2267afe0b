#include "experiment/hf_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "experiment/hf_reader.h"
#include "experiment/toml_reader.h"

namespace bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace hf {

/// The Llama family: llama, mistral, qwen2, gemma, gemma2, olmo, olmo2, phi3.
void llama_like(Reader& r, const std::string& type, Value& m) {
  const bool gemma2 = type == "gemma2", gemma = gemma2 || type == "gemma";
  const bool olmo2 = type == "olmo2", olmo = type == "olmo";
  const bool qwen = type == "qwen2", phi = type == "phi3", mistral = type == "mistral";
  m["d_model"] = r.at("hidden_size", Value::integer(r.required("hidden_size")));
  m["n_layers"] = r.at("num_hidden_layers", Value::integer(r.required("num_hidden_layers")));
  const int64_t heads = r.required("num_attention_heads");
  m["n_heads"] = r.at("num_attention_heads", Value::integer(heads));
  // num_key_value_heads null: the classes take num_attention_heads, as for absent.
  m["n_kv_heads"] = r.at("num_key_value_heads", Value::integer(r.integer("num_key_value_heads", heads)));
  if (gemma) {
    // GemmaConfig and Gemma2Config default head_dim to 256; null is hidden_size / heads (the
    // others' rule: transformers' Gemma would fail on None).
    if (!r.is_null("head_dim")) m["d_head"] = r.at("head_dim", Value::integer(r.integer("head_dim", 256)));
  } else if (!olmo && r.has("head_dim")) {  // absent or null: hidden_size / heads; OLMo has no head_dim
    m["d_head"] = r.at("head_dim", Value::integer(r.integer("head_dim", 0)));
  }
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.required("vocab_size")));
  m["seq_len"] = r.at("max_position_embeddings", Value::integer(r.integer("max_position_embeddings", 2048)));
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", gemma)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attention_dropout", Value::number(r.number("attention_dropout", 0.0)));
  if (phi) {
    m["dropout_embedding"] = r.at("embd_pdrop", Value::number(r.number("embd_pdrop", 0.0)));
    m["dropout_residual"] = r.at("resid_pdrop", Value::number(r.number("resid_pdrop", 0.0)));
  }

  if (olmo) {
    // OLMo 1's OlmoLayerNorm: LayerNorm without weight or bias, eps fixed at 1e-5 (no field).
    Value norm = Value::table({}, r.loc("model_type"));
    norm["type"] = Value::string("layernorm");
    norm["eps"] = Value::number(1e-5);
    norm["weight"] = Value::boolean(false);
    norm["bias"] = Value::boolean(false);
    m["norm"] = norm;
  } else {
    const double default_eps = (olmo2 || phi) ? 1e-5 : 1e-6;
    Value norm = Value::table({}, r.loc("rms_norm_eps"));
    norm["type"] = Value::string("rmsnorm");
    norm["eps"] = r.at("rms_norm_eps", Value::number(r.number("rms_norm_eps", default_eps)));
    if (gemma) norm["unit_offset"] = Value::boolean(true);  // Gemma's RMSNorm multiplies by (1 + w)
    m["norm"] = norm;
  }
  m["norm_position"] = Value::string(gemma2 ? "double" : olmo2 ? "output" : "pre");
  m["block"] = Value::string("serial");

  m["position"] = rope_table(r, 10000.0, "rope_theta", "partial_rotary_factor");
  if (phi && !r.has("rope_scaling")) r.integer("original_max_position_embeddings", 0);  // read by longrope only

  Value attn = Value::table({}, r.loc("num_attention_heads"));
  attn["type"] = Value::string("causal");
  if (qwen) {
    attn["bias"] = Value::string("qkv");  // Qwen2 always has q, k, v biases
  } else if (r.boolean("attention_bias", false)) {
    attn["bias"] = r.at("attention_bias", Value::string("all"));
  }
  if (olmo2) {
    attn["qk_norm"] = Value::string("rmsnorm");
    attn["qk_norm_scope"] = Value::string("full");
    attn["qk_norm_eps"] = m["norm"]["eps"];
  }
  if (olmo && r.has("clip_qkv")) {  // null or absent (OlmoConfig's default): no clipping
    const double clip = r.number("clip_qkv", 0.0);
    if (clip > 0)
      attn["clip_qkv"] = r.at("clip_qkv", Value::number(clip));
    else if (r.take("clip_qkv")->is_number())  // another type: r.number has said so
      r.fail("clip_qkv", "field 'clip_qkv' = " + r.take("clip_qkv")->dump() + " must be > 0 (or null: no clipping)");
  }
  if (qwen) {
    // Qwen2's window applies to the layers from max_window_layers on, and only when enabled.
    if (r.boolean("use_sliding_window", false))
      r.fail("use_sliding_window", "field 'use_sliding_window' = true is not supported (a window on some layers only)");
    r.take("sliding_window");
    r.take("max_window_layers");
    r.expect("use_mrope", false, "multimodal rotary");
  } else if (!olmo && type != "gemma") {
    // sliding_window null is no window. Absent is the class's default: 4096 for Mistral and
    // Gemma 2, none for Phi-3 (and Llama and OLMo 2, which have no such field).
    const int64_t default_window = mistral || gemma2 ? 4096 : 0;
    const int64_t window = r.is_null("sliding_window") ? 0 : r.integer("sliding_window", default_window);
    if (window > 0) {
      attn["window"] = r.at("sliding_window", Value::integer(window));
      if (gemma2) attn["pattern"] = Value::string("LG");  // Gemma 2: even layers local, odd layers global
    }
  }
  if (gemma2) {
    // A null soft-cap is none (transformers tests `is not None`); absent is Gemma2Config's 50.
    if (!r.is_null("attn_logit_softcapping"))
      attn["softcap"] = r.at("attn_logit_softcapping", Value::number(r.number("attn_logit_softcapping", 50.0)));
    attn["query_pre_attn_scalar"] =
        r.at("query_pre_attn_scalar", Value::number(r.number("query_pre_attn_scalar", 256)));
  }
  m["attention"] = attn;

  Value ffn = Value::table({}, r.loc("intermediate_size"));
  ffn["d_ff"] = r.at("intermediate_size", Value::integer(r.required("intermediate_size")));
  if (gemma) {
    // Gemma's MLP reads hidden_activation, gelu_pytorch_tanh when null or absent; transformers
    // ignores hidden_act (Gemma 1 configs still say "gelu" there).
    r.take("hidden_act");
    const std::string act = activation(r, "hidden_activation", "gelu_pytorch_tanh");
    if (act != "gelu" && act != "gelu_tanh")
      r.fail("hidden_activation", "field 'hidden_activation' must be a GeLU for Gemma's GeGLU");
    ffn["type"] = Value::string("geglu");
    ffn["activation"] = r.at("hidden_activation", Value::string(act));
  } else {
    const std::string act = activation(r, "hidden_act", "silu");
    if (act != "silu") r.fail("hidden_act", "field 'hidden_act' = \"" + act + "\" is not supported (SwiGLU: silu)");
    ffn["type"] = Value::string("swiglu");
  }
  if (r.boolean("mlp_bias", false)) ffn["bias"] = r.at("mlp_bias", Value::boolean(true));
  m["ffn"] = ffn;

  if (gemma) {
    Value emb = Value::table();
    emb["type"] = Value::string("token");
    emb["scale"] = Value::string("sqrt_d_model");  // Gemma's normalizer
    m["embedding"] = emb;
  }
  if (gemma2 && !r.is_null("final_logit_softcapping")) {  // null: none; absent: Gemma2Config's 30
    Value head = Value::table();
    head["type"] = Value::string("lm_head");
    head["softcap"] = r.at("final_logit_softcapping", Value::number(r.number("final_logit_softcapping", 30.0)));
    m["head"] = head;
  }
  m["weight_names"] = Value::string(olmo2 ? "olmo2" : phi ? "phi3" : "llama");
}

}  // namespace hf

bool is_hf_config(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(fs::path(path) / "config.json", ec);
  return fs::path(path).extension() == ".json";
}

std::string hf_config_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return (fs::path(path) / "config.json").string();
  return path;
}

Value read_hf_config(const std::string& path) {
  const std::string file = hf_config_file(path);
  std::string text = read_text_file(file);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(SourceLoc{file, 0, 0, {}}, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ConfigError(SourceLoc{file, 0, 0, {}}, "a Hugging Face config.json must be an object");
  hf::Reader r(file, std::move(text), std::move(j));
  const std::string type = r.string("model_type", "");
  r.set_model_type(type);
  Value m = Value::table({}, SourceLoc{file, 1, 1, {}});
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "gemma" || type == "gemma2" ||
      type == "olmo" || type == "olmo2" || type == "phi3") {
    hf::llama_like(r, type, m);
  } else if (type == "gpt2") {
    hf::gpt2(r, m);
  } else if (type == "gpt_neox") {
    hf::gpt_neox(r, m);
  } else if (type == "falcon") {
    hf::falcon(r, m);
  } else {
    throw ConfigError(r.loc("model_type"), "model_type '" + type +
                                               "' is not supported (llama, mistral, qwen2, gemma, gemma2, olmo, "
                                               "olmo2, phi3, gpt2, gpt_neox, falcon are)");
  }
  r.finish();
  return m;
}

}  // namespace bench
