// Tests of the declared traffic of the tile programs (kernels/tile/profile.h): a LaunchObserver
// records what each outermost launch reports; small launches on the CPU executor are checked
// against closed forms written out here (bytes and FLOPs counted by hand from each kernel's
// definition, not from its traffic()), and launches inside a KernelScope or inside
// tile::parallel_for are not reported at all.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "activation.h"
#include "adamw.h"
#include "cross_entropy.h"
#include "elementwise.h"
#include "kernel_test_util.h"
#include "norm.h"
#include "rope.h"
#include "softmax.h"
#include "support/launch_counter.h"
#include "tile/parallel.h"
#include "tile/profile.h"

namespace bench::kernels {
namespace traffic_test {
namespace {

/// One reported launch: the program's (mangled) name and what it declared.
struct Launch {
  std::string name;
  tile::Traffic traffic;
};

/// Records the outermost launches of the calling thread while it exists.
class Recorder final : public test::ScopedLaunchObserver {
 public:
  void begin(const tile::Exec&, const char*) override { ++begun_; }
  void end(const tile::Exec&, const char* name, const tile::Traffic& traffic) override {
    launches.push_back({name, traffic});
  }
  int begun() const { return begun_; }

  std::vector<Launch> launches;

 private:
  int begun_ = 0;
};

const tile::Exec kCpu{tile::Backend::kCpu, nullptr};

/// The one launch reported, which must be of a program whose name contains `program`.
const Launch& only(const Recorder& r, const std::string& program) {
  EXPECT_EQ(r.launches.size(), 1u);
  EXPECT_EQ(r.begun(), static_cast<int>(r.launches.size()));
  static const Launch kNone{"(none)", {}};
  if (r.launches.empty()) return kNone;
  EXPECT_NE(r.launches[0].name.find(program), std::string::npos) << r.launches[0].name;
  return r.launches[0];
}

TEST(Traffic, NormForwardLayerNormAndRmsNorm) {
  const int64_t rows = 5, cols = 48;
  std::vector<float> x(rows * cols, 0.5f), w(cols, 1.0f), b(cols, 0.0f), y(rows * cols), mean(rows), rstd(rows);
  {
    Recorder r;
    norm_forward<float>(kCpu, true, x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, cols, 1e-5);
    const Launch& l = only(r, "NormForward");
    // x, y, w, b in float; mean and rstd per row.
    EXPECT_EQ(l.traffic.bytes, 4.0 * (2 * rows * cols + 2 * cols) + 4.0 * 2 * rows);
    // Per element: the mean's add, x - mean, its square and add, * rstd, * w, + b; per row:
    // mean / cols, var / cols, + eps, rsqrt.
    EXPECT_EQ(l.traffic.flops, 7.0 * rows * cols + 4.0 * rows);
  }
  {
    Recorder r;  // RMSNorm, the gain 1 + w, no bias, no mean
    norm_forward<float>(kCpu, false, x.data(), w.data(), nullptr, y.data(), nullptr, rstd.data(), rows, cols, 1e-5,
                        true);
    const Launch& l = only(r, "NormForward");
    EXPECT_EQ(l.traffic.bytes, 4.0 * (2 * rows * cols + cols) + 4.0 * rows);
    // x^2 and its add, * rstd, 1 + w, the multiply; var / cols, + eps, rsqrt.
    EXPECT_EQ(l.traffic.flops, 5.0 * rows * cols + 3.0 * rows);
  }
}

TEST(Traffic, NormBackwardAndItsColumnSums) {
  const int64_t rows = 40, cols = 48, groups = 2;  // 32 rows per group
  std::vector<float> dy(rows * cols, 0.1f), x(rows * cols, 0.5f), w(cols, 1.0f), mean(rows, 0.0f), rstd(rows, 1.0f),
      dx(rows * cols), dw(cols, 0.0f), db(cols, 0.0f);
  std::vector<float> ws(static_cast<size_t>(norm_backward_workspace(rows, cols)));
  Recorder r;
  norm_backward<float>(kCpu, true, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                       db.data(), rows, cols, ws.data());
  ASSERT_EQ(r.launches.size(), 3u);  // the program, then the column sums of dw and db
  const Launch& l = r.launches[0];
  EXPECT_NE(l.name.find("NormBackward"), std::string::npos) << l.name;
  // dy, x read and dx written; w; mean and rstd; each group's row of the dw and db partials.
  EXPECT_EQ(l.traffic.bytes, 4.0 * (3 * rows * cols + cols) + 4.0 * 2 * rows + 4.0 * 2 * groups * cols);
  // Per element: x - mean, * rstd, dy * w, the sums of g and of g xhat (1 + 2), g - mean g,
  // xhat * mean gx, the subtraction, * rstd, dy xhat into dw (2), dy into db; per row: two
  // divisions.
  EXPECT_EQ(l.traffic.flops, 13.0 * rows * cols + 2.0 * rows);
  for (int i = 1; i < 3; ++i) {
    const Launch& s = r.launches[static_cast<size_t>(i)];
    EXPECT_NE(s.name.find("ColumnSum"), std::string::npos) << s.name;
    // The groups' partials read, the gradient read and written; an add per partial.
    EXPECT_EQ(s.traffic.bytes, 4.0 * groups * cols + 4.0 * 2 * cols);
    EXPECT_EQ(s.traffic.flops, 1.0 * groups * cols);
  }
}

TEST(Traffic, NormBackwardOnADeviceSumsBothGradientsInOneLaunch) {
  // 2100 rows: 66 groups of 32 rows on a device (norm_backward_rows_per_group); 48 columns, one tile.
  const int64_t rows = 2100, cols = 48, groups = 66;
  const tile::Exec emulated{tile::Backend::kEmulated, nullptr};
  std::vector<float> dy(rows * cols, 0.1f), x(rows * cols, 0.5f), w(cols, 1.0f), mean(rows, 0.0f), rstd(rows, 1.0f),
      dx(rows * cols), dw(cols, 0.0f), db(cols, 0.0f);
  std::vector<float> ws(static_cast<size_t>(norm_backward_workspace(rows, cols)));
  Recorder r;
  norm_backward<float>(emulated, true, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                       db.data(), rows, cols, ws.data());
  ASSERT_EQ(r.launches.size(), 2u);  // the program, then both column sums
  EXPECT_NE(r.launches[0].name.find("NormBackward"), std::string::npos) << r.launches[0].name;
  EXPECT_EQ(r.launches[0].traffic.bytes, 4.0 * (3 * rows * cols + cols) + 4.0 * 2 * rows + 4.0 * 2 * groups * cols);
  const Launch& s = r.launches[1];
  EXPECT_NE(s.name.find("ColumnSums"), std::string::npos) << s.name;
  // Per gradient: the groups' partials read, the gradient read and written; an add per partial.
  EXPECT_EQ(s.traffic.bytes, 2 * (4.0 * groups * cols + 4.0 * 2 * cols));
  EXPECT_EQ(s.traffic.flops, 2.0 * groups * cols);
  // Each gradient sums 2100 rows of dy xhat (0.1 x 0.5) and of dy (0.1).
  EXPECT_NEAR(dw[0], 2100 * 0.05, 1e-3);
  EXPECT_NEAR(db[0], 2100 * 0.1, 1e-3);
}

TEST(Traffic, ElementwiseAddInEveryStorageType) {
  const int64_t n = 3000;  // three programs, the last one partial: masked lanes count nothing
  {
    std::vector<float> a(n, 1.0f), b(n, 2.0f), out(n);
    Recorder r;
    add<float>(kCpu, a.data(), b.data(), out.data(), n);
    const Launch& l = only(r, "Add");
    EXPECT_EQ(l.traffic.bytes, 3.0 * 4 * n);
    EXPECT_EQ(l.traffic.flops, 1.0 * n);
  }
  {
    std::vector<tile::bf16> a(n), b(n), out(n);
    Recorder r;
    add<tile::bf16>(kCpu, a.data(), b.data(), out.data(), n);
    EXPECT_EQ(only(r, "Add").traffic.bytes, 3.0 * 2 * n);
  }
  {
    std::vector<double> x(n, 1.0), y(n, 2.0);
    Recorder r;
    axpy<double>(kCpu, 0.5, x.data(), y.data(), n);
    const Launch& l = only(r, "Axpy");
    EXPECT_EQ(l.traffic.bytes, 8.0 * (n + 2 * n));  // x read; y read and written
    EXPECT_EQ(l.traffic.flops, 2.0 * n);            // one FMA each
  }
}

TEST(Traffic, SoftmaxCountsTheVisibleColumns) {
  const int64_t rows = 6, cols = 6;
  std::vector<float> s(rows * cols, 0.3f), p(rows * cols), row_max(rows);
  {
    Recorder r;  // causal: row i sees i + 1 columns
    softmax_forward<float>(kCpu, s.data(), p.data(), rows, cols, cols, 0.5, 0.0, SoftmaxMask{true, 0, 0},
                           row_max.data());
    const Launch& l = only(r, "SoftmaxForward");
    const double visible = rows * (rows + 1) / 2.0;
    // The visible logits read, all of p and the row maxima written.
    EXPECT_EQ(l.traffic.bytes, 4.0 * (visible + rows * cols) + 4.0 * rows);
    // Per visible logit: the scale, the max, - m, exp, the sum, * 1 / sum; per row: 1 / sum.
    EXPECT_EQ(l.traffic.flops, 6.0 * visible + rows);
  }
  {
    Recorder r;  // causal, a window of 2, a soft-cap, no row maxima
    softmax_forward<float>(kCpu, s.data(), p.data(), rows, cols, cols, 0.5, 5.0, SoftmaxMask{true, 0, 2}, nullptr);
    const Launch& l = only(r, "SoftmaxForward");
    const double visible = 1 + 2.0 * (rows - 1);
    EXPECT_EQ(l.traffic.bytes, 4.0 * (visible + rows * cols));
    EXPECT_EQ(l.traffic.flops, 9.0 * visible + rows);  // the cap: / c, tanh, * c
  }
  {
    std::vector<float> dp(rows * cols, 0.1f), ds(rows * cols);
    Recorder r;
    softmax_backward<float>(kCpu, p.data(), dp.data(), nullptr, ds.data(), rows, cols, cols, 0.5, 0.0,
                            SoftmaxMask{true, 0, 0});
    const Launch& l = only(r, "SoftmaxBackward");
    const double visible = rows * (rows + 1) / 2.0;
    EXPECT_EQ(l.traffic.bytes, 4.0 * (2 * visible + rows * cols));  // p and dp read, ds written
    EXPECT_EQ(l.traffic.flops, 5.0 * visible);                      // p dp, sum, dp - dot, * p, * scale
  }
}

TEST(Traffic, CrossEntropyWithItsGradientOverPaddedRows) {
  const int64_t rows = 3, vocab = 50, ld = 64;
  std::vector<float> logits(rows * ld, 0.1f), loss(rows), z(rows), dlogits(rows * ld);
  const std::vector<int32_t> targets = {1, 7, 49};
  Recorder r;
  cross_entropy<float>(kCpu, logits.data(), targets.data(), rows, vocab, ld, loss.data(), z.data(), dlogits.data(),
                       1e-4, 1.0);
  const Launch& l = only(r, "CrossEntropy");
  // The real logits and the targets read; loss and z; every column of the gradient rows written.
  EXPECT_EQ(l.traffic.bytes, 4.0 * rows * vocab + 4.0 * rows + 4.0 * 2 * rows + 4.0 * rows * ld);
  // Per logit: max, - m, exp, the sum, the gradient's multiply; per row: log, + m, the loss,
  // the coefficient grad_scale (1 + 2 c z) / sum (4), the target's - grad_scale.
  EXPECT_EQ(l.traffic.flops, 5.0 * rows * vocab + 8.0 * rows);
}

TEST(Traffic, AdamWWithAndWithoutMasterWeights) {
  const int64_t n = 2500;
  AdamWStep step{1e-3, 0.9, 0.95, 1e-8, 1e-4, 1, 1.0};
  {
    std::vector<tile::bf16> p(n), g(n);
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    Recorder r;
    adamw_update<tile::bf16>(kCpu, p.data(), g.data(), m.data(), v.data(), n, step);
    const Launch& l = only(r, "AdamW");
    // g read (bf16); m and v read and written (float); p read and written (bf16).
    EXPECT_EQ(l.traffic.bytes, 2.0 * n + 4.0 * 4 * n + 2.0 * 2 * n);
    // scale g; m: 2 multiplies, an add; v: 3 multiplies, an add; the decay; m bc1, v bc2, sqrt,
    // + eps, the division, * lr, the subtraction.
    EXPECT_EQ(l.traffic.flops, 16.0 * n);
  }
  {
    std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f), master(n, 0.0f);
    Recorder r;
    adamw_update<float>(kCpu, p.data(), g.data(), m.data(), v.data(), n, step, master.data());
    // g; m, v and the master copy read and written; p written only.
    EXPECT_EQ(only(r, "AdamW").traffic.bytes, 4.0 * n + 4.0 * 6 * n + 4.0 * n);
  }
}

TEST(Traffic, RopeBothLayouts) {
  const int64_t tokens = 6, seq = 4, heads = 2, d_head = 8, stride = 3 * heads * d_head;
  std::vector<float> x(tokens * stride, 0.2f), cos(seq * d_head / 2, 1.0f), sin(seq * d_head / 2, 0.0f);
  {
    Recorder r;  // rotate-half, the whole head
    rope_apply<float>(kCpu, x.data(), tokens, seq, heads, d_head, stride, cos.data(), sin.data(), RopeLayout::kHalf,
                      false);
    const Launch& l = only(r, "RopeHalf");
    // The rotated elements read and written; cos and sin of 4 angles at the 4 positions.
    EXPECT_EQ(l.traffic.bytes, 4.0 * 2 * tokens * heads * d_head + 4.0 * 2 * seq * (d_head / 2));
    EXPECT_EQ(l.traffic.flops, 6.0 * tokens * heads * (d_head / 2));  // 4 multiplies, 2 adds a pair
  }
  {
    Recorder r;  // interleaved, partial: 4 of 8 rotated, all 8 loaded and stored
    rope_apply<float>(kCpu, x.data(), tokens, seq, heads, d_head, stride, cos.data(), sin.data(),
                      RopeLayout::kInterleaved, true, 4);
    const Launch& l = only(r, "RopeInterleaved");
    EXPECT_EQ(l.traffic.bytes, 4.0 * 2 * tokens * heads * d_head + 4.0 * 2 * seq * 2);
    EXPECT_EQ(l.traffic.flops, 6.0 * tokens * heads * 2);
  }
}

TEST(Traffic, ActivationsPlainAndGated) {
  const int64_t n = 2000;
  std::vector<float> x(n, 0.3f), y(n), dy(n, 1.0f);
  {
    Recorder r;
    activation_forward<float>(kCpu, Activation::kSilu, x.data(), y.data(), n);
    const Launch& l = only(r, "ActivationForward");
    EXPECT_EQ(l.traffic.bytes, 4.0 * 2 * n);
    EXPECT_EQ(l.traffic.flops, 4.0 * n);  // x / (1 + exp(-x)): exp, add, division, multiply
  }
  {
    Recorder r;
    activation_backward<float>(kCpu, Activation::kRelu, x.data(), dy.data(), y.data(), n);
    const Launch& l = only(r, "ActivationBackward");
    EXPECT_EQ(l.traffic.bytes, 4.0 * 3 * n);
    EXPECT_EQ(l.traffic.flops, 2.0 * n);  // the step's select, * dy
  }
  {
    const int64_t rows = 3, d_ff = 40;
    std::vector<float> gu(rows * 2 * d_ff, 0.3f), h(rows * d_ff);
    Recorder r;
    glu_forward<float>(kCpu, Activation::kGelu, gu.data(), h.data(), rows, d_ff);
    const Launch& l = only(r, "GluForward");
    EXPECT_EQ(l.traffic.bytes, 4.0 * 3 * rows * d_ff);  // gate and up read, h written
    // x Phi(x) = x 0.5 erfc(-x / sqrt 2) (4), * up
    EXPECT_EQ(l.traffic.flops, 5.0 * rows * d_ff);
  }
}

TEST(Traffic, OnlyOutermostLaunchesAreReported) {
  const int64_t n = 100;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), out(n);
  Recorder r;
  {
    tile::KernelScope outer(kCpu, "outer");
    add<float>(kCpu, a.data(), b.data(), out.data(), n);  // belongs to "outer"
  }
  ASSERT_EQ(r.launches.size(), 1u);
  EXPECT_EQ(r.launches[0].name, "outer");
  EXPECT_LT(r.launches[0].traffic.bytes, 0);  // the scope declared nothing
  tile::parallel_for(4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) add<float>(kCpu, a.data(), b.data(), out.data(), n);
  });
  EXPECT_EQ(r.launches.size(), 1u);  // concurrent tasks: nothing of theirs is reported
  EXPECT_EQ(r.begun(), 1);
  add<float>(kCpu, a.data(), b.data(), out.data(), n);  // outermost again
  ASSERT_EQ(r.launches.size(), 2u);
  EXPECT_EQ(r.launches[1].traffic.flops, 1.0 * n);
}

}  // namespace
}  // namespace traffic_test
}  // namespace bench::kernels
