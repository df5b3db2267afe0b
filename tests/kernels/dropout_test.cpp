// kernels/dropout.h: the kept fraction and the mean match the rate, the mask is reproducible and
// identical on both executors, and backward (the same map) is the exact Jacobian-vector product.
#include "dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace bench::kernels {
namespace {

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

TEST(Dropout, ReproducibleAndTheSameOnBothExecutors) {
  const int64_t n = 5000;
  std::vector<float> x(n), a(n), b(n), c(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  dropout_apply<float>(Exec{}, x.data(), a.data(), n, 0.3, 7);
  dropout_apply<float>(Exec{tile::Backend::kEmulated}, x.data(), b.data(), n, 0.3, 7);
  dropout_apply<float>(Exec{}, x.data(), c.data(), n, 0.3, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a[i] != 0 || x[i] == 0, dropout_keep(7, i, 0.3f) || x[i] == 0);
}

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
}  // namespace bench::kernels
