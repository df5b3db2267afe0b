#include "experiment/hf_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "experiment/diagnostics.h"
#include "experiment/toml_reader.h"

namespace bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// Fields that do not change what the model computes: token ids, the checkpoint's storage type,
/// generation and serving settings, bookkeeping of the Hugging Face libraries.
bool has_no_effect(const std::string& field) {
  static const std::set<std::string> fields = {
      "_name_or_path",      "architectures",  "auto_map",        "bos_token_id",
      "eos_token_id",       "pad_token_id",   "torch_dtype",     "transformers_version",
      "use_cache",          "model_type",     "tokenizer_class", "cache_implementation",
      "classifier_dropout", "pretraining_tp", "return_dict",     "is_decoder"};
  return fields.count(field) != 0;
}

/// Reads one config.json: each field is taken once; what is left at the end is unsupported.
class HfReader {
 public:
  HfReader(std::string file, std::string text, json j)
      : file_(std::move(file)), text_(std::move(text)), j_(std::move(j)) {}

  /// Where field `key` is written (its first occurrence as a key), for messages and locations.
  SourceLoc loc(const std::string& key) const {
    const std::string quoted = "\"" + key + "\"";
    for (size_t at = text_.find(quoted); at != std::string::npos; at = text_.find(quoted, at + 1)) {
      size_t after = at + quoted.size();
      while (after < text_.size() && std::isspace(static_cast<unsigned char>(text_[after]))) ++after;
      if (after >= text_.size() || text_[after] != ':') continue;
      const int line = 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + static_cast<long>(at), '\n'));
      const size_t bol = text_.rfind('\n', at);
      const int col = 1 + static_cast<int>(bol == std::string::npos ? at : at - bol - 1);
      return SourceLoc{file_, line, col, {}};
    }
    return SourceLoc{file_, 0, 0, key};
  }

  /// The field, marked as read; nullptr when absent or null (null means "the class's default").
  const json* take(const std::string& key) {
    used_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }

  void fail(const std::string& key, const std::string& msg) { errors_.emplace_back(loc(key), msg); }

  int64_t integer(const std::string& key, int64_t fallback) {
    const json* v = take(key);
    if (v == nullptr) return fallback;
    if (!v->is_number_integer()) {
      fail(key, "field '" + key + "' must be an integer, found " + v->dump());
      return fallback;
    }
    return v->get<int64_t>();
  }
  double number(const std::string& key, double fallback) {
    const json* v = take(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) {
      fail(key, "field '" + key + "' must be a number, found " + v->dump());
      return fallback;
    }
    return v->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) {
    const json* v = take(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) {
      fail(key, "field '" + key + "' must be true or false, found " + v->dump());
      return fallback;
    }
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) {
    const json* v = take(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) {
      fail(key, "field '" + key + "' must be a string, found " + v->dump());
      return fallback;
    }
    return v->get<std::string>();
  }
  int64_t required(const std::string& key) {
    if (!has(key)) fail(key, "field '" + key + "' is missing; " + model_type_ + " needs it");
    return integer(key, 1);
  }
  /// A field we read only to check that it keeps the value we implement.
  template <class T>
  void expect(const std::string& key, const T& value, const std::string& why) {
    const json* v = take(key);
    if (v != nullptr && *v != json(value))
      fail(key, "field '" + key + "' = " + v->dump() + " is not supported (" + why + ")");
  }

  /// Our value located at field `key`.
  Value at(const std::string& key, Value v) const {
    v.loc = loc(key);
    return v;
  }

  /// Every field not read is an error naming it.
  void finish() {
    for (const auto& [key, value] : j_.items())
      if (used_.count(key) == 0 && !has_no_effect(key))
        errors_.emplace_back(loc(key), "field '" + key + "' (" + value.dump() + ") of model_type '" + model_type_ +
                                           "' is not supported; remove it, or describe the model in TOML");
    if (errors_.empty()) return;
    std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
      return a.loc().line != b.loc().line ? a.loc().line < b.loc().line : a.loc().column < b.loc().column;
    });
    throw ConfigErrors(errors_);
  }

  void set_model_type(std::string type) { model_type_ = std::move(type); }

 private:
  std::string model_type_;
  std::string file_;
  std::string text_;
  json j_;
  std::set<std::string> used_;
  std::vector<ConfigError> errors_;
};

