// Tests of kernels/clamp.h: forward and backward against their float64 references on every
// target (kernel_test_util.h) in float, bf16 and double (exact: a clamp only selects), in place,
// backward against central differences away from the kinks, NaN, the bound as bf16 stores it, and
// the refusal of a bound that is not positive.
#include "clamp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace clamp_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

class ClampTest : public ::testing::TestWithParam<Target> {};

TEST_P(ClampTest, ForwardAndBackwardMatchFloat64Reference) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const double bound = 8.0;  // OLMo 1.7's clip_qkv; exact in bf16
  for (int64_t n : {1, 1000, 1024, 3001}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const auto x = random_vector(static_cast<size_t>(n), 1, 16.0);  // about half of them past the bound
    const auto dy = random_vector(static_cast<size_t>(n), 2);

    if (t.float64()) {
      Dev<double> xd(t, x), yd(t, x.size()), dyd(t, dy), dxd(t, x.size());
      clamp_forward<double>(exec, xd.get(), yd.get(), n, bound);
      EXPECT_EQ(yd.host(), clamp_forward_reference(x, bound));
      clamp_backward<double>(exec, yd.get(), dyd.get(), dxd.get(), n, bound);
      EXPECT_EQ(dxd.host(), clamp_backward_reference(x, dy, bound));
    }

    const auto xf = to_storage<float>(x), dyf = to_storage<float>(dy);
    Dev<float> gxf(t, xf), yf(t, x.size()), gdyf(t, dyf), dxf(t, x.size());
    clamp_forward<float>(exec, gxf.get(), yf.get(), n, bound);
    EXPECT_EQ(to_double(yf.host()), clamp_forward_reference(to_double(xf), bound));
    clamp_backward<float>(exec, yf.get(), gdyf.get(), dxf.get(), n, bound);
    EXPECT_EQ(to_double(dxf.host()), clamp_backward_reference(to_double(xf), to_double(dyf), bound));

    Dev<float> inplace(t, xf);  // y aliasing x
    clamp_forward<float>(exec, inplace.get(), inplace.get(), n, bound);
    EXPECT_EQ(inplace.host(), yf.host());
    Dev<float> dx_alias(t, dyf);  // dx aliasing dy
    clamp_backward<float>(exec, yf.get(), dx_alias.get(), dx_alias.get(), n, bound);
    EXPECT_EQ(dx_alias.host(), dxf.host());

    const auto xb = to_storage<bf16>(x), dyb = to_storage<bf16>(dy);
    Dev<bf16> gxb(t, xb), yb(t, x.size()), gdyb(t, dyb), dxb(t, x.size());
    clamp_forward<bf16>(exec, gxb.get(), yb.get(), n, bound);
    EXPECT_EQ(to_double(yb.host()), clamp_forward_reference(to_double(xb), bound));
    clamp_backward<bf16>(exec, yb.get(), gdyb.get(), dxb.get(), n, bound);
    EXPECT_EQ(to_double(dxb.host()), clamp_backward_reference(to_double(xb), to_double(dyb), bound));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ClampTest, ::testing::ValuesIn(targets()), target_name);

TEST(Clamp, BackwardMatchesFiniteDifferencesAwayFromTheKinks) {
  // L = sum(w * clamp(x)); dL/dx from the kernel's backward against central differences, at
  // points at least 1e-3 from +-bound (a difference across a kink is no derivative).
  const double bound = 1.5;
  const int64_t n = 301;
  const auto x = random_vector(static_cast<size_t>(n), 4, 3.0);
  const auto w = random_vector(static_cast<size_t>(n), 5);
  std::vector<double> y(x.size()), dx(x.size());
  clamp_forward<double>(Exec{}, x.data(), y.data(), n, bound);
  clamp_backward<double>(Exec{}, y.data(), w.data(), dx.data(), n, bound);
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> out(v.size());
    clamp_forward<double>(Exec{}, v.data(), out.data(), n, bound);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += w[i] * out[i];
    return l;
  };
  int inside = 0, outside = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::abs(std::abs(x[i]) - bound) < 1e-3) continue;
    const double fd = central_difference(loss, x, i, 1e-5);
    ASSERT_NEAR(dx[i], fd, 1e-9 + 1e-7 * std::abs(fd)) << "at " << i;
    (std::abs(x[i]) < bound ? inside : outside) += 1;
  }
  EXPECT_GT(inside, 50);  // both sides of the kink are checked
  EXPECT_GT(outside, 50);
}

TEST(Clamp, NanPassesForwardAndStopsBackward) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {nan, -inf, inf, -8.0f, 8.0f, 0.5f};
  std::vector<float> y(x.size()), dx(x.size());
  const std::vector<float> ones(x.size(), 1.0f);
  clamp_forward<float>(Exec{}, x.data(), y.data(), static_cast<int64_t>(x.size()), 8.0);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(std::vector<float>(y.begin() + 1, y.end()), (std::vector<float>{-8, 8, -8, 8, 0.5f}));
  clamp_backward<float>(Exec{}, y.data(), ones.data(), dx.data(), static_cast<int64_t>(x.size()), 8.0);
  // NaN, the clamped infinities and x at the bound itself get 0; the inside passes dy.
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 0, 0, 0, 1}));
}

TEST(Clamp, ABoundThatBf16RoundsStillMarksEveryClampedElement) {
  // 7.3 is not a bf16: stored, it rounds to 7.3125 (above it). An x of 7.3125 lies past 7.3 in
  // exact terms but is the stored bound, so it stays and its gradient stops, as for x = 9; x = 7.25
  // (the bf16 below) passes. 7.26 rounds down, to 7.25: x = 9 is stored as 7.25, below 7.26, and
  // its gradient stops all the same (a comparison with the unrounded bound would pass it), as
  // does x = 7.25's; 7.21875 (the bf16 below) passes.
  struct Case {
    double bound;
    std::vector<float> x;
    std::vector<double> y, dx;
  };
  for (const Case& c : {Case{7.3, {9.0f, -9.0f, 7.25f, 7.3125f}, {7.3125, -7.3125, 7.25, 7.3125}, {0, 0, 1, 0}},
                        Case{7.26, {9.0f, -9.0f, 7.25f, 7.21875f}, {7.25, -7.25, 7.25, 7.21875}, {0, 0, 0, 1}}}) {
    SCOPED_TRACE(c.bound);
    std::vector<bf16> x;
    for (float v : c.x) x.push_back(tile::float_to_bf16(v));
    std::vector<bf16> y(x.size()), dx(x.size());
    const std::vector<bf16> ones(x.size(), tile::float_to_bf16(1.0f));
    clamp_forward<bf16>(Exec{}, x.data(), y.data(), 4, c.bound);
    EXPECT_EQ(to_double(y), c.y);
    clamp_backward<bf16>(Exec{}, y.data(), ones.data(), dx.data(), 4, c.bound);
    EXPECT_EQ(to_double(dx), c.dx);
  }
}

TEST(Clamp, RefusesABoundThatIsNotPositive) {
  std::vector<float> x(4, 1.0f), y(4);
  EXPECT_THROW(clamp_forward<float>(Exec{}, x.data(), y.data(), 4, 0.0), std::invalid_argument);
  EXPECT_THROW(clamp_backward<float>(Exec{}, y.data(), x.data(), y.data(), 4, -1.0), std::invalid_argument);
  EXPECT_THROW(clamp_forward<float>(Exec{}, x.data(), y.data(), 4, std::nan("")), std::invalid_argument);
}

}  // namespace
}  // namespace clamp_test
}  // namespace bench::kernels
