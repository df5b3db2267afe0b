// Tests of kernels/rope.h: both pair layouts against the float64 reference on every target
// (kernel_test_util.h), heads inside a wider row (fused qkv), positions wrapping at seq,
// heads wider than one tile, partial rotary (the first `rot` elements of each head, the rest
// untouched); inverse(forward(x)) = x; the backward (the inverse rotation) against central
// differences in double.
#include "rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace bench::kernels {
namespace rope_test {
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
  int64_t rot = 0;  // rotated elements per head; 0: all d_head
  int64_t rotated() const { return rot > 0 ? rot : d_head; }
};
std::string case_name(const RopeCase& c) {
  return std::string(c.layout == RopeLayout::kHalf ? "half" : "interleaved") + "_t" + std::to_string(c.tokens) + "_s" +
         std::to_string(c.seq) + "_h" + std::to_string(c.n_heads) + "_d" + std::to_string(c.d_head) + "_stride" +
         std::to_string(c.row_stride) + (c.rot > 0 ? "_rot" + std::to_string(c.rot) : "") + "_" + c.target.name;
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
  tables(p.seq, p.rotated(), cos, sin);
  const auto x = random_vector(static_cast<size_t>(p.tokens * p.row_stride), 1);
  for (bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    auto ref = x;
    rope_reference(ref, p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos, sin, p.layout, inverse, p.rot);

    Dev<float> xf(t, to_storage<float>(x)), cf(t, to_storage<float>(cos)), sf(t, to_storage<float>(sin));
    rope_apply<float>(exec, xf.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                      inverse, p.rot);
    // Elements beyond the heads (the rest of a fused row) are copied through by the reference
    // and must be left untouched by the kernel: the tight tolerance checks that too.
    EXPECT_TRUE(all_near(to_double(xf.host()), ref, 1e-6, 1e-6));

    if (t.float64()) {
      Dev<double> xd(t, x), cd(t, cos), sd(t, sin);
      rope_apply<double>(exec, xd.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cd.get(), sd.get(),
                         p.layout, inverse, p.rot);
      EXPECT_TRUE(all_near(xd.host(), ref, 1e-14, 1e-14));
      RecordProperty(inverse ? "max_abs_error_double_inverse" : "max_abs_error_double",
                     ::testing::PrintToString(max_abs_diff(xd.host(), ref)));
    }

    const auto xb0 = to_storage<bf16>(x);
    auto refb = to_double(xb0);
    rope_reference(refb, p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos, sin, p.layout, inverse, p.rot);
    Dev<bf16> xb(t, xb0);
    rope_apply<bf16>(exec, xb.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                     inverse, p.rot);
    EXPECT_TRUE(all_near(to_double(xb.host()), refb, 1e-6, 0.005));
  }
}

TEST_P(RopeTest, InverseUndoesForward) {
  const RopeCase p = GetParam();
  const Target& t = p.target;
  std::vector<double> cos, sin;
  tables(p.seq, p.rotated(), cos, sin);
  const auto x = to_double(to_storage<float>(random_vector(static_cast<size_t>(p.tokens * p.row_stride), 2)));
  Dev<float> y(t, to_storage<float>(x)), cf(t, to_storage<float>(cos)), sf(t, to_storage<float>(sin));
  rope_apply<float>(t.exec(), y.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                    false, p.rot);
  rope_apply<float>(t.exec(), y.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(), p.layout,
                    true, p.rot);
  EXPECT_TRUE(all_near(to_double(y.host()), x, 1e-6, 1e-6));  // in float: the tables are rounded too
  if (!t.float64()) return;
  Dev<double> yd(t, x), cd(t, cos), sd(t, sin);
  rope_apply<double>(t.exec(), yd.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cd.get(), sd.get(),
                     p.layout, false, p.rot);
  rope_apply<double>(t.exec(), yd.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cd.get(), sd.get(),
                     p.layout, true, p.rot);
  EXPECT_TRUE(all_near(yd.host(), x, 1e-14, 1e-13));
}

