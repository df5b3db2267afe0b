// Tests of kernels/attention_fused.h on every target (cpu, emulated, guarded, and cuda where a
// device is visible): forward (out, log-sum-exp, row max) and backward against the float64
// references of kernels/attention.h, in double (host targets) and float, for every variant (MHA,
// GQA, MQA, sliding window with and without causal masking, soft-cap, probability dropout, all
// together; d_head not a power of two and up to 256; T not a multiple of anything); bf16 to its
// rounding; the gradient against central differences of a scalar loss in double; the same bits
// on a second run and for one and two threads; the materializing path's numbers to rounding; the
// refusals.
#include "attention_fused.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "attention_test_util.h"
#include "kernel_test_util.h"

namespace bench::kernels {
namespace attention_fused_test {
namespace {

using namespace testing;         // NOLINT: the kernel test helpers
using namespace test_attention;  // NOLINT: the attention tests' helpers

struct FusedCase {
  std::string name;
  AttentionArgs args;
};

int64_t n_rows(const AttentionArgs& a) { return attention_fused_state_size(a); }

template <class T>
struct FusedRun {
  std::vector<T> out, dqkv;
  std::vector<tile::acc_t<T>> lse, row_max;
};

/// Forward and (with dout) backward on target `tg`, every buffer in its memory, outputs poisoned.
template <class T>
FusedRun<T> run_fused(const Target& tg, const AttentionArgs& a, const std::vector<T>& qkv, const std::vector<T>* dout) {
  using A = tile::acc_t<T>;
  const Dev<T> x(tg, qkv);
  Dev<T> out(tg, static_cast<size_t>(out_size(a)));
  Dev<A> lse(tg, static_cast<size_t>(n_rows(a))), row_max(tg, static_cast<size_t>(n_rows(a)));
  attention_fused_forward<T>(tg.exec(), a, x.get(), out.get(), lse.get(), row_max.get());
  FusedRun<T> r;
  if (dout != nullptr) {
    const Dev<T> dy(tg, *dout);
    Dev<T> dx(tg, qkv.size());
    attention_fused_backward<T>(tg.exec(), a, x.get(), out.get(), lse.get(), dy.get(), dx.get());
    r.dqkv = dx.host();
  }
  r.out = out.host();
  r.lse = lse.host();
  r.row_max = row_max.host();
  return r;
}

using Param = std::tuple<Target, FusedCase>;

class AttentionFusedTest : public ::testing::TestWithParam<Param> {};

TEST_P(AttentionFusedTest, MatchesFloat64ReferenceInDouble) {
  const auto& [tg, c] = GetParam();
  if (!tg.float64()) GTEST_SKIP() << "float64 has no CUDA path";
  const AttentionArgs& a = c.args;
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 41, 1.5);
  const auto dout = random_vector(static_cast<size_t>(out_size(a)), 42);
  std::vector<double> ref_out, ref_max, ref_dqkv;
  attention_forward_reference(a, qkv, ref_out, &ref_max);
  attention_backward_reference(a, qkv, dout, ref_dqkv);
  const auto r = run_fused<double>(tg, a, qkv, &dout);
  EXPECT_TRUE(all_near(r.out, ref_out, 1e-12, 1e-11));
  EXPECT_TRUE(all_near(r.row_max, ref_max, 1e-12, 1e-12));
  EXPECT_TRUE(all_near(r.lse, attention_lse_reference(a, qkv), 1e-12, 1e-11));
  EXPECT_TRUE(all_near(r.dqkv, ref_dqkv, 1e-12, 1e-10));
  RecordProperty("max_abs_diff_dqkv", std::to_string(max_abs_diff(r.dqkv, ref_dqkv)));
}

TEST_P(AttentionFusedTest, MatchesFloat64ReferenceInFloat) {
  const auto& [tg, c] = GetParam();
  const AttentionArgs& a = c.args;
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 43, 1.5));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 44));
  std::vector<double> ref_out, ref_max, ref_dqkv;  // of the float-rounded inputs
  attention_forward_reference(a, to_double(qkv), ref_out, &ref_max);
  attention_backward_reference(a, to_double(qkv), to_double(dout), ref_dqkv);
  const auto r = run_fused<float>(tg, a, qkv, &dout);
  EXPECT_TRUE(all_near(to_double(r.out), ref_out, 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.row_max), ref_max, 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.lse), attention_lse_reference(a, to_double(qkv)), 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.dqkv), ref_dqkv, 3e-5, 1e-4));
  RecordProperty("max_abs_diff_dqkv", std::to_string(max_abs_diff(to_double(r.dqkv), ref_dqkv)));
}

