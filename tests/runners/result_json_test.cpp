// A case result crosses the process boundary of --isolate / --jobs as JSON: every field, the noise
// rule's and machine state's values and the profile's rows (NaN included), come back as they were.
#include "runners/result_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace bench {
namespace result_json_test {
namespace {

TEST(ResultJson, ATimingRoundTripsWithItsNoiseAndMachineState) {
  CaseResult r;
  r.status = "completed";
  r.wall_s = 1.5;
  r.n_params = 1234;
  Timing t;
  t.mode = "train_step";
  t.repetitions = 10;
  t.iterations = 7;
  t.median_ms = 2.5;
  t.mad_ms = 0.1;
  t.mfu = 0.25;
  t.samples_ms = {2.4, 2.5, 2.6};
  t.noise = 0.059304;
  t.max_noise = 0.02;
  t.noisy = true;
  t.load_avg = 3.25;
  t.steal = 0.0125;
  t.other_busy = 0.5;
  t.cores = 2;
  r.timings.push_back(t);
  Timing quiet;
  quiet.mode = "forward";
  quiet.samples_ms = {1.0};
  quiet.max_noise = 0.02;  // noise NaN (one repetition), machine state not known
  r.timings.push_back(quiet);

  const CaseResult back = result_from_json(result_json(r));
  ASSERT_EQ(back.timings.size(), 2U);
  const Timing& b = back.timings[0];
  EXPECT_EQ(b.mode, "train_step");
  EXPECT_EQ(b.repetitions, 10);
  EXPECT_EQ(b.iterations, 7);
  EXPECT_EQ(b.median_ms, 2.5);
  EXPECT_EQ(b.mfu, 0.25);
  EXPECT_EQ(b.samples_ms, t.samples_ms);
  EXPECT_EQ(b.noise, 0.059304);
  EXPECT_EQ(b.max_noise, 0.02);
  EXPECT_TRUE(b.noisy);
  EXPECT_EQ(b.load_avg, 3.25);
  EXPECT_EQ(b.steal, 0.0125);
  EXPECT_EQ(b.other_busy, 0.5);
  EXPECT_EQ(b.cores, 2);
  const Timing& q = back.timings[1];
  EXPECT_TRUE(std::isnan(q.noise));
  EXPECT_EQ(q.max_noise, 0.02);
  EXPECT_FALSE(q.noisy);
  EXPECT_TRUE(std::isnan(q.load_avg));
  EXPECT_TRUE(std::isnan(q.steal));
  EXPECT_TRUE(std::isnan(q.other_busy));
  EXPECT_EQ(q.cores, 0);
  EXPECT_EQ(back.n_params, 1234);
  EXPECT_EQ(back.wall_s, 1.5);
}

TEST(ResultJson, ProfileRowsRoundTripWithTheirNaN) {
  CaseResult r;
  r.status = "completed";
  r.profile.push_back({"train_step", "blocks.0.attn_norm", "norm", "rmsnorm", "forward",
                       "NormForward<float, 128, false, false>", 3, 0.1 + 0.2, 196608, 49152});
  r.profile.push_back({"train_step", "", "model", "", "step", "(host)", 0, 1.0 / 3.0, NAN, NAN});
  r.profile.push_back({"forward", "blocks.1.attn", "attention", "mha", "forward", "attention forward \"tiled\"", 1,
                       2.5e-4, 1.5e6, std::numeric_limits<double>::infinity()});

  const std::string text = result_json(r);
  const CaseResult back = result_from_json(text);
  ASSERT_EQ(back.profile.size(), 3U);
  const ProfileRow& norm = back.profile[0];
  EXPECT_EQ(norm.mode, "train_step");
  EXPECT_EQ(norm.scope, "blocks.0.attn_norm");
  EXPECT_EQ(norm.slot, "norm");
  EXPECT_EQ(norm.component, "rmsnorm");
  EXPECT_EQ(norm.pass, "forward");
  EXPECT_EQ(norm.kernel, "NormForward<float, 128, false, false>");
  EXPECT_EQ(norm.calls, 3);
  EXPECT_EQ(norm.ms, 0.1 + 0.2) << "every bit of the time";
  EXPECT_EQ(norm.bytes, 196608);
  EXPECT_EQ(norm.flops, 49152);
  const ProfileRow& host = back.profile[1];
  EXPECT_EQ(host.scope, "");
  EXPECT_EQ(host.component, "");
  EXPECT_EQ(host.kernel, "(host)");
  EXPECT_EQ(host.calls, 0);
  EXPECT_EQ(host.ms, 1.0 / 3.0);
  EXPECT_TRUE(std::isnan(host.bytes));
  EXPECT_TRUE(std::isnan(host.flops));
  const ProfileRow& attention = back.profile[2];
  EXPECT_EQ(attention.mode, "forward");
  EXPECT_EQ(attention.kernel, "attention forward \"tiled\"");
  EXPECT_EQ(attention.ms, 2.5e-4);
  EXPECT_EQ(attention.bytes, 1.5e6);
  EXPECT_EQ(attention.flops, std::numeric_limits<double>::infinity());
  // A result without a profile has none.
  EXPECT_TRUE(result_from_json(result_json(CaseResult{})).profile.empty());
}

}  // namespace
}  // namespace result_json_test
}  // namespace bench
