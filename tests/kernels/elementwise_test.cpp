// Tests of kernels/elementwise.h: add, axpy, scale, sum_squares and the embedding kernels against
// float64 references on every target (kernel_test_util.h); embedding backward against central
// differences; sum_squares determinism across thread counts and non-finite propagation; the
// strided block copy and fill.
#include "elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace elementwise_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

class ElementwiseTest : public ::testing::TestWithParam<Target> {};

TEST_P(ElementwiseTest, AddAxpyScaleMatchFloat64) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (int64_t n : {1, 1000, 1024, 3001, 100003}) {
    SCOPED_TRACE(n);
    const auto a = random_vector(static_cast<size_t>(n), 1), b = random_vector(static_cast<size_t>(n), 2, 3.0);
    std::vector<double> sum(a.size()), ax(a.size()), sc(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      sum[i] = a[i] + b[i];
      ax[i] = b[i] + 0.375 * a[i];
      sc[i] = -1.5 * a[i];
    }
    Dev<float> af(t, to_storage<float>(a)), bf(t, to_storage<float>(b)), out(t, a.size());
    add<float>(exec, af.get(), bf.get(), out.get(), n);
    EXPECT_TRUE(all_near(to_double(out.host()), sum, 1e-6, 1e-6));
    add<float>(exec, af.get(), bf.get(), af.get(), n);  // out aliasing a
    EXPECT_TRUE(all_near(to_double(af.host()), sum, 1e-6, 1e-6));
    af.set(to_storage<float>(a));
    axpy<float>(exec, 0.375f, af.get(), bf.get(), n);
    EXPECT_TRUE(all_near(to_double(bf.host()), ax, 1e-6, 1e-6));
    scale<float>(exec, -1.5f, af.get(), n);
    EXPECT_TRUE(all_near(to_double(af.host()), sc, 1e-6, 1e-6));

    Dev<bf16> ab(t, to_storage<bf16>(a)), bb(t, to_storage<bf16>(b)), outb(t, a.size());
    add<bf16>(exec, ab.get(), bb.get(), outb.get(), n);
    EXPECT_TRUE(all_near(to_double(outb.host()), sum, 0.03, 0.01));  // inputs and output rounded to 8 bits
    axpy<bf16>(exec, 0.375f, ab.get(), bb.get(), n);
    EXPECT_TRUE(all_near(to_double(bb.host()), ax, 0.03, 0.01));
    scale<bf16>(exec, -1.5f, ab.get(), n);
    EXPECT_TRUE(all_near(to_double(ab.host()), sc, 0.02, 0.01));

    if (t.float64()) {
      Dev<double> ad(t, a);
      scale<double>(exec, -1.5, ad.get(), n);
      EXPECT_TRUE(all_near(ad.host(), sc, 0, 0));
    }
  }
}

TEST_P(ElementwiseTest, SumSquaresMatchesFloat64) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  EXPECT_EQ(sum_squares<float>(exec, nullptr, 0), 0.0);
  // 300001 > 256 programs * 1024: every program sums several chunks.
  for (int64_t n : {1, 5, 1023, 1025, 300001}) {
    SCOPED_TRACE(n);
    const auto x = random_vector(static_cast<size_t>(n), 3, 2.0, 0.5);
    const auto xf = to_storage<float>(x);
    const double ref = sum_squares_reference(to_double(xf));  // of the float-rounded values
    EXPECT_NEAR(sum_squares<float>(exec, Dev<float>(t, xf).get(), n), ref, 1e-12 * ref);
    if (t.float64()) {
      EXPECT_NEAR(sum_squares<double>(exec, Dev<double>(t, x).get(), n), sum_squares_reference(x), 1e-12 * ref);
    }
    const auto xb = to_storage<bf16>(x);
    EXPECT_NEAR(sum_squares<bf16>(exec, Dev<bf16>(t, xb).get(), n), sum_squares_reference(to_double(xb)), 1e-12 * ref);
  }
  // Squares of large floats overflow float but not the double accumulator.
  const Dev<float> big(t, std::vector<float>(3000, 1e30f));
  const double big2 = static_cast<double>(1e30f) * static_cast<double>(1e30f);
  EXPECT_NEAR(sum_squares<float>(exec, big.get(), 3000), 3000 * big2, 1e-12 * 3000 * big2);
}

