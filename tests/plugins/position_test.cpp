// The position family in closed form: RoPE's relative-offset property, norm preservation and
// inverse (both layouts, whole heads and partial rotary); partial rotary's rotated slice against
// the rotation written out, the rest of each head untouched; each scaling's frequency table
// against its published formula, computed
// here independently and read back from the component's rotation; the sinusoidal table's values;
// the absolute encodings' forward and backward against float64 references on both host
// executors; configuration errors at the key's location; and evaluation at twice the trained
// length (learned: NaN, the others finite).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "experiment/resolve.h"
#include "runners/registry.h"
#include "support/component_rig.h"
#include "support/errors.h"

namespace bench {
namespace position_test {
namespace {

std::string model_toml(const std::string& position, int64_t d_model, int64_t n_heads, int64_t seq_len,
                       int64_t batch = 1, const std::string& extra = "") {
  return "[model]\nd_model = " + std::to_string(d_model) + "\nn_heads = " + std::to_string(n_heads) +
         "\nn_layers = 1\nseq_len = " + std::to_string(seq_len) + "\nbatch_size = " + std::to_string(batch) +
         "\ndtype = \"float64\"\n" + extra + "position = " + position +
         "\n[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";
}

/// The position component of an experiment, validated and set up on its own (scope "pos").
struct Solo {
  explicit Solo(const std::string& toml)
      : rc(test::resolve_first(toml)), rig(rc.model, test::ComponentRig::Options().in("pos")) {
    validate_case(rc, test::builtin_registry());
    owner = rig.build<Position>(Slot::kPosition);
    pos = owner.get();
  }
  ResolvedCase rc;
  test::ComponentRig rig;
  std::unique_ptr<Position> owner;
  Position* pos = nullptr;
  const ModelDims& dims() const { return rc.model.dims; }
};

std::unique_ptr<Solo> solo(const std::string& toml) { return std::make_unique<Solo>(toml); }

// ---------------------------------------------------------------------------------------------
// RoPE: rotations
// ---------------------------------------------------------------------------------------------

/// q/k rows of one sequence: n_heads query heads then n_kv key heads per row, as a fused buffer.
struct Qk {
  int64_t seq, n_heads, n_kv, d_head;
  std::vector<double> data;
  Qk(int64_t s, int64_t h, int64_t kv, int64_t d)
      : seq(s), n_heads(h), n_kv(kv), d_head(d), data(static_cast<size_t>(s * (h + kv) * d), 0.0) {}
  int64_t stride() const { return (n_heads + n_kv) * d_head; }
  double* q(int64_t t, int64_t h) { return &data[static_cast<size_t>(t * stride() + h * d_head)]; }
  double* k(int64_t t, int64_t h) { return &data[static_cast<size_t>(t * stride() + (n_heads + h) * d_head)]; }
  QkView view() {
    QkView v;
    v.buffer = Tensor(data.data(), DType::kFloat64, {seq, stride()});
    v.batch = 1;
    v.seq = seq;
    v.n_heads = n_heads;
    v.n_kv_heads = n_kv;
    v.d_head = d_head;
    v.row_stride = stride();
    v.q_offset = 0;
    v.k_offset = n_heads * d_head;
    return v;
  }
};

std::vector<double> random_head(int64_t d, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(d));
  for (double& x : v) x = rng.normal();
  return v;
}

double dot(const double* a, const double* b, int64_t d) {
  double s = 0;
  for (int64_t i = 0; i < d; ++i) s += a[i] * b[i];
  return s;
}

class RopeRotation : public ::testing::TestWithParam<std::string> {};

// q at t, k at u: the score after rotation is a function of t - u only (Su et al. 2021, eq. 11).
TEST_P(RopeRotation, ScoreDependsOnlyOnTheOffset) {
  const int64_t seq = 40, d = 8;
  auto s = solo(model_toml(GetParam(), 16, 2, seq, 1, "n_kv_heads = 1\n"));
  RunContext ctx;
  const auto qv = random_head(d, 1), kv = random_head(d, 2);
  auto score = [&](int64_t t, int64_t u) {
    Qk qk(seq, 2, 1, d);
    std::copy(qv.begin(), qv.end(), qk.q(t, 1));
    std::copy(kv.begin(), kv.end(), qk.k(u, 0));
    s->pos->rotate_forward(qk.view(), ctx);
    return dot(qk.q(t, 1), qk.k(u, 0), d);
  };
  int distinct = 0;
  for (auto [t, u] : {std::pair{3, 1}, std::pair{7, 7}, std::pair{9, 2}, std::pair{5, 0}}) {
    const double ref = score(t, u);
    for (int64_t shift : {1, 6, 25}) EXPECT_NEAR(score(t + shift, u + shift), ref, 1e-12) << t << " " << u;
    if (std::abs(ref - dot(qv.data(), kv.data(), d)) > 1e-3) ++distinct;
  }
  EXPECT_GE(distinct, 3);  // and the offset does change the score
}

TEST_P(RopeRotation, KeepsNormsAndItsInverseUndoesIt) {
  const int64_t seq = 24, d = 8;
  auto s = solo(model_toml(GetParam(), 16, 2, seq));
  RunContext ctx;
  Qk qk(seq, 2, 2, d);
  Rng rng(3);
  for (double& x : qk.data) x = rng.normal();
  const std::vector<double> before = qk.data;
  s->pos->rotate_forward(qk.view(), ctx);
  double moved = 0;
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t h = 0; h < 4; ++h) {
      const size_t off = static_cast<size_t>(t * qk.stride() + h * d);
      EXPECT_NEAR(dot(&qk.data[off], &qk.data[off], d), dot(&before[off], &before[off], d), 1e-12);
      for (int64_t i = 0; i < d; ++i) moved = std::max(moved, std::abs(qk.data[off + i] - before[off + i]));
    }
  EXPECT_GT(moved, 0.1);
  s->pos->rotate_backward(qk.view(), ctx);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(qk.data[i], before[i], 1e-13);
}

INSTANTIATE_TEST_SUITE_P(Position, RopeRotation,
                         ::testing::Values("{ type = \"rope\" }", "{ type = \"rope\", layout = \"interleaved\" }",
                                           "{ type = \"rope\", scaling = \"yarn\", factor = 4, "
                                           "original_max_position = 8 }",
                                           "{ type = \"rope\", layout = \"interleaved\", scaling = \"llama3\", "
                                           "factor = 8, original_max_position = 16, base = 500.0 }",
                                           "{ type = \"rope\", rotary_fraction = 0.5 }",
                                           "{ type = \"rope\", layout = \"interleaved\", rotary_fraction = 0.5 }",
                                           "{ type = \"rope\", rotary_fraction = 0.5, scaling = \"yarn\", factor = 4, "
                                           "original_max_position = 8 }"),
                         [](const auto& tp) { return "case" + std::to_string(tp.index); });

// Partial rotary (GPT-NeoX's rotary_pct): r = int(fraction * d_head) features turn, pairs (i, i + r/2)
// or (2i, 2i + 1) within them, by t base^(-2i/r); the other features come back bit for bit.
TEST(RopePartial, TurnsTheFirstFeaturesAtTheirOwnFrequencies) {
  struct Case {
    double fraction;
    int64_t d_head, r;
  };
  for (const Case& c : {Case{0.25, 24, 6}, Case{0.25, 32, 8}, Case{0.34, 24, 8}, Case{0.4, 10, 4}})
    for (const char* layout : {"half", "interleaved"}) {
      SCOPED_TRACE(std::to_string(c.fraction) + " of " + std::to_string(c.d_head) + ", " + layout);
      const int64_t seq = 7, t = 5;
      const std::string position = "{ type = \"rope\", base = 100.0, layout = \"" + std::string(layout) +
                                   "\", rotary_fraction = " + std::to_string(c.fraction) + " }";
      auto s = solo(model_toml(position, 2 * c.d_head, 2, seq));
      Qk qk(seq, 2, 2, c.d_head);
      Rng rng(8);
      for (double& x : qk.data) x = rng.normal();
      const std::vector<double> before = qk.data;
      RunContext ctx;
      s->pos->rotate_forward(qk.view(), ctx);
      const bool half = std::string(layout) == "half";
      double max_err = 0;
      for (int64_t h = 0; h < 4; ++h) {
        const size_t off = static_cast<size_t>(t * qk.stride() + h * c.d_head);
        for (int64_t i = 0; i < c.r / 2; ++i) {
          const size_t ia = off + static_cast<size_t>(half ? i : 2 * i);
          const size_t ib = off + static_cast<size_t>(half ? i + c.r / 2 : 2 * i + 1);
          const double angle = static_cast<double>(t) * std::pow(100.0, -2.0 * static_cast<double>(i) / c.r);
          const double a = before[ia], b = before[ib];
          max_err = std::max(max_err, std::abs(qk.data[ia] - (a * std::cos(angle) - b * std::sin(angle))));
          max_err = std::max(max_err, std::abs(qk.data[ib] - (a * std::sin(angle) + b * std::cos(angle))));
        }
        for (int64_t e = c.r; e < c.d_head; ++e)
          ASSERT_EQ(qk.data[off + static_cast<size_t>(e)], before[off + static_cast<size_t>(e)]) << "feature " << e;
      }
      EXPECT_LE(max_err, 1e-14);
      RecordProperty("max_abs_error", ::testing::PrintToString(max_err));
    }
}

// ---------------------------------------------------------------------------------------------
// RoPE: frequency tables of the scalings
// ---------------------------------------------------------------------------------------------

/// The component's frequencies, read back from how far it turns each pair from position 0 to 1
/// (every angle is below pi), and its logit multiplier.
struct Table {
  std::vector<double> inv_freq;
  double logit_scale;
};

Table table_of(const std::string& position, int64_t d_head, int64_t seq_len) {
  auto s = solo(model_toml(position, d_head, 1, seq_len));
  Qk qk(seq_len, 1, 1, d_head);
  const bool interleaved = position.find("interleaved") != std::string::npos;
  const int64_t half = d_head / 2;
  for (int64_t i = 0; i < half; ++i) qk.q(1, 0)[interleaved ? 2 * i : i] = 1.0;
  RunContext ctx;
  s->pos->rotate_forward(qk.view(), ctx);
  Table out{{}, s->pos->attention_scale()};
  for (int64_t i = 0; i < half; ++i) {
    const double a = qk.q(1, 0)[interleaved ? 2 * i : i];
    const double b = qk.q(1, 0)[interleaved ? 2 * i + 1 : i + half];
    out.inv_freq.push_back(std::atan2(b, a));
  }
  return out;
}

/// The unscaled frequencies, base^(-2i/d).
std::vector<double> rope_theta(double base, int64_t d) {
  std::vector<double> f;
  for (int64_t i = 0; i < d / 2; ++i) f.push_back(1.0 / std::pow(base, static_cast<double>(2 * i) / d));
  return f;
}

void expect_table(const Table& got, const std::vector<double>& want, double scale = 1.0) {
  ASSERT_EQ(got.inv_freq.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.inv_freq[i], want[i], 1e-13 * want[i]) << "pair " << i;
  EXPECT_NEAR(got.logit_scale, scale, 1e-14);
}

std::string rope(const std::string& keys) { return "{ type = \"rope\", " + keys + " }"; }

TEST(RopeScaling, NoneIsBaseToTheMinusTwoIOverD) {
  expect_table(table_of("{ type = \"rope\" }", 16, 8), rope_theta(10000, 16));
  expect_table(table_of(rope("base = 500.0, layout = \"interleaved\""), 16, 8), rope_theta(500, 16));
}

TEST(RopeScaling, LinearDividesEveryFrequencyByTheFactor) {
  std::vector<double> want = rope_theta(10000, 16);
  for (double& f : want) f /= 4;  // position t reads as t / 4 (Chen et al. 2023)
  expect_table(table_of(rope("scaling = \"linear\", factor = 4, original_max_position = 16"), 16, 64), want);
  // Up to L_orig a model trained with plain RoPE stays plain (apply = "beyond_original") ...
  expect_table(table_of(rope("scaling = \"linear\", factor = 4, original_max_position = 64"), 16, 64),
               rope_theta(10000, 16));
  // ... unless the scaling applies at every length.
  expect_table(
      table_of(rope("scaling = \"linear\", factor = 4, original_max_position = 64, apply = \"always\""), 16, 64), want);
}

TEST(RopeScaling, NtkRaisesTheBase) {
  const double d = 16, s = 4;
  expect_table(table_of(rope("scaling = \"ntk\", factor = 4, original_max_position = 16"), 16, 32),
               rope_theta(10000 * std::pow(s, d / (d - 2)), 16));
  // The highest frequency is kept; the lowest, (base s^(d/(d-2)))^(-(d-2)/d), is divided by s.
  const Table t = table_of(rope("scaling = \"ntk\", factor = 4, original_max_position = 16"), 16, 32);
  EXPECT_EQ(t.inv_freq[0], 1.0);
  EXPECT_NEAR(t.inv_freq[7], rope_theta(10000, 16)[7] / s, 1e-13 * t.inv_freq[7]);
}

TEST(RopeScaling, DynamicNtkScalesTheBaseOnlyBeyondTheOriginalLength) {
  const double d = 16, s = 2;
  const std::string cfg = rope("scaling = \"dynamic_ntk\", factor = 2, original_max_position = 32");
  expect_table(table_of(cfg, 16, 16), rope_theta(10000, 16));  // L < L_orig
  expect_table(table_of(cfg, 16, 32), rope_theta(10000, 16));  // L = L_orig
  // The formula itself leaves L <= L_orig unchanged, also when the scaling applies at every length.
  const std::string always = cfg.substr(0, cfg.size() - 2) + ", apply = \"always\" }";
  expect_table(table_of(always, 16, 16), rope_theta(10000, 16));
  // L = 3 L_orig: base (s L / L_orig - (s - 1))^(d/(d-2)) = base 5^(8/7)
  expect_table(table_of(cfg, 16, 96), rope_theta(10000 * std::pow(s * 3 - (s - 1), d / (d - 2)), 16));
}

TEST(RopeScaling, YarnRampsFromExtrapolationToInterpolation) {
  // d = 16, base 1e4, L_orig = 1024: pair i turns L_orig / (2 pi 1e4^(i/8)) times over L_orig.
  // 32 turns at i = 1.41 and 1 turn at i = 4.42: pairs 0-1 keep their frequency, 5-7 are
  // interpolated (divided by s), 2-4 lie on the ramp (i - 1) / (5 - 1) (floor and ceil, as the
  // paper's code).
  const double s = 4, len = 1024, d = 16;
  auto pair_at = [&](double turns) { return d * std::log(len / (2 * std::numbers::pi * turns)) / (2 * std::log(1e4)); };
  ASSERT_EQ(std::floor(pair_at(32)), 1);
  ASSERT_EQ(std::ceil(pair_at(1)), 5);
  const std::vector<double> theta = rope_theta(10000, 16);
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) {
    const double ramp = std::clamp((i - 1.0) / 4.0, 0.0, 1.0);
    want.push_back(ramp * theta[static_cast<size_t>(i)] / s + (1 - ramp) * theta[static_cast<size_t>(i)]);
  }
  const double mscale = 0.1 * std::log(s) + 1;  // sqrt(1/t) of the paper; logits get 1/t
  const Table t = table_of(rope("scaling = \"yarn\", factor = 4, original_max_position = 1024"), 16, 2048);
  expect_table(t, want, mscale * mscale);
  EXPECT_EQ(t.inv_freq[0], theta[0]);
  EXPECT_NEAR(t.inv_freq[1], theta[1], 1e-16);
  for (int i = 5; i < 8; ++i) EXPECT_NEAR(t.inv_freq[i], theta[i] / s, 1e-13 * theta[i]);
  // Other betas move the ramp's ends: beta_fast 7 turns at i = 2.73 (floor 2, not the nearest
  // 3); beta_fast 4 and beta_slow 2 at i = 3.22 and 3.92 -> [3, 4], a one-pair step.
  for (auto [fast, slow, lo, hi] : {std::tuple{7.0, 1.0, 2, 5}, std::tuple{4.0, 2.0, 3, 4}}) {
    ASSERT_EQ(std::floor(pair_at(fast)), lo);
    ASSERT_EQ(std::ceil(pair_at(slow)), hi);
    const Table other = table_of(rope("scaling = \"yarn\", factor = 4, original_max_position = 1024, beta_fast = " +
                                      std::to_string(fast) + ", beta_slow = " + std::to_string(slow)),
                                 16, 2048);
    for (int i = 0; i < 8; ++i) {
      const double ramp = std::clamp((i - lo) / double(hi - lo), 0.0, 1.0);
      EXPECT_NEAR(other.inv_freq[i], ramp * theta[i] / s + (1 - ramp) * theta[i], 1e-13 * theta[i]) << fast << " " << i;
    }
  }
}

