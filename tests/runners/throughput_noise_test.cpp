// The throughput runner's noise rule end to end on a tiny model: further rounds while the spread
// is above max_noise and max_time allows, the achieved noise and the machine's state stored.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "runners/registry.h"
#include "runners/stats.h"
#include "support/toml_case.h"

namespace bench {
namespace throughput_noise_test {
namespace {

CaseResult run_throughput(const std::string& settings) {
  const std::string toml =
      "[model]\nd_model = 16\nn_heads = 2\nn_layers = 1\nseq_len = 8\nbatch_size = 2\n"
      "[throughput]\nmodes = [\"forward\"]\nrepetitions = 3\nmin_time = 0.002\nwarmup_time = 0\n" +
      settings;
  const Case c = test::cases_of(toml).at(0);
  const ResolvedCase rc = test::resolve(c);
  DeviceInfo device;
  Progress progress(true);
  RunnerEnv env{test::builtin_registry(), device, progress, "", nullptr, "", ""};
  return run_case(runner_of(c), c, rc, env);
}

TEST(ThroughputNoise, AnUnreachableTargetTimesRoundsUntilMaxTimeAndIsNoisy) {
  const auto start = std::chrono::steady_clock::now();
  // 1.5 s leaves room for further rounds even when a loaded machine makes the first one slow.
  const CaseResult r = run_throughput("max_noise = 0\nmax_time = 1.5\n");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, "completed") << r.error;
  ASSERT_EQ(r.timings.size(), 1U);
  const Timing& t = r.timings[0];
  // Rounds of 3 repetitions: more than the first, and a whole number of rounds.
  EXPECT_GT(t.repetitions, 3);
  EXPECT_EQ(t.repetitions % 3, 0);
  EXPECT_EQ(t.samples_ms.size(), static_cast<size_t>(t.repetitions));
  EXPECT_TRUE(t.noisy);
  EXPECT_EQ(t.max_noise, 0.0);
  EXPECT_DOUBLE_EQ(t.noise, relative_noise(t.samples_ms));
  EXPECT_DOUBLE_EQ(t.median_ms, summarize(t.samples_ms).median);
  // The limit is kept: no round starts that would end after 1.5 s (model setup, the GEMM ceiling
  // and a loaded machine's slack besides).
  EXPECT_LT(seconds, 8.0);
#ifdef __linux__
  EXPECT_GE(t.cores, 1);
  EXPECT_GE(t.load_avg, 0.0);
  EXPECT_GE(t.other_busy, 0.0);
  EXPECT_LE(t.other_busy, 1.0);
  EXPECT_GE(t.steal, 0.0);
#endif
}

TEST(ThroughputNoise, AMetTargetOrNoTimeLeftStopsAfterTheFirstRound) {
  // Any spread is below 1000 %: the first round is the last (and however busy the machine, it
  // is not called noisy with max_busy 1).
  const CaseResult met = run_throughput("max_noise = 10\nmax_time = 60\nmax_busy = 1\n");
  ASSERT_EQ(met.status, "completed") << met.error;
  EXPECT_EQ(met.timings.at(0).repetitions, 3);
  EXPECT_FALSE(met.timings[0].noisy);
  EXPECT_EQ(met.timings[0].max_noise, 10.0);
  // The same met target on a machine said to be busy beyond max_busy 0 is noisy whenever
  // another process took any of the cores' time, and only then.
  const CaseResult busy = run_throughput("max_noise = 10\nmax_time = 60\nmax_busy = 0\n");
  ASSERT_EQ(busy.status, "completed") << busy.error;
  const Timing& b = busy.timings.at(0);
  EXPECT_EQ(b.repetitions, 3);
  EXPECT_EQ(b.noisy, b.other_busy > 0 || b.steal > 0);
  // max_time 0: one round, and noisy exactly when its spread is above the target.
  const CaseResult once = run_throughput("max_noise = 0\nmax_time = 0\nmax_busy = 1\n");
  ASSERT_EQ(once.status, "completed") << once.error;
  EXPECT_EQ(once.timings.at(0).repetitions, 3);
  EXPECT_EQ(once.timings[0].noisy, !(once.timings[0].noise <= 0.0));
}

}  // namespace
}  // namespace throughput_noise_test
}  // namespace bench
