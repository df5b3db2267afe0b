// config_accounts(): the accounts of an experiment's models, counted from the components
// themselves (a model's plan-only build: every component validates and sets up, nothing is
// allocated).
#include <algorithm>
#include <map>

#include "accounting/accounting.h"
#include "bench/component.h"
#include "experiment/experiment.h"
#include "experiment/match.h"
#include "experiment/resolve.h"
#include "model/model.h"
#include "plugins/registry.h"
#include "runners/registry.h"

namespace bench::accounting {

namespace {

/// The case's label restricted to what shapes the model: the variant and the model.* / data.* axes.
std::string model_label(const Case& c) {
  return case_label(c.variant, c.axes,
                    [](std::string_view key) { return key.starts_with("model.") || key.starts_with("data."); });
}

/// A fact the model's components in `slot` report (AccountingFacts): the first block's for d_ff,
/// the largest over the blocks for the window.
int64_t ffn_width(const Model& m) {
  for (const auto& [layer, c] : m.components(Slot::kFfn))
    if (layer == 0) return c->accounting().ffn_hidden;
  return 0;
}
int64_t attention_window(const Model& m) {
  int64_t window = 0;
  for (const auto& [layer, c] : m.components(Slot::kAttention))
    window = std::max(window, c->accounting().attention_window);
  return window;
}

Architecture shape_of(const Model& m, const std::string& label) {
  const ModelDims& d = m.spec().dims;
  Architecture a;
  a.name = label;
  a.n_layers = d.n_layers, a.d_model = d.d_model, a.n_heads = d.n_heads, a.n_kv_heads = d.n_kv_heads;
  a.d_head = d.d_head, a.d_ff = ffn_width(m), a.vocab_size = d.vocab_size, a.tied_embeddings = d.tie_embeddings;
  a.context = d.seq_len;
  // As before the components reported it: any window counts every layer as local (a local/global
  // pattern is not applied to the KV cache; docs/calc.md).
  if (const int64_t w = attention_window(m); w > 0) {
    a.sliding_window = w;
    a.local_layers = d.n_layers;
  }
  return a;
}

}  // namespace

std::vector<ConfigAccounts> config_accounts(const std::string& path, const std::string& device, int64_t context,
                                            int64_t batch, double bytes_per_element) {
  // A file that only describes a model (a [model] table, no runner section) is counted as
  // `bench eval --config` reads it: as the case of an empty section of the first runner.
  ExperimentFile file = read_experiment(path, runner_sections(), /*model_only=*/true);
  Registry registry;
  registry.load_defaults();
  for (const auto& dir : file.plugin_paths) registry.load_directory(dir, true);
  if (std::none_of(file.runners.begin(), file.runners.end(),
                   [&](const RunnerSection& r) { return file.root.find(r.name) != nullptr; }))
    file.root[file.runners.front().name] = Value::table();

  std::vector<ConfigAccounts> out;
  std::map<std::string, size_t> seen;  // resolved model JSON -> index in out
  std::vector<Case> cases = expand_cases(file, registry, device);
  match_budgets(file, cases, registry);  // a matched experiment's solved widths
  for (const Case& c : cases) {
    ResolvedCase rc = resolve_case(c, registry, file.runners);
    // Cases differing only in runner settings (lr, steps ...) build the same model.
    const std::string model_json = resolved_json(ResolvedCase{rc.model, rc.data, Params{}, 0, {}});
    if (const auto it = seen.find(model_json); it != seen.end()) {
      out[it->second].ordinals.push_back(c.ordinal);
      continue;
    }
    const Model m(rc.model, registry, Model::Validating{});  // validated, nothing allocated
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