TEST(RopeScaling, Llama3KeepsHighDividesLowAndBlendsTheMiddle) {
  // L_orig = 1024, low_freq_factor 1, high_freq_factor 4: wavelengths 2 pi 1e4^(i/8) below 256
  // are kept (pairs 0-3: 6.3 ... 199), above 1024 divided by 8 (pairs 5-7), pair 4 (628) blended.
  const double s = 8, len = 1024;
  const std::vector<double> theta = rope_theta(10000, 16);
  std::vector<double> want;
  for (double f : theta) {
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength < len / 4) {
      want.push_back(f);
    } else if (wavelength > len / 1) {
      want.push_back(f / s);
    } else {
      const double smooth = (len / wavelength - 1) / (4 - 1);
      want.push_back((1 - smooth) * f / s + smooth * f);
    }
  }
  const Table t = table_of(rope("scaling = \"llama3\", factor = 8, original_max_position = 1024"), 16, 2048);
  expect_table(t, want);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(t.inv_freq[i], theta[i], 1e-13 * theta[i]);
  for (int i = 5; i < 8; ++i) EXPECT_NEAR(t.inv_freq[i], theta[i] / s, 1e-13 * theta[i]);
  EXPECT_GT(t.inv_freq[4], theta[4] / s);
  EXPECT_LT(t.inv_freq[4], theta[4]);
}

