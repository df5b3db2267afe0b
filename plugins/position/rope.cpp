// Rotary position embedding (Su et al. 2021): each pair of q/k features is rotated by an angle
// t * theta_i with theta_i = base^(-2i/d_head), so q.k depends on positions only through their
// offset. Pairs are (2i, 2i+1) ("interleaved", the paper) or (i, i + d/2) ("half", Hugging Face).
// `scaling` picks a long-context frequency scheme (rope_frequencies.h has the formulas); YaRN and
// LongRoPE also scale the attention logits, through attention_scale().
// Partial rotary (`rotary_fraction` < 1; GPT-NeoX's rotary_pct, Phi's partial_rotary_factor):
// only the first r = int(rotary_fraction * d_head) features of each head turn (Hugging Face's
// truncation), as a head of r features would, theta_i = base^(-2i/r) and the pairs within
// those r; the other d_head - r features pass unchanged.
#include "kernels/rope.h"

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "position.h"
#include "rope_frequencies.h"

namespace bench::position {

namespace {

// The parameters each scheme reads beyond base and layout; setting another one is an error.
bool reads(RopeScaling s, std::string_view key) {
  if (key == "factor" || key == "original_max_position" || key == "apply") return s != RopeScaling::kNone;
  if (key == "beta_fast" || key == "beta_slow") return s == RopeScaling::kYarn;
  if (key == "low_freq_factor" || key == "high_freq_factor") return s == RopeScaling::kLlama3;
  if (key == "long_factors" || key == "short_factors") return s == RopeScaling::kLongRope;
  return true;
}

constexpr const char* kScalingKeys[] = {
    "factor",          "original_max_position", "apply",        "beta_fast",    "beta_slow",
    "low_freq_factor", "high_freq_factor",      "long_factors", "short_factors"};

}  // namespace

class Rope final : public Position {
 public:
  explicit Rope(const Params& p)
      : layout_(p.string("layout") == "interleaved" ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kHalf),
        base_loc_(p.where("base")),
        scaling_name_(p.string("scaling")),
        fraction_(p.number("rotary_fraction")),
        fraction_loc_(p.where("rotary_fraction")) {
    cfg_.scaling = parse_rope_scaling(scaling_name_).value_or(RopeScaling::kNone);
    cfg_.base = p.number("base");
    cfg_.factor = p.number("factor");
    cfg_.original_max_position = p.integer("original_max_position");
    cfg_.always = p.string("apply") == "always";
    cfg_.beta_fast = p.number("beta_fast");
    cfg_.beta_slow = p.number("beta_slow");
    cfg_.low_freq_factor = p.number("low_freq_factor");
    cfg_.high_freq_factor = p.number("high_freq_factor");
    cfg_.long_factors = p.numbers("long_factors");
    cfg_.short_factors = p.numbers("short_factors");
    for (const char* k : kScalingKeys) {
      loc_[k] = p.where(k);
      if (p.given(k) && !reads(cfg_.scaling, k)) unused_.emplace_back(k);
    }
    loc_["scaling"] = p.where("scaling");
  }

