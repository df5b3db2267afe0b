// The `causal` attention component on its own (float64, set up in a test::ComponentRig),
// against closed forms: n_kv_heads = n_heads is MHA; GQA equals MHA with each kv head's weights
// repeated over its group (outputs and summed gradients); MQA gives equal heads when the query
// projections are equal; a window covering the sequence is full causal attention; the
// local/global pattern gives each layer its window; QK-norm makes every q and k head unit-RMS
// (the max attention logit of a head whose k equals its q is exactly sqrt(d_head) at any input
// scale, with RoPE too); the soft-cap bounds the logits; dropout acts only while training, with
// masks that follow (seed, step, layer); bad patterns are errors at their key; and the cuDNN
// kernel is refused at its key where it cannot run (here: everywhere, on the CPU); the CPU's tiled
// kernel matches the materializing one. Linear biases
// and the full-width QK-norm against the definition written out, and the closed forms of biases:
// a key bias cancels in the softmax, a value bias passes through it to Wo b_v, an output bias adds.
// Gemma 2's query_pre_attn_scalar N against the definition with the scale 1 / sqrt(N) (N = d_head
// is the default bit for bit), its gradients against central differences, a negative N refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attention_rig.h"
#include "bench/attention_core.h"
#include "bench/interfaces.h"
#include "bench/random.h"
#include "support/component_rig.h"

