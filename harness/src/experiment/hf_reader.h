// defines: bench::hf::Reader, activation, rope_table, the model-type readers — the pieces of
//          read_hf_config (hf_config.h) shared by the files that read each family of model types
//
// A field is read once; whatever is left unread at the end is an error at its line (finish()).
// Absent fields take the configuration class's default (each reader passes it). A null field
// means what transformers makes of it: where its configuration class maps None to a default
// (num_key_value_heads, head_dim of Llama and Mistral, n_inner, ffn_hidden_size ...), that
// default, which the typed getters return for null as for absent; where None switches a feature
// off (sliding_window, the soft-caps, rope_scaling, clip_qkv), the reader asks is_null() and
// switches it off. A null field no reader asks for is a feature transformers does not use either
// and is accepted.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bench/error.h"
#include "bench/value.h"

namespace bench::hf {

/// One config.json being read: typed getters that mark each field as read, and the errors so far.
class Reader {
 public:
  Reader(std::string file, std::string text, nlohmann::json j);

  /// Where field `key` is written (its first occurrence as a key), for messages and locations.
  SourceLoc loc(const std::string& key) const;

  /// The field, marked as read; nullptr when absent or null.
  const nlohmann::json* take(const std::string& key);
  /// Whether the field is present and not null; marks it as read.
  bool has(const std::string& key);
  /// Whether the field is present with the value null; marks it as read.
  bool is_null(const std::string& key);

  void fail(const std::string& key, const std::string& msg) { errors_.emplace_back(loc(key), msg); }

  /// The typed getters: `fallback` when the field is absent or null, an error when it has another type.
  int64_t integer(const std::string& key, int64_t fallback);
  double number(const std::string& key, double fallback);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  /// An integer the model type cannot do without: an error when absent or null.
  int64_t required(const std::string& key);

  /// A field read only to check that it keeps the value we implement (absent and null pass).
  template <class T>
  void expect(const std::string& key, const T& value, const std::string& why) {
    const nlohmann::json* v = take(key);
    if (v != nullptr && *v != nlohmann::json(value))
      fail(key, "field '" + key + "' = " + v->dump() + " is not supported (" + why + ")");
  }

  /// Our value located at field `key`.
  Value at(const std::string& key, Value v) const {
    v.loc = loc(key);
    return v;
  }

  /// Every non-null field not read is an error naming it; throws ConfigErrors with all errors.
  void finish();

  void set_model_type(std::string type) { model_type_ = std::move(type); }
  const std::string& model_type() const { return model_type_; }

 private:
  std::string model_type_;
  std::string file_;
  std::string text_;
  nlohmann::json j_;
  std::set<std::string> used_;
  std::vector<ConfigError> errors_;
};

/// Our activation name for transformers' ACT2FN name in field `key` (`fallback` when absent or
/// null): gelu, gelu_python -> gelu; gelu_new, gelu_fast, gelu_pytorch_tanh, gelu_accurate ->
/// gelu_tanh; quick_gelu; silu, swish -> silu; relu; relu2. Any other name is an error listing these.
std::string activation(Reader& r, const std::string& key, const std::string& fallback);

/// The transformers names activation() accepts, for messages and tests.
const std::vector<std::string>& activation_names();

/// rope_theta (field `base_key`), rope_scaling and the partial-rotary field `fraction_key` -> the
/// `rope` table.
Value rope_table(Reader& r, double default_base, const std::string& base_key, const std::string& fraction_key);

/// The readers of each family: fill the [model] table `m`.
void llama_like(Reader& r, const std::string& type,
                Value& m);  ///< llama, mistral, qwen2, gemma, gemma2, olmo, olmo2, phi3
void gpt2(Reader& r, Value& m);
void gpt_neox(Reader& r, Value& m);
void falcon(Reader& r, Value& m);

}  // namespace bench::hf
