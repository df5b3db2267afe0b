// Serial block (GPT-2, Llama): attention then FFN, each wrapped by the configured norm position:
//   h = residual(x, attention);  y = residual(h, ffn)
#include "blocks.h"

namespace bench::blocks {

class SerialBlock final : public Sublayer {
 public:
  explicit SerialBlock(const Params&) {}
  void setup(SetupContext& ctx) override {
    attn_ = ctx.build_as<Sublayer>(Slot::kAttention, "attn");
    ffn_ = ctx.build_as<Sublayer>(Slot::kFfn, "ffn");
    attn_res_ = ctx.build_as<Residual>(Slot::kNormPosition, "attn_norm");
    ffn_res_ = ctx.build_as<Residual>(Slot::kNormPosition, "ffn_norm");
    h_ = ctx.buffer({ctx.rows(), ctx.width()});
    dh_ = ctx.buffer({ctx.rows(), ctx.width()});
  }
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    attn_res_->forward(x, h_, *attn_, ctx);
    ffn_res_->forward(h_, y, *ffn_, ctx);
  }
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    ffn_res_->backward(dy, dh_, *ffn_, ctx);
    attn_res_->backward(dh_, dx, *attn_, ctx);
  }

 private:
  std::unique_ptr<Sublayer> attn_, ffn_;
  std::unique_ptr<Residual> attn_res_, ffn_res_;
  Tensor h_, dh_;
};

ComponentInfo serial_info() {
  return make_info<SerialBlock>(Slot::kBlock, "serial",
                                "serial block: attention then FFN, each inside the configured norm position", {});
}

}  // namespace bench::blocks
