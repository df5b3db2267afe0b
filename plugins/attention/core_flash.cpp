// The flash core: our fused attention kernels on CUDA, every variant, no T x T probabilities.
// bf16: the tensor-core kernels (kernels/cuda/flash_attention.cuh) where
// kernels::attention_uses_flash takes the shape (d_head 64 or 128); they keep the log-sum-exp per
// query and the backward's workspace (attention_flash_state_size) instead of the probabilities.
// float32: the FFMA kernels in true float32 (kernels/cuda/flash_attention_f32_kernels.cuh:
// kernels::attention_flash_f32_forward / _backward, d_head 64 or 128; one launch forward, three
// backward, no atomics), keeping the log-sum-exp and D = rowsum(dO O) (attention_flash_f32_state_size).
// `core = "auto"` takes it on CUDA in bf16 after cuDNN and in float32 before the fused core;
// float64 and the CPU never take it. The entropy probe recomputes from qkv.
#include "core.h"
#include "kernels/attention_flash_f32.h"

namespace bench::attention {

namespace {

class FlashCore final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    if (ctx.dtype() == DType::kFloat32)
      state_ = ctx.buffer({kernels::attention_flash_f32_state_size(args)}, DType::kFloat32);
    else
      state_ = ctx.buffer({kernels::attention_flash_state_size(args)});
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    if (qkv.dtype() == DType::kFloat32) {
      kernels::attention_flash_f32_forward(ctx.exec, args, qkv.data<float>(), out.data<float>(),
                                           static_cast<float*>(row_max), state_.data<float>());
      return;
    }
    check(ctx, args, qkv.dtype());
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_forward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), state_.data<T>(),
                                    static_cast<tile::acc_t<T>*>(row_max), nullptr);
    });
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    if (qkv.dtype() == DType::kFloat32) {
      kernels::attention_flash_f32_backward(ctx.exec, args, qkv.data<float>(), out.data<float>(), dout.data<float>(),
                                            state_.data<float>(), dqkv.data<float>());
      return;
    }
    check(ctx, args, qkv.dtype());
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_backward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), state_.data<T>(), dout.data<T>(),
                                     dqkv.data<T>(), nullptr);
    });
  }

  bool reads_dropout_step() const override { return true; }  // the kernels: dropout_seed_of

 private:
  /// The bf16 flash kernels run here: else the state buffer would be taken for probabilities.
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
  if (q.backend != tile::Backend::kCuda || (q.dtype != DType::kBFloat16 && q.dtype != DType::kFloat32))
    return "our flash kernels run on CUDA in bfloat16 and float32 only";
  if (q.dtype == DType::kFloat32) {
    const std::string why = kernels::attention_flash_f32_unsupported(q.args);
    return why.empty() ? "" : "our float32 flash kernels: " + why;
  }
  kernels::AttentionArgs a = q.args;
  a.materialize = false;
  if (!kernels::attention_uses_flash(a))
    return "our flash kernels take d_head 64 or 128, a window only with causal masking, and T >= 2 (d_head + 2) or so";
  return "";
}

}  // namespace

BENCH_ATTENTION_CORE(FlashCore, "flash",
                     "our fused attention on CUDA (d_head 64 or 128): bf16 on the tensor cores, float32 in FFMA; no T "
                     "x T probabilities",
                     flash_unsupported, prefers_always, nullptr)

}  // namespace bench::attention
