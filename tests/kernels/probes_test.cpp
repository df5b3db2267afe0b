// The step's probes and loss reduced into device memory (kernels/probes.h): against float64
// references, and bit for bit against the host code they replace (the CPU's numbers must not
// move), on every target.
#include "probes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace probes_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

class ProbesTest : public ::testing::TestWithParam<Target> {};

// The max of every element, exact (a max rounds nothing), a NaN anywhere wins, -inf for none.
TEST_P(ProbesTest, MaxOfIntoIsTheExactMaxAndPropagatesNaN) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (int64_t n : {1, 1000, 1025, 300001}) {
    SCOPED_TRACE(n);
    auto x = random_vector(static_cast<size_t>(n), 9, 4.0, -1.0);
    x[static_cast<size_t>(n) / 2] = 100.5;  // the max, in the middle of some program's share
    const auto xf = to_storage<float>(x);
    Dev<double> partial(t, static_cast<size_t>(max_of_partials(n))), result(t, std::vector<double>{0.0});
    max_of_into<float>(exec, Dev<float>(t, xf).get(), n, partial.get(), result.get());
    EXPECT_EQ(result.host()[0], max_of_reference(to_double(xf)));
    EXPECT_EQ(result.host()[0], 100.5);
    if (t.float64()) {
      max_of_into<double>(exec, Dev<double>(t, x).get(), n, partial.get(), result.get());
      EXPECT_EQ(result.host()[0], max_of_reference(x));
    }
    std::vector<float> with_nan = xf;
    with_nan[static_cast<size_t>(n) - 1] = std::numeric_limits<float>::quiet_NaN();
    max_of_into<float>(exec, Dev<float>(t, with_nan).get(), n, partial.get(), result.get());
    EXPECT_TRUE(std::isnan(result.host()[0]));
    std::vector<float> with_inf = xf;
    with_inf[0] = std::numeric_limits<float>::infinity();
    max_of_into<float>(exec, Dev<float>(t, with_inf).get(), n, partial.get(), result.get());
    EXPECT_EQ(result.host()[0], std::numeric_limits<double>::infinity());
    // Every value below 0: the max is negative, so no padded lane of either stage may count as a 0.
    std::vector<float> negative = xf;
    for (float& v : negative) v = -std::abs(v) - 0.5f;
    max_of_into<float>(exec, Dev<float>(t, negative).get(), n, partial.get(), result.get());
    EXPECT_EQ(result.host()[0], max_of_reference(to_double(negative)));
    EXPECT_LT(result.host()[0], 0.0);
    std::vector<float> lowest(static_cast<size_t>(n), -std::numeric_limits<float>::infinity());
    max_of_into<float>(exec, Dev<float>(t, lowest).get(), n, partial.get(), result.get());
    EXPECT_EQ(result.host()[0], -std::numeric_limits<double>::infinity());
  }
}

// sum_in_order_into gives sum_of's bits on the host executors (both sum the partials in order)
// and agrees with the float64 reference everywhere, for each kind of term (squares: the grad
// norm; values: the logit mean; entropy: the attention entropy, over probabilities with zeros).
TEST_P(ProbesTest, SumInOrderIntoHasTheHostSumsBits) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (int64_t n : {1, 1023, 300001}) {
    SCOPED_TRACE(n);
    const auto x = random_vector(static_cast<size_t>(n), 7, 1.0, 0.2);
    std::vector<double> p(x.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = i % 3 == 0 ? 0.0 : std::abs(x[i]) / 4.0;
    Dev<double> partial(t, static_cast<size_t>(sum_squares_partials(n))), result(t, std::vector<double>{1.0});
    for (const SumOf what : {SumOf::kSquares, SumOf::kValues, SumOf::kEntropy}) {
      SCOPED_TRACE(static_cast<int>(what));
      const std::vector<double>& v = what == SumOf::kEntropy ? p : x;
      double scale = 0;
      for (double e : v) scale += what == SumOf::kSquares ? e * e : std::abs(e) * (what == SumOf::kEntropy ? 3.0 : 1.0);
      const Dev<float> vf(t, to_storage<float>(v));
      const Dev<bf16> vb(t, to_storage<bf16>(v));
      sum_in_order_into<float>(exec, what, vf.get(), n, partial.get(), result.get());
      EXPECT_NEAR(result.host()[0], sum_of_reference(what, to_double(to_storage<float>(v))), 1e-12 * scale);
      if (t.backend == tile::Backend::kCpu || t.backend == tile::Backend::kGuarded) {
        EXPECT_EQ(result.host()[0], sum_of<float>(exec, what, vf.get(), n));
        sum_in_order_into<bf16>(exec, what, vb.get(), n, partial.get(), result.get());
        EXPECT_EQ(result.host()[0], sum_of<bf16>(exec, what, vb.get(), n));
      }
    }
  }
}

// The head's loss, z_mean and z_loss over the rows with a target, in row order: the bits of the
// same loop on the host, float64 reference included; ignored rows count nowhere; target_scale
// is 1 / the rows with a target.
TEST_P(ProbesTest, LossSumsAndTargetScaleMatchTheHostLoop) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const int64_t rows = 4099;
  const auto loss = random_vector(static_cast<size_t>(rows), 3, 2.0, 3.0);
  const auto z = random_vector(static_cast<size_t>(rows), 4, 3.0, 1.0);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) targets[static_cast<size_t>(i)] = i % 7 == 3 ? -1 : static_cast<int32_t>(i % 50);
  const Dev<int32_t> tg(t, targets);
  const auto lf = to_storage<float>(loss), zf = to_storage<float>(z);
  Dev<double> out(t, std::vector<double>(3, 0.0)), scale(t, std::vector<double>{0.0});
  loss_sums<float>(exec, Dev<float>(t, lf).get(), Dev<float>(t, zf).get(), tg.get(), rows, 1e-3, out.get());
  const std::vector<double> expected = loss_sums_reference(to_double(lf), to_double(zf), targets, 1e-3);
  EXPECT_EQ(out.host(), expected);  // the same loop in double: the same bits
  target_scale(exec, tg.get(), rows, scale.get());
  int64_t valid = 0;
  for (int32_t v : targets) valid += v >= 0 ? 1 : 0;
  EXPECT_EQ(valid, rows - (rows + 3) / 7);
  EXPECT_EQ(scale.host()[0], 1.0 / static_cast<double>(valid));
  if (t.float64()) {
    loss_sums<double>(exec, Dev<double>(t, loss).get(), Dev<double>(t, z).get(), tg.get(), rows, 0.0, out.get());
    EXPECT_EQ(out.host(), loss_sums_reference(loss, z, targets, 0.0));
  }
  // No target at all: everything 0, as the host loop gives.
  const Dev<int32_t> none(t, std::vector<int32_t>(static_cast<size_t>(rows), -1));
  loss_sums<float>(exec, Dev<float>(t, lf).get(), Dev<float>(t, zf).get(), none.get(), rows, 1e-3, out.get());
  EXPECT_EQ(out.host(), std::vector<double>(3, 0.0));
  target_scale(exec, none.get(), rows, scale.get());
  EXPECT_EQ(scale.host()[0], 0.0);
}

INSTANTIATE_TEST_SUITE_P(Targets, ProbesTest, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace probes_test
}  // namespace bench::kernels
