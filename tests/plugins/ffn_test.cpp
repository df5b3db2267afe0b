// The ffn plugin, component by component in float64: forward against a closed-form reference
// (with and without biases on every matrix), parameter counts (3 d_model d_ff gated, 2 d_model
// d_ff plain, plus 2 d_ff + d_model or d_ff + d_model biases; the 8/3 rule keeps the 4x MLP's
// count), the d_ff rounding of real models, and declared FLOPs against the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <list>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "kernels/activation.h"
#include "support/component_rig.h"

namespace bench {
namespace ffn_test {
namespace {

// One FFN in a rig of its own (layer 0, scope "ffn"); with `allocate`, weights from N(0, init_std^2)
// keyed by name, else shapes only (real-model sizes cost no memory).
class FfnRig {
 public:
  explicit FfnRig(const std::string& model_lines, bool allocate = true)
      : rig_(test::resolve_first("[model]\nseq_len = 3\nbatch_size = 2\ndtype = \"float64\"\n" + model_lines +
                                 "\n[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n")
                 .model,
             test::ComponentRig::Options()
                 .in("ffn")
                 .at_layer(0)
                 .filled_by(allocate ? test::normal_init(11) : nullptr)
                 .shapes_only(!allocate)),
        owner_(rig_.build<Sublayer>(Slot::kFfn)),
        ffn(owner_.get()) {}

  int64_t rows() const { return rig_.rows(); }
  int64_t width() const { return rig_.width(); }
  const Param& param(const std::string& name) const { return rig_.param(name); }
  Param& param(const std::string& name) { return rig_.param(name); }
  /// The parameter's values, or null when the FFN has no such parameter.
  const double* maybe(const std::string& name) const {
    for (const Param& p : rig_.params())
      if (p.name.ends_with("." + name)) return p.value.data<double>();
    return nullptr;
  }
  const std::list<Param>& params() const { return rig_.params(); }
  int64_t n_params() const { return rig_.n_params(); }
  /// Hidden width: the down projection's input features.
  int64_t hidden() const { return param("w_out").shape[1]; }

 private:
  test::ComponentRig rig_;
  std::unique_ptr<Sublayer> owner_;