TEST_P(ElementwiseTest, SumOfValuesAndEntropyMatchFloat64) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
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
      EXPECT_NEAR(sum_of<float>(exec, what, Dev<float>(t, vf).get(), n), sum_of_reference(what, to_double(vf)),
                  1e-12 * scale);
      if (t.float64()) {
        EXPECT_NEAR(sum_of<double>(exec, what, Dev<double>(t, v).get(), n), sum_of_reference(what, v), 1e-12 * scale);
      }
      const auto vb = to_storage<bf16>(v);
      EXPECT_NEAR(sum_of<bf16>(exec, what, Dev<bf16>(t, vb).get(), n), sum_of_reference(what, to_double(vb)),
                  1e-12 * scale);
    }
  }
  // Closed form: the entropy of a uniform distribution over 1000 outcomes is ln 1000.
  const Dev<float> uniform(t, std::vector<float>(1000, 1e-3f));
  EXPECT_NEAR(sum_of<float>(exec, SumOf::kEntropy, uniform.get(), 1000), std::log(1000.0), 1e-6);
  // sum_squares is sum_of(kSquares).
  const Dev<float> y(t, to_storage<float>(random_vector(5000, 6, 1.0, 0.0)));
  EXPECT_EQ(sum_squares<float>(exec, y.get(), 5000), sum_of<float>(exec, SumOf::kSquares, y.get(), 5000));
}

// sum_of_into keeps the sum where the data is: the same terms as sum_of, its partials summed by
// one program (a tree), so it agrees with the float64 reference and with itself under any
// thread count, and the result is written, not added.
TEST_P(ElementwiseTest, SumOfIntoMatchesFloat64AndIgnoresTheThreadCount) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (int64_t n : {1, 1023, 300001}) {
    SCOPED_TRACE(n);
    const auto x = random_vector(static_cast<size_t>(n), 7, 1.0, 0.2);
    const Dev<float> xf(t, to_storage<float>(x));
    const Dev<bf16> xb(t, to_storage<bf16>(x));
    Dev<double> partial(t, static_cast<size_t>(sum_squares_partials(n))), result(t, std::vector<double>{12345.0});
    for (SumOf what : {SumOf::kSquares, SumOf::kValues}) {
      double scale = 0;
      for (double e : x) scale += what == SumOf::kSquares ? e * e : std::abs(e);
      sum_of_into<float>(exec, what, xf.get(), n, partial.get(), result.get());
      EXPECT_NEAR(result.host()[0], sum_of_reference(what, to_double(to_storage<float>(x))), 1e-12 * scale);
      sum_of_into<bf16>(exec, what, xb.get(), n, partial.get(), result.get());
      EXPECT_NEAR(result.host()[0], sum_of_reference(what, to_double(to_storage<bf16>(x))), 1e-12 * scale);
      const double first = result.host()[0];
      {
        ThreadCountGuard guard(1);
        sum_of_into<bf16>(exec, what, xb.get(), n, partial.get(), result.get());
      }
      EXPECT_EQ(result.host()[0], first);  // bitwise
      if (!t.float64()) continue;
      const Dev<double> xd(t, x);
      sum_of_into<double>(exec, what, xd.get(), n, partial.get(), result.get());
      EXPECT_NEAR(result.host()[0], sum_of_reference(what, x), 1e-12 * scale);
    }
  }
  std::vector<float> x(5000, 1.0f);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  Dev<double> partial(t, static_cast<size_t>(sum_squares_partials(5000))), result(t, 1);
  sum_of_into<float>(exec, SumOf::kSquares, Dev<float>(t, x).get(), 5000, partial.get(), result.get());
  EXPECT_TRUE(std::isnan(result.host()[0]));
}

