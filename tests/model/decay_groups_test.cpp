// Weight decay on chosen parameter groups ([stability] weight_decay_groups): with zero
// gradients an AdamW step moves nothing but the decay, p *= 1 - lr * wd, so exactly the
// parameters of the chosen groups shrink by that factor and every other parameter stays bit for
// bit. The model has every built-in group: matrices (attention, FFN, head), the token embedding,
// gains and biases (LayerNorm with bias, QK-norm with bias).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "bench/interfaces.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench {
namespace decay_groups_test {
namespace {

/// A float64 model with parameters in every built-in group; `groups` is the TOML list (or
/// empty for the default).
ResolvedCase decay_case(const std::string& groups) {
  std::string toml =
      "[model]\ndtype = \"float64\"\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
      "norm = { type = \"layernorm\", bias = true }\n"
      "attention = { type = \"causal\", qk_norm = \"layernorm\", qk_norm_bias = true }\n"
      "[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n[stability]\n";
  if (!groups.empty()) toml += "weight_decay_groups = " + groups + "\n";
  return test::resolve_first(toml);
}

/// The group each parameter belongs to, by name.
ParamGroup expected_group(const std::string& name) {
  if (name == "embed.weight") return ParamGroup::kEmbedding;
  if (name.ends_with(".bias")) return ParamGroup::kBias;
  if (name.ends_with("norm.weight") || name.ends_with("norm.in.weight") || name.ends_with("norm.out.weight"))
    return ParamGroup::kGain;
  return ParamGroup::kMatrix;
}

/// Set every parameter to distinct non-zero values (biases start at zero, where decay would be
/// invisible), take one AdamW step with zero gradients, and return per parameter the ratio
/// new / old if every entry changed by one common factor, or -1 if not.
std::map<std::string, double> decay_ratios(Model& model, double lr, double wd) {
  std::map<std::string, std::vector<double>> before;
  for (Param* p : model.params()) {
    double* v = p->value.data<double>();
    for (int64_t i = 0; i < p->value.numel(); ++i) v[i] = 0.5 + 0.01 * static_cast<double>(i % 7);
    before[p->name].assign(v, v + p->value.numel());
  }
  model.zero_grad();
  OptimizerStep s;
  s.lr = lr;
  s.decay_lr = lr;
  s.weight_decay = wd;
  RunContext ctx;
  model.optimizer_step(s, ctx);
  std::map<std::string, double> ratios;
  for (Param* p : model.params()) {
    const std::vector<double>& b = before[p->name];
    const double* a = p->value.data<double>();
    const double ratio = a[0] / b[0];
    for (int64_t i = 1; i < p->value.numel(); ++i)
      if (std::abs(a[i] / b[static_cast<size_t>(i)] - ratio) > 1e-15) return {{p->name, -1.0}};
    ratios[p->name] = ratio;
  }
  return ratios;
}

TEST(DecayGroups, OnlyTheChosenGroupsShrink) {
  const double lr = 0.1, wd = 0.5;  // factor 0.95
  const std::vector<std::pair<std::string, std::vector<ParamGroup>>> settings = {
      {"", {ParamGroup::kMatrix, ParamGroup::kEmbedding}},  // the default
      {"[\"matrix\"]", {ParamGroup::kMatrix}},
      {"[\"embedding\"]", {ParamGroup::kEmbedding}},
      {"[\"gain\"]", {ParamGroup::kGain}},
      // Gains decay when asked (docs/experiments.md): not refused, not silently skipped.
      {"[\"matrix\", \"gain\"]", {ParamGroup::kMatrix, ParamGroup::kGain}},
      {"[\"bias\", \"other\"]", {ParamGroup::kBias}},  // no built-in parameter is "other"
      {"[]", {}},
      {"[\"matrix\", \"embedding\", \"gain\", \"bias\", \"other\"]",
       {ParamGroup::kMatrix, ParamGroup::kEmbedding, ParamGroup::kGain, ParamGroup::kBias}},
  };
  for (const auto& [groups, decayed] : settings) {
    SCOPED_TRACE("weight_decay_groups = " + (groups.empty() ? std::string("(default)") : groups));
    const ResolvedCase rc = decay_case(groups);
    Model model(rc.model, test::builtin_registry(), 3);
    std::map<ParamGroup, int> seen;
    for (Param* p : model.params()) {
      EXPECT_EQ(p->group, expected_group(p->name)) << p->name;
      ++seen[p->group];
    }
    for (ParamGroup g : {ParamGroup::kMatrix, ParamGroup::kEmbedding, ParamGroup::kGain, ParamGroup::kBias})
      EXPECT_GT(seen[g], 0) << "the model has a parameter in group " << param_group_name(g);
    const auto ratios = decay_ratios(model, lr, wd);
    ASSERT_EQ(ratios.size(), model.params().size()) << ratios.begin()->first << " did not scale uniformly";
    for (Param* p : model.params()) {
      const bool decays = std::find(decayed.begin(), decayed.end(), p->group) != decayed.end();
      EXPECT_EQ(p->decay, decays) << p->name;
      if (decays) {
        EXPECT_NEAR(ratios.at(p->name), 1 - lr * wd, 1e-15) << p->name;
      } else {
        EXPECT_EQ(ratios.at(p->name), 1.0) << p->name << " must not move";
      }
    }
  }
}

TEST(DecayGroups, QkNormGainsAndBiasesAreGainsAndBiases) {
  const ResolvedCase rc = decay_case("[\"gain\"]");
  Model model(rc.model, test::builtin_registry(), 3);
  for (const char* name : {"blocks.0.attn.q_norm.weight", "blocks.1.attn.k_norm.weight"}) {
    const Param* p = model.find_param(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->group, ParamGroup::kGain);
    EXPECT_TRUE(p->decay);
  }
  const Param* b = model.find_param("blocks.0.attn.k_norm.bias");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->group, ParamGroup::kBias);
  EXPECT_FALSE(b->decay);
}

TEST(DecayGroups, UnknownGroupIsAnError) { EXPECT_THROW(decay_case("[\"weights\"]"), ConfigError); }

}  // namespace
}  // namespace decay_groups_test
}  // namespace bench
