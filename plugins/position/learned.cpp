// Learned absolute position embedding (GPT-2, BERT): a [seq_len, d_model] parameter added to the
// token embeddings. It has a row for each trained position and none beyond: a model built for a
// longer context has a table of another shape, so the trained one cannot be moved there (the
// stability runner's eval_lengths reports NaN), which is the lecture's point about extrapolation.
#include "absolute.h"
#include "position.h"

namespace bench::position {

class Learned final : public Position {
 public:
  explicit Learned(const Params& p) : init_std_(p.number("init_std")) {}

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    seq_ = d.seq_len;
    width_ = d.d_model;
    tokens_ = d.tokens();
    esize_ = dtype_size(ctx.dtype());
    weight_ = ctx.add_param("weight", {seq_, width_}, Init::normal(init_std_ > 0 ? init_std_ : d.init_std),
                            ParamGroup::kEmbedding);
  }

  void embed_forward(Tensor& h, RunContext& ctx) override {
    dispatch_float(h.dtype(), [&]<class T>() {
      position_table_add<T>(ctx.exec, h.data<T>(), weight_->value.data<T>(), h.size(0), seq_, width_);
    });
  }
  void embed_backward(const Tensor& dh, RunContext& ctx) override {
    dispatch_float(dh.dtype(), [&]<class T>() {
      position_table_backward<T>(ctx.exec, dh.data<T>(), weight_->grad.data<T>(), dh.size(0) / seq_, seq_, width_);
    });
  }

  Cost cost() const override {
    const double n = static_cast<double>(tokens_ * width_);
    const double table = static_cast<double>(seq_ * width_);
    const double e = static_cast<double>(esize_);
    return Cost{n, n, (2 * n + table) * e, (n + 2 * table) * e};
  }

 private:
  double init_std_;
  int64_t seq_ = 0, width_ = 0, tokens_ = 0;
  size_t esize_ = 4;
  Param* weight_ = nullptr;
};

ComponentInfo learned_info() {
  return make_info<Learned>(
      Slot::kPosition, "learned",
      "learned [seq_len, d_model] table added to the embeddings (GPT-2); cannot extrapolate",
      {ParamSpec::number("init_std", 0.0, "std of its normal initialization; 0 = the model's init_std").at_least(0)});
}

}  // namespace bench::position