TEST(RopeScaling, LongRopeDividesEachPairByItsFactor) {
  const std::vector<double> lf = {1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0};
  const std::vector<double> sf = {1.0, 1.0, 1.0, 1.0, 1.1, 1.2, 1.3, 1.4};
  const std::string cfg = rope(
      "scaling = \"longrope\", factor = 8, original_max_position = 64, "
      "long_factors = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0], short_factors = [1, 1, 1, 1, 1.1, 1.2, 1.3, 1.4]");
  const std::vector<double> theta = rope_theta(10000, 16);
  std::vector<double> want_long, want_short;
  for (size_t i = 0; i < 8; ++i) {
    want_long.push_back(theta[i] / lf[i]);
    want_short.push_back(theta[i] / sf[i]);
  }
  // Beyond L_orig: long factors and the attention factor sqrt(1 + ln s / ln L_orig) on q and k.
  expect_table(table_of(cfg, 16, 128), want_long, 1 + std::log(8.0) / std::log(64.0));
  // Within L_orig: short factors, no attention factor (unless apply = "always").
  expect_table(table_of(cfg, 16, 64), want_short, 1.0);
  const std::string always = cfg.substr(0, cfg.size() - 2) + ", apply = \"always\" }";
  expect_table(table_of(always, 16, 64), want_short, 1 + std::log(8.0) / std::log(64.0));
}

