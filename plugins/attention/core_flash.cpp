// The flash core: our fused bf16 attention on the tensor cores (kernels/cuda/flash_attention.cuh),
// every variant, on CUDA in bf16 where kernels::attention_uses_flash takes the shape (d_head 64 or
// 128). It keeps the log-sum-exp per query and the backward's workspace (attention_flash_state_size)
// instead of the probabilities; the entropy probe recomputes them from qkv.
#include "core.h"

namespace bench::attention {

namespace {

class FlashCore final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    state_ = ctx.buffer({kernels::attention_flash_state_size(args)});
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    check(ctx, args, qkv.dtype());
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_forward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), state_.data<T>(),
                                    static_cast<tile::acc_t<T>*>(row_max), nullptr);
    });
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    check(ctx, args, qkv.dtype());
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_backward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), state_.data<T>(), dout.data<T>(),
                                     dqkv.data<T>(), nullptr);
    });
  }

  bool reads_dropout_step() const override { return true; }  // the kernels: dropout_seed_of

 private:
  /// The flash kernels run here: else the state buffer would be taken for probabilities.
  static void check(const RunContext& ctx, const kernels::AttentionArgs& args, DType dtype) {
    const bool flash =
        !dispatch_float(dtype, [&]<class T>() { return kernels::attention_keeps_probs<T>(ctx.exec, args); });
    if (!flash)
      throw Error("attention: set up for the flash kernels but run on " + tile::target_name(ctx.exec) +
                  ", where they do not run");
  }

  Tensor state_;
};

std::string flash_unsupported(const CoreQuery& q) {
  if (q.backend != tile::Backend::kCuda || q.dtype != DType::kBFloat16)
    return "our flash kernels run on CUDA in bfloat16 only";
  kernels::AttentionArgs a = q.args;
  a.materialize = false;
  if (!kernels::attention_uses_flash(a))
    return "our flash kernels take d_head 64 or 128, a window only with causal masking, and T >= 2 (d_head + 2) or so";
  return "";
}
bool always(const CoreQuery&) { return true; }

}  // namespace

BENCH_ATTENTION_CORE(FlashCore, "flash",
                     "our fused bf16 attention on the tensor cores (CUDA, d_head 64 or 128): no T x T probabilities",
                     flash_unsupported, always, nullptr)

}  // namespace bench::attention