namespace bench {
namespace attention_test {
namespace {

using namespace test_attention;  // NOLINT: the attention rig

TEST(AttentionHeads, KvHeadsEqualToHeadsIsMha) {
  Attention def(""), explicit_mha("n_kv_heads = 4\n");
  EXPECT_EQ(def.dims().n_kv_heads, 4);
  EXPECT_EQ(def.param("wqkv").shape, explicit_mha.param("wqkv").shape);
  EXPECT_EQ(def.forward(), explicit_mha.forward());
}

TEST(AttentionHeads, GqaEqualsMhaWithRepeatedKvWeights) {
  // GQA (4 query heads, 2 kv heads) against MHA whose kv heads 2g and 2g + 1 both carry the
  // weights of GQA's kv head g: the same function, so the same outputs and input gradients,
  // and GQA's kv weight gradients are the sums over each group.
  for (const char* extra : {"", "attention = { type = \"causal\", qk_norm = \"rmsnorm\" }\n"}) {
    SCOPED_TRACE(extra);
    Attention gqa(std::string("n_kv_heads = 2\nposition = \"rope\"\n") + extra);
    Attention mha(std::string("position = \"rope\"\n") + extra);
    const int64_t dm = 16, dh = 4, heads = 4;
    const double* wg = gqa.w("wqkv");  // rows: q heads (16), k heads (8), v heads (8)
    double* wm = mha.w("wqkv");        // rows: q heads (16), k heads (16), v heads (16)
    for (int64_t r = 0; r < heads * dh; ++r) std::copy_n(wg + r * dm, dm, wm + r * dm);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < dh; ++d) {
        const int64_t g = h / 2;
        std::copy_n(wg + ((heads + g) * dh + d) * dm, dm, wm + ((heads + h) * dh + d) * dm);
        std::copy_n(wg + ((heads + 2 + g) * dh + d) * dm, dm, wm + ((2 * heads + h) * dh + d) * dm);
      }
    std::copy_n(gqa.w("wo"), dm * dm, mha.w("wo"));
    expect_near(gqa.forward(), mha.forward(), 1e-13, "output");
    const auto dy = random_like(static_cast<size_t>(gqa.rows() * dm), 4);
    expect_near(gqa.backward(dy), mha.backward(dy), 1e-12, "dx");
    const double* gg = gqa.param("wqkv").grad.data<double>();
    const double* gm = mha.param("wqkv").grad.data<double>();
    for (int64_t i = 0; i < heads * dh * dm; ++i) ASSERT_NEAR(gg[i], gm[i], 1e-12) << "dWq " << i;
    for (int64_t g = 0; g < 2; ++g)
      for (int64_t i = 0; i < dh * dm; ++i)
        for (int64_t part : {heads, heads + 2}) {  // k rows, then v rows of kv head g
          const int64_t mha_part = part == heads ? heads : 2 * heads;
          const double sum = gm[((mha_part + 2 * g) * dh) * dm + i] + gm[((mha_part + 2 * g + 1) * dh) * dm + i];
          ASSERT_NEAR(gg[((part + g) * dh) * dm + i], sum, 1e-12) << "kv head " << g << " part " << part;
        }
  }
}

TEST(AttentionHeads, MqaSharesOneKeyAndValueHead) {
  // With one kv head, every query head sees the same keys and values: equal query
  // projections give equal head outputs. Under MHA the same queries meet different keys.
  for (int64_t kv : {1, 4}) {
    Attention a("n_kv_heads = " + std::to_string(kv) + "\n");
    a.identity_output();
    double* wqkv = a.w("wqkv");
    for (int64_t h = 1; h < 4; ++h) std::copy_n(wqkv, 4 * 16, wqkv + h * 4 * 16);  // q rows of head 0
    const auto y = a.forward();
    double max_diff = 0;
    for (int64_t r = 0; r < a.rows(); ++r)
      for (int64_t h = 1; h < 4; ++h)
        for (int64_t d = 0; d < 4; ++d) max_diff = std::max(max_diff, std::abs(y[r * 16 + h * 4 + d] - y[r * 16 + d]));
    if (kv == 1) {
      EXPECT_EQ(max_diff, 0.0);
    } else {
      EXPECT_GT(max_diff, 1e-3) << "MHA heads have their own keys";
    }
  }
}

TEST(AttentionWindow, WindowCoveringTheSequenceIsFullCausal) {
  Attention full("");
  const auto y0 = full.forward();
  for (int64_t window : {12, 13, 1000}) {
    Attention a("attention = { type = \"causal\", window = " + std::to_string(window) + " }\n");
    EXPECT_EQ(a.forward(), y0) << window;
  }
  Attention narrow("attention = { type = \"causal\", window = 3 }\n");
  EXPECT_NE(narrow.forward(), y0);
}

TEST(AttentionWindow, PatternGivesEachLayerItsWindow) {
  // "LLG" cycled over six layers: layers 0, 1, 3, 4 use the window of 3 tokens, 2 and 5 are global.
  const std::string pattern = "attention = { type = \"causal\", window = 3, pattern = \"LLG\" }\n";
  for (int layer = 0; layer < 6; ++layer) {
    SCOPED_TRACE(layer);
    const bool local = layer % 3 != 2;
    Attention p(pattern, layer);
    Attention local_ref("attention = { type = \"causal\", window = 3 }\n", layer);
    Attention global_ref("", layer);
    const auto y = p.forward();
    EXPECT_EQ(y == local_ref.forward(), local);
    EXPECT_EQ(y == global_ref.forward(), !local);
    // Declared work follows the window: fewer kept pairs on local layers.
    EXPECT_EQ(p.sublayer().cost().flops_forward, (local ? local_ref : global_ref).sublayer().cost().flops_forward);
  }
}

TEST(AttentionQkNorm, HeadsAreUnitRmsSoTheSelfLogitIsSqrtDHead) {
  // With k weights equal to q weights, head h's logit of token t with itself is
  // scale * |norm(q)|^2 = |norm(q)|^2 / sqrt(d_head) = sqrt(d_head) when norm(q) has unit RMS,
  // and by Cauchy-Schwarz no logit exceeds it: the max attention logit is exactly sqrt(d_head)
  // (up to eps), whatever the scale of the input. RoPE rotates q_t and k_t alike, keeping it.
  for (const char* norm : {"rmsnorm", "layernorm"})
    for (const char* pos : {"none", "rope"}) {
      SCOPED_TRACE(std::string(norm) + " " + pos);
      Attention a(std::string("position = \"") + pos + "\"\nattention = { type = \"causal\", qk_norm = \"" + norm +
                  "\" }\n");
      std::copy_n(a.w("wqkv"), 16 * 16, a.w("wqkv") + int64_t{16 * 16});  // k rows = q rows
      EXPECT_NEAR(a.max_logit(), 2.0, 1e-6);
      a.scale_input(1e3);
      EXPECT_NEAR(a.max_logit(), 2.0, 1e-6);
      a.w("q_norm.weight")[0] = a.w("q_norm.weight")[1] = a.w("q_norm.weight")[2] = a.w("q_norm.weight")[3] = 2.0;
      EXPECT_NEAR(a.max_logit(), 4.0, 1e-6) << "the gain multiplies the unit-RMS head";
    }
  Attention plain("attention = { type = \"causal\" }\n");
  std::copy_n(plain.w("wqkv"), 16 * 16, plain.w("wqkv") + int64_t{16 * 16});
  const double m = plain.max_logit();
  plain.scale_input(10);
  EXPECT_NEAR(plain.max_logit(), 100 * m, 1e-9 * m) << "without QK-norm the logits grow with the input squared";
}

TEST(AttentionQkNorm, DeclaresGainsAndOptionalBiases) {
  Attention rms("attention = { type = \"causal\", qk_norm = \"rmsnorm\" }\n");
  EXPECT_EQ(rms.param("q_norm.weight").shape, (Shape{4}));
  EXPECT_EQ(rms.param("k_norm.weight").group, ParamGroup::kGain);
  EXPECT_THROW(rms.param("q_norm.bias"), Error);
  Attention ln("attention = { type = \"causal\", qk_norm = \"layernorm\", qk_norm_bias = true }\n");
  EXPECT_EQ(ln.param("k_norm.bias").group, ParamGroup::kBias);
  Attention none("");
  EXPECT_THROW(none.param("q_norm.weight"), Error);
}

TEST(AttentionBias, DeclaresZeroBiasesWithoutDecay) {
  Attention none(""), qkv("n_kv_heads = 2\nattention = { type = \"causal\", bias = \"qkv\" }\n"),
      all("attention = { type = \"causal\", bias = \"all\" }\n");
  EXPECT_EQ(none.maybe("bqkv"), nullptr);
  EXPECT_EQ(none.maybe("bo"), nullptr);
  EXPECT_EQ(qkv.param("bqkv").shape, (Shape{16 + 2 * 8}));  // 4 query heads, 2 kv heads of 4
  EXPECT_EQ(qkv.maybe("bo"), nullptr) << "qkv: q, k and v only (Qwen2)";
  EXPECT_EQ(all.param("bqkv").shape, (Shape{48}));
  EXPECT_EQ(all.param("bo").shape, (Shape{16}));
  for (const char* n : {"bqkv", "bo"}) {
    EXPECT_EQ(all.param(n).group, ParamGroup::kBias) << n;
    EXPECT_EQ(all.param(n).init.kind, Init::Kind::kZeros) << n;
  }
  // Zero biases: the function of the unbiased attention (the weights are drawn by name).
  EXPECT_EQ(all.forward(), none.forward());
}

TEST(AttentionBias, ForwardMatchesTheDefinition) {
  for (const char* kv : {"4", "2", "1"})
    for (const char* bias : {"qkv", "all"}) {
      SCOPED_TRACE(std::string(bias) + " kv " + kv);
      Attention a(std::string("n_kv_heads = ") + kv + "\nattention = { type = \"causal\", bias = \"" + bias + "\" }\n");
      a.randomize("bqkv", 21);
      if (std::string(bias) == "all") a.randomize("bo", 22);
      expect_near(a.forward(), reference_attention(a, QkRef::kNone), 1e-12, "output");
    }
}

TEST(AttentionBias, KeyBiasCancelsValueBiasPassesThroughOutputBiasAdds) {
  // softmax(q.(k_j + b)) = softmax(q.k_j + q.b): a shift per query, so a key bias changes nothing.
  // The probabilities sum to one, so a value bias b_v adds Wo b_v to every output row; the output
  // bias adds itself.
  Attention plain("attention = { type = \"causal\", bias = \"all\" }\n");
  const std::vector<double> y0 = plain.forward();
  const int64_t dm = 16;
  Attention kb("attention = { type = \"causal\", bias = \"all\" }\n");
  for (int64_t i = 16; i < 32; ++i) kb.w("bqkv")[i] = 0.7 * static_cast<double>(i % 5) - 1.0;
  expect_near(kb.forward(), y0, 1e-12, "key bias");
  Attention vb("attention = { type = \"causal\", bias = \"all\" }\n");
  Attention ob("attention = { type = \"causal\", bias = \"all\" }\n");
  std::vector<double> shift(dm, 0.0);
  for (int64_t i = 0; i < 16; ++i) {
    vb.w("bqkv")[32 + i] = 0.3 * static_cast<double>(i) - 2.0;
    ob.w("bo")[i] = 0.1 * static_cast<double>(i * i) - 1.0;
  }
  for (int64_t o = 0; o < dm; ++o)
    for (int64_t i = 0; i < 16; ++i) shift[o] += vb.w("wo")[o * 16 + i] * vb.w("bqkv")[32 + i];
  std::vector<double> want_v = y0, want_o = y0;
  for (size_t i = 0; i < y0.size(); ++i) {
    want_v[i] += shift[i % dm];
    want_o[i] += ob.w("bo")[i % dm];
  }
  expect_near(vb.forward(), want_v, 1e-12, "value bias");
  expect_near(ob.forward(), want_o, 1e-12, "output bias");
  Attention qb("attention = { type = \"causal\", bias = \"all\" }\n");
  for (int64_t i = 0; i < 16; ++i) qb.w("bqkv")[i] = 1.0;
  double diff = 0;
  const std::vector<double> yq = qb.forward();
  for (size_t i = 0; i < y0.size(); ++i) diff = std::max(diff, std::abs(yq[i] - y0[i]));
  EXPECT_GT(diff, 1e-3) << "a query bias changes the scores";
}

TEST(AttentionBias, BadValuesAreErrorsAtTheirKey) {
  for (const char* lines : {"attention = { type = \"causal\", bias = \"q\" }\n",
                            "attention = { type = \"causal\", qk_norm_scope = \"row\", qk_norm = \"rmsnorm\" }\n"}) {
    SCOPED_TRACE(lines);
    try {
      validate_case(test::resolve_first(experiment(lines)), test::builtin_registry());
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.loc().line, 9) << e.what();
    }
  }
}

TEST(AttentionQkNorm, FullWidthNormalizesTheWholeQAndK) {
  // Gains of the whole widths (OLMo 2), against the definition, with GQA and random gains.
  for (const char* kv : {"4", "2"}) {
    SCOPED_TRACE(kv);
    Attention a(
        std::string("n_kv_heads = ") + kv +
        "\nattention = { type = \"causal\", qk_norm = \"rmsnorm\", qk_norm_scope = \"full\", bias = \"qkv\" }\n");
    EXPECT_EQ(a.param("q_norm.weight").shape, (Shape{16}));
    EXPECT_EQ(a.param("k_norm.weight").shape, (Shape{4 * std::stoll(kv)}));
    a.randomize("bqkv", 31);
    for (const char* g : {"q_norm.weight", "k_norm.weight"})
      for (int64_t i = 0; i < a.param(g).shape.numel(); ++i) a.w(g)[i] = 1.0 + 0.1 * static_cast<double>(i % 7);
    expect_near(a.forward(), reference_attention(a, QkRef::kFull), 1e-12, "full width");
    // Per head differs: the heads of one row are not each unit-RMS under the full norm.
    Attention h(std::string("n_kv_heads = ") + kv + "\nattention = { type = \"causal\", qk_norm = \"rmsnorm\" }\n");
    expect_near(h.forward(), reference_attention(h, QkRef::kHead), 1e-12, "per head");
  }
  // One head: the whole q is the head, and the two scopes are one function.
  Attention one_full(
      "n_heads = 1\nattention = { type = \"causal\", qk_norm = \"layernorm\", qk_norm_scope = \"full\" }\n");
  Attention one_head("n_heads = 1\nattention = { type = \"causal\", qk_norm = \"layernorm\" }\n");
  EXPECT_EQ(one_full.forward(), one_head.forward());
}

TEST(AttentionQkNorm, FullWidthWithoutAQkNormIsAnErrorAtItsKey) {
  try {
    validate_case(test::resolve_first(experiment("attention = { type = \"causal\", qk_norm_scope = \"full\" }\n")),
                  test::builtin_registry());
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.loc().line, 9) << e.what();
    EXPECT_NE(std::string(e.what()).find("qk_norm_scope = \"full\" needs a QK-norm"), std::string::npos) << e.what();
  }
}

