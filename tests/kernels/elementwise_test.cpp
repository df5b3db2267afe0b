// Tests of kernels/elementwise.h: add, axpy, scale, sum_squares and the embedding kernels against
// float64 references on the CPU and emulated-block executors; embedding backward against central
// differences; sum_squares determinism across thread counts and non-finite propagation.
#include "elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::Backend;
using tile::bf16;

class ElementwiseTest : public ::testing::TestWithParam<Backend> {};

TEST_P(ElementwiseTest, AddAxpyScaleMatchFloat64) {
  const Exec exec{GetParam()};
  for (int64_t n : {1, 1000, 1024, 3001, 100003}) {
    SCOPED_TRACE(n);
    const auto a = random_vector(static_cast<size_t>(n), 1), b = random_vector(static_cast<size_t>(n), 2, 3.0);
    std::vector<double> sum(a.size()), ax(a.size()), sc(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      sum[i] = a[i] + b[i];
      ax[i] = b[i] + 0.375 * a[i];
      sc[i] = -1.5 * a[i];
    }
    auto af = to_storage<float>(a), bf = to_storage<float>(b);
    std::vector<float> out(a.size());
    add<float>(exec, af.data(), bf.data(), out.data(), n);
    EXPECT_TRUE(all_near(to_double(out), sum, 1e-6, 1e-6));
    add<float>(exec, af.data(), bf.data(), af.data(), n);  // out aliasing a
    EXPECT_TRUE(all_near(to_double(af), sum, 1e-6, 1e-6));
    af = to_storage<float>(a);
    axpy<float>(exec, 0.375f, af.data(), bf.data(), n);
    EXPECT_TRUE(all_near(to_double(bf), ax, 1e-6, 1e-6));
    scale<float>(exec, -1.5f, af.data(), n);
    EXPECT_TRUE(all_near(to_double(af), sc, 1e-6, 1e-6));

    auto ab = to_storage<bf16>(a), bb = to_storage<bf16>(b);
    std::vector<bf16> outb(a.size());
    add<bf16>(exec, ab.data(), bb.data(), outb.data(), n);
    EXPECT_TRUE(all_near(to_double(outb), sum, 0.03, 0.01));  // inputs and output rounded to 8 bits
    axpy<bf16>(exec, 0.375f, ab.data(), bb.data(), n);
    EXPECT_TRUE(all_near(to_double(bb), ax, 0.03, 0.01));
    scale<bf16>(exec, -1.5f, ab.data(), n);
    EXPECT_TRUE(all_near(to_double(ab), sc, 0.02, 0.01));

    auto ad = a;
    scale<double>(exec, -1.5, ad.data(), n);
    EXPECT_TRUE(all_near(ad, sc, 0, 0));
  }
}

TEST_P(ElementwiseTest, SumSquaresMatchesFloat64) {
  const Exec exec{GetParam()};
  EXPECT_EQ(sum_squares<float>(exec, nullptr, 0), 0.0);
  // 300001 > 256 programs * 1024: every program sums several chunks.
  for (int64_t n : {1, 5, 1023, 1025, 300001}) {
    SCOPED_TRACE(n);
    const auto x = random_vector(static_cast<size_t>(n), 3, 2.0, 0.5);
    const auto xf = to_storage<float>(x);
    const double ref = sum_squares_reference(to_double(xf));  // of the float-rounded values
    EXPECT_NEAR(sum_squares<float>(exec, xf.data(), n), ref, 1e-12 * ref);
    EXPECT_NEAR(sum_squares<double>(exec, x.data(), n), sum_squares_reference(x), 1e-12 * ref);
    const auto xb = to_storage<bf16>(x);
    EXPECT_NEAR(sum_squares<bf16>(exec, xb.data(), n), sum_squares_reference(to_double(xb)), 1e-12 * ref);
  }
  // Squares of large floats overflow float but not the double accumulator.
  std::vector<float> big(3000, 1e30f);
  const double big2 = static_cast<double>(1e30f) * static_cast<double>(1e30f);
  EXPECT_NEAR(sum_squares<float>(exec, big.data(), 3000), 3000 * big2, 1e-12 * 3000 * big2);
}