TEST_P(ElementwiseTest, SumSquaresPropagatesNonFinite) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  std::vector<float> x(5000, 1.0f);
  x[4321] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(sum_squares<float>(exec, Dev<float>(t, x).get(), 5000)));
  x[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sum_squares<float>(exec, Dev<float>(t, x).get(), 5000)));
  x[4321] = -std::numeric_limits<float>::infinity();
  x[17] = 1.0f;
  EXPECT_TRUE(std::isinf(sum_squares<float>(exec, Dev<float>(t, x).get(), 5000)));
}

TEST_P(ElementwiseTest, SumSquaresIndependentOfThreadCount) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const Dev<float> x(t, to_storage<float>(random_vector(777777, 4, 1.0, 0.1)));
  const auto n = static_cast<int64_t>(x.size());
  double one = 0, many = 0;
  {
    ThreadCountGuard guard(1);
    one = sum_squares<float>(exec, x.get(), n);
  }
  {
    ThreadCountGuard guard(2);
    many = sum_squares<float>(exec, x.get(), n);
  }
  EXPECT_EQ(one, many);  // bitwise
}

// The tokens' buckets (embedding_buckets, on the host) in the target's memory.
struct Buckets {
  Buckets(const Target& t, const std::vector<int32_t>& tokens, int64_t vocab)
      : host(static_cast<size_t>(embedding_buckets_size(static_cast<int64_t>(tokens.size())))),
        unique(embedding_buckets(tokens.data(), static_cast<int64_t>(tokens.size()), vocab, host.data())),
        dev(t, host) {}
  std::vector<int32_t> host;
  int64_t unique;
  Dev<int32_t> dev;
};

TEST(EmbeddingBuckets, GroupsPositionsByTokenInPositionOrder) {
  const std::vector<int32_t> tokens = {7, 2, 7, 0, 2, 7, 9};
  const int64_t n = 7;
  std::vector<int32_t> b(static_cast<size_t>(embedding_buckets_size(n)), -1);
  ASSERT_EQ(embedding_buckets(tokens.data(), n, 10, b.data()), 4);
  EXPECT_EQ(std::vector<int32_t>(b.begin(), b.begin() + n), (std::vector<int32_t>{3, 1, 4, 0, 2, 5, 6}));
  EXPECT_EQ(std::vector<int32_t>(b.begin() + n, b.begin() + n + 5), (std::vector<int32_t>{0, 1, 3, 6, 7}));
  EXPECT_EQ(std::vector<int32_t>(b.begin() + 2 * n + 1, b.begin() + 2 * n + 5), (std::vector<int32_t>{0, 2, 7, 9}));
  EXPECT_EQ(embedding_buckets(tokens.data(), 0, 10, b.data()), 0);
  EXPECT_EQ(b[0], 0);  // the end of no buckets
  try {
    embedding_buckets(tokens.data(), n, 9, b.data());
    FAIL() << "token 9 is outside a vocabulary of 9";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "embedding_buckets: token 9 at position 6 is outside the vocabulary [0, 9)");
  }
}

// `n` tokens in [0, 23), with repeats.
std::vector<int32_t> cyclic_tokens(int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + i * i) % 23);
  return tokens;
}

// Tokens for the backward: `n` positions over a vocabulary of `vocab`, with one token at about
// half of them and the rest spread (repeats; most of the vocabulary unused when vocab > n).
std::vector<int32_t> skewed_tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    tokens[static_cast<size_t>(i)] = static_cast<int32_t>(i % 2 == 0 ? (vocab * 2) / 3 : (i * 7 + i * i) % vocab);
  return tokens;
}

