// Tests of kernels/norm.h on every target (kernel_test_util.h): forward in float and bf16 against
// the float64 reference, backward in double against central finite differences (the float64
// targets), and backward in float against that float64 backward; each with the plain gain w and
// with Gemma's unit offset, 1 + w.
#include "norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "elementwise.h"
#include "kernel_test_util.h"

namespace bench::kernels {
namespace norm_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers

struct NormCase {
  bool center;
  bool affine;
  int64_t rows;
  int64_t cols;
  Target target;
  bool unit_offset = false;  // the gain is 1 + w
};

class NormTest : public ::testing::TestWithParam<NormCase> {};

// Affine: weight and bias, the weight alone (RMSNorm's usual form) and the bias alone, each a path
// of its own in the program (both loaded before either is read).
TEST_P(NormTest, ForwardMatchesFloat64Reference) {
  const NormCase p = GetParam();
  const Target& t = p.target;
  const auto x = random_vector(static_cast<size_t>(p.rows * p.cols), 1, 2.0, 0.7);
  const auto w = p.affine ? random_vector(static_cast<size_t>(p.cols), 2) : std::vector<double>{};
  const auto b = p.affine ? random_vector(static_cast<size_t>(p.cols), 3) : std::vector<double>{};
  Dev<float> xf(t, to_storage<float>(x)), wf(t, to_storage<float>(w)), bf(t, to_storage<float>(b)), y(t, x.size());
  Dev<float> mean(t, static_cast<size_t>(p.rows)), rstd(t, static_cast<size_t>(p.rows));
  // bf16 inputs (the float values rounded) and output: 8 bits of mantissa.
  Dev<tile::bf16> xb(t, to_storage<tile::bf16>(to_double(to_storage<float>(x)))), yb(t, x.size());
  Dev<tile::bf16> wb(t, to_storage<tile::bf16>(to_double(to_storage<float>(w))));
  Dev<tile::bf16> bb(t, to_storage<tile::bf16>(to_double(to_storage<float>(b))));
  const std::vector<std::pair<bool, bool>> params =
      p.affine ? std::vector<std::pair<bool, bool>>{{true, true}, {true, false}, {false, true}}
               : std::vector<std::pair<bool, bool>>{{false, false}};
  for (const auto& [use_w, use_b] : params) {
    SCOPED_TRACE(std::string(use_w ? "weight " : "") + (use_b ? "bias" : ""));
    std::vector<double> ref;
    norm_forward_reference(p.center, x, use_w ? w : std::vector<double>{}, use_b ? b : std::vector<double>{}, ref,
                           p.rows, p.cols, 1e-5, p.unit_offset);
    norm_forward<float>(t.exec(), p.center, xf.get(), use_w ? wf.get() : nullptr, use_b ? bf.get() : nullptr, y.get(),
                        mean.get(), rstd.get(), p.rows, p.cols, 1e-5, p.unit_offset);
    EXPECT_TRUE(all_near(to_double(y.host()), ref, 1e-5, 1e-5));
    RecordProperty("max_abs_error_float", ::testing::PrintToString(max_abs_diff(to_double(y.host()), ref)));
    norm_forward<tile::bf16>(t.exec(), p.center, xb.get(), use_w ? wb.get() : nullptr, use_b ? bb.get() : nullptr,
                             yb.get(), mean.get(), rstd.get(), p.rows, p.cols, 1e-5, p.unit_offset);
    EXPECT_TRUE(all_near(to_double(yb.host()), ref, 0.05, 0.02));
  }
}

// On the host the affine rounds the product before it adds the bias, so that the CPU's results do
// not depend on whether GCC fuses the two (it did, once they were one expression: the small float
// tiles moved): weight and bias give, bit for bit, the weight alone and then the bias added by
// kernels::add.
TEST_P(NormTest, HostAffineRoundsTheProductBeforeTheBias) {
  const NormCase p = GetParam();
  const Target& t = p.target;
  if (!p.affine || t.backend == tile::Backend::kCuda) GTEST_SKIP() << "a device fuses them";
  const auto n = static_cast<size_t>(p.rows * p.cols);
  const auto x = random_vector(n, 1, 2.0, 0.7);
  const auto w = random_vector(static_cast<size_t>(p.cols), 2);
  const auto b = random_vector(static_cast<size_t>(p.cols), 3);
  std::vector<double> b_rows(n);
  for (size_t i = 0; i < n; ++i) b_rows[i] = b[i % static_cast<size_t>(p.cols)];
  Dev<float> xf(t, to_storage<float>(x)), wf(t, to_storage<float>(w)), bf(t, to_storage<float>(b));
  Dev<float> bf_rows(t, to_storage<float>(b_rows)), y(t, n), y_w(t, n);
  Dev<float> mean(t, static_cast<size_t>(p.rows)), rstd(t, static_cast<size_t>(p.rows));
  norm_forward<float>(t.exec(), p.center, xf.get(), wf.get(), bf.get(), y.get(), mean.get(), rstd.get(), p.rows, p.cols,
                      1e-5, p.unit_offset);
  norm_forward<float>(t.exec(), p.center, xf.get(), wf.get(), nullptr, y_w.get(), mean.get(), rstd.get(), p.rows,
                      p.cols, 1e-5, p.unit_offset);
  add<float>(t.exec(), y_w.get(), bf_rows.get(), y_w.get(), static_cast<int64_t>(n));
  EXPECT_EQ(to_double(y_w.host()), to_double(y.host()));
}

/// The backward of one case at inputs drawn and rounded to the storage type T (x, w when affine,
/// dy; dw and db, which the kernel adds into, start at 0.25 and -0.5): in float64 on the CPU
/// executor, and in T on the case's target (statistics and workspace in float).
struct BackwardRun {
  std::vector<double> x, w, dy;       // the inputs, as T holds them
  std::vector<double> dx, dw, db;     // float64, CPU executor
  std::vector<double> tdx, tdw, tdb;  // T, the target (tdw and tdb when affine)
};

template <class T>
BackwardRun backward_at(const NormCase& p) {
  const Target& t = p.target;
  BackwardRun r;
  r.x = to_double(to_storage<T>(random_vector(static_cast<size_t>(p.rows * p.cols), 4, 1.5, 0.3)));
  r.w = p.affine ? to_double(to_storage<T>(random_vector(static_cast<size_t>(p.cols), 5))) : std::vector<double>{};
  r.dy = to_double(to_storage<T>(random_vector(r.x.size(), 7)));
  const auto& x = r.x;
  const auto& w = r.w;
  const size_t rows = static_cast<size_t>(p.rows),
               ws_size = static_cast<size_t>(norm_backward_workspace(p.rows, p.cols));
  std::vector<double> y(x.size()), mean(rows), rstd(rows), ws(ws_size);
  r.dx.resize(x.size());
  r.dw.assign(w.size(), 0.25);
  r.db.assign(w.size(), -0.5);
  norm_forward<double>(Exec{}, p.center, x.data(), p.affine ? w.data() : nullptr, nullptr, y.data(), mean.data(),
                       rstd.data(), p.rows, p.cols, 1e-5, p.unit_offset);
  norm_backward<double>(Exec{}, p.center, r.dy.data(), x.data(), p.affine ? w.data() : nullptr, mean.data(),
                        rstd.data(), r.dx.data(), p.affine ? r.dw.data() : nullptr, p.affine ? r.db.data() : nullptr,
                        p.rows, p.cols, ws.data(), p.unit_offset);
  Dev<T> gx(t, to_storage<T>(x)), gw(t, to_storage<T>(w)), gdy(t, to_storage<T>(r.dy)), gy(t, x.size());
  Dev<float> gmean(t, rows), grstd(t, rows), gws(t, ws_size);
  Dev<T> gdx(t, x.size()), gdw(t, to_storage<T>(std::vector<double>(w.size(), 0.25))),
      gdb(t, to_storage<T>(std::vector<double>(w.size(), -0.5)));
  const Exec exec = t.exec();
  norm_forward<T>(exec, p.center, gx.get(), p.affine ? gw.get() : nullptr, nullptr, gy.get(), gmean.get(), grstd.get(),
                  p.rows, p.cols, 1e-5, p.unit_offset);
  norm_backward<T>(exec, p.center, gdy.get(), gx.get(), p.affine ? gw.get() : nullptr, gmean.get(), grstd.get(),
                   gdx.get(), p.affine ? gdw.get() : nullptr, p.affine ? gdb.get() : nullptr, p.rows, p.cols, gws.get(),
                   p.unit_offset);
  r.tdx = to_double(gdx.host());
  if (p.affine) {
    r.tdw = to_double(gdw.host());
    r.tdb = to_double(gdb.host());
  }
  return r;
}

// The float backward on this target against the float64 backward (itself checked against finite
// differences below): dx, and the weight and bias gradients added into their inputs.
TEST_P(NormTest, FloatBackwardMatchesFloat64Backward) {
  const NormCase p = GetParam();
  const BackwardRun r = backward_at<float>(p);
  // The float64 program against the formulas (norm_backward_reference, no tile program): the
  // targets below are compared with the program, so a fault of the program in every type (e.g. in
  // its software-pipelined rows) passes there and fails here.
  std::vector<double> ref_dx, ref_dw(r.w.size(), 0.25), ref_db(r.w.size(), -0.5);
  norm_backward_reference(p.center, r.x, r.w, r.dy, ref_dx, ref_dw, ref_db, p.rows, p.cols, 1e-5, p.unit_offset);
  EXPECT_TRUE(all_near(r.dx, ref_dx, 1e-9, 1e-9));
  if (p.affine) {
    EXPECT_TRUE(all_near(r.dw, ref_dw, 1e-9 * static_cast<double>(p.rows), 1e-9));
    EXPECT_TRUE(all_near(r.db, ref_db, 1e-9 * static_cast<double>(p.rows), 1e-9));
  }
  // float on the target.
  EXPECT_TRUE(all_near(r.tdx, r.dx, 1e-4, 1e-4));
  RecordProperty("max_abs_error_dx_float", ::testing::PrintToString(max_abs_diff(r.tdx, r.dx)));
  if (p.affine) {  // sums over the rows
    EXPECT_TRUE(all_near(r.tdw, r.dw, 1e-4 * static_cast<double>(p.rows), 1e-4));
    EXPECT_TRUE(all_near(r.tdb, r.db, 1e-4 * static_cast<double>(p.rows), 1e-4));
  }
}

// The bf16 backward on this target against the float64 backward at the same (bf16-rounded)
// inputs: dx rounded once to bf16, the weight and bias gradients summed in float and rounded once.
TEST_P(NormTest, Bf16BackwardMatchesFloat64Backward) {
  const NormCase p = GetParam();
  const BackwardRun r = backward_at<tile::bf16>(p);
  EXPECT_TRUE(all_near(r.tdx, r.dx, 1e-3, 1.0 / 128));
  if (p.affine) {  // sums over the rows, in float, rounded once
    EXPECT_TRUE(all_near(r.tdw, r.dw, 1e-4 * static_cast<double>(p.rows), 1.0 / 128));
    EXPECT_TRUE(all_near(r.tdb, r.db, 1e-4 * static_cast<double>(p.rows), 1.0 / 128));
  }
}

// On the host targets the float weight and bias gradients are bit for bit the plain sum: per
// group of 32 rows, from zero, each product dy xhat rounded on its own (no FMA), then the groups
// in order into the gradient. That is the order the CPU model's stored losses were made with.
TEST_P(NormTest, FloatWeightGradientOnTheHostIsThePlainSum) {
  const NormCase p = GetParam();
  const Target& t = p.target;
  if (!p.affine || tile::runs_as_device(t.exec())) GTEST_SKIP() << "the host targets' weight gradient";
  const size_t rows = static_cast<size_t>(p.rows), cols = static_cast<size_t>(p.cols);
  const auto x = to_storage<float>(random_vector(rows * cols, 4, 1.5, 0.3));
  const auto w = to_storage<float>(random_vector(cols, 5));
  const auto dy = to_storage<float>(random_vector(rows * cols, 7));
  Dev<float> gx(t, x), gw(t, w), gdy(t, dy), gy(t, x.size()), gmean(t, rows), grstd(t, rows), gdx(t, x.size());
  Dev<float> gws(t, static_cast<size_t>(norm_backward_workspace(p.rows, p.cols)));
  Dev<float> gdw(t, std::vector<float>(cols, 0.25f)), gdb(t, std::vector<float>(cols, -0.5f));
  const Exec exec = t.exec();
  norm_forward<float>(exec, p.center, gx.get(), gw.get(), nullptr, gy.get(), gmean.get(), grstd.get(), p.rows, p.cols,
                      1e-5, p.unit_offset);
  norm_backward<float>(exec, p.center, gdy.get(), gx.get(), gw.get(), gmean.get(), grstd.get(), gdx.get(), gdw.get(),
                       gdb.get(), p.rows, p.cols, gws.get(), p.unit_offset);
  const std::vector<float> mean = gmean.host(), rstd = grstd.host();
  std::vector<float> dw(cols, 0.25f), db(cols, -0.5f);
  for (size_t c = 0; c < cols; ++c)
    for (size_t g0 = 0; g0 < rows; g0 += 32) {
      float pw = 0, pb = 0;
      for (size_t r = g0; r < std::min(rows, g0 + 32); ++r) {
        volatile float xhat = (x[r * cols + c] - (p.center ? mean[r] : 0.0f)) * rstd[r];
        volatile float prod = dy[r * cols + c] * xhat;  // rounded: volatile keeps GCC from an FMA
        pw = pw + prod;
        pb = pb + dy[r * cols + c];
      }
      dw[c] = dw[c] + pw;
      db[c] = db[c] + pb;
    }
  EXPECT_EQ(gdw.host(), dw);
  EXPECT_EQ(gdb.host(), db);
}

// The float64 forward and backward on the emulated target against the cpu target's, every element
// (y, dx, and the weight and bias gradients added into their inputs): the cpu target's backward is
// checked by finite differences below, so the emulated target's is too.
TEST_P(NormTest, Float64BackwardMatchesTheCpuTarget) {
  const NormCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  if (p.target.backend == tile::Backend::kCpu) GTEST_SKIP() << "the cpu target is the one compared with";
  const auto x = random_vector(static_cast<size_t>(p.rows * p.cols), 4, 1.5, 0.3);
  const auto w = p.affine ? random_vector(static_cast<size_t>(p.cols), 5) : std::vector<double>{};
  const auto b = p.affine ? random_vector(static_cast<size_t>(p.cols), 6) : std::vector<double>{};
  const auto dy = random_vector(x.size(), 7);
  // y, dx, dw, db one after another.
  auto run = [&](const Exec& exec) {
    std::vector<double> y(x.size()), mean(static_cast<size_t>(p.rows)), rstd(static_cast<size_t>(p.rows));
    norm_forward<double>(exec, p.center, x.data(), p.affine ? w.data() : nullptr, p.affine ? b.data() : nullptr,
                         y.data(), mean.data(), rstd.data(), p.rows, p.cols, 1e-5, p.unit_offset);
    std::vector<double> dx(x.size()), dw(w.size(), 0.25), db(b.size(), -0.5);
    std::vector<double> ws(static_cast<size_t>(norm_backward_workspace(p.rows, p.cols)));
    norm_backward<double>(exec, p.center, dy.data(), x.data(), p.affine ? w.data() : nullptr, mean.data(), rstd.data(),
                          dx.data(), p.affine ? dw.data() : nullptr, p.affine ? db.data() : nullptr, p.rows, p.cols,
                          ws.data(), p.unit_offset);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    y.insert(y.end(), db.begin(), db.end());
    return y;
  };
  EXPECT_TRUE(all_near(run(p.target.exec()), run(Exec{}), 1e-12, 1e-10));
}

TEST_P(NormTest, BackwardMatchesFiniteDifferences) {
  const NormCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  SKIP_FINITE_DIFFERENCES_OFF_CPU(p.target, "Float64BackwardMatchesTheCpuTarget");
  const auto x0 = random_vector(static_cast<size_t>(p.rows * p.cols), 4, 1.5, 0.3);
  const auto w = p.affine ? random_vector(static_cast<size_t>(p.cols), 5) : std::vector<double>{};
  const auto b = p.affine ? random_vector(static_cast<size_t>(p.cols), 6) : std::vector<double>{};
  const auto dy = random_vector(x0.size(), 7);
  const Target& t = p.target;
  const Exec exec = t.exec();
  const double eps = 1e-5;
  // Loss L = sum(y * dy); dL/dx, dL/dw, dL/db from the kernel vs central differences.
  auto loss = [&](const std::vector<double>& x, const std::vector<double>& ww, const std::vector<double>& bb) {
    std::vector<double> y(x.size()), mean(static_cast<size_t>(p.rows)), rstd(static_cast<size_t>(p.rows));
    norm_forward<double>(exec, p.center, x.data(), p.affine ? ww.data() : nullptr, p.affine ? bb.data() : nullptr,
                         y.data(), mean.data(), rstd.data(), p.rows, p.cols, eps, p.unit_offset);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
    return l;
  };
  std::vector<double> y(x0.size()), mean(static_cast<size_t>(p.rows)), rstd(static_cast<size_t>(p.rows));
  norm_forward<double>(exec, p.center, x0.data(), p.affine ? w.data() : nullptr, p.affine ? b.data() : nullptr,
                       y.data(), mean.data(), rstd.data(), p.rows, p.cols, eps, p.unit_offset);
  std::vector<double> dx(x0.size()), dw(w.size(), 0.25), db(b.size(), -0.5);  // grads accumulate
  std::vector<double> ws(static_cast<size_t>(norm_backward_workspace(p.rows, p.cols)));
  norm_backward<double>(exec, p.center, dy.data(), x0.data(), p.affine ? w.data() : nullptr, mean.data(), rstd.data(),
                        dx.data(), p.affine ? dw.data() : nullptr, p.affine ? db.data() : nullptr, p.rows, p.cols,
                        ws.data(), p.unit_offset);
  const double h = 1e-6;
  // The loss sums all elements: its rounding, divided by h, grows with the size.
  const double fd_atol = 1e-6 * std::max(1.0, std::sqrt(static_cast<double>(x0.size()) / 1e4));
  // x[i] moves only its own row of y (a norm works row by row), so the loss's difference is its
  // row's: that row through the forward alone (rows = 1), without the other rows' rounding and
  // time (the whole forward for each of the 74 evaluations took most of the test's time).
  auto row_loss = [&](const std::vector<double>& x, int64_t row) {
    const int64_t at = row * p.cols;
    std::vector<double> yr(static_cast<size_t>(p.cols)), mr(1), rr(1);
    norm_forward<double>(exec, p.center, x.data() + at, p.affine ? w.data() : nullptr, p.affine ? b.data() : nullptr,
                         yr.data(), mr.data(), rr.data(), 1, p.cols, eps, p.unit_offset);
    double l = 0;
    for (int64_t j = 0; j < p.cols; ++j) l += yr[static_cast<size_t>(j)] * dy[static_cast<size_t>(at + j)];
    return l;
  };
  for (size_t i = 0; i < x0.size(); i += std::max<size_t>(1, x0.size() / 37)) {
    const int64_t row = static_cast<int64_t>(i) / p.cols;
    auto xv = x0;
    xv[i] += h;
    const double lp = row_loss(xv, row);
    xv[i] -= 2 * h;
    const double lm = row_loss(xv, row);
    const double fd = (lp - lm) / (2 * h);
    ASSERT_NEAR(dx[i], fd, fd_atol + 1e-5 * std::abs(fd)) << "dx at " << i;
  }
  if (p.affine) {
    for (size_t i = 0; i < w.size(); i += std::max<size_t>(1, w.size() / 11)) {
      auto wv = w;
      wv[i] += h;
      const double lp = loss(x0, wv, b);
      wv[i] -= 2 * h;
      const double lm = loss(x0, wv, b);
      ASSERT_NEAR(dw[i] - 0.25, (lp - lm) / (2 * h), 10 * fd_atol) << "dw at " << i;
      auto bv = b;
      bv[i] += h;
      const double lpb = loss(x0, w, bv);
      bv[i] -= 2 * h;
      const double lmb = loss(x0, w, bv);
      ASSERT_NEAR(db[i] + 0.5, (lpb - lmb) / (2 * h), 10 * fd_atol) << "db at " << i;
    }
  }
}

std::vector<NormCase> cases() {
  std::vector<NormCase> out;
  for (const Target& t : targets())
    for (bool center : {false, true})
      for (bool affine : {false, true})
        // 768: the 768-wide tile; 771: a row not a multiple of 8 (no 16-byte bf16 run at its end);
        // 200 and 1061 rows: 7 and 34 groups of 32 rows (on a device too, below 64 groups), whose
        // partial sums one launch adds there for both gradients (NormManyRowsTest: more rows);
        // 2500 columns: wider than the host's widest tile (NormBackwardWide there), one tile on a
        // device; 4500: wider than a device's too (NormBackwardWide on the emulated target).
        // 33 rows of 1000 and 3000: the backward's software-pipelined tiles (NormBackward::kAhead:
        // 1024 on every target, bf16's 4096 on the emulated one) over a group of 32 rows and one
        // of a single row, whose "next row" loads nothing.
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5},
                                  {40, 128},
                                  {33, 300},
                                  {5, 2500},
                                  {200, 64},
                                  {70, 771},
                                  {1061, 768},
                                  {3, 4500},
                                  {33, 1000},
                                  {33, 3000}})
          out.push_back({center, affine, rows, cols, t});
  // The unit offset (1 + w) with weight and bias: one tile, chunked rows, and many row groups.
  for (const Target& t : targets())
    for (bool center : {false, true})
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {33, 300}, {5, 2500}, {1061, 768}})
        out.push_back({center, true, rows, cols, t, true});
  return out;
}

