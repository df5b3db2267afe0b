// Tests of kernels/rope.h: both pair layouts against the float64 reference on every target
// (kernel_test_util.h), heads inside a wider row (fused qkv), positions wrapping at seq,
// heads wider than one tile; inverse(forward(x)) = x; the backward (the inverse rotation) against
// central differences in double.
#include "rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers
using tile::bf16;

struct RopeCase {
  int64_t tokens;
  int64_t seq;
  int64_t n_heads;
  int64_t d_head;
  int64_t row_stride;
  RopeLayout layout;
  Target target;
};
std::string case_name(const RopeCase& c) {
  return std::string(c.layout == RopeLayout::kHalf ? "half" : "interleaved") + "_t" + std::to_string(c.tokens) + "_s" +
         std::to_string(c.seq) + "_h" + std::to_string(c.n_heads) + "_d" + std::to_string(c.d_head) + "_stride" +
         std::to_string(c.row_stride) + "_" + c.target.name;
}
void PrintTo(const RopeCase& c, std::ostream* os) { *os << case_name(c); }

/// cos/sin tables [seq, d/2] of the usual frequencies base^(-2i/d).
void tables(int64_t seq, int64_t d, std::vector<double>& cos, std::vector<double>& sin) {
  const int64_t half = d / 2;
  cos.resize(static_cast<size_t>(seq * half));
  sin.resize(cos.size());
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(t) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      cos[t * half + i] = std::cos(angle);
      sin[t * half + i] = std::sin(angle);
    }
}

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, MatchesFloat64Reference) {
  const RopeCase p = GetParam();
  const Target& t = p.target;
  const Exec exec = t.exec();
  std::vector<double> cos, sin;
  tables(p.seq, p.d_head, cos, sin);
  const auto x = random_vector(static_cast<size_t>(p.tokens * p.row_stride), 1);
  for (bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    auto ref = x;
    rope_reference(ref, p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos, sin, p.layout, inverse);

    Dev<float> xf(t, to_storage<float>(x)), cf(t, to_storage<float>(cos)), sf(t, to_storage<float>(sin));
    rope_apply<float>(exec, xf.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                      inverse);
    // Elements beyond the heads (the rest of a fused row) are copied through by the reference
    // and must be left untouched by the kernel: the tight tolerance checks that too.
    EXPECT_TRUE(all_near(to_double(xf.host()), ref, 1e-6, 1e-6));

    if (t.float64()) {
      Dev<double> xd(t, x), cd(t, cos), sd(t, sin);
      rope_apply<double>(exec, xd.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cd.get(), sd.get(),
                         p.layout, inverse);
      EXPECT_TRUE(all_near(xd.host(), ref, 1e-14, 1e-14));
    }

    const auto xb0 = to_storage<bf16>(x);
    auto refb = to_double(xb0);
    rope_reference(refb, p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos, sin, p.layout, inverse);
    Dev<bf16> xb(t, xb0);
    rope_apply<bf16>(exec, xb.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                     inverse);
    EXPECT_TRUE(all_near(to_double(xb.host()), refb, 1e-6, 0.005));
  }
}

TEST_P(RopeTest, InverseUndoesForward) {
  const RopeCase p = GetParam();
  const Target& t = p.target;
  std::vector<double> cos, sin;
  tables(p.seq, p.d_head, cos, sin);
  const auto x = to_double(to_storage<float>(random_vector(static_cast<size_t>(p.tokens * p.row_stride), 2)));
  Dev<float> y(t, to_storage<float>(x)), cf(t, to_storage<float>(cos)), sf(t, to_storage<float>(sin));
  rope_apply<float>(t.exec(), y.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                    false);
  rope_apply<float>(t.exec(), y.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                    true);
  EXPECT_TRUE(all_near(to_double(y.host()), x, 1e-6, 1e-6));  // in float: the tables are rounded too
  if (!t.float64()) return;
  Dev<double> yd(t, x), cd(t, cos), sd(t, sin);
  rope_apply<double>(t.exec(), yd.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cd.get(), sd.get(),
                     p.layout, false);
  rope_apply<double>(t.exec(), yd.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cd.get(), sd.get(),
                     p.layout, true);
  EXPECT_TRUE(all_near(yd.host(), x, 1e-14, 1e-13));
}

TEST_P(RopeTest, BackwardMatchesFiniteDifferences) {
  const RopeCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  const Exec exec = p.target.exec();
  std::vector<double> cos, sin;
  tables(p.seq, p.d_head, cos, sin);
  const auto x = random_vector(static_cast<size_t>(p.tokens * p.row_stride), 3);
  const auto w = random_vector(x.size(), 4);
  auto loss = [&](const std::vector<double>& v) {  // L = sum(rope(x) * w)
    auto y = v;
    rope_apply<double>(exec, y.data(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos.data(), sin.data(),
                       p.layout, false);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * w[i];
    return l;
  };
  auto dx = w;  // backward: dL/dx = rope^T w = the inverse rotation of w
  rope_apply<double>(exec, dx.data(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos.data(), sin.data(),
                     p.layout, true);
  for (size_t i : sample_indices(x.size(), 60)) ASSERT_NEAR(dx[i], central_difference(loss, x, i), 1e-7) << "at " << i;
}

std::vector<RopeCase> cases() {
  std::vector<RopeCase> out;
  for (const Target& be : targets())
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      out.push_back({6, 4, 1, 2, 2, layout, be});            // the smallest head
      out.push_back({10, 3, 2, 6, 20, layout, be});          // heads inside a wider row; t = r % seq wraps
      out.push_back({9, 9, 3, 64, 5 * 64, layout, be});      // q heads of a fused qkv row (H=3, Hkv=1)
      out.push_back({5, 5, 12, 128, 12 * 128, layout, be});  // a row of 1536 elements: chunked
      out.push_back({4, 2, 2, 2100, 4200, layout, be});      // half of a head wider than a tile
      out.push_back({4, 4, 12, 64, 12 * 64, layout, be});    // a row of 768: the 768-wide tile
      out.push_back({3, 3, 7, 22, 7 * 22 + 3, layout, be});  // rows of 157: unaligned 16-byte runs
      out.push_back({3, 2, 1, 1536, 1536, layout, be});      // half a head of 768
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, RopeTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return case_name(tp.param); });

}  // namespace
}  // namespace bench::kernels
