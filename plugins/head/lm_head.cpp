// LM head and loss: logits = h W^T (W [vocab, d_model], or the token embedding when tied),
// optionally soft-capped to c * tanh(logits / c) (Gemma 2: c = 30), mean softmax cross-entropy,
// and optionally PaLM's z-loss coef * mean(log Z ^ 2), which pulls the softmax normalizer log Z
// towards 0 (softmax itself is invariant to a shift of the logits).
//
// The vocabulary is padded (ModelDims::padded_vocab(): 50257 -> 50304): the weight is stored
// with zero rows after the real ones, so the logits' rows and the three GEMMs have aligned
// widths; the padding logits are then exactly 0 (h times zero rows), the cross-entropy masks them
// out of the loss, z and the z-loss and writes them a zero gradient, so the padding rows' gradient
// is exactly 0 and they stay 0. FLOPs are declared for the real vocabulary (model FLOPs: the
// padding is this implementation's waste), bytes for what is moved.
#include <cmath>
#include <vector>

#include "bench/device_probes.h"
#include "head.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/probes.h"
#include "kernels/softcap.h"

namespace bench::head {

class LmHead final : public Head {
 public:
  explicit LmHead(const Params& p) : z_coef_(p.number("z_loss")), softcap_(p.number("softcap")) {}

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    rows_ = ctx.rows();
    width_ = ctx.width();
    vocab_ = d.vocab_size;
    weight_ = d.tie_embeddings ? ctx.embedding_weight()
                               : ctx.add_param("weight", {vocab_, width_}, Init::normal(d.init_std),
                                               ParamGroup::kMatrix, d.padded_vocab() - vocab_);
    // The logits are as wide as the weight is stored (a tied embedding's padding is its own).
    if (weight_->shape.rank() != 2 || weight_->shape[0] != vocab_ || weight_->shape[1] != width_)
      throw Error("lm_head: the weight is " + weight_->shape.str() + ", not [vocab_size, width] = [" +
                  std::to_string(vocab_) + ", " + std::to_string(width_) + "]");
    ld_ = vocab_ + weight_->pad_rows;
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    logits_ = ctx.buffer({rows_, ld_});
    // With the cap, the cross-entropy gradient goes to its own buffer so that the capped logits
    // survive for the cap's backward (computed from its output).
    dlogits_ = softcap_ > 0 ? ctx.buffer({rows_, ld_}) : logits_;
    loss_ = ctx.buffer({rows_}, acc);
    z_ = ctx.buffer({rows_}, acc);
    sums_ = ctx.buffer({1 + kernels::kLossSlots}, DType::kFloat64);
    logit_sum_ = ctx.buffer({kernels::sum_squares_partials(rows_ * ld_) + 1}, DType::kFloat64);
    esize_ = dtype_size(ctx.dtype());
  }

