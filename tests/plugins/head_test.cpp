// The `lm_head` component on its own (float64, set up in a test::ComponentRig): loss,
// z-loss and z against a float64 reference of the formula, with and without the output soft-cap
// (ignored targets included); the cap bounds the loss (<= 2c + ln V) and z (<= c + ln V) however
// large the logits, and is nearly the identity for logits much smaller than c; a tied head
// declares no matrix and reads the embedding's. The vocabulary of 16 is padded to 64: the head's
// own weight is stored with 48 zero rows, the logits are 64 wide with zero padding columns, and
// the gradients (dh, and the weight's real rows against the float64 formula) are the real
// vocabulary's while the padding rows' gradient is exactly 0; a tied embedding padded or not
// gives the same results. The token embedding's scale (Gemma's sqrt(d_model), a multiplier):
// rows and table gradient against the float64 formula, the scale rounded to bf16 in a bf16
// model, and bad values as errors at their key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "support/component_rig.h"
#include "support/errors.h"

namespace bench {
namespace head_test {
namespace {

constexpr int64_t kRows = 12, kWidth = 8, kVocab = 16;

/// One head, its weight (declared or the stand-in embedding), input h and targets.
class HeadUnderTest {
 public:
  explicit HeadUnderTest(const std::string& model_lines, int64_t embedding_pad_rows = 0)
      : rig_(test::resolve_first("[model]\ndtype = \"float64\"\nd_model = 8\nn_heads = 2\n" + model_lines +
                                 "\n[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n"
                                 "[stability]\n")
                 .model,
             test::ComponentRig::Options().in("head").with_rows(kRows).with_width(kWidth)) {
    Param& embedding = rig_.stand_in("embed.weight", {kVocab, kWidth}, embedding_pad_rows);
    rig_.set_embedding(&embedding);
    component_ = rig_.build(Slot::kHead);
    for (Param& p : rig_.params())
      if (&p != &embedding) declared_.push_back(&p);
    weight_ = declared_.empty() ? &embedding : declared_.front();
    h_ = rig_.tensor({kRows, kWidth});
    Rng rng(5);
    for (int64_t i = 0; i < h_.numel(); ++i) h_.data<double>()[i] = rng.normal();
    for (int64_t i = 0; i < weight_->value.numel(); ++i) weight_->value.data<double>()[i] = rng.normal() * 0.5;
    for (int64_t i = 0; i < kRows; ++i) targets_.push_back(i == 3 ? -1 : static_cast<int32_t>((i * 7) % kVocab));
  }

  Head& head() { return *dynamic_cast<Head*>(component_.get()); }
  const std::vector<Param*>& declared() const { return declared_; }
  void scale_weight(double s) {
    for (int64_t i = 0; i < weight_->value.numel(); ++i) weight_->value.data<double>()[i] *= s;
  }
  LossInfo forward() {
    rig_.ctx.training = false;
    return head().forward(h_, targets_.data(), rig_.ctx);
  }
  const Param& weight() const { return *weight_; }
  /// A training forward and backward: dh, the weight's gradient accumulated into its (zeroed) grad.
  std::vector<double> train() {
    rig_.ctx.training = true;
    (void)head().forward(h_, targets_.data(), rig_.ctx);
    Tensor dh = rig_.tensor({kRows, kWidth});
    head().backward(dh, rig_.ctx);
    return {dh.data<double>(), dh.data<double>() + dh.numel()};
  }

