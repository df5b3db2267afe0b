// Tests of kernels/cross_entropy.h: loss, z and the fused gradient against the float64 reference
// on every target (kernel_test_util.h; GPT-2's vocabulary included), ignored targets, large
// logits, in-place gradient, and the gradient against central differences in double; rows
// padded past the vocabulary (a row stride above it) give the unpadded results bit for bit, never
// read the padding and write it a zero gradient.
#include "cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace cross_entropy_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

struct CrossEntropyCase {
  int64_t rows;
  int64_t vocab;
  double shift;  // added to every logit: large values test the max subtraction
  Target target;
};
void PrintTo(const CrossEntropyCase& c, std::ostream* os) {
  *os << c.rows << "x" << c.vocab << " shift " << c.shift << " " << c.target.name;
}

/// Targets in [0, vocab), with row 1 ignored (-1) when there are several rows. Row 0's target is
/// column 0 and row 3's the first column of a later chunk where the vocabulary has one (1024 and
/// 4096: chunk starts of the host's widest tile and a device's): the kernel finds the target's
/// chunk by a range test, whose first column no other target falls on (a `>` for its `>=`
/// passed every test).
std::vector<int32_t> make_targets(int64_t rows, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int32_t>((r * 7919 + 13) % vocab);
  t[0] = 0;
  if (rows > 1) t[1] = -1;
  if (rows > 2) t[2] = static_cast<int32_t>(vocab - 1);
  if (rows > 3 && vocab > 1024) t[3] = vocab > 4096 ? 4096 : 1024;
  return t;
}

class CrossEntropyTest : public ::testing::TestWithParam<CrossEntropyCase> {};

TEST_P(CrossEntropyTest, MatchesFloat64Reference) {
  const CrossEntropyCase p = GetParam();
  const Target& t = p.target;
  const Exec exec = t.exec();
  const double z_coef = 1e-3, grad_scale = 1.0 / static_cast<double>(p.rows);
  const auto logits = random_vector(static_cast<size_t>(p.rows * p.vocab), 1, 3.0, p.shift);
  const auto targets = make_targets(p.rows, p.vocab);
  const auto lf = to_storage<float>(logits);
  std::vector<double> loss_ref, z_ref, d_ref;
  cross_entropy_reference(to_double(lf), targets, p.rows, p.vocab, loss_ref, z_ref, &d_ref, z_coef, grad_scale);

  const auto rows = static_cast<size_t>(p.rows);
  Dev<int32_t> gt(t, targets);
  Dev<float> glf(t, lf), gloss(t, std::vector<float>(rows, -1.0f)), gz(t, rows), gd(t, lf.size());
  cross_entropy<float>(exec, glf.get(), gt.get(), p.rows, p.vocab, p.vocab, gloss.get(), gz.get(), gd.get(), z_coef,
                       grad_scale);
  const auto loss = gloss.host();
  const auto d = gd.host();
  const double zmag = std::abs(p.shift) + 20;  // |z| bound: the absolute error of z scales with it
  EXPECT_TRUE(all_near(to_double(loss), loss_ref, 1e-6 * zmag, 1e-6));
  EXPECT_TRUE(all_near(to_double(gz.host()), z_ref, 0, 1e-6));
  EXPECT_TRUE(all_near(to_double(d), d_ref, 1e-8, 1e-4));
  if (p.rows > 1) {
    EXPECT_EQ(loss[1], 0.0f);
    for (int64_t v = 0; v < p.vocab; ++v) ASSERT_EQ(d[p.vocab + v], 0.0f);
  }
  // In place, no loss or z requested.
  Dev<float> inplace(t, lf);
  cross_entropy<float>(exec, inplace.get(), gt.get(), p.rows, p.vocab, p.vocab, nullptr, nullptr, inplace.get(), z_coef,
                       grad_scale);
  EXPECT_TRUE(all_near(to_double(inplace.host()), to_double(d), 0, 0));
  // The scale read from device memory when the kernel runs (a captured step's): the same bits,
  // whatever the scale argument says.
  Dev<float> at_scale(t, lf.size());
  const Dev<double> scale_at(t, std::vector<double>{grad_scale});
  cross_entropy<float>(exec, glf.get(), gt.get(), p.rows, p.vocab, p.vocab, nullptr, nullptr, at_scale.get(), z_coef,
                       12345.0, scale_at.get());
  EXPECT_EQ(at_scale.host(), d);
  // Forward only.
  Dev<float> loss2(t, rows);
  cross_entropy<float>(exec, glf.get(), gt.get(), p.rows, p.vocab, p.vocab, loss2.get(), nullptr, nullptr, z_coef,
                       grad_scale);
  EXPECT_EQ(loss2.host(), loss);

  if (t.float64()) {
    Dev<double> ld(t, logits), lossd(t, rows), zd(t, rows);
    std::vector<double> loss_refd, z_refd, d_refd;
    cross_entropy_reference(logits, targets, p.rows, p.vocab, loss_refd, z_refd, &d_refd, z_coef, grad_scale);
    cross_entropy<double>(exec, ld.get(), gt.get(), p.rows, p.vocab, p.vocab, lossd.get(), zd.get(), ld.get(), z_coef,
                          grad_scale);
    EXPECT_TRUE(all_near(lossd.host(), loss_refd, 1e-12, 1e-12));
    EXPECT_TRUE(all_near(ld.host(), d_refd, 1e-15, 1e-10));
  }

  const auto lb = to_storage<bf16>(logits);
  cross_entropy_reference(to_double(lb), targets, p.rows, p.vocab, loss_ref, z_ref, &d_ref, z_coef, grad_scale);
  Dev<bf16> glb(t, lb), db(t, lb.size());
  cross_entropy<bf16>(exec, glb.get(), gt.get(), p.rows, p.vocab, p.vocab, gloss.get(), gz.get(), db.get(), z_coef,
                      grad_scale);
  EXPECT_TRUE(all_near(to_double(gloss.host()), loss_ref, 1e-6 * zmag, 1e-6));  // float compute on bf16 inputs
  EXPECT_TRUE(all_near(to_double(db.host()), d_ref, 1e-8, 0.01));               // plus one bf16 rounding
}

