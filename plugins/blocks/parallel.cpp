// Parallel block (GPT-J, PaLM, GPT-NeoX, Falcon): attention and FFN read the same input and are
// added to the residual stream once. The configured norm position wraps the sum of the two
// branches, f(x) = attn(x) + ffn(x), so with one shared norm:
//   pre     y = x + attn(norm(x)) + ffn(norm(x))              GPT-J, PaLM
//   post    y = norm(x + attn(x) + ffn(x))
//   double  y = x + norm_out(attn(norm_in(x)) + ffn(norm_in(x)))
//   output  y = x + norm(attn(x) + ffn(x))
// All four are well defined, so no combination is rejected. Attention and FFN stay separate
// components: their input projections are not fused into one GEMM (PaLM's throughput gain),
// so the block saves one norm and one residual add per layer over the serial block.
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
  explicit ParallelBlock(const Params&) {}
  void setup(SetupContext& ctx) override {
    attn_ = ctx.build_as<Sublayer>(Slot::kAttention, "attn");
    ffn_ = ctx.build_as<Sublayer>(Slot::kFfn, "ffn");
    res_ = ctx.build_as<Residual>(Slot::kNormPosition, "norm");
    sum_ = std::make_unique<BranchSum>(*attn_, *ffn_, ctx.buffer({ctx.rows(), ctx.width()}),
                                       ctx.buffer({ctx.rows(), ctx.width()}));
    n_ = ctx.rows() * ctx.width();
    esize_ = dtype_size(ctx.dtype());
  }
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override { res_->forward(x, y, *sum_, ctx); }
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override { res_->backward(dy, dx, *sum_, ctx); }
  Cost cost() const override {
    // The branch sum: one add forward, one add of the input gradients backward.
    const double n = static_cast<double>(n_);
    const double b = 3 * n * static_cast<double>(esize_);
    return Cost{n, n, b, b};
  }

 private:
  std::unique_ptr<Sublayer> attn_, ffn_;
  std::unique_ptr<Residual> res_;
  std::unique_ptr<BranchSum> sum_;
  int64_t n_ = 0;
  size_t esize_ = 4;
};

ComponentInfo parallel_info() {
  return make_info<ParallelBlock>(
      Slot::kBlock, "parallel",
      "parallel block: attention + FFN from one input inside one norm position, one residual add (GPT-J, PaLM)", {});
}

}  // namespace bench::blocks