TEST_P(ElementwiseTest, EmbeddingMatchesFloat64) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  // 1,000 tokens over a vocabulary of 1,500: half of them one token (500 terms in a row's sum),
  // most rows of the table untouched.
  for (auto [n, vocab] : {std::pair<int64_t, int64_t>{37, 50}, {1000, 1500}}) {
    for (int64_t dim : {5, 64, 100, 768, 771, 1500}) {
      SCOPED_TRACE(::testing::Message() << n << " tokens, vocab " << vocab << ", dim " << dim);
      const std::vector<int32_t> tokens = n == 37 ? cyclic_tokens(n) : skewed_tokens(n, vocab);
      const auto table = random_vector(static_cast<size_t>(vocab * dim), 5);
      const auto dout = random_vector(static_cast<size_t>(n * dim), 6);
      const auto dtable0 = random_vector(table.size(), 7, 0.1);
      std::vector<double> ref_out, ref_dtable = dtable0;
      embedding_forward_reference(tokens, table, ref_out, dim);
      embedding_backward_reference(tokens, dout, ref_dtable, dim);
      const Dev<int32_t> tok(t, tokens);
      const Buckets buckets(t, tokens, vocab);

      Dev<float> tf(t, to_storage<float>(table)), out(t, ref_out.size());
      embedding_forward<float>(exec, tok.get(), tf.get(), out.get(), n, dim);
      EXPECT_TRUE(all_near(to_double(out.host()), ref_out, 0, 1e-7));
      Dev<float> dtf(t, to_storage<float>(dtable0)), df(t, to_storage<float>(dout));
      embedding_backward<float>(exec, buckets.dev.get(), buckets.unique, df.get(), dtf.get(), n, dim);
      EXPECT_TRUE(all_near(to_double(dtf.host()), ref_dtable, 1e-4, 1e-5));  // up to 500 terms in float
      // Bit for bit the serial walk over the tokens in float (the order the CPU model's stored
      // losses were made with).
      std::vector<float> serial = to_storage<float>(dtable0);
      const std::vector<float> df_host = df.host();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < dim; ++c)
          serial[static_cast<size_t>(tokens[static_cast<size_t>(i)] * dim + c)] +=
              df_host[static_cast<size_t>(i * dim + c)];
      EXPECT_EQ(dtf.host(), serial);
      // A captured step's form: launched over a bound (here every token), the count of distinct
      // tokens read from device memory; the programs past it add nothing: the same bits.
      Dev<float> bound(t, to_storage<float>(dtable0));
      const Dev<int32_t> count(t, std::vector<int32_t>{static_cast<int32_t>(buckets.unique)});
      embedding_backward<float>(exec, buckets.dev.get(), std::min(n, vocab), df.get(), bound.get(), n, dim, 1.0f,
                                count.get());
      EXPECT_EQ(bound.host(), serial);

      const auto tb0 = to_storage<bf16>(table);
      Dev<bf16> tb(t, tb0), outb(t, ref_out.size());
      embedding_forward<bf16>(exec, tok.get(), tb.get(), outb.get(), n, dim);
      std::vector<double> ref_outb;  // a copy: exactly the bf16 table values
      embedding_forward_reference(tokens, to_double(tb0), ref_outb, dim);
      EXPECT_TRUE(all_near(to_double(outb.host()), ref_outb, 0, 0));
      // bf16: the sum in float over the bf16 inputs, rounded once to bf16 (relative 2^-9).
      const auto dtb0 = to_storage<bf16>(dtable0);
      const auto doutb = to_storage<bf16>(dout);
      std::vector<double> ref_b = to_double(dtb0);
      embedding_backward_reference(tokens, to_double(doutb), ref_b, dim);
      Dev<bf16> dtb(t, dtb0), db(t, doutb);
      embedding_backward<bf16>(exec, buckets.dev.get(), buckets.unique, db.get(), dtb.get(), n, dim);
      EXPECT_TRUE(all_near(to_double(dtb.host()), ref_b, 1e-5, 1.0 / 256));
    }
  }
}

TEST_P(ElementwiseTest, EmbeddingBackwardMatchesFiniteDifferences) {
  SKIP_UNLESS_FINITE_DIFFERENCES(GetParam());
  const Exec exec = GetParam().exec();
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
  std::vector<int32_t> buckets(static_cast<size_t>(embedding_buckets_size(n)));
  const int64_t unique = embedding_buckets(tokens.data(), n, vocab, buckets.data());
  embedding_backward<double>(exec, buckets.data(), unique, w.data(), dtable.data(), n, dim);
  for (size_t i : sample_indices(table.size(), 60))
    ASSERT_NEAR(dtable[i], central_difference(loss, table, i), 1e-7) << "at " << i;
}