// ---------------------------------------------------------------------------------------------
// Absolute encodings
// ---------------------------------------------------------------------------------------------

TEST(Sinusoidal, TableIsSinAndCosOfTOverBasePowers) {
  const int64_t seq = 12, d = 10, batch = 2;
  for (auto backend : {tile::Backend::kCpu, tile::Backend::kEmulated}) {
    auto s = solo(model_toml("\"sinusoidal\"", d, 2, seq, batch));
    std::vector<double> h(static_cast<size_t>(batch * seq * d), 0.5);
    Tensor ht(h.data(), DType::kFloat64, {batch * seq, d});
    RunContext ctx;
    ctx.exec.backend = backend;
    s->pos->embed_forward(ht, ctx);
    auto pe = [&](int64_t b, int64_t t, int64_t j) { return h[static_cast<size_t>((b * seq + t) * d + j)] - 0.5; };
    for (int64_t b = 0; b < batch; ++b) {
      EXPECT_NEAR(pe(b, 0, 0), 0.0, 1e-15);  // sin 0
      EXPECT_NEAR(pe(b, 0, 1), 1.0, 1e-15);  // cos 0
      EXPECT_NEAR(pe(b, 1, 0), std::sin(1.0), 1e-15);
      EXPECT_NEAR(pe(b, 1, 1), std::cos(1.0), 1e-15);
      EXPECT_NEAR(pe(b, 7, 2), std::sin(7 / std::pow(10000.0, 2.0 / 10)), 1e-15);    // i = 1
      EXPECT_NEAR(pe(b, 11, 9), std::cos(11 / std::pow(10000.0, 8.0 / 10)), 1e-15);  // i = 4
      EXPECT_NEAR(pe(b, 5, 6), std::sin(5 / std::pow(10000.0, 0.6)), 1e-15);
    }
  }
  auto scaled = solo(model_toml("{ type = \"sinusoidal\", scale = 0.25, base = 100.0 }", 4, 2, 4));
  std::vector<double> h(16, 0.0);
  Tensor ht(h.data(), DType::kFloat64, {4, 4});
  RunContext ctx;
  scaled->pos->embed_forward(ht, ctx);
  EXPECT_NEAR(h[3 * 4 + 3], 0.25 * std::cos(3 / std::pow(100.0, 0.5)), 1e-15);
}

