// The tiled core: the CPU's flash-style attention (kernels/attention_tiled.h), float or double,
// O(T) memory per query row instead of the T x T probabilities. It keeps the log-sum-exp per
// query in the compute type; the entropy probe recomputes from qkv. `core = "auto"` takes it on
// the CPU where the probabilities would pass 64 MiB per layer (kernels::attention_tiled_preferred).
#include "core.h"
#include "kernels/attention_tiled.h"

namespace bench::attention {

namespace {

class TiledCore final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    lse_ = ctx.buffer({kernels::attention_tiled_state_size(args)}, acc);
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      using A = tile::acc_t<T>;
      kernels::attention_tiled_forward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(), static_cast<A*>(lse_.raw()),
                                          static_cast<A*>(row_max));
    });
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_tiled_backward<T>(ctx.exec, args, qkv.data<T>(), out.data<T>(),
                                           static_cast<const tile::acc_t<T>*>(lse_.raw()), dout.data<T>(),
                                           dqkv.data<T>());
    });
  }

 private:
  Tensor lse_;  // the log-sum-exp per query [B, H, T], compute type
};

std::string tiled_unsupported(const CoreQuery& q) {
  const tile::Exec target{q.backend};
  return dispatch_float(q.dtype, [&]<class T>() { return kernels::attention_tiled_unsupported<T>(target); });
}
bool tiled_preferred(const CoreQuery& q) {
  return kernels::attention_tiled_preferred(q.args, static_cast<double>(dtype_size(q.dtype)));
}

}  // namespace

BENCH_ATTENTION_CORE(TiledCore, "tiled",
                     "the CPU's flash-style attention (float, double): O(T) memory per query row; auto takes it "
                     "past 64 MiB of probabilities per layer",
                     tiled_unsupported, tiled_preferred, nullptr)

}  // namespace bench::attention
