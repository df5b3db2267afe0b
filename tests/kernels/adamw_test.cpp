// Tests of kernels/adamw.h: several steps against a scalar float64 loop, the closed form of the
// first step, decay before the update, on every target (kernel_test_util.h), for float, double
// and bf16 parameters.
#include "adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace adamw_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

AdamWStep step_of(int64_t step) {
  return AdamWStep{/*lr=*/3e-3,       /*beta1=*/0.9, /*beta2=*/0.95, /*eps=*/1e-8, /*decay=*/3e-3 * 0.1, step,
                   /*grad_scale=*/0.5};
}

class AdamWTest : public ::testing::TestWithParam<Target> {};

TEST_P(AdamWTest, StepsMatchScalarFloat64Loop) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (int64_t n : {1, 5, 3001}) {
    SCOPED_TRACE(n);
    auto p_ref = to_double(to_storage<float>(random_vector(static_cast<size_t>(n), 1)));
    std::vector<double> m_ref(p_ref.size(), 0.0), v_ref(p_ref.size(), 0.0);
    const auto size = p_ref.size();
    Dev<float> pf(t, to_storage<float>(p_ref)), mf(t, std::vector<float>(size, 0.0f)),
        vf(t, std::vector<float>(size, 0.0f)), gf(t, size);
    Dev<double> pd(t, p_ref), md(t, std::vector<double>(size, 0.0)), vd(t, std::vector<double>(size, 0.0)), gd(t, size);
    for (int64_t step = 1; step <= 6; ++step) {
      SCOPED_TRACE(step);
      const auto g = to_double(to_storage<float>(random_vector(size, static_cast<uint32_t>(10 + step), 2.0)));
      gf.set(to_storage<float>(g));
      adamw_reference(p_ref, g, m_ref, v_ref, step_of(step));
      adamw_update<float>(exec, pf.get(), gf.get(), mf.get(), vf.get(), n, step_of(step));
      EXPECT_TRUE(all_near(to_double(pf.host()), p_ref, 1e-6, 1e-6));
      EXPECT_TRUE(all_near(to_double(mf.host()), m_ref, 1e-6, 1e-5));
      EXPECT_TRUE(all_near(to_double(vf.host()), v_ref, 1e-7, 1e-5));
      if (!t.float64()) continue;
      gd.set(g);
      adamw_update<double>(exec, pd.get(), gd.get(), md.get(), vd.get(), n, step_of(step));
      EXPECT_TRUE(all_near(pd.host(), p_ref, 1e-15, 1e-14));
      EXPECT_TRUE(all_near(md.host(), m_ref, 1e-15, 1e-14));
      EXPECT_TRUE(all_near(vd.host(), v_ref, 1e-15, 1e-14));
    }
  }
}

TEST_P(AdamWTest, FirstStepHasClosedForm) {
  // With m = v = 0, step 1 gives m/(1-b1) = g' and sqrt(v/(1-b2)) = |g'|:
  // p1 = p0 (1 - decay) - lr g' / (|g'| + eps), a sign step of size lr.
  const Target& t = GetParam();
  if (!t.float64()) GTEST_SKIP() << "float64 has no CUDA path: StepsMatchScalarFloat64Loop covers float there";
  const Exec exec = t.exec();
  const auto p0 = random_vector(777, 2);
  const auto g = random_vector(777, 3);
  const AdamWStep s = step_of(1);
  const std::vector<double> zero(p0.size(), 0.0);
  Dev<double> gp(t, p0), gg(t, g), m(t, zero), v(t, zero);
  adamw_update<double>(exec, gp.get(), gg.get(), m.get(), v.get(), 777, s);
  const auto p = gp.host();
  for (size_t i = 0; i < p.size(); ++i) {
    const double gs = s.grad_scale * g[i];
    ASSERT_NEAR(p[i], p0[i] * (1 - s.decay) - s.lr * gs / (std::abs(gs) + s.eps), 1e-15) << "at " << i;
  }
  // Decay only (zero gradient): p scales by exactly (1 - decay).
  Dev<double> q(t, p0), z(t, zero), mq(t, zero), vq(t, zero);
  adamw_update<double>(exec, q.get(), z.get(), mq.get(), vq.get(), 777, s);
  const auto qh = q.host();
  for (size_t i = 0; i < qh.size(); ++i) ASSERT_DOUBLE_EQ(qh[i], p0[i] * (1 - s.decay));
}

