// Model assembly: parameter counts in closed form, determinism, executor equivalence, training.
#include "model/model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/interfaces.h"
#include "support/toml_case.h"
#include "support/train_step.h"

namespace bench {
namespace model_test {
namespace {

const char* kBase =
    "[model]\nd_model = 32\nn_layers = 2\nn_heads = 4\nseq_len = 16\nbatch_size = 4\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";

using test::Batch;
using test::batch_of;

TEST(Model, ParameterCountMatchesClosedForm) {
  const ResolvedCase rc = test::resolve_first(kBase);
  Model m(rc.model, test::builtin_registry(), 1);
  const int64_t V = 256, D = 32, L = 2, dff = 96;  // 8/3 * 32 = 85.3 -> multiple of 32 -> 96
  const int64_t per_layer = 3 * D * D + D * D + 2 * dff * D + D * dff + 2 * D;
  EXPECT_EQ(m.n_params(), V * D + L * per_layer + D + V * D);
  EXPECT_EQ(m.n_params_embedding(), V * D);
  ASSERT_NE(m.find_param("blocks.1.attn.wqkv"), nullptr);
  ASSERT_NE(m.find_param("blocks.0.ffn_norm.weight"), nullptr);
  ASSERT_NE(m.find_param("final_norm.weight"), nullptr);
  EXPECT_EQ(m.find_param("blocks.0.ffn.w_in")->shape, (Shape{2 * dff, D}));
}

TEST(Model, TiedEmbeddingsShareOneMatrix) {
  const ResolvedCase rc = test::resolve_first(std::string(kBase) + "");
  std::string toml = kBase;
  toml.insert(toml.find("[data]"), "tie_embeddings = true\n");
  const ResolvedCase tied = test::resolve_first(toml);
  Model a(rc.model, test::builtin_registry(), 1), b(tied.model, test::builtin_registry(), 1);
  EXPECT_EQ(a.n_params() - b.n_params(), 256 * 32);
  EXPECT_EQ(b.find_param("head.weight"), nullptr);
}

TEST(Model, PostNormHasNoFinalNormByDefault) {
  std::string toml = kBase;
  toml.insert(toml.find("[data]"), "norm_position = \"post\"\n");
  Model m(test::resolve_first(toml).model, test::builtin_registry(), 1);
  EXPECT_EQ(m.find_param("final_norm.weight"), nullptr);
  std::string dbl = kBase;
  dbl.insert(dbl.find("[data]"), "norm_position = \"double\"\n");
  Model d(test::resolve_first(dbl).model, test::builtin_registry(), 1);
  EXPECT_NE(d.find_param("blocks.0.attn_norm.in.weight"), nullptr);
  EXPECT_NE(d.find_param("blocks.0.attn_norm.out.weight"), nullptr);
  EXPECT_NE(d.find_param("final_norm.weight"), nullptr);
}

TEST(Model, InitialLossIsNearUniformAndDeterministic) {
  const ResolvedCase rc = test::resolve_first(kBase);
  const Batch b = batch_of(rc, 0);
  RunContext ctx;
  ctx.training = false;
  Model m1(rc.model, test::builtin_registry(), 5), m2(rc.model, test::builtin_registry(), 5),
      m3(rc.model, test::builtin_registry(), 6);
  const double l1 = m1.forward(b.in.data(), b.tg.data(), ctx).loss;
  EXPECT_NEAR(l1, std::log(256.0), 0.1);  // small init: close to a uniform prediction
  EXPECT_EQ(l1, m2.forward(b.in.data(), b.tg.data(), ctx).loss);
  EXPECT_NE(l1, m3.forward(b.in.data(), b.tg.data(), ctx).loss);
}

TEST(Model, TrainingIsDeterministicAndLowersTheLoss) {
  const ResolvedCase rc = test::resolve_first(kBase);
  auto train = [&](int steps) {
    Model m(rc.model, test::builtin_registry(), 3);
    RunContext ctx;
    OptimizerStep opt;
    opt.lr = 1e-2;
    opt.decay_lr = opt.lr;
    opt.weight_decay = 0.1;
    opt.grad_clip = 1.0;
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      const Batch b = batch_of(rc, s);
      ctx.training = true;
      m.zero_grad();
      losses.push_back(m.forward(b.in.data(), b.tg.data(), ctx).loss);
      m.backward(ctx);
      m.optimizer_step(opt, ctx);
    }
    return losses;
  };
  const auto a = train(40), b = train(40);
  EXPECT_EQ(a, b);
  EXPECT_LT(a.back(), a.front() - 1.0) << "first " << a.front() << " last " << a.back();
}

/// One training forward and backward of a fresh model (seed 9) on `backend`, set up for it (the
/// emulated device composes as a device): the loss and the gradient's norm.
std::pair<double, double> fresh_step(const ResolvedCase& rc, const Batch& b, tile::Backend backend) {
  ModelSpec spec = rc.model;
  spec.backend = backend;
  Model m(spec, test::builtin_registry(), 9);
  return test::loss_and_grad_norm(m, b, backend);
}

/// The emulated device's step gives the CPU's loss and gradient norm, to rounding.
void expect_emulated_step_as_the_cpus(const ResolvedCase& rc) {
  const Batch b = batch_of(rc, 1);
  const auto cpu = fresh_step(rc, b, tile::Backend::kCpu);
  const auto emu = fresh_step(rc, b, tile::Backend::kEmulated);
  EXPECT_NEAR(cpu.first, emu.first, 1e-5);
  EXPECT_NEAR(cpu.second, emu.second, 1e-4 * cpu.second);
}

TEST(Model, EmulatedBlockExecutorGivesTheSameStep) { expect_emulated_step_as_the_cpus(test::resolve_first(kBase)); }

// A device folds the norm positions' residual adds into the norms' launches (bench/residual_norm.h);
// the CPU adds apart. Every position and norm type, with and without residual dropout (which
// keeps the add of a norm's output apart): the emulated device's step against the CPU's.
TEST(Model, EmulatedDeviceFoldsTheResidualAddsAsTheCpuAdds) {
  for (const char* position : {"pre", "post", "double", "output"})
    for (const char* norm : {"layernorm", "rmsnorm"})
      for (const char* dropout : {"0.0", "0.1"}) {
        SCOPED_TRACE(std::string(position) + " " + norm + " dropout_residual " + dropout);
        const ResolvedCase rc = test::resolve_first(
            "[model]\nd_model = 32\nn_layers = 2\nn_heads = 4\nseq_len = 16\nbatch_size = 4\nnorm_position = \"" +
            std::string(position) + "\"\nnorm = \"" + norm + "\"\ndropout_residual = " + dropout +
            "\n[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n");
        expect_emulated_step_as_the_cpus(rc);
      }
}

TEST(Model, CostCountsTheMatrixFlops) {
  const ResolvedCase rc = test::resolve_first(kBase);
  Model m(rc.model, test::builtin_registry(), 1);
  const Cost c = m.cost();
  // 2 FLOPs per weight per token for every matrix but the embedding lookup, plus attention.
  const double tokens = 4 * 16, D = 32, dff = 96, V = 256;
  const double matrices = 2 * (4 * D * D + 3 * dff * D) + V * D;
  const double dense = 2 * matrices * tokens;
  EXPECT_GT(c.flops_forward, dense);
  EXPECT_LT(c.flops_forward, dense * 1.3);
  EXPECT_NEAR(c.flops_backward / c.flops_forward, 2.0, 0.2);
}

// A case's plan: what the real model will be (bytes, cost, parameters), measured without memory,
// and the case's validation: each component checks itself before its setup, at the key.
TEST(Model, ThePlanIsTheModelWithoutMemoryAndValidatesEveryComponent) {
  for (const char* extra : {"", "norm_position = \"post\"\n", "block = \"parallel\"\nffn = \"mlp\"\n"}) {
    std::string toml = kBase;
    toml.insert(toml.find("[data]"), extra);
    const ResolvedCase rc = test::resolve_first(toml);
    const ModelPlan plan = Model::plan(rc.model, test::builtin_registry());
    const Model m(rc.model, test::builtin_registry(), 3);
    EXPECT_EQ(plan.bytes, m.bytes()) << extra;
    EXPECT_EQ(plan.n_params, m.n_params()) << extra;
    EXPECT_EQ(plan.n_params_embedding, m.n_params_embedding()) << extra;
    EXPECT_EQ(plan.cost.flops_forward, m.cost().flops_forward) << extra;
    EXPECT_EQ(plan.cost.flops_backward, m.cost().flops_backward) << extra;
  }
  std::string odd = kBase;  // RoPE cannot rotate an odd head: refused by the plan, at the key
  odd.insert(odd.find("[data]"), "d_head = 7\n");
  try {
    (void)Model::plan(test::resolve_first(odd).model, test::builtin_registry());
    ADD_FAILURE() << "planned an odd RoPE head";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exp.toml:7:1: RoPE rotates pairs of features: d_head (7) must be even"),
              std::string::npos)
        << e.what();
  }
}

// A plan counts bytes and allocates nothing, not even address space: a 1M-token context, whose
// T x T attention probabilities alone are 2^48 bytes per layer (more than a process can map), is
// planned, and its tensors have no storage.
TEST(Model, ThePlanOfAnySizeAllocatesNothing) {
  const int64_t T = int64_t{1} << 20;
  const ResolvedCase rc =
      test::resolve_first("[model]\nd_model = 32\nn_layers = 2\nn_heads = 4\nseq_len = " + std::to_string(T) +
                          "\nbatch_size = 16\nattention = {type = \"causal\", kernel = \"ours\"}\n[throughput]\n");
  const Model m(rc.model, test::builtin_registry(), Model::Validating{});
  // The materializing path (kernel = "ours"; "auto" would take the CPU's tiled attention here):
  const double probs = 2.0 * 16 * 4 * static_cast<double>(T) * static_cast<double>(T) * 4;  // layers x B H T T floats
  EXPECT_GE(static_cast<double>(m.bytes()), probs);
  EXPECT_LT(static_cast<double>(m.bytes()), probs * 1.01);  // the rest is O(T), not O(T^2)
  const Param* wqkv = m.find_param("blocks.1.attn.wqkv");
  ASSERT_NE(wqkv, nullptr);
  EXPECT_FALSE(wqkv->value.defined());
  EXPECT_FALSE(wqkv->grad.defined());
  EXPECT_EQ(wqkv->value.shape(), (Shape{3 * 32, 32}));
  // The same model at T = 16: what the plan counts is what the built model allocates.
  const ResolvedCase s = test::resolve_first(kBase);
  EXPECT_EQ(Model::plan(s.model, test::builtin_registry()).bytes, Model(s.model, test::builtin_registry(), 1).bytes());
}

}  // namespace
}  // namespace model_test
}  // namespace bench