TEST_P(RopeTest, BackwardMatchesFiniteDifferences) {
  const RopeCase p = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(p.target);
  const Exec exec = p.target.exec();
  std::vector<double> cos, sin;
  tables(p.seq, p.rotated(), cos, sin);
  const auto x = random_vector(static_cast<size_t>(p.tokens * p.row_stride), 3);
  const auto w = random_vector(x.size(), 4);
  auto loss = [&](const std::vector<double>& v) {  // L = sum(rope(x) * w)
    auto y = v;
    rope_apply<double>(exec, y.data(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos.data(), sin.data(),
                       p.layout, false, p.rot);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * w[i];
    return l;
  };
  auto dx = w;  // backward: dL/dx = rope^T w = the inverse rotation of w
  rope_apply<double>(exec, dx.data(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cos.data(), sin.data(),
                     p.layout, true, p.rot);
  for (size_t i : sample_indices(x.size(), 60)) ASSERT_NEAR(dx[i], central_difference(loss, x, i), 1e-7) << "at " << i;
}

// Partial rotary: every element outside the first rot of a head (and outside the heads) comes
// back bit for bit, in float and bf16, forward and inverse.
class RopePartialTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopePartialTest, LeavesTheRestOfEachHeadBitForBit) {
  const RopeCase p = GetParam();
  const Target& t = p.target;
  std::vector<double> cos, sin;
  tables(p.seq, p.rot, cos, sin);
  const auto x = random_vector(static_cast<size_t>(p.tokens * p.row_stride), 5);
  auto passes = [&](size_t i) {
    const auto col = static_cast<int64_t>(i) % p.row_stride;
    return col >= p.n_heads * p.d_head || col % p.d_head >= p.rot;
  };
  for (bool inverse : {false, true}) {
    const auto xf0 = to_storage<float>(x);
    Dev<float> xf(t, xf0), cf(t, to_storage<float>(cos)), sf(t, to_storage<float>(sin));
    rope_apply<float>(t.exec(), xf.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(),
                      p.layout, inverse, p.rot);
    const auto xb0 = to_storage<bf16>(x);
    Dev<bf16> xb(t, xb0);
    rope_apply<bf16>(t.exec(), xb.get(), p.tokens, p.seq, p.n_heads, p.d_head, p.row_stride, cf.get(), sf.get(),
                     p.layout, inverse, p.rot);
    const auto yf = xf.host();
    const auto yb = xb.host();
    size_t kept = 0, moved = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (passes(i)) {
        ASSERT_EQ(yf[i], xf0[i]) << "float element " << i;
        ASSERT_EQ(yb[i].bits, xb0[i].bits) << "bf16 element " << i;
        ++kept;
      } else {
        moved += yf[i] != xf0[i] ? 1 : 0;
      }
    }
    EXPECT_GT(kept, 0U);
    EXPECT_GT(moved, 0U);  // and the rotated slice does move (position 0 alone stays)
  }
}

TEST(Rope, RotatedElementsMustBeEvenAndWithinTheHead) {
  std::vector<float> x(16, 1.0f), cs(8, 1.0f), sn(8, 0.0f);
  for (int64_t rot : {3, 10}) {
    try {
      rope_apply<float>(Exec{}, x.data(), 2, 2, 1, 8, 8, cs.data(), sn.data(), RopeLayout::kHalf, false, rot);
      ADD_FAILURE() << "accepted rot = " << rot;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("of a head of 8"), std::string::npos) << e.what();
    }
  }
}

std::vector<RopeCase> cases() {
  std::vector<RopeCase> out;
  for (const Target& be : targets())
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      out.push_back({6, 4, 1, 2, 2, layout, be});              // the smallest head
      out.push_back({10, 3, 2, 6, 20, layout, be});            // heads inside a wider row; t = r % seq wraps
      out.push_back({9, 9, 3, 64, 5 * 64, layout, be});        // q heads of a fused qkv row (H=3, Hkv=1)
      out.push_back({5, 5, 12, 128, 12 * 128, layout, be});    // a row of 1536 elements: chunked
      out.push_back({4, 2, 2, 2100, 4200, layout, be});        // half of a head wider than a tile
      out.push_back({4, 4, 12, 64, 12 * 64, layout, be});      // a row of 768: the 768-wide tile
      out.push_back({3, 3, 7, 22, 7 * 22 + 3, layout, be});    // rows of 157: unaligned 16-byte runs
      out.push_back({3, 2, 1, 1536, 1536, layout, be});        // half a head of 768
      out.push_back({2, 2, 32, 128, 32 * 128, layout, be});    // 32 heads: 2048 pairs, one device tile
      out.push_back({2, 2, 40, 96, 40 * 96 + 8, layout, be});  // 1920 pairs: host chunks end mid-head
      // Partial rotary: the first rot elements of each head.
      out.push_back({10, 3, 2, 6, 20, layout, be, 2});           // one pair of three
      out.push_back({9, 9, 3, 64, 5 * 64, layout, be, 16});      // Pythia's quarter of a head (of 64)
      out.push_back({4, 4, 8, 96, 8 * 96 + 5, layout, be, 24});  // GPT-NeoX 20B: 24 of 96, in a wider row
      out.push_back({5, 5, 12, 128, 12 * 128, layout, be, 32});  // a chunked row of 1536
      out.push_back({3, 3, 7, 22, 7 * 22 + 3, layout, be, 6});   // unaligned runs, odd pair count
      out.push_back({4, 2, 2, 2100, 4200, layout, be, 1600});    // half of the slice wider than a tile
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, RopeTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return case_name(tp.param); });

std::vector<RopeCase> partial_cases() {
  std::vector<RopeCase> out;
  for (const RopeCase& c : cases())
    if (c.rot > 0) out.push_back(c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, RopePartialTest, ::testing::ValuesIn(partial_cases()),
                         [](const auto& tp) { return case_name(tp.param); });

}  // namespace
}  // namespace rope_test
}  // namespace bench::kernels
