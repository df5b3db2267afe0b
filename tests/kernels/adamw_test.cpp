// Tests of kernels/adamw.h: several steps against a scalar float64 loop, the closed form of the
// first step, decay before the update, on the CPU and emulated-block executors, for float,
// double and bf16 parameters.
#include "adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::Backend;
using tile::bf16;

AdamWStep step_of(int64_t step) {
  return AdamWStep{/*lr=*/3e-3,       /*beta1=*/0.9, /*beta2=*/0.95, /*eps=*/1e-8, /*decay=*/3e-3 * 0.1, step,
                   /*grad_scale=*/0.5};
}

class AdamWTest : public ::testing::TestWithParam<Backend> {};

TEST_P(AdamWTest, StepsMatchScalarFloat64Loop) {
  const Exec exec{GetParam()};
  for (int64_t n : {1, 5, 3001}) {
    SCOPED_TRACE(n);
    auto p_ref = to_double(to_storage<float>(random_vector(static_cast<size_t>(n), 1)));
    std::vector<double> m_ref(p_ref.size(), 0.0), v_ref(p_ref.size(), 0.0);
    auto pf = to_storage<float>(p_ref);
    std::vector<float> mf(pf.size(), 0.0f), vf(pf.size(), 0.0f);
    auto pd = p_ref;
    std::vector<double> md(pd.size(), 0.0), vd(pd.size(), 0.0);
    for (int64_t step = 1; step <= 6; ++step) {
      SCOPED_TRACE(step);
      const auto g = to_double(to_storage<float>(random_vector(pf.size(), static_cast<uint32_t>(10 + step), 2.0)));
      const auto gf = to_storage<float>(g);
      adamw_reference(p_ref, g, m_ref, v_ref, step_of(step));
      adamw_update<float>(exec, pf.data(), gf.data(), mf.data(), vf.data(), n, step_of(step));
      adamw_update<double>(exec, pd.data(), g.data(), md.data(), vd.data(), n, step_of(step));
      EXPECT_TRUE(all_near(to_double(pf), p_ref, 1e-6, 1e-6));
      EXPECT_TRUE(all_near(to_double(mf), m_ref, 1e-6, 1e-5));
      EXPECT_TRUE(all_near(to_double(vf), v_ref, 1e-7, 1e-5));
      EXPECT_TRUE(all_near(pd, p_ref, 1e-15, 1e-14));
      EXPECT_TRUE(all_near(md, m_ref, 1e-15, 1e-14));
      EXPECT_TRUE(all_near(vd, v_ref, 1e-15, 1e-14));
    }
  }
}

TEST_P(AdamWTest, FirstStepHasClosedForm) {
  // With m = v = 0, step 1 gives m/(1-b1) = g' and sqrt(v/(1-b2)) = |g'|:
  // p1 = p0 (1 - decay) - lr g' / (|g'| + eps), a sign step of size lr.
  const Exec exec{GetParam()};
  const auto p0 = random_vector(777, 2);
  const auto g = random_vector(777, 3);
  const AdamWStep s = step_of(1);
  auto p = p0;
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  adamw_update<double>(exec, p.data(), g.data(), m.data(), v.data(), 777, s);
  for (size_t i = 0; i < p.size(); ++i) {
    const double gs = s.grad_scale * g[i];
    ASSERT_NEAR(p[i], p0[i] * (1 - s.decay) - s.lr * gs / (std::abs(gs) + s.eps), 1e-15) << "at " << i;
  }
  // Decay only (zero gradient): p scales by exactly (1 - decay).
  auto q = p0;
  std::vector<double> zero(q.size(), 0.0), mq = zero, vq = zero;
  adamw_update<double>(exec, q.data(), zero.data(), mq.data(), vq.data(), 777, s);
  for (size_t i = 0; i < q.size(); ++i) ASSERT_DOUBLE_EQ(q[i], p0[i] * (1 - s.decay));
}

TEST_P(AdamWTest, Bf16ParametersWithFloatMoments) {
  const Exec exec{GetParam()};
  const int64_t n = 2049;
  auto p_ref = to_double(to_storage<bf16>(random_vector(static_cast<size_t>(n), 4)));
  std::vector<double> m_ref(p_ref.size(), 0.0), v_ref(p_ref.size(), 0.0);
  auto pb = to_storage<bf16>(p_ref);
  std::vector<float> m(pb.size(), 0.0f), v(pb.size(), 0.0f);
  for (int64_t step = 1; step <= 3; ++step) {
    const auto g = to_double(to_storage<bf16>(random_vector(pb.size(), static_cast<uint32_t>(20 + step))));
    const auto gb = to_storage<bf16>(g);
    adamw_reference(p_ref, g, m_ref, v_ref, step_of(step));
    adamw_update<bf16>(exec, pb.data(), gb.data(), m.data(), v.data(), n, step_of(step));
  }
  // Each step rounds p to 8 bits (relative 2^-9): three roundings of |p| ~ 1, plus lr-sized
  // updates that bf16 may partly absorb.
  EXPECT_TRUE(all_near(to_double(pb), p_ref, 0.01, 0.006));
  EXPECT_TRUE(all_near(to_double(m), m_ref, 1e-6, 1e-5));
}