std::string activation(HfReader& r, const std::string& key, const std::string& fallback) {
  const std::string act = r.string(key, fallback);
  if (act == "gelu") return "gelu";
  if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_tanh") return "gelu_tanh";
  if (act == "silu" || act == "swish") return "silu";
  if (act == "relu") return "relu";
  r.fail(key, "field '" + key + "' = \"" + act +
                  "\" is not supported (gelu, gelu_pytorch_tanh, gelu_new, silu and relu are)");
  return "gelu";
}

/// rope_theta, rope_scaling and the partial-rotary fields -> the `rope` table.
Value rope_table(HfReader& r, double default_base, const std::string& base_key, const std::string& fraction_key) {
  Value rope = Value::table({}, r.loc(base_key));
  rope["type"] = Value::string("rope");
  rope["base"] = r.at(base_key, Value::number(r.number(base_key, default_base)));
  rope["layout"] = Value::string("half");  // Hugging Face's rotate_half
  if (r.has(fraction_key)) rope["rotary_fraction"] = r.at(fraction_key, Value::number(r.number(fraction_key, 1.0)));
  const json* s = r.take("rope_scaling");
  if (s == nullptr) return rope;
  if (!s->is_object()) {
    r.fail("rope_scaling", "field 'rope_scaling' must be an object or null");
    return rope;
  }
  std::set<std::string> read = {"rope_type", "type"};
  const auto num = [&](const char* key, const char* ours) {
    read.insert(key);
    if (!s->contains(key) || (*s)[key].is_null()) return;
    if (!(*s)[key].is_number()) {
      r.fail("rope_scaling", std::string("rope_scaling.") + key + " must be a number");
      return;
    }
    rope[ours] = r.at("rope_scaling", Value::number((*s)[key].get<double>()));
  };
  const auto factors = [&](const char* key, const char* ours) {
    read.insert(key);
    if (!s->contains(key)) return;
    Value::Array a;
    for (const auto& e : (*s)[key]) {
      if (!e.is_number()) {
        r.fail("rope_scaling", std::string("rope_scaling.") + key + " must be a list of numbers");
        return;
      }
      a.push_back(Value::number(e.get<double>()));
    }
    rope[ours] = r.at("rope_scaling", Value::array(std::move(a)));
  };
  std::string type = "default";
  for (const char* key : {"type", "rope_type"}) {  // rope_type is the newer name and wins
    if (!s->contains(key) || (*s)[key].is_null()) continue;
    if ((*s)[key].is_string()) {
      type = (*s)[key].get<std::string>();
    } else {
      r.fail("rope_scaling", std::string("rope_scaling.") + key + " must be a string");
    }
  }
  if (type == "default") {
  } else if (type == "linear" || type == "dynamic" || type == "yarn" || type == "llama3") {
    rope["scaling"] = r.at("rope_scaling", Value::string(type == "dynamic" ? "dynamic_ntk" : type));
    if (type != "dynamic") rope["apply"] = Value::string("always");  // a static rope_scaling applies at every length
    num("factor", "factor");
    if (type == "yarn") num("beta_fast", "beta_fast"), num("beta_slow", "beta_slow");
    if (type == "llama3") num("low_freq_factor", "low_freq_factor"), num("high_freq_factor", "high_freq_factor");
    read.insert("original_max_position_embeddings");
    if (s->contains("original_max_position_embeddings")) {
      const json& orig = (*s)["original_max_position_embeddings"];
      if (orig.is_number_integer()) {
        rope["original_max_position"] = r.at("rope_scaling", Value::integer(orig.get<int64_t>()));
      } else {
        r.fail("rope_scaling", "rope_scaling.original_max_position_embeddings must be an integer");
      }
    }
  } else if (type == "longrope" || type == "su") {
    rope["scaling"] = r.at("rope_scaling", Value::string("longrope"));
    factors("long_factor", "long_factors");
    factors("short_factor", "short_factors");
    // Phi-3: s = max_position_embeddings / original_max_position_embeddings (a top-level field).
    const int64_t orig = r.integer("original_max_position_embeddings", 0);
    if (orig > 0) {
      rope["original_max_position"] = r.at("original_max_position_embeddings", Value::integer(orig));
      const int64_t max_pos = r.integer("max_position_embeddings", orig);
      rope["factor"] = Value::number(std::max(1.0, static_cast<double>(max_pos) / static_cast<double>(orig)));
    }
  } else {
    r.fail("rope_scaling", "rope_scaling type \"" + type +
                               "\" is not supported (default, linear, dynamic, yarn, llama3, longrope are)");
  }
  for (const auto& [key, v] : s->items())
    if (read.count(key) == 0)
      r.fail("rope_scaling", "field 'rope_scaling." + key + "' (" + v.dump() + ") is not supported");
  return rope;
}