TEST_P(AdamWTest, Bf16ParametersWithFloatMoments) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const int64_t n = 2049;
  auto p_ref = to_double(to_storage<bf16>(random_vector(static_cast<size_t>(n), 4)));
  std::vector<double> m_ref(p_ref.size(), 0.0), v_ref(p_ref.size(), 0.0);
  Dev<bf16> pb(t, to_storage<bf16>(p_ref)), gb(t, p_ref.size());
  Dev<float> m(t, std::vector<float>(p_ref.size(), 0.0f)), v(t, std::vector<float>(p_ref.size(), 0.0f));
  for (int64_t step = 1; step <= 3; ++step) {
    const auto g = to_double(to_storage<bf16>(random_vector(p_ref.size(), static_cast<uint32_t>(20 + step))));
    gb.set(to_storage<bf16>(g));
    adamw_reference(p_ref, g, m_ref, v_ref, step_of(step));
    adamw_update<bf16>(exec, pb.get(), gb.get(), m.get(), v.get(), n, step_of(step));
  }
  // Each step rounds p to 8 bits (relative 2^-9): three roundings of |p| ~ 1, plus lr-sized
  // updates that bf16 may partly absorb.
  EXPECT_TRUE(all_near(to_double(pb.host()), p_ref, 0.01, 0.006));
  EXPECT_TRUE(all_near(to_double(m.host()), m_ref, 1e-6, 1e-5));
}

// Master weights: the float copy follows the float64 reference (to float rounding), the bf16
// parameters are exactly its rounding, and updates far below half a bf16 ulp (lr 1e-5 on
// parameters near 1, ulp 2^-7) accumulate in the master while plain bf16 parameters keep them
// rounded away.
TEST_P(AdamWTest, Bf16MasterWeightsKeepEveryUpdate) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const int64_t n = 2049;
  auto p_ref = to_double(to_storage<bf16>(random_vector(static_cast<size_t>(n), 4)));
  for (double& x : p_ref) x += x >= 0 ? 1.0 : -1.0;  // |p| in [1, 2): a bf16 ulp of 2^-7
  p_ref = to_double(to_storage<bf16>(p_ref));
  std::vector<double> m_ref(p_ref.size(), 0.0), v_ref(p_ref.size(), 0.0);
  const std::vector<float> zeros(p_ref.size(), 0.0f);
  Dev<bf16> pb(t, to_storage<bf16>(p_ref)), plain(t, to_storage<bf16>(p_ref)), gb(t, p_ref.size());
  Dev<float> master(t, std::vector<float>(p_ref.begin(), p_ref.end()));
  Dev<float> m(t, zeros), v(t, zeros), m2(t, zeros), v2(t, zeros);
  const auto p0 = p_ref;
  for (int64_t step = 1; step <= 20; ++step) {
    AdamWStep s = step_of(step);
    s.lr = 1e-5;
    s.decay = 0;
    const auto g = to_double(to_storage<bf16>(random_vector(p_ref.size(), static_cast<uint32_t>(40 + step))));
    gb.set(to_storage<bf16>(g));
    adamw_reference(p_ref, g, m_ref, v_ref, s);
    adamw_update<bf16>(exec, pb.get(), gb.get(), m.get(), v.get(), n, s, master.get());
    adamw_update<bf16>(exec, plain.get(), gb.get(), m2.get(), v2.get(), n, s);
  }
  const auto mh = master.host();
  const auto ph = pb.host(), plainh = plain.host();
  EXPECT_TRUE(all_near(to_double(mh), p_ref, 1e-7, 1e-6));
  int64_t moved_master = 0, moved_plain = 0;
  for (size_t i = 0; i < ph.size(); ++i) {
    ASSERT_EQ(ph[i].bits, tile::float_to_bf16(mh[i]).bits) << "at " << i;
    moved_master += mh[i] != static_cast<float>(p0[i]) ? 1 : 0;
    moved_plain += tile::bf16_to_float(plainh[i]) != static_cast<float>(p0[i]) ? 1 : 0;
  }
  EXPECT_GT(moved_master, n * 99 / 100);
  EXPECT_EQ(moved_plain, 0) << "each step is at most lr = 1e-5, below half an ulp (2^-8)";
}

