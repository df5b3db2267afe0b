#include "model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "bench/ops.h"
#include "model/safetensors.h"

namespace bench {

namespace {

/// Within a block ("attn.wo", "ffn_norm.weight"): the Hugging Face name after
/// "model.layers.{i}.". The single-norm positions keep Llama's names (the norm before attention
/// is input_layernorm, the one before the FFN post_attention_layernorm) wherever they sit;
/// double norm takes Gemma 2's four names.
std::string block_name(std::string_view rest, std::string_view names) {
  // OLMo 2 names its output-side norms by what they follow.
  if (names == "olmo2" && rest.starts_with("attn_norm."))
    return "post_attention_layernorm." + std::string(rest.substr(10));
  if (names == "olmo2" && rest.starts_with("ffn_norm."))
    return "post_feedforward_layernorm." + std::string(rest.substr(9));
  static constexpr std::pair<std::string_view, std::string_view> kExact[] = {
      {"attn.wo", "self_attn.o_proj.weight"}, {"attn.bo", "self_attn.o_proj.bias"},
      {"ffn.w_out", "mlp.down_proj.weight"},  {"ffn.b_out", "mlp.down_proj.bias"},
      {"ffn.w_in", "mlp.up_proj.weight"},  // a plain MLP; a gated one is split by the layout
      {"ffn.b_in", "mlp.up_proj.bias"},
  };
  for (const auto& [ours, theirs] : kExact)
    if (rest == ours) return std::string(theirs);
  static constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {
      {"attn_norm.in.", "input_layernorm."},
      {"attn_norm.out.", "post_attention_layernorm."},
      {"ffn_norm.in.", "pre_feedforward_layernorm."},
      {"ffn_norm.out.", "post_feedforward_layernorm."},
      {"attn_norm.", "input_layernorm."},
      {"ffn_norm.", "post_attention_layernorm."},
      {"norm.", "input_layernorm."},  // the parallel block's shared norm
      {"attn.", "self_attn."},        // q_norm / k_norm and any other attention parameter
      {"ffn.", "mlp."},
  };
  for (const auto& [ours, theirs] : kPrefixes)
    if (rest.starts_with(ours)) return std::string(theirs) + std::string(rest.substr(ours.size()));
  return std::string(rest);
}

/// GPT-NeoX ("gpt_neox.layers.{i}.attention...") and Falcon ("transformer.h.{i}.self_attention...")
/// names of a parameter inside a block.
std::string neox_block_name(std::string_view rest, bool falcon) {
  const std::string attn = falcon ? "self_attention." : "attention.";
  static constexpr std::pair<std::string_view, std::string_view> kExact[] = {
      {"attn.wqkv", "query_key_value.weight"},
      {"attn.bqkv", "query_key_value.bias"},
      {"attn.wo", "dense.weight"},
      {"attn.bo", "dense.bias"},
  };
  for (const auto& [ours, theirs] : kExact)
    if (rest == ours) return attn + std::string(theirs);
  static constexpr std::pair<std::string_view, std::string_view> kFfn[] = {
      {"ffn.w_in", "mlp.dense_h_to_4h.weight"},
      {"ffn.b_in", "mlp.dense_h_to_4h.bias"},
      {"ffn.w_out", "mlp.dense_4h_to_h.weight"},
      {"ffn.b_out", "mlp.dense_4h_to_h.bias"},
  };
  for (const auto& [ours, theirs] : kFfn)
    if (rest == ours) return std::string(theirs);
  static constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {
      {"attn_norm.", "input_layernorm."},
      {"ffn_norm.", "post_attention_layernorm."},
      {"norm.", "input_layernorm."},  // Falcon's one norm of the parallel block
      {"ffn.", "mlp."},
  };
  for (const auto& [ours, theirs] : kPrefixes)
    if (rest.starts_with(ours)) return std::string(theirs) + std::string(rest.substr(ours.size()));
  if (rest.starts_with("attn.")) return attn + std::string(rest.substr(5));
  return std::string(rest);
}

std::string neox_name(std::string_view param, bool falcon) {
  if (param == "embed.weight") return falcon ? "transformer.word_embeddings.weight" : "gpt_neox.embed_in.weight";
  if (param == "head.weight") return falcon ? "lm_head.weight" : "embed_out.weight";
  if (param.starts_with("final_norm."))
    return (falcon ? "transformer.ln_f." : "gpt_neox.final_layer_norm.") + std::string(param.substr(11));
  if (param.starts_with("blocks.")) {
    const size_t dot = param.find('.', 7);
    if (dot != std::string_view::npos)
      return (falcon ? "transformer.h." : "gpt_neox.layers.") + std::string(param.substr(7, dot - 7)) + "." +
             neox_block_name(param.substr(dot + 1), falcon);
  }
  return std::string(param);
}

/// GPT-2's names ("transformer.h.{i}.attn.c_attn.weight"): Conv1D matrices, stored [in, out]
/// (checkpoint_layout marks them transposed).
std::string gpt2_name(std::string_view param) {
  if (param == "embed.weight") return "transformer.wte.weight";
  if (param == "pos.weight") return "transformer.wpe.weight";
  if (param == "head.weight") return "lm_head.weight";
  if (param.starts_with("final_norm.")) return "transformer.ln_f." + std::string(param.substr(11));
  if (!param.starts_with("blocks.")) return std::string(param);
  const size_t dot = param.find('.', 7);
  if (dot == std::string_view::npos) return std::string(param);
  const std::string_view rest = param.substr(dot + 1);
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"attn.wqkv", "attn.c_attn.weight"},
      {"attn.bqkv", "attn.c_attn.bias"},
      {"attn.wo", "attn.c_proj.weight"},
      {"attn.bo", "attn.c_proj.bias"},
      {"ffn.w_in", "mlp.c_fc.weight"},
      {"ffn.b_in", "mlp.c_fc.bias"},
      {"ffn.w_out", "mlp.c_proj.weight"},
      {"ffn.b_out", "mlp.c_proj.bias"},
      {"attn_norm.", "ln_1."},
      {"ffn_norm.", "ln_2."},
      {"ffn.", "mlp."},
  };
  std::string theirs(rest);
  for (const auto& [ours, name] : kNames)
    if (rest == ours || (ours.ends_with('.') && rest.starts_with(ours))) {
      theirs = std::string(name) + std::string(rest.substr(ours.size()));
      break;
    }
  return "transformer.h." + std::string(param.substr(7, dot - 7)) + "." + theirs;
}

