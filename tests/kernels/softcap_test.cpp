// Tests of kernels/softcap.h: forward and backward against their float64 references on every
// target (kernel_test_util.h) in float, bf16 and double, backward against central differences,
// in-place use, and the closed forms of the cap: |c tanh(x/c) - x| <= |x|^3 / (3 c^2) (the
// identity to first order for small logits) and |y| <= c.
#include "softcap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace softcap_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::Backend;
using tile::bf16;

class SoftcapTest : public ::testing::TestWithParam<Target> {};

TEST_P(SoftcapTest, ForwardMatchesFloat64Reference) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (double cap : {30.0, 2.5}) {
    for (int64_t n : {1, 1000, 1024, 3001}) {
      SCOPED_TRACE(::testing::Message() << "cap " << cap << " n " << n);
      const auto x = random_vector(static_cast<size_t>(n), 1, 20.0);  // from deep inside to well past the cap
      const auto ref = softcap_forward_reference(x, cap);

      if (t.float64()) {
        Dev<double> xd(t, x), yd(t, x.size());
        softcap_forward<double>(exec, xd.get(), yd.get(), n, cap);
        EXPECT_TRUE(all_near(yd.host(), ref, 1e-15, 1e-14));
      }

      const auto xf = to_storage<float>(x);
      Dev<float> dxf(t, xf), yf(t, x.size());
      softcap_forward<float>(exec, dxf.get(), yf.get(), n, cap);
      EXPECT_TRUE(all_near(to_double(yf.host()), softcap_forward_reference(to_double(xf), cap), 1e-6 * cap, 1e-6));

      const auto xb = to_storage<bf16>(x);
      Dev<bf16> dxb(t, xb), yb(t, x.size());
      softcap_forward<bf16>(exec, dxb.get(), yb.get(), n, cap);
      // Output rounded to 8 bits of mantissa.
      EXPECT_TRUE(all_near(to_double(yb.host()), softcap_forward_reference(to_double(xb), cap), 1e-6, 8e-3));

      Dev<float> inplace(t, xf);  // y aliasing x
      softcap_forward<float>(exec, inplace.get(), inplace.get(), n, cap);
      EXPECT_EQ(inplace.host(), yf.host());
    }
  }
}

TEST_P(SoftcapTest, BackwardMatchesFloat64Reference) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const double cap = 3.0;
  const int64_t n = 3001;
  const auto x = random_vector(static_cast<size_t>(n), 2, 4.0);
  const auto dy = random_vector(static_cast<size_t>(n), 3);
  const auto ref = softcap_backward_reference(x, dy, cap);

  if (t.float64()) {
    Dev<double> xd(t, x), dyd(t, dy), yd(t, x.size()), dxd(t, x.size());
    softcap_forward<double>(exec, xd.get(), yd.get(), n, cap);
    softcap_backward<double>(exec, yd.get(), dyd.get(), dxd.get(), n, cap);
    EXPECT_TRUE(all_near(dxd.host(), ref, 1e-14, 1e-12));
  }

  const auto xf = to_storage<float>(x), dyf = to_storage<float>(dy);
  Dev<float> gxf(t, xf), gdyf(t, dyf), yf(t, x.size()), dxf(t, x.size());
  softcap_forward<float>(exec, gxf.get(), yf.get(), n, cap);
  softcap_backward<float>(exec, yf.get(), gdyf.get(), dxf.get(), n, cap);
  // From the rounded output: 1 - u^2 loses about 2 |u| * 6e-8 absolutely.
  EXPECT_TRUE(
      all_near(to_double(dxf.host()), softcap_backward_reference(to_double(xf), to_double(dyf), cap), 1e-6, 1e-5));

  Dev<float> dx_alias(t, dyf);  // dx aliasing dy
  softcap_backward<float>(exec, yf.get(), dx_alias.get(), dx_alias.get(), n, cap);
  EXPECT_EQ(dx_alias.host(), dxf.host());

  const auto xb = to_storage<bf16>(x), dyb = to_storage<bf16>(dy);
  Dev<bf16> gxb(t, xb), gdyb(t, dyb), yb(t, x.size()), dxb(t, x.size());
  softcap_forward<bf16>(exec, gxb.get(), yb.get(), n, cap);
  softcap_backward<bf16>(exec, yb.get(), gdyb.get(), dxb.get(), n, cap);
  // y in bf16 carries a relative error of 2^-9, so 1 - u^2 is off by up to about 2 * 2^-9.
  const auto refb = softcap_backward_reference(to_double(xb), to_double(dyb), cap);
  const auto got = dxb.host();
  for (size_t i = 0; i < refb.size(); ++i) {
    const double tol = 2 * 4e-3 * std::abs(to_double(dyb)[i]) + 8e-3 * std::abs(refb[i]) + 1e-6;
    ASSERT_NEAR(tile::bf16_to_float(got[i]), refb[i], tol) << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SoftcapTest, ::testing::ValuesIn(targets()), target_name);

