// Causal self-attention with n_kv_heads query-head groups (MHA when n_kv_heads = n_heads, GQA
// between, MQA at 1), optional sliding window and attention-logit soft-capping:
//   [q k v] = x Wqkv^T;  q, k rotated by the position component;
//   o_h = softmax(scale * q_h k_g^T + causal mask) v_g  (g = h / (n_heads / n_kv_heads));  y = o Wo^T
#include <cmath>

#include "bench/bench.h"
#include "kernels/attention.h"

namespace bench::attention {

class CausalAttention final : public Sublayer {
 public:
  explicit CausalAttention(const Params& p)
      : window_(p.integer("window")), softcap_(p.number("softcap")), out_scale_(p.boolean("scaled_output_init")) {}

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    batch_ = d.batch_size;
    seq_ = d.seq_len;
    heads_ = d.n_heads;
    kv_heads_ = d.n_kv_heads;
    d_head_ = d.d_head;
    d_model_ = ctx.width();
    rows_ = ctx.rows();
    layer_ = ctx.layer();
    qkv_width_ = (heads_ + 2 * kv_heads_) * d_head_;
    position_ = ctx.position();
    const double std = d.init_std;
    wqkv_ = ctx.add_param("wqkv", {qkv_width_, d_model_}, Init::normal(std));
    // GPT-2: residual-branch output projections scaled by 1/sqrt(2 * n_layers).
    const double out_std = out_scale_ ? std / std::sqrt(2.0 * static_cast<double>(d.n_layers)) : std;
    wo_ = ctx.add_param("wo", {d_model_, heads_ * d_head_}, Init::normal(out_std));
    args_ = kernels::AttentionArgs{batch_, seq_, heads_, kv_heads_, d_head_, 0.0, softcap_, window_, true};
    args_.scale = position_->attention_scale() / std::sqrt(static_cast<double>(d_head_));
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    qkv_ = ctx.buffer({rows_, qkv_width_});
    dqkv_ = ctx.buffer({rows_, qkv_width_});
    att_ = ctx.buffer({rows_, heads_ * d_head_});
    datt_ = ctx.buffer({rows_, heads_ * d_head_});
    probs_ = ctx.buffer({kernels::attention_probs_size(args_)});
    work_ = ctx.buffer({kernels::attention_workspace_size(args_)});
    row_max_ = ctx.buffer({batch_ * heads_ * seq_}, acc);
    esize_ = dtype_size(ctx.dtype());
  }

  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    x_ = x;
    ops::linear_forward(ctx, x, wqkv_->value, qkv_);
    position_->rotate_forward(view(qkv_), ctx);
    dispatch_float(x.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      A* rm = ctx.probes ? static_cast<A*>(row_max_.raw()) : nullptr;
      kernels::attention_forward<T>(ctx.exec, args_, qkv_.data<T>(), att_.data<T>(), probs_.data<T>(), rm);
      if (rm != nullptr) {
        double m = -INFINITY;
        for (int64_t i = 0; i < batch_ * heads_ * seq_; ++i) m = std::isnan(rm[i]) || rm[i] > m ? rm[i] : m;
        ctx.probe_max("max_attn_logit", m);
      }
    });
    ops::linear_forward(ctx, att_, wo_->value, y);
  }

  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    ops::linear_backward(ctx, dy, att_, wo_->value, &datt_, &wo_->grad);
    dispatch_float(dy.dtype(), [&]<class T>() {
      kernels::attention_backward<T>(ctx.exec, args_, qkv_.data<T>(), probs_.data<T>(), datt_.data<T>(),
                                     dqkv_.data<T>(), work_.data<T>());
    });
    position_->rotate_backward(view(dqkv_), ctx);
    ops::linear_backward(ctx, dqkv_, x_, wqkv_->value, &dx, &wqkv_->grad);
  }

  Cost cost() const override {
    const double rows = static_cast<double>(rows_);
    const double proj = 2 * rows * static_cast<double>(d_model_ * qkv_width_) +
                        2 * rows * static_cast<double>(heads_ * d_head_ * d_model_);
    // Score/value products over the (query, key) pairs the mask keeps.
    double pairs = 0;
    for (int64_t t = 0; t < seq_; ++t) pairs += static_cast<double>(window_ > 0 ? std::min(t + 1, window_) : t + 1);
    const double bh = static_cast<double>(batch_ * heads_);
    const double attn = 4 * static_cast<double>(d_head_) * pairs * bh;
    const double soft = 5 * pairs * bh;
    Cost c;
    c.flops_forward = proj + attn + soft;
    c.flops_backward = 2 * proj + 2 * attn + 2 * soft;
    const double e = static_cast<double>(esize_);
    const double act = rows * static_cast<double>(d_model_) * e;
    const double weights = static_cast<double>(wqkv_->shape.numel() + wo_->shape.numel()) * e;
    const double probs = static_cast<double>(seq_) * static_cast<double>(seq_) * bh * e;
    c.bytes_forward = 2 * act + weights + 2 * rows * static_cast<double>(qkv_width_) * e + probs;
    c.bytes_backward = 2 * c.bytes_forward;
    return c;
  }

 private:
  QkView view(const Tensor& buffer) const {
    return QkView{buffer, batch_, seq_, heads_, kv_heads_, d_head_, qkv_width_, 0, heads_ * d_head_};
  }

  int64_t window_;
  double softcap_;
  bool out_scale_;
  int64_t batch_ = 0, seq_ = 0, heads_ = 0, kv_heads_ = 0, d_head_ = 0, d_model_ = 0, rows_ = 0, qkv_width_ = 0;
  int layer_ = -1;
  size_t esize_ = 4;
  Position* position_ = nullptr;
  Param* wqkv_ = nullptr;
  Param* wo_ = nullptr;
  kernels::AttentionArgs args_{};
  Tensor x_, qkv_, dqkv_, att_, datt_, probs_, work_, row_max_;
};

ComponentInfo causal_info() {
  return make_info<CausalAttention>(
      Slot::kAttention, "causal", "causal multi-head attention; n_kv_heads gives MHA, GQA or MQA",
      {ParamSpec::integer("window", 0, "sliding window: attend to the last `window` tokens; 0 = all").at_least(0),
       ParamSpec::number("softcap", 0.0, "attention logit soft-cap c: logits -> c * tanh(logits / c); 0 = off")
           .at_least(0),
       ParamSpec::boolean("scaled_output_init", true, "init the output projection with std / sqrt(2 n_layers)")});
}

}  // namespace bench::attention

BENCH_PLUGIN("attention", "1.0", "attention: causal MHA/GQA/MQA with sliding window and soft-capping") {
  registrar.add(bench::attention::causal_info());
}
