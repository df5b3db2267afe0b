// Every kernel a model's step launches declares its traffic (kernels/tile/profile.h), so that the
// per-kernel profile has a rate and a roofline mark for each: small models of several variants
// run forward (with the per-layer probes), backward and an optimizer step under a LaunchObserver,
// on the CPU executor and on the emulated-block executor (which, standing in for a device,
// reports the materializing attention's launches one by one instead of as one composed kernel,
// and runs the fused attention core where auto takes it).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/tile/profile.h"
#include "model/model.h"
#include "support/launch_counter.h"
#include "support/toml_case.h"

namespace bench {
namespace kernel_traffic_test {
namespace {

/// The names of the outermost launches of the calling thread while it exists, and those that
/// declared no traffic.
class Recorder final : public test::ScopedLaunchObserver {
 public:
  void end(const tile::Exec&, const char* name, const tile::Traffic& t) override {
    seen.insert(name);
    if (!(t.bytes >= 0 && t.flops >= 0)) undeclared.insert(name);
  }

  std::set<std::string> seen, undeclared;
};

constexpr const char* kHead = "[model]\nd_model = 32\nn_layers = 2\nn_heads = 4\nseq_len = 16\nbatch_size = 2\n";
constexpr const char* kTail = "[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";

/// One training step of the model `model_keys` describes, on `backend` (its launches go to the
/// thread's observer).
void train_step(const std::string& model_keys, tile::Backend backend) {
  ResolvedCase rc = test::resolve_first(std::string(kHead) + model_keys + kTail);
  rc.model.backend = backend;  // set up for the target: the emulated device composes as a device
  const test::Batch b = test::batch_of(rc, 0);
  Model m(rc.model, test::builtin_registry(), 2);
  RunContext ctx;
  ctx.exec.backend = backend;
  ctx.layer_probes = true;
  OptimizerStep opt;
  opt.lr = 1e-3;
  opt.decay_lr = opt.lr;
  opt.weight_decay = 0.1;
  opt.grad_clip = 1.0;
  m.zero_grad();
  (void)m.forward(b.in.data(), b.tg.data(), ctx);
  m.backward(ctx);
  (void)m.optimizer_step(opt, ctx);
}

TEST(KernelTraffic, EveryLaunchOfAStepDeclaresItsTraffic) {
  const char* variants[] = {
      // pre-norm RMSNorm, RoPE, SwiGLU (the defaults)
      "",
      // LayerNorm in the double position, GeLU MLP, learned positions, soft-caps, z-loss, dropout;
      // the materializing attention core (auto takes the fused one on the emulated device)
      "norm = \"layernorm\"\nnorm_position = \"double\"\nffn = { type = \"mlp\", activation = \"gelu\" }\n"
      "position = \"learned\"\nattention = { type = \"causal\", softcap = 20.0, core = \"materializing\" }\n"
      "head = { type = \"lm_head\", softcap = 30.0, z_loss = 1e-4 }\n"
      "dropout_embedding = 0.1\ndropout_attention = 0.1\ndropout_residual = 0.1\n",
      // parallel block, post-norm, sinusoidal positions, a sliding window, GQA, QK-norm
      "block = \"parallel\"\nnorm_position = \"post\"\nposition = \"sinusoidal\"\nn_kv_heads = 2\n"
      "attention = { type = \"causal\", window = 4, qk_norm = \"rmsnorm\" }\n",
  };
  std::set<std::string> all;
  for (const char* v : variants) {
    for (const tile::Backend backend : {tile::Backend::kCpu, tile::Backend::kEmulated}) {
      Recorder r;
      train_step(v, backend);
      EXPECT_GT(r.seen.size(), 10u) << v;
      for (const std::string& name : r.undeclared)
        ADD_FAILURE() << name << " declares no traffic (variant: " << v << ")";
      all.insert(r.seen.begin(), r.seen.end());
    }
  }
  // The step's kernels, each found among the launches by a part of its name.
  for (const char* kernel : {"NormForward",
                             "NormBackward",
                             "ColumnSum",
                             "CrossEntropy",
                             "AdamW",
                             "SumTerms",
                             "EmbeddingForward",
                             "EmbeddingBackward",
                             "GluForward",
                             "GluBackward",
                             "GemmEpilogueRows",
                             "RopeHalf",
                             "SoftmaxForward",
                             "SoftmaxBackward",
                             "Dropout",
                             "DropoutRows",
                             "ColumnSums",
                             "Block",
                             "AdamWScalars",
                             "SumPartials",
                             "SoftcapForward",
                             "SoftcapBackward",
                             "PositionTable",
                             "gemm NT",
                             "Add",
                             "AttentionFusedForward",
                             "AttentionFusedBackward"}) {
    bool found = false;
    for (const std::string& name : all) found = found || name.find(kernel) != std::string::npos;
    EXPECT_TRUE(found) << kernel << " was not launched by any step";
  }
}

// The attention core that `core = "auto"` takes, seen in the launches of a step: the fused core on
// a device (the emulated one) in float32 and float64; the materializing core's batched launches
// there in bf16 (cuDNN and flash run on CUDA only); on the CPU the materializing core, one
// composed kernel, as before the fused core existed.
TEST(KernelTraffic, AutoTakesTheFusedCoreOnADeviceInFloat32AndFloat64) {
  struct Case {
    tile::Backend backend;
    const char* dtype;
    bool fused;
  };
  for (const Case& c :
       {Case{tile::Backend::kEmulated, "float32", true}, Case{tile::Backend::kEmulated, "float64", true},
        Case{tile::Backend::kEmulated, "bfloat16", false}, Case{tile::Backend::kCpu, "float32", false},
        Case{tile::Backend::kCpu, "float64", false}}) {
    SCOPED_TRACE(std::string(tile::target_name(tile::Exec{c.backend})) + " " + c.dtype);
    Recorder r;
    train_step(std::string("dtype = \"") + c.dtype + "\"\n", c.backend);
    const auto launched = [&](const char* part) {
      bool found = false;
      for (const std::string& name : r.seen) found = found || name.find(part) != std::string::npos;
      return found;
    };
    EXPECT_EQ(launched("AttentionFusedForward"), c.fused);
    EXPECT_EQ(launched("AttentionFusedBackward"), c.fused);
    // The materializing core's head-major copies: on a device when the fused core is not taken.
    EXPECT_EQ(launched("AttentionHeads"), c.backend == tile::Backend::kEmulated && !c.fused);
  }
}

}  // namespace
}  // namespace kernel_traffic_test
}  // namespace bench