  LossInfo forward(const Tensor& h, const int32_t* targets, RunContext& ctx) override {
    h_ = h;
    ops::linear_forward(ctx, h, weight_->padded_value(), logits_);
    if (softcap_ > 0)
      dispatch_float(h.dtype(), [&]<class T>() {
        kernels::softcap_forward<T>(ctx.exec, logits_.data<T>(), logits_.data<T>(), logits_.numel(), softcap_);
      });
    // Mean output logit (after the cap), before the cross-entropy overwrites the logits with
    // their gradient: with log Z it shows whether the logits drift as a whole.
    // Summed where the logits are (on a device: only the sum comes back); the padding logits are
    // exact zeros (h times zero rows, capped to 0), which add nothing, and are not counted.
    const double count = static_cast<double>(rows_ * vocab_);
    if (ctx.probes)
      dispatch_float(h.dtype(), [&]<class T>() {
        auto* partial = static_cast<double*>(logit_sum_.raw());
        double* sum = partial + kernels::sum_squares_partials(logits_.numel());
        kernels::sum_in_order_into<T>(ctx.exec, kernels::SumOf::kValues, logits_.data<T>(), logits_.numel(), partial,
                                      sum);
        if (ctx.capturing)
          probe_mean_at(ctx, "logit_mean", sum, count);
        else
          ctx.probe_mean("logit_mean", read(sum, 1)[0] / count);
      });
    // Everything that depends on the batch is computed where the targets are, into the head's
    // own device slots (nothing from the host): the scale 1 / (rows with a target), which the
    // cross-entropy reads when it runs, and after it the loss, z_mean and z_loss over those rows
    // in row order (kernels/probes.h). A captured step leaves them there for the host to read
    // after the replay; otherwise they are read back here.
    auto* slots = static_cast<double*>(sums_.raw());  // [scale, loss, z_mean, z_loss]
    double* loss_slots = slots + 1;
    kernels::target_scale(ctx.exec, targets, rows_, slots);
    dispatch_float(h.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      // Without the cap the gradient overwrites the logits in place: they are not needed after this.
      kernels::cross_entropy<T>(ctx.exec, logits_.data<T>(), targets, rows_, vocab_, ld_, static_cast<A*>(loss_.raw()),
                                static_cast<A*>(z_.raw()), ctx.training ? dlogits_.data<T>() : nullptr, z_coef_, 0.0,
                                slots);
      kernels::loss_sums<A>(ctx.exec, static_cast<const A*>(loss_.raw()), static_cast<const A*>(z_.raw()), targets,
                            rows_, z_coef_, loss_slots);
    });
    LossInfo info;
    if (ctx.capturing) {  // nothing is read back: the runner reads the slots after the replay
      loss_at(ctx, loss_slots);
      if (ctx.probes) probe_mean_at(ctx, "z_mean", loss_slots + kernels::kZMean);
      info.loss = info.z_mean = info.z_loss = std::nan("");
      return info;
    }
    const std::vector<double> v = read(loss_slots, kernels::kLossSlots);
    info.loss = v[kernels::kLossMean];
    info.z_mean = v[kernels::kZMean];
    info.z_loss = v[kernels::kZLoss];
    if (ctx.probes) ctx.probe_mean("z_mean", info.z_mean);
    return info;
  }

  void backward(Tensor& dh, RunContext& ctx) override {
    if (softcap_ > 0)
      dispatch_float(dh.dtype(), [&]<class T>() {
        kernels::softcap_backward<T>(ctx.exec, logits_.data<T>(), dlogits_.data<T>(), dlogits_.data<T>(),
                                     dlogits_.numel(), softcap_);
      });
    // The padding columns of dlogits are 0 (the cross-entropy's, and the cap's backward keeps a
    // zero a zero), so the padding rows of the weight's gradient are exactly 0.
    Tensor dw = weight_->padded_grad();
    ops::linear_backward(ctx, dlogits_, h_, weight_->padded_value(), &dh, &dw);
  }

  // Intact after a forward without training: the cross-entropy then writes no gradient over them.
  const Tensor* logits() const override { return &logits_; }

  Cost cost() const override {
    const double r = static_cast<double>(rows_), v = static_cast<double>(vocab_), w = static_cast<double>(width_);
    const double p = static_cast<double>(ld_);  // the padded vocabulary: what the GEMMs and buffers move
    const double e = static_cast<double>(esize_);
    Cost c;
    const bool cap = softcap_ > 0;
    c.flops_forward = 2 * r * v * w + 6 * r * v + (cap ? 4 * r * v : 0);  // tanh counted as a few FLOPs
    c.flops_backward = 4 * r * v * w + (cap ? 3 * r * v : 0);
    c.bytes_forward = (r * w + p * w + (cap ? 5 : 3) * r * p) * e;
    c.bytes_backward = (2 * r * w + 2 * p * w + (cap ? 4 : 1) * r * p) * e;
    return c;
  }

 private:
  /// n doubles at `at` (in the model's memory), on the host.
  static std::vector<double> read(const double* at, int64_t n) {
    std::vector<char> storage;
    const Tensor host = ops::on_host(Tensor(const_cast<double*>(at), DType::kFloat64, {n}), storage);
    return {host.data<double>(), host.data<double>() + n};
  }

  double z_coef_;
  double softcap_;
  int64_t rows_ = 0, width_ = 0, vocab_ = 0;
  int64_t ld_ = 0;  // the logits' row stride: vocab_ plus the weight's padding rows
  size_t esize_ = 4;
  Param* weight_ = nullptr;
  Tensor h_, logits_, dlogits_, loss_, z_;
  Tensor sums_;       // float64 [scale, loss, z_mean, z_loss] (kernels/probes.h)
  Tensor logit_sum_;  // float64: the logit sum's partials, then the sum
};

ComponentInfo lm_head_info() {
  return make_info<LmHead>(
      Slot::kHead, "lm_head", "linear LM head with softmax cross-entropy (tied to the embedding with tie_embeddings)",
      {ParamSpec::number("z_loss", 0.0, "z-loss coefficient: adds coef * mean(log Z^2) (PaLM: 1e-4)").at_least(0),
       ParamSpec::number("softcap", 0.0,
                         "output logit soft-cap c: logits -> c * tanh(logits / c) (Gemma 2: 30); 0 = off")
           .at_least(0)});
}

}  // namespace bench::head