  /// The gradients of the objective (mean loss + z-loss over the valid rows) in float64, from
  /// the formula: dlogits = (softmax (1 + 2 coef z) - onehot) / valid, through the cap's
  /// derivative 1 - (l / c)^2; dW = dlogits^T h, dh = dlogits W. Returns {dh, dW}.
  std::pair<std::vector<double>, std::vector<double>> reference_gradients(double cap, double z_coef) const {
    const double* h = h_.data<double>();
    const double* w = weight_->value.data<double>();
    std::vector<double> dh(kRows * kWidth), dw(kVocab * kWidth);
    double valid = 0;
    for (int32_t t : targets_) valid += t >= 0 ? 1 : 0;
    for (int64_t i = 0; i < kRows; ++i) {
      const int32_t t = targets_[static_cast<size_t>(i)];
      if (t < 0) continue;
      std::vector<double> l(kVocab), raw(kVocab);
      for (int64_t v = 0; v < kVocab; ++v) {
        double s = 0;
        for (int64_t k = 0; k < kWidth; ++k) s += h[i * kWidth + k] * w[v * kWidth + k];
        raw[static_cast<size_t>(v)] = s;
        l[static_cast<size_t>(v)] = cap > 0 ? cap * std::tanh(s / cap) : s;
      }
      const double m = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (double x : l) sum += std::exp(x - m);
      const double z = m + std::log(sum);
      for (int64_t v = 0; v < kVocab; ++v) {
        const double p = std::exp(l[static_cast<size_t>(v)] - z);
        double g = (p * (1 + 2 * z_coef * z) - (v == t ? 1.0 : 0.0)) / valid;
        if (cap > 0) g *= 1 - std::pow(std::tanh(raw[static_cast<size_t>(v)] / cap), 2);
        for (int64_t k = 0; k < kWidth; ++k) {
          dw[static_cast<size_t>(v * kWidth + k)] += g * h[i * kWidth + k];
          dh[static_cast<size_t>(i * kWidth + k)] += g * w[v * kWidth + k];
        }
      }
    }
    return {dh, dw};
  }

  /// Largest |h W^T| over the rows with a target.
  double max_abs_logit() const {
    double m = 0;
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t v = 0; v < kVocab; ++v) {
        double s = 0;
        for (int64_t k = 0; k < kWidth; ++k)
          s += h_.data<double>()[i * kWidth + k] * weight_->value.data<double>()[v * kWidth + k];
        m = std::max(m, std::abs(s));
      }
    return m;
  }

  /// The formula in float64: logits h W^T, capped when cap > 0, cross-entropy over the valid
  /// targets, z = logsumexp, z-loss coef * mean z^2.
  LossInfo reference(double cap, double z_coef) const {
    LossInfo r;
    int valid = 0;
    for (int64_t i = 0; i < kRows; ++i) {
      if (targets_[static_cast<size_t>(i)] < 0) continue;
      std::vector<double> l(kVocab);
      double m = -HUGE_VAL;
      for (int64_t v = 0; v < kVocab; ++v) {
        double s = 0;
        for (int64_t k = 0; k < kWidth; ++k)
          s += h_.data<double>()[i * kWidth + k] * weight_->value.data<double>()[v * kWidth + k];
        l[static_cast<size_t>(v)] = cap > 0 ? cap * std::tanh(s / cap) : s;
        m = std::max(m, l[static_cast<size_t>(v)]);
      }
      double sum = 0;
      for (double x : l) sum += std::exp(x - m);
      const double z = m + std::log(sum);
      r.loss += z - l[static_cast<size_t>(targets_[static_cast<size_t>(i)])];
      r.z_mean += z;
      r.z_loss += z_coef * z * z;
      ++valid;
    }
    r.loss /= valid;
    r.z_mean /= valid;
    r.z_loss /= valid;
    return r;
  }