/// The Llama family: llama, mistral, qwen2, gemma2, olmo2, phi3.
void llama_like(HfReader& r, const std::string& type, Value& m) {
  const bool gemma = type == "gemma2", olmo = type == "olmo2", qwen = type == "qwen2", phi = type == "phi3";
  m["d_model"] = r.at("hidden_size", Value::integer(r.required("hidden_size")));
  m["n_layers"] = r.at("num_hidden_layers", Value::integer(r.required("num_hidden_layers")));
  const int64_t heads = r.required("num_attention_heads");
  m["n_heads"] = r.at("num_attention_heads", Value::integer(heads));
  m["n_kv_heads"] = r.at("num_key_value_heads", Value::integer(r.integer("num_key_value_heads", heads)));
  if (r.has("head_dim")) m["d_head"] = r.at("head_dim", Value::integer(r.integer("head_dim", 0)));
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.required("vocab_size")));
  m["seq_len"] = r.at("max_position_embeddings", Value::integer(r.integer("max_position_embeddings", 2048)));
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", gemma)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attention_dropout", Value::number(r.number("attention_dropout", 0.0)));
  if (phi) {
    m["dropout_embedding"] = r.at("embd_pdrop", Value::number(r.number("embd_pdrop", 0.0)));
    m["dropout_residual"] = r.at("resid_pdrop", Value::number(r.number("resid_pdrop", 0.0)));
  }

  const double default_eps = (olmo || phi) ? 1e-5 : 1e-6;
  Value norm = Value::table({}, r.loc("rms_norm_eps"));
  norm["type"] = Value::string("rmsnorm");
  norm["eps"] = r.at("rms_norm_eps", Value::number(r.number("rms_norm_eps", default_eps)));
  if (gemma) norm["unit_offset"] = Value::boolean(true);  // Gemma's RMSNorm multiplies by (1 + w)
  m["norm_position"] = Value::string(gemma ? "double" : olmo ? "output" : "pre");
  m["norm"] = norm;
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
  if (olmo) {
    attn["qk_norm"] = Value::string("rmsnorm");
    attn["qk_norm_scope"] = Value::string("full");
    attn["qk_norm_eps"] = norm["eps"];
  }
  if (qwen) {
    // Qwen2's window applies to the layers from max_window_layers on, and only when enabled.
    if (r.boolean("use_sliding_window", false))
      r.fail("use_sliding_window", "field 'use_sliding_window' = true is not supported (a window on some layers only)");
    r.take("sliding_window");
    r.take("max_window_layers");
    r.expect("use_mrope", false, "multimodal rotary");
  } else if (r.has("sliding_window")) {
    attn["window"] = r.at("sliding_window", Value::integer(r.integer("sliding_window", 0)));
    if (gemma) attn["pattern"] = Value::string("LG");  // Gemma 2: even layers local, odd layers global
  }
  if (gemma) {
    if (r.has("attn_logit_softcapping"))
      attn["softcap"] = r.at("attn_logit_softcapping", Value::number(r.number("attn_logit_softcapping", 0)));
    attn["query_pre_attn_scalar"] =
        r.at("query_pre_attn_scalar", Value::number(r.number("query_pre_attn_scalar", 256)));
  }
  m["attention"] = attn;

  Value ffn = Value::table({}, r.loc("intermediate_size"));
  ffn["d_ff"] = r.at("intermediate_size", Value::integer(r.required("intermediate_size")));
  if (gemma) {
    // Gemma 2 reads hidden_activation (hidden_act is its legacy twin); both must agree.
    const std::string act = activation(r, "hidden_activation", "gelu_pytorch_tanh");
    if (r.has("hidden_act") && activation(r, "hidden_act", "gelu_pytorch_tanh") != act)
      r.fail("hidden_act", "fields 'hidden_act' and 'hidden_activation' disagree");
    r.take("hidden_act");
    if (act != "gelu" && act != "gelu_tanh")
      r.fail("hidden_activation", "field 'hidden_activation' must be a GeLU for Gemma 2's GeGLU");
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
    if (r.has("final_logit_softcapping")) {
      Value head = Value::table();
      head["type"] = Value::string("lm_head");
      head["softcap"] = r.at("final_logit_softcapping", Value::number(r.number("final_logit_softcapping", 0)));
      m["head"] = head;
    }
  }
  m["weight_names"] = Value::string(olmo ? "olmo2" : phi ? "phi3" : "llama");
}