// Many rows: a device takes groups of 32 rows up to 512 groups, then several groups of 32 rows
// per program (norm_backward_rows_per_group), and one launch sums the groups' partials of both
// gradients (ColumnSums: the groups of 8 columns a tile, 1030 columns ending in a chunk of 6);
// with rows wider than one tile (1030 columns on the host) a program's partials are stored after
// each 32 rows and added to after. The float backward against the float64 backward, as above, on
// every target: 2100 rows are 66 groups of 32 everywhere; 16,416 rows are 513 groups of 32 on the
// host, 257 groups of 64 on a device (the last one of 32 rows).
class NormManyRowsTest : public ::testing::TestWithParam<Target> {};

TEST_P(NormManyRowsTest, GroupsOfManyRowsMatchTheFloat64Backward) {
  const Target& t = GetParam();
  const Exec exec = t.exec();
  EXPECT_EQ(norm_backward_rows_per_group(exec, 2100), 32);
  EXPECT_EQ(norm_backward_rows_per_group(exec, 512 * 32), 32);
  EXPECT_EQ(norm_backward_rows_per_group(exec, 16416), tile::runs_as_device(exec) ? 64 : 32);
  for (const auto& [n_rows, cols] : {std::pair<int64_t, int64_t>{2100, 40}, {2100, 1030}, {16416, 24}})
    for (const bool center : {false, true}) {
      SCOPED_TRACE(std::to_string(n_rows) + " x " + std::to_string(cols) + (center ? " layernorm" : " rmsnorm"));
      const auto x = to_double(to_storage<float>(random_vector(static_cast<size_t>(n_rows * cols), 4, 1.5, 0.3)));
      const auto w = to_double(to_storage<float>(random_vector(static_cast<size_t>(cols), 5)));
      const auto dy = to_double(to_storage<float>(random_vector(x.size(), 7)));
      const auto rows = static_cast<size_t>(n_rows);
      const auto ws_size = static_cast<size_t>(norm_backward_workspace(n_rows, cols));
      std::vector<double> y(x.size()), mean(rows), rstd(rows), dx(x.size()), dw(w.size(), 0.25), db(w.size(), -0.5),
          ws(ws_size);
      norm_forward<double>(Exec{}, center, x.data(), w.data(), nullptr, y.data(), mean.data(), rstd.data(), n_rows,
                           cols, 1e-5);
      norm_backward<double>(Exec{}, center, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                            dw.data(), db.data(), n_rows, cols, ws.data());
      std::vector<double> ref_dx, ref_dw(w.size(), 0.25), ref_db(w.size(), -0.5);
      norm_backward_reference(center, x, w, dy, ref_dx, ref_dw, ref_db, n_rows, cols, 1e-5);
      EXPECT_TRUE(all_near(dx, ref_dx, 1e-9, 1e-9));
      EXPECT_TRUE(all_near(dw, ref_dw, 1e-9 * static_cast<double>(n_rows), 1e-9));
      EXPECT_TRUE(all_near(db, ref_db, 1e-9 * static_cast<double>(n_rows), 1e-9));
      Dev<float> gx(t, to_storage<float>(x)), gw(t, to_storage<float>(w)), gdy(t, to_storage<float>(dy)),
          gy(t, x.size());
      Dev<float> gmean(t, rows), grstd(t, rows), gdx(t, x.size()), gws(t, ws_size);
      Dev<float> gdw(t, std::vector<float>(w.size(), 0.25f)), gdb(t, std::vector<float>(w.size(), -0.5f));
      norm_forward<float>(exec, center, gx.get(), gw.get(), nullptr, gy.get(), gmean.get(), grstd.get(), n_rows, cols,
                          1e-5);
      norm_backward<float>(exec, center, gdy.get(), gx.get(), gw.get(), gmean.get(), grstd.get(), gdx.get(), gdw.get(),
                           gdb.get(), n_rows, cols, gws.get());
      EXPECT_TRUE(all_near(to_double(gdx.host()), dx, 1e-4, 1e-4));
      EXPECT_TRUE(all_near(to_double(gdw.host()), dw, 1e-4 * static_cast<double>(n_rows), 1e-4));
      EXPECT_TRUE(all_near(to_double(gdb.host()), db, 1e-4 * static_cast<double>(n_rows), 1e-4));
    }
}