TEST(AttentionSoftcap, BoundsTheLogits) {
  Attention a("attention = { type = \"causal\", softcap = 5.0 }\n");
  a.scale_input(100);
  const double m = a.max_logit();
  EXPECT_LE(m, 5.0);
  EXPECT_GT(m, 4.9) << "large logits saturate at the cap";
}

TEST(AttentionDropout, OnlyWhileTrainingWithMasksFromSeedAndStep) {
  Attention plain(""), drop("dropout_attention = 0.5\n");
  const auto y0 = plain.forward();
  EXPECT_EQ(drop.forward(), y0) << "evaluation: no dropout";
  RunContext ctx;
  ctx.training = true;
  ctx.seed = 1;
  ctx.step = 7;
  const auto a = drop.forward(ctx);
  EXPECT_NE(a, y0);
  EXPECT_EQ(drop.forward(ctx), a) << "the same (seed, step): the same mask";
  ctx.step = 8;
  EXPECT_NE(drop.forward(ctx), a);
  RunContext train_plain;
  train_plain.training = true;
  EXPECT_EQ(plain.forward(train_plain), y0) << "rate 0 trains without a mask";
  // Another layer with the same weights (they are drawn by parameter name here) draws its own mask.
  Attention layer1("dropout_attention = 0.5\n", 1);
  EXPECT_EQ(layer1.forward(), y0);
  ctx.step = 7;
  EXPECT_NE(layer1.forward(ctx), a) << "one mask site per layer";
}

