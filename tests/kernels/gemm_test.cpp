// Tests of kernels/gemm.h: float (oneDNN) and double GEMM against a float64 triple loop for
// every transpose combination, with row strides wider than the matrices and beta != 0; the
// launcher that follows an Exec, on every target (kernel_test_util.h: cuBLASLt on CUDA).
// DISABLED_Timing measures the GFLOP/s quoted in docs/attention-cores.md ("CPU GEMM") and
// docs/gpu-path.md ("bf16 models").
#include "gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "tile/parallel.h"

namespace bench::kernels {
namespace gemm_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers

/// c = alpha op(A) op(B) + beta c in double over the [m, n] part of c (row stride ldc), for stored A
/// [m, k] or [k, m] and B [k, n] or [n, k] (row strides lda, ldb); beta = 0 does not read c (it may
/// be NaN there, as gemm allows).
void gemm_reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                    const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i * ldc + j]);
    }
}

TEST(Gemm, MatchesFloat64LoopForEveryTranspose) {
  const int64_t m = 37, n = 53, k = 29, pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::to_string(ta) + std::to_string(tb));
      // Stored shapes: A is [m, k] or [k, m]; B is [k, n] or [n, k]; each row `pad` wider.
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      const auto a = to_double(to_storage<float>(random_vector(static_cast<size_t>(a_rows * lda), 1)));
      const auto b = to_double(to_storage<float>(random_vector(static_cast<size_t>(b_rows * ldb), 2)));
      const auto c0 = to_double(to_storage<float>(random_vector(static_cast<size_t>(m * ldc), 3)));
      const double alpha = 0.75, beta = -0.5;
      std::vector<double> ref = c0;
      gemm_reference(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, ref.data(), ldc);
      auto cd = c0;
      gemm<double>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, cd.data(), ldc);
      EXPECT_TRUE(all_near(cd, ref, 1e-13, 1e-13));
      const auto af = to_storage<float>(a), bf = to_storage<float>(b);
      auto cf = to_storage<float>(c0);
      gemm<float>(ta, tb, m, n, k, static_cast<float>(alpha), af.data(), lda, bf.data(), ldb, static_cast<float>(beta),
                  cf.data(), ldc);
      EXPECT_TRUE(all_near(to_double(cf), ref, 1e-5, 1e-5));
    }
}

// bf16 storage: A, B and C exact in bf16, so the float64 result of the same inputs is the
// reference, and the one rounding of C (half an ulp: 2^-9 relative) is all the error there is
// beyond float accumulation. Every transpose, strides, beta 0 (C never read: poisoned with NaN)
// and beta != 0, and k = 0 (C = beta C).
class GemmTest : public ::testing::TestWithParam<Target> {};

// gemm(exec, ...) on the target's memory, every transpose, float and bf16, against the float64
// product of the same stored values (bf16: one rounding of C beyond float accumulation).
TEST_P(GemmTest, ExecGemmMatchesFloat64ForEveryTranspose) {
  const Target& t = GetParam();
  const int64_t m = 37, n = 53, k = 29, pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::to_string(ta) + std::to_string(tb));
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      const auto a = to_double(to_storage<tile::bf16>(random_vector(static_cast<size_t>(a_rows * lda), 4)));
      const auto b = to_double(to_storage<tile::bf16>(random_vector(static_cast<size_t>(b_rows * ldb), 5)));
      const auto c0 = to_double(to_storage<tile::bf16>(random_vector(static_cast<size_t>(m * ldc), 6)));
      const double alpha = 0.75, beta = -0.5;
      std::vector<double> ref = c0;
      gemm_reference(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, ref.data(), ldc);
      Dev<float> af(t, to_storage<float>(a)), bf(t, to_storage<float>(b)), cf(t, to_storage<float>(c0));
      gemm<float>(t.exec(), ta, tb, m, n, k, 0.75f, af.get(), lda, bf.get(), ldb, -0.5f, cf.get(), ldc);
      EXPECT_TRUE(all_near(to_double(cf.host()), ref, 1e-5, 1e-5));
      Dev<tile::bf16> ab(t, to_storage<tile::bf16>(a)), bb(t, to_storage<tile::bf16>(b)),
          cb(t, to_storage<tile::bf16>(c0));
      gemm<tile::bf16>(t.exec(), ta, tb, m, n, k, 0.75f, ab.get(), lda, bb.get(), ldb, -0.5f, cb.get(), ldc);
      EXPECT_TRUE(all_near(to_double(cb.host()), ref, 1e-5, 1.0 / 256));
      if (!t.float64()) continue;
      Dev<double> ad(t, a), bd(t, b), cd(t, c0);
      gemm<double>(t.exec(), ta, tb, m, n, k, alpha, ad.get(), lda, bd.get(), ldb, beta, cd.get(), ldc);
      EXPECT_TRUE(all_near(cd.host(), ref, 1e-13, 1e-13));
    }
}