// Master weights: the float copy follows the float64 reference (to float rounding), the bf16
// parameters are exactly its rounding, and updates far below half a bf16 ulp (lr 1e-5 on
// parameters near 1, ulp 2^-7) accumulate in the master while plain bf16 parameters keep them
// rounded away.
TEST_P(AdamWTest, Bf16MasterWeightsKeepEveryUpdate) {
  const Exec exec{GetParam()};
  const int64_t n = 2049;
  auto p_ref = to_double(to_storage<bf16>(random_vector(static_cast<size_t>(n), 4)));
  for (double& x : p_ref) x += x >= 0 ? 1.0 : -1.0;  // |p| in [1, 2): a bf16 ulp of 2^-7
  p_ref = to_double(to_storage<bf16>(p_ref));
  std::vector<double> m_ref(p_ref.size(), 0.0), v_ref(p_ref.size(), 0.0);
  auto pb = to_storage<bf16>(p_ref), plain = pb;
  std::vector<float> master(p_ref.begin(), p_ref.end());
  std::vector<float> m(pb.size(), 0.0f), v(pb.size(), 0.0f), m2 = m, v2 = v;
  const auto p0 = p_ref;
  for (int64_t step = 1; step <= 20; ++step) {
    AdamWStep s = step_of(step);
    s.lr = 1e-5;
    s.decay = 0;
    const auto g = to_double(to_storage<bf16>(random_vector(pb.size(), static_cast<uint32_t>(40 + step))));
    const auto gb = to_storage<bf16>(g);
    adamw_reference(p_ref, g, m_ref, v_ref, s);
    adamw_update<bf16>(exec, pb.data(), gb.data(), m.data(), v.data(), n, s, master.data());
    adamw_update<bf16>(exec, plain.data(), gb.data(), m2.data(), v2.data(), n, s);
  }
  EXPECT_TRUE(all_near(to_double(master), p_ref, 1e-7, 1e-6));
  int64_t moved_master = 0, moved_plain = 0;
  for (size_t i = 0; i < pb.size(); ++i) {
    ASSERT_EQ(pb[i].bits, tile::float_to_bf16(master[i]).bits) << "at " << i;
    moved_master += master[i] != static_cast<float>(p0[i]) ? 1 : 0;
    moved_plain += tile::bf16_to_float(plain[i]) != static_cast<float>(p0[i]) ? 1 : 0;
  }
  EXPECT_GT(moved_master, n * 99 / 100);
  EXPECT_EQ(moved_plain, 0) << "each step is at most lr = 1e-5, below half an ulp (2^-8)";
}

// The capturable step: adamw_scalars counts the steps and derives the clip scale and the bias
// corrections from the summed squares in the state; adamw_update reading them from the state
// gives bitwise what the host-folded step gives (the same doubles, rounded once).
TEST_P(AdamWTest, StateStepMatchesTheFoldedStepBitwise) {
  const Exec exec{GetParam()};
  const int64_t n = 3001;
  const double clip = 1.0;
  auto p_host = to_storage<float>(random_vector(static_cast<size_t>(n), 5));
  auto p_state = p_host;
  std::vector<float> m1(p_host.size(), 0.0f), v1 = m1, m2 = m1, v2 = m1;
  std::vector<double> state(kAdamStateSize, 0.0);
  for (int64_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE(step);
    // Gradients whose norm is above the clip on odd steps and below it on even ones.
    const double size = step % 2 == 1 ? 3.0 : 0.001;
    const auto g = to_storage<float>(random_vector(p_host.size(), static_cast<uint32_t>(60 + step), size));
    double ss = 0;
    for (float x : g) ss += static_cast<double>(x) * static_cast<double>(x);
    state[kAdamSumSquares] = ss;
    adamw_scalars(exec, state.data(), 0.9, 0.95, clip);
    const double norm = std::sqrt(ss);
    const double scale = norm > clip ? clip / (norm + 1e-6) : 1.0;
    EXPECT_EQ(state[kAdamStep], static_cast<double>(step));
    EXPECT_EQ(state[kAdamGradScale], scale);
    EXPECT_EQ(state[kAdamInvBc1], 1 / (1 - std::pow(0.9, static_cast<double>(step))));
    EXPECT_EQ(state[kAdamInvBc2], 1 / (1 - std::pow(0.95, static_cast<double>(step))));
    EXPECT_EQ(scale < 1.0, step % 2 == 1);
    AdamWStep folded = step_of(step);
    folded.grad_scale = scale;
    AdamWStep from_state = step_of(0);  // step and grad_scale must come from the state
    from_state.grad_scale = 1e9;
    from_state.state = state.data();
    adamw_update<float>(exec, p_host.data(), g.data(), m1.data(), v1.data(), n, folded);
    adamw_update<float>(exec, p_state.data(), g.data(), m2.data(), v2.data(), n, from_state);
    for (size_t i = 0; i < p_host.size(); ++i) ASSERT_EQ(p_host[i], p_state[i]) << "at " << i;
  }
  // No clip: the scale is 1 whatever the norm, and a NaN norm is not clipped (it shows).
  state[kAdamSumSquares] = 1e30;
  adamw_scalars(exec, state.data(), 0.9, 0.95, 0.0);
  EXPECT_EQ(state[kAdamGradScale], 1.0);
  state[kAdamSumSquares] = std::nan("");
  adamw_scalars(exec, state.data(), 0.9, 0.95, clip);
  EXPECT_EQ(state[kAdamGradScale], 1.0);
  EXPECT_EQ(state[kAdamStep], 6.0);
}

INSTANTIATE_TEST_SUITE_P(All, AdamWTest, ::testing::Values(Backend::kCpu, Backend::kEmulated),
                         [](const auto& tp) { return backend_name(tp.param); });

}  // namespace
}  // namespace bench::kernels