/// Buffers that GPT-NeoX and Falcon checkpoints may carry besides their parameters (the causal
/// mask, its fill value, the rotary frequencies): computed by the model, not loaded.
bool is_buffer(const std::string& name, std::string_view names) {
  // GPT-2's causal mask and its fill value (h.{i}.attn.bias, h.{i}.attn.masked_bias).
  if (names == "gpt2") return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
  if (names != "gpt_neox" && names != "falcon") return false;
  return name.ends_with(".rotary_emb.inv_freq") ||
         (names == "gpt_neox" && (name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias")));
}

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
  return d;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// The parameter's values as doubles (a bf16 model's from its float master copy).
std::vector<double> param_values(const Model& model, const Param& p) {
  std::vector<double> out(static_cast<size_t>(p.value.numel()));
  std::vector<char> storage;
  const Tensor master = model.master_of(p);
  const Tensor value = ops::on_host(master.defined() ? master : p.value, storage);  // may be a device's memory
  dispatch_float(value.dtype(), [&]<class T>() {
    const T* v = value.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = scalar_value(v[i]);
  });
  return out;
}

/// The [cols, rows] transpose of the row-major [rows, cols] matrix at `v`.
std::vector<double> transpose(const double* v, int64_t rows, int64_t cols) {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = v[r * cols + c];
  return out;
}

/// Write `v` into elements [begin, begin + v.size()) of a parameter (and of its master copy).
void set_param_values(const Model& model, const Param& p, int64_t begin, const std::vector<double>& v) {
  const auto n = static_cast<int64_t>(v.size());
  dispatch_float(p.value.dtype(), [&]<class T>() {
    std::vector<T> host(v.size());  // then copied into the model's memory
    for (size_t i = 0; i < v.size(); ++i) host[i] = scalar_as<T>(v[i]);
    Tensor dst(p.value.data<T>() + begin, p.value.dtype(), {n});
    ops::copy(Tensor(host.data(), p.value.dtype(), {n}), dst);
  });
  const Tensor master = model.master_of(p);
  if (!master.defined()) return;
  std::vector<float> host(v.begin(), v.end());
  Tensor dst(master.data<float>() + begin, DType::kFloat32, {n});
  ops::copy(Tensor(host.data(), DType::kFloat32, {n}), dst);
}

}  // namespace

std::string checkpoint_name(std::string_view param, std::string_view names) {
  if (names == "gpt_neox" || names == "falcon") return neox_name(param, names == "falcon");
  if (names == "gpt2") return gpt2_name(param);
  if (param == "embed.weight") return "model.embed_tokens.weight";
  if (param == "pos.weight") return "model.embed_positions.weight";
  if (param == "head.weight") return "lm_head.weight";
  if (param.starts_with("final_norm.")) return "model.norm." + std::string(param.substr(11));
  if (param.starts_with("blocks.")) {
    const size_t dot = param.find('.', 7);
    if (dot != std::string_view::npos)
      return "model.layers." + std::string(param.substr(7, dot - 7)) + "." + block_name(param.substr(dot + 1), names);
  }
  return std::string(param);
}

std::vector<CheckpointTensor> checkpoint_layout(const Model& model) {
  const ModelDims& d = model.spec().dims;
  const std::string& names = model.spec().weight_names;
  const bool neox = names == "gpt_neox" || names == "falcon";
  std::vector<CheckpointTensor> out;
  for (const Param* p : model.params()) {
    const std::vector<int64_t> shape = dims_of(p->shape);
    const std::string name = checkpoint_name(p->name, names);
    const auto split = [&](const std::string& prefix, const std::vector<std::pair<std::string, int64_t>>& parts) {
      int64_t row = 0;
      for (const auto& [part, rows] : parts) {
        std::vector<int64_t> s = shape;
        s[0] = rows;
        out.push_back({prefix + part, p->name, row, rows, s, {}, false});
        row += rows;
      }
    };
    const bool in_block = p->name.starts_with("blocks.");
    if (names == "gpt2") {  // one tensor per parameter; Conv1D's matrices [in, out]
      const bool conv = in_block && shape.size() == 2 &&
                        (p->name.ends_with(".attn.wqkv") || p->name.ends_with(".attn.wo") ||
                         p->name.ends_with(".ffn.w_in") || p->name.ends_with(".ffn.w_out"));
      out.push_back({name,
                     p->name,
                     0,
                     shape.empty() ? 0 : shape[0],
                     conv ? std::vector<int64_t>{shape[1], shape[0]} : shape,
                     {},
                     conv});
      continue;
    }
    const bool qkv_weight = p->name.ends_with(".attn.wqkv") && shape.size() == 2;
    const bool qkv_bias = p->name.ends_with(".attn.bqkv") && shape.size() == 1;
    if (in_block && (qkv_weight || qkv_bias) && shape[0] == (d.n_heads + 2 * d.n_kv_heads) * d.d_head) {
      // Rows of the fused projection (elements of its bias): the query heads, the key heads, the
      // value heads, each head's d_head rows together, as in q_proj, k_proj and v_proj. The name
      // is "...self_attn.wqkv" ("...bqkv").
      const std::string kind = qkv_weight ? "weight" : "bias";
      if (neox) {
        // One query_key_value tensor, grouped by key-value head: each group's query heads, then
        // its key head and its value head (GPT-NeoX and multi-head Falcon: [q_h, k_h, v_h] per
        // head; multi-query Falcon: all query heads, then k, then v).
        CheckpointTensor t{name, p->name, 0, shape[0], shape, {}, false};
        const int64_t per_group = d.n_heads / d.n_kv_heads, dh = d.d_head;
        for (int64_t g = 0; g < d.n_kv_heads; ++g) {
          const int64_t base = g * (per_group + 2) * dh;
          for (int64_t j = 0; j < per_group; ++j) t.blocks.push_back({base + j * dh, (g * per_group + j) * dh, dh});
          t.blocks.push_back({base + per_group * dh, (d.n_heads + g) * dh, dh});
          t.blocks.push_back({base + (per_group + 1) * dh, (d.n_heads + d.n_kv_heads + g) * dh, dh});
        }
        out.push_back(std::move(t));
        continue;
      }
      const std::string prefix = name.substr(0, name.size() - std::string_view("wqkv").size());
      if (names == "phi3") {  // Phi-3 keeps the fused tensor: qkv_proj, rows [q; k; v] as ours
        out.push_back({prefix + "qkv_proj." + kind, p->name, 0, shape[0], shape, {}, false});
        continue;
      }
      split(prefix, {{"q_proj." + kind, d.n_heads * d.d_head},
                     {"k_proj." + kind, d.n_kv_heads * d.d_head},
                     {"v_proj." + kind, d.n_kv_heads * d.d_head}});
      continue;
    }
    const bool in_weight = p->name.ends_with(".ffn.w_in") && shape.size() == 2;
    const bool in_bias = p->name.ends_with(".ffn.b_in") && shape.size() == 1;
    if (in_block && (in_weight || in_bias) && !neox) {
      // A gated FFN fuses [gate | up] (2 d_ff rows, and its bias 2 d_ff elements) in front of a
      // w_out of d_ff columns.
      const Param* w_out = model.find_param(p->name.substr(0, p->name.size() - 4) + "w_out");
      if (w_out != nullptr && w_out->shape.rank() == 2 && shape[0] == 2 * w_out->shape[1]) {
        const std::string kind = in_weight ? "weight" : "bias";
        const std::string prefix = name.substr(0, name.size() - ("up_proj." + kind).size());
        if (names == "phi3") {  // Phi-3 keeps the fused tensor: gate_up_proj, rows [gate; up] as ours
          out.push_back({prefix + "gate_up_proj." + kind, p->name, 0, shape[0], shape, {}, false});
          continue;
        }
        split(prefix, {{"gate_proj." + kind, shape[0] / 2}, {"up_proj." + kind, shape[0] / 2}});
        continue;
      }
    }
    out.push_back({name, p->name, 0, shape.empty() ? 0 : shape[0], shape, {}, false});
  }
  return out;
}

void save_weights(const Model& model, const std::string& path, std::string_view dtype) {
  std::vector<safetensors::OutTensor> tensors;
  std::map<std::string, std::vector<double>> cache;
  for (const CheckpointTensor& t : checkpoint_layout(model)) {
    const Param* p = model.find_param(t.param);
    auto it = cache.find(t.param);
    if (it == cache.end()) it = cache.emplace(t.param, param_values(model, *p)).first;
    // Rows of a matrix, elements of a vector (a fused bias splits like its matrix's rows).
    const int64_t row_size = p->shape.rank() > 1 ? p->shape.numel() / p->shape[0] : 1;
    const int64_t begin = p->shape.rank() > 0 ? t.row_begin * row_size : 0;
    const int64_t n = p->shape.rank() > 0 ? t.rows * row_size : p->shape.numel();
    if (t.transposed) {  // [rows, cols] as [cols, rows]
      const std::vector<double> v = transpose(it->second.data(), p->shape[0], row_size);
      tensors.push_back({t.name, std::string(dtype), t.shape, safetensors::encode(v.data(), n, dtype)});
      continue;
    }
    if (!t.blocks.empty()) {  // rows in the file's order
      std::vector<double> rows(static_cast<size_t>(n));
      for (const CheckpointTensor::RowBlock& b : t.blocks)
        std::copy_n(it->second.data() + b.param_row * row_size, b.rows * row_size, rows.data() + b.file_row * row_size);
      tensors.push_back({t.name, std::string(dtype), t.shape, safetensors::encode(rows.data(), n, dtype)});
      continue;
    }
    tensors.push_back({t.name, std::string(dtype), t.shape, safetensors::encode(it->second.data() + begin, n, dtype)});
  }
  safetensors::write(path, tensors, {{"format", "pt"}, {"producer", "bench"}});
}

namespace {

/// The tensors of a checkpoint: one file, or the shards listed by a Hugging Face index
/// (model.safetensors.index.json: {"weight_map": {tensor name: shard file}}).
struct Checkpoint {
  std::vector<safetensors::File> files;
  std::map<std::string, std::pair<const safetensors::File*, const safetensors::TensorInfo*>> tensors;

  const safetensors::TensorInfo* find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : it->second.second;
  }
  std::vector<double> values(const std::string& name) const {
    const auto& [file, info] = tensors.at(name);
    return file->values(*info);
  }
};

Checkpoint open_checkpoint(const std::string& path, std::vector<std::string>& problems) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "model.safetensors.index.json", ec)) {
      file = (fs::path(path) / "model.safetensors.index.json").string();
    } else if (fs::exists(fs::path(path) / "model.safetensors", ec)) {
      file = (fs::path(path) / "model.safetensors").string();
    } else {
      throw Error(path + ": a directory without model.safetensors or model.safetensors.index.json");
    }
  }
  Checkpoint c;
  if (!file.ends_with(".json")) {
    c.files.push_back(safetensors::read(file));
    for (const safetensors::TensorInfo& t : c.files[0].tensors) c.tensors[t.name] = {c.files.data(), &t};
    return c;
  }
  std::ifstream in(file);
  if (!in) throw Error(file + ": cannot open");
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error(file + ": a safetensors index needs a \"weight_map\" object");
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) throw Error(file + ": weight_map entry '" + name + "' is not a file name");
    weight_map[name] = shard.get<std::string>();
    if (std::find(shards.begin(), shards.end(), weight_map[name]) == shards.end()) shards.push_back(weight_map[name]);
  }
  c.files.reserve(shards.size());  // the map below points into it
  for (const std::string& shard : shards) {
    c.files.push_back(safetensors::read((fs::path(file).parent_path() / shard).string()));
    for (const safetensors::TensorInfo& t : c.files.back().tensors) {
      auto listed = weight_map.find(t.name);
      if (listed == weight_map.end() || listed->second != shard) {
        problems.push_back(t.name + ": in shard " + shard + " but the index " +
                           (listed == weight_map.end() ? "does not list it" : "puts it in " + listed->second));
        continue;
      }
      c.tensors[t.name] = {&c.files.back(), &t};
    }
  }
  for (const auto& entry : weight_map) {
    const std::string& name = entry.first;
    if (c.tensors.count(name) != 0) continue;
    const bool reported =
        std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.starts_with(name + ":"); });
    if (!reported) problems.push_back(name + ": the index puts it in " + entry.second + ", which does not hold it");
  }
  return c;
}

}  // namespace

