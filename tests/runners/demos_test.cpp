// The lecture's stability demos (runners/demos.h) against float64 references and closed forms.
#include "runners/demos.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bench/random.h"

namespace bench {
namespace demos_test {
namespace {

TEST(Demos, ZLossShiftCostsBf16PrecisionNotFp32) {
  const auto rows = zloss_demo();
  ASSERT_EQ(rows.size(), 5u);
  for (const ZLossRow& r : rows) {
    // float32 logits: softmax ignores the shift (up to float32 rounding of c + logit).
    EXPECT_NEAR(r.ce_fp32, r.ce_exact, r.shift >= 10000 ? 5e-3 : 1e-4) << r.shift;
    // log Z moves with the shift, and the z-loss is coef * mean(z^2) >= coef * mean(z)^2.
    EXPECT_NEAR(r.z_mean - r.shift, rows[0].z_mean, 1e-2) << r.shift;
    EXPECT_GE(r.z_loss, 1e-4 * r.z_mean * r.z_mean * (1 - 1e-6));
    EXPECT_LE(r.z_loss, 1e-4 * std::pow(r.z_mean + 3, 2));
  }
  EXPECT_LT(std::abs(rows[0].ce_bf16 - rows[0].ce_exact), 1e-2);
  EXPECT_GT(std::abs(rows[3].ce_bf16 - rows[3].ce_exact), 0.1);  // c = 1000: bf16 spacing 4
  // c = 10000: bf16 spacing is 64, and every logit (10000 +- 8 or so) rounds to 9984: all equal,
  // uniform softmax, loss ln 1000 (to the kernel's fast-exp accuracy).
  EXPECT_NEAR(rows[4].ce_bf16, std::log(1000.0), 1e-3);
}

TEST(Demos, AttentionEntropyMatchesAFloat64Softmax) {
  // The demo's q and k, regenerated: Rng(0), q first, then k, 64 x 64 each.
  constexpr int kN = 64, kD = 64;
  Rng rng(0);
  std::vector<double> q(kN * kD), k(kN * kD);
  for (double& v : q) v = static_cast<double>(static_cast<float>(rng.normal()));
  for (double& v : k) v = static_cast<double>(static_cast<float>(rng.normal()));
  const auto rows = qk_norm_demo();
  ASSERT_EQ(rows.size(), 4u);
  for (const QkRow& r : rows) {
    double entropy = 0, max_weight = 0;
    for (int i = 0; i < kN; ++i) {
      std::vector<double> logits(kN);
      for (int j = 0; j < kN; ++j) {
        double dot = 0;
        for (int c = 0; c < kD; ++c) dot += q[i * kD + c] * k[j * kD + c];
        logits[j] = dot * r.scale * r.scale / std::sqrt(static_cast<double>(kD));
      }
      const double m = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (double l : logits) sum += std::exp(l - m);
      double h = 0, mx = 0;
      for (double l : logits) {
        const double p = std::exp(l - m) / sum;
        if (p > 0) h -= p * std::log(p);
        mx = std::max(mx, p);
      }
      entropy += h / kN;
      max_weight += mx / kN;
    }
    EXPECT_NEAR(r.entropy, entropy, 2e-3 * (1 + r.scale * r.scale)) << r.scale;
    EXPECT_NEAR(r.max_weight, max_weight, 1e-3) << r.scale;
    // QK-norm removes the scale: the same attention at every s.
    EXPECT_NEAR(r.entropy_qk_norm, rows[0].entropy_qk_norm, 1e-4);
    EXPECT_NEAR(r.max_weight_qk_norm, rows[0].max_weight_qk_norm, 1e-4);
  }
  EXPECT_NEAR(rows[0].entropy_qk_norm, rows[0].entropy, 2e-2);  // q, k ~ N(0, 1) already have RMS ~1
  EXPECT_LT(rows[3].entropy, 0.2);                              // s = 8: collapsed
  EXPECT_GT(rows[3].max_weight, 0.9);
}

TEST(Demos, SoftcapTableIsThirtyTanh) {
  const auto rows = softcap_demo();
  ASSERT_EQ(rows.size(), 9u);
  for (const SoftcapRow& r : rows) EXPECT_NEAR(r.y, 30.0 * std::tanh(r.x / 30.0), 1e-5 * 30) << r.x;
}

}  // namespace
}  // namespace demos_test
}  // namespace bench