TEST(AttentionPattern, BadPatternsAreErrorsAtTheirKey) {
  struct Bad {
    std::string lines;
    int line;  // of the offending key in the experiment text
    std::string says;
  };
  // experiment() puts 8 lines before these (position included, since the lines do not set it).
  const std::vector<Bad> bad = {
      {"attention = { type = \"causal\", window = 4, pattern = \"LLX\" }\n", 9, "only L (local) and G"},
      {"attention = { type = \"causal\", window = 4, pattern = \"\" }\n", 9, "must not be empty"},
      {"attention = { type = \"causal\", pattern = \"LG\" }\n", 9, "set window > 0"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.lines);
    try {
      const ResolvedCase rc = test::resolve_first(experiment(b.lines));
      validate_case(rc, test::builtin_registry());
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.loc().line, b.line) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
    }
  }
  // Global-only patterns need no window.
  const ResolvedCase ok = test::resolve_first(experiment("attention = { type = \"causal\", pattern = \"G\" }\n"));
  EXPECT_NO_THROW(validate_case(ok, test::builtin_registry()));
}

// kernel = "cudnn" (the cuDNN SDPA baseline) runs on CUDA in bf16 only: on the CPU the model's
// setup refuses it at the key, as the target answers supports(); `bench validate` reports what cuDNN's fused attention
// cannot run (soft-capping, dropout, d_head) at the key too, from the shape alone.
TEST(AttentionKernel, CudnnIsRefusedAtItsKeyWhereItCannotRun) {
  try {
    Attention a("attention = { type = \"causal\", kernel = \"cudnn\" }\n");
    ADD_FAILURE() << "set up kernel = cudnn on the cpu";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.loc().line, 9) << e.what();
    // The component, the kernel and the device, and why.
    EXPECT_NE(
        std::string(e.what()).find("kernel = \"cudnn\": the attention at blocks.0.attn: kernel attention_cudnn_forward "
                                   "cannot run on cpu in float64: it runs on CUDA only"),
        std::string::npos)
        << e.what();
  }
  struct Bad {
    std::string lines;
    int line;  // of the attention table: experiment() puts 7 lines before these (they set d_model)
    std::string says;
  };
  const std::vector<Bad> bad = {
      {"d_model = 64\nattention = { type = \"causal\", kernel = \"cudnn\", softcap = 30.0 }\n", 9,
       "soft-capping (softcap = 30)"},
      {"d_model = 64\ndropout_attention = 0.1\nattention = { type = \"causal\", kernel = \"cudnn\" }\n", 10,
       "dropout on the probabilities (rate 0.1)"},
      {"d_model = 16\nattention = { type = \"causal\", kernel = \"cudnn\" }\n", 9, "d_head = 4 is not a multiple of 8"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.lines);
    try {
      validate_case(test::resolve_first(experiment(b.lines)), test::builtin_registry());
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.loc().line, b.line) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
    }
  }
  // d_head 16, a window: a variant cuDNN runs (on a GPU). The default kernel, auto, is ours on the
  // CPU, where cuDNN cannot run: the same forward bit for bit.
  EXPECT_NO_THROW(validate_case(
      test::resolve_first(
          experiment("d_model = 64\nattention = { type = \"causal\", kernel = \"cudnn\", window = 4 }\n")),
      test::builtin_registry()));
  Attention ours("attention = { type = \"causal\", kernel = \"ours\" }\n"), def(""),
      autok("attention = { type = \"causal\", kernel = \"auto\" }\n");
  EXPECT_EQ(ours.forward(), def.forward());
  EXPECT_EQ(ours.forward(), autok.forward());
}

