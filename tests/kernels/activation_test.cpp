// Tests of kernels/activation.h: every activation, plain and gated, against the float64
// reference on every target (kernel_test_util.h); the closed-form derivatives and the gated
// backward against central differences in double.
#include "activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <ostream>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace activation_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

struct ActivationCase {
  Activation act;
  Target target;
};
std::string act_name(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kSilu:
      return "silu";
    case Activation::kRelu2:
      return "relu2";
    case Activation::kQuickGelu:
      return "quick_gelu";
  }
  return "?";
}
void PrintTo(const ActivationCase& c, std::ostream* os) { *os << act_name(c.act) << "_" << c.target.name; }

/// Inputs over the interesting range, none within 1e-3 of ReLU's kink (finite differences).
std::vector<double> inputs(size_t n, uint32_t seed) {
  auto x = random_vector(n, seed, 2.5);
  for (auto& v : x)
    if (std::abs(v) < 1e-3) v = 0.5;
  return x;
}

class ActivationTest : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(ActivationTest, PointwiseMatchesFloat64Reference) {
  const auto& [act, t] = GetParam();
  const Exec exec = t.exec();
  for (int64_t n : {1, 1000, 3001}) {
    SCOPED_TRACE(n);
    const auto x = inputs(static_cast<size_t>(n), 1);
    const auto dy = random_vector(x.size(), 2);
    const auto xf = to_storage<float>(x);
    std::vector<double> y_ref(x.size()), dx_ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double xi = static_cast<double>(xf[i]);
      y_ref[i] = activation_reference(act, xi);
      dx_ref[i] = static_cast<double>(static_cast<float>(dy[i])) * activation_grad_reference(act, xi);
    }
    Dev<float> gxf(t, xf), y(t, x.size()), dxf(t, to_storage<float>(dy));
    activation_forward<float>(exec, act, gxf.get(), y.get(), n);
    EXPECT_TRUE(all_near(to_double(y.host()), y_ref, 1e-6, 1e-6));
    activation_backward<float>(exec, act, gxf.get(), dxf.get(), dxf.get(), n);  // dx aliasing dy
    EXPECT_TRUE(all_near(to_double(dxf.host()), dx_ref, 1e-6, 1e-5));

    if (t.float64()) {
      Dev<double> xd(t, x), dyd(t, dy), gyd(t, x.size()), gdxd(t, x.size());
      activation_forward<double>(exec, act, xd.get(), gyd.get(), n);
      activation_backward<double>(exec, act, xd.get(), dyd.get(), gdxd.get(), n);
      const auto yd = gyd.host(), dxd = gdxd.host();
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_NEAR(yd[i], activation_reference(act, x[i]), 1e-14 * (1 + std::abs(yd[i])));
        ASSERT_NEAR(dxd[i], dy[i] * activation_grad_reference(act, x[i]), 1e-13 * (1 + std::abs(dxd[i])));
      }
    }

    const auto xb = to_storage<bf16>(x);
    Dev<bf16> gxb(t, xb), yb(t, x.size());
    activation_forward<bf16>(exec, act, gxb.get(), yb.get(), n);
    const auto xbd = to_double(xb);
    for (size_t i = 0; i < x.size(); ++i) y_ref[i] = activation_reference(act, xbd[i]);
    EXPECT_TRUE(all_near(to_double(yb.host()), y_ref, 1e-6, 0.005));
  }
}

TEST_P(ActivationTest, DerivativeMatchesFiniteDifferences) {
  const auto& [act, t] = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(t);
  const Exec exec = t.exec();
  const auto x = inputs(200, 3);
  std::vector<double> ones(x.size(), 1.0), dx(x.size());
  activation_backward<double>(exec, act, x.data(), ones.data(), dx.data(), 200);
  for (size_t i = 0; i < x.size(); ++i) {
    auto f = [&](const std::vector<double>& v) {
      double y = 0;
      activation_forward<double>(exec, act, v.data() + i, &y, 1);
      return y;
    };
    ASSERT_NEAR(dx[i], central_difference(f, x, i), 1e-7 * (1 + std::abs(dx[i]))) << "at x = " << x[i];
  }
}

