// The materializing core: S = scale q k^T, the masked softmax P kept in a [B, H, T, T] buffer
// (with the capped logits after it when there is a soft-cap), O = P v (kernels/attention.h). It
// runs every variant on every target and dtype: the CPU composes it from parallel tasks, a
// device from batched launches, one per product for all (batch, head) pairs. Its entropy probe
// sums the stored probabilities.
#include "core.h"
#include "kernels/elementwise.h"
#include "kernels/probes.h"

namespace bench::attention {

namespace {

class MaterializingCore final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    kernels::AttentionArgs a = args;
    a.materialize = true;  // never the flash kernels (bf16 on CUDA): this core keeps P
    probs_ = ctx.buffer({kernels::attention_probs_size(a)});
    work_ = ctx.buffer({dispatch_float(
        ctx.dtype(), [&]<class T>() { return kernels::attention_workspace_size<T>(tile::Exec{ctx.backend()}, a); })});
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    const kernels::AttentionArgs a = materialized(ctx, args, qkv.dtype());
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_forward<T>(ctx.exec, a, qkv.data<T>(), out.data<T>(), probs_.data<T>(),
                                    static_cast<tile::acc_t<T>*>(row_max), work_.data<T>());
    });
  }

  double entropy_sum(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor&) override {
    // The probabilities are kept: -sum p ln p over all of them (masked ones are 0 and add nothing).
    return dispatch_float(qkv.dtype(), [&]<class T>() {
      return kernels::sum_of<T>(ctx.exec, kernels::SumOf::kEntropy, probs_.data<T>(),
                                args.batch * args.n_heads * args.seq * args.seq);
    });
  }

  void entropy_sum_into(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor&,
                        double* partial, double* result) override {
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::sum_of_at<T>(ctx.exec, kernels::SumOf::kEntropy, probs_.data<T>(),
                            args.batch * args.n_heads * args.seq * args.seq, partial, result);
    });
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    const kernels::AttentionArgs a = materialized(ctx, args, qkv.dtype());
    dispatch_float(qkv.dtype(), [&]<class T>() {
      kernels::attention_backward<T>(ctx.exec, a, qkv.data<T>(), out.data<T>(), probs_.data<T>(), dout.data<T>(),
                                     dqkv.data<T>(), work_.data<T>());
    });
  }

  bool keeps_probabilities() const override { return true; }
  bool reads_dropout_step() const override { return true; }  // DropoutRows: dropout_seed_of

 private:
  /// args with materialize set, after checking that the workspace made at setup is the one the
  /// running target's composition needs (a model set up for the CPU but run on a device would
  /// overrun it).
  kernels::AttentionArgs materialized(const RunContext& ctx, const kernels::AttentionArgs& args, DType dtype) const {
    kernels::AttentionArgs a = args;
    a.materialize = true;
    const int64_t need =
        dispatch_float(dtype, [&]<class T>() { return kernels::attention_workspace_size<T>(ctx.exec, a); });
    if (need > work_.numel())
      throw Error("attention: set up for another target than " + tile::target_name(ctx.exec) +
                  " (its workspace holds " + std::to_string(work_.numel()) + " elements, " + std::to_string(need) +
                  " needed): build the model for the target it runs on (ModelSpec::backend)");
    return a;
  }

  Tensor probs_, work_;
};

std::string runs_everything(const CoreQuery&) { return ""; }

}  // namespace

BENCH_ATTENTION_CORE(MaterializingCore, "materializing",
                     "S = q k^T and P kept in B H T^2 elements; batched launches on a device; every target and "
                     "variant",
                     runs_everything, prefers_always, nullptr)
}  // namespace bench::attention