/// The attentions two paths are compared on, each an open `attention = {` table for the key that
/// picks the path: MHA; GQA with a window and a soft-cap; MQA with a local/global pattern.
const std::vector<std::string> path_variants = {
    "attention = { type = \"causal\", ",
    "n_kv_heads = 2\nattention = { type = \"causal\", window = 5, softcap = 2.0, ",
    "n_kv_heads = 1\nattention = { type = \"causal\", pattern = \"LG\", window = 3, ",
};

/// Two paths of one attention (a and b, built from the same lines) agree to float64 rounding in
/// inference with the probes on: outputs, the max-logit and entropy probes, input and weight
/// gradients (dy drawn from `seed`). Returns b's outputs.
std::vector<double> expect_paths_agree(Attention& a, Attention& b, uint64_t seed) {
  a.scale_input(2.0);
  b.scale_input(2.0);
  RunContext ca, cb;
  ca.training = cb.training = false;
  ca.layer_probes = cb.layer_probes = true;
  const std::vector<double> ya = a.forward(ca), yb = b.forward(cb);
  expect_near(ya, yb, 1e-13, "y");
  for (const char* probe : {"max_attn_logit", "attn_entropy"}) {
    EXPECT_NEAR(ca.probe_values().at(probe), cb.probe_values().at(probe), 1e-12) << probe;
  }
  const auto dy = random_like(ya.size(), seed);
  expect_near(a.backward(dy), b.backward(dy), 1e-12, "dx");
  for (const char* w : {"wqkv", "wo"}) {
    const Param& pa = a.param(w);
    const Param& pb = b.param(w);
    const std::vector<double> ga(pa.grad.data<double>(), pa.grad.data<double>() + pa.shape.numel());
    const std::vector<double> gb(pb.grad.data<double>(), pb.grad.data<double>() + pb.shape.numel());
    expect_near(ga, gb, 1e-12, w);
  }
  return yb;
}