void load_weights(Model& model, const std::string& path) {
  std::vector<std::string> problems;
  Checkpoint file = open_checkpoint(path, problems);
  const std::string& names = model.spec().weight_names;
  if (names == "gpt2" && file.find("transformer.wte.weight") == nullptr && file.find("wte.weight") != nullptr) {
    // OpenAI's GPT-2 checkpoints on the Hub were saved from GPT2Model: the same names without
    // "transformer." (transformers adds the prefix on load).
    decltype(file.tensors) renamed;
    for (auto& [name, where] : file.tensors)
      renamed[name.starts_with("lm_head.") ? name : "transformer." + name] = where;
    file.tensors = std::move(renamed);
  }
  const std::vector<CheckpointTensor> layout = checkpoint_layout(model);
  std::set<std::string> expected;
  for (const CheckpointTensor& t : layout) {
    expected.insert(t.name);
    const safetensors::TensorInfo* f = file.find(t.name);
    if (f == nullptr) {
      const bool reported = std::any_of(problems.begin(), problems.end(),
                                        [&](const std::string& p) { return p.starts_with(t.name + ":"); });
      if (!reported) problems.push_back(t.name + ": missing (the model needs " + shape_text(t.shape) + ")");
      continue;
    }
    if (f->shape != t.shape)
      problems.push_back(t.name + ": shape " + shape_text(f->shape) + " in the file, the model needs " +
                         shape_text(t.shape));
    if (!safetensors::is_float(f->dtype))
      problems.push_back(t.name + ": dtype " + f->dtype + ", the model needs a float type (F32, BF16, F16, F64)");
  }
  // A tied head reads the embedding; Hugging Face files of tied models may still carry the head.
  const bool tied_head = model.spec().dims.tie_embeddings && model.find_param("head.weight") == nullptr;
  const std::string head_name = checkpoint_name("head.weight", names);
  const std::string embed_name = checkpoint_name("embed.weight", names);
  for (const auto& [name, where] : file.tensors) {
    if (expected.count(name) != 0 || is_buffer(name, names)) continue;
    const safetensors::TensorInfo& f = *where.second;
    if (tied_head && name == head_name) {
      const safetensors::TensorInfo* e = file.find(embed_name);
      if (e != nullptr && safetensors::is_float(f.dtype) && safetensors::is_float(e->dtype) && f.shape == e->shape &&
          file.values(name) == file.values(embed_name))
        continue;
      problems.push_back(name + ": the model ties its head to the embedding, but this differs from it");
      continue;
    }
    problems.push_back(name + ": not a tensor of this model");
  }
  if (!problems.empty()) {
    std::string msg = path + ": " + std::to_string(problems.size()) + " mismatch" + (problems.size() == 1 ? "" : "es") +
                      " with the model:";
    for (const std::string& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  for (const CheckpointTensor& t : layout) {
    Param* p = model.find_param(t.param);
    const std::vector<double> v = file.values(t.name);
    const int64_t row_size = p->shape.rank() > 1 ? p->shape.numel() / p->shape[0] : 1;
    const int64_t begin = p->shape.rank() > 0 ? t.row_begin * row_size : 0;
    if (t.transposed) {
      set_param_values(model, *p, 0, transpose(v.data(), row_size, p->shape[0]));
      continue;
    }
    if (t.blocks.empty()) {
      set_param_values(model, *p, begin, v);
      continue;
    }
    for (const CheckpointTensor::RowBlock& b : t.blocks) {
      const auto from = v.begin() + static_cast<std::ptrdiff_t>(b.file_row * row_size);
      set_param_values(model, *p, b.param_row * row_size,
                       std::vector<double>(from, from + static_cast<std::ptrdiff_t>(b.rows * row_size)));
    }
  }
}

}  // namespace bench