  void validate(const ModelDims& d) const override {
    if (!(fraction_ > 0)) throw ConfigError(fraction_loc_, "rotary_fraction must be > 0 (1 = every feature)");
    if (fraction_ == 1.0 && d.d_head % 2 != 0)
      throw ConfigError(d.loc("d_head").known() ? d.loc("d_head") : d.loc("n_heads"),
                        "RoPE rotates pairs of features: d_head (" + std::to_string(d.d_head) + ") must be even");
    const int64_t r = rotated(d.d_head);
    if (fraction_ != 1.0 && (r < 2 || r % 2 != 0)) {
      std::ostringstream f;
      f << fraction_;
      throw ConfigError(fraction_loc_, "rotary_fraction * d_head = int(" + f.str() + " * " + std::to_string(d.d_head) +
                                           ") = " + std::to_string(r) +
                                           " rotated features: RoPE rotates pairs, so an even number >= 2 is needed");
    }
    if (cfg_.base <= 1.0) throw ConfigError(base_loc_, "RoPE base must be > 1");
    if (!unused_.empty())
      throw ConfigError(loc_.at(unused_.front()),
                        "'" + unused_.front() + "' has no effect with scaling = \"" + scaling_name_ + "\"");
    const auto half = static_cast<size_t>(r / 2);
    // The features the frequencies are computed for: the head's, or the rotated slice's.
    const std::string width = r == d.d_head ? "d_head" : "the rotated features (rotary_fraction * d_head)";
    switch (cfg_.scaling) {
      case RopeScaling::kNtk:
      case RopeScaling::kDynamicNtk:
        if (r < 4)
          throw ConfigError(loc_.at("scaling"), "NTK scaling raises the base to d/(d-2): " + width + " must be >= 4");
        break;
      case RopeScaling::kYarn:
        if (cfg_.beta_slow <= 0 || cfg_.beta_fast <= cfg_.beta_slow)
          throw ConfigError(loc_.at("beta_fast"), "YaRN needs beta_fast > beta_slow > 0 (rotations within L_orig)");
        break;
      case RopeScaling::kLlama3:
        if (cfg_.low_freq_factor <= 0 || cfg_.high_freq_factor <= cfg_.low_freq_factor)
          throw ConfigError(loc_.at("high_freq_factor"),
                            "Llama 3 scaling needs high_freq_factor > low_freq_factor > 0");
        break;
      case RopeScaling::kLongRope:
        if (cfg_.long_factors.empty())
          throw ConfigError(loc_.at("scaling"), "longrope needs long_factors: " + width + " / 2 = " +
                                                    std::to_string(half) + " rescale factors, one per pair");
        for (const char* key : {"long_factors", "short_factors"}) {
          const auto& f = std::string_view(key) == "long_factors" ? cfg_.long_factors : cfg_.short_factors;
          if (!f.empty() && f.size() != half)
            throw ConfigError(loc_.at(key), std::string(key) + " has " + std::to_string(f.size()) + " values; " +
                                                width + " / 2 = " + std::to_string(half) + " are needed");
          for (double v : f)
            if (!(v > 0)) throw ConfigError(loc_.at(key), std::string(key) + " must all be > 0");
        }
        if (original(d) < 2 && cfg_.factor > 1)
          throw ConfigError(loc_.at("original_max_position"), "LongRoPE's attention factor needs L_orig >= 2");
        break;
      default:
        break;
    }
  }

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    seq_ = d.seq_len;
    rot_ = rotated(d.d_head);
    half_ = rot_ / 2;
    RopeScalingConfig cfg = cfg_;
    cfg.original_max_position = original(d);
    const RopeFrequencies freq = rope_frequencies(cfg, rot_, seq_);
    logit_scale_ = freq.logit_scale;
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    cos_ = ctx.buffer({seq_, half_}, acc);
    sin_ = ctx.buffer({seq_, half_}, acc);
    // Angles in double, then rounded once to the table's type.
    dispatch_float(ctx.dtype(), [&]<class T>() {
      // A plan's tables have no storage to fill.
      if (ctx.planning()) return;
      using A = tile::acc_t<T>;
      std::vector<A> host_c(static_cast<size_t>(seq_ * half_)), host_s(host_c.size());  // then to the model's memory
      A* c = host_c.data();
      A* s = host_s.data();
      for (int64_t t = 0; t < seq_; ++t)
        for (int64_t i = 0; i < half_; ++i) {
          const double angle = static_cast<double>(t) * freq.inv_freq[static_cast<size_t>(i)];
          c[t * half_ + i] = static_cast<A>(std::cos(angle));
          s[t * half_ + i] = static_cast<A>(std::sin(angle));
        }
      ops::copy(Tensor(c, acc, {seq_, half_}), cos_);
      ops::copy(Tensor(s, acc, {seq_, half_}), sin_);
    });
    esize_ = dtype_size(ctx.dtype());
    tokens_ = d.tokens();
    heads_ = d.n_heads + d.n_kv_heads;
  }

  void rotate_forward(const QkView& qk, RunContext& ctx) override { rotate(qk, false, ctx); }
  void rotate_backward(const QkView& qk, RunContext& ctx) override { rotate(qk, true, ctx); }
  double attention_scale() const override { return logit_scale_; }

  Cost cost() const override {
    const double n = static_cast<double>(tokens_ * heads_ * rot_);
    const double b = 2 * n * static_cast<double>(esize_);
    return Cost{3 * n, 3 * n, b, b};  // 4 multiplies and 2 adds per pair
  }

 private:
  /// Features rotated per head: int(rotary_fraction * d_head), as Hugging Face truncates.
  int64_t rotated(int64_t d_head) const {
    return fraction_ == 1.0 ? d_head : static_cast<int64_t>(fraction_ * static_cast<double>(d_head));
  }