// Rows wider than the widest tile, several groups of 32 rows a program: what a device runs for
// more than 16,384 rows of more than 4,096 columns (norm_backward_rows_per_group, NormBackwardWide:
// the partials of each later 32 rows added to those the program stored for the earlier ones).
// Too large to reach through the launcher here, so the program is launched itself, 64 rows a
// program over 100 rows (a group of 64, one of 36), on the target's widest tile: 1024 on the host
// (1030 columns), 4096 on a device (4102). dx and each group's partials of both gradients against
// float64 on the group's rows; the partials' memory starts as NaN, as a device's workspace is
// whatever it held (Dev).
TEST_P(NormManyRowsTest, WideRowsInProgramsOfSeveralGroupsMatchTheFloat64Partials) {
  const Target& t = GetParam();
  const auto run = [&]<int B>() {
    constexpr int64_t kRows = 100, kPerGroup = 64, kGroups = 2, kCols = B + 6;
    for (const bool center : {false, true}) {
      SCOPED_TRACE(std::string(center ? "layernorm" : "rmsnorm") + ", " + std::to_string(kCols) + " columns");
      const auto x = to_double(to_storage<float>(random_vector(static_cast<size_t>(kRows * kCols), 14, 1.5, 0.3)));
      const auto w = to_double(to_storage<float>(random_vector(static_cast<size_t>(kCols), 15)));
      const auto dy = to_double(to_storage<float>(random_vector(x.size(), 17)));
      // The program's row statistics: the forward's, in float64 on the host, rounded to float.
      std::vector<double> y(x.size()), mean(kRows), rstd(kRows);
      norm_forward<double>(Exec{}, center, x.data(), w.data(), nullptr, y.data(), mean.data(), rstd.data(), kRows,
                           kCols, 1e-5);
      Dev<float> gx(t, to_storage<float>(x)), gw(t, to_storage<float>(w)), gdy(t, to_storage<float>(dy)),
          gmean(t, to_storage<float>(mean)), grstd(t, to_storage<float>(rstd)), gdx(t, x.size()),
          dw_part(t, kGroups * kCols), db_part(t, kGroups * kCols);
      tile::launch(t.exec(), tile::Grid{kGroups},
                   programs::NormBackwardWide<float, B>{{gdy.get(), gx.get(), gw.get(), gmean.get(), grstd.get(),
                                                         gdx.get(), dw_part.get(), db_part.get(), kRows, kCols,
                                                         kPerGroup, nullptr, false, center}});
      std::vector<double> ref_dx, all_dx;
      std::vector<double> ref_dw(static_cast<size_t>(kGroups * kCols)), ref_db(ref_dw.size());
      for (int64_t g = 0; g < kGroups; ++g) {
        const int64_t r0 = g * kPerGroup, r1 = std::min(kRows, r0 + kPerGroup);
        const auto rows_of = [&](const std::vector<double>& v) {
          return std::vector<double>(v.begin() + r0 * kCols, v.begin() + r1 * kCols);
        };
        std::vector<double> dw(static_cast<size_t>(kCols)), db(dw.size());
        norm_backward_reference(center, rows_of(x), w, rows_of(dy), ref_dx, dw, db, r1 - r0, kCols, 1e-5);
        all_dx.insert(all_dx.end(), ref_dx.begin(), ref_dx.end());
        std::copy(dw.begin(), dw.end(), ref_dw.begin() + g * kCols);
        std::copy(db.begin(), db.end(), ref_db.begin() + g * kCols);
      }
      EXPECT_TRUE(all_near(to_double(gdx.host()), all_dx, 1e-4, 1e-4));
      EXPECT_TRUE(all_near(to_double(dw_part.host()), ref_dw, 1e-4 * kPerGroup, 1e-4));
      EXPECT_TRUE(all_near(to_double(db_part.host()), ref_db, 1e-4 * kPerGroup, 1e-4));
    }
  };
  if (tile::runs_as_device(t.exec()))
    run.template operator()<tile::kDeviceRowTile>();
  else
    run.template operator()<tile::kHostMaxTile>();
}