// gemm_batched on the target: `count` products at strides wider than a matrix (padding between
// them never read or written), one operand repeated (stride 0), beta != 0, every transpose,
// against the float64 product of each; one kernel to the profile for the whole batch.
TEST_P(GemmTest, BatchedMatchesFloat64PerProduct) {
  const Target& t = GetParam();
  const int64_t m = 19, n = 23, k = 11, pad = 2, count = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::to_string(ta) + std::to_string(tb));
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      // A advances by a matrix and a gap, B is shared (stride 0), C by a matrix and a gap.
      const int64_t sa = a_rows * lda + 7, sb = 0, sc = m * ldc + 5;
      const auto a = to_double(to_storage<tile::bf16>(random_vector(static_cast<size_t>(count * sa), 14)));
      const auto b = to_double(to_storage<tile::bf16>(random_vector(static_cast<size_t>(b_rows * ldb), 15)));
      const auto c0 = to_double(to_storage<tile::bf16>(random_vector(static_cast<size_t>(count * sc), 16)));
      const double alpha = 0.75, beta = -0.5;
      std::vector<double> ref = c0;
      for (int64_t q = 0; q < count; ++q)
        gemm_reference(ta, tb, m, n, k, alpha, a.data() + q * sa, lda, b.data(), ldb, beta, ref.data() + q * sc, ldc);
      Dev<float> af(t, to_storage<float>(a)), bf(t, to_storage<float>(b)), cf(t, to_storage<float>(c0));
      gemm_batched<float>(t.exec(), ta, tb, m, n, k, 0.75f, af.get(), lda, sa, bf.get(), ldb, sb, -0.5f, cf.get(), ldc,
                          sc, count);
      // The gaps between the C matrices keep their values: all of C is compared.
      EXPECT_TRUE(all_near(to_double(cf.host()), ref, 1e-5, 1e-5));
      Dev<tile::bf16> ab(t, to_storage<tile::bf16>(a)), bb(t, to_storage<tile::bf16>(b)),
          cb(t, to_storage<tile::bf16>(c0));
      gemm_batched<tile::bf16>(t.exec(), ta, tb, m, n, k, 0.75f, ab.get(), lda, sa, bb.get(), ldb, sb, -0.5f, cb.get(),
                               ldc, sc, count);
      EXPECT_TRUE(all_near(to_double(cb.host()), ref, 1e-5, 1.0 / 256));
      if (!t.float64()) continue;
      Dev<double> ad(t, a), bd(t, b), cd(t, c0);
      gemm_batched<double>(t.exec(), ta, tb, m, n, k, alpha, ad.get(), lda, sa, bd.get(), ldb, sb, beta, cd.get(), ldc,
                           sc, count);
      EXPECT_TRUE(all_near(cd.host(), ref, 1e-13, 1e-13));
    }
}

