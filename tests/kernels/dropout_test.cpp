// kernels/dropout.h: the kept fraction and the mean match the rate, the mask is reproducible and
// identical on every target (kernel_test_util.h), and backward (the same map) is the exact
// Jacobian-vector product.
#include "dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace dropout_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers

TEST(Dropout, KeepsOneMinusPAndPreservesTheMean) {
  const int64_t n = 200003;
  for (double p : {0.1, 0.5, 0.9}) {
    std::vector<float> x(n, 1.0f), y(n);
    dropout_apply<float>(Exec{}, x.data(), y.data(), n, p, 42);
    int64_t kept = 0;
    double sum = 0;
    for (float v : y) {
      kept += v != 0;
      sum += v;
      ASSERT_TRUE(v == 0.0f || std::abs(v - 1.0 / (1.0 - p)) < 1e-5);
    }
    const double frac = static_cast<double>(kept) / n;
    const double sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(frac, 1 - p, 5 * sd) << p;
    EXPECT_NEAR(sum / n, 1.0, 5 * sd / (1 - p)) << p;
  }
}

TEST(Dropout, ReproducibleAndASiteOfItsOwn) {
  const int64_t n = 5000;
  std::vector<float> x(n), a(n), c(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  dropout_apply<float>(Exec{}, x.data(), a.data(), n, 0.3, 7);
  dropout_apply<float>(Exec{}, x.data(), c.data(), n, 0.3, 8);
  EXPECT_NE(a, c);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a[i] != 0 || x[i] == 0, dropout_keep(7, i, 0.3f) || x[i] == 0);
}

class DropoutTest : public ::testing::TestWithParam<Target> {};

// Every target keeps exactly the elements the mask keeps and scales them alike, in place too; a
// rate of zero copies.
TEST_P(DropoutTest, TheMaskOfEveryTargetIsTheCpus) {
  const Target& t = GetParam();
  const int64_t n = 5001;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  std::vector<float> want(n);
  dropout_apply<float>(Exec{}, x.data(), want.data(), n, 0.3, 7);
  Dev<float> gx(t, x), gy(t, x.size());
  dropout_apply<float>(t.exec(), gx.get(), gy.get(), n, 0.3, 7);
  EXPECT_EQ(gy.host(), want);
  dropout_apply<float>(t.exec(), gx.get(), gx.get(), n, 0.3, 7);
  EXPECT_EQ(gx.host(), want);
  Dev<tile::bf16> xb(t, to_storage<tile::bf16>(to_double(x))), yb(t, x.size());
  dropout_apply<tile::bf16>(t.exec(), xb.get(), yb.get(), n, 0.5, 11);
  const auto got = to_double(yb.host());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], dropout_keep(11, i, 0.5f) ? 2.0 * static_cast<double>(x[i]) : 0.0) << "at " << i;
  Dev<float> z(t, x.size());
  dropout_apply<float>(t.exec(), gy.get(), z.get(), n, 0.0, 1);
  EXPECT_EQ(z.host(), want);
}

// A captured step reads its step from device memory: the seed split into the site's part and the
// step's is the seed as it always was (its definition, written out here), and a launch with the
// site's seed and the step in the target's memory draws that step's mask.
TEST_P(DropoutTest, TheStepReadFromMemoryDrawsThatStepsMask) {
  const Target& t = GetParam();
  const uint64_t case_seed = 1234;
  for (int64_t step : {0, 1, 7, 999})
    for (int64_t site : {int64_t{-1}, int64_t{0}, int64_t{13}, int64_t{1} << 40}) {
      const uint64_t defined = mix64(mix64(case_seed ^ 0x5bd1e995u) +
                                     static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(site));
      ASSERT_EQ(dropout_seed(case_seed, step, site), defined);
      ASSERT_EQ(dropout_seed_at(dropout_site_seed(case_seed, site), step), defined);
    }
  const int64_t n = 3001, site = 5;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  Dev<float> gx(t, x), gy(t, x.size());
  for (int64_t step : {3, 4}) {
    std::vector<float> want(n);
    dropout_apply<float>(Exec{}, x.data(), want.data(), n, 0.3, dropout_seed(case_seed, step, site));
    Dev<int64_t> at(t, std::vector<int64_t>{step});
    const int64_t* step_at = at.get();
    dropout_apply<float>(t.exec(), gx.get(), gy.get(), n, 0.3, dropout_launch_seed(case_seed, 0, site, step_at),
                         step_at);
    EXPECT_EQ(gy.host(), want) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, DropoutTest, ::testing::ValuesIn(targets()), target_name);

TEST(Dropout, BackwardIsTheSameLinearMap) {
  // L = sum(w * dropout(x)) is linear in x, so dL/dx = dropout(w) with the same seed, exactly.
  const int64_t n = 3001;
  std::vector<double> x(n), w(n), y(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.1 * i);
    w[i] = std::cos(0.07 * i);
  }
  dropout_apply<double>(Exec{}, w.data(), g.data(), n, 0.25, 99);
  for (int64_t i = 0; i < n; i += 97) {
    auto loss = [&](double xi) {
      std::vector<double> xx = x;
      xx[i] = xi;
      dropout_apply<double>(Exec{}, xx.data(), y.data(), n, 0.25, 99);
      double l = 0;
      for (int64_t j = 0; j < n; ++j) l += w[j] * y[j];
      return l;
    };
    EXPECT_NEAR((loss(x[i] + 1e-6) - loss(x[i] - 1e-6)) / 2e-6, g[i], 1e-7);
  }
}

TEST(Dropout, RateZeroCopiesAndSitesDiffer) {
  std::vector<float> x = {1, 2, 3}, y(3);
  dropout_apply<float>(Exec{}, x.data(), y.data(), 3, 0.0, 1);
  EXPECT_EQ(x, y);
  EXPECT_NE(dropout_seed(1, 0, 0), dropout_seed(1, 0, 1));
  EXPECT_NE(dropout_seed(1, 0, 0), dropout_seed(1, 1, 0));
}

}  // namespace
}  // namespace dropout_test
}  // namespace bench::kernels
