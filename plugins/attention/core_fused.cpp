// The fused core: attention as two tile programs on the qkv rows in place
// (kernels/attention_fused.h), one launch forward and one backward on every target (cpu,
// emulated, guarded, CUDA), every variant, d_head up to 256. It keeps the log-sum-exp per query
// ([B, H, T], compute type); no probabilities and no head-major copies. The entropy probe recomputes from qkv. `core =
// "auto"` takes it on a device (CUDA, the emulated device) in float32 and float64, where the materializing core takes
// 12 launches a layer and B H T^2 probabilities; on the CPU the choice stays tiled or
// materializing (docs/variants/attention.md, "Cores").
#include "core.h"
#include "kernels/attention_fused.h"
#include "kernels/catalog.h"

namespace bench::attention {

namespace {

class FusedCore final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    lse_ = ctx.buffer({kernels::attention_fused_state_size(args)}, acc);
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      kernels::attention_fused_forward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), static_cast<A*>(lse_.raw()),
                                          static_cast<A*>(row_max));
    });
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      kernels::attention_fused_backward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(),
                                           static_cast<const A*>(lse_.raw()), dout.data<T>(), dqkv.data<T>());
    });
  }

  bool reads_dropout_step() const override { return true; }  // FusedShape::keep: dropout_seed_of

 private:
  Tensor lse_;  // the log-sum-exp per query [B, H, T], compute type
};

std::string fused_variant_unsupported(const kernels::AttentionArgs& args) {
  return kernels::attention_fused_unsupported(args);
}

std::string fused_unsupported(const CoreQuery& q) {
  if (std::string why = kernels::attention_fused_unsupported(q.args); !why.empty()) return why;
  const tile::Exec target{q.backend};
  std::string why;
  const bool runs = dispatch_float(q.dtype, [&]<class T>() {
    return kernels::supports<T>(target, "attention_fused_forward", &why) &&
           kernels::supports<T>(target, "attention_fused_backward", &why);
  });
  return runs ? "" : why;
}

/// auto takes it on a device in float32 and float64: one launch forward and one backward where
/// the materializing core takes 12 a layer (head-major copies included), and no B H T^2
/// probabilities. bf16 keeps cuDNN and flash first and the materializing core after them; the CPU
/// keeps its tiled or materializing choice.
bool fused_preferred(const CoreQuery& q) {
  return tile::runs_as_device(tile::Exec{q.backend}) && (q.dtype == DType::kFloat32 || q.dtype == DType::kFloat64);
}

}  // namespace

BENCH_ATTENTION_CORE(FusedCore, "fused",
                     "tile programs on the qkv rows in place (every target, every variant, d_head <= 256): 1 launch "
                     "forward, 1 backward, no T x T probabilities; auto takes it on a device in float32/float64",
                     fused_unsupported, fused_preferred, fused_variant_unsupported)

}  // namespace bench::attention