/// Dropout while training: the same counter-based mask on both paths (built with
/// dropout_attention > 0), and it acts (a's outputs differ from its inference outputs).
void expect_same_dropout(Attention& a, Attention& b) {
  RunContext ca, cb;
  ca.seed = cb.seed = 5;
  ca.step = cb.step = 3;
  const std::vector<double> ya = a.forward(ca), yb = b.forward(cb);
  expect_near(ya, yb, 1e-13, "y with dropout");
  RunContext eval;
  eval.training = false;
  EXPECT_GT(std::abs(ya[0] - a.forward(eval)[0]) + std::abs(ya[5] - a.forward(eval)[5]), 1e-6) << "dropout acted";
}

// kernel = "tiled" (the CPU's flash-style path, kernels/attention_tiled.h) computes what the
// materializing path ("ours" on the CPU) computes, to float64 rounding: outputs, the max-logit and
// entropy probes (recomputed from qkv: no probabilities are kept), input and weight gradients, and
// the dropped outputs of a training forward (the same mask). At this size "auto" is the
// materializing path, bit for bit.
TEST(AttentionKernel, TiledMatchesTheMaterializingPath) {
  for (const std::string& v : path_variants) {
    SCOPED_TRACE(v);
    Attention tiled(v + "kernel = \"tiled\" }\n", 1), ours(v + "kernel = \"ours\" }\n", 1),
        autok(v + "kernel = \"auto\" }\n", 1);
    const std::vector<double> yo = expect_paths_agree(tiled, ours, 17);
    autok.scale_input(2.0);
    RunContext ca;
    ca.training = false;
    ca.layer_probes = true;
    EXPECT_EQ(autok.forward(ca), yo) << "auto is the materializing path here";
  }
  // Dropout while training: the same counter-based mask on both paths.
  const std::string drop = "dropout_attention = 0.3\nattention = { type = \"causal\", kernel = \"";
  Attention tiled(drop + "tiled\" }\n"), ours(drop + "ours\" }\n");
  expect_same_dropout(tiled, ours);
}

