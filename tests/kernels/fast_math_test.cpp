// Tests of kernels/fast_math.h: fast_exp and fast_tanh against double-precision libm over their
// whole float range, and their special values (underflow, overflow, infinities, NaN).
#include "fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace bench::kernels {
namespace fast_math_test {
namespace {

TEST(FastMath, ExpWithinThreeTenthsOfAMillionthRelative) {
  double worst = 0;
  float at = 0;
  for (float x = -87.33f; x <= 88.72f; x += 7.3e-4f) {  // ~2e5 points, steps not aligned with ln2
    const double ref = std::exp(static_cast<double>(x));
    const double rel = std::abs(fast_exp(x) - ref) / ref;
    if (rel > worst) worst = rel, at = x;
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << at;  // expf itself is within 6e-8 (half an ulp)
}

TEST(FastMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-inf), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);  // below the smallest normal float: flushed to zero
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::max()), 0.0f);
  EXPECT_EQ(fast_exp(89.0f), inf);
  EXPECT_EQ(fast_exp(inf), inf);
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fast_exp(1.0), std::exp(1.0));  // double is libm's
}

TEST(FastMath, TanhWithinThreeTenthsOfAMillionthRelative) {
  double worst = 0;
  float at = 0;
  for (float x = -12.0f; x <= 12.0f; x += 1.1e-4f) {
    const double ref = std::tanh(static_cast<double>(x));
    const double err = std::abs(fast_tanh(x) - ref) / std::max(std::abs(ref), 1e-30);
    if (err > worst) worst = err, at = x;
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << at;
}

TEST(FastMath, TanhSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_EQ(fast_tanh(1e-30f), 1e-30f);
  EXPECT_EQ(fast_tanh(100.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace fast_math_test
}  // namespace bench::kernels