// Scaled rows (Gemma's sqrt(d_model)): forward and backward against the float64 reference in
// double (to rounding), float and bf16; the scale given in the compute type, as the embedding
// component passes it (bf16: the scale itself rounded to bf16 first, 48 and 55.5 here).
TEST_P(ElementwiseTest, ScaledEmbeddingMatchesFloat64) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const int64_t n = 300, vocab = 700;
  for (auto [dim, scale] : {std::pair<int64_t, double>{5, 0.37}, {771, 48.0}, {1500, 55.5}}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim << ", scale " << scale);
    const std::vector<int32_t> tokens = skewed_tokens(n, vocab);
    const auto table = to_double(to_storage<bf16>(random_vector(static_cast<size_t>(vocab * dim), 11)));
    const auto dout = to_double(to_storage<bf16>(random_vector(static_cast<size_t>(n * dim), 12)));
    const auto dtable0 = to_double(to_storage<bf16>(random_vector(table.size(), 13, 0.1)));
    std::vector<double> ref_out, ref_dtable = dtable0;
    embedding_forward_reference(tokens, table, ref_out, dim, scale);
    embedding_backward_reference(tokens, dout, ref_dtable, dim, scale);
    const Dev<int32_t> tok(t, tokens);
    const Buckets buckets(t, tokens, vocab);

    if (t.float64()) {
      Dev<double> td(t, table), outd(t, ref_out.size()), dtd(t, dtable0), dd(t, dout);
      embedding_forward<double>(exec, tok.get(), td.get(), outd.get(), n, dim, scale);
      EXPECT_TRUE(all_near(outd.host(), ref_out, 0, 0));  // one product each: exact as the reference's
      embedding_backward<double>(exec, buckets.dev.get(), buckets.unique, dd.get(), dtd.get(), n, dim, scale);
      EXPECT_TRUE(all_near(dtd.host(), ref_dtable, 1e-12, 1e-13));
    }
    const auto fs = static_cast<float>(scale);
    Dev<float> tf(t, to_storage<float>(table)), out(t, ref_out.size());
    embedding_forward<float>(exec, tok.get(), tf.get(), out.get(), n, dim, fs);
    EXPECT_TRUE(all_near(to_double(out.host()), ref_out, 0, 2e-7));  // the scale and the product rounded
    Dev<float> dtf(t, to_storage<float>(dtable0)), df(t, to_storage<float>(dout));
    embedding_backward<float>(exec, buckets.dev.get(), buckets.unique, df.get(), dtf.get(), n, dim, fs);
    EXPECT_TRUE(all_near(to_double(dtf.host()), ref_dtable, 1e-4 * scale, 1e-5));  // ~150 terms in float
    RecordProperty("max_abs_error_backward_float_" + std::to_string(dim),
                   ::testing::PrintToString(max_abs_diff(to_double(dtf.host()), ref_dtable)));

    Dev<bf16> tb(t, to_storage<bf16>(table)), outb(t, ref_out.size());
    embedding_forward<bf16>(exec, tok.get(), tb.get(), outb.get(), n, dim, fs);
    EXPECT_TRUE(all_near(to_double(outb.host()), ref_out, 0, 1.0 / 256));  // rounded once to bf16
    Dev<bf16> dtb(t, to_storage<bf16>(dtable0)), db(t, to_storage<bf16>(dout));
    embedding_backward<bf16>(exec, buckets.dev.get(), buckets.unique, db.get(), dtb.get(), n, dim, fs);
    EXPECT_TRUE(all_near(to_double(dtb.host()), ref_dtable, 1e-4 * scale, 1.0 / 256));
  }
}