// core = "fused" (tile programs on the qkv rows in place, kernels/attention_fused.h; here on the
// CPU executor in float64) computes what the materializing core computes, to float64 rounding:
// outputs, the max-logit and entropy probes (the entropy recomputed from qkv), input and weight
// gradients with GQA, MQA, windows, a local/global pattern and a cap, and the dropped outputs of
// a training forward (the same mask).
TEST(AttentionCore, FusedMatchesTheMaterializingCore) {
  for (const std::string& v : path_variants) {
    SCOPED_TRACE(v);
    Attention fused(v + "core = \"fused\" }\n", 1), materializing(v + "core = \"materializing\" }\n", 1);
    expect_paths_agree(fused, materializing, 19);
  }
  // Dropout while training: the same counter-based mask in both cores.
  const std::string drop = "n_kv_heads = 2\ndropout_attention = 0.3\nattention = { type = \"causal\", core = \"";
  Attention fused(drop + "fused\" }\n"), materializing(drop + "materializing\" }\n");
  expect_same_dropout(fused, materializing);
}

// The frame and its cores: `core` names one (materializing, tiled on the CPU), equal to what the
// older `kernel` key selects, bit for bit, and auto (either key) is the materializing core at
// this size; a core that cannot run here, an unknown core and both keys set are errors at the key.
TEST(AttentionCore, TheCoreKeySelectsWhatTheKernelKeyDid) {
  const std::string v = "n_kv_heads = 2\nattention = { type = \"causal\", window = 5, softcap = 2.0, ";
  Attention materializing(v + "core = \"materializing\" }\n"), ours(v + "kernel = \"ours\" }\n"),
      autok(v + "core = \"auto\" }\n"), tiled(v + "core = \"tiled\" }\n"), tiled_kernel(v + "kernel = \"tiled\" }\n");
  RunContext cm, co, ca, ct, ck;
  for (RunContext* c : {&cm, &co, &ca, &ct, &ck}) c->layer_probes = true;
  const std::vector<double> y = materializing.forward(cm);
  EXPECT_EQ(y, ours.forward(co));
  EXPECT_EQ(y, autok.forward(ca));
  EXPECT_EQ(tiled.forward(ct), tiled_kernel.forward(ck));
  expect_near(tiled.forward(ct), y, 1e-13, "tiled");
  EXPECT_EQ(cm.probe_values(), co.probe_values());
  const auto dy = random_like(y.size(), 5);
  EXPECT_EQ(materializing.backward(dy), ours.backward(dy));
  struct Bad {
    std::string lines;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {"attention = { type = \"causal\", core = \"flash\" }\n",
       "core = \"flash\": the attention at blocks.0.attn: our flash kernels run on CUDA in bfloat16 and float32 only"},
      {"attention = { type = \"causal\", core = \"flash_wgmma\" }\n",
       "core = \"flash_wgmma\": the attention at blocks.0.attn: the wgmma flash forward runs on CUDA in bfloat16 only"},
      {"attention = { type = \"causal\", core = \"flash_wgmma_ws\" }\n",
       "core = \"flash_wgmma_ws\": the attention at blocks.0.attn: the wgmma flash forward runs on CUDA in bfloat16 "
       "only"},
      {"attention = { type = \"causal\", core = \"nope\" }\n",
       "core = \"nope\" is not an attention core: the cores are auto, "},
      {"attention = { type = \"causal\", core = \"tiled\", kernel = \"ours\" }\n",
       "set the attention core with one key"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.lines);
    try {
      Attention a(b.lines);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.loc().line, 9) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
    }
  }
}

