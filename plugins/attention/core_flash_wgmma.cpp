// The flash_wgmma cores: the bf16 flash forward and backward on Hopper's warpgroup MMA
// (kernels/cuda/flash_attention_wgmma_kernels.cuh, flash_attention_wgmma_backward_kernels.cuh:
// wgmma, sm_90a), with the flash core's state (the log-sum-exp, then the backward's workspace);
// where the wgmma backward refuses a call (its refusal is not empty) the mma.sync flash backward
// runs, as before it existed. Two cores, one class: "flash_wgmma" runs the forward whose two
// warpgroups go in step, "flash_wgmma_ws" the warp-specialized one (a producer warpgroup, full and
// empty mbarriers, the consumers' ping-pong); the backward is the same. Compiled and checked by
// the CPU warp emulator, NOT yet run on a GPU: `core = "auto"` takes neither (their prefers answer
// false), and which forward is faster is the first GPU session's question; a layer gets one only
// by naming it, and where it cannot run (not CUDA in bf16, a variant the bf16 flash kernels
// refuse, a device that is not compute capability 9.0) setup says why in one line. The entropy
// probe recomputes from qkv.
#include "core.h"
#include "kernels/attention_flash_wgmma.h"

namespace bench::attention {

namespace {

template <bool kWarpSpecialized>
class FlashWgmmaCoreOf final : public AttentionCore {
 public:
  void setup(SetupContext& ctx, const kernels::AttentionArgs& args) override {
    state_ = ctx.buffer({kernels::attention_flash_state_size(args)});
  }

  void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
               void* row_max) override {
    if (qkv.dtype() != DType::kBFloat16) throw Error("attention: the flash_wgmma core runs in bfloat16 only");
    kernels::attention_flash_wgmma_forward(ctx.exec, args, qkv.data<tile::bf16>(), out.data<tile::bf16>(),
                                           static_cast<float*>(row_max), state_.data<tile::bf16>(), kWarpSpecialized);
  }

  void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                const Tensor& dout, Tensor& dqkv) override {
    if (kernels::attention_flash_wgmma_backward_refusal(ctx.exec, args).empty()) {
      kernels::attention_flash_wgmma_backward(ctx.exec, args, qkv.data<tile::bf16>(), out.data<tile::bf16>(),
                                              state_.data<tile::bf16>(), dout.data<tile::bf16>(),
                                              dqkv.data<tile::bf16>());
      return;
    }
    // The mma.sync flash backward (attention_backward takes the flash path: attention_flash_wgmma_refusal
    // required it).
    kernels::attention_backward<tile::bf16>(ctx.exec, args, qkv.data<tile::bf16>(), out.data<tile::bf16>(),
                                            state_.data<tile::bf16>(), dout.data<tile::bf16>(), dqkv.data<tile::bf16>(),
                                            nullptr);
  }

  bool reads_dropout_step() const override { return true; }  // the kernels: dropout_seed_of

 private:
  Tensor state_;
};

std::string flash_wgmma_unsupported(const CoreQuery& q) {
  if (q.backend != tile::Backend::kCuda || q.dtype != DType::kBFloat16)
    return "the wgmma flash forward runs on CUDA in bfloat16 only";
  kernels::AttentionArgs a = q.args;
  a.materialize = false;
  const std::string why = kernels::attention_flash_wgmma_refusal(tile::Exec{q.backend}, a);
  return why.empty() ? "" : "the wgmma flash forward: " + why;
}
// Never preferred: not run on a GPU yet (docs/flash-forward.md, "Flash attention forward on wgmma").
bool never(const CoreQuery&) { return false; }

using FlashWgmmaCore = FlashWgmmaCoreOf<false>;
using FlashWgmmaWsCore = FlashWgmmaCoreOf<true>;

}  // namespace

BENCH_ATTENTION_CORE(
    FlashWgmmaCore, "flash_wgmma",
    "our bf16 flash forward (two warpgroups in step) and backward on Hopper's wgmma (sm_90a; compiled, "
    "NOT yet run on a GPU: "
    "never taken by auto; the mma.sync flash backward where the wgmma one refuses)",
    flash_wgmma_unsupported, never, nullptr)

BENCH_ATTENTION_CORE(FlashWgmmaWsCore, "flash_wgmma_ws",
                     "flash_wgmma with the warp-specialized forward: a producer warpgroup fills the K/V ring under "
                     "mbarriers, the two consumer warpgroups take turns at the tensor cores (sm_90a; compiled, NOT yet "
                     "run on a GPU: never taken by auto)",
                     flash_wgmma_unsupported, never, nullptr)

}  // namespace bench::attention