void gpt_neox(HfReader& r, Value& m) {
  m["d_model"] = r.at("hidden_size", Value::integer(r.required("hidden_size")));
  m["n_layers"] = r.at("num_hidden_layers", Value::integer(r.required("num_hidden_layers")));
  m["n_heads"] = r.at("num_attention_heads", Value::integer(r.required("num_attention_heads")));
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.required("vocab_size")));
  m["seq_len"] = r.at("max_position_embeddings", Value::integer(r.integer("max_position_embeddings", 2048)));
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", false)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attention_dropout", Value::number(r.number("attention_dropout", 0.0)));
  m["dropout_residual"] = r.at("hidden_dropout", Value::number(r.number("hidden_dropout", 0.0)));
  Value norm = Value::table({}, r.loc("layer_norm_eps"));
  norm["type"] = Value::string("layernorm");
  norm["eps"] = r.at("layer_norm_eps", Value::number(r.number("layer_norm_eps", 1e-5)));
  m["norm"] = norm;
  m["norm_position"] = Value::string("pre");
  Value block = Value::table({}, r.loc("use_parallel_residual"));
  // use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)); else the serial pre-norm block.
  if (r.boolean("use_parallel_residual", true)) {
    block["type"] = Value::string("parallel");
    block["norms"] = Value::string("per_branch");
  } else {
    block["type"] = Value::string("serial");
  }
  m["block"] = block;
  const std::string fraction_key = r.has("partial_rotary_factor") ? "partial_rotary_factor" : "rotary_pct";
  if (fraction_key == "partial_rotary_factor") r.take("rotary_pct");
  const std::string base_key = r.has("rope_theta") ? "rope_theta" : "rotary_emb_base";
  if (base_key == "rope_theta") r.take("rotary_emb_base");
  Value rope = rope_table(r, 10000.0, base_key, fraction_key);
  if (!rope.find("rotary_fraction")) rope["rotary_fraction"] = Value::number(0.25);  // GPTNeoXConfig's default
  m["position"] = rope;
  Value attn = Value::table();
  attn["type"] = Value::string("causal");
  attn["bias"] = r.at("attention_bias", Value::string(r.boolean("attention_bias", true) ? "all" : "none"));
  m["attention"] = attn;
  Value ffn = Value::table({}, r.loc("intermediate_size"));
  ffn["type"] = Value::string("mlp");
  ffn["activation"] = r.at("hidden_act", Value::string(activation(r, "hidden_act", "gelu")));
  ffn["d_ff"] = r.at("intermediate_size", Value::integer(r.required("intermediate_size")));
  ffn["bias"] = Value::boolean(true);
  m["ffn"] = ffn;
  m["weight_names"] = Value::string("gpt_neox");
}