TEST_P(CrossEntropyTest, GradientMatchesFiniteDifferences) {
  const CrossEntropyCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  if (p.vocab > 5000) GTEST_SKIP() << "the wide vocabulary is covered by the reference test";
  const Exec exec = p.target.exec();
  const double z_coef = 0.01, grad_scale = 0.7;
  const auto logits = random_vector(static_cast<size_t>(p.rows * p.vocab), 2, 2.0, p.shift);
  const auto targets = make_targets(p.rows, p.vocab);
  // L = grad_scale * sum over counted rows of (loss + z_coef z^2); ignored rows add nothing.
  auto objective = [&](const std::vector<double>& x) {
    std::vector<double> loss(static_cast<size_t>(p.rows)), z(loss.size());
    cross_entropy<double>(exec, x.data(), targets.data(), p.rows, p.vocab, p.vocab, loss.data(), z.data(), nullptr,
                          z_coef, grad_scale);
    double l = 0;
    for (int64_t r = 0; r < p.rows; ++r)
      if (targets[r] >= 0) l += grad_scale * (loss[r] + z_coef * z[r] * z[r]);
    return l;
  };
  std::vector<double> d(logits.size());
  cross_entropy<double>(exec, logits.data(), targets.data(), p.rows, p.vocab, p.vocab, nullptr, nullptr, d.data(),
                        z_coef, grad_scale);
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

/// The rows of `x` ([rows, vocab]) `ld` apart, the padding columns set to `pad`.
template <class T>
std::vector<T> padded(const std::vector<T>& x, int64_t rows, int64_t vocab, int64_t ld, T pad) {
  std::vector<T> out(static_cast<size_t>(rows * ld), pad);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x.begin() + r * vocab, x.begin() + (r + 1) * vocab, out.begin() + r * ld);
  return out;
}

