// The `causal` attention's clip_qkv (OLMo 1.7): q, k and v clamped to [-c, c] after their
// projection and biases, before QK-norm. Against the definition written out (with biases, with a
// full-width QK-norm after the clamp, with GQA), a clip past every value is no clip bit for bit,
// the clamp bounds the logits by c^2 d_head / sqrt(d_head), gradients against central
// differences with about a third of the values clamped, an input that saturates every value has
// zero gradients, and a negative clip is an error at its key.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_rig.h"
#include "bench/interfaces.h"

namespace bench {
namespace attention_clip_test {
namespace {

using namespace test_attention;  // NOLINT: the attention rig

/// The fraction of the attention's projected q, k, v entries (x Wqkv^T) beyond +-clip.
double clamped_fraction(Attention& a, double clip) {
  const ModelDims& d = a.dims();
  const int64_t width = (d.n_heads + 2 * d.n_kv_heads) * d.d_head;
  int64_t beyond = 0;
  for (int64_t r = 0; r < a.rows(); ++r)
    for (int64_t o = 0; o < width; ++o) {
      double s = 0;
      for (int64_t i = 0; i < d.d_model; ++i) s += a.input()[r * d.d_model + i] * a.w("wqkv")[o * d.d_model + i];
      beyond += std::abs(s) > clip ? 1 : 0;
    }
  return static_cast<double>(beyond) / static_cast<double>(a.rows() * width);
}

TEST(AttentionClipQkv, ForwardMatchesTheDefinition) {
  // Inputs N(0, 1), weights N(0, 0.25), d_model 16: q, k, v entries have a standard deviation
  // near 2, so clip 1.5 clamps about half of them.
  for (const char* lines : {"n_kv_heads = 2\nattention = { type = \"causal\", clip_qkv = 1.5 }\n",
                            "attention = { type = \"causal\", clip_qkv = 1.5, bias = \"all\" }\n"}) {
    SCOPED_TRACE(lines);
    Attention a(lines);
    if (a.maybe("bqkv") != nullptr) a.randomize("bqkv", 5);
    const double f = clamped_fraction(a, 1.5);
    EXPECT_GT(f, 0.2);
    EXPECT_LT(f, 0.8);
    expect_near(a.forward(), reference_attention(a, QkRef::kNone, 0, 1.5), 1e-12, "clipped");
  }
  // The clamp comes before QK-norm (OLMo 2 normalizes what OLMo 1.7 clips: their order matters).
  Attention full(
      "attention = { type = \"causal\", clip_qkv = 1.5, qk_norm = \"rmsnorm\", qk_norm_scope = \"full\" }\n");
  full.randomize("q_norm.weight", 6);
  full.randomize("k_norm.weight", 7);
  expect_near(full.forward(), reference_attention(full, QkRef::kFull, 0, 1.5), 1e-12, "clip, then full QK-norm");
}

TEST(AttentionClipQkv, AClipPastEveryValueIsNoClip) {
  Attention plain("n_kv_heads = 2\n");
  Attention wide("n_kv_heads = 2\nattention = { type = \"causal\", clip_qkv = 1e9 }\n");
  EXPECT_EQ(wide.forward(), plain.forward());
  const std::vector<double> dy = random_like(static_cast<size_t>(plain.rows() * plain.dims().d_model), 8);
  EXPECT_EQ(wide.backward(dy), plain.backward(dy));
}

TEST(AttentionClipQkv, BoundsTheLogits) {
  // |q.k| <= c^2 d_head: the max logit is at most c^2 d_head / sqrt(d_head) = c^2 sqrt(d_head), and
  // with every entry saturated (inputs x100) some head meets it.
  Attention a("attention = { type = \"causal\", clip_qkv = 0.5 }\n");
  a.scale_input(100);
  const double bound = 0.25 * std::sqrt(static_cast<double>(a.dims().d_head));
  const double m = a.max_logit();
  EXPECT_LE(m, bound * (1 + 1e-12));
  EXPECT_GT(m, 0.5 * bound);
}

TEST(AttentionClipQkv, GradientsMatchCentralDifferences) {
  Attention a("n_kv_heads = 2\nattention = { type = \"causal\", clip_qkv = 1.5 }\n");
  EXPECT_GT(clamped_fraction(a, 1.5), 0.2) << "the clamp must be active for the check to mean something";
  RecordProperty("max_abs_error", ::testing::PrintToString(check_gradients(a, 41)));
}

TEST(AttentionClipQkv, SaturatedValuesPassNoGradient) {
  // Every q, k, v entry far past the clip: the output is constant near x, so dx and dWqkv are 0.
  Attention a("attention = { type = \"causal\", clip_qkv = 1e-3 }\n");
  a.scale_input(1e4);
  EXPECT_EQ(clamped_fraction(a, 1e-3), 1.0);
  const std::vector<double> dx = a.backward(random_like(static_cast<size_t>(a.rows() * a.dims().d_model), 9));
  for (const double g : dx) ASSERT_EQ(g, 0.0);
  const Param& w = a.param("wqkv");
  for (int64_t i = 0; i < w.shape.numel(); ++i) ASSERT_EQ(w.grad.data<double>()[i], 0.0) << i;
  EXPECT_NE(a.param("wo").grad.data<double>()[0], 0.0) << "the output projection still learns";
}

TEST(AttentionClipQkv, NegativeIsAnErrorAtItsKey) {
  const std::string lines = "attention = { type = \"causal\", clip_qkv = -1.0 }\n";
  try {
    validate_case(test::resolve_first(experiment(lines)), test::builtin_registry());
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.loc().line, 9) << e.what();
    EXPECT_EQ(e.loc().column, static_cast<int>(lines.find("clip_qkv")) + 1) << e.what();
    EXPECT_NE(std::string(e.what()).find("clip_qkv"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attention_clip_test
}  // namespace bench