TEST(Learned, AddsItsRowsAndSumsTheBatchIntoItsGradient) {
  const int64_t seq = 5, d = 40, batch = 3;
  for (auto backend : {tile::Backend::kCpu, tile::Backend::kEmulated}) {
    auto s = solo(model_toml("\"learned\"", d, 2, seq, batch));
    ASSERT_EQ(s->rig.params().size(), 1u);
    Param& w = s->rig.params().front();
    EXPECT_EQ(w.name, "pos.weight");
    EXPECT_EQ(w.group, ParamGroup::kEmbedding);
    EXPECT_TRUE(w.shape == Shape({seq, d}));
    Rng rng(9);
    double* wv = w.value.data<double>();
    double* wg = w.grad.data<double>();
    for (int64_t i = 0; i < seq * d; ++i) {
      wv[i] = rng.normal();
      wg[i] = 0.25;  // backward adds to what is there
    }
    std::vector<double> h(static_cast<size_t>(batch * seq * d)), dh(h.size());
    for (double& x : h) x = rng.normal();
    for (double& x : dh) x = rng.normal();
    const std::vector<double> h0 = h;
    Tensor ht(h.data(), DType::kFloat64, {batch * seq, d});
    RunContext ctx;
    ctx.exec.backend = backend;
    s->pos->embed_forward(ht, ctx);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t j = 0; j < d; ++j) {
          const size_t r = static_cast<size_t>((b * seq + t) * d + j);
          EXPECT_EQ(h[r], h0[r] + wv[t * d + j]);
        }
    s->pos->embed_backward(Tensor(dh.data(), DType::kFloat64, {batch * seq, d}), ctx);
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t j = 0; j < d; ++j) {
        double want = 0.25;
        for (int64_t b = 0; b < batch; ++b) want += dh[static_cast<size_t>((b * seq + t) * d + j)];
        EXPECT_NEAR(wg[t * d + j], want, 1e-14);
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration errors point at the key
// ---------------------------------------------------------------------------------------------

std::string config_error(const std::string& position, int64_t d_model = 16, int64_t n_heads = 2) {
  const auto e = test::config_error_of(
      [&] { validate_case(test::resolve_first(model_toml(position, d_model, n_heads, 8)), test::builtin_registry()); });
  return e ? e->what() : "no error";
}

// model_toml puts `position = ...` on line 8 of exp.toml; an error names the key's place.
void expect_error_at(const std::string& position, const std::string& key, const std::string& text,
                     int64_t d_model = 16) {
  const std::string line = "position = " + position;
  const size_t col = line.find(key + " = ") + 1;  // 1-based column of the key
  const std::string err = config_error(position, d_model);
  EXPECT_NE(err.find("exp.toml:8:" + std::to_string(col) + ":"), std::string::npos) << err;
  EXPECT_NE(err.find(text), std::string::npos) << err;
}

TEST(PositionConfig, ErrorsNameTheKey) {
  expect_error_at(rope("scaling = \"linear\", factor = 0.5"), "factor",
                  "'factor' of position 'rope' (model.position) must be >= 1");
  expect_error_at(rope("scaling = \"yarn\", factor = 2, beta_fast = 1.0"), "beta_fast", "beta_fast > beta_slow");
  expect_error_at(rope("scaling = \"llama3\", factor = 2, high_freq_factor = 0.5"), "high_freq_factor",
                  "high_freq_factor > low_freq_factor");
  expect_error_at(rope("scaling = \"longrope\", long_factors = [1.0, 2.0]"), "long_factors",
                  "long_factors has 2 values; d_head / 2 = 4 are needed");
  expect_error_at(rope("scaling = \"longrope\", long_factors = [1, 2, 3, 4], short_factors = [1.0]"), "short_factors",
                  "short_factors has 1 values");
  expect_error_at(rope("scaling = \"longrope\", long_factors = [1, 2, 0, 4]"), "long_factors", "must all be > 0");
  expect_error_at(rope("scaling = \"longrope\""), "scaling", "longrope needs long_factors");
  expect_error_at(rope("scaling = \"linear\", beta_fast = 8.0"), "beta_fast", "'beta_fast' has no effect");
  expect_error_at(rope("factor = 2.0"), "factor", "'factor' has no effect with scaling = \"none\"");
  expect_error_at(rope("scaling = \"ntk\", factor = 2"), "scaling", "d_head must be >= 4", 4);
  expect_error_at(rope("scaling = \"cubic\""), "scaling", "expected one of none, linear, ntk, dynamic_ntk");
  // Partial rotary: int(fraction * d_head) (d_head 8 here) must be an even number >= 2.
  expect_error_at(rope("rotary_fraction = 0.1"), "rotary_fraction", "int(0.1 * 8) = 0 rotated features");
  expect_error_at(rope("rotary_fraction = 0.4"), "rotary_fraction", "int(0.4 * 8) = 3 rotated features");
  expect_error_at(rope("rotary_fraction = 0.0"), "rotary_fraction", "rotary_fraction must be > 0");
  expect_error_at(rope("rotary_fraction = 1.5"), "rotary_fraction", "must be <= 1");
  expect_error_at(rope("rotary_fraction = 0.5, scaling = \"longrope\", long_factors = [1.0, 2.0, 3.0, 4.0]"),
                  "long_factors", "long_factors has 4 values; the rotated features (rotary_fraction * d_head) / 2 = 2");
  expect_error_at(rope("rotary_fraction = 0.25, scaling = \"ntk\", factor = 2"), "scaling",
                  "the rotated features (rotary_fraction * d_head) must be >= 4");
  EXPECT_EQ(config_error(rope("rotary_fraction = 0.5, scaling = \"longrope\", long_factors = [1.0, 2.0]")), "no error");
  EXPECT_EQ(config_error(rope("scaling = \"yarn\", factor = 2, beta_fast = 16.0, beta_slow = 2.0")), "no error");
}

// ---------------------------------------------------------------------------------------------
// Evaluation at a longer context than trained (the stability runner's eval_lengths)
// ---------------------------------------------------------------------------------------------

std::vector<Metric> train_and_eval(const std::string& position, const std::string& lengths) {
  const std::string toml =
      "[model]\nd_model = 16\nn_heads = 2\nn_layers = 1\nseq_len = 16\nbatch_size = 4\n"
      "position = " +
      position +
      "\n[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
      "[stability]\nsteps = 6\nlr = 1e-2\neval_batches = 2\neval_lengths = " +
      lengths + "\n";
  const auto cases = test::cases_of(toml);
  const ResolvedCase rc = test::resolve(cases.at(0));
  validate_case(rc, test::builtin_registry());
  DeviceInfo device;
  Progress progress(true);
  RunnerEnv env{test::builtin_registry(), device, progress, "", nullptr, "", ""};
  const CaseResult result = find_runner("stability")->run(cases.at(0), rc, env);
  EXPECT_EQ(result.status, "completed") << result.error;
  return result.metrics;
}

double metric(const std::vector<Metric>& m, const std::string& name) {
  for (const auto& x : m)
    if (x.name == name) return x.value;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

TEST(PositionLongContext, LearnedCannotMoveToTwiceTheLengthTheOthersCan) {
  const auto learned = train_and_eval("\"learned\"", "[16, 32]");
  EXPECT_EQ(metric(learned, "val_loss_at_16"), metric(learned, "final_val_loss"));  // same length: same model
  EXPECT_TRUE(std::isnan(metric(learned, "val_loss_at_32")));
  for (const char* pos :
       {"\"sinusoidal\"", "\"rope\"", "\"none\"", "{ type = \"rope\", scaling = \"yarn\", factor = 2 }",
        "{ type = \"rope\", scaling = \"linear\", factor = 2 }"}) {
    const auto m = train_and_eval(pos, "[16, 32]");
    // At the trained length a scaling is off (apply = "beyond_original"): exactly the trained model.
    EXPECT_EQ(metric(m, "val_loss_at_16"), metric(m, "final_val_loss")) << pos;
    const double at32 = metric(m, "val_loss_at_32");
    EXPECT_TRUE(std::isfinite(at32)) << pos;
    EXPECT_GT(at32, 0) << pos;
    EXPECT_LT(at32, 2 * std::log(256.0)) << pos;
  }
}

}  // namespace
}  // namespace position_test
}  // namespace bench