TEST(Softcap, BackwardMatchesFiniteDifferences) {
  // L = sum(w * softcap(x)); dL/dx from the kernel's backward against central differences.
  const double cap = 1.7;
  const int64_t n = 257;
  const auto x = random_vector(static_cast<size_t>(n), 4, 3.0);
  const auto w = random_vector(static_cast<size_t>(n), 5);
  std::vector<double> y(x.size()), dx(x.size());
  softcap_forward<double>(Exec{}, x.data(), y.data(), n, cap);
  softcap_backward<double>(Exec{}, y.data(), w.data(), dx.data(), n, cap);
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> out(v.size());
    softcap_forward<double>(Exec{}, v.data(), out.data(), n, cap);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += w[i] * out[i];
    return l;
  };
  for (size_t i : sample_indices(x.size(), 60)) {
    const double fd = central_difference(loss, x, i, 1e-5);
    ASSERT_NEAR(dx[i], fd, 1e-9 + 1e-7 * std::abs(fd)) << "at " << i;
  }
}

TEST(Softcap, IdentityToFirstOrderAndBoundedByTheCap) {
  // c tanh(x/c) = x - x^3 / (3 c^2) + ..., an alternating series with falling terms for
  // |x| < c: the error of the identity is at most |x|^3 / (3 c^2); beyond, |y| <= c always.
  const double cap = 30.0;
  std::vector<double> x;
  for (double v = -1000; v <= 1000; v += 0.37) x.push_back(v);
  std::vector<double> y(x.size());
  softcap_forward<double>(Exec{}, x.data(), y.data(), static_cast<int64_t>(x.size()), cap);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(std::abs(y[i]), cap) << x[i];
    ASSERT_LE(std::abs(y[i] - x[i]), std::abs(x[i] * x[i] * x[i]) / (3 * cap * cap) + 1e-12) << x[i];
    if (std::abs(x[i]) < 1) {
      ASSERT_NEAR(y[i], x[i], 1.2e-3) << "small logits pass through";
    }
  }
  // Float: also at the extremes of the range, and the slope there is 0, not negative or NaN.
  std::vector<float> xf = {-std::numeric_limits<float>::max(), -1e6f, 1e6f, std::numeric_limits<float>::max()};
  std::vector<float> yf(xf.size()), dx(xf.size()), ones(xf.size(), 1.0f);
  softcap_forward<float>(Exec{}, xf.data(), yf.data(), 4, cap);
  softcap_backward<float>(Exec{}, yf.data(), ones.data(), dx.data(), 4, cap);
  for (size_t i = 0; i < xf.size(); ++i) {
    EXPECT_EQ(std::abs(yf[i]), static_cast<float>(cap)) << xf[i];
    EXPECT_EQ(dx[i], 0.0f) << xf[i];
  }
  // bf16: 30.1 is not a bf16, and the saturated outputs round past it, to +-30.125: (y / c)^2 is
  // then above 1, and the slope is clamped to 0, never negative (which would turn the gradient).
  const double odd_cap = 30.1;
  std::vector<bf16> xb, yb(4), dxb(4);
  for (float v : {-1e6f, -500.0f, 500.0f, 1e6f}) xb.push_back(tile::float_to_bf16(v));
  const std::vector<bf16> dyb(4, tile::float_to_bf16(1.0f));
  softcap_forward<bf16>(Exec{}, xb.data(), yb.data(), 4, odd_cap);
  softcap_backward<bf16>(Exec{}, yb.data(), dyb.data(), dxb.data(), 4, odd_cap);
  EXPECT_EQ(to_double(yb), (std::vector<double>{-30.125, -30.125, 30.125, 30.125}));
  EXPECT_EQ(to_double(dxb), std::vector<double>(4, 0.0));
}

TEST(Softcap, RejectsANonPositiveCap) {
  std::vector<float> x(4), y(4);
  EXPECT_THROW(softcap_forward<float>(Exec{}, x.data(), y.data(), 4, 0.0), std::invalid_argument);
  EXPECT_THROW(softcap_backward<float>(Exec{}, y.data(), x.data(), y.data(), 4, -1.0), std::invalid_argument);
}

}  // namespace
}  // namespace softcap_test
}  // namespace bench::kernels