INSTANTIATE_TEST_SUITE_P(Targets, NormManyRowsTest, ::testing::ValuesIn(targets()), target_name);

// The residual stream's adds folded into the norm's launches (norm_forward_residual,
// norm_backward_residual): against the float64 composition, and, on the host executors, bit for
// bit the unfused launches (kernels::add and the plain norm), which is what lets a device fold
// them without moving a loss. One tile (48 columns) and chunked rows (1030); LayerNorm and
// RMSNorm; float and bf16.
class NormResidualTest : public ::testing::TestWithParam<Target> {};

template <class T>
void check_norm_residual(const Target& t, bool center, int64_t cols) {
  SCOPED_TRACE(std::to_string(cols) + (center ? " layernorm " : " rmsnorm ") +
               (std::is_same_v<T, float> ? "float" : "bf16"));
  const Exec exec = t.exec();
  const int64_t n_rows = 37;
  const auto rows = static_cast<size_t>(n_rows), n = rows * static_cast<size_t>(cols);
  const auto x = to_double(to_storage<T>(random_vector(n, 4, 1.5, 0.3)));
  const auto x2 = to_double(to_storage<T>(random_vector(n, 8, 0.7)));
  const auto res = to_double(to_storage<T>(random_vector(n, 9)));
  const auto w = to_double(to_storage<T>(random_vector(static_cast<size_t>(cols), 5)));
  const auto b = to_double(to_storage<T>(random_vector(static_cast<size_t>(cols), 6)));
  const auto dy = to_double(to_storage<T>(random_vector(n, 7)));
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1.0 / 64;
  // float64: s = x + x2, y = norm(s); y_res = res + norm(x); dx = dres + dnorm(x) at dy.
  std::vector<double> s(n), y, y_res;
  for (size_t i = 0; i < n; ++i) s[i] = x[i] + x2[i];
  norm_forward_reference(center, s, w, b, y, n_rows, cols, 1e-5);
  norm_forward_reference(center, x, w, b, y_res, n_rows, cols, 1e-5);
  for (size_t i = 0; i < n; ++i) y_res[i] += res[i];
  std::vector<double> mean(rows), rstd(rows), yd(n), dx(n), dw(w.size(), 0.0), db(w.size(), 0.0),
      ws(static_cast<size_t>(norm_backward_workspace(n_rows, cols)));
  norm_forward<double>(Exec{}, center, x.data(), w.data(), b.data(), yd.data(), mean.data(), rstd.data(), n_rows, cols,
                       1e-5);
  norm_backward<double>(Exec{}, center, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                        db.data(), n_rows, cols, ws.data());
  for (size_t i = 0; i < n; ++i) dx[i] += res[i];  // res as dres
  // The fused launches on the target.
  Dev<T> gx(t, to_storage<T>(x)), gx2(t, to_storage<T>(x2)), gres(t, to_storage<T>(res)), gw(t, to_storage<T>(w)),
      gb(t, to_storage<T>(b)), gdy(t, to_storage<T>(dy));
  const auto zeros = to_storage<T>(std::vector<double>(w.size(), 0.0));  // the gradients are added into
  Dev<T> gs(t, n), gy(t, n), gyr(t, n), gdx(t, n), gdw(t, zeros), gdb(t, zeros);
  Dev<float> gmean(t, rows), grstd(t, rows), gws(t, static_cast<size_t>(norm_backward_workspace(n_rows, cols)));
  norm_forward_residual<T>(exec, center, gx.get(), gx2.get(), gs.get(), nullptr, gw.get(), gb.get(), gy.get(),
                           gmean.get(), grstd.get(), n_rows, cols, 1e-5);
  EXPECT_TRUE(all_near(to_double(gs.host()), s, 0, tol));
  EXPECT_TRUE(all_near(to_double(gy.host()), y, tol, tol));
  norm_forward_residual<T>(exec, center, gx.get(), nullptr, nullptr, gres.get(), gw.get(), gb.get(), gyr.get(),
                           gmean.get(), grstd.get(), n_rows, cols, 1e-5);
  EXPECT_TRUE(all_near(to_double(gyr.host()), y_res, tol, tol));
  norm_backward_residual<T>(exec, center, gdy.get(), gres.get(), gx.get(), gw.get(), gmean.get(), grstd.get(),
                            gdx.get(), gdw.get(), gdb.get(), n_rows, cols, gws.get());
  EXPECT_TRUE(all_near(to_double(gdx.host()), dx, tol, tol));
  if (t.backend == tile::Backend::kCuda) return;
  // On the host: bit for bit the unfused launches.
  Dev<T> us(t, n), uy(t, n), uyr(t, n), udx(t, n), udw(t, zeros), udb(t, zeros);
  add<T>(exec, gx.get(), gx2.get(), us.get(), static_cast<int64_t>(n));
  norm_forward<T>(exec, center, us.get(), gw.get(), gb.get(), uy.get(), gmean.get(), grstd.get(), n_rows, cols, 1e-5);
  EXPECT_EQ(to_double(us.host()), to_double(gs.host()));
  EXPECT_EQ(to_double(uy.host()), to_double(gy.host()));
  norm_forward<T>(exec, center, gx.get(), gw.get(), gb.get(), uyr.get(), gmean.get(), grstd.get(), n_rows, cols, 1e-5);
  add<T>(exec, uyr.get(), gres.get(), uyr.get(), static_cast<int64_t>(n));
  EXPECT_EQ(to_double(uyr.host()), to_double(gyr.host()));
  norm_backward<T>(exec, center, gdy.get(), gx.get(), gw.get(), gmean.get(), grstd.get(), udx.get(), udw.get(),
                   udb.get(), n_rows, cols, gws.get());
  add<T>(exec, udx.get(), gres.get(), udx.get(), static_cast<int64_t>(n));
  EXPECT_EQ(to_double(udx.host()), to_double(gdx.host()));
  EXPECT_EQ(to_double(udw.host()), to_double(gdw.host()));
  EXPECT_EQ(to_double(udb.host()), to_double(gdb.host()));
}