 private:
  test::ComponentRig rig_;
  std::vector<Param*> declared_;
  Param* weight_ = nullptr;
  std::unique_ptr<Component> component_;
  Tensor h_;
  std::vector<int32_t> targets_;
};

TEST(LmHead, LossZAndZLossMatchTheFormula) {
  for (double cap : {0.0, 30.0, 1.5})
    for (double z_coef : {0.0, 1e-2}) {
      SCOPED_TRACE(::testing::Message() << "cap " << cap << " z_loss " << z_coef);
      HeadUnderTest t("head = { type = \"lm_head\", softcap = " + std::to_string(cap) +
                      ", z_loss = " + std::to_string(z_coef) + " }\n");
      const LossInfo got = t.forward(), ref = t.reference(cap, z_coef);
      EXPECT_NEAR(got.loss, ref.loss, 1e-12);
      EXPECT_NEAR(got.z_mean, ref.z_mean, 1e-12);
      EXPECT_NEAR(got.z_loss, ref.z_loss, 1e-12);
      EXPECT_NEAR(got.objective(), ref.loss + ref.z_loss, 1e-12);
    }
}

TEST(LmHead, SoftcapBoundsLossAndZ) {
  // Capped logits lie in [-c, c]: z = logsumexp <= c + ln V and loss = z - l_t <= 2c + ln V.
  const double cap = 2.0;
  HeadUnderTest capped("head = { type = \"lm_head\", softcap = 2.0 }\n"), plain("");
  capped.scale_weight(100);
  plain.scale_weight(100);
  const LossInfo c = capped.forward(), p = plain.forward();
  EXPECT_LE(c.z_mean, cap + std::log(16.0));
  EXPECT_LE(c.loss, 2 * cap + std::log(16.0));
  EXPECT_GT(p.loss, 10 * (2 * cap + std::log(16.0))) << "uncapped logits of this size give a far larger loss";
}

TEST(LmHead, SoftcapIsNearlyTheIdentityForSmallLogits) {
  // |c tanh(x/c) - x| <= |x|^3 / (3 c^2) per logit; the loss moves by at most twice that.
  HeadUnderTest capped("head = { type = \"lm_head\", softcap = 30.0 }\n"), plain("");
  const LossInfo c = capped.forward(), p = plain.forward();
  const double max_logit = plain.max_abs_logit();
  ASSERT_LT(max_logit, 10.0);
  EXPECT_NEAR(c.loss, p.loss, 2 * std::pow(max_logit, 3) / (3 * 30.0 * 30.0));
  EXPECT_NE(c.loss, p.loss);
}

TEST(LmHead, TiedHeadReadsTheEmbedding) {
  HeadUnderTest tied("tie_embeddings = true\n"), untied("");
  EXPECT_TRUE(tied.declared().empty());
  ASSERT_EQ(untied.declared().size(), 1u);
  EXPECT_EQ(untied.declared()[0]->shape, (Shape{kVocab, kWidth}));
  EXPECT_NEAR(tied.forward().loss, tied.reference(0, 0).loss, 1e-12);
}

TEST(LmHead, PaddedVocabularyGivesTheRealVocabularysResults) {
  for (const char* lines : {"", "head = { type = \"lm_head\", softcap = 1.5, z_loss = 0.01 }\n",
                            "tie_embeddings = true\nhead = { type = \"lm_head\", z_loss = 0.01 }\n"}) {
    SCOPED_TRACE(lines);
    const bool tied = std::string(lines).find("tie") != std::string::npos;
    const double cap = std::string(lines).find("softcap") != std::string::npos ? 1.5 : 0.0;
    const double z_coef = std::string(lines).find("z_loss") != std::string::npos ? 0.01 : 0.0;
    // Tied, the stand-in embedding is stored padded as the token embedding stores it.
    HeadUnderTest t(lines, tied ? 48 : 0);
    const Param& w = t.weight();
    EXPECT_EQ(w.shape, (Shape{kVocab, kWidth}));
    EXPECT_EQ(w.pad_rows, 48);  // 16 -> 64
    const LossInfo got = t.forward(), ref = t.reference(cap, z_coef);
    EXPECT_NEAR(got.loss, ref.loss, 1e-12);
    EXPECT_NEAR(got.z_mean, ref.z_mean, 1e-12);
    const Tensor* logits = t.head().logits();
    ASSERT_EQ(logits->shape(), (Shape{kRows, 64}));
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t v = kVocab; v < 64; ++v) ASSERT_EQ(logits->data<double>()[i * 64 + v], 0.0);
    const std::vector<double> dh = t.train();
    const auto [ref_dh, ref_dw] = t.reference_gradients(cap, z_coef);
    for (size_t i = 0; i < dh.size(); ++i) EXPECT_NEAR(dh[i], ref_dh[i], 1e-12) << "dh[" << i << "]";
    const double* g = w.padded_grad().data<double>();
    for (int64_t i = 0; i < kVocab * kWidth; ++i) EXPECT_NEAR(g[i], ref_dw[static_cast<size_t>(i)], 1e-12) << i;
    for (int64_t i = kVocab * kWidth; i < 64 * kWidth; ++i) ASSERT_EQ(g[i], 0.0) << "padding gradient " << i;
  }
  // A tied embedding stored without padding (another plugin's) works as well: the logits are
  // then as wide as the vocabulary.
  HeadUnderTest unpadded("tie_embeddings = true\n");
  EXPECT_EQ(unpadded.head().logits()->shape(), (Shape{kRows, kVocab}));
  EXPECT_NEAR(unpadded.forward().loss, unpadded.reference(0, 0).loss, 1e-12);
  const auto [ref_dh, ref_dw] = unpadded.reference_gradients(0, 0);
  const std::vector<double> dh = unpadded.train();
  for (size_t i = 0; i < dh.size(); ++i) EXPECT_NEAR(dh[i], ref_dh[i], 1e-12) << "dh[" << i << "]";
}

// ---------------------------------------------------------------------------------------------
// The token embedding and its scale
// ---------------------------------------------------------------------------------------------

/// The experiment of the embedding tests; `lines` is line 5 of exp.toml.
std::string embedding_toml(const std::string& dtype, int64_t d_model, const std::string& lines) {
  return "[model]\ndtype = \"" + dtype + "\"\nd_model = " + std::to_string(d_model) + "\nn_heads = 2\n" + lines +
         "\n[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n[stability]\n";
}

/// A token embedding on its own over kRows tokens, its table drawn N(0, 1) (in its dtype).
class EmbeddingUnderTest {
 public:
  EmbeddingUnderTest(const std::string& dtype, int64_t d_model, const std::string& lines)
      : rig_(test::resolve_first(embedding_toml(dtype, d_model, lines)).model,
             test::ComponentRig::Options().in("embed").with_rows(kRows).filled_by(test::normal_init(3, false, 1.0))),
        owner_(rig_.build<Embedding>(Slot::kEmbedding)),
        dim_(d_model) {
    for (int64_t i = 0; i < kRows; ++i) tokens_.push_back(static_cast<int32_t>((i * 5 + 3) % 7));  // repeats
  }
  Embedding& embedding() { return *owner_; }
  int64_t dim() const { return dim_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  /// The table's value at (token, column), as double.
  double table(int32_t token, int64_t c) {
    const Tensor& w = owner_->weight()->value;
    return dispatch_float(w.dtype(), [&]<class T>() { return scalar_value(w.data<T>()[token * dim_ + c]); });
  }
  /// The output rows of a forward, as double.
  std::vector<double> forward() {
    Tensor h = rig_.tensor({kRows, dim_});
    owner_->forward(tokens_.data(), h, rig_.ctx);
    return as_doubles(h);
  }
  /// The table's gradient after one backward of `dh` (from a zeroed gradient), as double.
  std::vector<double> backward(const std::vector<double>& dh) {
    Tensor g = rig_.tensor({kRows, dim_});
    dispatch_float(g.dtype(), [&]<class T>() {
      for (int64_t i = 0; i < g.numel(); ++i) g.data<T>()[i] = scalar_as<T>(dh[static_cast<size_t>(i)]);
    });
    owner_->weight()->grad.zero();
    owner_->backward(g, rig_.ctx);
    return as_doubles(owner_->weight()->grad);
  }

 private:
  static std::vector<double> as_doubles(const Tensor& t) {
    std::vector<double> out(static_cast<size_t>(t.numel()));
    dispatch_float(t.dtype(), [&]<class T>() {
      for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = scalar_value(t.data<T>()[i]);
    });
    return out;
  }

  test::ComponentRig rig_;
  std::unique_ptr<Embedding> owner_;
  int64_t dim_;
  std::vector<int32_t> tokens_;
};

TEST(TokenEmbedding, ScaledRowsAndGradientMatchTheFormula) {
  struct Case {
    std::string lines;
    double scale;
  };
  for (const Case& c :
       {Case{"", 1.0}, Case{"embedding = { type = \"token\", scale = \"sqrt_d_model\" }", std::sqrt(24.0)},
        Case{"embedding = { type = \"token\", multiplier = 12.0 }", 12.0},
        Case{"embedding = { type = \"token\", scale = \"sqrt_d_model\", multiplier = 0.5 }", 0.5 * std::sqrt(24.0)}}) {
    SCOPED_TRACE(c.lines);
    EmbeddingUnderTest e("float64", 24, c.lines);
    const std::vector<double> h = e.forward();
    double max_err = 0;
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t k = 0; k < e.dim(); ++k) {
        const double want = e.table(e.tokens()[static_cast<size_t>(i)], k) * c.scale;
        max_err = std::max(max_err, std::abs(h[static_cast<size_t>(i * e.dim() + k)] - want));
      }
    EXPECT_LE(max_err, 1e-15 * c.scale);
    // d table[v] = scale * sum of dh over the positions of token v; untouched rows stay 0.
    Rng rng(4);
    std::vector<double> dh(static_cast<size_t>(kRows * e.dim()));
    for (double& x : dh) x = rng.normal();
    const std::vector<double> g = e.backward(dh);
    std::vector<double> want(g.size(), 0.0);
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t k = 0; k < e.dim(); ++k)
        want[static_cast<size_t>(e.tokens()[static_cast<size_t>(i)] * e.dim() + k)] +=
            dh[static_cast<size_t>(i * e.dim() + k)] * c.scale;
    double max_grad_err = 0;
    for (size_t i = 0; i < g.size(); ++i) max_grad_err = std::max(max_grad_err, std::abs(g[i] - want[i]));
    EXPECT_LE(max_grad_err, 1e-14 * c.scale);
    RecordProperty("max_abs_error", ::testing::PrintToString(std::max(max_err, max_grad_err)));
  }
}

