// The cuDNN core: cuDNN's fused flash attention (SDPA) on the same qkv rows (kernels/attention.h,
// section 4), the baseline to compare ours against: CUDA and bf16, no soft-cap or dropout. It
// keeps the log-sum-exp per query; cuDNN reports no row max, so the max-logit probe takes a pass
// of its own (kernels::attention_row_max), and the entropy probe recomputes from qkv.
#include "core.h"
#include "kernels/catalog.h"

namespace bench::attention {

namespace {

class CudnnCore final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    stats_ = ctx.buffer({kernels::attention_cudnn_stats_size(args)}, DType::kFloat32);
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_cudnn_forward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), stats_.data<float>());
      if (row_max != nullptr)
        kernels::attention_row_max<T>(ctx.exec, args, qkv.data<T>(), static_cast<tile::acc_t<T>*>(row_max));
    });
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_cudnn_backward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), stats_.data<float>(),
                                           dout.data<T>(), dqkv.data<T>());
    });
  }

 private:
  Tensor stats_;  // the log-sum-exp per query [B, H, T], float
};

/// The target must run cuDNN's kernels (CUDA, bf16, a cuDNN that loads: the target answers, as
/// "kernel attention_cudnn_forward cannot run on cpu in float32: ..."), cuDNN must cover the
/// variant, and the loaded version take it.
std::string cudnn_unsupported(const CoreQuery& q) {
  const tile::Exec target{q.backend};
  std::string why;
  const bool runs =
      dispatch_float(q.dtype, [&]<class T>() { return kernels::supports<T>(target, "attention_cudnn_forward", &why); });
  if (!runs)
    return "kernel attention_cudnn_forward cannot run on " + tile::target_name(target) + " in " +
           std::string(dtype_name(q.dtype)) + ": " + why;
  return dispatch_float(q.dtype, [&]<class T>() {
    std::string reason;
    (void)kernels::attention_cudnn_runs<T>(target, q.args, &reason);
    return reason;
  });
}

}  // namespace

BENCH_ATTENTION_CORE(CudnnCore, "cudnn",
                     "cuDNN's fused SDPA, the baseline (CUDA, bf16; no soft-cap or dropout): no T x T probabilities",
                     cudnn_unsupported, prefers_always, kernels::attention_cudnn_unsupported)

}  // namespace bench::attention
