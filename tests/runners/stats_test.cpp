// Schedules, spread statistics and the spike detector against closed forms.
#include "runners/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace bench {
namespace stats_test {
namespace {

TEST(Schedule, WarmupThenCosineToTheFloor) {
  const double peak = 1e-2;
  EXPECT_DOUBLE_EQ(lr_at(0, 100, peak, 10, "cosine", 0.1), peak / 10);
  EXPECT_DOUBLE_EQ(lr_at(9, 100, peak, 10, "cosine", 0.1), peak);
  EXPECT_DOUBLE_EQ(lr_at(10, 100, peak, 10, "cosine", 0.1), peak);  // start of the decay
  // halfway through the decay: lo + (peak - lo) / 2
  const int64_t mid = 10 + (100 - 1 - 10) / 2;
  const double progress = static_cast<double>(mid - 10) / (100 - 1 - 10);
  EXPECT_NEAR(lr_at(mid, 100, peak, 10, "cosine", 0.1), 1e-3 + (peak - 1e-3) * 0.5 * (1 + std::cos(M_PI * progress)),
              1e-15);
  EXPECT_NEAR(lr_at(99, 100, peak, 10, "cosine", 0.1), 1e-3, 1e-15);
  EXPECT_NEAR(lr_at(99, 100, peak, 10, "linear", 0.0), 0.0, 1e-15);
  EXPECT_NEAR(lr_at(54, 100, peak, 10, "linear", 0.0), peak * (1 - 44.0 / 89.0), 1e-15);
  EXPECT_DOUBLE_EQ(lr_at(77, 100, peak, 10, "constant", 0.1), peak);
  EXPECT_DOUBLE_EQ(lr_at(0, 1, peak, 0, "cosine", 0.1), peak);
}

TEST(Summary, MedianSpreadAndMad) {
  const Summary s = summarize({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(2.5));
  EXPECT_DOUBLE_EQ(s.mad, 1);
  EXPECT_DOUBLE_EQ(summarize({1, 2, 3, 10}).median, 2.5);
}

TEST(Noise, ScaledMadOverTheMedian) {
  // {5, 1, 4, 2, 3}: median 3, MAD 1 -> 1.4826 / 3.
  EXPECT_DOUBLE_EQ(relative_noise({5, 1, 4, 2, 3}), 1.4826 / 3);
  // {10, 10.1, 9.9, 10, 30}: the outlier moves neither the median (10) nor the MAD (0.1).
  EXPECT_NEAR(relative_noise({10, 10.1, 9.9, 10, 30}), 1.4826 * 0.1 / 10, 1e-15);
  // Two values: MAD |a - b| / 2 about their mean.
  EXPECT_DOUBLE_EQ(relative_noise({9, 11}), 1.4826 * 1 / 10);
  EXPECT_TRUE(std::isnan(relative_noise({4})));
  EXPECT_TRUE(std::isnan(relative_noise({})));
  EXPECT_TRUE(std::isnan(relative_noise({0, 0, 0})));
}

TEST(Noise, StopsQuietContinuesWhileTimeIsLeftThenNoisy) {
  const std::vector<double> quiet = {10, 10.05, 9.95, 10, 10.02};  // MAD 0.02: 0.3 %
  const std::vector<double> loud = {10, 11, 9, 10, 12};            // MAD 1: 14.8 %
  EXPECT_EQ(noise_step(quiet, 0.02, 0.5, 0.5, 10), NoiseStep::kStop);
  EXPECT_EQ(noise_step(quiet, 0.02, 50, 0.5, 10), NoiseStep::kStop);  // met: the time limit does not matter
  EXPECT_EQ(noise_step(loud, 0.02, 0.5, 0.5, 10), NoiseStep::kContinue);
  EXPECT_EQ(noise_step(loud, 0.2, 0.5, 0.5, 10), NoiseStep::kStop);  // 14.8 % <= 20 %
  // The next round must end within max_time: 9.4 + 0.5 fits in 10, 9.6 + 0.5 does not.
  EXPECT_EQ(noise_step(loud, 0.02, 9.4, 0.5, 10), NoiseStep::kContinue);
  EXPECT_EQ(noise_step(loud, 0.02, 9.6, 0.5, 10), NoiseStep::kNoisy);
  // max_time 0: the first round only.
  EXPECT_EQ(noise_step(loud, 0.02, 0.01, 0.01, 0), NoiseStep::kNoisy);
  EXPECT_EQ(noise_step(quiet, 0.02, 0.01, 0.01, 0), NoiseStep::kStop);
  // One repetition: the spread is not known, so it is not quiet.
  EXPECT_EQ(noise_step({10}, 0.02, 0.1, 0.1, 10), NoiseStep::kContinue);
  EXPECT_EQ(noise_step({10}, 0.02, 0.1, 0.1, 0), NoiseStep::kNoisy);
}

TEST(Noise, ABusyMachineIsNoisyHoweverSteady) {
  // The figures of docs/design.md's noise sitting: idle other_busy 0.3-3.3 %, one core loaded 25-31 %.
  EXPECT_FALSE(machine_busy(0.033, 0.002, 0.1));
  EXPECT_TRUE(machine_busy(0.254, 0.001, 0.1));
  EXPECT_TRUE(machine_busy(0.0, 0.15, 0.1));  // a hypervisor taking 15 %
  EXPECT_FALSE(machine_busy(0.1, 0.1, 0.1));  // at the limit: not above it
  EXPECT_FALSE(machine_busy(NAN, NAN, 0.1));  // not known: not called busy
  EXPECT_TRUE(machine_busy(0.254, NAN, 0.1));
}

TEST(Noise, AddingQuietRoundsBringsANoisyStartBelowTheTarget) {
  // A first round disturbed by another process, then quiet rounds: the rule keeps going until the
  // quiet repetitions are the majority, and the median is theirs.
  std::vector<double> v = {14, 19, 12, 17, 15};
  int rounds = 1;
  while (noise_step(v, 0.02, rounds * 1.0, 1.0, 100) == NoiseStep::kContinue) {
    for (int i = 0; i < 5; ++i) v.push_back(10 + 0.01 * i);
    ++rounds;
  }
  EXPECT_EQ(rounds, 3);  // 5 loud + 5 quiet: median between the groups; + 5 more quiet: quiet majority
  EXPECT_LE(relative_noise(v), 0.02);
  EXPECT_NEAR(summarize(v).median, 10.03, 1e-12);  // the 8th of 15 values, of which the 10 smallest are quiet
}

TEST(Spikes, OnlyOutliersOfTheTrailingWindowCount) {
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back(3.0 - 0.01 * i + 0.001 * ((i * 7919) % 13));  // falling, noisy
  EXPECT_TRUE(find_spikes(v, 50, 7).empty());  // the ordinary decrease is no spike
  v[60] += 3.0;                                // ~19 sd of the window (a falling window has sd ~0.14)
  v[80] = NAN;                                 // divergence, not a spike
  const auto s = find_spikes(v, 50, 7);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], 60);
  v[5] += 10;  // fewer than 10 earlier values: not judged
  EXPECT_EQ(find_spikes(v, 50, 7).front(), 60);
}

TEST(LrSensitivity, HandComputedGrid) {
  // Grid of 5 learning rates, L0 = ln 256 = 5.545177444479562. Final val losses:
  //   2.0, 1.5 (best), 3.0, 6.0 (worse than init: counted as L0), NaN (diverged: L0).
  // mean of min(f, L0) = (2.0 + 1.5 + 3.0 + L0 + L0) / 5 = (6.5 + 11.090354888959124) / 5
  //                    = 3.5180709777918248; minus min f = 1.5 -> 2.0180709777918248.
  const double l0 = std::log(256.0);
  EXPECT_NEAR(lr_sensitivity({2.0, 1.5, 3.0, 6.0, NAN}, l0), 2.0180709777918248, 1e-12);
  // Every learning rate equally good: no sensitivity.
  EXPECT_DOUBLE_EQ(lr_sensitivity({2.5, 2.5, 2.5}, l0), 0.0);
  // Only one good learning rate out of four, the rest diverged: (1 + 3 L0) / 4 - 1.
  EXPECT_NEAR(lr_sensitivity({1.0, INFINITY, NAN, -INFINITY}, l0), (1.0 + 3 * l0) / 4 - 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(lr_sensitivity({}, l0)));
}

}  // namespace
}  // namespace stats_test
}  // namespace bench
