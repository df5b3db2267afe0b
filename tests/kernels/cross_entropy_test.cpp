// Tests of kernels/cross_entropy.h: loss, z and the fused gradient against the float64 reference
// on the CPU and emulated-block executors (GPT-2's vocabulary included), ignored targets, large
// logits, in-place gradient, and the gradient against central differences in double.
#include "cross_entropy.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::Backend;
using tile::bf16;

struct CrossEntropyCase {
  int64_t rows;
  int64_t vocab;
  double shift;  // added to every logit: large values test the max subtraction
  Backend backend;
};
void PrintTo(const CrossEntropyCase& c, std::ostream* os) {
  *os << c.rows << "x" << c.vocab << " shift " << c.shift << " " << backend_name(c.backend);
}

/// Targets in [0, vocab), with row 1 ignored (-1) when there are several rows.
std::vector<int32_t> make_targets(int64_t rows, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int32_t>((r * 7919 + 13) % vocab);
  if (rows > 1) t[1] = -1;
  if (rows > 2) t[2] = static_cast<int32_t>(vocab - 1);
  return t;
}

class CrossEntropyTest : public ::testing::TestWithParam<CrossEntropyCase> {};

TEST_P(CrossEntropyTest, MatchesFloat64Reference) {
  const CrossEntropyCase p = GetParam();
  const Exec exec{p.backend};
  const double z_coef = 1e-3, grad_scale = 1.0 / static_cast<double>(p.rows);
  const auto logits = random_vector(static_cast<size_t>(p.rows * p.vocab), 1, 3.0, p.shift);
  const auto targets = make_targets(p.rows, p.vocab);
  const auto lf = to_storage<float>(logits);
  std::vector<double> loss_ref, z_ref, d_ref;
  cross_entropy_reference(to_double(lf), targets, p.rows, p.vocab, loss_ref, z_ref, &d_ref, z_coef, grad_scale);

  std::vector<float> loss(static_cast<size_t>(p.rows), -1.0f), z(loss.size()), d(lf.size());
  cross_entropy<float>(exec, lf.data(), targets.data(), p.rows, p.vocab, loss.data(), z.data(), d.data(), z_coef,
                       grad_scale);
  const double zmag = std::abs(p.shift) + 20;  // |z| bound: the absolute error of z scales with it
  EXPECT_TRUE(all_near(to_double(loss), loss_ref, 1e-6 * zmag, 1e-6));
  EXPECT_TRUE(all_near(to_double(z), z_ref, 0, 1e-6));
  EXPECT_TRUE(all_near(to_double(d), d_ref, 1e-8, 1e-4));
  if (p.rows > 1) {
    EXPECT_EQ(loss[1], 0.0f);
    for (int64_t v = 0; v < p.vocab; ++v) ASSERT_EQ(d[p.vocab + v], 0.0f);
  }
  // In place, no loss or z requested.
  auto inplace = lf;
  cross_entropy<float>(exec, inplace.data(), targets.data(), p.rows, p.vocab, nullptr, nullptr, inplace.data(), z_coef,
                       grad_scale);
  EXPECT_TRUE(all_near(to_double(inplace), to_double(d), 0, 0));
  // Forward only.
  std::vector<float> loss2(loss.size());
  cross_entropy<float>(exec, lf.data(), targets.data(), p.rows, p.vocab, loss2.data(), nullptr, nullptr, z_coef,
                       grad_scale);
  EXPECT_EQ(loss2, loss);

  auto ld = logits;
  std::vector<double> lossd(loss.size()), zd(loss.size());
  std::vector<double> loss_refd, z_refd, d_refd;
  cross_entropy_reference(logits, targets, p.rows, p.vocab, loss_refd, z_refd, &d_refd, z_coef, grad_scale);
  cross_entropy<double>(exec, ld.data(), targets.data(), p.rows, p.vocab, lossd.data(), zd.data(), ld.data(), z_coef,
                        grad_scale);
  EXPECT_TRUE(all_near(lossd, loss_refd, 1e-12, 1e-12));
  EXPECT_TRUE(all_near(ld, d_refd, 1e-15, 1e-10));

  const auto lb = to_storage<bf16>(logits);
  cross_entropy_reference(to_double(lb), targets, p.rows, p.vocab, loss_ref, z_ref, &d_ref, z_coef, grad_scale);
  std::vector<bf16> db(lb.size());
  cross_entropy<bf16>(exec, lb.data(), targets.data(), p.rows, p.vocab, loss.data(), z.data(), db.data(), z_coef,
                      grad_scale);
  EXPECT_TRUE(all_near(to_double(loss), loss_ref, 1e-6 * zmag, 1e-6));  // float compute on bf16 inputs
  EXPECT_TRUE(all_near(to_double(db), d_ref, 1e-8, 0.01));              // plus one bf16 rounding
}

TEST_P(CrossEntropyTest, GradientMatchesFiniteDifferences) {
  const CrossEntropyCase p = GetParam();
  if (p.vocab > 5000) GTEST_SKIP() << "the wide vocabulary is covered by the reference test";
  const Exec exec{p.backend};
  const double z_coef = 0.01, grad_scale = 0.7;
  const auto logits = random_vector(static_cast<size_t>(p.rows * p.vocab), 2, 2.0, p.shift);
  const auto targets = make_targets(p.rows, p.vocab);
  // L = grad_scale * sum over counted rows of (loss + z_coef z^2); ignored rows add nothing.
  auto objective = [&](const std::vector<double>& x) {
    std::vector<double> loss(static_cast<size_t>(p.rows)), z(loss.size());
    cross_entropy<double>(exec, x.data(), targets.data(), p.rows, p.vocab, loss.data(), z.data(), nullptr, z_coef,
                          grad_scale);
    double l = 0;
    for (int64_t r = 0; r < p.rows; ++r)
      if (targets[r] >= 0) l += grad_scale * (loss[r] + z_coef * z[r] * z[r]);
    return l;
  };
  std::vector<double> d(logits.size());
  cross_entropy<double>(exec, logits.data(), targets.data(), p.rows, p.vocab, nullptr, nullptr, d.data(), z_coef,
                        grad_scale);
  for (size_t i : sample_indices(logits.size(), 50)) {
    const double fd = central_difference(objective, logits, i);
    ASSERT_NEAR(d[i], fd, 1e-7 + 1e-5 * std::abs(fd)) << "at " << i;
  }
  // Every target element is checked: the one-hot term lives there.
  for (int64_t r = 0; r < p.rows; ++r) {
    if (targets[r] < 0) continue;
    const auto i = static_cast<size_t>(r * p.vocab + targets[r]);
    const double fd = central_difference(objective, logits, i);
    ASSERT_NEAR(d[i], fd, 1e-7 + 1e-5 * std::abs(fd)) << "target of row " << r;
  }
}

std::vector<CrossEntropyCase> cases() {
  std::vector<CrossEntropyCase> out;
  for (Backend be : {Backend::kCpu, Backend::kEmulated}) {
    out.push_back({1, 5, 0.0, be});
    out.push_back({7, 1000, 0.0, be});
    out.push_back({9, 3000, 80.0, be});  // exp(80) overflows float without the max subtraction
    out.push_back({4, 50257, -30.0, be});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, CrossEntropyTest, ::testing::ValuesIn(cases()), [](const auto& tp) {
  const CrossEntropyCase& p = tp.param;
  return std::to_string(p.rows) + "x" + std::to_string(p.vocab) + "_" + backend_name(p.backend);
});

}  // namespace
}  // namespace bench::kernels