TEST_P(ActivationTest, GatedMatchesFloat64Reference) {
  const auto& [act, t] = GetParam();
  const Exec exec = t.exec();
  for (auto [rows, d_ff] : {std::pair<int64_t, int64_t>{1, 5}, {3, 300}, {7, 1365}}) {
    SCOPED_TRACE(d_ff);
    const auto gu = to_double(to_storage<float>(inputs(static_cast<size_t>(rows * 2 * d_ff), 4)));
    const auto dh = to_double(to_storage<float>(random_vector(static_cast<size_t>(rows * d_ff), 5)));
    std::vector<double> h_ref(dh.size()), dgu_ref(gu.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < d_ff; ++j) {
        const double g = gu[r * 2 * d_ff + j], u = gu[r * 2 * d_ff + d_ff + j], d = dh[r * d_ff + j];
        h_ref[r * d_ff + j] = activation_reference(act, g) * u;
        dgu_ref[r * 2 * d_ff + j] = d * u * activation_grad_reference(act, g);
        dgu_ref[r * 2 * d_ff + d_ff + j] = d * activation_reference(act, g);
      }
    Dev<float> guf(t, to_storage<float>(gu)), dhf(t, to_storage<float>(dh)), h(t, dh.size()), dgu(t, gu.size());
    glu_forward<float>(exec, act, guf.get(), h.get(), rows, d_ff);
    EXPECT_TRUE(all_near(to_double(h.host()), h_ref, 1e-6, 1e-5));
    glu_backward<float>(exec, act, guf.get(), dhf.get(), dgu.get(), rows, d_ff);
    EXPECT_TRUE(all_near(to_double(dgu.host()), dgu_ref, 1e-6, 1e-5));

    Dev<bf16> gub(t, to_storage<bf16>(gu)), dhb(t, to_storage<bf16>(dh)), hb(t, dh.size()), dgub(t, gu.size());
    glu_forward<bf16>(exec, act, gub.get(), hb.get(), rows, d_ff);
    EXPECT_TRUE(all_near(to_double(hb.host()), h_ref, 0.02, 0.02));  // bf16 inputs, output
    glu_backward<bf16>(exec, act, gub.get(), dhb.get(), dgub.get(), rows, d_ff);
    EXPECT_TRUE(all_near(to_double(dgub.host()), dgu_ref, 0.05, 0.03));
  }
}

TEST_P(ActivationTest, GatedBackwardMatchesFiniteDifferences) {
  const auto& [act, t] = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(t);
  const Exec exec = t.exec();
  const int64_t rows = 3, d_ff = 270;
  const auto gu = inputs(static_cast<size_t>(rows * 2 * d_ff), 6);
  const auto w = random_vector(static_cast<size_t>(rows * d_ff), 7);
  auto loss = [&](const std::vector<double>& v) {  // L = sum(h * w)
    std::vector<double> h(w.size());
    glu_forward<double>(exec, act, v.data(), h.data(), rows, d_ff);
    double l = 0;
    for (size_t i = 0; i < h.size(); ++i) l += h[i] * w[i];
    return l;
  };
  std::vector<double> dgu(gu.size());
  glu_backward<double>(exec, act, gu.data(), w.data(), dgu.data(), rows, d_ff);
  for (size_t i : sample_indices(gu.size(), 80))
    ASSERT_NEAR(dgu[i], central_difference(loss, gu, i), 1e-6 * (1 + std::abs(dgu[i]))) << "at " << i;
}

// The float64 reference of each activation against its published formula, written out here
// independently: quick_gelu is transformers' QuickGELUActivation, x * sigmoid(1.702 x).
TEST(ActivationReference, MatchesThePublishedFormulas) {
  for (double x : {-6.0, -2.5, -1.0, -0.3, 0.0, 0.2, 0.7, 1.5, 3.0, 8.0}) {
    SCOPED_TRACE(x);
    EXPECT_NEAR(activation_reference(Activation::kQuickGelu, x), x * (1.0 / (1.0 + std::exp(-1.702 * x))), 1e-15);
    EXPECT_NEAR(activation_reference(Activation::kGelu, x), 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))), 1e-15);
    EXPECT_NEAR(activation_reference(Activation::kGeluTanh, x),
                0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * std::pow(x, 3.0)))),
                1e-14);
    EXPECT_NEAR(activation_reference(Activation::kSilu, x), x / (1.0 + std::exp(-x)), 1e-15);
  }
  // Unlike GeLU, QuickGeLU's sigmoid approximation differs visibly from it: at x = 1 by 0.0046.
  EXPECT_NEAR(activation_reference(Activation::kQuickGelu, 1.0) - activation_reference(Activation::kGelu, 1.0),
              1.0 / (1.0 + std::exp(-1.702)) - 0.5 * (1.0 + std::erf(1.0 / std::sqrt(2.0))), 1e-15);
  EXPECT_GT(std::abs(activation_reference(Activation::kQuickGelu, 1.0) - activation_reference(Activation::kGelu, 1.0)),
            4e-3);
}

std::vector<ActivationCase> cases() {
  std::vector<ActivationCase> out;
  for (const Target& be : targets())
    for (Activation a : {Activation::kRelu, Activation::kGelu, Activation::kGeluTanh, Activation::kSilu,
                         Activation::kRelu2, Activation::kQuickGelu})
      out.push_back({a, be});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, ActivationTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return act_name(tp.param.act) + "_" + tp.param.target.name; });

}  // namespace
}  // namespace activation_test
}  // namespace bench::kernels