  int64_t original(const ModelDims& d) const {
    return cfg_.original_max_position > 0 ? cfg_.original_max_position : d.train_seq_len;
  }

  void rotate(const QkView& qk, bool inverse, RunContext& ctx) {
    dispatch_float(qk.buffer.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      T* base = qk.buffer.data<T>();
      const A* c = static_cast<const A*>(cos_.raw());
      const A* s = static_cast<const A*>(sin_.raw());
      const int64_t tokens = qk.batch * qk.seq;
      // The k heads right after the q heads (the fused qkv rows): one launch turns both, each
      // head as it would on its own (the rotation is per head and position alone).
      if (qk.k_offset == qk.q_offset + qk.n_heads * qk.d_head) {
        kernels::rope_apply<T>(ctx.exec, base + qk.q_offset, tokens, qk.seq, qk.n_heads + qk.n_kv_heads, qk.d_head,
                               qk.row_stride, c, s, layout_, inverse, rot_);
        return;
      }
      kernels::rope_apply<T>(ctx.exec, base + qk.q_offset, tokens, qk.seq, qk.n_heads, qk.d_head, qk.row_stride, c, s,
                             layout_, inverse, rot_);
      kernels::rope_apply<T>(ctx.exec, base + qk.k_offset, tokens, qk.seq, qk.n_kv_heads, qk.d_head, qk.row_stride, c,
                             s, layout_, inverse, rot_);
    });
  }

  RopeScalingConfig cfg_;
  kernels::RopeLayout layout_;
  SourceLoc base_loc_;
  std::string scaling_name_;
  double fraction_;
  SourceLoc fraction_loc_;
  std::map<std::string, SourceLoc, std::less<>> loc_;
  std::vector<std::string> unused_;
  double logit_scale_ = 1.0;
  int64_t seq_ = 0, rot_ = 0, half_ = 0, tokens_ = 0, heads_ = 0;
  size_t esize_ = 4;
  Tensor cos_, sin_;
};

ComponentInfo rope_info() {
  return make_info<Rope>(
      Slot::kPosition, "rope", "rotary position embedding on q and k, with long-context frequency scalings",
      {ParamSpec::number("base", 10000.0, "theta_i = base^(-2i/d_head)").at_least(1),
       ParamSpec::choice("layout", "half", {"half", "interleaved"},
                         "feature pairs: (i, i+d/2) as Hugging Face, or (2i, 2i+1) as the paper"),
       ParamSpec::number("rotary_fraction", 1.0,
                         "partial rotary: only the first int(rotary_fraction * d_head) features of each head turn, "
                         "with frequencies of that width (GPT-NeoX, Pythia: 0.25; Phi-2: 0.4); 1 = all")
           .at_least(0)
           .at_most(1),
       ParamSpec::choice("scaling", "none", rope_scaling_names(),
                         "long-context frequency scheme (docs/variants/position.md): none, linear (position "
                         "interpolation), ntk, dynamic_ntk, yarn, llama3, longrope"),
       ParamSpec::number("factor", 1.0, "context extension factor s (LongRoPE: for its attention factor only)")
           .at_least(1),
       ParamSpec::integer("original_max_position", 0,
                          "L_orig, the context the frequencies are scaled from; 0 = "
                          "the length the model is trained at")
           .at_least(0),
       ParamSpec::choice("apply", "beyond_original", {"beyond_original", "always"},
                         "beyond_original: plain RoPE up to L_orig, the scaling beyond it (no fine-tuning); always: "
                         "the scaling at every length (Hugging Face's static rope_scaling)"),
       ParamSpec::number("beta_fast", 32.0, "YaRN: pairs turning more than this many times in L_orig are kept")
           .at_least(0),
       ParamSpec::number("beta_slow", 1.0, "YaRN: pairs turning fewer times than this are interpolated").at_least(0),
       ParamSpec::number("low_freq_factor", 1.0, "Llama 3: wavelengths above L_orig / this are divided by factor")
           .at_least(0),
       ParamSpec::number("high_freq_factor", 4.0, "Llama 3: wavelengths below L_orig / this are kept").at_least(0),
       ParamSpec::numbers("long_factors", {}, "LongRoPE: d_head/2 divisors of the frequencies when L > L_orig"),
       ParamSpec::numbers("short_factors", {},
                          "LongRoPE: d_head/2 divisors when L <= L_orig; empty = ones (plain RoPE)")});
}

}  // namespace bench::position