TEST_P(ElementwiseTest, ScaledEmbeddingBackwardMatchesFiniteDifferences) {
  SKIP_UNLESS_FINITE_DIFFERENCES(GetParam());
  const Exec exec = GetParam().exec();
  const int64_t vocab = 11, dim = 70;
  const double scale = std::sqrt(70.0);
  const std::vector<int32_t> tokens = {3, 0, 3, 10, 7, 3, 0};
  const auto n = static_cast<int64_t>(tokens.size());
  const auto table = random_vector(static_cast<size_t>(vocab * dim), 8);
  const auto w = random_vector(static_cast<size_t>(n * dim), 9);
  auto loss = [&](const std::vector<double>& t) {  // L = sum(out * w)
    std::vector<double> out(static_cast<size_t>(n * dim));
    embedding_forward<double>(exec, tokens.data(), t.data(), out.data(), n, dim, scale);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += out[i] * w[i];
    return l;
  };
  std::vector<double> dtable(table.size(), 0.0);
  std::vector<int32_t> buckets(static_cast<size_t>(embedding_buckets_size(n)));
  const int64_t unique = embedding_buckets(tokens.data(), n, vocab, buckets.data());
  embedding_backward<double>(exec, buckets.data(), unique, w.data(), dtable.data(), n, dim, scale);
  double max_err = 0;
  for (size_t i : sample_indices(table.size(), 60)) {
    const double fd = central_difference(loss, table, i);
    max_err = std::max(max_err, std::abs(dtable[i] - fd));
    ASSERT_NEAR(dtable[i], fd, 1e-7 * scale) << "at " << i;
  }
  RecordProperty("max_abs_error", ::testing::PrintToString(max_err));
}

TEST_P(ElementwiseTest, EmbeddingBackwardIndependentOfThreadCount) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  const int64_t dim = 300, n = 500;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 31) % 17);
  const Buckets buckets(t, tokens, 17);
  const Dev<float> dout(t, to_storage<float>(random_vector(static_cast<size_t>(n * dim), 10)));
  Dev<float> one(t, std::vector<float>(static_cast<size_t>(17 * dim), 0.0f)), many(t, one.host());
  {
    ThreadCountGuard guard(1);
    embedding_backward<float>(exec, buckets.dev.get(), buckets.unique, dout.get(), one.get(), n, dim);
  }
  {
    ThreadCountGuard guard(2);
    embedding_backward<float>(exec, buckets.dev.get(), buckets.unique, dout.get(), many.get(), n, dim);
  }
  EXPECT_EQ(one.host(), many.host());
}

// copy_block and zero_block touch exactly their rows x cols elements, in every type, whatever
// the strides, and copy bits exactly.
TEST_P(ElementwiseTest, BlockCopyAndFillTouchExactlyTheirElements) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  for (auto [rows, cols, src_ld, dst_ld] :
       {std::array<int64_t, 4>{1, 1, 1, 1}, {7, 5, 9, 13}, {33, 100, 130, 100}, {3, 2500, 2600, 2501}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " ld " << src_ld << " -> " << dst_ld);
    const auto src = to_storage<float>(random_vector(static_cast<size_t>(rows * src_ld), 11));
    const auto dst0 = to_storage<float>(random_vector(static_cast<size_t>(rows * dst_ld), 12));
    std::vector<float> want = dst0, zeroed = src;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        want[static_cast<size_t>(r * dst_ld + c)] = src[static_cast<size_t>(r * src_ld + c)];
        zeroed[static_cast<size_t>(r * src_ld + c)] = 0.0f;
      }
    const Dev<float> gsrc(t, src);
    Dev<float> gdst(t, dst0);
    copy_block<float>(exec, gsrc.get(), src_ld, gdst.get(), dst_ld, rows, cols);
    EXPECT_EQ(gdst.host(), want);
    Dev<float> gz(t, src);
    zero_block<float>(exec, gz.get(), src_ld, rows, cols);
    EXPECT_EQ(gz.host(), zeroed);
    const auto srcb = to_storage<bf16>(to_double(src));
    const Dev<bf16> gsrcb(t, srcb);
    Dev<bf16> gdstb(t, to_storage<bf16>(to_double(dst0)));
    copy_block<bf16>(exec, gsrcb.get(), src_ld, gdstb.get(), dst_ld, rows, cols);
    EXPECT_EQ(to_double(gdstb.host()), to_double(to_storage<bf16>(to_double(want))));
  }
  zero_block<float>(exec, nullptr, 4, 0, 4);  // nothing to do: no launch, no access
  copy_block<float>(exec, nullptr, 4, nullptr, 4, 3, 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, ElementwiseTest, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace elementwise_test
}  // namespace bench::kernels
