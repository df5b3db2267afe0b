// Stability probes and per-layer statistics of the model against closed forms and direct sums:
// attention entropy of uniform attention, RMS of normalized block outputs, the embedding RMS,
// per-block gradient/update/parameter squares.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "bench/interfaces.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench {
namespace probes_test {
namespace {

constexpr int64_t kSeq = 8;

std::string config(const std::string& norm_position) {
  return "[model]\nd_model = 16\nn_layers = 3\nn_heads = 2\nseq_len = 8\nbatch_size = 2\ndtype = \"float64\"\n"
         "norm_position = \"" +
         norm_position + "\"\n[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";
}

using test::Batch;
using test::batch_of;

std::map<std::string, double, std::less<>> probe(Model& m, const Batch& b) {
  RunContext ctx;
  ctx.probes = true;
  ctx.layer_probes = true;
  ctx.clear_probes();
  m.forward(b.in.data(), b.tg.data(), ctx);
  return ctx.probe_values();
}

TEST(Probes, UniformAttentionHasEntropyLogOfKeysAndZeroLogit) {
  const ResolvedCase rc = test::resolve_first(config("pre"));
  Model m(rc.model, test::builtin_registry(), 3);
  // q = 0 in every layer: every logit is 0, so causal attention at query t is uniform over
  // t + 1 keys, with entropy ln(t + 1).
  for (int layer = 0; layer < 3; ++layer) {
    Param* w = m.find_param("blocks." + std::to_string(layer) + ".attn.wqkv");
    ASSERT_NE(w, nullptr);
    double* v = w->value.data<double>();
    for (int64_t i = 0; i < int64_t{2} * 8 * 16; ++i) v[i] = 0;  // rows [0, H dh) of [qkv, d_model] are q
  }
  const auto p = probe(m, batch_of(rc));
  double expected = 0;
  for (int64_t t = 0; t < kSeq; ++t) expected += std::log(static_cast<double>(t + 1)) / kSeq;
  for (int layer = 0; layer < 3; ++layer) {
    EXPECT_NEAR(p.at("attn_entropy/" + std::to_string(layer)), expected, 1e-12);
    EXPECT_NEAR(p.at("max_attn_logit/" + std::to_string(layer)), 0.0, 1e-12);
  }
  EXPECT_NEAR(p.at("attn_entropy"), expected, 1e-12);
}

TEST(Probes, MaxLogitIsTheMaxOverLayersAndEntropyIsBounded) {
  const ResolvedCase rc = test::resolve_first(config("pre"));
  Model m(rc.model, test::builtin_registry(), 4);
  const auto p = probe(m, batch_of(rc));
  const double overall = p.at("max_attn_logit");
  const double by_layer = std::max({p.at("max_attn_logit/0"), p.at("max_attn_logit/1"), p.at("max_attn_logit/2")});
  EXPECT_EQ(overall, by_layer);
  double uniform = 0;
  for (int64_t t = 0; t < kSeq; ++t) uniform += std::log(static_cast<double>(t + 1)) / kSeq;
  for (int layer = 0; layer < 3; ++layer) {
    const double h = p.at("attn_entropy/" + std::to_string(layer));
    EXPECT_GT(h, 0.0);
    EXPECT_LE(h, uniform + 1e-12);  // uniform attention has the largest entropy
  }
}

TEST(Probes, PostNormBlockOutputsHaveUnitRmsAndEmbedRmsIsTheTableRows) {
  const ResolvedCase rc = test::resolve_first(config("post"));
  Model m(rc.model, test::builtin_registry(), 5);
  const Batch b = batch_of(rc);
  const auto p = probe(m, b);
  // Post-norm: the stream after each block is RMSNorm(x + f(x)) with gain 1, whose RMS is
  // sqrt(ms / (ms + eps)) = 1 - O(eps / ms).
  for (int layer = 0; layer < 3; ++layer) EXPECT_NEAR(p.at("block_rms/" + std::to_string(layer)), 1.0, 1e-4);
  // h_0 is the embedding rows of the input tokens (RoPE adds nothing to the stream).
  const Param* e = m.find_param("embed.weight");
  ASSERT_NE(e, nullptr);
  double ss = 0;
  for (int32_t tok : b.in)
    for (int64_t j = 0; j < 16; ++j) ss += std::pow(e->value.data<double>()[int64_t{tok} * 16 + j], 2);
  EXPECT_NEAR(p.at("embed_rms"), std::sqrt(ss / static_cast<double>(b.in.size() * 16)), 1e-12);
}

TEST(Probes, LayerSquaresSumTheBlocksParameters) {
  const ResolvedCase rc = test::resolve_first(config("pre"));
  Model m(rc.model, test::builtin_registry(), 6);
  const Batch b = batch_of(rc);
  RunContext ctx;
  m.zero_grad();
  m.forward(b.in.data(), b.tg.data(), ctx);
  m.backward(ctx);
  const auto grads = m.squares_by_layer(LayerQuantity::kGradient);
  const auto values = m.squares_by_layer(LayerQuantity::kValue);
  m.snapshot_parameters();  // a copy in the model's memory; the update is summed there
  EXPECT_THROW(Model(rc.model, test::builtin_registry(), 6).squares_by_layer(LayerQuantity::kUpdate), Error);
  OptimizerStep opt;
  opt.lr = 1e-2;
  opt.eps = 1e-8;
  m.optimizer_step(opt, ctx);
  const auto updates = m.squares_by_layer(LayerQuantity::kUpdate);
  EXPECT_THROW(m.squares_by_layer(LayerQuantity::kUpdate), Error) << "the snapshot is consumed";
  ASSERT_EQ(grads.size(), 3u);
  for (int layer = 0; layer < 3; ++layer) {
    double g = 0, v = 0, u = 0;
    int64_t n = 0;
    for (const Param* p : m.params()) {
      if (Model::layer_of(p->name) != layer) continue;
      const double* pv = p->value.data<double>();
      const double* pg = p->grad.data<double>();
      for (int64_t i = 0; i < p->value.numel(); ++i) {
        g += pg[i] * pg[i];
        // Adam's first step, bias-corrected, no decay: lr * g / (|g| + eps) per entry.
        const double step = opt.lr * pg[i] / (std::abs(pg[i]) + opt.eps);
        u += step * step;
        v += (pv[i] + step) * (pv[i] + step);  // the value before the step
        ++n;
      }
    }
    const auto l = static_cast<size_t>(layer);
    EXPECT_NEAR(grads[l].sum_squares, g, 1e-12 * g);
    EXPECT_NEAR(values[l].sum_squares, v, 1e-9 * v);
    EXPECT_NEAR(updates[l].sum_squares, u, 1e-6 * u);
    EXPECT_EQ(grads[l].count, n);
  }
  double all = 0;
  for (const Param* p : m.params())
    for (int64_t i = 0; i < p->value.numel(); ++i) all += std::pow(p->value.data<double>()[i], 2);
  EXPECT_NEAR(m.parameter_norm(ctx), std::sqrt(all), 1e-12 * std::sqrt(all));
  EXPECT_EQ(Model::layer_of("blocks.12.attn.wqkv"), 12);
  EXPECT_EQ(Model::layer_of("blocks.x"), -1);
  EXPECT_EQ(Model::layer_of("embed.weight"), -1);
}

}  // namespace
}  // namespace probes_test
}  // namespace bench