// What `core = "auto"` sees of the flash core (its answers before it is made): it runs float32 on
// CUDA (our float32 flash kernels, d_head 64 or 128) and bf16 as before, never on the CPU or the
// emulated device, nor in float64; cuDNN, which auto tries first, never takes float32, so auto's
// float32 choice on CUDA is flash, and where flash refuses (d_head 96) the fused core after it.
TEST(AttentionCore, FlashTakesFloat32OnCudaOnly) {
  (void)test::builtin_registry();
  const AttentionCoreInfo* flash = find_attention_core("flash");
  const AttentionCoreInfo* cudnn = find_attention_core("cudnn");
  ASSERT_NE(flash, nullptr);
  ASSERT_NE(cudnn, nullptr);
  kernels::AttentionArgs a{16, 256, 4, 4, 64, 0.125};
  const AttentionCoreQuery cuda32{tile::Backend::kCuda, DType::kFloat32, a};
  EXPECT_EQ(flash->unsupported(cuda32), "");
  EXPECT_TRUE(flash->preferred(cuda32));
  EXPECT_NE(cudnn->unsupported(cuda32), "");
  EXPECT_EQ(flash->unsupported({tile::Backend::kCuda, DType::kBFloat16, a}), "");
  for (const AttentionCoreQuery& q : {AttentionCoreQuery{tile::Backend::kCuda, DType::kFloat64, a},
                                      AttentionCoreQuery{tile::Backend::kCpu, DType::kFloat32, a},
                                      AttentionCoreQuery{tile::Backend::kEmulated, DType::kFloat32, a}})
    EXPECT_EQ(flash->unsupported(q), "our flash kernels run on CUDA in bfloat16 and float32 only");
  a.d_head = 96;
  EXPECT_NE(flash->unsupported({tile::Backend::kCuda, DType::kFloat32, a}).find("d_head = 96"), std::string::npos);
}

// The wgmma forwards (not yet run on a GPU: the one in step and the warp-specialized one) are
// never auto's choice, wherever they could run; off CUDA in bf16 they say where they run.
TEST(AttentionCore, FlashWgmmaIsNeverPreferred) {
  (void)test::builtin_registry();
  for (const char* name : {"flash_wgmma", "flash_wgmma_ws"}) {
    SCOPED_TRACE(name);
    const AttentionCoreInfo* wgmma = find_attention_core(name);
    ASSERT_NE(wgmma, nullptr);
    const kernels::AttentionArgs a{4, 4096, 16, 16, 128, 0.125};
    EXPECT_FALSE(wgmma->preferred({tile::Backend::kCuda, DType::kBFloat16, a}));
    EXPECT_EQ(wgmma->unsupported({tile::Backend::kCpu, DType::kBFloat16, a}),
              "the wgmma flash forward runs on CUDA in bfloat16 only");
    EXPECT_NE(wgmma->unsupported({tile::Backend::kCuda, DType::kFloat32, a}), "");
  }
}

TEST(AttentionQueryPreAttnScalar, ScalesTheLogitsByOneOverItsRoot) {
  // d_head 4: the default scale is 1/2; Gemma 2 sets 256 (or d_model / n_heads) for heads of 256.
  for (const char* kv : {"4", "2"})
    for (const double n : {9.0, 0.5, 144.0}) {
      SCOPED_TRACE(std::string("kv ") + kv + ", N " + std::to_string(n));
      Attention a(std::string("n_kv_heads = ") + kv +
                  "\nattention = { type = \"causal\", query_pre_attn_scalar = " + std::to_string(n) + " }\n");
      const std::vector<double> y = a.forward(), want = reference_attention(a, QkRef::kNone, n);
      double max_err = 0;
      for (size_t i = 0; i < y.size(); ++i) max_err = std::max(max_err, std::abs(y[i] - want[i]));
      EXPECT_LE(max_err, 1e-12);
      RecordProperty("max_abs_error", ::testing::PrintToString(max_err));
      Attention plain(std::string("n_kv_heads = ") + kv + "\n");
      EXPECT_NE(y, plain.forward()) << "the scale changes the output";
    }
  // N = d_head is the default scale, bit for bit.
  Attention same("attention = { type = \"causal\", query_pre_attn_scalar = 4.0 }\n"), plain("");
  EXPECT_EQ(same.forward(), plain.forward());
}

TEST(AttentionQueryPreAttnScalar, GradientsMatchCentralDifferences) {
  Attention a("n_kv_heads = 2\nattention = { type = \"causal\", query_pre_attn_scalar = 9.0 }\n");
  RecordProperty("max_abs_error", ::testing::PrintToString(check_gradients(a, 31)));
}

TEST(AttentionQueryPreAttnScalar, NegativeIsAnErrorAtItsKey) {
  const std::string lines = "attention = { type = \"causal\", query_pre_attn_scalar = -1.0 }\n";
  try {
    validate_case(test::resolve_first(experiment(lines)), test::builtin_registry());
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.loc().line, 9) << e.what();
    EXPECT_EQ(e.loc().column, static_cast<int>(lines.find("query_pre_attn_scalar")) + 1) << e.what();
    EXPECT_NE(std::string(e.what()).find("query_pre_attn_scalar"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attention_test
}  // namespace bench