// The capturable step: adamw_scalars counts the steps and derives the clip scale and the bias
// corrections from the summed squares in the state; adamw_update reading them from the state
// gives what the host-folded step gives: bitwise on the host executors (the same doubles, rounded
// once); on CUDA the device's pow may differ from the host's in the last bit of a double.
TEST_P(AdamWTest, StateStepMatchesTheFoldedStep) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const bool exact = t.float64();  // the host executors
  const auto same = [&](double got, double want) {
    if (exact) {
      EXPECT_EQ(got, want);
    } else {
      EXPECT_NEAR(got, want, 4e-16 * std::abs(want));
    }
  };
  const int64_t n = 3001;
  const double clip = 1.0;
  const auto p0 = to_storage<float>(random_vector(static_cast<size_t>(n), 5));
  const std::vector<float> zeros(p0.size(), 0.0f);
  Dev<float> p_host(t, p0), p_state(t, p0), m1(t, zeros), v1(t, zeros), m2(t, zeros), v2(t, zeros), gg(t, p0.size());
  Dev<double> gstate(t, std::vector<double>(kAdamStateSize, 0.0));
  std::vector<double> state(kAdamStateSize, 0.0);
  for (int64_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE(step);
    // Gradients whose norm is above the clip on odd steps and below it on even ones.
    const double size = step % 2 == 1 ? 3.0 : 0.001;
    const auto g = to_storage<float>(random_vector(p0.size(), static_cast<uint32_t>(60 + step), size));
    gg.set(g);
    double ss = 0;
    for (float x : g) ss += static_cast<double>(x) * static_cast<double>(x);
    state = gstate.host();
    state[kAdamSumSquares] = ss;
    gstate.set(state);
    adamw_scalars(exec, gstate.get(), 0.9, 0.95, clip);
    state = gstate.host();
    const double norm = std::sqrt(ss);
    const double scale = norm > clip ? clip / (norm + 1e-6) : 1.0;
    EXPECT_EQ(state[kAdamStep], static_cast<double>(step));
    same(state[kAdamGradScale], scale);
    same(state[kAdamInvBc1], 1 / (1 - std::pow(0.9, static_cast<double>(step))));
    same(state[kAdamInvBc2], 1 / (1 - std::pow(0.95, static_cast<double>(step))));
    EXPECT_EQ(scale < 1.0, step % 2 == 1);
    AdamWStep folded = step_of(step);
    folded.grad_scale = scale;
    AdamWStep from_state = step_of(0);  // step and grad_scale must come from the state
    from_state.grad_scale = 1e9;
    from_state.state = gstate.get();
    adamw_update<float>(exec, p_host.get(), gg.get(), m1.get(), v1.get(), n, folded);
    adamw_update<float>(exec, p_state.get(), gg.get(), m2.get(), v2.get(), n, from_state);
    const auto a = p_host.host(), b = p_state.host();
    if (exact) {
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "at " << i;
    } else {
      EXPECT_TRUE(all_near(to_double(b), to_double(a), 1e-7, 1e-6));
    }
  }
  // No clip: the scale is 1 whatever the norm, and a NaN norm is not clipped (it shows).
  state[kAdamSumSquares] = 1e30;
  gstate.set(state);
  adamw_scalars(exec, gstate.get(), 0.9, 0.95, 0.0);
  EXPECT_EQ(gstate.host()[kAdamGradScale], 1.0);
  state = gstate.host();
  state[kAdamSumSquares] = std::nan("");
  gstate.set(state);
  adamw_scalars(exec, gstate.get(), 0.9, 0.95, clip);
  state = gstate.host();
  EXPECT_EQ(state[kAdamGradScale], 1.0);
  EXPECT_EQ(state[kAdamStep], 6.0);
}

// The rates of a capturable step: the learning rate and 1 - decay read from memory
// (AdamWStep::lr_at, keep_at) when the kernel runs give bitwise the step with them folded in (the
// same doubles, rounded once to the compute type), on every target; the folded settings are then
// ignored.
TEST_P(AdamWTest, RatesReadFromMemoryMatchTheFoldedRates) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const int64_t n = 3001;
  const auto p0 = to_storage<float>(random_vector(static_cast<size_t>(n), 7));
  const std::vector<float> zeros(p0.size(), 0.0f);
  Dev<float> p_folded(t, p0), p_read(t, p0), m1(t, zeros), v1(t, zeros), m2(t, zeros), v2(t, zeros), gg(t, p0.size());
  Dev<double> rates(t, std::vector<double>(2, 0.0));
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(step);
    gg.set(to_storage<float>(random_vector(p0.size(), static_cast<uint32_t>(80 + step), 1.0)));
    AdamWStep folded = step_of(step);
    folded.lr = 1e-3 * static_cast<double>(step);  // a schedule: each step its own rates
    folded.decay = folded.lr * 0.3;
    rates.set({folded.lr, 1 - folded.decay});
    AdamWStep read = step_of(step);  // stale rates, which must not be used
    read.lr = 1e9;
    read.decay = 0.5;
    read.lr_at = rates.get();
    read.keep_at = rates.get() + 1;
    adamw_update<float>(exec, p_folded.get(), gg.get(), m1.get(), v1.get(), n, folded);
    adamw_update<float>(exec, p_read.get(), gg.get(), m2.get(), v2.get(), n, read);
    const auto a = p_folded.host(), b = p_read.host();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "at " << i;
  }
  EXPECT_NE(p_folded.host(), p0) << "the steps must move the parameters";
}

INSTANTIATE_TEST_SUITE_P(Targets, AdamWTest, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace adamw_test
}  // namespace bench::kernels
