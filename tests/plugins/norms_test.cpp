// The norm types of the norms plugin on their own (float64, set up in a test::ComponentRig), for
// Gemma's unit offset (`unit_offset = true`: the gain is 1 + weight): the weight is declared as
// a zero-initialized gain, so the norm starts as the plain normalization; the forward equals
// the formula with the gain 1 + w for RMSNorm and LayerNorm, with and without a bias; dx and
// the weight and bias gradients match central differences of sum(y * dy); and an offset without
// a weight is an error at its key.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "support/component_rig.h"
#include "support/errors.h"

namespace bench {
namespace norms_test {
namespace {

constexpr int64_t kRows = 6, kWidth = 20;

/// The experiment of these tests; `norm` is the value of `norm = ...` on line 5 of exp.toml.
std::string norm_toml(const std::string& norm) {
  return "[model]\ndtype = \"float64\"\nd_model = 20\nn_heads = 2\nnorm = " + norm +
         "\n[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n[stability]\n";
}

/// One norm over kRows rows of kWidth, its parameters as declared (ones, zeros) until moved.
class NormUnderTest {
 public:
  explicit NormUnderTest(const std::string& norm)
      : rig_(test::resolve_first(norm_toml(norm)).model,
             test::ComponentRig::Options().in("norm").with_rows(kRows).with_width(kWidth).filled_by(
                 test::init_by_kind(1))),
        norm_(rig_.build<Sublayer>(Slot::kNorm)) {
    Rng rng(2);
    x_.resize(static_cast<size_t>(kRows * kWidth));
    for (double& v : x_) v = 0.3 + 1.7 * rng.normal();
  }
  Param& param(const std::string& name) { return rig_.param(name); }
  bool has(const std::string& name) const {
    for (const Param& p : rig_.params())
      if (p.name == "norm." + name) return true;
    return false;
  }
  /// Moves every parameter by N(0, 0.5^2): gains and biases away from their init.
  void jitter() {
    Rng rng(3);
    for (Param& p : rig_.params())
      for (int64_t i = 0; i < p.shape.numel(); ++i) p.value.data<double>()[i] += 0.5 * rng.normal();
  }
  std::vector<double>& input() { return x_; }
  std::vector<double> forward() {
    Tensor x(x_.data(), DType::kFloat64, {kRows, kWidth});
    Tensor y = rig_.tensor({kRows, kWidth});
    norm_->forward(x, y, rig_.ctx);
    return {y.data<double>(), y.data<double>() + y.numel()};
  }
  /// sum(y * dy)
  double loss(const std::vector<double>& dy) {
    const std::vector<double> y = forward();
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
    return l;
  }
  /// dx of sum(y * dy); the parameters' gradients (zeroed first) are left in their grads.
  std::vector<double> backward(const std::vector<double>& dy) {
    for (Param& p : rig_.params()) p.grad.zero();
    forward();
    Tensor g = rig_.tensor({kRows, kWidth});
    std::copy(dy.begin(), dy.end(), g.data<double>());
    Tensor dx = rig_.tensor({kRows, kWidth});
    norm_->backward(g, dx, rig_.ctx);
    return {dx.data<double>(), dx.data<double>() + dx.numel()};
  }