TEST_P(ElementwiseTest, SumOfValuesAndEntropyMatchFloat64) {
  const Exec exec{GetParam()};
  for (int64_t n : {1, 1023, 300001}) {
    SCOPED_TRACE(n);
    // Values of both signs: a sum that cancels; probabilities in [0, 1) with exact zeros, as
    // masked attention has, for the entropy terms (0 ln 0 = 0).
    const auto x = random_vector(static_cast<size_t>(n), 5, 1.0, 0.2);
    std::vector<double> p(x.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = i % 3 == 0 ? 0.0 : std::abs(x[i]) / 4.0;
    for (const auto& [what, v] : {std::pair{SumOf::kValues, x}, std::pair{SumOf::kEntropy, p}}) {
      double scale = 0;
      for (double e : v) scale += std::abs(e) * (what == SumOf::kEntropy ? 3.0 : 1.0);
      const auto vf = to_storage<float>(v);
      EXPECT_NEAR(sum_of<float>(exec, what, vf.data(), n), sum_of_reference(what, to_double(vf)), 1e-12 * scale);
      EXPECT_NEAR(sum_of<double>(exec, what, v.data(), n), sum_of_reference(what, v), 1e-12 * scale);
      const auto vb = to_storage<bf16>(v);
      EXPECT_NEAR(sum_of<bf16>(exec, what, vb.data(), n), sum_of_reference(what, to_double(vb)), 1e-12 * scale);
    }
  }
  // Closed form: the entropy of a uniform distribution over 1000 outcomes is ln 1000.
  const std::vector<float> uniform(1000, 1e-3f);
  EXPECT_NEAR(sum_of<float>(exec, SumOf::kEntropy, uniform.data(), 1000), std::log(1000.0), 1e-6);
  // sum_squares is sum_of(kSquares).
  const auto y = to_storage<float>(random_vector(5000, 6, 1.0, 0.0));
  EXPECT_EQ(sum_squares<float>(exec, y.data(), 5000), sum_of<float>(exec, SumOf::kSquares, y.data(), 5000));
}

// sum_of_into keeps the sum where the data is: the same terms as sum_of, its partials summed by
// one program (a tree), so it agrees with the float64 reference and with itself under any
// thread count, and the result is written, not added.
TEST_P(ElementwiseTest, SumOfIntoMatchesFloat64AndIgnoresTheThreadCount) {
  const Exec exec{GetParam()};
  for (int64_t n : {1, 1023, 300001}) {
    SCOPED_TRACE(n);
    const auto x = random_vector(static_cast<size_t>(n), 7, 1.0, 0.2);
    const auto xf = to_storage<float>(x);
    const auto xb = to_storage<bf16>(x);
    std::vector<double> partial(static_cast<size_t>(sum_squares_partials(n)), -1.0);
    for (SumOf what : {SumOf::kSquares, SumOf::kValues}) {
      double scale = 0;
      for (double e : x) scale += what == SumOf::kSquares ? e * e : std::abs(e);
      double result = 12345.0, again = 0;
      sum_of_into<float>(exec, what, xf.data(), n, partial.data(), &result);
      EXPECT_NEAR(result, sum_of_reference(what, to_double(xf)), 1e-12 * scale);
      sum_of_into<bf16>(exec, what, xb.data(), n, partial.data(), &result);
      EXPECT_NEAR(result, sum_of_reference(what, to_double(xb)), 1e-12 * scale);
      sum_of_into<double>(exec, what, x.data(), n, partial.data(), &result);
      EXPECT_NEAR(result, sum_of_reference(what, x), 1e-12 * scale);
      {
        ThreadCountGuard guard(1);
        sum_of_into<double>(exec, what, x.data(), n, partial.data(), &again);
      }
      EXPECT_EQ(result, again);  // bitwise
    }
  }
  std::vector<float> x(5000, 1.0f);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  std::vector<double> partial(static_cast<size_t>(sum_squares_partials(5000)));
  double result = 0;
  sum_of_into<float>(exec, SumOf::kSquares, x.data(), 5000, partial.data(), &result);
  EXPECT_TRUE(std::isnan(result));
}

TEST_P(ElementwiseTest, SumSquaresPropagatesNonFinite) {
  const Exec exec{GetParam()};
  std::vector<float> x(5000, 1.0f);
  x[4321] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(sum_squares<float>(exec, x.data(), 5000)));
  x[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sum_squares<float>(exec, x.data(), 5000)));
  x[4321] = -std::numeric_limits<float>::infinity();
  x[17] = 1.0f;
  EXPECT_TRUE(std::isinf(sum_squares<float>(exec, x.data(), 5000)));
}

TEST_P(ElementwiseTest, SumSquaresIndependentOfThreadCount) {
  const Exec exec{GetParam()};
  const auto x = to_storage<float>(random_vector(777777, 4, 1.0, 0.1));
  double one = 0, many = 0;
  {
    ThreadCountGuard guard(1);
    one = sum_squares<float>(exec, x.data(), static_cast<int64_t>(x.size()));
  }
  {
    ThreadCountGuard guard(2);
    many = sum_squares<float>(exec, x.data(), static_cast<int64_t>(x.size()));
  }
  EXPECT_EQ(one, many);  // bitwise
}