 public:
  Sublayer* ffn;
};

std::string ffn_line(const std::string& table) { return "ffn = { " + table + " }\n"; }

struct FfnKind {
  std::string table;  // the ffn's TOML table body
  kernels::Activation act;
  bool gated;
};

std::vector<FfnKind> all_kinds() {
  using kernels::Activation;
  return {{"type = \"mlp\", activation = \"relu\"", Activation::kRelu, false},
          {"type = \"mlp\", activation = \"gelu\"", Activation::kGelu, false},
          {"type = \"mlp\", activation = \"gelu_tanh\"", Activation::kGeluTanh, false},
          {"type = \"mlp\", activation = \"silu\"", Activation::kSilu, false},
          {"type = \"mlp\", activation = \"relu2\"", Activation::kRelu2, false},
          {"type = \"mlp\", activation = \"quick_gelu\"", Activation::kQuickGelu, false},
          {"type = \"swiglu\"", Activation::kSilu, true},
          {"type = \"geglu\"", Activation::kGelu, true},
          {"type = \"geglu\", activation = \"gelu_tanh\"", Activation::kGeluTanh, true},
          {"type = \"reglu\"", Activation::kRelu, true}};
}

// y = act(x W_in^T + b_in) W_out^T + b_out, or (act(x Wg^T + b_g) * (x Wu^T + b_u)) W_out^T + b_out
// with W_in rows [gate | up] and b_in [b_g | b_u]; the biases count where the FFN has them.
std::vector<double> reference_forward(const FfnKind& k, const std::vector<double>& x, const FfnRig& rig) {
  const int64_t rows = rig.rows(), d = rig.width(), h = rig.hidden();
  const double* w_in = rig.param("w_in").value.data<double>();
  const double* w_out = rig.param("w_out").value.data<double>();
  const double* b_in = rig.maybe("b_in");
  const double* b_out = rig.maybe("b_out");
  std::vector<double> y(static_cast<size_t>(rows * d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> hid(static_cast<size_t>(h));
    for (int64_t j = 0; j < h; ++j) {
      double g = b_in != nullptr ? b_in[j] : 0.0, u = b_in != nullptr && k.gated ? b_in[h + j] : 0.0;
      for (int64_t i = 0; i < d; ++i) {
        g += x[r * d + i] * w_in[j * d + i];
        if (k.gated) u += x[r * d + i] * w_in[(h + j) * d + i];
      }
      hid[j] = kernels::activation_reference(k.act, g) * (k.gated ? u : 1.0);
    }
    for (int64_t o = 0; o < d; ++o) {
      y[r * d + o] = b_out != nullptr ? b_out[o] : 0.0;
      for (int64_t j = 0; j < h; ++j) y[r * d + o] += hid[j] * w_out[o * h + j];
    }
  }
  return y;
}

TEST(FfnPlugin, ForwardMatchesTheClosedForm) {
  for (const FfnKind& k : all_kinds())
    for (const bool bias : {false, true}) {
      SCOPED_TRACE(bias ? "bias" : "no bias");
      FfnRig rig("d_model = 8\ninit_std = 0.5\n" + ffn_line(k.table + ", d_ff = 12" + (bias ? ", bias = true" : "")));
      if (bias) {
        Rng br(7);
        for (const char* n : {"b_in", "b_out"}) {
          Param& p = rig.param(n);
          for (int64_t i = 0; i < p.shape.numel(); ++i) p.value.data<double>()[i] = 0.5 * br.normal();
        }
      }
      std::vector<double> x(static_cast<size_t>(rig.rows() * rig.width()));
      Rng rng(3);
      for (double& v : x) v = rng.normal();
      std::vector<double> y(x.size());
      Tensor xt(x.data(), DType::kFloat64, {rig.rows(), rig.width()});
      Tensor yt(y.data(), DType::kFloat64, {rig.rows(), rig.width()});
      RunContext ctx;
      rig.ffn->forward(xt, yt, ctx);
      const std::vector<double> want = reference_forward(k, x, rig);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-12 + 1e-10 * std::abs(want[i])) << k.table;
    }
}

TEST(FfnPlugin, ParameterCountsAndNames) {
  for (const FfnKind& k : all_kinds()) {
    FfnRig rig("d_model = 16\n" + ffn_line(k.table + ", d_ff = 40"));
    ASSERT_EQ(rig.params().size(), 2u) << k.table;
    EXPECT_EQ(rig.param("w_in").shape, (Shape{k.gated ? 80 : 40, 16})) << k.table;  // gated: [gate | up] fused
    EXPECT_EQ(rig.param("w_out").shape, (Shape{16, 40})) << k.table;
    EXPECT_EQ(rig.n_params(), (k.gated ? 3 : 2) * 16 * 40) << k.table;
  }
}

TEST(FfnPlugin, BiasesOnEveryMatrixAreZeroAndUndecayed) {
  for (const FfnKind& k : all_kinds()) {
    FfnRig rig("d_model = 16\n" + ffn_line(k.table + ", d_ff = 40, bias = true"));
    ASSERT_EQ(rig.params().size(), 4u) << k.table;
    EXPECT_EQ(rig.param("b_in").shape, (Shape{k.gated ? 80 : 40})) << k.table;  // gated: [gate | up]
    EXPECT_EQ(rig.param("b_out").shape, (Shape{16})) << k.table;
    EXPECT_EQ(rig.n_params(), (k.gated ? 3 : 2) * 16 * 40 + (k.gated ? 80 : 40) + 16) << k.table;
    for (const char* n : {"b_in", "b_out"}) {
      EXPECT_EQ(rig.param(n).group, ParamGroup::kBias) << k.table << n;
      EXPECT_EQ(rig.param(n).init.kind, Init::Kind::kZeros) << k.table << n;
    }
    // Declared work: an add per output forward, a column-sum term per output backward.
    const FfnRig plain("d_model = 16\n" + ffn_line(k.table + ", d_ff = 40"));
    const double outputs = static_cast<double>(rig.rows()) * ((k.gated ? 80 : 40) + 16);
    EXPECT_DOUBLE_EQ(rig.ffn->cost().flops_forward - plain.ffn->cost().flops_forward, outputs) << k.table;
    EXPECT_DOUBLE_EQ(rig.ffn->cost().flops_backward - plain.ffn->cost().flops_backward, outputs) << k.table;
  }
}

TEST(FfnPlugin, DefaultRatiosRoundUpToMultipleOf) {
  // plain: 4 * 40 = 160 (a multiple of 32); gated: 8/3 * 40 = 106.7 -> 107 -> 128
  EXPECT_EQ(FfnRig("d_model = 40\nffn = \"mlp\"\n").hidden(), 160);
  for (const char* gated : {"swiglu", "geglu", "reglu"})
    EXPECT_EQ(FfnRig(std::string("d_model = 40\nffn = \"") + gated + "\"\n").hidden(), 128) << gated;
  EXPECT_EQ(FfnRig("d_model = 40\n" + ffn_line("type = \"geglu\", multiple_of = 1")).hidden(), 107);
  EXPECT_EQ(FfnRig("d_model = 40\n" + ffn_line("type = \"mlp\", ratio = 3.5, multiple_of = 64")).hidden(), 192);
  EXPECT_EQ(FfnRig("d_model = 40\n" + ffn_line("type = \"swiglu\", d_ff = 50, multiple_of = 64")).hidden(), 50);
}

TEST(FfnPlugin, EightThirdsRuleMatchesTheFourTimesMlp) {
  // 8/3 * 96 = 256 exactly: 3 * 96 * 256 == 2 * 96 * 384.
  const FfnRig plain("d_model = 96\n" + ffn_line("type = \"mlp\", multiple_of = 1"), false);
  EXPECT_EQ(plain.hidden(), 384);
  for (const char* gated : {"swiglu", "geglu", "reglu"}) {
    const FfnRig g("d_model = 96\n" + ffn_line(std::string("type = \"") + gated + "\", multiple_of = 1"), false);
    EXPECT_EQ(g.hidden(), 256) << gated;
    EXPECT_EQ(g.n_params(), 3 * 96 * 256) << gated;
    EXPECT_EQ(g.n_params(), plain.n_params()) << gated;
  }
}

TEST(FfnPlugin, LlamaHiddenWidths) {
  // Llama 2 7B: 8/3 * 4096 = 10922.7 -> 11008 (multiple of 256); 13B: 8/3 * 5120 -> 13824.
  const FfnRig l7("d_model = 4096\nn_heads = 32\n" + ffn_line("type = \"swiglu\", multiple_of = 256"), false);
  EXPECT_EQ(l7.param("w_in").shape, (Shape{2 * 11008, 4096}));
  EXPECT_EQ(l7.param("w_out").shape, (Shape{4096, 11008}));
  const FfnRig l13("d_model = 5120\nn_heads = 40\n" + ffn_line("type = \"swiglu\", multiple_of = 256"), false);
  EXPECT_EQ(l13.hidden(), 13824);
  // Llama 3 8B: ffn_dim_multiplier 1.3 on top of 8/3, multiple_of 1024 -> 14336.
  const FfnRig l3(
      "d_model = 4096\nn_heads = 32\n" + ffn_line("type = \"swiglu\", ratio = 3.4666666666666667, multiple_of = 1024"),
      false);
  EXPECT_EQ(l3.hidden(), 14336);
}

TEST(FfnPlugin, DeclaredFlopsAreTwicePerWeightPerRow) {
  for (const FfnKind& k : all_kinds()) {
    const FfnRig rig("d_model = 64\n" + ffn_line(k.table), false);
    const double rows = static_cast<double>(rig.rows()), h = static_cast<double>(rig.hidden());
    const double matrices = 2.0 * static_cast<double>(rig.n_params()) * rows;
    const Cost c = rig.ffn->cost();
    // The GEMMs exactly, plus a few FLOPs per hidden element for the non-linearity.
    EXPECT_GE(c.flops_forward - matrices, rows * h) << k.table;
    EXPECT_LE(c.flops_forward - matrices, 12 * rows * h) << k.table;
    EXPECT_GE(c.flops_backward - 2 * matrices, rows * h) << k.table;
    EXPECT_LE(c.flops_backward - 2 * matrices, 24 * rows * h) << k.table;
    // Bytes: at least the weights once and the input and output rows.
    const double weights = 8.0 * static_cast<double>(rig.n_params());
    EXPECT_GE(c.bytes_forward, weights + 2 * 8.0 * rows * 64) << k.table;
    EXPECT_GT(c.bytes_backward, c.bytes_forward) << k.table;
  }
}

// GeGLU's gate activation (gelu or gelu_tanh, Gemma's) is one of the two GeLUs; anything else is an
// error at the key, and the two differ (by up to about 1e-3 at these inputs).
TEST(FfnPlugin, GegluActivationIsAGeluAndBadValuesAreErrorsAtTheKey) {
  for (const char* act : {"silu", "relu", "tanh"}) {
    SCOPED_TRACE(act);
    const std::string line = ffn_line(std::string("type = \"geglu\", activation = \"") + act + "\"");
    try {
      FfnRig rig("d_model = 8\n" + line);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.loc().line, 6) << e.what();
      EXPECT_EQ(e.loc().column, static_cast<int>(line.find("activation")) + 1) << e.what();
      EXPECT_NE(std::string(e.what()).find("gelu, gelu_tanh"), std::string::npos) << e.what();
    }
  }
  auto output = [](const std::string& act) {
    FfnRig rig("d_model = 8\ninit_std = 0.5\n" + ffn_line("type = \"geglu\", d_ff = 12, activation = \"" + act + "\""));
    std::vector<double> x(static_cast<size_t>(rig.rows() * rig.width())), y(x.size());
    Rng rng(3);
    for (double& v : x) v = rng.normal();
    Tensor xt(x.data(), DType::kFloat64, {rig.rows(), rig.width()});
    Tensor yt(y.data(), DType::kFloat64, {rig.rows(), rig.width()});
    RunContext ctx;
    rig.ffn->forward(xt, yt, ctx);
    return y;
  };
  const std::vector<double> erf = output("gelu"), tanh = output("gelu_tanh");
  double diff = 0;
  for (size_t i = 0; i < erf.size(); ++i) diff = std::max(diff, std::abs(erf[i] - tanh[i]));
  EXPECT_GT(diff, 1e-6);
  EXPECT_LT(diff, 1e-2);
}

TEST(FfnPlugin, UnknownActivationIsAConfigError) {
  EXPECT_THROW(FfnRig("d_model = 8\n" + ffn_line("type = \"mlp\", activation = \"swish\"")), ConfigError);
  EXPECT_THROW(FfnRig("d_model = 8\n" + ffn_line("type = \"swiglu\", activation = \"relu\"")), ConfigError);
  EXPECT_THROW(FfnRig("d_model = 8\n" + ffn_line("type = \"geglu\", multiple_of = 0")), ConfigError);
}

}  // namespace
}  // namespace ffn_test
}  // namespace bench