 private:
  test::ComponentRig rig_;
  std::unique_ptr<Sublayer> norm_;
  std::vector<double> x_;
};

/// (x - [mean]) / sqrt(var + eps) * (1 + w) + b, row by row.
std::vector<double> reference(bool center, const std::vector<double>& x, const double* w, const double* b, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    const double* xr = &x[static_cast<size_t>(r * kWidth)];
    double mu = 0, ss = 0;
    if (center) {
      for (int64_t c = 0; c < kWidth; ++c) mu += xr[c];
      mu /= kWidth;
    }
    for (int64_t c = 0; c < kWidth; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    const double rstd = 1.0 / std::sqrt(ss / kWidth + eps);
    for (int64_t c = 0; c < kWidth; ++c)
      y[static_cast<size_t>(r * kWidth + c)] = (xr[c] - mu) * rstd * (1.0 + w[c]) + (b != nullptr ? b[c] : 0.0);
  }
  return y;
}

struct OffsetCase {
  std::string norm;  // the `norm = ...` value
  bool center;
  bool bias;
  double eps;
};

std::vector<OffsetCase> offset_cases() {
  return {{"{ type = \"rmsnorm\", unit_offset = true }", false, false, 1e-6},
          {"{ type = \"rmsnorm\", unit_offset = true, bias = true, eps = 1e-3 }", false, true, 1e-3},
          {"{ type = \"layernorm\", unit_offset = true }", true, true, 1e-5},
          {"{ type = \"layernorm\", unit_offset = true, bias = false }", true, false, 1e-5}};
}

TEST(NormUnitOffset, WeightIsAZeroInitializedGainSoTheNormStartsPlain) {
  for (const OffsetCase& c : offset_cases()) {
    SCOPED_TRACE(c.norm);
    NormUnderTest n(c.norm);
    const Param& w = n.param("weight");
    EXPECT_EQ(w.init.kind, Init::Kind::kZeros);
    EXPECT_EQ(w.group, ParamGroup::kGain);
    EXPECT_EQ(w.shape, (Shape{kWidth}));
    EXPECT_EQ(n.has("bias"), c.bias);
    // At init (w = 0, b = 0): the plain normalization, as the default norm with its gain of ones.
    NormUnderTest plain(std::string("{ type = \"") + (c.center ? "layernorm" : "rmsnorm") +
                        "\", eps = " + std::to_string(c.eps) + " }");
    EXPECT_EQ(n.forward(), plain.forward());
  }
}

TEST(NormUnitOffset, ForwardIsTheFormulaWithGainOnePlusWeight) {
  for (const OffsetCase& c : offset_cases()) {
    SCOPED_TRACE(c.norm);
    NormUnderTest n(c.norm);
    n.jitter();
    const std::vector<double> y = n.forward();
    const std::vector<double> want = reference(c.center, n.input(), n.param("weight").value.data<double>(),
                                               c.bias ? n.param("bias").value.data<double>() : nullptr, c.eps);
    double max_err = 0;
    for (size_t i = 0; i < y.size(); ++i) max_err = std::max(max_err, std::abs(y[i] - want[i]));
    EXPECT_LE(max_err, 1e-14);
    RecordProperty("max_abs_error", ::testing::PrintToString(max_err));
  }
}

TEST(NormUnitOffset, GradientsMatchCentralDifferences) {
  for (const OffsetCase& c : offset_cases()) {
    SCOPED_TRACE(c.norm);
    NormUnderTest n(c.norm);
    n.jitter();
    Rng rng(7);
    std::vector<double> dy(static_cast<size_t>(kRows * kWidth));
    for (double& v : dy) v = rng.normal();
    const std::vector<double> dx = n.backward(dy);
    const double h = 1e-6;
    double max_err = 0;
    auto check = [&](double* v, double g, const std::string& what) {
      const double keep = *v;
      *v = keep + h;
      const double lp = n.loss(dy);
      *v = keep - h;
      const double lm = n.loss(dy);
      *v = keep;
      const double fd = (lp - lm) / (2 * h);
      max_err = std::max(max_err, std::abs(g - fd));
      EXPECT_NEAR(g, fd, 1e-7 + 1e-6 * std::abs(fd)) << what;
    };
    for (size_t i = 0; i < dx.size(); i += 7) check(&n.input()[i], dx[i], "dx[" + std::to_string(i) + "]");
    for (const char* name : {"weight", "bias"}) {
      if (!n.has(name)) continue;
      Param& p = n.param(name);
      for (int64_t i = 0; i < kWidth; i += 3)
        check(p.value.data<double>() + i, p.grad.data<double>()[i], std::string(name) + "[" + std::to_string(i) + "]");
    }
    RecordProperty("max_abs_error", ::testing::PrintToString(max_err));
  }
}

TEST(NormUnitOffset, WithoutAWeightIsAnErrorAtItsKey) {
  for (const char* norm : {"{ type = \"rmsnorm\", weight = false, unit_offset = true }",
                           "{ type = \"layernorm\", unit_offset = true, "
                           "weight = false }"}) {
    SCOPED_TRACE(norm);
    const auto e =
        test::config_error_of([&] { validate_case(test::resolve_first(norm_toml(norm)), test::builtin_registry()); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->loc().line, 5) << e->what();
    EXPECT_EQ(e->loc().column,
              static_cast<int>(std::string("norm = ").size() + std::string(norm).find("unit_offset")) + 1)
        << e->what();
    EXPECT_NE(std::string(e->what()).find("needs weight = true"), std::string::npos) << e->what();
  }
  const auto bad = test::config_error_of([&] {
    validate_case(test::resolve_first(norm_toml("{ type = \"rmsnorm\", unit_offset = 1 }")), test::builtin_registry());
  });
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(std::string(bad->what()).find("unit_offset"), std::string::npos) << bad->what();
}

}  // namespace
}  // namespace norms_test
}  // namespace bench
