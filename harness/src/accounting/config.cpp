// config_accounts(): the accounts of an experiment's models, counted from the components
// themselves (Model built with plan_only: every component sets up, nothing is allocated).
#include <map>

#include "accounting/accounting.h"
#include "bench/component.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "model/model.h"
#include "plugins/registry.h"

namespace bench::accounting {

namespace {

/// The label token of a swept key, as experiment.cpp writes it: model.norm.type -> norm,
/// model.d_model -> d_model.
std::string axis_name(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() >= 2 && parts.back() == "type") return parts[parts.size() - 2];
  return parts.back();
}

/// The case's label restricted to what shapes the model: the variant and the model.* / data.* axes.
std::string model_label(const Case& c) {
  std::string label = c.variant;
  for (const auto& [key, value] : c.axes.as_table()) {
    if (key.rfind("model.", 0) != 0 && key.rfind("data.", 0) != 0) continue;
    label += (label.empty() ? "" : " ") + axis_name(key) + "=" + (value.is_string() ? value.as_string() : value.str());
  }
  return label.empty() ? "base" : label;
}

/// d_ff read from the first layer's FFN: its output matrix is [d_model, d_ff]. 0 when not found.
int64_t ffn_width(const Model& m) {
  const int64_t d = m.spec().dims.d_model;
  for (const Param* p : m.params()) {
    if (p->name.rfind("blocks.0.", 0) != 0 || p->name.find(".ffn.") == std::string::npos) continue;
    if (p->shape.rank() == 2 && p->shape[0] == d && p->shape[1] != d) return p->shape[1];
  }
  return 0;
}

Architecture shape_of(const Model& m, const std::string& label) {
  const ModelDims& d = m.spec().dims;
  Architecture a;
  a.name = label;
  a.n_layers = d.n_layers, a.d_model = d.d_model, a.n_heads = d.n_heads, a.n_kv_heads = d.n_kv_heads;
  a.d_head = d.d_head, a.d_ff = ffn_width(m), a.vocab_size = d.vocab_size, a.tied_embeddings = d.tie_embeddings;
  a.context = d.seq_len;
  const SlotChoice& attn = m.spec().slot(Slot::kAttention);
  if (const Value* w = attn.params.values().find("window"); w != nullptr && w->is_number() && w->as_int() > 0) {
    a.sliding_window = w->as_int();
    a.local_layers = d.n_layers;
  }
  return a;
}

}  // namespace

std::vector<ConfigAccounts> config_accounts(const std::string& path, const std::string& device, int64_t context,
                                            int64_t batch, double bytes_per_element) {
  const ExperimentFile file = read_experiment(path);
  Registry registry;
  registry.load_defaults();
  for (const auto& dir : file.plugin_paths) registry.load_directory(dir, true);

  std::vector<ConfigAccounts> out;
  std::map<std::string, size_t> seen;  // resolved model JSON -> index in out
  for (const Case& c : expand_cases(file, registry, device)) {
    ResolvedCase rc = resolve_case(c, registry);
    validate_case(rc, registry);
    // Cases differing only in runner settings (lr, steps ...) build the same model.
    const std::string model_json = resolved_json(ResolvedCase{rc.model, rc.data, Params{}, 0});
    if (const auto it = seen.find(model_json); it != seen.end()) {
      out[it->second].ordinals.push_back(c.ordinal);
      continue;
    }
    const Model m(rc.model, registry, 0, /*plan_only=*/true);
    ConfigAccounts ca;
    ca.label = model_label(c);
    ca.variant = c.variant;
    ca.ordinals = {c.ordinal};
    ca.seq_len = rc.model.dims.seq_len;
    ca.batch_size = rc.model.dims.batch_size;
    ca.shape = shape_of(m, ca.label);
    ca.accounts =
        account(ca.shape, context > 0 ? context : ca.seq_len, batch > 0 ? batch : ca.batch_size, bytes_per_element);
    // The parameters as the model counts them (every component's declared parameters).
    ca.accounts.params = m.n_params();
    ca.accounts.params_embedding = m.n_params_embedding();
    ca.accounts.params_non_embedding = m.n_params() - m.n_params_embedding();
    const double head = ca.shape.tied_embeddings ? static_cast<double>(ca.shape.vocab_size * ca.shape.d_model) : 0.0;
    const double attention_part = ca.accounts.flops_train_per_token - 6 * ca.accounts.n_matmul;
    ca.accounts.n_matmul = static_cast<double>(ca.accounts.params_non_embedding) + head;
    ca.accounts.flops_train_per_token = 6 * ca.accounts.n_matmul + attention_part;
    ca.accounts.flops_forward_per_token = 2 * ca.accounts.n_matmul + attention_part / 3;
    const Cost cost = m.cost();
    const auto tokens = static_cast<double>(rc.model.dims.tokens());
    ca.flops_declared_forward_per_token = cost.flops_forward / tokens;
    ca.flops_declared_train_per_token = (cost.flops_forward + cost.flops_backward) / tokens;
    seen.emplace(model_json, out.size());
    out.push_back(std::move(ca));
  }
  return out;
}

}  // namespace bench::accounting
