// Tests of kernels/softmax.h on every target (kernel_test_util.h): masked softmax forward against
// the float64 reference, backward against central differences in double and in float and bf16
// against that float64 backward, for causal,
// diagonal-offset, sliding-window, soft-capped and periodic (stacked blocks) rows, narrow and wider
// than one tile.
#include "softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace softmax_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

struct SoftmaxCase {
  std::string name;
  int64_t rows;
  int64_t cols;
  int64_t ld;
  SoftmaxMask mask;
  double softcap;
  Target target;
};
void PrintTo(const SoftmaxCase& c, std::ostream* os) { *os << c.name; }

/// Copy a dense rows x cols block into rows ld apart, padding with a value the kernel must not
/// touch or read.
std::vector<double> pad(const std::vector<double>& x, int64_t rows, int64_t cols, int64_t ld, double fill) {
  std::vector<double> r(static_cast<size_t>(rows * ld), fill);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r[i * ld + j] = x[i * cols + j];
  return r;
}
std::vector<double> unpad(const std::vector<double>& x, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<double> r(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r[i * cols + j] = x[i * ld + j];
  return r;
}

class SoftmaxTest : public ::testing::TestWithParam<SoftmaxCase> {};

TEST_P(SoftmaxTest, ForwardMatchesFloat64Reference) {
  const SoftmaxCase p = GetParam();
  const Target& t = p.target;
  const Exec exec = t.exec();
  const double scale = 0.37;
  const auto s = random_vector(static_cast<size_t>(p.rows * p.cols), 1, 6.0, 1.0);
  std::vector<double> ref, ref_max;
  softmax_forward_reference(s, ref, p.rows, p.cols, scale, p.softcap, p.mask, &ref_max);
  const double pad_value = 1e30;  // never read: would overflow any row it leaked into

  Dev<float> sf(t, to_storage<float>(pad(s, p.rows, p.cols, p.ld, pad_value)));
  Dev<float> pf(t, std::vector<float>(sf.size(), -7.0f)), row_max(t, static_cast<size_t>(p.rows));
  softmax_forward<float>(exec, sf.get(), pf.get(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, row_max.get());
  const auto got = to_double(pf.host());
  const auto got_max = row_max.host();
  EXPECT_TRUE(all_near(unpad(got, p.rows, p.cols, p.ld), ref, 1e-6, 1e-5));
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = p.cols; j < p.ld; ++j) ASSERT_EQ(got[r * p.ld + j], -7.0) << "padding written";
    if (std::isfinite(ref_max[r])) {  // the reference leaves -inf on a row with no valid column
      EXPECT_NEAR(got_max[r], ref_max[r], 1e-5 + 1e-6 * std::abs(ref_max[r])) << "row " << r;
    } else {
      EXPECT_EQ(got_max[r], tile::math::lowest<float>()) << "empty row " << r;
    }
  }
  // In place (p aliasing s), without row_max.
  softmax_forward<float>(exec, sf.get(), sf.get(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, nullptr);
  EXPECT_TRUE(all_near(unpad(to_double(sf.host()), p.rows, p.cols, p.ld), unpad(got, p.rows, p.cols, p.ld), 0, 0));

  if (t.float64()) {
    Dev<double> sd(t, pad(s, p.rows, p.cols, p.ld, pad_value));
    softmax_forward<double>(exec, sd.get(), sd.get(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, nullptr);
    EXPECT_TRUE(all_near(unpad(sd.host(), p.rows, p.cols, p.ld), ref, 1e-14, 1e-12));
  }

  const auto sb = to_storage<bf16>(pad(s, p.rows, p.cols, p.ld, 0.0));
  std::vector<double> refb;  // of the bf16-rounded scores; the output adds one rounding
  softmax_forward_reference(unpad(to_double(sb), p.rows, p.cols, p.ld), refb, p.rows, p.cols, scale, p.softcap, p.mask,
                            nullptr);
  Dev<bf16> gsb(t, sb), pb(t, sb.size());
  softmax_forward<bf16>(exec, gsb.get(), pb.get(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, row_max.get());
  EXPECT_TRUE(all_near(unpad(to_double(pb.host()), p.rows, p.cols, p.ld), refb, 1e-6, 0.005));
}

/// The float64 backward on the CPU executor: ds for dp = w.
std::vector<double> float64_backward(const SoftmaxCase& p, const std::vector<double>& s0, const std::vector<double>& w,
                                     double scale, std::vector<double>& pr) {
  pr.assign(s0.size(), 0.0);
  std::vector<double> ds(s0.size());
  softmax_forward<double>(Exec{}, s0.data(), pr.data(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, nullptr);
  softmax_backward<double>(Exec{}, pr.data(), w.data(), p.softcap > 0 ? s0.data() : nullptr, ds.data(), p.rows, p.cols,
                           p.ld, scale, p.softcap, p.mask);
  return ds;
}

// The float64 forward and backward on the emulated target against the cpu target's, every element
// (the padding too): the cpu target's backward is checked by finite differences below, so the
// emulated target's is too.
TEST_P(SoftmaxTest, Float64BackwardMatchesTheCpuTarget) {
  const SoftmaxCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  if (p.target.backend == tile::Backend::kCpu) GTEST_SKIP() << "the cpu target is the one compared with";
  const double scale = 0.61;
  const auto s0 = pad(random_vector(static_cast<size_t>(p.rows * p.cols), 2, 3.0), p.rows, p.cols, p.ld, 0.0);
  const auto w = random_vector(s0.size(), 3);
  // The probabilities, then ds.
  auto run = [&](const Exec& exec) {
    std::vector<double> pr(s0.size()), ds(s0.size());
    softmax_forward<double>(exec, s0.data(), pr.data(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, nullptr);
    softmax_backward<double>(exec, pr.data(), w.data(), p.softcap > 0 ? s0.data() : nullptr, ds.data(), p.rows, p.cols,
                             p.ld, scale, p.softcap, p.mask);
    pr.insert(pr.end(), ds.begin(), ds.end());
    return pr;
  };
  EXPECT_TRUE(all_near(run(p.target.exec()), run(Exec{}), 1e-12, 1e-10));
}

TEST_P(SoftmaxTest, BackwardMatchesFiniteDifferences) {
  const SoftmaxCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  SKIP_FINITE_DIFFERENCES_OFF_CPU(p.target, "Float64BackwardMatchesTheCpuTarget");
  const Exec exec = p.target.exec();
  const double scale = 0.61;
  const auto s0 = pad(random_vector(static_cast<size_t>(p.rows * p.cols), 2, 3.0), p.rows, p.cols, p.ld, 0.0);
  const auto w = random_vector(s0.size(), 3);  // L = sum(p * w), so dp = w
  std::vector<double> pr(s0.size()), ds(s0.size());
  softmax_forward<double>(exec, s0.data(), pr.data(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask, nullptr);
  softmax_backward<double>(exec, pr.data(), w.data(), p.softcap > 0 ? s0.data() : nullptr, ds.data(), p.rows, p.cols,
                           p.ld, scale, p.softcap, p.mask);
  for (int64_t r = 0; r < p.rows; r += std::max<int64_t>(1, p.rows / 5)) {
    // Only row r depends on its scores: its loss alone, as a one-row block with the same mask.
    const int64_t r_mask = p.mask.period > 0 ? r % p.mask.period : r;  // the row's place in its period
    const SoftmaxMask row_mask{p.mask.causal, p.mask.diag_offset + r_mask, p.mask.window};
    auto loss = [&](const std::vector<double>& s) {
      std::vector<double> prow(static_cast<size_t>(p.cols));
      softmax_forward<double>(exec, s.data() + r * p.ld, prow.data(), 1, p.cols, p.cols, scale, p.softcap, row_mask,
                              nullptr);
      double l = 0;
      for (int64_t j = 0; j < p.cols; ++j) l += prow[j] * w[r * p.ld + j];
      return l;
    };
    for (int64_t j = 0; j < p.cols; j += std::max<int64_t>(1, p.cols / 23)) {
      const auto i = static_cast<size_t>(r * p.ld + j);
      const double fd = central_difference(loss, s0, i);
      ASSERT_NEAR(ds[i], fd, 1e-7 + 1e-6 * std::abs(fd)) << "row " << r << " col " << j;
    }
  }
}

// float (with ds aliasing dp) and bf16 on this target against the float64 backward checked above.
TEST_P(SoftmaxTest, BackwardMatchesFloat64Backward) {
  const SoftmaxCase p = GetParam();
  const Target& t = p.target;
  const Exec exec = t.exec();
  const double scale = 0.61;
  const auto s0 = pad(random_vector(static_cast<size_t>(p.rows * p.cols), 2, 3.0), p.rows, p.cols, p.ld, 0.0);
  const auto w = random_vector(s0.size(), 3);
  std::vector<double> pr;
  const auto ds = float64_backward(p, s0, w, scale, pr);
  Dev<float> sf(t, to_storage<float>(s0)), pf(t, to_storage<float>(pr)), dsf(t, to_storage<float>(w));
  softmax_backward<float>(exec, pf.get(), dsf.get(), sf.get(), dsf.get(), p.rows, p.cols, p.ld, scale, p.softcap,
                          p.mask);
  EXPECT_TRUE(
      all_near(unpad(to_double(dsf.host()), p.rows, p.cols, p.ld), unpad(ds, p.rows, p.cols, p.ld), 1e-6, 1e-4));
  Dev<bf16> pb(t, to_storage<bf16>(pr)), wb(t, to_storage<bf16>(w)), sb(t, to_storage<bf16>(s0)), dsb(t, s0.size());
  softmax_backward<bf16>(exec, pb.get(), wb.get(), sb.get(), dsb.get(), p.rows, p.cols, p.ld, scale, p.softcap, p.mask);
  EXPECT_TRUE(
      all_near(unpad(to_double(dsb.host()), p.rows, p.cols, p.ld), unpad(ds, p.rows, p.cols, p.ld), 0.02, 0.05));
}

std::vector<SoftmaxCase> cases() {
  struct Shape {
    int64_t rows, cols, ld;
  };
  struct Variant {
    std::string name;
    SoftmaxMask mask;
    double softcap;
  };
  const std::vector<Variant> variants = {
      {"full", {false, 0, 0}, 0},
      {"causal", {true, 0, 0}, 0},
      {"causal_cap", {true, 0, 0}, 5.0},
      {"causal_diag3_window5", {true, 3, 5}, 0},
      {"causal_diag_neg2", {true, -2, 0}, 0},  // rows 0 and 1 see nothing
      {"window1100_cap", {true, 1500, 1100}, 2.0},
      {"full_window7", {false, 0, 7}, 0},
      // Stacked blocks whose mask restarts every few rows (attention's (batch, head) blocks).
      {"causal_period4", {true, 0, 0, 4}, 0},
      {"causal_period3_diag1_window2_cap", {true, 1, 2, 3}, 3.0},
  };
  // 768: the 768-wide tile (bf16 in 16-byte runs); 771 with ld 771: rows not a multiple of 8, so
  // most rows start unaligned for 16-byte bf16 runs.
  const std::vector<Shape> shapes = {{5, 7, 7},       {33, 100, 128}, {4, 1025, 1030},
                                     {3, 2500, 2500}, {6, 768, 768},  {5, 771, 771}};
  std::vector<SoftmaxCase> out;
  for (const Target& t : targets())
    for (const auto& v : variants)
      for (const auto& s : shapes) {
        std::string name = v.name + "_" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_ld" +
                           std::to_string(s.ld) + "_" + t.name;
        out.push_back({name, s.rows, s.cols, s.ld, v.mask, v.softcap, t});
      }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, SoftmaxTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace softmax_test
}  // namespace bench::kernels