TEST_P(ElementwiseTest, EmbeddingMatchesFloat64) {
  const Exec exec{GetParam()};
  const int64_t vocab = 50;
  for (int64_t dim : {5, 64, 100, 1500}) {
    SCOPED_TRACE(dim);
    std::vector<int32_t> tokens(37);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + i * i) % 23);  // repeats
    const auto n = static_cast<int64_t>(tokens.size());
    const auto table = random_vector(static_cast<size_t>(vocab * dim), 5);
    const auto dout = random_vector(static_cast<size_t>(n * dim), 6);
    const auto dtable0 = random_vector(table.size(), 7, 0.1);
    std::vector<double> ref_out, ref_dtable = dtable0;
    embedding_forward_reference(tokens, table, ref_out, dim);
    embedding_backward_reference(tokens, dout, ref_dtable, dim);

    const auto tf = to_storage<float>(table);
    std::vector<float> out(ref_out.size());
    embedding_forward<float>(exec, tokens.data(), tf.data(), out.data(), n, dim);
    EXPECT_TRUE(all_near(to_double(out), ref_out, 0, 1e-7));
    auto dtf = to_storage<float>(dtable0);
    const auto df = to_storage<float>(dout);
    embedding_backward<float>(exec, tokens.data(), df.data(), dtf.data(), n, dim);
    EXPECT_TRUE(all_near(to_double(dtf), ref_dtable, 1e-5, 1e-5));

    const auto tb = to_storage<bf16>(table);
    std::vector<bf16> outb(ref_out.size());
    embedding_forward<bf16>(exec, tokens.data(), tb.data(), outb.data(), n, dim);
    std::vector<double> ref_outb;  // a copy: exactly the bf16 table values
    embedding_forward_reference(tokens, to_double(tb), ref_outb, dim);
    EXPECT_TRUE(all_near(to_double(outb), ref_outb, 0, 0));
    auto dtb = to_storage<bf16>(dtable0);
    const auto db = to_storage<bf16>(dout);
    embedding_backward<bf16>(exec, tokens.data(), db.data(), dtb.data(), n, dim);
    EXPECT_TRUE(all_near(to_double(dtb), ref_dtable, 0.1, 0.02));  // up to ~8 roundings per row
  }
}

TEST_P(ElementwiseTest, EmbeddingBackwardMatchesFiniteDifferences) {
  const Exec exec{GetParam()};
  const int64_t vocab = 11, dim = 70;
  const std::vector<int32_t> tokens = {3, 0, 3, 10, 7, 3, 0};
  const auto n = static_cast<int64_t>(tokens.size());
  const auto table = random_vector(static_cast<size_t>(vocab * dim), 8);
  const auto w = random_vector(static_cast<size_t>(n * dim), 9);
  auto loss = [&](const std::vector<double>& t) {  // L = sum(out * w)
    std::vector<double> out(static_cast<size_t>(n * dim));
    embedding_forward<double>(exec, tokens.data(), t.data(), out.data(), n, dim);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += out[i] * w[i];
    return l;
  };
  std::vector<double> dtable(table.size(), 0.0);
  embedding_backward<double>(exec, tokens.data(), w.data(), dtable.data(), n, dim);
  for (size_t i : sample_indices(table.size(), 60))
    ASSERT_NEAR(dtable[i], central_difference(loss, table, i), 1e-7) << "at " << i;
}

TEST_P(ElementwiseTest, EmbeddingBackwardIndependentOfThreadCount) {
  const Exec exec{GetParam()};
  const int64_t dim = 300, n = 500;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 31) % 17);
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(n * dim), 10));
  std::vector<float> one(static_cast<size_t>(17 * dim), 0.0f), many = one;
  {
    ThreadCountGuard guard(1);
    embedding_backward<float>(exec, tokens.data(), dout.data(), one.data(), n, dim);
  }
  {
    ThreadCountGuard guard(2);
    embedding_backward<float>(exec, tokens.data(), dout.data(), many.data(), n, dim);
  }
  EXPECT_EQ(one, many);
}

INSTANTIATE_TEST_SUITE_P(All, ElementwiseTest, ::testing::Values(Backend::kCpu, Backend::kEmulated),
                         [](const auto& tp) { return backend_name(tp.param); });

}  // namespace
}  // namespace bench::kernels