TEST_P(NormResidualTest, FoldedAddsMatchFloat64AndTheUnfusedLaunches) {
  for (const int64_t cols : {48, 1030})
    for (const bool center : {false, true}) {
      check_norm_residual<float>(GetParam(), center, cols);
      check_norm_residual<tile::bf16>(GetParam(), center, cols);
    }
}

// The folded residual gradient in float64 against central differences of
// L = sum(norm(x) dy) + sum(x dres), whose gradient is dres + the norm's.
TEST_P(NormResidualTest, FoldedResidualGradientMatchesFiniteDifferences) {
  const Target& t = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(t);
  const int64_t n_rows = 5, cols = 40;
  const auto n = static_cast<size_t>(n_rows * cols);
  const auto x0 = random_vector(n, 4, 1.5, 0.3), dy = random_vector(n, 7), dres = random_vector(n, 9);
  const auto w = random_vector(static_cast<size_t>(cols), 5);
  const Exec exec = t.exec();
  std::vector<double> y(n), mean(static_cast<size_t>(n_rows)), rstd(static_cast<size_t>(n_rows));
  const auto loss = [&](const std::vector<double>& x) {
    norm_forward<double>(exec, true, x.data(), w.data(), nullptr, y.data(), mean.data(), rstd.data(), n_rows, cols,
                         1e-5);
    double l = 0;
    for (size_t i = 0; i < n; ++i) l += y[i] * dy[i] + x[i] * dres[i];
    return l;
  };
  (void)loss(x0);
  std::vector<double> dx(n), dw(w.size(), 0.0), ws(static_cast<size_t>(norm_backward_workspace(n_rows, cols)));
  norm_backward_residual<double>(exec, true, dy.data(), dres.data(), x0.data(), w.data(), mean.data(), rstd.data(),
                                 dx.data(), dw.data(), nullptr, n_rows, cols, ws.data());
  const double h = 1e-6;
  for (size_t i = 0; i < n; i += 7) {
    auto xv = x0;
    xv[i] += h;
    const double lp = loss(xv);
    xv[i] -= 2 * h;
    const double lm = loss(xv);
    ASSERT_NEAR(dx[i], (lp - lm) / (2 * h), 1e-6 + 1e-5 * std::abs(dx[i])) << "dx at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, NormResidualTest, ::testing::ValuesIn(targets()), target_name);

INSTANTIATE_TEST_SUITE_P(Targets, NormTest, ::testing::ValuesIn(cases()), [](const auto& tp) {
  const NormCase& p = tp.param;
  return std::string(p.center ? "layernorm" : "rmsnorm") + (p.affine ? "_affine" : "_plain") +
         (p.unit_offset ? "_unit_offset" : "") + "_" + std::to_string(p.rows) + "x" + std::to_string(p.cols) + "_" +
         p.target.name;
});

}  // namespace
}  // namespace norm_test
}  // namespace bench::kernels