/// Padded rows against the same rows unpadded, for one storage type: loss and z the same bits,
/// the gradient's real columns the same bits and its padding exactly 0. The padding holds NaN
/// (and the gradient buffer NaN before the call): a padding logit read into the max, the sum or
/// the loss, or a padding gradient left unwritten, would show.
template <class T>
void expect_padding_ignored(const Target& t, const CrossEntropyCase& p, int64_t ld) {
  using A = acc_t<T>;
  const double z_coef = 1e-3, grad_scale = 1.0 / static_cast<double>(p.rows);
  const auto x = to_storage<T>(random_vector(static_cast<size_t>(p.rows * p.vocab), 3, 3.0, p.shift));
  const auto targets = make_targets(p.rows, p.vocab);
  const auto rows = static_cast<size_t>(p.rows);
  const T nan = tile::from_acc<T>(std::numeric_limits<A>::quiet_NaN()), zero = tile::from_acc<T>(A(0));
  const Exec exec = t.exec();
  Dev<int32_t> gt(t, targets);
  Dev<T> gx(t, x), gd(t, x.size());
  Dev<A> loss(t, rows), z(t, rows);
  cross_entropy<T>(exec, gx.get(), gt.get(), p.rows, p.vocab, p.vocab, loss.get(), z.get(), gd.get(), z_coef,
                   grad_scale);
  Dev<T> px(t, padded(x, p.rows, p.vocab, ld, nan)), pd(t, std::vector<T>(rows * static_cast<size_t>(ld), nan));
  Dev<A> ploss(t, rows), pz(t, rows);
  cross_entropy<T>(exec, px.get(), gt.get(), p.rows, p.vocab, ld, ploss.get(), pz.get(), pd.get(), z_coef, grad_scale);
  EXPECT_EQ(to_double(ploss.host()), to_double(loss.host()));
  EXPECT_EQ(to_double(pz.host()), to_double(z.host()));
  EXPECT_EQ(to_double(pd.host()), to_double(padded(gd.host(), p.rows, p.vocab, ld, zero)));
  // In place (the gradient over the padded logits): the padding becomes 0 as well.
  cross_entropy<T>(exec, px.get(), gt.get(), p.rows, p.vocab, ld, nullptr, nullptr, px.get(), z_coef, grad_scale);
  EXPECT_EQ(to_double(px.host()), to_double(padded(gd.host(), p.rows, p.vocab, ld, zero)));
}

TEST_P(CrossEntropyTest, PaddedRowsGiveTheUnpaddedResults) {
  const CrossEntropyCase p = GetParam();
  // To the next multiple of 64 (the model's padding), and by one column (a padding narrower than
  // any block, so the last real chunk holds it all); and by more than a block.
  for (const int64_t ld : {(p.vocab + 63) / 64 * 64 + (p.vocab % 64 == 0 ? 64 : 0), p.vocab + 1, p.vocab + 1500}) {
    SCOPED_TRACE("ld " + std::to_string(ld));
    expect_padding_ignored<float>(p.target, p, ld);
    expect_padding_ignored<bf16>(p.target, p, ld);
    if (p.target.float64()) expect_padding_ignored<double>(p.target, p, ld);
  }
}

TEST(CrossEntropy, RowStrideBelowTheVocabularyIsRefused) {
  std::vector<float> x(8), loss(2);
  std::vector<int32_t> targets{0, 1};
  EXPECT_THROW(cross_entropy<float>(Exec{}, x.data(), targets.data(), 2, 4, 3, loss.data(), nullptr, nullptr, 0, 1),
               std::invalid_argument);
}

std::vector<CrossEntropyCase> cases() {
  std::vector<CrossEntropyCase> out;
  for (const Target& t : targets()) {
    out.push_back({1, 5, 0.0, t});
    out.push_back({7, 1000, 0.0, t});
    out.push_back({6, 768, 0.0, t});    // the 768-wide tile
    out.push_back({5, 771, 0.0, t});    // rows not a multiple of 8: unaligned 16-byte runs
    out.push_back({9, 3000, 80.0, t});  // exp(80) overflows float without the max subtraction
    out.push_back({4, 50257, -30.0, t});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, CrossEntropyTest, ::testing::ValuesIn(cases()), [](const auto& tp) {
  const CrossEntropyCase& p = tp.param;
  return std::to_string(p.rows) + "x" + std::to_string(p.vocab) + "_" + p.target.name;
});

}  // namespace
}  // namespace cross_entropy_test
}  // namespace bench::kernels
