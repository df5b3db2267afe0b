#include "qk_norm.h"

#include <algorithm>

#include "kernels/elementwise.h"
#include "kernels/norm.h"

namespace bench::attention {

namespace {

/// Copy the q heads (columns [0, H dh)) and k heads ([H dh, (H + Hkv) dh)) of each fused row
/// into q [rows, H dh] followed by k [rows, Hkv dh], or back with `to_rows`: two strided block
/// copies, kernels like any other, so the same code runs wherever the model does.
template <class T>
void move_heads(const tile::Exec& exec, T* fused, T* packed, int64_t rows, int64_t width, int64_t q_cols,
                int64_t k_cols, bool to_rows) {
  T* packed_k = packed + rows * q_cols;
  if (to_rows) {
    kernels::copy_block<T>(exec, packed, q_cols, fused, width, rows, q_cols);
    kernels::copy_block<T>(exec, packed_k, k_cols, fused + q_cols, width, rows, k_cols);
  } else {
    kernels::copy_block<T>(exec, fused, width, packed, q_cols, rows, q_cols);
    kernels::copy_block<T>(exec, fused + q_cols, width, packed_k, k_cols, rows, k_cols);
  }
}

}  // namespace

QkNorm::Kind QkNorm::parse(const std::string& name) {
  if (name == "rmsnorm") return Kind::kRms;
  if (name == "layernorm") return Kind::kLayer;
  return Kind::kNone;
}

void QkNorm::setup(SetupContext& ctx, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d_head) {
  if (!enabled()) return;
  rows_ = rows;
  heads_ = heads;
  kv_heads_ = kv_heads;
  d_head_ = d_head;
  const int64_t q_cols = norm_cols(heads), k_cols = norm_cols(kv_heads);
  q_gain_ = ctx.add_param("q_norm.weight", {q_cols}, Init::ones(), ParamGroup::kGain);
  k_gain_ = ctx.add_param("k_norm.weight", {k_cols}, Init::ones(), ParamGroup::kGain);
  if (bias_) {
    q_bias_ = ctx.add_param("q_norm.bias", {q_cols}, Init::zeros(), ParamGroup::kBias);
    k_bias_ = ctx.add_param("k_norm.bias", {k_cols}, Init::zeros(), ParamGroup::kBias);
  }
  const int64_t n_rows = rows * (heads + kv_heads);
  in_ = ctx.buffer({n_rows, d_head});
  tmp_a_ = ctx.buffer({n_rows, d_head});
  tmp_b_ = ctx.buffer({n_rows, d_head});
  const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  mean_ = ctx.buffer({norm_rows(heads) + norm_rows(kv_heads)}, acc);
  rstd_ = ctx.buffer({norm_rows(heads) + norm_rows(kv_heads)}, acc);
  workspace_ = ctx.buffer({std::max(kernels::norm_backward_workspace(norm_rows(heads), q_cols),
                                    kernels::norm_backward_workspace(norm_rows(kv_heads), k_cols))},
                          acc);
}

void QkNorm::forward(Tensor& qkv, const RunContext& ctx) {
  if (!enabled()) return;
  const bool center = kind_ == Kind::kLayer;
  const int64_t width = qkv.size(1), dh = d_head_, q_size = rows_ * heads_ * dh;
  const int64_t q_rows = norm_rows(heads_), k_rows = norm_rows(kv_heads_);
  const int64_t q_cols = norm_cols(heads_), k_cols = norm_cols(kv_heads_);
  dispatch_float(qkv.dtype(), [&]<class T>() {
    using A = tile::acc_t<T>;
    T* x = in_.data<T>();
    T* y = tmp_a_.data<T>();
    A* mean = static_cast<A*>(mean_.raw());
    A* rstd = static_cast<A*>(rstd_.raw());
    move_heads(ctx.exec, qkv.data<T>(), x, rows_, width, heads_ * dh, kv_heads_ * dh, false);
    kernels::norm_forward<T>(ctx.exec, center, x, q_gain_->value.data<T>(),
                             q_bias_ != nullptr ? q_bias_->value.data<T>() : nullptr, y, mean, rstd, q_rows, q_cols,
                             eps_);
    kernels::norm_forward<T>(ctx.exec, center, x + q_size, k_gain_->value.data<T>(),
                             k_bias_ != nullptr ? k_bias_->value.data<T>() : nullptr, y + q_size, mean + q_rows,
                             rstd + q_rows, k_rows, k_cols, eps_);
    move_heads(ctx.exec, qkv.data<T>(), y, rows_, width, heads_ * dh, kv_heads_ * dh, true);
  });
}

void QkNorm::backward(Tensor& dqkv, const RunContext& ctx) {
  if (!enabled()) return;
  const bool center = kind_ == Kind::kLayer;
  const int64_t width = dqkv.size(1), dh = d_head_, q_size = rows_ * heads_ * dh;
  const int64_t q_rows = norm_rows(heads_), k_rows = norm_rows(kv_heads_);
  const int64_t q_cols = norm_cols(heads_), k_cols = norm_cols(kv_heads_);
  dispatch_float(dqkv.dtype(), [&]<class T>() {
    using A = tile::acc_t<T>;
    const T* x = in_.data<T>();
    T* dy = tmp_a_.data<T>();
    T* dx = tmp_b_.data<T>();
    const A* mean = static_cast<const A*>(mean_.raw());
    const A* rstd = static_cast<const A*>(rstd_.raw());
    A* ws = static_cast<A*>(workspace_.raw());
    move_heads(ctx.exec, dqkv.data<T>(), dy, rows_, width, heads_ * dh, kv_heads_ * dh, false);
    kernels::norm_backward<T>(ctx.exec, center, dy, x, q_gain_->value.data<T>(), mean, rstd, dx,
                              q_gain_->grad.data<T>(), q_bias_ != nullptr ? q_bias_->grad.data<T>() : nullptr, q_rows,
                              q_cols, ws);
    kernels::norm_backward<T>(ctx.exec, center, dy + q_size, x + q_size, k_gain_->value.data<T>(), mean + q_rows,
                              rstd + q_rows, dx + q_size, k_gain_->grad.data<T>(),
                              k_bias_ != nullptr ? k_bias_->grad.data<T>() : nullptr, k_rows, k_cols, ws);
    move_heads(ctx.exec, dqkv.data<T>(), dx, rows_, width, heads_ * dh, kv_heads_ * dh, true);
  });
}

Cost QkNorm::cost(size_t esize) const {
  if (!enabled()) return {};
  const double n = static_cast<double>(rows_ * (heads_ + kv_heads_) * d_head_);
  const double e = static_cast<double>(esize);
  const bool center = kind_ == Kind::kLayer;
  Cost c;
  c.flops_forward = n * (center ? 7.0 : 5.0);  // as the norms plugin counts a norm
  c.flops_backward = n * (center ? 12.0 : 10.0);
  c.bytes_forward = 6 * n * e;   // copy in (read, write), norm (read, write), copy back (read, write)
  c.bytes_backward = 7 * n * e;  // the same with x read by the norm backward
  return c;
}

}  // namespace bench::attention