INSTANTIATE_TEST_SUITE_P(Targets, GemmTest, ::testing::ValuesIn(targets()), target_name);

TEST(Gemm, Bf16MatchesFloat64WithinOneRoundingOfC) {
  using tile::bf16;
  const int64_t m = 37, n = 53, pad = 3;
  for (int64_t k : {29, 0})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (double beta : {0.0, -0.5}) {
          SCOPED_TRACE(std::to_string(k) + " " + std::to_string(ta) + std::to_string(tb) + " " + std::to_string(beta));
          const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
          const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
          const auto a = to_storage<bf16>(random_vector(static_cast<size_t>(std::max<int64_t>(1, a_rows * lda)), 1));
          const auto b = to_storage<bf16>(random_vector(static_cast<size_t>(std::max<int64_t>(1, b_rows * ldb)), 2));
          auto c = to_storage<bf16>(random_vector(static_cast<size_t>(m * ldc), 3));
          if (beta == 0.0)
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = tile::float_to_bf16(std::nanf(""));
          const auto ad = to_double(a), bd = to_double(b), c0 = to_double(c);
          const double alpha = 0.75;
          std::vector<double> ref = c0;
          gemm_reference(ta, tb, m, n, k, alpha, ad.data(), lda, bd.data(), ldb, beta, ref.data(), ldc);
          gemm<bf16>(ta, tb, m, n, k, 0.75F, a.data(), lda, b.data(), ldb, static_cast<float>(beta), c.data(), ldc);
          EXPECT_TRUE(all_near(to_double(c), ref, 1e-6, 1.0 / 256));
          // Through an Exec on the CPU (the model's entry point): the same bits.
          auto c2 = to_storage<bf16>(c0);
          gemm<bf16>(tile::Exec{}, ta, tb, m, n, k, 0.75F, a.data(), lda, b.data(), ldb, static_cast<float>(beta),
                     c2.data(), ldc);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) ASSERT_EQ(c2[i * ldc + j].bits, c[i * ldc + j].bits);
        }
}

// Run with: kernels_test --gtest_also_run_disabled_tests --gtest_filter='Gemm.DISABLED_Timing'
TEST(Gemm, DISABLED_Timing) {
  std::printf("threads %d, %s\n", tile::num_threads(), gemm_backend());
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1024, 1024, 1024},
                         {2048, 384, 128},
                         {2048, 128, 384},
                         {2048, 1536, 384},
                         {2048, 384, 1536},
                         {128, 128, 32}}) {
    const auto a = to_storage<float>(random_vector(static_cast<size_t>(m * k), 4));
    const auto b = to_storage<float>(random_vector(static_cast<size_t>(k * n), 5));
    std::vector<float> c(static_cast<size_t>(m * n));
    const auto a16 = to_storage<tile::bf16>(to_double(a)), b16 = to_storage<tile::bf16>(to_double(b));
    std::vector<tile::bf16> c16(c.size());
    const int reps = m * n * k > 100000000 ? 21 : 201;
    const double flops = 2.0 * static_cast<double>(m * n * k);
    for (const bool bf16 : {false, true}) {
      std::vector<double> ms;
      for (int r = 0; r <= reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        if (bf16) {
          gemm<tile::bf16>(false, false, m, n, k, 1.0f, a16.data(), k, b16.data(), n, 0.0f, c16.data(), n);
        } else {
          gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
        }
        if (r > 0)
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("%ldx%ldx%ld %s: median %.4f ms (%.1f GFLOP/s), best %.4f ms (%.1f GFLOP/s)\n", static_cast<long>(m),
                  static_cast<long>(n), static_cast<long>(k), bf16 ? "bf16" : "fp32", ms[ms.size() / 2],
                  flops / ms[ms.size() / 2] * 1e-6, ms.front(), flops / ms.front() * 1e-6);
    }
  }
}

}  // namespace
}  // namespace gemm_test
}  // namespace bench::kernels