void falcon(HfReader& r, Value& m) {
  // The legacy RefinedWeb names (n_layer, n_head) are read as their new ones.
  const std::string layers_key = r.has("n_layer") ? "n_layer" : "num_hidden_layers";
  const std::string heads_key = r.has("n_head") ? "n_head" : "num_attention_heads";
  const int64_t d = r.required("hidden_size");
  m["d_model"] = r.at("hidden_size", Value::integer(d));
  m["n_layers"] = r.at(layers_key, Value::integer(r.required(layers_key)));
  const int64_t heads = r.required(heads_key);
  m["n_heads"] = r.at(heads_key, Value::integer(heads));
  r.expect("new_decoder_architecture", false, "Falcon 40B/180B's grouped layout and two norms per block");
  r.expect("alibi", false, "ALiBi positions");
  r.expect("apply_residual_connection_post_layernorm", false, "the residual taken after the norm");
  const bool mq = r.boolean("multi_query", true);
  const int64_t kv = r.integer("num_kv_heads", mq ? 1 : heads);
  if (mq && kv != 1) r.fail("num_kv_heads", "field 'num_kv_heads' must be 1 with multi_query");
  m["n_kv_heads"] = r.at(r.has("num_kv_heads") ? "num_kv_heads" : "multi_query", Value::integer(kv));
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.required("vocab_size")));
  m["seq_len"] = r.at("max_position_embeddings", Value::integer(r.integer("max_position_embeddings", 2048)));
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", true)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attention_dropout", Value::number(r.number("attention_dropout", 0.0)));
  m["dropout_residual"] = r.at("hidden_dropout", Value::number(r.number("hidden_dropout", 0.0)));
  Value norm = Value::table({}, r.loc("layer_norm_epsilon"));
  norm["type"] = Value::string("layernorm");
  norm["eps"] = r.at("layer_norm_epsilon", Value::number(r.number("layer_norm_epsilon", 1e-5)));
  m["norm"] = norm;
  m["norm_position"] = Value::string("pre");
  // parallel_attn: x + attn(ln(x)) + mlp(ln(x)) with one shared norm; else the serial block.
  m["block"] = r.at("parallel_attn", Value::string(r.boolean("parallel_attn", true) ? "parallel" : "serial"));
  if (r.has("num_ln_in_parallel_attn") && r.integer("num_ln_in_parallel_attn", 1) != 1)
    r.fail("num_ln_in_parallel_attn", "field 'num_ln_in_parallel_attn' must be 1 or null");
  m["position"] = rope_table(r, 10000.0, "rope_theta", "partial_rotary_factor");
  const bool bias = r.boolean("bias", false);
  Value attn = Value::table();
  attn["type"] = Value::string("causal");
  if (bias) attn["bias"] = r.at("bias", Value::string("all"));
  m["attention"] = attn;
  Value ffn = Value::table();
  ffn["type"] = Value::string("mlp");
  ffn["activation"] = r.at("activation", Value::string(activation(r, "activation", "gelu")));
  ffn["d_ff"] = r.at("ffn_hidden_size", Value::integer(r.integer("ffn_hidden_size", 4 * d)));
  if (bias) ffn["bias"] = Value::boolean(true);
  m["ffn"] = ffn;
  m["weight_names"] = Value::string("falcon");
}

}  // namespace

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
  HfReader r(file, std::move(text), std::move(j));
  const std::string type = r.string("model_type", "");
  r.set_model_type(type);
  Value m = Value::table({}, SourceLoc{file, 1, 1, {}});
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "gemma2" || type == "olmo2" ||
      type == "phi3") {
    llama_like(r, type, m);
  } else if (type == "gpt_neox") {
    gpt_neox(r, m);
  } else if (type == "falcon") {
    falcon(r, m);
  } else {
    throw ConfigError(r.loc("model_type"),
                      "model_type '" + type +
                          "' is not supported (llama, mistral, qwen2, gemma2, olmo2, phi3, gpt_neox, falcon are)");
  }
  r.finish();
  return m;
}

}  // namespace bench
