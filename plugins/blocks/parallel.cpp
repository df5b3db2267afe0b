// Parallel block (GPT-J, PaLM, GPT-NeoX, Falcon): attention and FFN read the same input and are
// added to the residual stream once. With `norms = "shared"` (the default) the configured norm
// position wraps the sum of the two branches, f(x) = attn(x) + ffn(x), so with one shared norm:
//   pre     y = x + attn(norm(x)) + ffn(norm(x))              GPT-J, PaLM
//   post    y = norm(x + attn(x) + ffn(x))
//   double  y = x + norm_out(attn(norm_in(x)) + ffn(norm_in(x)))
//   output  y = x + norm(attn(x) + ffn(x))
// All four are well defined, so no combination is rejected. Attention and FFN stay separate
// components: their input projections are not fused into one GEMM (PaLM's throughput gain),
// so the block saves one norm and one residual add per layer over the serial block.
//
// With `norms = "per_branch"` each branch has a norm position of its own (attn_norm, ffn_norm,
// as the serial block names them) and the block adds what each contributes beyond its input:
//   y = x + (R_attn(x) - x) + (R_ffn(x) - x),  computed as  R_attn(x) + R_ffn(x) - x,
// where R(x) is the norm position around one branch. Under pre-norm that is GPT-NeoX's
// y = x + attn(norm_a(x)) + ffn(norm_f(x)); under output-side norms x + norm_a(attn(x)) +
// norm_f(ffn(x)); under double norms each branch's in and out norms. Under post-norm it is
// norm_a(x + attn(x)) + norm_f(x + ffn(x)) - x: defined, but no published model's. The block
// knows no norm position by name, so it forms the sum from the two residuals' outputs; the
// subtraction costs about one rounding of x more than adding the branches directly.
#include "blocks.h"

namespace bench::blocks {

namespace {

// f(x) = a(x) + b(x): the two branches as one sublayer for the norm position to wrap. Not a
// registered component: it owns no parameters, and its adds are counted by the block.
class BranchSum final : public Sublayer {
 public:
  BranchSum(Sublayer& a, Sublayer& b, Tensor out_b, Tensor grad_b) : a_(a), b_(b), out_b_(out_b), grad_b_(grad_b) {}
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    a_.forward(x, y, ctx);
    b_.forward(x, out_b_, ctx);
    ops::add(ctx, y, out_b_, y);
  }
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    a_.backward(dy, dx, ctx);
    b_.backward(dy, grad_b_, ctx);
    ops::add(ctx, dx, grad_b_, dx);
  }

 private:
  Sublayer& a_;
  Sublayer& b_;
  Tensor out_b_, grad_b_;
};

}  // namespace

class ParallelBlock final : public Sublayer {
 public:
  explicit ParallelBlock(const Params& p) : per_branch_(p.string("norms") == "per_branch") {}
  void setup(SetupContext& ctx) override {
    attn_ = ctx.build_as<Sublayer>(Slot::kAttention, "attn");
    ffn_ = ctx.build_as<Sublayer>(Slot::kFfn, "ffn");
    if (per_branch_) {
      attn_res_ = ctx.build_as<Residual>(Slot::kNormPosition, "attn_norm");
      ffn_res_ = ctx.build_as<Residual>(Slot::kNormPosition, "ffn_norm");
      y_ffn_ = ctx.buffer({ctx.rows(), ctx.width()});
      dx_ffn_ = ctx.buffer({ctx.rows(), ctx.width()});
    } else {
      res_ = ctx.build_as<Residual>(Slot::kNormPosition, "norm");
      sum_ = std::make_unique<BranchSum>(*attn_, *ffn_, ctx.buffer({ctx.rows(), ctx.width()}),
                                         ctx.buffer({ctx.rows(), ctx.width()}));
    }
    n_ = ctx.rows() * ctx.width();
    esize_ = dtype_size(ctx.dtype());
  }
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    if (!per_branch_) return res_->forward(x, y, *sum_, ctx);
    attn_res_->forward(x, y, *attn_, ctx);
    ffn_res_->forward(x, y_ffn_, *ffn_, ctx);
    ops::add(ctx, y, y_ffn_, y);
    ops::axpy(ctx, -1.0, x, y);
  }
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    if (!per_branch_) return res_->backward(dy, dx, *sum_, ctx);
    // Each residual's input gradient carries dy once (its identity path); x's carries it once.
    attn_res_->backward(dy, dx, *attn_, ctx);
    ffn_res_->backward(dy, dx_ffn_, *ffn_, ctx);
    ops::add(ctx, dx, dx_ffn_, dx);
    ops::axpy(ctx, -1.0, dy, dx);
  }
  Cost cost() const override {
    // Shared: the branch sum, one add forward, one add of the input gradients backward. Per
    // branch: an add and a subtraction of x (of dy backward), each way.
    const double n = static_cast<double>(n_) * (per_branch_ ? 2.0 : 1.0);
    const double b = 3 * n * static_cast<double>(esize_);
    return Cost{n, n, b, b};
  }

 private:
  bool per_branch_;
  std::unique_ptr<Sublayer> attn_, ffn_;
  std::unique_ptr<Residual> res_;                 // shared
  std::unique_ptr<BranchSum> sum_;                // shared
  std::unique_ptr<Residual> attn_res_, ffn_res_;  // per branch
  Tensor y_ffn_, dx_ffn_;                         // per branch: the FFN residual's output, input gradient
  int64_t n_ = 0;
  size_t esize_ = 4;
};

ComponentInfo parallel_info() {
  return make_info<ParallelBlock>(
      Slot::kBlock, "parallel",
      "parallel block: attention + FFN from one input, one residual add; one shared norm position (GPT-J, PaLM) "
      "or one per branch (GPT-NeoX)",
      {ParamSpec::choice("norms", "shared", {"shared", "per_branch"},
                         "shared: one norm position around attn(x) + ffn(x) (GPT-J, PaLM); per_branch: each branch "
                         "inside a norm position of its own, attn_norm and ffn_norm (GPT-NeoX)")});
}

}  // namespace bench::blocks
