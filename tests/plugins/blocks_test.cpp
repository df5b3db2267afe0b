// The blocks plugin: the parallel block against its closed form, built from the same real
// components (norm positions, attention, FFN) with the same weights, under every norm position;
// parameter names and counts of serial against parallel blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <list>

#include "bench/interfaces.h"
#include "bench/ops.h"
#include "bench/random.h"
#include "model/model.h"
#include "support/component_rig.h"

namespace bench {
namespace {

// Components of a resolved float64 case built outside a model, as the model would (children from
// the configured slots, dotted parameter names, weights drawn as the model draws them), in a
// test::ComponentRig with the position component built first.
class Rig {
 public:
  explicit Rig(const std::string& model_lines)
      : rig_(test::resolve_first("[model]\nd_model = 16\nn_heads = 2\nseq_len = 5\nbatch_size = 2\n"
                                 "dtype = \"float64\"\ninit_std = 0.3\n" +
                                 model_lines + "\n[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n")
                 .model,
             test::ComponentRig::Options().at_layer(0).filled_by(test::init_by_kind(17))) {
    position_ = rig_.build<Position>(Slot::kPosition, "pos");
    rig_.set_position(position_.get());
  }

  template <class I>
  std::unique_ptr<I> build(Slot slot, const std::string& name) {
    return rig_.build<I>(slot, name);
  }

  /// Copy every parameter under `from.` to the same name under `to.`.
  void copy_params(const std::string& from, const std::string& to) {
    int copied = 0;
    for (Param& p : rig_.params()) {
      if (p.name.rfind(from + ".", 0) != 0) continue;
      ops::copy(p.value, param(to + p.name.substr(from.size())).value);
      ++copied;
    }
    EXPECT_GT(copied, 0) << from;
  }
  Param& param(const std::string& name) { return rig_.param(name); }
  int64_t rows() const { return rig_.rows(); }
  int64_t width() const { return rig_.width(); }
  std::vector<double>& tensor() { return storage_.emplace_back(static_cast<size_t>(rows() * width()), 0.0); }
  Tensor view(std::vector<double>& v) const { return Tensor(v.data(), DType::kFloat64, {rows(), width()}); }

 private:
  test::ComponentRig rig_;
  std::list<std::vector<double>> storage_;
  std::unique_ptr<Position> position_;
};

// Parallel block "blk" and, with the same weights, the norm position wrapping the attention
// alone ("ra" around "a") and the FFN alone ("rf" around "f").
struct ParallelCase {
  explicit ParallelCase(const std::string& norm_position)
      : rig("block = \"parallel\"\nnorm_position = \"" + norm_position + "\"\nnorm = \"layernorm\"\n") {
    block = rig.build<Sublayer>(Slot::kBlock, "blk");
    attn = rig.build<Sublayer>(Slot::kAttention, "a");
    ffn = rig.build<Sublayer>(Slot::kFfn, "f");
    attn_res = rig.build<Residual>(Slot::kNormPosition, "ra");
    ffn_res = rig.build<Residual>(Slot::kNormPosition, "rf");
    // Norm gains and biases away from their 1 / 0 initialization, so that a mixed-up norm shows.
    Rng rng(5);
    for (const char* n : {"blk.norm.weight", "blk.norm.bias", "blk.norm.in.weight", "blk.norm.out.bias"}) {
      try {
        Param& p = rig.param(n);
        for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<double>()[i] += 0.3 * rng.normal();
      } catch (const Error&) {  // not every norm position has every norm
      }
    }
    rig.copy_params("blk.attn", "a");
    rig.copy_params("blk.ffn", "f");
    rig.copy_params("blk.norm", "ra");
    rig.copy_params("blk.norm", "rf");
    x = &rig.tensor();
    Rng xr(9);
    for (double& v : *x) v = xr.normal();
  }
  std::vector<double> run_block() {
    std::vector<double>& y = rig.tensor();
    Tensor xt = rig.view(*x), yt = rig.view(y);
    block->forward(xt, yt, ctx);
    return y;
  }
  std::vector<double> run_residual(Residual& res, Sublayer& f) {
    std::vector<double>& y = rig.tensor();
    Tensor xt = rig.view(*x), yt = rig.view(y);
    res.forward(xt, yt, f, ctx);
    return y;
  }
  void zero(const std::string& name) { rig.param(name).value.zero(); }

  Rig rig;
  std::unique_ptr<Sublayer> block, attn, ffn;
  std::unique_ptr<Residual> attn_res, ffn_res;
  std::vector<double>* x = nullptr;
  RunContext ctx = [] {
    RunContext c;
    c.training = false;
    c.probes = false;
    return c;
  }();
};

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst, 1e-12) << what;
}

class ParallelBlockForm : public ::testing::TestWithParam<std::string> {};