// bf16 storage, float arithmetic: the reference of the bf16-rounded inputs, to bf16's rounding of
// the outputs (and of out, which the backward's D reads).
TEST_P(AttentionFusedTest, MatchesFloat64ReferenceInBf16) {
  const auto& [tg, c] = GetParam();
  const AttentionArgs& a = c.args;
  const auto qkv = to_storage<tile::bf16>(random_vector(static_cast<size_t>(qkv_size(a)), 45));
  const auto dout = to_storage<tile::bf16>(random_vector(static_cast<size_t>(out_size(a)), 46));
  std::vector<double> ref_out, ref_max, ref_dqkv;
  attention_forward_reference(a, to_double(qkv), ref_out, &ref_max);
  attention_backward_reference(a, to_double(qkv), to_double(dout), ref_dqkv);
  const auto r = run_fused<tile::bf16>(tg, a, qkv, &dout);
  EXPECT_TRUE(all_near(to_double(r.out), ref_out, 1e-2, 1e-2));
  EXPECT_TRUE(all_near(to_double(r.row_max), ref_max, 1e-5, 1e-5));  // float arithmetic, not rounded
  EXPECT_TRUE(all_near(to_double(r.dqkv), ref_dqkv, 3e-2, 3e-2));
}

// A second run gives the same bits: every element has one writer and a fixed order.
TEST_P(AttentionFusedTest, SameBitsOnASecondRun) {
  const auto& [tg, c] = GetParam();
  const AttentionArgs& a = c.args;
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 47));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 48));
  const auto r1 = run_fused<float>(tg, a, qkv, &dout);
  const auto r2 = run_fused<float>(tg, a, qkv, &dout);
  EXPECT_EQ(r1.out, r2.out);
  EXPECT_EQ(r1.lse, r2.lse);
  EXPECT_EQ(r1.dqkv, r2.dqkv);
}

// The materializing path on the same inputs (the CPU executor): the same numbers to float
// rounding (not bit for bit: the order of the sums differs), the row max exactly up to rounding.
// Both paths' errors add up here, so the tolerance is looser than against the float64 reference
// (at d_head 200, dropout 0.3, their outs differ by up to 3e-6 at 0.03).
TEST_P(AttentionFusedTest, AgreesWithMaterializingPath) {
  const auto& [tg, c] = GetParam();
  if (tg.backend != tile::Backend::kCpu) GTEST_SKIP() << "once, on the cpu target";
  const AttentionArgs& a = c.args;
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 49, 1.5));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 50));
  std::vector<float> out(static_cast<size_t>(out_size(a))), probs(static_cast<size_t>(attention_probs_size(a)));
  std::vector<float> row_max(static_cast<size_t>(n_rows(a))), dqkv(qkv.size());
  std::vector<float> ws(static_cast<size_t>(attention_workspace_size<float>(Exec{}, a)));
  attention_forward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), row_max.data(), ws.data());
  attention_backward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), dout.data(), dqkv.data(), ws.data());
  const auto r = run_fused<float>(tg, a, qkv, &dout);
  EXPECT_TRUE(all_near(to_double(r.out), to_double(out), 1e-5, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.dqkv), to_double(dqkv), 6e-5, 1e-4));
  EXPECT_TRUE(all_near(to_double(r.row_max), to_double(row_max), 2e-6, 1e-6));
}

// The gradient of L = sum(out * w) against central differences of the forward in double, at
// sampled elements of q, k and v (where the CPU and emulated targets do float64 arithmetic).
TEST_P(AttentionFusedTest, GradientMatchesCentralDifferences) {
  const auto& [tg, c] = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(tg);
  const AttentionArgs& a = c.args;
  if (qkv_size(a) > 20000) GTEST_SKIP() << "a small case suffices (each sample runs two forwards)";
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 51);
  const auto w = random_vector(static_cast<size_t>(out_size(a)), 52);
  const auto loss = [&](const std::vector<double>& x) {
    const auto r = run_fused<double>(tg, a, x, nullptr);
    double l = 0;
    for (size_t i = 0; i < w.size(); ++i) l += r.out[i] * w[i];
    return l;
  };
  const auto r = run_fused<double>(tg, a, qkv, &w);
  for (size_t i : sample_indices(qkv.size(), 40)) {
    const double fd = central_difference(loss, qkv, i, 1e-5);
    EXPECT_NEAR(r.dqkv[i], fd, 1e-7 + 1e-6 * std::abs(fd)) << "element " << i;
  }
}

