#include "experiment/hf_reader.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "experiment/diagnostics.h"

namespace bench::hf {

using json = nlohmann::json;

namespace {

/// Fields that do not change what the model computes: token ids, the checkpoint's storage type,
/// generation and serving settings, bookkeeping of the Hugging Face libraries.
bool has_no_effect(const std::string& field) {
  static const std::set<std::string> fields = {"_name_or_path",      "architectures",        "auto_map",
                                               "bos_token_id",       "eos_token_id",         "pad_token_id",
                                               "torch_dtype",        "transformers_version", "use_cache",
                                               "model_type",         "tokenizer_class",      "cache_implementation",
                                               "classifier_dropout", "pretraining_tp",       "return_dict",
                                               "is_decoder",         "task_specific_params"};
  return fields.count(field) != 0;
}

}  // namespace

Reader::Reader(std::string file, std::string text, json j)
    : file_(std::move(file)), text_(std::move(text)), j_(std::move(j)) {}

SourceLoc Reader::loc(const std::string& key) const {
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

const json* Reader::take(const std::string& key) {
  used_.insert(key);
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

bool Reader::has(const std::string& key) {
  used_.insert(key);
  auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

bool Reader::is_null(const std::string& key) {
  used_.insert(key);
  auto it = j_.find(key);
  return it != j_.end() && it->is_null();
}

int64_t Reader::integer(const std::string& key, int64_t fallback) {
  const json* v = take(key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) {
    fail(key, "field '" + key + "' must be an integer, found " + v->dump());
    return fallback;
  }
  return v->get<int64_t>();
}

double Reader::number(const std::string& key, double fallback) {
  const json* v = take(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) {
    fail(key, "field '" + key + "' must be a number, found " + v->dump());
    return fallback;
  }
  return v->get<double>();
}

bool Reader::boolean(const std::string& key, bool fallback) {
  const json* v = take(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    fail(key, "field '" + key + "' must be true or false, found " + v->dump());
    return fallback;
  }
  return v->get<bool>();
}

std::string Reader::string(const std::string& key, const std::string& fallback) {
  const json* v = take(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) {
    fail(key, "field '" + key + "' must be a string, found " + v->dump());
    return fallback;
  }
  return v->get<std::string>();
}

int64_t Reader::required(const std::string& key) {
  if (!has(key)) fail(key, "field '" + key + "' is missing; " + model_type_ + " needs it");
  return integer(key, 1);
}

void Reader::finish() {
  for (const auto& [key, value] : j_.items())
    if (used_.count(key) == 0 && !has_no_effect(key) && !value.is_null())
      errors_.emplace_back(loc(key), "field '" + key + "' (" + value.dump() + ") of model_type '" + model_type_ +
                                         "' is not supported; remove it, or describe the model in TOML");
  if (errors_.empty()) return;
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    return a.loc().line != b.loc().line ? a.loc().line < b.loc().line : a.loc().column < b.loc().column;
  });
  throw ConfigErrors(errors_);
}

namespace {

/// transformers' ACT2FN names and our activations (docs/experiments.md). FastGELU's constant
/// 0.7978845608 is sqrt(2/pi) to 10 digits (a relative difference below 4e-11), AccurateGELU's is
/// sqrt(2/pi) itself: both are the tanh form.
constexpr std::pair<const char*, const char*> kActivations[] = {
    {"gelu", "gelu"},
    {"gelu_python", "gelu"},
    {"gelu_new", "gelu_tanh"},
    {"gelu_fast", "gelu_tanh"},
    {"gelu_pytorch_tanh", "gelu_tanh"},
    {"gelu_accurate", "gelu_tanh"},
    {"quick_gelu", "quick_gelu"},
    {"silu", "silu"},
    {"swish", "silu"},
    {"relu", "relu"},
    {"relu2", "relu2"},
};

}  // namespace

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [theirs, ours] : kActivations) out.emplace_back(theirs);
    return out;
  }();
  return names;
}

std::string activation(Reader& r, const std::string& key, const std::string& fallback) {
  const std::string act = r.string(key, fallback);
  for (const auto& [theirs, ours] : kActivations)
    if (act == theirs) return ours;
  std::string list;
  for (const std::string& n : activation_names()) list += (list.empty() ? "" : ", ") + n;
  r.fail(key, "field '" + key + "' = \"" + act + "\" is not supported (bench reproduces " + list +
                  "; the other names of transformers' ACT2FN are functions bench does not have)");
  return "gelu";
}

Value rope_table(Reader& r, double default_base, const std::string& base_key, const std::string& fraction_key) {
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
    // transformers multiplies cos and sin by the attention factor sqrt(1 + ln s / ln L_orig) at
    // every length (_compute_longrope_parameters); only the factors depend on the length.
    rope["apply"] = Value::string("always");
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

}  // namespace bench::hf