// With the attention's output projection zeroed the attention branch adds nothing, so the block
// is the norm position wrapping the FFN alone (pre: x + ffn(norm(x)); post: norm(x + ffn(x));
// double: x + norm_out(ffn(norm_in(x))); output: x + norm(ffn(x))); and the other way round.
TEST_P(ParallelBlockForm, OneBranchZeroedIsTheOtherInsideTheSameNormPosition) {
  {
    ParallelCase c(GetParam());
    c.zero("blk.attn.wo");
    expect_close(c.run_block(), c.run_residual(*c.ffn_res, *c.ffn), "attention zeroed");
  }
  {
    ParallelCase c(GetParam());
    c.zero("blk.ffn.w_out");
    expect_close(c.run_block(), c.run_residual(*c.attn_res, *c.attn), "FFN zeroed");
  }
}

INSTANTIATE_TEST_SUITE_P(BlocksPlugin, ParallelBlockForm, ::testing::Values("pre", "post", "double", "output"),
                         [](const auto& tp) { return tp.param; });

// Pre-norm (GPT-J): y = x + attn(norm(x)) + ffn(norm(x)) = (x + attn(norm x)) + (x + ffn(norm x)) - x.
TEST(BlocksPlugin, ParallelPreNormIsTheSumOfTheTwoBranches) {
  ParallelCase c("pre");
  const std::vector<double> y = c.run_block();
  const std::vector<double> ya = c.run_residual(*c.attn_res, *c.attn);
  const std::vector<double> yf = c.run_residual(*c.ffn_res, *c.ffn);
  std::vector<double> want(y.size());
  for (size_t i = 0; i < y.size(); ++i) want[i] = ya[i] + yf[i] - (*c.x)[i];
  expect_close(y, want, "pre-norm parallel block");
}

const char* kModel =
    "[model]\nd_model = 32\nn_layers = 3\nn_heads = 4\nseq_len = 16\nbatch_size = 4\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";

Model model_with(const std::string& lines) {
  std::string toml = kModel;
  toml.insert(toml.find("[data]"), lines);
  return Model(test::resolve_first(toml).model, test::builtin_registry(), 1, /*plan_only=*/true);
}

TEST(BlocksPlugin, ParallelHasOneSharedNormPerResidual) {
  const int64_t L = 3, D = 32;
  // pre-norm: serial has attn_norm and ffn_norm, parallel one norm.
  EXPECT_EQ(model_with("block = \"serial\"\n").n_params() - model_with("block = \"parallel\"\n").n_params(), L * D);
  EXPECT_EQ(model_with("block = \"serial\"\nnorm = \"layernorm\"\n").n_params() -
                model_with("block = \"parallel\"\nnorm = \"layernorm\"\n").n_params(),
            L * 2 * D);
  // double norm: four norms per serial block, two (in, out) per parallel block.
  EXPECT_EQ(model_with("block = \"serial\"\nnorm_position = \"double\"\n").n_params() -
                model_with("block = \"parallel\"\nnorm_position = \"double\"\n").n_params(),
            L * 2 * D);
  // Same attention and FFN either way; no norm at all: the same count.
  EXPECT_EQ(model_with("block = \"serial\"\nnorm = \"none\"\n").n_params(),
            model_with("block = \"parallel\"\nnorm = \"none\"\n").n_params());

  const Model p = model_with("block = \"parallel\"\n");
  for (const char* name : {"blocks.2.norm.weight", "blocks.2.attn.wqkv", "blocks.2.attn.wo", "blocks.2.ffn.w_in",
                           "blocks.2.ffn.w_out", "final_norm.weight"})
    EXPECT_NE(p.find_param(name), nullptr) << name;
  EXPECT_EQ(p.find_param("blocks.0.attn_norm.weight"), nullptr);
  const Model d = model_with("block = \"parallel\"\nnorm_position = \"double\"\n");
  EXPECT_NE(d.find_param("blocks.0.norm.in.weight"), nullptr);
  EXPECT_NE(d.find_param("blocks.0.norm.out.weight"), nullptr);
  // Post-norm: the block output is normalized, so no final norm (the norm position decides).
  EXPECT_EQ(model_with("block = \"parallel\"\nnorm_position = \"post\"\n").find_param("final_norm.weight"), nullptr);
}

TEST(BlocksPlugin, ParallelDeclaresLessWorkThanSerial) {
  // One norm fewer per layer; the branch sum's add replaces the second residual add.
  const Cost s = model_with("block = \"serial\"\n").cost();
  const Cost p = model_with("block = \"parallel\"\n").cost();
  EXPECT_LT(p.flops_forward, s.flops_forward);
  EXPECT_LT(p.flops_backward, s.flops_backward);
  EXPECT_GT(p.flops_forward, 0.95 * s.flops_forward);  // the matrices dominate
}

}  // namespace
}  // namespace bench
