// Rotary position embedding (Su et al. 2021): each pair of q/k features is rotated by an angle
// t * theta_i with theta_i = base^(-2i/d_head), so q.k depends on positions only through their
// offset. Pairs are (2i, 2i+1) ("interleaved", the paper) or (i, i + d/2) ("half", Hugging Face).
#include "kernels/rope.h"

#include <cmath>

#include "position.h"

namespace bench::position {

class Rope final : public Position {
 public:
  explicit Rope(const Params& p)
      : base_(p.number("base")),
        layout_(p.string("layout") == "interleaved" ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kHalf),
        base_loc_(p.where("base")) {}

  void validate(const ModelDims& d) const override {
    if (d.d_head % 2 != 0)
      throw ConfigError(d.loc("d_head").known() ? d.loc("d_head") : d.loc("n_heads"),
                        "RoPE rotates pairs of features: d_head (" + std::to_string(d.d_head) + ") must be even");
    if (base_ <= 1.0) throw ConfigError(base_loc_, "RoPE base must be > 1");
  }

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    seq_ = d.seq_len;
    half_ = d.d_head / 2;
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    cos_ = ctx.buffer({seq_, half_}, acc);
    sin_ = ctx.buffer({seq_, half_}, acc);
    // Angles in double, then rounded once to the table's type.
    dispatch_float(ctx.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      A* c = static_cast<A*>(cos_.raw());
      A* s = static_cast<A*>(sin_.raw());
      for (int64_t t = 0; t < seq_; ++t)
        for (int64_t i = 0; i < half_; ++i) {
          const double theta = std::pow(base_, -2.0 * static_cast<double>(i) / static_cast<double>(d.d_head));
          const double angle = static_cast<double>(t) * theta;
          c[t * half_ + i] = static_cast<A>(std::cos(angle));
          s[t * half_ + i] = static_cast<A>(std::sin(angle));
        }
    });
    esize_ = dtype_size(ctx.dtype());
    tokens_ = d.tokens();
    heads_ = d.n_heads + d.n_kv_heads;
    d_head_ = d.d_head;
  }

  void rotate_forward(const QkView& qk, RunContext& ctx) override { rotate(qk, false, ctx); }
  void rotate_backward(const QkView& qk, RunContext& ctx) override { rotate(qk, true, ctx); }

  Cost cost() const override {
    const double n = static_cast<double>(tokens_ * heads_ * d_head_);
    const double b = 2 * n * static_cast<double>(esize_);
    return Cost{3 * n, 3 * n, b, b};  // 4 multiplies and 2 adds per pair
  }

 private:
  void rotate(const QkView& qk, bool inverse, RunContext& ctx) {
    dispatch_float(qk.buffer.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      T* base = qk.buffer.data<T>();
      const A* c = static_cast<const A*>(cos_.raw());
      const A* s = static_cast<const A*>(sin_.raw());
      const int64_t tokens = qk.batch * qk.seq;
      kernels::rope_apply<T>(ctx.exec, base + qk.q_offset, tokens, qk.seq, qk.n_heads, qk.d_head, qk.row_stride, c, s,
                             layout_, inverse);
      kernels::rope_apply<T>(ctx.exec, base + qk.k_offset, tokens, qk.seq, qk.n_kv_heads, qk.d_head, qk.row_stride, c,
                             s, layout_, inverse);
    });
  }

  double base_;
  kernels::RopeLayout layout_;
  SourceLoc base_loc_;
  int64_t seq_ = 0, half_ = 0, tokens_ = 0, heads_ = 0, d_head_ = 0;
  size_t esize_ = 4;
  Tensor cos_, sin_;
};

ComponentInfo rope_info() {
  return make_info<Rope>(Slot::kPosition, "rope", "rotary position embedding on q and k",
                         {ParamSpec::number("base", 10000.0, "theta_i = base^(-2i/d_head)").at_least(1),
                          ParamSpec::choice("layout", "half", {"half", "interleaved"},
                                            "feature pairs: (i, i+d/2) as Hugging Face, or (2i, 2i+1) as the paper")});
}

}  // namespace bench::position