// As Gemma's normalizer (a tensor of the model's dtype): in bf16 the scale sqrt(3072) = 55.43 is
// rounded to 55.5 before it multiplies, and each product is rounded once to bf16.
TEST(TokenEmbedding, Bf16ScaleIsRoundedToBf16First) {
  EmbeddingUnderTest e("bfloat16", 3072, "embedding = { type = \"token\", scale = \"sqrt_d_model\" }");
  const std::vector<double> h = e.forward();
  int differs_unrounded = 0;
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t k = 0; k < e.dim(); ++k) {
      const auto w = static_cast<float>(e.table(e.tokens()[static_cast<size_t>(i)], k));
      const double want = tile::bf16_to_float(tile::float_to_bf16(w * 55.5f));
      const double unrounded = tile::bf16_to_float(tile::float_to_bf16(w * static_cast<float>(std::sqrt(3072.0))));
      ASSERT_EQ(h[static_cast<size_t>(i * e.dim() + k)], want) << i << ", " << k;
      differs_unrounded += want != unrounded ? 1 : 0;
    }
  EXPECT_GT(differs_unrounded, 100) << "the rounding of the scale matters at this size";
}

TEST(TokenEmbedding, BadScalesAreErrorsAtTheirKey) {
  struct Case {
    std::string lines, key, text;
  };
  for (const Case& c : {Case{"embedding = { type = \"token\", multiplier = 0.0 }", "multiplier", "must be > 0"},
                        Case{"embedding = { type = \"token\", multiplier = -2.0 }", "multiplier", "must be > 0"},
                        Case{"embedding = { type = \"token\", scale = \"sqrt\" }", "scale", "sqrt_d_model"}}) {
    SCOPED_TRACE(c.lines);
    const auto e = test::config_error_of(
        [&] { validate_case(test::resolve_first(embedding_toml("float64", 8, c.lines)), test::builtin_registry()); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->loc().line, 5) << e->what();
    EXPECT_EQ(e->loc().column, static_cast<int>(c.lines.find(c.key + " =")) + 1) << e->what();
    EXPECT_NE(std::string(e->what()).find(c.text), std::string::npos) << e->what();
  }
}

}  // namespace
}  // namespace head_test
}  // namespace bench