std::vector<FusedCase> fused_cases() {
  return {
      {"mha", make_args(2, 37, 2, 2, 16)},
      {"gqa", make_args(1, 45, 4, 2, 8)},
      {"mqa_d12", make_args(1, 33, 3, 1, 12)},  // d_head not a power of two
      {"window", make_args(1, 50, 2, 2, 8, 0, 7)},
      {"window_not_causal", make_args(1, 40, 2, 1, 8, 0, 9, false)},  // keys before the band get no gradient
      {"not_causal", make_args(2, 29, 2, 2, 20, 0, 0, false)},
      {"softcap", make_args(1, 40, 2, 2, 16, 2.0)},  // logits of 1.5^2 * 16 / 4 reach the cap
      {"dropout", make_args(2, 41, 2, 1, 8, 0, 0, true, 0.2)},
      {"everything", make_args(2, 47, 4, 2, 24, 3.0, 13, true, 0.1)},
      {"one_token", make_args(3, 1, 2, 1, 4, 1.0, 0, true, 0.5)},
      {"d64", make_args(1, 21, 2, 2, 64)},
      {"d200_gqa", make_args(1, 19, 4, 2, 200, 0, 0, true, 0.3)},  // the 256-wide tile, masked past 200
      {"scale_2",
       [] {
         AttentionArgs a = make_args(1, 30, 2, 1, 8, 1.5);
         a.scale = 2.0;  // any scale, not only 1 / sqrt(d_head)
         return a;
       }()},
  };
}

INSTANTIATE_TEST_SUITE_P(Variants, AttentionFusedTest,
                         ::testing::Combine(::testing::ValuesIn(targets()), ::testing::ValuesIn(fused_cases())),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::get<1>(i.param).name + "_" + std::get<0>(i.param).name;
                         });

// Dropout acts: the seed changes the mask and the output, not the log-sum-exp (of the undropped
// probabilities), so the references above check the mask itself.
TEST(AttentionFused, DropoutMaskMatters) {
  AttentionArgs a = make_args(1, 40, 2, 2, 8, 0, 0, true, 0.3);
  const Target cpu = targets().front();
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 53));
  const auto r1 = run_fused<float>(cpu, a, qkv, nullptr);
  a.dropout_seed += 1;
  const auto r2 = run_fused<float>(cpu, a, qkv, nullptr);
  EXPECT_GT(max_abs_diff(to_double(r1.out), to_double(r2.out)), 1e-3);
  EXPECT_EQ(r1.lse, r2.lse);
}

// A captured step reads its step from device memory (args.dropout_step_at; the seed is then the
// site's dropout_site_seed): each replay draws that step's mask, the same bits as the step's
// seed given directly (dropout_seed), forward and backward, on every target.
TEST(AttentionFused, TheStepReadFromMemoryDrawsThatStepsMask) {
  const AttentionArgs a = make_args(2, 23, 2, 1, 8, 0, 0, true, 0.3);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 56));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 57));
  for (const Target& tg : targets()) {
    SCOPED_TRACE(tg.name);
    expect_step_read_from_memory(
        tg, a, 1234, 3, [&](const AttentionArgs& s) { return run_fused<float>(tg, s, qkv, &dout); },
        [](const FusedRun<float>& got, const FusedRun<float>& want) {
          EXPECT_EQ(got.out, want.out);
          EXPECT_EQ(got.lse, want.lse);
          EXPECT_EQ(got.dqkv, want.dqkv);
        });
  }
}

// Each program runs on one thread: the same bits for one and two threads.
TEST(AttentionFused, SameBitsAcrossThreadCounts) {
  const AttentionArgs a = make_args(2, 60, 4, 2, 16, 4.0, 30, true, 0.1);
  const Target cpu = targets().front();
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 54));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 55));
  FusedRun<float> one, two;
  {
    const ThreadCountGuard g(1);
    one = run_fused<float>(cpu, a, qkv, &dout);
  }
  {
    const ThreadCountGuard g(2);
    two = run_fused<float>(cpu, a, qkv, &dout);
  }
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.dqkv, two.dqkv);
}

TEST(AttentionFused, Refusals) {
  EXPECT_EQ(attention_fused_unsupported(make_args(1, 8, 2, 2, 256)), "");
  EXPECT_NE(attention_fused_unsupported(make_args(1, 8, 2, 2, 257)), "");
  const Exec cpu{};
  AttentionArgs a = make_args(1, 8, 2, 2, 4);
  std::vector<float> x(static_cast<size_t>(qkv_size(a))), o(static_cast<size_t>(out_size(a))), l(16);
  AttentionArgs bad = a;
  bad.n_kv_heads = 3;
  EXPECT_THROW(attention_fused_forward<float>(cpu, bad, x.data(), o.data(), l.data(), nullptr), std::invalid_argument);
  bad = a;
  bad.dropout = 1;
  EXPECT_THROW(attention_fused_forward<float>(cpu, bad, x.data(), o.data(), l.data(), nullptr), std::invalid_argument);
  bad = a;
  bad.d_head = 300;
  EXPECT_THROW(attention_fused_forward<float>(cpu, bad, x.data(), o.data(), l.data(), nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace attention_fused_test
}  // namespace bench::kernels
