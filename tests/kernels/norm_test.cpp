// Tests of kernels/norm.h: forward against the float64 reference, backward against central
// finite differences in double, on the CPU and the emulated-block executors.
#include "norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace bench::kernels {
namespace {

using tile::Backend;

struct NormCase {
  bool center;
  bool affine;
  int64_t rows;
  int64_t cols;
  Backend backend;
};

std::vector<double> random_vector(size_t n, uint32_t seed, double scale = 1.0, double shift = 0.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (auto& x : v) x = nd(gen) * scale + shift;
  return v;
}

class NormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(NormTest, ForwardMatchesFloat64Reference) {
  const NormCase p = GetParam();
  const auto x = random_vector(static_cast<size_t>(p.rows * p.cols), 1, 2.0, 0.7);
  const auto w = p.affine ? random_vector(static_cast<size_t>(p.cols), 2) : std::vector<double>{};
  const auto b = p.affine ? random_vector(static_cast<size_t>(p.cols), 3) : std::vector<double>{};
  std::vector<double> ref;
  norm_forward_reference(p.center, x, w, b, ref, p.rows, p.cols, 1e-5);

  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end());
  std::vector<float> y(x.size()), mean(static_cast<size_t>(p.rows)), rstd(static_cast<size_t>(p.rows));
  const Exec exec{p.backend};
  norm_forward<float>(exec, p.center, xf.data(), p.affine ? wf.data() : nullptr, p.affine ? bf.data() : nullptr,
                      y.data(), mean.data(), rstd.data(), p.rows, p.cols, 1e-5);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5 + 1e-5 * std::abs(ref[i])) << "at " << i;

  std::vector<tile::bf16> xb(x.size()), yb(x.size()), wb(w.size()), bb(b.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = tile::float_to_bf16(xf[i]);
  for (size_t i = 0; i < w.size(); ++i) wb[i] = tile::float_to_bf16(wf[i]);
  for (size_t i = 0; i < b.size(); ++i) bb[i] = tile::float_to_bf16(bf[i]);
  norm_forward<tile::bf16>(exec, p.center, xb.data(), p.affine ? wb.data() : nullptr, p.affine ? bb.data() : nullptr,
                           yb.data(), mean.data(), rstd.data(), p.rows, p.cols, 1e-5);
  for (size_t i = 0; i < ref.size(); ++i)  // bf16 inputs and output: 8 bits of mantissa
    ASSERT_NEAR(tile::bf16_to_float(yb[i]), ref[i], 0.05 + 0.02 * std::abs(ref[i])) << "at " << i;
}

TEST_P(NormTest, BackwardMatchesFiniteDifferences) {
  const NormCase p = GetParam();
  const auto x0 = random_vector(static_cast<size_t>(p.rows * p.cols), 4, 1.5, 0.3);
  const auto w = p.affine ? random_vector(static_cast<size_t>(p.cols), 5) : std::vector<double>{};
  const auto b = p.affine ? random_vector(static_cast<size_t>(p.cols), 6) : std::vector<double>{};
  const auto dy = random_vector(x0.size(), 7);
  const Exec exec{p.backend};
  const double eps = 1e-5;
  // Loss L = sum(y * dy); dL/dx, dL/dw, dL/db from the kernel vs central differences.
  auto loss = [&](const std::vector<double>& x, const std::vector<double>& ww, const std::vector<double>& bb) {
    std::vector<double> y(x.size()), mean(static_cast<size_t>(p.rows)), rstd(static_cast<size_t>(p.rows));
    norm_forward<double>(exec, p.center, x.data(), p.affine ? ww.data() : nullptr, p.affine ? bb.data() : nullptr,
                         y.data(), mean.data(), rstd.data(), p.rows, p.cols, eps);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
    return l;
  };
  std::vector<double> y(x0.size()), mean(static_cast<size_t>(p.rows)), rstd(static_cast<size_t>(p.rows));
  norm_forward<double>(exec, p.center, x0.data(), p.affine ? w.data() : nullptr, p.affine ? b.data() : nullptr,
                       y.data(), mean.data(), rstd.data(), p.rows, p.cols, eps);
  std::vector<double> dx(x0.size()), dw(w.size(), 0.25), db(b.size(), -0.5);  // grads accumulate
  std::vector<double> ws(static_cast<size_t>(norm_backward_workspace(p.rows, p.cols)));
  norm_backward<double>(exec, p.center, dy.data(), x0.data(), p.affine ? w.data() : nullptr, mean.data(), rstd.data(),
                        dx.data(), p.affine ? dw.data() : nullptr, p.affine ? db.data() : nullptr, p.rows, p.cols,
                        ws.data());
  const double h = 1e-6;
  for (size_t i = 0; i < x0.size(); i += std::max<size_t>(1, x0.size() / 37)) {
    auto xv = x0;
    xv[i] += h;
    const double lp = loss(xv, w, b);
    xv[i] -= 2 * h;
    const double lm = loss(xv, w, b);
    const double fd = (lp - lm) / (2 * h);
    ASSERT_NEAR(dx[i], fd, 1e-6 + 1e-5 * std::abs(fd)) << "dx at " << i;
  }
  if (p.affine) {
    for (size_t i = 0; i < w.size(); i += std::max<size_t>(1, w.size() / 11)) {
      auto wv = w;
      wv[i] += h;
      const double lp = loss(x0, wv, b);
      wv[i] -= 2 * h;
      const double lm = loss(x0, wv, b);
      ASSERT_NEAR(dw[i] - 0.25, (lp - lm) / (2 * h), 1e-5) << "dw at " << i;
      auto bv = b;
      bv[i] += h;
      const double lpb = loss(x0, w, bv);
      bv[i] -= 2 * h;
      const double lmb = loss(x0, w, bv);
      ASSERT_NEAR(db[i] + 0.5, (lpb - lmb) / (2 * h), 1e-5) << "db at " << i;
    }
  }
}

std::vector<NormCase> cases() {
  std::vector<NormCase> out;
  for (Backend be : {Backend::kCpu, Backend::kEmulated})
    for (bool center : {false, true})
      for (bool affine : {false, true})
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {40, 128}, {33, 300}, {5, 2500}})
          out.push_back({center, affine, rows, cols, be});
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, NormTest, ::testing::ValuesIn(cases()), [](const auto& tp) {
  const NormCase& p = tp.param;
  return std::string(p.center ? "layernorm" : "rmsnorm") + (p.affine ? "_affine" : "_plain") + "_" +
         std::to_string(p.rows) + "x" + std::to_string(p.cols) + (p.backend == Backend::kCpu ? "_cpu" : "_emulated");
});

}  // namespace
}  // namespace bench::kernels
