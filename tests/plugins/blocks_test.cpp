// The blocks plugin: the parallel block against its closed form, built from the same real
// components (norm positions, attention, FFN) with the same weights, under every norm position,
// with one shared norm position or one per branch (GPT-NeoX); parameter names and counts of
// serial against parallel blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <list>

#include "bench/interfaces.h"
#include "bench/ops.h"
#include "bench/random.h"
#include "model/model.h"
#include "support/component_rig.h"

namespace bench {
namespace blocks_test {
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

// A parallel block "blk" and, beside it, the sublayers it holds built alone: the attention "a",
// the FFN "f", and the norm positions "ra" and "rf" to wrap them (a case copies the block's
// weights into them); x, its input, drawn by draw_input() once the weights are set.
struct BlockCase {
  explicit BlockCase(const std::string& model_lines) : rig(model_lines) {
    block = rig.build<Sublayer>(Slot::kBlock, "blk");
    attn = rig.build<Sublayer>(Slot::kAttention, "a");
    ffn = rig.build<Sublayer>(Slot::kFfn, "f");
    attn_res = rig.build<Residual>(Slot::kNormPosition, "ra");
    ffn_res = rig.build<Residual>(Slot::kNormPosition, "rf");
  }
  void draw_input() {
    x = &rig.tensor();
    Rng xr(9);
    for (double& v : *x) v = xr.normal();
  }
  std::vector<double> run(Sublayer& s) {
    std::vector<double>& y = rig.tensor();
    Tensor xt = rig.view(*x), yt = rig.view(y);
    s.forward(xt, yt, ctx);
    return y;
  }
  std::vector<double> run(Residual& res, Sublayer& f) {
    std::vector<double>& y = rig.tensor();
    Tensor xt = rig.view(*x), yt = rig.view(y);
    res.forward(xt, yt, f, ctx);
    return y;
  }

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

// Parallel block "blk" and, with the same weights, the norm position wrapping the attention
// alone ("ra" around "a") and the FFN alone ("rf" around "f").
struct ParallelCase : BlockCase {
  explicit ParallelCase(const std::string& norm_position)
      : BlockCase("block = \"parallel\"\nnorm_position = \"" + norm_position + "\"\nnorm = \"layernorm\"\n") {
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
    draw_input();
  }
  void zero(const std::string& name) { rig.param(name).value.zero(); }
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
    expect_close(c.run(*c.block), c.run(*c.ffn_res, *c.ffn), "attention zeroed");
  }
  {
    ParallelCase c(GetParam());
    c.zero("blk.ffn.w_out");
    expect_close(c.run(*c.block), c.run(*c.attn_res, *c.attn), "FFN zeroed");
  }
}

INSTANTIATE_TEST_SUITE_P(BlocksPlugin, ParallelBlockForm, ::testing::Values("pre", "post", "double", "output"),
                         [](const auto& tp) { return tp.param; });

// Pre-norm (GPT-J): y = x + attn(norm(x)) + ffn(norm(x)) = (x + attn(norm x)) + (x + ffn(norm x)) - x.
TEST(BlocksPlugin, ParallelPreNormIsTheSumOfTheTwoBranches) {
  ParallelCase c("pre");
  const std::vector<double> y = c.run(*c.block);
  const std::vector<double> ya = c.run(*c.attn_res, *c.attn);
  const std::vector<double> yf = c.run(*c.ffn_res, *c.ffn);
  std::vector<double> want(y.size());
  for (size_t i = 0; i < y.size(); ++i) want[i] = ya[i] + yf[i] - (*c.x)[i];
  expect_close(y, want, "pre-norm parallel block");
}

// Per-branch norms: "blk" with norms = "per_branch", and the norm positions "ra" around the
// attention "a" and "rf" around the FFN "f" with the block's weights, its attn_norm's and its
// ffn_norm's (moved off their init, differently, so that swapped norms would show).
struct PerBranchCase : BlockCase {
  explicit PerBranchCase(const std::string& norm_position)
      : BlockCase("block = { type = \"parallel\", norms = \"per_branch\" }\nnorm_position = \"" + norm_position +
                  "\"\nnorm = \"layernorm\"\nattention = { type = \"causal\", bias = \"all\" }\n"
                  "ffn = { type = \"mlp\", d_ff = 32, bias = true }\n") {
    Rng rng(5);
    int moved = 0;
    for (const char* branch : {"blk.attn_norm", "blk.ffn_norm"})
      for (const char* n : {".weight", ".bias", ".in.weight", ".in.bias", ".out.weight", ".out.bias"}) {
        try {
          Param& p = rig.param(std::string(branch) + n);
          for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<double>()[i] += 0.3 * rng.normal();
          ++moved;
        } catch (const Error&) {  // not every norm position has every norm
        }
      }
    EXPECT_GE(moved, 4);
    for (const char* b : {"blk.attn.bqkv", "blk.attn.bo", "blk.ffn.b_in", "blk.ffn.b_out"}) {
      Param& p = rig.param(b);
      for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<double>()[i] = 0.2 * rng.normal();
    }
    rig.copy_params("blk.attn", "a");
    rig.copy_params("blk.ffn", "f");
    rig.copy_params("blk.attn_norm", "ra");
    rig.copy_params("blk.ffn_norm", "rf");
    draw_input();
  }
};

class PerBranchForm : public ::testing::TestWithParam<std::string> {};

// y = x + (R_attn(x) - x) + (R_ffn(x) - x): pre-norm gives GPT-NeoX's x + attn(norm_a(x)) +
// ffn(norm_f(x)), each branch with its own norm's weights.
TEST_P(PerBranchForm, EachBranchInsideItsOwnNormPosition) {
  PerBranchCase c(GetParam());
  const std::vector<double> y = c.run(*c.block);
  const std::vector<double> ya = c.run(*c.attn_res, *c.attn);
  const std::vector<double> yf = c.run(*c.ffn_res, *c.ffn);
  std::vector<double> want(y.size());
  for (size_t i = 0; i < y.size(); ++i) want[i] = (*c.x)[i] + (ya[i] - (*c.x)[i]) + (yf[i] - (*c.x)[i]);
  expect_close(y, want, "per-branch parallel block");
}

INSTANTIATE_TEST_SUITE_P(BlocksPlugin, PerBranchForm, ::testing::Values("pre", "post", "double", "output"),
                         [](const auto& tp) { return tp.param; });

// Pre-norm, written out: y = x + attn(norm_a(x)) + ffn(norm_f(x)) with the branches' own
// LayerNorms computed here.
TEST(BlocksPlugin, PerBranchPreNormIsGptNeoX) {
  PerBranchCase c("pre");
  const int64_t rows = c.rig.rows(), d = c.rig.width();
  std::vector<double> na(static_cast<size_t>(rows * d)), nf(na.size());
  const auto layer_norm = [&](const std::string& norm, std::vector<double>& out) {
    const double* w = c.rig.param(norm + ".weight").value.data<double>();
    const double* b = c.rig.param(norm + ".bias").value.data<double>();
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) mean += (*c.x)[r * d + i] / static_cast<double>(d);
      for (int64_t i = 0; i < d; ++i) var += std::pow((*c.x)[r * d + i] - mean, 2) / static_cast<double>(d);
      for (int64_t i = 0; i < d; ++i) out[r * d + i] = ((*c.x)[r * d + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
  };
  layer_norm("blk.attn_norm", na);
  layer_norm("blk.ffn_norm", nf);
  std::vector<double> ya(na.size()), yf(na.size());
  Tensor nat = c.rig.view(na), nft = c.rig.view(nf), yat = c.rig.view(ya), yft = c.rig.view(yf);
  c.attn->forward(nat, yat, c.ctx);
  c.ffn->forward(nft, yft, c.ctx);
  std::vector<double> want(na.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = (*c.x)[i] + ya[i] + yf[i];
  expect_close(c.run(*c.block), want, "GPT-NeoX");
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

TEST(BlocksPlugin, PerBranchHasANormPositionPerBranch) {
  const int64_t layers = 3, dm = 32;
  const std::string per_branch = "block = { type = \"parallel\", norms = \"per_branch\" }\n";
  // One norm more per layer than the shared form: the serial block's count.
  for (const char* norm : {"rmsnorm", "layernorm"}) {
    const std::string n = std::string("norm = \"") + norm + "\"\n";
    const int64_t per_norm = std::string(norm) == "layernorm" ? 2 * dm : dm;
    EXPECT_EQ(model_with(per_branch + n).n_params() - model_with("block = \"parallel\"\n" + n).n_params(),
              layers * per_norm);
    EXPECT_EQ(model_with(per_branch + n).n_params(), model_with("block = \"serial\"\n" + n).n_params());
  }
  const Model p = model_with(per_branch);
  for (const char* name : {"blocks.2.attn_norm.weight", "blocks.2.ffn_norm.weight", "final_norm.weight"})
    EXPECT_NE(p.find_param(name), nullptr) << name;
  EXPECT_EQ(p.find_param("blocks.0.norm.weight"), nullptr);
  // The shared block's declared work is below the per-branch block's (one norm less per layer).
  EXPECT_LT(model_with("block = \"parallel\"\n").cost().flops_forward, p.cost().flops_forward);
}

TEST(BlocksPlugin, UnknownNormsValueIsAConfigError) {
  EXPECT_THROW(model_with("block = { type = \"parallel\", norms = \"both\" }\n"), ConfigError);
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
}  // namespace blocks_test
}  // namespace bench
